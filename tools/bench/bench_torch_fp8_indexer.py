"""The fp8_lightning_indexer and topk_select suites of tools/bench/bench_torch.py (kept in their own module;
bench_torch.py passes its timer and row printer in).

fp8_lightning_indexer  B=1, S=S_kv=8192, H=32, D=64, G=1, clean_logits, bf16 and e4m3 (+ per-key scales)
                       inputs. Windows as in TileOPs' FP8LightingIndexer benchmark: documents of random
                       length (1..1024 tokens), each query sees its document's keys up to itself
                       ("doc-causal", ~1/30 of the pairs), plus one dense row (every window [0, S_kv)) for
                       the MMA-bound case. Peer: the PyTorch composition in bf16 (einsum scores, relu,
                       weighted head sum in fp32, -inf outside windows; 512-query chunks) on the same
                       tensors. Ours is checked on sampled rows against an fp32 evaluation of SPEC.md §2.3
                       (torch's e4m3 casts; inputs stay below 448): -inf pattern exact, normalised squared
                       error <= 1e-3. Figures: ms, GB/s of the logits write (S S_kv G 4 bytes / time; the
                       write is the floor of this op), TFLOP/s over the visible pairs (2 H D per pair).
                       TileOPs' published H200 figure for its FP8 indexer: 0.163 ms.
topk_select            B=1, S=8192 rows, S_kv = 8192 and 32768, topk = 2048, G = 1, fp32 randn scores,
                       without windows and with causal windows (query s sees [0, s + 1 + S_kv - S)).
                       Peer: torch.topk on the same scores (-inf outside the window, as a masked copy
                       made outside the timed region). Ours checked by SPEC.md §1.9 on sampled rows
                       (sorted scores equal torch.topk's, exactly). GB/s = scores read + indexes written.
"""
from __future__ import annotations

import torch

from bench_rows import add_with_ratio, per_second, result_row


def _doc_causal_windows(S, S_kv, gen):
    ks = torch.empty(S, dtype=torch.int32)
    ke = torch.empty(S, dtype=torch.int32)
    off = S_kv - S
    s = 0
    while s < S:
        n = int(torch.randint(1, 1025, (1,), generator=gen))
        for i in range(s, min(S, s + n)):
            ks[i] = max(s + off, 0)
            ke[i] = i + off + 1
        s += n
    return ks, ke


def _e4m3(x):
    return x.to(torch.float8_e4m3fn)


def _check_rows(logits, q8, k8, kappa, w, ks, ke, rows):
    """Sampled rows against an fp32 evaluation of §2.3 (G = 1): (-inf pattern ok, worst NSE)."""
    ok, worst = True, 0.0
    S_kv = logits.shape[2]
    for s in rows:
        lo = min(max(int(ks[s]), 0), S_kv)
        hi = min(max(int(ke[s]), lo), S_kv)
        got = logits[0, s, :, 0].float()
        outside = torch.ones(S_kv, dtype=torch.bool, device=logits.device)
        outside[lo:hi] = False
        if not bool(torch.all(torch.isneginf(got[outside]))):
            ok = False
        if hi > lo:
            dots = torch.einsum("hd,td->ht", q8[0, s].float(), k8[0, lo:hi, 0].float())
            ref = kappa[0, lo:hi, 0] * (w[s][:, None] * dots.clamp_min(0)).sum(0)
            d = got[lo:hi] - ref
            den = float((ref * ref).sum())
            nse = float((d * d).sum()) / den if den > 0 else float((d * d).sum())
            worst = max(worst, nse)
            if not nse <= 1e-3:
                ok = False
    return ok, worst


