"""The latent-cache family's suites of tools/bench/bench_torch.py: mla_decode (multi-head latent attention
decode over a latent cache k | k_pe, contiguous or paged) and dsa_decode (DeepSeek sparse attention decode:
each query row attends to the cache rows its index list names), each vs a PyTorch composition in the same
process, on the same tensors.

Rows per case: `attnjit portable` and `attnjit hopper` (one plan per explicit backend; a backend that
raises ATTNJIT_UNSUPPORTED gives a row saying so; each carries the torch peer's peer_us, peer_tflops, peer_gbs), `torch` (the named peer: cat / gather, fp32 logits
through torch.bmm, fp32 softmax, bf16 probabilities @ V) and, for mla_decode, `sdpa <BACKEND>`
(scaled_dot_product_attention with the heads of a KV head as its query rows, the first backend that
accepts the call). Every output is checked against an fp32 reference (err_ref) and ours against the
torch peer's output (err_peer < 2e-2, else WRONG) before timing. Peers are timed from the op's inputs
(the concatenation, and for a paged cache the gather through block_table, inside the timed region); the
peer row's prep_ms is that preparation alone.

Figures per row: us (and ms), tflops, gbs (of cache read), their fractions of the ceilings. Counts, per call
(see docs/performance.md):
  mla_decode  FLOPs = 2 B S_q H N_kv (D + PE) + 2 B S_q H N_kv D; cache bytes = B N_kv H_kv (D + PE) * 2.
  dsa_decode  over the valid selected slots V (all B S H_kv topk here): FLOPs = 2 g V (D + tail) + 2 g V D,
              g = H / H_kv, i.e. 2 B S H topk (D + tail) + 2 B S H topk D; cache bytes = V (D + tail) * 2.
GB/s credits every row with the same cache bytes (the peers read and write more).

The case lists and the counts need no torch; `python3 tools/bench/bench_mla.py --self-test [--lib PATH]
[--cli build/bin/attnjit]` checks them (and that `attnjit bench`'s suites list the same cases and counts).
Where torch is importable (a CPU build will do) it also runs every full-size case's inputs and
compositions on the meta device, checks the compositions against a float64 loop and attnjit's CPU
reference on tiny problems, and runs the suites' row logic end to end on tiny CPU cases.
"""
from __future__ import annotations

import math
import os
import sys
import time
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_rows import add_with_ratio, per_second, result_row  # noqa: E402

try:
    import torch
    import torch.nn.functional as F
    import bench_common
    from bench_common import (CHECK_TOL, COPY_CEILING_GBS, GEMM_CEILING_TFLOPS, SDPBackend, add_row, output_fields,
                              rel_l2, sdpa_kernel)
except ImportError as _e:  # the case lists, the counts and their self-test need no torch
    torch = F = bench_common = None
    _TORCH_ERROR = _e

# The device the suites allocate on and the attnjit configs they time ((label, config) pairs). The self-test
# points both at the CPU and the reference implementation to run the row logic without a GPU.
DEVICE = "cuda"
OUR_CONFIGS = (("attnjit portable", {"backend": "portable"}), ("attnjit hopper", {"backend": "hopper"}))


# ----------------------------------------------------------------------------------------------------
# Cases and counts (no torch)

def mla_cases(quick):
    """bf16, H_kv 1, D 512, PE 64, one query token per request: B 64 / 128 x N_kv 4096 / 8192 at H 128;
    B 64 at H 16 (memory-bound); B 1 at N_kv 65536 (split-KV); paged (page 64, shuffled table) B 64 N_kv 4096.
    --quick: one of each kind (B 64 N_kv 4096 at H 128 and 16, B 1 N_kv 65536, the paged one)."""
    base = dict(S_q=1, H_kv=1, D=512, PE=64, PS=0)
    cases = [dict(base, B=B, H=128, N_kv=N) for B in (64, 128) for N in (4096, 8192)]
    cases += [dict(base, B=64, H=16, N_kv=N) for N in (4096, 8192)]
    cases.append(dict(base, B=1, H=128, N_kv=65536))
    cases.append(dict(base, B=64, H=128, N_kv=4096, PS=64))
    if quick:
        keep = {(64, 128, 4096, 0), (64, 16, 4096, 0), (1, 128, 65536, 0), (64, 128, 4096, 64)}
        cases = [c for c in cases if (c["B"], c["H"], c["N_kv"], c["PS"]) in keep]
    return cases


def mla_name(c):
    s = f"mla B{c['B']} H{c['H']}/{c['H_kv']} D{c['D']}+{c['PE']} N{c['N_kv']}"
    return s + (f" paged PS{c['PS']}" if c["PS"] else "")


