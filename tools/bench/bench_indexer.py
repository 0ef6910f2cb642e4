"""The indexer family's lightning_indexer suite of tools/bench/bench_torch.py (vs the PyTorch composition);
the fp8_lightning_indexer and topk_select suites are in bench_torch_fp8_indexer.py.
"""
from __future__ import annotations

import math

import torch
from bench_rows import add_with_ratio, result_row
from bench_common import GEMM_CEILING_TFLOPS, add_row, bench, tflops_rate


# ----------------------------------------------------------------------------------------------------
# lightning_indexer suite

def torch_lightning_indexer(q, k, w, topk, causal, chunk=256):
    """The PyTorch composition peer: per chunk of query rows, einsum scores (bf16 MMAs, fp32 out), relu,
    weighted head sum in fp32, causal mask, topk; -1 where a row has fewer candidates. q [1,T,H,D],
    k [1,S,D], w [1,T,H] -> [1,T,topk] int32 (chunked so that the [chunk, H, S] scores fit in memory)."""
    T, H, D = q.shape[1], q.shape[2], q.shape[3]
    S = k.shape[1]
    out = torch.full((1, T, topk), -1, dtype=torch.int32, device=q.device)
    scale = 1.0 / math.sqrt(H * D)
    for t0 in range(0, T, chunk):
        t1 = min(T, t0 + chunk)
        hi = min(S, t1) if causal else S
        if hi == 0:
            continue
        s = torch.einsum("chd,sd->chs", q[0, t0:t1], k[0, :hi]).float().relu_()
        s = torch.einsum("chs,ch->cs", s, w[0, t0:t1].float()) * scale
        if causal:
            rows = torch.arange(t0, t1, device=q.device)[:, None]
            s.masked_fill_(torch.arange(hi, device=q.device)[None, :] > rows, float("-inf"))
        kk = min(topk, hi)
        vals, idx = s.topk(kk, dim=-1)
        out[0, t0:t1, :kk] = torch.where(vals == float("-inf"), -1, idx).to(torch.int32)
    return out


def indexer_rows_check(q, k, w, got, topk, causal, rows):
    """SPEC.md §1.9 on sampled rows against fp32 scores: counts, trailing -1, distinct candidates, sorted
    scores within 1e-4 * max|score| + 1e-6. Returns (ok, worst gap / tol)."""
    H, D = q.shape[2], q.shape[3]
    S = k.shape[1]
    worst = 0.0
    for t in rows:
        n = min(t + 1, S) if causal else S
        sc = (torch.einsum("hd,sd->hs", q[0, t].float(), k[0, :n].float()).relu() * w[0, t].float()[:, None]).sum(0)
        sc = sc / math.sqrt(H * D)
        e = got[0, t]
        m = min(topk, n)
        valid = e[:m]
        if (valid < 0).any() or (e[m:] != -1).any() or (valid >= n).any() or valid.unique().numel() != m:
            return False, float("inf")
        tol = 1e-4 * sc.abs().max().item() + 1e-6
        a = sc[valid.long()].sort(descending=True).values
        b = sc.topk(m).values
        gap = (a - b).abs().max().item() if m else 0.0
        worst = max(worst, gap / tol)
        if gap > tol:
            return False, worst
    return True, worst


def run_lightning_indexer(rt, T, causal, args, H=64, D=128, topk=2048):
    torch.manual_seed(5)
    dev = "cuda"
    q = torch.randn(1, T, H, D, dtype=torch.bfloat16, device=dev)
    k = torch.randn(1, T, D, dtype=torch.bfloat16, device=dev)
    w = torch.randn(1, T, H, dtype=torch.bfloat16, device=dev)
    idx = torch.empty(1, T, topk, dtype=torch.int32, device=dev)
    pairs = T * (T + 1) / 2 if causal else float(T) * T
    flops = 2.0 * pairs * H * D  # the score MMAs
    name = f"indexer bf16 T{T} H{H} D{D} k{topk} {'causal' if causal else 'full'}"
    params = {"T": T, "S": T, "H": H, "D": D, "topk": topk, "causal": causal, "flops": flops}
    sample = sorted(set([0, 1, T // 3, T // 2, T - 2, T - 1] + [int(x) for x in torch.randint(0, T, (26,))]))
    case_rows = []

    def row(impl, t=None, note="", error=None, extra=None):
        case_rows.append(result_row("lightning_indexer", name, impl, params, "torch composition", t, note, error,
                                    extra, rate=tflops_rate(flops)))

    # The default backend ('auto'), then the hopper kernel explicitly (wgmma scores, TMA K ring; sm_90a),
    # whose sampled rows must also hold the same index sets as the default's.
    first_rows = None
    runs = [("attnjit lightning_indexer", {}, rt), ("attnjit lightning_indexer (hopper)", {"backend": "hopper"}, rt)]
    runs += [(f"attnjit lightning_indexer [{n}]", {}, r) for n, r in args.ab_rts]  # --ab-lib builds, same tensors
    for impl, extra_cfg, run_rt in runs:
        if run_rt is None:
            row(impl, error=args.rt_error)
            continue
        try:
            tensors = {"q": q, "k": k, "weights": w, "indices": idx}
            plan = run_rt.plan("lightning_indexer", {"topk": topk, "causal": causal, **extra_cfg}, tensors)
            call = plan.bind(tensors)
            idx.fill_(0x7FFFFFFF)
            call()
            torch.cuda.synchronize()
            ok, gap = indexer_rows_check(q, k, w, idx, topk, causal, sample)
            rows_now = [sorted(idx[0, i].tolist()) for i in sample]
            extra = {"check": "ok" if ok else "WRONG", "worst_gap_over_tol": gap}
            if first_rows is None:
                first_rows = rows_now
            else:
                same = sum(a == b for a, b in zip(first_rows, rows_now))
                extra["same_sets_as_default"] = f"{same}/{len(sample)} sampled rows"
            t = bench(call, args.min_reps)
            row(impl, t, f"{100 * flops / (t['ms'] * 1e-3) / 1e12 / GEMM_CEILING_TFLOPS:.1f}% of the MMA ceiling",
                extra=extra)
            plan.close()
        except Exception as e:  # noqa: BLE001
            row(impl, error=f"{type(e).__name__}: {e}")
    try:
        peer = lambda: torch_lightning_indexer(q, k, w, topk, causal)  # noqa: E731
        got = peer()
        torch.cuda.synchronize()
        ok, gap = indexer_rows_check(q, k, w, got, topk, causal, sample)
        t = bench(peer, args.min_reps)
        row("torch composition", t, "einsum (bf16) + relu + weighted head sum (fp32) + topk, 256-row chunks",
            extra={"check": "ok" if ok else f"differs (gap/tol {gap:.1f})", "worst_gap_over_tol": gap})
    except Exception as e:  # noqa: BLE001
        row("torch composition", error=f"{type(e).__name__}: {e}")
    peer_ms = next((r["ms"] for r in case_rows if r["impl"] == "torch composition" and not r.get("error")), None)
    add_with_ratio(case_rows, peer_ms, add_row)