def run_fp8_indexer(rt, args, bench, add_row):
    dev = "cuda"
    B, S, S_kv, H, D, G = 1, 8192, 8192, 32, 64, 1
    gen = torch.Generator().manual_seed(11)
    q = torch.randn(B, S, H, D, generator=gen).to(dev)
    k = torch.randn(B, S_kv, G, D, generator=gen).to(dev)
    w = (torch.randn(S, H, generator=gen) * 0.2).to(dev)
    qb, kb = q.bfloat16(), k.bfloat16()
    q8, k8e = _e4m3(q), _e4m3(k)
    scale = (torch.rand(B, S_kv, G, generator=gen) * 0.5 + 0.75).to(dev)
    logits = torch.empty(B, S, S_kv, G, dtype=torch.float32, device=dev)
    out_bytes = B * S * S_kv * G * 4
    rows = sorted(set([0, 1, 511, 4096, S - 2, S - 1] + [int(x) for x in torch.randint(0, S, (26,), generator=gen)]))
    for wname in ("doc-causal", "dense"):
        if wname == "dense":
            ks = torch.zeros(S, dtype=torch.int32)
            ke = torch.full((S,), S_kv, dtype=torch.int32)
        else:
            ks, ke = _doc_causal_windows(S, S_kv, gen)
        pairs = float((ke.clamp(max=S_kv) - ks.clamp(min=0)).clamp(min=0).sum()) * B
        flops = 2.0 * pairs * H * D
        ks_d, ke_d = ks.to(dev), ke.to(dev)
        shape = f"fp8 indexer S{S} Skv{S_kv} H{H} D{D} G{G} {wname}"
        params = {"B": B, "S": S, "S_kv": S_kv, "H": H, "D": D, "G": G, "windows": wname, "pairs": pairs,
                  "flops": flops, "logits_bytes": out_bytes}
        case_rows = []

        def rate(r, t):
            r["gbs"] = per_second(out_bytes, t, 1e9)
            r["tflops_visible"] = per_second(flops, t, 1e12)

        def row(impl, t=None, note="", error=None, extra=None):
            case_rows.append(result_row("fp8_lightning_indexer", shape, impl, params, "torch bf16 composition", t,
                                        note, error, extra, rate=rate))

        for dtype, with_scale in (("bf16", False), ("e4m3", True), ("e4m3", False)):
            impl = f"attnjit {dtype}{' +scale' if with_scale else ''}"
            if rt is None:
                row(impl, error=args.rt_error)
                continue
            try:
                tensors = {"index_q": qb if dtype == "bf16" else q8, "index_k": kb if dtype == "bf16" else k8e,
                           "weights": w, "cu_seqlen_ks": ks_d, "cu_seqlen_ke": ke_d, "logits": logits}
                if with_scale:
                    tensors["index_k_scale"] = scale
                plan = rt.plan("fp8_lightning_indexer", {}, tensors)
                call = plan.bind(tensors)
                logits.fill_(float("nan"))
                call()
                torch.cuda.synchronize()
                if dtype == "bf16":
                    qq = _e4m3(qb.float())
                    sigma = kb.float().abs().amax(dim=3).clamp_min(1e-4) / 448.0
                    kk = _e4m3(kb.float() / sigma[..., None])
                    kap = sigma
                else:
                    qq, kk = q8, k8e
                    kap = scale if with_scale else torch.ones(B, S_kv, G, device=dev)
                ok, nse = _check_rows(logits, qq, kk, kap, w, ks, ke, rows)
                t = bench(call, args.min_reps)
                row(impl, t, f"{out_bytes / (t['ms'] * 1e-3) / 1e9:.0f} GB/s logits write, "
                    f"{flops / (t['ms'] * 1e-3) / 1e12:.1f} TFLOP/s visible; TileOPs H200: 0.163 ms",
                    extra={"check": "ok" if ok else "WRONG", "worst_nse": nse})
                plan.close()
            except Exception as e:  # noqa: BLE001
                row(impl, error=f"{type(e).__name__}: {e}")

        # Peer: bf16 einsum composition, 512-query chunks.
        def peer():
            pos = torch.arange(S_kv, device=dev)
            for c0 in range(0, S, 512):
                c1 = min(S, c0 + 512)
                sc = torch.einsum("bshd,btd->bsht", qb[:, c0:c1], kb[:, :, 0])
                lg = (sc.float().relu() * w[None, c0:c1, :, None]).sum(2)
                mask = (pos[None, :] >= ks_d[c0:c1, None]) & (pos[None, :] < ke_d[c0:c1, None])
                logits[:, c0:c1, :, 0] = lg.masked_fill(~mask[None], float("-inf"))

        try:
            peer()
            torch.cuda.synchronize()
            t = bench(peer, args.min_reps)
            row("torch bf16 composition", t, "einsum (bf16) + relu + weighted head sum (fp32) + mask")
        except Exception as e:  # noqa: BLE001
            row("torch bf16 composition", error=f"{type(e).__name__}: {e}")
        peer_ms = next((r["ms"] for r in case_rows if r["impl"].startswith("torch") and not r.get("error")), None)
        add_with_ratio(case_rows, peer_ms, add_row)
        torch.cuda.empty_cache()