def mla_shapes(c):
    """The call's tensor shapes (docs/ops/mla_decode.md). Paged: pools of B * W pages, W = ceil(N_kv / PS)."""
    B, H, H_kv, D, PE, N = c["B"], c["H"], c["H_kv"], c["D"], c["PE"], c["N_kv"]
    s = {"q": (B, H, D), "q_pe": (B, H, PE), "o": (B, H, D)}
    if c["PS"]:
        W = -(-N // c["PS"])
        s.update(k=(B * W, c["PS"], H_kv, D), k_pe=(B * W, c["PS"], H_kv, PE), block_table=(B, W),
                 cache_seqlens=(B,))
    else:
        s.update(k=(B, N, H_kv, D), k_pe=(B, N, H_kv, PE))
    return s


def mla_flops(c):
    """2 B S_q H N_kv (D + PE) for the logits + 2 B S_q H N_kv D for P @ V."""
    rows = c["B"] * c["S_q"] * c["H"] * c["N_kv"]
    return 2 * rows * (c["D"] + c["PE"]) + 2 * rows * c["D"]


def mla_cache_bytes(c, elem=2):
    """The latent cache read once: B N_kv H_kv (D + PE) elements of `elem` bytes."""
    return c["B"] * c["N_kv"] * c["H_kv"] * (c["D"] + c["PE"]) * elem


def dsa_cases(quick):
    """bf16, S 1, H 128, H_kv 1, D 512, dim_tail 64, topk 2048, S_kv 65536, causal with q_start_index_s =
    S_kv - 1 (the query is the cache's last token, so every index is valid), stride_kv 1; B 64 and 8.
    --quick: B 8."""
    base = dict(S=1, H=128, H_kv=1, D=512, tail=64, topk=2048, S_kv=65536, stride_kv=1, causal=True)
    cases = [dict(base, B=B) for B in (64, 8)]
    return [c for c in cases if c["B"] == 8] if quick else cases


def dsa_name(c):
    return (f"dsa B{c['B']} S{c['S']} H{c['H']}/{c['H_kv']} D{c['D']}+{c['tail']} topk{c['topk']} "
            f"S_kv{c['S_kv']}{' causal' if c['causal'] else ''}")


def dsa_shapes(c):
    B, S, H, H_kv, E = c["B"], c["S"], c["H"], c["H_kv"], c["D"] + c["tail"]
    return {"q": (B, S, H, E), "kv": (B, c["S_kv"], H_kv, E), "indices": (B, S, H_kv, c["topk"]),
            "o": (B, S, H, c["D"])}


def dsa_config(c):
    return {"dim_tail": c["tail"], "stride_kv": c["stride_kv"], "q_start_index_s": c["S_kv"] - 1,
            "is_causal": c["causal"]}


def dsa_valid_slots_all(c):
    """Valid slots when every index is valid: B S H_kv topk."""
    return c["B"] * c["S"] * c["H_kv"] * c["topk"]


def dsa_flops(c, valid_slots=None):
    """Over the valid selected slots V: 2 g V (D + tail) + 2 g V D, g = H / H_kv."""
    v = dsa_valid_slots_all(c) if valid_slots is None else valid_slots
    g = c["H"] // c["H_kv"]
    return 2 * g * v * (c["D"] + c["tail"]) + 2 * g * v * c["D"]


def dsa_cache_bytes(c, valid_slots=None, elem=2):
    """The selected rows read: V (D + tail) elements of `elem` bytes."""
    v = dsa_valid_slots_all(c) if valid_slots is None else valid_slots
    return v * (c["D"] + c["tail"]) * elem


# ----------------------------------------------------------------------------------------------------
# The PyTorch compositions (the peers) and the fp32 references

_BMM_OUT_DTYPE = {}  # device type -> whether torch.bmm(..., out_dtype=torch.float32) works on bf16 inputs


def bmm_fp32(a, b):
    """a @ b with fp32 logits: bf16 inputs with fp32 output where torch.bmm has out_dtype (CUDA), else both
    cast to fp32 first."""
    dev = a.device.type
    if dev not in _BMM_OUT_DTYPE:
        try:
            z = torch.zeros(1, 1, 1, dtype=torch.bfloat16, device=a.device)
            _BMM_OUT_DTYPE[dev] = torch.bmm(z, z, out_dtype=torch.float32).dtype == torch.float32
        except (TypeError, RuntimeError, NotImplementedError):
            _BMM_OUT_DTYPE[dev] = False
    if _BMM_OUT_DTYPE[dev]:
        return torch.bmm(a, b, out_dtype=torch.float32)
    return torch.bmm(a.float(), b.float())


def mla_gather(k, k_pe, block_table, n_kv):
    """Contiguous [B, N_kv, H_kv, *] caches from the pools through block_table (logical page p of request b
    is pool page block_table[b, p])."""
    idx = block_table.long()
    B, W = idx.shape
    _, PS, H_kv, D = k.shape
    kc = k[idx].reshape(B, W * PS, H_kv, D)[:, :n_kv]
    kpc = k_pe[idx].reshape(B, W * PS, H_kv, k_pe.shape[-1])[:, :n_kv]
    return kc, kpc


def mla_prep(q, q_pe, k, k_pe, block_table=None, n_kv=None):
    """The peers' preparation: gather (paged), then q | q_pe and k | k_pe. Returns qc [B, H, E],
    kc [B, N_kv, H_kv, E] and v = k [B, N_kv, H_kv, D]."""
    if block_table is not None:
        k, k_pe = mla_gather(k, k_pe, block_table, n_kv)
    return torch.cat([q, q_pe], dim=-1), torch.cat([k, k_pe], dim=-1), k


def mla_torch(q, q_pe, k, k_pe, block_table=None, n_kv=None, precise=False):
    """mla_decode as a PyTorch composition: l = (q | q_pe) . (k | k_pe)^T / sqrt(D + PE) in fp32
    (torch.bmm per KV head over its g = H / H_kv heads), fp32 softmax, then P @ k (bf16 P, or fp32 with
    precise, which returns fp32)."""
    qc, kc, v = mla_prep(q, q_pe, k, k_pe, block_table, n_kv)
    B, H, E = qc.shape
    N, H_kv, D = kc.shape[1], kc.shape[2], v.shape[-1]
    g = H // H_kv
    kh = kc.permute(0, 2, 1, 3).reshape(B * H_kv, N, E)  # a view when H_kv == 1
    vh = v.permute(0, 2, 1, 3).reshape(B * H_kv, N, D)
    qh = qc.reshape(B * H_kv, g, E)  # head h belongs to KV head h // g
    if precise:
        qh, kh, vh = qh.float(), kh.float(), vh.float()
        s = torch.bmm(qh, kh.transpose(1, 2))
    else:
        s = bmm_fp32(qh, kh.transpose(1, 2))
    p = torch.softmax(s.mul_(1.0 / math.sqrt(E)), dim=-1)
    o = torch.bmm(p if precise else p.to(q.dtype), vh)
    return o.reshape(B, H, D)


def mla_sdpa_inputs(q, q_pe, k, k_pe, block_table=None, n_kv=None):
    """SDPA's query [B, H_kv, g, E] (the g heads of a KV head as its query rows: they share the keys, no
    mask), key [B, H_kv, N_kv, E], value [B, H_kv, N_kv, D]."""
    qc, kc, v = mla_prep(q, q_pe, k, k_pe, block_table, n_kv)
    B, H, E = qc.shape
    H_kv = kc.shape[2]
    return qc.reshape(B, H_kv, H // H_kv, E), kc.permute(0, 2, 1, 3), v.permute(0, 2, 1, 3)


def dsa_valid(indices, S_kv, stride_kv, q_start, causal):
    """SPEC.md §2.18: slot x valid iff 0 <= x < S_kv and (not causal or (x + 1) stride_kv <= q_pos + 1)."""
    x = indices.long()
    valid = (x >= 0) & (x < S_kv)
    if causal:
        q_pos = q_start + torch.arange(indices.shape[1], device=indices.device).view(1, -1, 1, 1)
        valid &= (x + 1) * stride_kv <= q_pos + 1
    return valid


def dsa_torch(q, kv, indices, dim_tail, stride_kv, q_start, causal, sm_scale=None, precise=False):
    """dsa_decode as a PyTorch composition: the selected rows gathered with torch.gather (invalid slots read
    row 0 and are masked), fp32 logits over all D + dim_tail channels (torch.bmm), fp32 softmax (rows with no
    valid slot: zeros), P @ V with V = the rows' first D channels."""
    B, S, H, E = q.shape
    S_kv, H_kv = kv.shape[1], kv.shape[2]
    K = indices.shape[-1]
    D, g = E - dim_tail, H // H_kv
    scale = sm_scale if sm_scale is not None else 1.0 / math.sqrt(E)
    valid = dsa_valid(indices, S_kv, stride_kv, q_start, causal)
    r = torch.arange(H_kv, device=q.device).view(1, 1, -1, 1)
    flat = (torch.where(valid, indices.long(), 0) * H_kv + r).reshape(B, S * H_kv * K, 1)
    sel = torch.gather(kv.reshape(B, S_kv * H_kv, E), 1, flat.expand(B, S * H_kv * K, E))
    sel = sel.view(B * S * H_kv, K, E)
    qh = q.reshape(B * S * H_kv, g, E)  # head h belongs to KV head h // g
    if precise:
        sel, qh = sel.float(), qh.float()
        s = torch.bmm(qh, sel.transpose(1, 2))
    else:
        s = bmm_fp32(qh, sel.transpose(1, 2))
    s.mul_(scale).masked_fill_(~valid.reshape(B * S * H_kv, 1, K), float("-inf"))
    p = torch.softmax(s, dim=-1).nan_to_num_(0.0)
    o = torch.bmm(p if precise else p.to(q.dtype), sel[..., :D])
    return o.reshape(B, S, H, D)


def _no_tf32():
    class _Ctx:
        def __enter__(self):
            self.prev = torch.backends.cuda.matmul.allow_tf32
            torch.backends.cuda.matmul.allow_tf32 = False

        def __exit__(self, *exc):
            torch.backends.cuda.matmul.allow_tf32 = self.prev
    return _Ctx()


# ----------------------------------------------------------------------------------------------------
# Inputs

def mla_inputs(c, device, seed=777):
    """torch.randn q, q_pe, k, k_pe (bf16), o; paged: pools of B * W pages in a shuffled block_table and
    cache_seqlens = N_kv."""
    torch.manual_seed(seed)
    dt = torch.bfloat16
    s = mla_shapes(c)
    t = {n: torch.randn(*s[n], dtype=dt, device=device) for n in ("q", "q_pe", "k", "k_pe")}
    t["o"] = torch.empty(*s["o"], dtype=dt, device=device)
    if c["PS"]:
        B, W = s["block_table"]
        t["block_table"] = torch.randperm(B * W, device=device).view(B, W).to(torch.int32).contiguous()
        t["cache_seqlens"] = torch.full((B,), c["N_kv"], dtype=torch.int32, device=device)
    return t


def dsa_inputs(c, device, seed=999):
    """torch.randn q, kv (bf16), o; indices: topk distinct random positions in [0, S_kv) per (b, s, r), in
    random order (the top-k of uniform noise)."""
    torch.manual_seed(seed)
    dt = torch.bfloat16
    s = dsa_shapes(c)
    t = {"q": torch.randn(*s["q"], dtype=dt, device=device), "kv": torch.randn(*s["kv"], dtype=dt, device=device),
         "o": torch.empty(*s["o"], dtype=dt, device=device)}
    B, S, H_kv, K = s["indices"]
    noise = torch.rand(B * S * H_kv, c["S_kv"], device=device)
    idx = noise.topk(K, dim=-1, sorted=False).indices
    t["indices"] = idx[:, torch.randperm(K, device=device)].to(torch.int32).view(B, S, H_kv, K).contiguous()
    return t


# ----------------------------------------------------------------------------------------------------
# Rows

def _sync():
    if DEVICE == "cuda":
        torch.cuda.synchronize()


def _rate(flops, cache_bytes):
    """A result_row rate: TFLOP/s and GB/s of cache read, and their fractions of the ceilings."""
    def rate(r, t):
        r["us"] = t["ms"] * 1e3
        r["tflops"] = per_second(flops, t, 1e12)
        r["frac_of_gemm_ceiling"] = r["tflops"] / GEMM_CEILING_TFLOPS
        r["gbs"] = per_second(cache_bytes, t, 1e9)
        r["frac_of_copy_ceiling"] = r["gbs"] / COPY_CEILING_GBS
        return f"{r['us']:.1f} us, {r['gbs']:.0f} GB/s cache read; "
    return rate


def _is_unsupported(e):
    return getattr(e, "status_name", None) == "ATTNJIT_UNSUPPORTED"


def _time_ours(rt, op, tensors, out, peer_out, row, args, configs):
    """One row per (label, config): plan, poison o with NaN, one call, check vs the peer, then time. Every
    --ab-lib build repeats the configs on the same tensors ("<label> [<name>]")."""
    runs = [(label, cfg, rt) for label, cfg in configs]
    runs += [(f"{label} [{n}]", cfg, ab_rt) for n, ab_rt in getattr(args, "ab_rts", []) for label, cfg in configs]
    for label, cfg, rt in runs:
        if rt is None:
            row(label, error=args.rt_error)
            continue
        plan = None
        try:
            t0 = time.perf_counter()
            plan = rt.plan(op, cfg, tensors)
            plan_s = time.perf_counter() - t0
            call = plan.bind(tensors)
            out.fill_(float("nan"))  # poison: an unwritten element shows as NaN
            call()
            _sync()
            got = out.clone()
            extra = {"config": cfg, "plan_create_s": plan_s}
            if peer_out is not None:
                extra["err_peer"] = rel_l2(got, peer_out)
                nan = int(torch.isnan(got).sum().item())
                extra["check"] = "ok" if extra["err_peer"] < CHECK_TOL and not nan else "WRONG"
            t = bench_common.bench(call, args.min_reps)
            row(label, t, got, f"plan_create {plan_s * 1e3:.0f} ms (incl. JIT)", extra=extra)
        except Exception as e:  # noqa: BLE001
            if _is_unsupported(e):
                row(label, error=f"ATTNJIT_UNSUPPORTED: {e.message}", extra={"config": cfg, "check": "unsupported"})
            else:
                row(label, error=f"{type(e).__name__}: {e}", extra={"config": cfg})
        finally:
            if plan is not None:
                plan.close()


def _finish(case_rows, peer_impl):
    """Ratios (peer time / row time) against the named peer (ratio) and, where an SDPA row ran, against it
    (ratio_sdpa, also at the head of the note); every attnjit row also carries the named peer's figures
    (peer_us, peer_tflops, peer_gbs); ours first, then the peers."""
    def timed(pred):
        return next((r for r in case_rows if pred(r["impl"]) and r.get("ms") and not r.get("error")), None)

    peer_row, sdpa_row = timed(lambda impl: impl == peer_impl), timed(lambda impl: impl.startswith("sdpa "))
    peer_ms = peer_row["ms"] if peer_row else None
    sdpa_ms = sdpa_row["ms"] if sdpa_row else None
    for r in case_rows:
        if peer_row is not None and r["impl"].startswith("attnjit"):
            r.update(peer_us=peer_row["us"], peer_tflops=peer_row["tflops"], peer_gbs=peer_row["gbs"])
        if sdpa_ms and r.get("ms") and not r.get("error") and not r["impl"].startswith("sdpa "):
            r["ratio_sdpa"] = sdpa_ms / r["ms"]
            r["note"] = f"{r['ratio_sdpa']:.2f}x sdpa; " + r["note"]
    case_rows.sort(key=lambda r: 0 if r["impl"].startswith("attnjit") else 1)  # ours first, then the peers
    add_with_ratio(case_rows, peer_ms, add_row)


def run_mla_case(rt, c, args):
    """One mla_decode case: the torch peer and the fp32 reference, SDPA, then attnjit per backend."""
    t = mla_inputs(c, DEVICE)
    name = mla_name(c)
    flops, cache_bytes = mla_flops(c), mla_cache_bytes(c)
    params = dict(c, flops=flops, cache_bytes=cache_bytes, dtype="bf16")
    bt = t.get("block_table")
    ins = (t["q"], t["q_pe"], t["k"], t["k_pe"], bt, c["N_kv"])
    peer = "torch"
    case_rows = []
    ref = None
    if not args.no_ref:
        with _no_tf32():
            ref = mla_torch(*ins, precise=True)

    def row(impl, tm=None, out=None, note="", error=None, extra=None):
        r = result_row("mla_decode", name, impl, params, peer, tm, note, error, extra,
                       rate=_rate(flops, cache_bytes), out_fields=output_fields(out, ref))
        case_rows.append(r)
        return r

    # ---- the torch composition (the named peer)
    peer_out = None
    try:
        peer_out = mla_torch(*ins)
        _sync()
        tm = bench_common.bench(lambda: mla_torch(*ins), args.min_reps)
        prep = bench_common.bench(lambda: mla_prep(*ins), args.min_reps)
        mode = "bf16 in, fp32 out (out_dtype)" if _BMM_OUT_DTYPE.get(t["q"].device.type) else "fp32 copies"
        row(peer, tm, peer_out, f"{'gather + ' if bt is not None else ''}cat + bmm ({mode}) + fp32 softmax + "
            f"bf16 P @ k, all timed; prep alone {prep['ms']:.3f} ms", extra={"prep_ms": prep["ms"]})
    except Exception as e:  # noqa: BLE001
        row(peer, error=f"{type(e).__name__}: {e}")

    # ---- SDPA on the concatenated cache, the first backend that accepts the call
    if sdpa_kernel is None:
        row("sdpa", error="torch.nn.attention.sdpa_kernel not available")
    else:
        scale = 1.0 / math.sqrt(c["D"] + c["PE"])
        failed = []
        for bname in ("FLASH_ATTENTION", "EFFICIENT_ATTENTION", "CUDNN_ATTENTION", "MATH"):
            backend = getattr(SDPBackend, bname, None)
            if backend is None:
                continue

            def fn(backend=backend):
                with sdpa_kernel(backend):
                    qq, kk, vv = mla_sdpa_inputs(*ins)
                    return F.scaled_dot_product_attention(qq, kk, vv, scale=scale)

            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # a refusing backend warns its reasons before raising
                    out = fn()
                _sync()
            except Exception as e:  # noqa: BLE001 -- this backend refuses E = 576, Ev = 512 etc.
                failed.append(f"{bname}: {type(e).__name__}")
                continue
            out3 = out.reshape(c["B"], c["H"], c["D"])
            extra = {"sdpa_refused": failed}
            if peer_out is not None:
                extra["err_vs_torch"] = rel_l2(out3, peer_out)
            tm = bench_common.bench(fn, args.min_reps)
            row(f"sdpa {bname}", tm, out3, "heads as query rows of their KV head; cat (and gather) timed"
                + (f"; refused: {', '.join(failed)}" if failed else ""), extra=extra)
            break
        else:
            row("sdpa", error="every SDPA backend refused: " + "; ".join(failed))

    # ---- attnjit, one row per backend
    tensors = {n: t[n] for n in ("q", "q_pe", "k", "k_pe", "o")}
    if bt is not None:
        tensors.update(block_table=bt, cache_seqlens=t["cache_seqlens"])
    _time_ours(rt, "mla_decode", tensors, t["o"], peer_out, row, args, OUR_CONFIGS)
    _finish(case_rows, peer)


def run_dsa_case(rt, c, args):
    """One dsa_decode case: the torch peer and the fp32 reference, then attnjit per backend."""
    t = dsa_inputs(c, DEVICE)
    name = dsa_name(c)
    cfg = dsa_config(c)
    ins = (t["q"], t["kv"], t["indices"], cfg["dim_tail"], cfg["stride_kv"], cfg["q_start_index_s"], cfg["is_causal"])
    valid = int(dsa_valid(t["indices"], c["S_kv"], cfg["stride_kv"], cfg["q_start_index_s"],
                          cfg["is_causal"]).sum().item())
    flops, cache_bytes = dsa_flops(c, valid), dsa_cache_bytes(c, valid)
    params = dict(c, config=cfg, valid_slots=valid, flops=flops, cache_bytes=cache_bytes, dtype="bf16")
    peer = "torch"
    case_rows = []
    ref = None
    if not args.no_ref:
        with _no_tf32():
            ref = dsa_torch(*ins, precise=True)

    def row(impl, tm=None, out=None, note="", error=None, extra=None):
        r = result_row("dsa_decode", name, impl, params, peer, tm, note, error, extra,
                       rate=_rate(flops, cache_bytes), out_fields=output_fields(out, ref))
        case_rows.append(r)
        return r

    peer_out = None
    try:
        peer_out = dsa_torch(*ins)
        _sync()
        tm = bench_common.bench(lambda: dsa_torch(*ins), args.min_reps)
        mode = "bf16 in, fp32 out (out_dtype)" if _BMM_OUT_DTYPE.get(t["q"].device.type) else "fp32 copies"
        row(peer, tm, peer_out, f"torch.gather of the selected rows + bmm ({mode}) + masked fp32 softmax + bf16 "
            f"P @ V, all timed; {valid} valid slots", extra={})
    except Exception as e:  # noqa: BLE001
        row(peer, error=f"{type(e).__name__}: {e}")

    tensors = {n: t[n] for n in ("q", "kv", "indices", "o")}
    configs = tuple((label, dict(cfg, **extra)) for label, extra in OUR_CONFIGS)
    _time_ours(rt, "dsa_decode", tensors, t["o"], peer_out, row, args, configs)
    _finish(case_rows, peer)


# ----------------------------------------------------------------------------------------------------
# Self-test: `python3 tools/bench/bench_mla.py --self-test [--lib PATH]`

def _check_counts():
    """The case lists and counts against figures worked out by hand."""
    full, quick = mla_cases(False), mla_cases(True)
    assert len(full) == 8 and len(quick) == 4, (len(full), len(quick))
    assert len({mla_name(c) for c in full}) == 8
    assert all(c["D"] == 512 and c["PE"] == 64 and c["H_kv"] == 1 and c["S_q"] == 1 for c in full)
    assert sorted((c["B"], c["H"], c["N_kv"], c["PS"]) for c in full) == sorted([
        (64, 128, 4096, 0), (64, 128, 8192, 0), (128, 128, 4096, 0), (128, 128, 8192, 0),
        (64, 16, 4096, 0), (64, 16, 8192, 0), (1, 128, 65536, 0), (64, 128, 4096, 64)])
    assert all(c in full for c in quick)
    c = full[0]  # B 64, H 128, N_kv 4096
    # 2 * 64 * 128 * 4096 * 576 + 2 * 64 * 128 * 4096 * 512 = 38654705664 + 34359738368
    assert mla_flops(c) == 73014444032, mla_flops(c)
    assert mla_cache_bytes(c) == 301989888  # 64 * 4096 * 576 * 2
    big = next(x for x in full if x["B"] == 128 and x["N_kv"] == 8192)
    assert mla_flops(big) == 4 * mla_flops(c) and mla_cache_bytes(big) == 4 * mla_cache_bytes(c)
    h16 = next(x for x in full if x["H"] == 16 and x["N_kv"] == 4096)
    assert mla_flops(h16) * 8 == mla_flops(c) and mla_cache_bytes(h16) == mla_cache_bytes(c)
    one = next(x for x in full if x["B"] == 1)
    assert mla_cache_bytes(one) == 75497472  # 65536 * 576 * 2
    paged = next(x for x in full if x["PS"])
    s = mla_shapes(paged)
    assert s["k"] == (4096, 64, 1, 512) and s["k_pe"] == (4096, 64, 1, 64) and s["block_table"] == (64, 64)
    assert mla_flops(paged) == mla_flops(c) and mla_cache_bytes(paged) == mla_cache_bytes(c)
    assert mla_shapes(c) == {"q": (64, 128, 512), "q_pe": (64, 128, 64), "o": (64, 128, 512),
                             "k": (64, 4096, 1, 512), "k_pe": (64, 4096, 1, 64)}

    dfull, dquick = dsa_cases(False), dsa_cases(True)
    assert [x["B"] for x in dfull] == [64, 8] and [x["B"] for x in dquick] == [8]
    d = dfull[0]
    assert dsa_shapes(d) == {"q": (64, 1, 128, 576), "kv": (64, 65536, 1, 576), "indices": (64, 1, 1, 2048),
                             "o": (64, 1, 128, 512)}
    # 2 * 64 * 1 * 128 * 2048 * 576 + 2 * 64 * 1 * 128 * 2048 * 512 = 19327352832 + 17179869184
    assert dsa_flops(d) == 36507222016, dsa_flops(d)
    assert dsa_cache_bytes(d) == 150994944  # 64 * 1 * 1 * 2048 * 576 * 2
    assert dsa_flops(d, 64 * 1024) * 2 == dsa_flops(d) and dsa_cache_bytes(d, 1) == 1152
    assert dsa_flops(dfull[1]) * 8 == dsa_flops(d)
    assert dsa_config(d) == {"dim_tail": 64, "stride_kv": 1, "q_start_index_s": 65535, "is_causal": True}
    print("counts: ok (8 + 4 mla_decode cases, 2 + 1 dsa_decode cases)")


def _check_meta():
    """Every full-size case's inputs and compositions on the meta device (shapes and dtypes, no data): the
    suites' code paths at the real sizes, including bmm's out_dtype path."""
    saved = dict(_BMM_OUT_DTYPE)
    try:
        for c in mla_cases(False):
            t = mla_inputs(c, "meta")
            assert {n: tuple(x.shape) for n, x in t.items()} == mla_shapes(c)
            ins = (t["q"], t["q_pe"], t["k"], t["k_pe"], t.get("block_table"), c["N_kv"])
            o, r = mla_torch(*ins), mla_torch(*ins, precise=True)
            qq, kk, vv = mla_sdpa_inputs(*ins)
            sd = F.scaled_dot_product_attention(qq, kk, vv, scale=1.0)
            assert o.shape == r.shape == sd.reshape(o.shape).shape == t["o"].shape
            assert o.dtype == torch.bfloat16 and r.dtype == torch.float32
        for c in dsa_cases(False):
            t = dsa_inputs(c, "meta")
            assert {n: tuple(x.shape) for n, x in t.items()} == dsa_shapes(c)
            cfg = dsa_config(c)
            ins = (t["q"], t["kv"], t["indices"], cfg["dim_tail"], cfg["stride_kv"], cfg["q_start_index_s"],
                   cfg["is_causal"])
            o, r = dsa_torch(*ins), dsa_torch(*ins, precise=True)
            assert o.shape == r.shape == t["o"].shape and o.dtype == torch.bfloat16
    finally:
        _BMM_OUT_DTYPE.clear()
        _BMM_OUT_DTYPE.update(saved)
    print("full-size cases on the meta device: ok (inputs, peers, references, sdpa inputs)")


def _np_mla(q, q_pe, k, k_pe):
    """float64 loop over (b, h) straight from docs/ops/mla_decode.md (contiguous cache, S_q = 1)."""
    import numpy as np
    B, H, D = q.shape
    H_kv = k.shape[2]
    g = H // H_kv
    o = np.zeros((B, H, D))
    for b in range(B):
        for h in range(H):
            r = h // g
            l = (k[b, :, r] @ q[b, h] + k_pe[b, :, r] @ q_pe[b, h]) / math.sqrt(D + q_pe.shape[-1])
            p = np.exp(l - l.max())
            o[b, h] = (p / p.sum()) @ k[b, :, r]
    return o


def _np_dsa(q, kv, idx, tail, stride, q_start, causal):
    """float64 loop over (b, s, h) straight from SPEC.md §2.18 (repeats count twice, empty rows zero)."""
    import numpy as np
    B, S, H, E = q.shape
    S_kv, H_kv = kv.shape[1], kv.shape[2]
    g, D = H // H_kv, E - tail
    o = np.zeros((B, S, H, D))
    for b in range(B):
        for s in range(S):
            for h in range(H):
                r = h // g
                xs = [int(x) for x in idx[b, s, r]
                      if 0 <= x < S_kv and (not causal or (x + 1) * stride <= q_start + s + 1)]
                if not xs:
                    continue
                rows = kv[b, xs, r]
                l = rows @ q[b, s, h] / math.sqrt(E)
                p = np.exp(l - l.max())
                o[b, s, h] = (p / p.sum()) @ rows[:, :D]
    return o


def _check_peers(lib):
    """The compositions on tiny CPU problems against the float64 loops, paged == contiguous, and (with the
    library) attnjit's CPU reference on the same tensor dicts the suites pass."""
    import numpy as np
    global DEVICE

    def f64(x):
        return x.double().numpy()

    def rel(a, b):
        a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
        return float(np.linalg.norm(a - b) / np.linalg.norm(b))

    c = dict(S_q=1, B=3, H=8, H_kv=2, D=128, PE=64, N_kv=50, PS=0)
    t = mla_inputs(c, "cpu", seed=5)
    want = _np_mla(f64(t["q"]), f64(t["q_pe"]), f64(t["k"]), f64(t["k_pe"]))
    got = mla_torch(t["q"], t["q_pe"], t["k"], t["k_pe"])
    e1, e2 = rel(got.float().numpy(), want), rel(mla_torch(t["q"], t["q_pe"], t["k"], t["k_pe"], precise=True), want)
    assert e1 < 1e-2 and e2 < 1e-6, (e1, e2)
    qq, kk, vv = mla_sdpa_inputs(t["q"], t["q_pe"], t["k"], t["k_pe"])
    e3 = rel(F.scaled_dot_product_attention(qq.float(), kk.float(), vv.float(), scale=1 / math.sqrt(192))
             .reshape(3, 8, 128), want)
    assert e3 < 1e-5, e3
    # Paged: the same contents in shuffled pages of 16 (N_kv = 50 is not a page multiple).
    cp = dict(c, PS=16)
    tp = mla_inputs(cp, "cpu", seed=6)
    kc, kpc = mla_gather(tp["k"], tp["k_pe"], tp["block_table"], c["N_kv"])
    assert kc.shape == (3, 50, 2, 128)
    same = torch.equal(mla_torch(tp["q"], tp["q_pe"], tp["k"], tp["k_pe"], tp["block_table"], 50),
                       mla_torch(tp["q"], tp["q_pe"], kc.contiguous(), kpc.contiguous()))
    assert same
    wantp = _np_mla(f64(tp["q"]), f64(tp["q_pe"]), f64(kc), f64(kpc))

    d = dict(B=2, S=3, H=32, H_kv=2, D=64, tail=32, topk=12, S_kv=40, stride_kv=2, causal=True)
    td = dsa_inputs(d, "cpu", seed=7)
    idx = td["indices"]
    idx[0, 0, 0, :4] = torch.tensor([-1, 40, 10**9, 3], dtype=torch.int32)  # invalid, invalid, invalid, repeat
    idx[0, 0, 0, 4] = 3
    idx[1, 2, 1, :] = -1  # a row with no valid slot: zeros
    q_start = 30  # q_pos 30..32: with stride 2, index x valid iff 2 (x + 1) <= q_pos + 1
    args_d = (td["q"], td["kv"], idx, 32, 2, q_start, True)
    wantd = _np_dsa(f64(td["q"]), f64(td["kv"]), idx.numpy(), 32, 2, q_start, True)
    gotd = dsa_torch(*args_d)
    e4, e5 = rel(gotd.float().numpy(), wantd), rel(dsa_torch(*args_d, precise=True), wantd)
    assert e4 < 1e-2 and e5 < 1e-6, (e4, e5)
    assert torch.all(gotd[1, 2, 16:] == 0)  # heads 16..31 belong to KV head 1
    v = dsa_valid(idx, 40, 2, q_start, True)
    assert not v[0, 0, 0, :3].any() and v[1, 2, 1].sum() == 0
    wantnc = _np_dsa(f64(td["q"]), f64(td["kv"]), idx.numpy(), 32, 2, q_start, False)
    e6 = rel(dsa_torch(td["q"], td["kv"], idx, 32, 2, q_start, False, precise=True), wantnc)
    assert e6 < 1e-6, e6
    print(f"peers: ok (mla rel L2 vs float64 {e1:.1e} bf16 P / {e2:.1e} fp32, sdpa {e3:.1e}, paged == contiguous; "
          f"dsa {e4:.1e} / {e5:.1e}, causal and not)")

    if lib is None:
        return
    import attnjit_ctypes as aj
    rt = aj.Runtime(lib=lib)
    for cc, tt, w in ((c, t, want), (cp, tp, wantp)):
        tens = {n: tt[n] for n in ("q", "q_pe", "k", "k_pe", "o")}
        if cc["PS"]:
            tens.update(block_table=tt["block_table"], cache_seqlens=tt["cache_seqlens"])
        rt.run("mla_decode", {"impl": "reference"}, tens)
        e = rel(tt["o"].float().numpy(), w)
        assert e < 1e-2, e
    tens = {"q": td["q"], "kv": td["kv"], "indices": idx, "o": td["o"]}
    rt.run("dsa_decode", {"impl": "reference", "dim_tail": 32, "stride_kv": 2, "q_start_index_s": q_start}, tens)
    e = rel(td["o"].float().numpy(), wantd)
    assert e < 1e-2, e
    print("attnjit reference: ok (mla contiguous and paged, dsa: the tensor dicts the suites pass)")

    # The suites' row logic end to end on tiny CPU cases: the reference impl as "ours", CPU timers.
    import types
    saved = (DEVICE, globals()["OUR_CONFIGS"], bench_common.bench, list(bench_common.ROWS))

    def cpu_bench(fn, min_reps=20):
        t0 = time.perf_counter()
        for _ in range(3):
            fn()
        return {"ms": (time.perf_counter() - t0) / 3 * 1e3, "min_ms": None, "reps": 3, "method": "cpu (self-test)"}

    class UnsupportedHopper:
        """The runtime, except that backend 'hopper' raises ATTNJIT_UNSUPPORTED as an op without its kernel does."""

        def plan(self, op, cfg, tensors):
            if cfg.get("backend") == "hopper":
                raise aj.AttnjitError("attnjit_plan_create", 2, f"{op}: unsupported: impl 'kernel' (backend "
                                      "'hopper'): no GPU kernel is built yet for this op")
            return rt.plan(op, cfg, tensors)

    DEVICE = "cpu"
    globals()["OUR_CONFIGS"] = (("attnjit reference", {"impl": "reference"}), ("attnjit portable", {"backend": "portable"}),
                                ("attnjit hopper", {"backend": "hopper"}))
    bench_common.bench = cpu_bench
    bench_common.ROWS.clear()
    try:
        args = types.SimpleNamespace(min_reps=3, no_ref=False, rt_error=None)
        fake = UnsupportedHopper()
        run_mla_case(fake, dict(c, B=2, N_kv=40), args)
        run_mla_case(fake, dict(cp, B=2, N_kv=40), args)
        run_dsa_case(fake, dict(d, S=1, stride_kv=1), args)
        rows = list(bench_common.ROWS)
    finally:
        DEVICE, globals()["OUR_CONFIGS"], bench_common.bench = saved[0], saved[1], saved[2]
        bench_common.ROWS[:] = saved[3]
        rt.close()
    ref_rows = [r for r in rows if r["impl"] == "attnjit reference"]
    assert len(ref_rows) == 3 and all(r.get("check") == "ok" and r["err_ref"] < 1e-2 for r in ref_rows), ref_rows
    assert all(r.get("error") for r in rows if r["impl"] == "attnjit portable")  # host tensors: a device error
    hop = [r for r in rows if r["impl"] == "attnjit hopper"]
    assert len(hop) == 3 and all(r.get("check") == "unsupported" and r["error"].startswith("ATTNJIT_UNSUPPORTED: ")
                                 for r in hop), hop
    assert all(r.get("tflops") and r.get("gbs") and r.get("us") for r in rows
               if r["impl"] in ("torch", "attnjit reference"))
    assert all(r["peer_us"] == next(p["us"] for p in rows if p["impl"] == "torch" and p["shape"] == r["shape"])
               for r in ref_rows)
    assert any(r["impl"].startswith("sdpa") and not r.get("error") for r in rows)
    print(f"row logic: ok ({len(rows)} rows from 3 tiny CPU cases)")


def _check_cli(cli):
    """`attnjit bench --suite mla_decode --suite dsa_decode --json F` (without a GPU: every case "skipped" with
    its counts) lists the same cases with the same FLOP and byte counts as this module."""
    import json
    import subprocess
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "bench.json")
        subprocess.run([cli, "bench", "--suite", "mla_decode", "--suite", "dsa_decode", "--json", path], check=True,
                       stdout=subprocess.DEVNULL)
        with open(path) as f:
            got = json.load(f)
    want = {}
    for c in mla_cases(False):
        for b in ("portable", "hopper"):
            what = (f"mla_decode bf16 B{c['B']} H{c['H']}/{c['H_kv']} D{c['D']}+{c['PE']} N{c['N_kv']}"
                    + (f" paged PS{c['PS']}" if c["PS"] else "") + f" {b}")
            want[("mla_decode", what)] = (mla_flops(c), mla_cache_bytes(c))
    for c in dsa_cases(False):
        for b in ("portable", "hopper"):
            what = (f"dsa_decode bf16 B{c['B']} S{c['S']} H{c['H']}/{c['H_kv']} D{c['D']}+{c['tail']} topk{c['topk']} "
                    f"S_kv{c['S_kv']} causal {b}")
            want[("dsa_decode", what)] = (dsa_flops(c), dsa_cache_bytes(c))
    have = {(op, what): (v["flops"], v["cache_bytes"]) for op in ("mla_decode", "dsa_decode")
            for what, v in got.get(op, {}).items()}
    assert set(have) == set(want), sorted(set(have) ^ set(want))
    bad = {k: (have[k], want[k]) for k in want if have[k] != want[k]}
    assert not bad, bad
    print(f"cli: ok ({len(have)} rows of `{os.path.basename(cli)} bench` with this module's cases and counts)")


def self_test(lib=None, cli=None):
    _check_counts()
    if cli is not None:
        _check_cli(cli)
    if torch is None:
        print(f"peers: skipped (no torch: {_TORCH_ERROR})")
        return 0
    if lib is None:
        try:
            import attnjit_ctypes as aj
            lib = aj.find_library(None)
        except Exception as e:  # noqa: BLE001
            print(f"attnjit reference: skipped ({type(e).__name__}: {e})")
    _check_meta()
    _check_peers(lib)
    return 0


if __name__ == "__main__":
    import argparse
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--self-test", action="store_true", help="check the cases, counts and compositions (CPU)")
    ap.add_argument("--lib", default=None, help="libattnjit.so for the reference comparison")
    ap.add_argument("--cli", default=None, help="the attnjit CLI (e.g. build/bin/attnjit): compare its cases and "
                    "counts with this module's (on a machine without a GPU, where it only lists them)")
    a = ap.parse_args()
    if not a.self_test:
        ap.print_help()
        print("\nrun the suites through tools/bench/bench_torch.py --suite mla_decode|dsa_decode")
        sys.exit(0)
    sys.exit(self_test(a.lib, a.cli))