def run_topk_select(rt, args, bench, add_row):
    dev = "cuda"
    B, S, topk, G = 1, 8192, 2048, 1
    gen = torch.Generator(device=dev).manual_seed(13)
    for S_kv in (8192, 32768):
        score = torch.randn(B, S, S_kv, G, device=dev, generator=gen)
        out = torch.empty(B, S, G, topk, dtype=torch.int32, device=dev)
        rows = sorted(set([0, 1, 2047, 2048, S // 2, S - 1] + [int(x) for x in torch.randint(0, S, (26,))]))
        for windowed in (False, True):
            shape = f"topk_select B{B} S{S} Skv{S_kv} k{topk} {'causal windows' if windowed else 'no window'}"
            nbytes = B * S * S_kv * G * 4 + B * S * G * topk * 4
            params = {"B": B, "S": S, "S_kv": S_kv, "G": G, "topk": topk, "windowed": windowed, "bytes": nbytes}
            case_rows = []
            starts = ends = None
            masked = score
            if windowed:
                starts = torch.zeros(B, S, dtype=torch.int32, device=dev)
                ends = (torch.arange(S, device=dev, dtype=torch.int32) + 1 + (S_kv - S))[None, :].contiguous()
                pos = torch.arange(S_kv, device=dev)
                masked = score.masked_fill((pos[None, None, :] >= ends[:, :, None])[..., None], float("-inf"))

            def rate(r, t):
                r["gbs"] = per_second(nbytes, t, 1e9)

            def row(impl, t=None, note="", error=None, extra=None):
                case_rows.append(result_row("topk_select", shape, impl, params, "torch.topk", t, note, error, extra,
                                            rate=rate))

            ref_vals = torch.topk(masked[0, rows, :, 0], topk, dim=1).values
            if rt is None:
                row("attnjit topk_select", error=args.rt_error)
            else:
                try:
                    tensors = {"index_score": score, "indexes": out}
                    if windowed:
                        tensors["starts"] = starts
                        tensors["ends"] = ends
                    plan = rt.plan("topk_select", {"topk": topk}, tensors)
                    call = plan.bind(tensors)
                    out.fill_(0x7FFFFFFF)
                    call()
                    torch.cuda.synchronize()
                    ok = True
                    for i, s in enumerate(rows):
                        idx = out[0, s, 0].long()
                        valid = idx[idx >= 0]
                        n = min(topk, int(ends[0, s]) if windowed else S_kv)
                        if valid.numel() != n or valid.unique().numel() != n:
                            ok = False
                            continue
                        got = torch.sort(score[0, s, valid, 0], descending=True).values
                        if not torch.equal(got, ref_vals[i, :n]):
                            ok = False
                    t = bench(call, args.min_reps)
                    row("attnjit topk_select", t, f"{nbytes / (t['ms'] * 1e-3) / 1e9:.0f} GB/s",
                        extra={"check": "ok" if ok else "WRONG"})
                    plan.close()
                except Exception as e:  # noqa: BLE001
                    row("attnjit topk_select", error=f"{type(e).__name__}: {e}")
            try:
                peer = lambda: torch.topk(masked[..., 0], topk, dim=2, sorted=False)  # noqa: E731
                peer()
                torch.cuda.synchronize()
                t = bench(peer, args.min_reps)
                row("torch.topk", t, "sorted=False, on the masked scores")
            except Exception as e:  # noqa: BLE001
                row("torch.topk", error=f"{type(e).__name__}: {e}")
            peer_ms = next((r["ms"] for r in case_rows if r["impl"] == "torch.topk" and not r.get("error")), None)
            add_with_ratio(case_rows, peer_ms, add_row)
        del score, out
        torch.cuda.empty_cache()
