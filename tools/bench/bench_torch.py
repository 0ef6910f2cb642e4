#!/usr/bin/env python3
"""Side-by-side benchmark of attnjit against PyTorch peers, in one process, on the same tensors.

Run on the GPU host (H200; PyTorch with CUDA, Triton, cuDNN):

    python3 tools/bench/bench_torch.py --lib build/libattnjit.so [--suite gqa|paged_kv_write|lightning_indexer|all] \
        [--json out.json] [--quick]

Suites
  gqa             gqa_fwd (bf16, BSHD, GQA) vs torch SDPA with the FLASH_ATTENTION backend (FlashAttention-2,
                  "FA2", the named peer) and the CUDNN_ATTENTION backend; sliding-window and softcap cases
                  vs flex_attention under torch.compile (the named peer there: SDPA has neither feature).
                  Every output is checked against an fp32 reference (rel L2 and max abs) and ours also
                  against the peer's output (rel L2 < 2e-2, else the row says WRONG), before timing.
  paged_kv_write  bf16 k/v [N, 8, 128] with k+v = 1 GiB into page pools (page size 16, shuffled page
                  order), bf16 and e4m3 caches; vs plain PyTorch (index_copy_, index_put_) and vs a
                  device-to-device copy moving the same number of bytes (the ceiling).
  lightning_indexer  bf16 B=1 H=64 D=128 topk=2048, T=S=8192/32768 causal and 8192 full, vs the PyTorch
                  composition (einsum scores, relu, weighted head sum, topk, in 256-row chunks); both checked
                  by SPEC.md §1.9 on sampled rows against fp32 scores; TFLOP/s of the score MMAs
                  (2 T S H D, halved for causal) and the fraction of the 801 TFLOP/s ceiling.
  fp8_lightning_indexer, topk_select
                  see tools/bench/bench_torch_fp8_indexer.py: the FP8 indexer logits (S=S_kv=8192, H=32, D=64, G=1,
                  bf16 and e4m3 inputs, TileOPs-style document-causal windows and a dense row) vs the torch bf16
                  einsum composition, GB/s of the logits write; topk_select (S=8192 rows, S_kv 8192 / 32768,
                  topk 2048) vs torch.topk on the same scores.
  bsa_bwd         bsa_bwd (bf16 BHSD MHA, B=1 H=32 S=16384 D=128; 16 of 128 key blocks of 128, 32 of 256 of
                  64 per query block) vs FlexAttention's backward (autograd through torch.compile'd
                  flex_attention on the same BlockMask of full blocks, timed alone); o and lse from bsa_fwd;
                  ours checked against flex's gradients (max rel L2 of dq, dk, dv). TFLOP/s = 2.5 x 4 B H D
                  x visible pairs.

  decode          gqa_paged_fwd decode (bf16, H=32, H_kv=8, D=128, one query token per request, shuffled
                  pages of 16 and 64; B=64 x 8192 and B=1 x 131072 cached keys; each also on the portable
                  backend; and mha_decode_paged with H=H_kv=32 at pages of 16) vs torch SDPA CUDNN_ATTENTION
                  (the named peer) and FLASH_ATTENTION on contiguous K/V [B, H_kv, ctx, D] gathered from the same
                  pools (enable_gqa=True; K/V repeated to H heads only if a backend refuses it). GB/s = K/V
                  bytes of the H_kv heads (2 B ctx H_kv D * 2) / time, also as a fraction of the 4443 GB/s the
                  issue quotes; outputs checked against an fp32 reference.
  prefill_append  gqa_prefill_paged_append (bf16, H=32, H_kv=8, D=128, page size 64, causal): one 4096-token
                  chunk appended to a cache of 0, 4096 and 12288 tokens, beside our gqa_fwd and torch SDPA
                  FLASH (FA2, the named peer; lower-right causal bias when old > 0) on the same dense problem;
                  TFLOP/s = 4 B H D x visible pairs; the appended pool rows are checked against k_new / v_new.

Timing (GPU.md "Measuring"): CUDA events after warm-up, the median of >= 20 repetitions
(triton.testing.do_bench with L2 flushed before every repetition, its rep time stretched so that
long kernels still get >= 20 repetitions; our own event loop, also flushing L2, when triton is absent).
--l2 stream times calls back to back instead (batches of >= 1 ms between an event pair, no flush): the
flush is a 256 MiB memset whose dirty lines the next kernel writes back, which costs a 0.15 ms decode
about 5%; a decode that streams 0.5-2 GB of K/V gets nothing from L2 either way.
No input fits in the 60 MB L2: the smallest GQA problem (D=64: q 64 MiB + k, v 16 MiB each + o 64 MiB)
and the paged_kv_write problem (1 GiB of k/v) exceed it, and L2 is flushed between repetitions anyway,
so inputs are not rotated. Inputs are torch.randn (never zeros).

FLOPs: 4 * B * H * D * (number of visible (query, key) pairs), counted exactly: S_q * S_kv without
a mask, S * (S + 1) / 2 per (batch, head) for causal with S_q == S_kv, and only the visible pairs for
sliding windows (SPEC.md §1.6 visibility, bottom-right aligned). GB/s = (bytes read + bytes written) / time.
Ceilings measured on the host: bf16 dense GEMM 801 TFLOP/s, device-to-device copy 4276 GB/s.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import sys
import time
import traceback
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import attnjit_ctypes as aj  # noqa: E402
from bench_rows import add_with_ratio, per_second, result_row  # noqa: E402

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

try:
    from torch.nn.attention import SDPBackend, sdpa_kernel
except ImportError:  # pragma: no cover
    SDPBackend = sdpa_kernel = None
try:
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention
except ImportError:  # pragma: no cover
    flex_attention = create_block_mask = None
try:
    from triton.testing import do_bench as triton_do_bench
except Exception:  # pragma: no cover
    triton_do_bench = None

GEMM_CEILING_TFLOPS = 801.0
COPY_CEILING_GBS = 4276.0
CHECK_TOL = 2e-2  # rel L2 of ours vs the peer's output, bf16

# ----------------------------------------------------------------------------------------------------
# Timing

_L2_FLUSH = None


def _flush_l2():
    global _L2_FLUSH
    if _L2_FLUSH is None:
        _L2_FLUSH = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    _L2_FLUSH.zero_()


L2_MODE = "flush"  # --l2: "flush" (cold L2 before each repetition) or "stream" (back-to-back calls)


def bench_stream(fn, est, min_reps, warmup_ms, rep_ms):
    """--l2 stream: calls back to back with no flush, as a model's layers run them; per repetition an event
    pair around a batch of calls (>= 1 ms of work), the median of the per-call times."""
    per_batch = max(1, int(1.0 / est))
    for _ in range(max(3, int(warmup_ms / est))):
        fn()
    n_rep = max(min_reps, int(rep_ms / (est * per_batch)))
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(n_rep)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(n_rep)]
    for i in range(n_rep):
        starts[i].record()
        for _ in range(per_batch):
            fn()
        ends[i].record()
    torch.cuda.synchronize()
    times = [a.elapsed_time(b) / per_batch for a, b in zip(starts, ends)]
    return {"ms": statistics.median(times), "min_ms": min(times), "reps": n_rep * per_batch,
            "method": f"cuda events, back to back ({per_batch} calls per event pair), no L2 flush"}


def bench(fn, min_reps=20, warmup_ms=25.0, rep_ms=100.0):
    """Median GPU time of fn() in ms over >= min_reps repetitions, after warm-up. Returns a dict."""
    fn()
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(3):
        fn()
    e.record()
    torch.cuda.synchronize()
    est = max(s.elapsed_time(e) / 3, 1e-3)
    if L2_MODE == "stream":
        return bench_stream(fn, est, min_reps, warmup_ms, rep_ms)
    if triton_do_bench is not None:
        # do_bench runs int(rep / estimate) repetitions, its estimate including the L2 flush (~0.1 ms):
        # stretch rep so that long kernels still get min_reps of them.
        rep = max(rep_ms, (est + 0.25) * (min_reps + 5))
        try:
            times = triton_do_bench(fn, warmup=warmup_ms, rep=rep, return_mode="all")
            if isinstance(times, (list, tuple)) and times:
                times = [float(t) for t in times]
                return {"ms": statistics.median(times), "min_ms": min(times), "reps": len(times),
                        "method": "triton.testing.do_bench"}
        except (TypeError, ValueError, AssertionError):
            pass  # an older triton without return_mode="all"
        ms = triton_do_bench(fn, warmup=warmup_ms, rep=rep, return_mode="median")
        return {"ms": float(ms), "min_ms": None, "reps": max(1, int(rep / (est + 0.1))),
                "method": "triton.testing.do_bench (reps estimated)"}
    # Own loop: warm-up, then per repetition an L2 flush and an event pair around fn().
    n_warm = max(5, int(warmup_ms / est))
    n_rep = max(min_reps, int(rep_ms / est))
    for _ in range(n_warm):
        fn()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(n_rep)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(n_rep)]
    for i in range(n_rep):
        _flush_l2()
        starts[i].record()
        fn()
        ends[i].record()
    torch.cuda.synchronize()
    times = [a.elapsed_time(b) for a, b in zip(starts, ends)]
    return {"ms": statistics.median(times), "min_ms": min(times), "reps": n_rep, "method": "cuda events"}


def host_us_per_call(fn, n=50):
    """Host time per enqueue (µs), measured without synchronising inside the loop."""
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    return (t1 - t0) / n * 1e6


# ----------------------------------------------------------------------------------------------------
# Errors and FLOPs

def rel_l2(x, ref):
    x = x.float()
    ref = ref.float()
    den = torch.linalg.vector_norm(ref).item()
    num = torch.linalg.vector_norm(x - ref).item()
    return num / den if den > 0 else num


def output_fields(out, ref):
    """The output checks of a row: err_ref and maxabs_ref against ref (when there is one), nan_count; {}
    without an output."""
    if out is None:
        return {}
    r = {}
    if ref is not None:
        r["err_ref"] = rel_l2(out, ref)
        r["maxabs_ref"] = max_abs(out, ref)
    r["nan_count"] = int(torch.isnan(out).sum().item())
    return r


def tflops_rate(flops):
    """A result_row rate: TFLOP/s and the fraction of the GEMM ceiling."""
    def rate(r, t):
        r["tflops"] = per_second(flops, t, 1e12)
        r["frac_of_gemm_ceiling"] = r["tflops"] / GEMM_CEILING_TFLOPS
    return rate


def max_abs(x, ref):
    return (x.float() - ref.float()).abs().max().item()


def visible_pairs(S_q, S_kv, causal, wl=-1, wr=-1):
    """Visible (query, key) pairs of one (batch, head), SPEC.md §1.6, bottom-right aligned."""
    if not causal and wl < 0 and wr < 0:
        return S_q * S_kv
    if causal and wl < 0 and wr < 0 and S_q == S_kv:
        return S_q * (S_q + 1) // 2
    total = 0
    for i in range(S_q):
        p = i + S_kv - S_q
        hi = S_kv - 1
        if causal:
            hi = min(hi, p)
        if wr >= 0:
            hi = min(hi, p + wr)
        lo = max(0, p - wl) if wl >= 0 else 0
        total += max(0, hi - lo + 1)
    return total


def reference_fp32(q, k, v, causal, wl, wr, softcap, scale):
    """fp32 attention on the GPU, chunked over queries: the accuracy reference."""
    B, S_q, H, D = q.shape
    S_kv, H_kv = k.shape[1], k.shape[2]
    g = H // H_kv
    out = torch.empty(B, S_q, H, D, dtype=torch.float32, device=q.device)
    chunk = max(1, min(S_q, (1 << 28) // (H * max(S_kv, 1))))  # <= 1 GiB of fp32 scores
    prev_tf32 = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        j = torch.arange(S_kv, device=q.device)[None, :]
        for b in range(B):
            kf = k[b].float().transpose(0, 1).repeat_interleave(g, 0)  # [H, S_kv, D]
            vf = v[b].float().transpose(0, 1).repeat_interleave(g, 0)
            for c0 in range(0, S_q, chunk):
                c1 = min(S_q, c0 + chunk)
                qf = q[b, c0:c1].float().transpose(0, 1)  # [H, C, D]
                s = torch.matmul(qf, kf.transpose(1, 2)).mul_(scale)  # [H, C, S_kv]
                if softcap:
                    s = torch.tanh(s / softcap).mul_(softcap)
                p = torch.arange(c0, c1, device=q.device)[:, None] + (S_kv - S_q)
                vis = torch.ones(c1 - c0, S_kv, dtype=torch.bool, device=q.device)
                if causal:
                    vis &= j <= p
                if wl >= 0:
                    vis &= j >= p - wl
                if wr >= 0:
                    vis &= j <= p + wr
                s.masked_fill_(~vis, float("-inf"))
                pr = torch.softmax(s, dim=-1).nan_to_num_(0.0)  # empty rows: zeros
                out[b, c0:c1] = torch.matmul(pr, vf).transpose(0, 1)
                del s, pr
    finally:
        torch.backends.cuda.matmul.allow_tf32 = prev_tf32
    return out


# ----------------------------------------------------------------------------------------------------
# Result rows

ROWS = []


def add_row(row):
    ROWS.append(row)
    print_row(row, live=True)
    sys.stdout.flush()


def run_case(suite, label, shape, fn):
    """One case of a suite: prints "[suite] label" ("[suite]" without a label) and runs fn(); an exception
    becomes an "(case)" error row of that shape (traceback on stderr). Frees torch's cached GPU memory."""
    print(f"[{suite}] {label}" if label is not None else f"[{suite}]")
    sys.stdout.flush()
    try:
        fn()
    except Exception as e:  # noqa: BLE001
        traceback.print_exc()
        add_row({"suite": suite, "shape": shape, "impl": "(case)", "error": f"{type(e).__name__}: {e}"})
    torch.cuda.empty_cache()


def print_row(r, live=False):
    if r.get("error"):
        line = f"{r['shape']:<36} {r['impl']:<22} ERROR: {r['error'][:160]}"
    else:
        perf = (f"{r['tflops']:8.1f} TF/s" if r.get("tflops") is not None
                else f"{r['gbs']:8.1f} GB/s" if r.get("gbs") is not None else " " * 13)
        ratio = f"{r['ratio']:5.2f}x {r['peer']}" if r.get("ratio") is not None else ""
        err = f"{r['err_ref']:.2e}" if r.get("err_ref") is not None else "-"
        mx = f"{r['maxabs_ref']:.2e}" if r.get("maxabs_ref") is not None else "-"
        chk = ""
        if r.get("err_peer") is not None:
            chk = f"{r['err_peer']:.2e} {'ok' if r['err_peer'] < CHECK_TOL else 'WRONG'}"
        elif r.get("check"):
            chk = r["check"]
        if r.get("err_bf16") is not None:  # FP8 rows: relL2 from the bf16 forward, N(0, 1) / N(0, 0.5^2) inputs
            chk += f" bf16 {r['err_bf16']:.2e}/{r.get('err_bf16_std0.5', float('nan')):.2e}"
        line = (f"{r['shape']:<36} {r['impl']:<22} {r['ms']:9.3f} ms {perf} {ratio:<22} "
                f"{err:>9} {mx:>9} {chk:<16} {r.get('note', '')}")
    print(("  " if live else "") + line)


def print_table():
    print()
    print("=" * 150)
    print(f"{'shape':<36} {'impl':<22} {'time':>12} {'throughput':>13} {'ratio (peer_ms/ms)':<22} "
          f"{'relL2(ref)':>9} {'maxabs':>9} {'vs peer':<16} note")
    print("-" * 150)
    last = None
    for r in ROWS:
        if last is not None and r["shape"] != last:
            print()
        last = r["shape"]
        print_row(r)
    print("=" * 150)
    print(f"ratio = peer time / row time (> 1: faster than the peer). relL2/maxabs: vs an fp32 reference "
          f"(paged_kv_write: vs attnjit's pool, bitwise). 'vs peer': rel L2 of ours vs the peer's output, "
          f"WRONG if >= {CHECK_TOL}.")
    print(f"Ceilings: bf16 GEMM {GEMM_CEILING_TFLOPS} TFLOP/s, d2d copy {COPY_CEILING_GBS} GB/s (GPU.md).")


# ----------------------------------------------------------------------------------------------------
# GQA suite

def gqa_cases(quick):
    # (B, S, H, H_kv, D, causal, window_left, softcap)
    full = []
    for S in (1024, 4096, 16384):
        for causal in (True, False):
            full.append(dict(B=16384 // S, S=S, H=32, H_kv=8, D=128, causal=causal, wl=-1, softcap=0.0))
    for causal in (True, False):
        full.append(dict(B=4, S=4096, H=32, H_kv=8, D=64, causal=causal, wl=-1, softcap=0.0))
    for causal in (True, False):
        # D=256 at H=16 (H_kv=4, the same group size 4) keeps H*D = 4096 like the D=128 shapes.
        full.append(dict(B=4, S=4096, H=16, H_kv=4, D=256, causal=causal, wl=-1, softcap=0.0))
    # Sliding window: 1024 keys per row including the diagonal (window_size_left = 1023), causal.
    full.append(dict(B=4, S=4096, H=32, H_kv=8, D=128, causal=True, wl=1023, softcap=0.0))
    # Softcap 50 (Gemma-2 style), causal.
    full.append(dict(B=4, S=4096, H=32, H_kv=8, D=128, causal=True, wl=-1, softcap=50.0))
    if not quick:
        return full
    keep = []
    for c in full:
        if c["D"] == 128 and c["S"] == 4096:
            keep.append(c)  # causal, non-causal, window, softcap at S=4096
    return keep


def case_name(c):
    s = f"B{c['B']} S{c['S']} H{c['H']}/{c['H_kv']} D{c['D']}"
    s += " causal" if c["causal"] else " full"
    if c["wl"] >= 0:
        s += f" wl{c['wl']}"
    if c["softcap"]:
        s += f" cap{c['softcap']:g}"
    return s


_FLEX_COMPILED = None


def flex_compiled():
    global _FLEX_COMPILED
    if _FLEX_COMPILED is None:
        _FLEX_COMPILED = torch.compile(flex_attention, dynamic=False)
    return _FLEX_COMPILED


def run_gqa_case(rt, c, args):
    torch.manual_seed(1234)
    B, S, H, H_kv, D = c["B"], c["S"], c["H"], c["H_kv"], c["D"]
    causal, wl, softcap = c["causal"], c["wl"], c["softcap"]
    g = H // H_kv
    scale = 1.0 / math.sqrt(D)
    dev = "cuda"
    dt = torch.bfloat16
    q = torch.randn(B, S, H, D, dtype=dt, device=dev)
    k = torch.randn(B, S, H_kv, D, dtype=dt, device=dev)
    v = torch.randn(B, S, H_kv, D, dtype=dt, device=dev)
    o = torch.empty_like(q)
    name = case_name(c)
    pairs = visible_pairs(S, S, causal, wl, -1)
    flops = 4.0 * B * H * D * pairs
    special = wl >= 0 or softcap > 0
    peer = "flex" if special else "FA2"
    params = dict(c, flops=flops, visible_pairs_per_bh=pairs)

    ref = None
    if not args.no_ref:
        ref = reference_fp32(q, k, v, causal, wl, -1, softcap, scale)
    case_rows = []
    peer_out = None

    def row(impl, t=None, out=None, note="", error=None, extra=None):
        r = result_row("gqa", name, impl, params, peer, t, note, error, extra, rate=tflops_rate(flops),
                       out_fields=output_fields(out, ref))
        case_rows.append(r)
        return r

    # BHSD views of the same BSHD storage for torch.
    qt, kt, vt = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
    kv_rep = {}

    def repeated():
        if not kv_rep:  # once, outside every timed region
            kv_rep["k"] = kt.repeat_interleave(g, dim=1)
            kv_rep["v"] = vt.repeat_interleave(g, dim=1)
        return kv_rep["k"], kv_rep["v"]

    # ---- torch SDPA: FLASH (FA2, the peer) and CUDNN. Neither has windows or softcap.
    if not special and sdpa_kernel is not None:
        for impl, backend in (("sdpa FLASH (FA2)", SDPBackend.FLASH_ATTENTION),
                              ("sdpa CUDNN", SDPBackend.CUDNN_ATTENTION)):
            try:
                with sdpa_kernel(backend):
                    note = "enable_gqa=True"
                    kk, vv, gqa = kt, vt, True
                    with warnings.catch_warnings(record=True) as w:
                        warnings.simplefilter("always")
                        try:
                            out = F.scaled_dot_product_attention(qt, kk, vv, is_causal=causal, enable_gqa=True)
                        except RuntimeError as e1:
                            reasons = "; ".join(str(x.message) for x in w)[:200]
                            kk, vv = repeated()
                            gqa = False
                            note = (f"k/v repeat_interleave'd once outside the timed region (enable_gqa failed: "
                                    f"{str(e1)[:80]} {reasons})")
                            out = F.scaled_dot_product_attention(qt, kk, vv, is_causal=causal)
                    torch.cuda.synchronize()
                    out_bshd = out.transpose(1, 2)
                    if impl.startswith("sdpa FLASH"):
                        peer_out = out_bshd
                    if gqa:
                        def fn(kk=kk, vv=vv):
                            return F.scaled_dot_product_attention(qt, kk, vv, is_causal=causal, enable_gqa=True)
                    else:
                        def fn(kk=kk, vv=vv):
                            return F.scaled_dot_product_attention(qt, kk, vv, is_causal=causal)
                    t = bench(fn, args.min_reps)
                note += "; q/k/v are BHSD transposed views of the BSHD tensors"
                if causal:
                    note += "; torch's top-left causal == bottom-right here (S_q == S_kv)"
                row(impl, t, out_bshd, note)
                del out
            except Exception as e:  # noqa: BLE001
                row(impl, error=f"{type(e).__name__}: {e}")

    # ---- flex_attention under torch.compile: the peer for windows and softcap.
    if special:
        if flex_attention is None:
            row("flex (compiled)", error="torch.nn.attention.flex_attention not available")
        else:
            try:
                offset = 0  # S_q == S_kv: bottom-right == top-left

                def mask_mod(b, h, q_idx, kv_idx):
                    p = q_idx + offset
                    m = kv_idx <= p
                    if wl >= 0:
                        m = m & (p - kv_idx <= wl)
                    return m

                block_mask = create_block_mask(mask_mod, B=None, H=None, Q_LEN=S, KV_LEN=S, device=dev)
                cap = float(softcap)

                def softcap_mod(score, b, h, q_idx, kv_idx):
                    return cap * torch.tanh(score / cap)

                score_mod = softcap_mod if softcap > 0 else None

                fx = flex_compiled()
                note = "torch.compile(flex_attention), block_mask causal" + (f"+window {wl}" if wl >= 0 else "")
                note += (", score_mod softcap" if softcap > 0 else "") + ", enable_gqa=True"
                qq, kk, vv = qt, kt, vt
                t0 = time.perf_counter()
                try:
                    out = fx(qq, kk, vv, score_mod=score_mod, block_mask=block_mask, scale=scale, enable_gqa=True)
                except Exception as e1:  # noqa: BLE001 -- strided views refused: contiguous copies, untimed
                    qq, kk, vv = qt.contiguous(), kt.contiguous(), vt.contiguous()
                    note += f"; BHSD contiguous copies made once, untimed ({type(e1).__name__})"
                    out = fx(qq, kk, vv, score_mod=score_mod, block_mask=block_mask, scale=scale, enable_gqa=True)
                torch.cuda.synchronize()
                compile_s = time.perf_counter() - t0
                peer_out = out.transpose(1, 2)
                t = bench(lambda: fx(qq, kk, vv, score_mod=score_mod, block_mask=block_mask, scale=scale,
                                     enable_gqa=True), args.min_reps)
                row("flex (compiled)", t, peer_out, note, extra={"first_call_s": compile_s})
            except Exception as e:  # noqa: BLE001
                row("flex (compiled)", error=f"{type(e).__name__}: {e}")

    # ---- attnjit gqa_fwd: plan once, time plan_execute; then attnjit_run.
    config = {"is_causal": causal}
    if wl >= 0:
        config["window_size_left"] = wl
    if softcap > 0:
        config["softcap"] = softcap
    tensors = {"q": q, "k": k, "v": v, "o": o}
    if rt is None:
        row("attnjit plan_execute", error=args.rt_error)
    else:
        plan = None
        try:
            t0 = time.perf_counter()
            plan = rt.plan("gqa_fwd", config, tensors)
            plan_s = time.perf_counter() - t0
            call = plan.bind(tensors)
            o.fill_(float("nan"))  # poison: an unwritten element shows as NaN
            call()
            torch.cuda.synchronize()
            extra = {"plan_create_s": plan_s, "config": config}
            if peer_out is not None:
                extra["err_peer"] = rel_l2(o, peer_out)
                extra["check"] = "ok" if extra["err_peer"] < CHECK_TOL else "WRONG"
            extra["host_us_execute_bound"] = host_us_per_call(call)
            extra["host_us_execute_packed"] = host_us_per_call(lambda: plan.execute(tensors))
            t = bench(call, args.min_reps)
            row("attnjit plan_execute", t, o, f"plan_create {plan_s * 1e3:.0f} ms (incl. JIT); host "
                f"{extra['host_us_execute_bound']:.1f} us/call", extra=extra)
        except Exception as e:  # noqa: BLE001
            row("attnjit plan_execute", error=f"{type(e).__name__}: {e}")
        # Each explicit backend on the same call: hopper (wgmma, TMA) and portable (mma.sync).
        for bname, bnote in (("hopper", "backend 'hopper' (wgmma, TMA, warp-specialised)"),
                             ("portable", "backend 'portable' (mma.sync, cp.async; FlashAttention-2 style)")):
            try:
                hconfig = dict(config, backend=bname)
                hplan = rt.plan("gqa_fwd", hconfig, tensors)
                hcall = hplan.bind(tensors)
                o.fill_(float("nan"))
                hcall()
                torch.cuda.synchronize()
                extra = {"config": hconfig}
                if peer_out is not None:
                    extra["err_peer"] = rel_l2(o, peer_out)
                    extra["check"] = "ok" if extra["err_peer"] < CHECK_TOL else "WRONG"
                t = bench(hcall, args.min_reps)
                row(f"attnjit {bname}", t, o, bnote, extra=extra)
                hplan.close()
            except Exception as e:  # noqa: BLE001
                row(f"attnjit {bname}", error=f"{type(e).__name__}: {e}")
        # attnjit_run: the plan cache. First call (a cache miss builds a plan), then steady state.
        if plan is not None:
            try:
                t0 = time.perf_counter()
                rt.run("gqa_fwd", config, tensors)
                torch.cuda.synchronize()
                first_s = time.perf_counter() - t0
                run_call = rt.bind_run("gqa_fwd", config, tensors)
                host_run = host_us_per_call(run_call)
                t = bench(run_call, args.min_reps)
                row("attnjit run (cached)", t, None,
                    f"first run {first_s * 1e3:.1f} ms; host {host_run:.1f} us/call (plan cache lookup)",
                    extra={"first_run_s": first_s, "host_us_run": host_run})
            except Exception as e:  # noqa: BLE001
                row("attnjit run (cached)", error=f"{type(e).__name__}: {e}")
            plan.close()
        # gqa_varlen_fwd on the same storage as one packed batch of B equal-length requests.
        if not args.no_varlen:
            try:
                cu = torch.arange(0, (B + 1) * S, S, dtype=torch.int32, device=dev)
                vt_tensors = {"q": q.view(B * S, H, D), "k": k.view(B * S, H_kv, D), "v": v.view(B * S, H_kv, D),
                              "o": o.view(B * S, H, D), "cu_seqlens_q": cu, "cu_seqlens_kv": cu}
                vplan = rt.plan("gqa_varlen_fwd", config, vt_tensors)
                vcall = vplan.bind(vt_tensors)
                o.fill_(float("nan"))
                vcall()
                torch.cuda.synchronize()
                extra = {}
                if peer_out is not None:
                    extra["err_peer"] = rel_l2(o, peer_out)
                    extra["check"] = "ok" if extra["err_peer"] < CHECK_TOL else "WRONG"
                t = bench(vcall, args.min_reps)
                row("attnjit varlen_fwd", t, o, f"THD, {B} requests of {S}", extra=extra)
                vplan.close()
            except Exception as e:  # noqa: BLE001
                row("attnjit varlen_fwd", error=f"{type(e).__name__}: {e}")

    # Ratios against the named peer.
    peer_rows = [r for r in case_rows if not r.get("error") and r.get("ms") and
                 (r["impl"].startswith("sdpa FLASH") if peer == "FA2" else r["impl"].startswith("flex"))]
    peer_ms = peer_rows[0]["ms"] if peer_rows else None
    # Print order: ours first, then peers.
    order = {"attnjit plan_execute": 0, "attnjit hopper": 1, "attnjit portable": 2, "attnjit run (cached)": 3,
             "attnjit varlen_fwd": 4}
    case_rows.sort(key=lambda r: order.get(r["impl"], 10))
    add_with_ratio(case_rows, peer_ms, add_row)


# ----------------------------------------------------------------------------------------------------
# paged_kv_write suite

def run_paged_kv_write(rt, cache_dtype, args):
    torch.manual_seed(99)
    dev = "cuda"
    H, D, PS = 8, 128, 16
    N = (1 << 30) // (2 * H * D * 2)  # k + v = 1 GiB of bf16
    NP = N // PS
    k = torch.randn(N, H, D, dtype=torch.bfloat16, device=dev)
    v = torch.randn(N, H, D, dtype=torch.bfloat16, device=dev)
    perm = torch.randperm(NP, device=dev)
    n = torch.arange(N, device=dev)
    slot = (perm[n // PS] * PS + n % PS).to(torch.int64)  # pages in shuffled order
    e4m3 = cache_dtype == "e4m3"
    tdt = torch.float8_e4m3fn if e4m3 else torch.bfloat16
    kp = torch.empty(NP, PS, H, D, dtype=tdt, device=dev)
    vp = torch.empty(NP, PS, H, D, dtype=tdt, device=dev)
    tensors = {"k": k, "v": v, "k_pages": kp, "v_pages": vp, "slot_mapping": slot}
    k_scale = v_scale = None
    if e4m3:
        k_scale = (k.float().abs().amax() / 448.0).reshape(1).contiguous()
        v_scale = (v.float().abs().amax() / 448.0).reshape(1).contiguous()
        tensors.update(k_scale=k_scale, v_scale=v_scale)
    esz = kp.element_size()
    bytes_moved = 2 * N * H * D * 2 + N * 8 + 2 * N * H * D * esz
    name = f"pkw bf16->{cache_dtype} N{N} H{H} D{D} PS{PS}"
    params = {"N": N, "H_kv": H, "D": D, "PS": PS, "NP": NP, "cache": cache_dtype, "bytes": bytes_moved}
    case_rows = []

    def rate(r, t):
        r["gbs"] = per_second(bytes_moved, t, 1e9)
        r["frac_of_copy_ceiling"] = r["gbs"] / COPY_CEILING_GBS

    def row(impl, t=None, note="", error=None, extra=None):
        case_rows.append(result_row("paged_kv_write", name, impl, params, "index_copy_", t, note, error, extra,
                                    rate=rate))

    def poison():
        kp.view(torch.uint8).fill_(0xFF)  # bf16 0xFFFF and e4m3 0xFF are NaN
        vp.view(torch.uint8).fill_(0xFF)

    # ---- attnjit
    snap = None
    if rt is None:
        row("attnjit plan_execute", error=args.rt_error)
    else:
        try:
            t0 = time.perf_counter()
            plan = rt.plan("paged_kv_write", {}, tensors)
            plan_s = time.perf_counter() - t0
            call = plan.bind(tensors)
            poison()
            call()
            torch.cuda.synchronize()
            snap = (kp.view(torch.uint8).clone(), vp.view(torch.uint8).clone())
            host = host_us_per_call(call, 20)
            t = bench(call, args.min_reps)
            row("attnjit plan_execute", t, f"plan_create {plan_s * 1e3:.0f} ms; host {host:.1f} us/call",
                extra={"plan_create_s": plan_s, "host_us_execute_bound": host})
            plan.close()
        except Exception as e:  # noqa: BLE001
            row("attnjit plan_execute", error=f"{type(e).__name__}: {e}")

    def compare(impl_note):
        """Bytes of the pools vs attnjit's (all rows are written: N == NP * PS)."""
        if snap is None:
            return {}, "no attnjit pool"
        dk = (kp.view(torch.uint8) != snap[0]).sum().item()
        dv = (vp.view(torch.uint8) != snap[1]).sum().item()
        if e4m3:
            a = kp.float()
            b = snap[0].view(torch.float8_e4m3fn).float()
        else:
            a = kp.float()
            b = snap[0].view(torch.bfloat16).float()
        mx = (a - b).abs().nan_to_num(float("inf")).max().item()
        nan_ours = int(torch.isnan(b).sum().item())
        check = "== attnjit" if dk + dv == 0 else f"{dk + dv} B differ"
        if nan_ours:
            check += f", attnjit NaN {nan_ours}"
        return {"bytes_differing": dk + dv, "maxabs_ref": mx, "nan_in_attnjit_pool": nan_ours}, check

    # ---- plain PyTorch peers (the same scatter, as torch writes it)
    kflat = kp.view(torch.uint8).view(NP * PS, H, D * esz) if e4m3 else kp.view(NP * PS, H, D)
    vflat = vp.view(torch.uint8).view(NP * PS, H, D * esz) if e4m3 else vp.view(NP * PS, H, D)

    def quant(x, s):
        # (x / scale) in fp32 (bf16 tensor / fp32 [1] tensor promotes to fp32), cast to e4m3, as bytes;
        # index_copy_ on uint8 views (float8 index ops are not implemented everywhere): same bytes.
        return (x / s).to(torch.float8_e4m3fn).view(torch.uint8)

    if e4m3:
        peers = [
            ("torch index_copy_", lambda: (kflat.index_copy_(0, slot, quant(k, k_scale)),
                                           vflat.index_copy_(0, slot, quant(v, v_scale))),
             "(k / k_scale).to(float8_e4m3fn) then index_copy_ on uint8 views"),
            ("torch index_put_", lambda: (kflat.index_put_((slot,), quant(k, k_scale)),
                                          vflat.index_put_((slot,), quant(v, v_scale))),
             "(k / k_scale).to(float8_e4m3fn) then pool[slot] = ... on uint8 views"),
        ]
    else:
        peers = [
            ("torch index_copy_", lambda: (kflat.index_copy_(0, slot, k), vflat.index_copy_(0, slot, v)),
             "k_pages.view(-1, H, D).index_copy_(0, slot_mapping, k)"),
            ("torch index_put_", lambda: (kflat.index_put_((slot,), k), vflat.index_put_((slot,), v)),
             "k_pages.view(-1, H, D)[slot_mapping] = k"),
        ]
    for impl, fn, note in peers:
        try:
            poison()
            fn()
            torch.cuda.synchronize()
            extra, check = compare(impl)
            t = bench(fn, args.min_reps)
            row(impl, t, note, extra=dict(extra, check=check))
        except Exception as e:  # noqa: BLE001
            row(impl, error=f"{type(e).__name__}: {e}")

    # ---- the ceiling: a device-to-device copy moving the same number of bytes (read + written)
    try:
        half = (bytes_moved // 2 + 15) // 16 * 16
        src = torch.randint(0, 256, (half,), dtype=torch.uint8, device=dev)
        dst = torch.empty_like(src)
        t = bench(lambda: dst.copy_(src), args.min_reps)
        row("torch d2d copy", t, f"dst.copy_(src) of {half / 2**20:.0f} MiB (same bytes read + written)")
    except Exception as e:  # noqa: BLE001
        row("torch d2d copy", error=f"{type(e).__name__}: {e}")

    peer_ms = next((r["ms"] for r in case_rows if r["impl"] == "torch index_copy_" and not r.get("error")), None)
    copy_ms = next((r["ms"] for r in case_rows if r["impl"] == "torch d2d copy" and not r.get("error")), None)
    for r in case_rows:
        if r.get("ms") and not r.get("error"):
            if peer_ms:
                r["ratio"] = peer_ms / r["ms"]
            if copy_ms:
                r["frac_of_measured_copy"] = copy_ms / r["ms"]
                r["note"] = f"{100 * copy_ms / r['ms']:.0f}% of copy; " + r["note"]
        add_row(r)


# ----------------------------------------------------------------------------------------------------

# ----------------------------------------------------------------------------------------------------
# decode suite: gqa_paged_fwd with one query token per request vs SDPA on contiguous K/V (memory bound)

DECODE_ISSUE_GBS = 4443.0  # the K/V read rate the issue quotes for decode


def decode_cases(quick):
    cases = []
    for B, ctx in ((64, 8192), (1, 131072)):
        for PS in ((16,) if quick else (16, 64)):
            cases.append(dict(B=B, ctx=ctx, PS=PS, H=32, H_kv=8, D=128, op="gqa_paged_fwd"))
    if not quick:  # MHA decode (mha_decode_paged: rank-3 pools, batched q)
        for B, ctx in ((64, 8192), (1, 131072)):
            cases.append(dict(B=B, ctx=ctx, PS=16, H=32, H_kv=32, D=128, op="mha_decode_paged"))
    return cases


def decode_name(c):
    mha = " mha" if c.get("op") == "mha_decode_paged" else ""
    return f"decode{mha} B{c['B']} ctx{c['ctx']} H{c['H']}/{c['H_kv']} D{c['D']} PS{c['PS']}"


def decode_reference_fp32(q, kc, vc, scale):
    """fp32 decode attention: q [B, H, D], kc / vc [B, H_kv, ctx, D] (contiguous) -> [B, H, D] fp32."""
    B, H, D = q.shape
    H_kv = kc.shape[1]
    g = H // H_kv
    out = torch.empty(B, H, D, dtype=torch.float32, device=q.device)
    prev_tf32 = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        for b in range(B):
            qf = q[b].float().view(H_kv, g, D)
            s = torch.einsum("kgd,ksd->kgs", qf, kc[b].float()) * scale  # [H_kv, g, ctx]
            p = torch.softmax(s, dim=-1)
            out[b] = torch.einsum("kgs,ksd->kgd", p, vc[b].float()).reshape(H, D)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = prev_tf32
    return out


def run_decode_case(rt, c, args):
    """bf16 decode: B requests of one query token over `ctx` cached keys. Ours: gqa_paged_fwd (packed q
    [B, H, D], pools [NP, PS, H_kv, D] with a shuffled page table) or mha_decode_paged (H_kv = H: q
    [B, 1, H, D], the same pools as rank-3 [NP * PS, H, D]), 'auto' and then 'portable'. Peers: torch SDPA (CUDNN_ATTENTION, then
    FLASH_ATTENTION) on contiguous K/V [B, H_kv, ctx, D] gathered from the same pools. GB/s = the K/V bytes
    of the H_kv heads (2 * B * ctx * H_kv * D * 2) / time, for every row (also when a peer needs K/V
    repeated to H heads: it then reads more, but is credited the same bytes)."""
    torch.manual_seed(777)
    B, ctx, PS, H, H_kv, D = c["B"], c["ctx"], c["PS"], c["H"], c["H_kv"], c["D"]
    g = H // H_kv
    dev, dt = "cuda", torch.bfloat16
    scale = 1.0 / math.sqrt(D)
    W = (ctx + PS - 1) // PS
    NP = B * W
    k_pages = torch.randn(NP, PS, H_kv, D, dtype=dt, device=dev)
    v_pages = torch.randn(NP, PS, H_kv, D, dtype=dt, device=dev)
    page_table = torch.randperm(NP, device=dev).view(B, W).to(torch.int32).contiguous()  # shuffled pages
    cache_seqlens = torch.full((B,), ctx, dtype=torch.int32, device=dev)
    cu = torch.arange(B + 1, dtype=torch.int32, device=dev)  # one query token per request
    q = torch.randn(B, H, D, dtype=dt, device=dev)
    o = torch.empty_like(q)
    kv_bytes = 2 * B * ctx * H_kv * D * 2
    name = decode_name(c)
    params = dict(c, W=W, NP=NP, kv_bytes=kv_bytes)
    peer = "sdpa CUDNN"
    case_rows = []

    # Contiguous BHSD K/V for the peers, gathered from the pools once (untimed).
    idx = page_table.long()
    kc = k_pages[idx].reshape(B, W * PS, H_kv, D)[:, :ctx].transpose(1, 2).contiguous()
    vc = v_pages[idx].reshape(B, W * PS, H_kv, D)[:, :ctx].transpose(1, 2).contiguous()
    ref = None if args.no_ref else decode_reference_fp32(q, kc, vc, scale)

    def rate(r, t):
        r["gbs"] = per_second(kv_bytes, t, 1e9)
        r["frac_of_issue_gbs"] = r["gbs"] / DECODE_ISSUE_GBS
        r["frac_of_copy_ceiling"] = r["gbs"] / COPY_CEILING_GBS
        return f"{100 * r['frac_of_issue_gbs']:.0f}% of {DECODE_ISSUE_GBS:.0f} GB/s; "

    def row(impl, t=None, out=None, note="", error=None, extra=None):
        r = result_row("decode", name, impl, params, peer, t, note, error, extra, rate=rate,
                       out_fields=output_fields(out, ref))
        case_rows.append(r)
        return r

    # ---- attnjit gqa_paged_fwd / mha_decode_paged ('auto'), then the same call on the portable backend
    ours_out = None
    op = c.get("op", "gqa_paged_fwd")
    if op == "mha_decode_paged":  # q [B, 1, H, D]; pools [NP * PS, H, D]; block_table, real_seqlen_kv
        tensors = {"q": q.view(B, 1, H, D), "k": k_pages.view(NP * PS, H_kv, D), "v": v_pages.view(NP * PS, H_kv, D),
                   "block_table": page_table, "real_seqlen_kv": cache_seqlens, "o": o.view(B, 1, H, D)}
        config = {"page_size": PS, "is_causal": False}
        layout = "batched q [B, 1, H, D], rank-3 pools"
    else:
        tensors = {"q": q, "k_pages": k_pages, "v_pages": v_pages, "page_table": page_table,
                   "cache_seqlens": cache_seqlens, "cu_seqlens_q": cu, "o": o}
        config = {"is_causal": False}  # one query at the last position: every key is visible either way
        layout = "packed q [B, H, D]"
    for label, cfg in ((f"attnjit {op}", config), (f"attnjit {op} portable", dict(config, backend="portable"))):
        if rt is None:
            row(label, error=args.rt_error)
            continue
        try:
            t0 = time.perf_counter()
            plan = rt.plan(op, cfg, tensors)
            plan_s = time.perf_counter() - t0
            call = plan.bind(tensors)
            o.fill_(float("nan"))
            call()
            torch.cuda.synchronize()
            out_now = o.clone()
            if ours_out is None:
                ours_out = out_now
            host = host_us_per_call(call)
            t = bench(call, args.min_reps)
            row(label, t, out_now, f"{layout}, shuffled pages; plan_create {plan_s * 1e3:.0f} ms; host {host:.1f} us/call",
                extra={"plan_create_s": plan_s, "host_us_execute_bound": host, "config": cfg})
            plan.close()
        except Exception as e:  # noqa: BLE001
            row(label, error=f"{type(e).__name__}: {e}")

    # ---- torch SDPA peers on contiguous K/V
    qt = q.view(B, H, 1, D)
    kv_rep = {}

    def repeated():
        if not kv_rep:  # once, outside every timed region
            kv_rep["k"] = kc.repeat_interleave(g, dim=1)
            kv_rep["v"] = vc.repeat_interleave(g, dim=1)
        return kv_rep["k"], kv_rep["v"]

    if sdpa_kernel is None:
        row("sdpa CUDNN", error="torch.nn.attention.sdpa_kernel not available")
    else:
        for impl, backend in (("sdpa CUDNN", SDPBackend.CUDNN_ATTENTION),
                              ("sdpa FLASH (FA2)", SDPBackend.FLASH_ATTENTION)):
            try:
                with sdpa_kernel(backend):
                    note = "enable_gqa=True on contiguous [B, H_kv, ctx, D]"
                    kk, vv, gqa = kc, vc, True
                    try:
                        out = F.scaled_dot_product_attention(qt, kk, vv, enable_gqa=True)
                    except RuntimeError as e1:
                        kk, vv = repeated()
                        gqa = False
                        note = (f"k/v repeat_interleave'd to H heads once, untimed (enable_gqa failed: "
                                f"{str(e1)[:80]}); reads {g}x the credited bytes")
                        out = F.scaled_dot_product_attention(qt, kk, vv)
                    torch.cuda.synchronize()
                    if gqa:
                        def fn(kk=kk, vv=vv):
                            return F.scaled_dot_product_attention(qt, kk, vv, enable_gqa=True)
                    else:
                        def fn(kk=kk, vv=vv):
                            return F.scaled_dot_product_attention(qt, kk, vv)
                    t = bench(fn, args.min_reps)
                out3 = out.reshape(B, H, D)
                extra = {}
                if ours_out is not None:
                    extra["err_vs_attnjit"] = rel_l2(out3, ours_out)
                row(impl, t, out3, note, extra=extra)
                del out
            except Exception as e:  # noqa: BLE001
                row(impl, error=f"{type(e).__name__}: {e}")

    peer_ms = next((r["ms"] for r in case_rows if r["impl"] == peer and not r.get("error")), None)
    add_with_ratio(case_rows, peer_ms, add_row)


# ----------------------------------------------------------------------------------------------------
# prefill_append suite: chunked prefill into a paged cache vs dense attention over the same keys


def prefill_append_cases(quick):
    olds = (0, 4096) if quick else (0, 4096, 12288)
    return [dict(B=1, q_len=4096, old=old, H=32, H_kv=8, D=128, PS=64) for old in olds]


def prefill_append_name(c):
    return f"append B{c['B']} chunk{c['q_len']} old{c['old']} H{c['H']}/{c['H_kv']} D{c['D']} PS{c['PS']}"


def run_prefill_append_case(rt, c, args):
    """bf16, causal (bottom-right): B requests each appending a q_len-token chunk to a paged cache of `old`
    tokens (shuffled pages of PS). Ours: gqa_prefill_paged_append (attention over old cached rows + the
    chunk, and the chunk's K/V appended to the pools), beside our gqa_fwd and torch SDPA FLASH (FA2) on the
    same dense problem (q [B, q_len, H, D] vs K/V [B, old + q_len, H_kv, D]; SDPA with a lower-right causal
    bias when old > 0, since its is_causal is top-left aligned). TFLOP/s = 4 * B * H * D * visible pairs."""
    torch.manual_seed(2468)
    B, q_len, old, H, H_kv, D, PS = c["B"], c["q_len"], c["old"], c["H"], c["H_kv"], c["D"], c["PS"]
    g = H // H_kv
    dev, dt = "cuda", torch.bfloat16
    scale = 1.0 / math.sqrt(D)
    S_kv = old + q_len
    need = (S_kv + PS - 1) // PS
    NP = B * need + 8
    W = need
    k_pages = torch.randn(NP * PS, H_kv, D, dtype=dt, device=dev)
    v_pages = torch.randn(NP * PS, H_kv, D, dtype=dt, device=dev)
    block_table = torch.randperm(NP, device=dev)[: B * need].view(B, need).to(torch.int32).contiguous()
    q = torch.randn(B * q_len, H, D, dtype=dt, device=dev)
    k_new = torch.randn(B * q_len, H_kv, D, dtype=dt, device=dev)
    v_new = torch.randn(B * q_len, H_kv, D, dtype=dt, device=dev)
    cu = torch.arange(0, (B + 1) * q_len, q_len, dtype=torch.int32, device=dev)
    cache_seqlens = torch.full((B,), old, dtype=torch.int32, device=dev)
    k_scale = torch.ones(1, dtype=torch.float32, device=dev)  # always passed; ignored for a bf16 cache
    v_scale = torch.ones(1, dtype=torch.float32, device=dev)
    o = torch.empty_like(q)
    pairs = visible_pairs(q_len, S_kv, True)
    flops = 4.0 * B * H * D * pairs
    name = prefill_append_name(c)
    params = dict(c, S_kv=S_kv, NP=NP, W=W, flops=flops, visible_pairs_per_bh=pairs)
    peer = "FA2"
    case_rows = []

    # Physical pool rows of every position 0..S_kv-1 of every request; the dense K/V the peers see.
    pos = torch.arange(S_kv, device=dev)
    rows = (block_table.long()[:, pos // PS] * PS + pos % PS)  # [B, S_kv]
    kd = torch.empty(B, S_kv, H_kv, D, dtype=dt, device=dev)
    vd = torch.empty(B, S_kv, H_kv, D, dtype=dt, device=dev)
    kd[:, :old] = k_pages[rows[:, :old]]
    vd[:, :old] = v_pages[rows[:, :old]]
    kd[:, old:] = k_new.view(B, q_len, H_kv, D)
    vd[:, old:] = v_new.view(B, q_len, H_kv, D)
    q4 = q.view(B, q_len, H, D)
    ref = None if args.no_ref else reference_fp32(q4, kd, vd, True, -1, -1, 0.0, scale)

    def row(impl, t=None, out=None, note="", error=None, extra=None):
        r = result_row("prefill_append", name, impl, params, peer, t, note, error, extra, rate=tflops_rate(flops),
                       out_fields=output_fields(out, ref))
        case_rows.append(r)
        return r

    peer_out = None
    # ---- torch SDPA FLASH (FA2) on the dense problem
    if sdpa_kernel is None:
        row("sdpa FLASH (FA2)", error="torch.nn.attention.sdpa_kernel not available")
    else:
        try:
            qt, kt, vt = q4.transpose(1, 2), kd.transpose(1, 2), vd.transpose(1, 2)
            mask, note = None, "is_causal (S_q == S_kv)"
            if old > 0:
                from torch.nn.attention.bias import causal_lower_right
                mask, note = causal_lower_right(q_len, S_kv), "attn_mask=causal_lower_right"
            with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
                kk, vv, gqa = kt, vt, True
                try:
                    out = F.scaled_dot_product_attention(qt, kk, vv, attn_mask=mask, is_causal=mask is None,
                                                         enable_gqa=True)
                    note += ", enable_gqa=True"
                except (RuntimeError, TypeError) as e1:
                    kk, vv = kt.repeat_interleave(g, dim=1), vt.repeat_interleave(g, dim=1)
                    gqa = False
                    note += f", k/v repeat_interleave'd once, untimed (enable_gqa failed: {str(e1)[:80]})"
                    out = F.scaled_dot_product_attention(qt, kk, vv, attn_mask=mask, is_causal=mask is None)
                torch.cuda.synchronize()
                if gqa:
                    def fn(kk=kk, vv=vv):
                        return F.scaled_dot_product_attention(qt, kk, vv, attn_mask=mask, is_causal=mask is None,
                                                              enable_gqa=True)
                else:
                    def fn(kk=kk, vv=vv):
                        return F.scaled_dot_product_attention(qt, kk, vv, attn_mask=mask, is_causal=mask is None)
                t = bench(fn, args.min_reps)
            peer_out = out.transpose(1, 2)
            row("sdpa FLASH (FA2)", t, peer_out, note + "; BHSD views of the dense BSHD K/V")
        except Exception as e:  # noqa: BLE001
            row("sdpa FLASH (FA2)", error=f"{type(e).__name__}: {e}")

    def check_vs_peer(out, extra):
        if peer_out is not None:
            extra["err_peer"] = rel_l2(out, peer_out)
            extra["check"] = "ok" if extra["err_peer"] < CHECK_TOL else "WRONG"
        return extra

    if rt is None:
        row("attnjit prefill_append", error=args.rt_error)
    else:
        # ---- attnjit gqa_prefill_paged_append
        tensors = {"q": q, "k_new": k_new, "v_new": v_new, "k_pages": k_pages, "v_pages": v_pages,
                   "k_scale": k_scale, "v_scale": v_scale, "cu_seqlens_q": cu, "cache_seqlens": cache_seqlens,
                   "block_table": block_table, "o": o}
        config = {"page_size": PS, "max_seqlen_q": q_len, "is_causal": True}
        try:
            new_rows = rows[:, old:].reshape(-1)
            k_pages[new_rows] = float("nan")  # poison the rows the call must append
            v_pages[new_rows] = float("nan")
            t0 = time.perf_counter()
            plan = rt.plan("gqa_prefill_paged_append", config, tensors)
            plan_s = time.perf_counter() - t0
            call = plan.bind(tensors)
            o.fill_(float("nan"))
            call()
            torch.cuda.synchronize()
            bad_k = int((k_pages[new_rows].view(torch.int16) != k_new.view(torch.int16)).sum().item())
            bad_v = int((v_pages[new_rows].view(torch.int16) != v_new.view(torch.int16)).sum().item())
            extra = check_vs_peer(o.view(B, q_len, H, D), {"plan_create_s": plan_s, "config": config,
                                                           "appended_elements_differing": bad_k + bad_v})
            if bad_k + bad_v:
                extra["check"] = "WRONG"
            host = host_us_per_call(call)
            t = bench(call, args.min_reps)  # re-appends the same rows each time (attention reads k_new)
            row("attnjit prefill_append", t, o.view(B, q_len, H, D),
                f"appended rows {'== k_new/v_new' if bad_k + bad_v == 0 else f'{bad_k + bad_v} elements differ'}; "
                f"plan_create {plan_s * 1e3:.0f} ms; host {host:.1f} us/call", extra=extra)
            plan.close()
        except Exception as e:  # noqa: BLE001
            row("attnjit prefill_append", error=f"{type(e).__name__}: {e}")
        # ---- attnjit gqa_fwd on the dense problem (bottom-right causal)
        try:
            o4 = torch.empty(B, q_len, H, D, dtype=dt, device=dev)
            dtensors = {"q": q4, "k": kd, "v": vd, "o": o4}
            plan = rt.plan("gqa_fwd", {"is_causal": True}, dtensors)
            call = plan.bind(dtensors)
            o4.fill_(float("nan"))
            call()
            torch.cuda.synchronize()
            extra = check_vs_peer(o4, {})
            t = bench(call, args.min_reps)
            row("attnjit gqa_fwd (dense)", t, o4, "the same keys as one dense BSHD K/V", extra=extra)
            plan.close()
        except Exception as e:  # noqa: BLE001
            row("attnjit gqa_fwd (dense)", error=f"{type(e).__name__}: {e}")

    peer_ms = next((r["ms"] for r in case_rows if r["impl"].startswith("sdpa FLASH") and not r.get("error")), None)
    order = {"attnjit prefill_append": 0, "attnjit gqa_fwd (dense)": 1}
    case_rows.sort(key=lambda r: order.get(r["impl"], 10))
    add_with_ratio(case_rows, peer_ms, add_row)


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



# ----------------------------------------------------------------------------------------------------
# bsa_bwd suite: block-sparse attention backward vs FlexAttention's backward on the same BlockMask

def run_bsa_bwd_case(rt, c, args):
    """bf16 BHSD MHA; every query block attends to K random distinct key blocks (fixed count). o and lse
    from attnjit's bsa_fwd when this build has it (else from torch math). FLOPs: 2.5 x 4 * B * H * D *
    visible pairs (FlashAttention's backward count)."""
    B, H, S, D, bs, K = c
    torch.manual_seed(4321)
    dev, dt = "cuda", torch.bfloat16
    N = S // bs
    name = f"bsa_bwd B{B} H{H} S{S} D{D} bs{bs} K{K}/{N}"
    q = torch.randn(B, H, S, D, dtype=dt, device=dev)
    k = torch.randn(B, H, S, D, dtype=dt, device=dev)
    v = torch.randn(B, H, S, D, dtype=dt, device=dev)
    do = torch.randn(B, H, S, D, dtype=dt, device=dev)
    index = torch.argsort(torch.rand(B, H, N, N, device=dev), dim=-1)[..., :K].to(torch.int32).contiguous()
    pairs = B * H * S * K * bs
    flops = 2.5 * 4.0 * pairs * D
    params = {"B": B, "H": H, "S": S, "D": D, "bs": bs, "K": K, "flops": flops}
    scale = 1.0 / math.sqrt(D)
    cfg = {"sparse_block_size": bs, "block_sparse_num": K}

    def row(impl, t=None, note="", error=None, err=None):
        r = {"suite": "bsa_bwd", "shape": name, "impl": impl, "params": params, "peer": "flex"}
        if error is not None:
            r["error"] = error
            return r
        r.update(ms=t["ms"], tflops=flops / (t["ms"] * 1e-3) / 1e12, reps=t["reps"], method=t["method"], note=note)
        if err is not None:
            r["err_peer"] = err
        return r

    # The forward's o and lse.
    o = torch.empty_like(q)
    lse = torch.empty(B, H, S, dtype=torch.float32, device=dev)
    o_note = "o, lse from attnjit bsa_fwd"
    try:
        rt.run("bsa_fwd", cfg, {"q": q, "k": k, "v": v, "q2k_block_index": index, "o": o, "lse": lse})
        torch.cuda.synchronize()
    except Exception:  # noqa: BLE001
        o_note = "o, lse from torch (bsa_fwd unavailable)"
        for h in range(H):
            keys = (index[:, h, :, :, None].long() * bs + torch.arange(bs, device=dev)).reshape(B, N, K * bs)
            for b in range(B):
                kk, vv = k[b, h][keys[b]].float(), v[b, h][keys[b]].float()  # [N, K*bs, D]
                qq = q[b, h].float().view(N, bs, D)
                z = torch.einsum("nqd,nkd->nqk", qq, kk) * scale
                lse[b, h] = torch.logsumexp(z, dim=-1).reshape(S)
                o[b, h] = torch.einsum("nqk,nkd->nqd", torch.softmax(z, dim=-1), vv).reshape(S, D).to(dt)

    rows = []
    ours = None
    dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
    tensors = {"do": do, "q": q, "k": k, "v": v, "o": o, "lse": lse, "q2k_block_index": index,
               "dq": dq, "dk": dk, "dv": dv}
    try:
        plan = rt.plan("bsa_bwd", cfg, tensors)
        call = plan.bind(tensors)
        t = bench(call, min_reps=args.min_reps)
        ours = (dq.clone(), dk.clone(), dv.clone())
        rows.append(row("attnjit bsa_bwd", t, note=o_note))
    except Exception as e:  # noqa: BLE001
        rows.append(row("attnjit bsa_bwd", error=f"{type(e).__name__}: {e}"))
    # The portable kernel on the same call ("auto" takes the hopper one on sm_90a).
    try:
        pdq, pdk, pdv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
        ptensors = dict(tensors, dq=pdq, dk=pdk, dv=pdv)
        plan = rt.plan("bsa_bwd", dict(cfg, backend="portable"), ptensors)
        call = plan.bind(ptensors)
        t = bench(call, min_reps=args.min_reps)
        err = max(rel_l2(a, b) for a, b in zip(ours, (pdq, pdk, pdv))) if ours is not None else None
        rows.append(row("attnjit bsa_bwd portable", t, note="err_peer: vs the auto plan's gradients", err=err))
    except Exception as e:  # noqa: BLE001
        rows.append(row("attnjit bsa_bwd portable", error=f"{type(e).__name__}: {e}"))
    # Other builds of the library on the same call (--ab-lib), for A/B comparisons in one process.
    for ab_name, ab_rt in args.ab_rts:
        try:
            adq, adk, adv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
            atensors = dict(tensors, dq=adq, dk=adk, dv=adv)
            call = ab_rt.plan("bsa_bwd", cfg, atensors).bind(atensors)
            t = bench(call, min_reps=args.min_reps)
            err = max(rel_l2(a, b) for a, b in zip(ours, (adq, adk, adv))) if ours is not None else None
            rows.append(row(f"attnjit bsa_bwd [{ab_name}]", t, note="err_peer: vs the --lib plan's gradients", err=err))
        except Exception as e:  # noqa: BLE001
            rows.append(row(f"attnjit bsa_bwd [{ab_name}]", error=f"{type(e).__name__}: {e}"))

    # FlexAttention: the same pattern as a BlockMask of full blocks (no mask_mod evaluation); its backward
    # through autograd on the compiled flex_attention, timed alone (retain_graph).
    try:
        bm = bsa_block_mask(index, B, H, N, K, bs)
        fq, fk, fv = (x.detach().clone().requires_grad_(True) for x in (q, k, v))
        out = flex_compiled()(fq, fk, fv, block_mask=bm, scale=scale, **flex_block_kwargs(bs))

        def flex_bwd():
            return torch.autograd.grad(out, (fq, fk, fv), do, retain_graph=True)

        grads = flex_bwd()
        t = bench(flex_bwd, min_reps=args.min_reps)
        err = None
        if ours is not None:
            err = max(rel_l2(a, b) for a, b in zip(ours, grads))
        rows.append(row("flex backward", t, note="torch.compile(flex_attention), autograd.grad"
                        + (f", {bs}-token tiles" if bs < 128 else ""), err=err))
    except Exception as e:  # noqa: BLE001
        rows.append(row("flex backward", error=f"{type(e).__name__}: {e}"))
    peer = next((r for r in rows if r["impl"] == "flex backward" and "ms" in r), None)
    for r in rows:
        if peer is not None and "ms" in r:
            r["ratio"] = peer["ms"] / r["ms"]
        add_row(r)


# bsa suite: block-sparse attention forward (bsa_fwd, bsa_fp8_fwd) vs FlexAttention on the same BlockMask.
# The backward rows live in the bsa_bwd suite above (same shapes, same BlockMask construction).

def bsa_cases(quick):
    # (B, H, S, D, block size, active blocks per query block)
    cases = [(1, 32, 16384, 128, 128, 16), (1, 32, 16384, 128, 64, 32)]
    return cases[:1] if quick else cases


def flex_block_kwargs(bs):
    """flex_attention's default tiles are 128 on Hopper and refuse a BlockMask of 64-token blocks ("Q and KV
    block size must be divisible by BLOCK_M and BLOCK_N"): below 128, ask for tiles of the block size in
    the forward (BLOCK_M / BLOCK_N) and both backward kernels (BLOCK_M1 / N1 for dK, dV; M2 / N2 for dQ)."""
    if bs >= 128:
        return {}
    return {"kernel_options": {k: bs for k in ("BLOCK_M", "BLOCK_N", "BLOCK_M1", "BLOCK_N1", "BLOCK_M2", "BLOCK_N2")}}


def bsa_block_mask(index, B, H, N, K, bs):
    """FlexAttention BlockMask of full blocks listing the same key blocks per query block as `index`."""
    from torch.nn.attention.flex_attention import BlockMask
    dev = index.device
    full_idx = torch.zeros(B, H, N, N, dtype=torch.int32, device=dev)
    full_idx[..., :K] = torch.sort(index, dim=-1).values
    full_num = torch.full((B, H, N), K, dtype=torch.int32, device=dev)
    zero_num = torch.zeros(B, H, N, dtype=torch.int32, device=dev)
    return BlockMask.from_kv_blocks(zero_num, torch.zeros_like(full_idx), full_num, full_idx, BLOCK_SIZE=(bs, bs))


def run_bsa_case(rt, c, args):
    """bf16 BHSD MHA; every query block attends to K random distinct key blocks (fixed count). Rows:
    attnjit bsa_fwd (kv_splits 1 and "auto"), attnjit bsa_fp8_fwd (bs 64 only), torch.compile'd
    flex_attention with the equivalent BlockMask, all in this process on the same tensors. FLOPs: 4 * B * H
    * D * visible pairs. err_peer: rel_l2 of o against flex's output."""
    B, H, S, D, bs, K = c
    torch.manual_seed(1234)
    dev, dt = "cuda", torch.bfloat16
    N = S // bs
    name = f"bsa_fwd B{B} H{H} S{S} D{D} bs{bs} K{K}/{N}"
    q = torch.randn(B, H, S, D, dtype=dt, device=dev)
    k = torch.randn(B, H, S, D, dtype=dt, device=dev)
    v = torch.randn(B, H, S, D, dtype=dt, device=dev)
    index = torch.argsort(torch.rand(B, H, N, N, device=dev), dim=-1)[..., :K].to(torch.int32).contiguous()
    pairs = B * H * S * K * bs
    flops = 4.0 * pairs * D
    params = {"B": B, "H": H, "S": S, "D": D, "bs": bs, "K": K, "flops": flops}
    scale = 1.0 / math.sqrt(D)

    def row(impl, t=None, note="", error=None, err=None):
        r = {"suite": "bsa", "shape": name, "impl": impl, "params": params, "peer": "flex"}
        if error is not None:
            r["error"] = error
            return r
        r.update(ms=t["ms"], tflops=flops / (t["ms"] * 1e-3) / 1e12, reps=t["reps"], method=t["method"], note=note)
        if err is not None:
            r["err_peer"] = err
        return r

    rows = []
    peer_out = None
    try:
        bm = bsa_block_mask(index, B, H, N, K, bs)
        fx = flex_compiled()
        kw = flex_block_kwargs(bs)
        peer_out = fx(q, k, v, block_mask=bm, scale=scale, **kw)
        t = bench(lambda: fx(q, k, v, block_mask=bm, scale=scale, **kw), min_reps=args.min_reps)
        rows.append(row("flex (compiled)", t, note="torch.compile(flex_attention), BlockMask.from_kv_blocks"
                        + (f", {bs}-token tiles" if kw else "")))
    except Exception as e:  # noqa: BLE001
        rows.append(row("flex (compiled)", error=f"{type(e).__name__}: {e}"))
    # 'auto' takes the hopper kernel on sm_90a where it serves the call (block size 128); the portable
    # rows pin the backend.
    variants = [("attnjit bsa_fwd", "bsa_fwd", {"sparse_block_size": bs, "block_sparse_num": K}),
                ("attnjit bsa_fwd portable", "bsa_fwd",
                 {"sparse_block_size": bs, "block_sparse_num": K, "backend": "portable"}),
                ("attnjit bsa_fwd portable kv_splits auto", "bsa_fwd",
                 {"sparse_block_size": bs, "block_sparse_num": K, "kv_splits": "auto", "backend": "portable"})]
    if bs == 64:
        # 'auto' takes the FP8 wgmma kernel on sm_90a.
        variants.append(("attnjit bsa_fp8_fwd", "bsa_fp8_fwd", {"block_sparse_num": K}))
        variants.append(("attnjit bsa_fp8_fwd portable", "bsa_fp8_fwd", {"block_sparse_num": K, "backend": "portable"}))
    outs = {}
    for impl, op, cfg in variants:
        o = torch.empty_like(q)
        tensors = {"q": q, "k": k, "v": v, "q2k_block_index": index, "o": o}
        if op == "bsa_fwd":
            tensors["lse"] = torch.empty(B, H, S, dtype=torch.float32, device=dev)
        try:
            plan = rt.plan(op, cfg, tensors)
            call = plan.bind(tensors)
            t = bench(call, min_reps=args.min_reps)
            err = rel_l2(o, peer_out) if peer_out is not None else None
            rows.append(row(impl, t, note=plan.describe() if hasattr(plan, "describe") else "", err=err))
            outs[impl] = (op, cfg, o)
        except Exception as e:  # noqa: BLE001
            rows.append(row(impl, error=f"{type(e).__name__}: {e}"))
    # The FP8 forward's accuracy against the bf16 forward (attnjit bsa_fwd, 'auto'), on these N(0, 1) inputs
    # and on the same inputs scaled by 0.5 (SPEC.md §2.6's test distribution).
    if "attnjit bsa_fwd" in outs:
        for r in rows:
            if r["impl"] in outs and outs[r["impl"]][0] == "bsa_fp8_fwd":
                r["err_bf16"] = rel_l2(outs[r["impl"]][2], outs["attnjit bsa_fwd"][2])
        try:
            qh, kh, vh = 0.5 * q, 0.5 * k, 0.5 * v
            half = {}
            for impl, (op, cfg, _) in outs.items():
                if impl != "attnjit bsa_fwd" and op != "bsa_fp8_fwd":
                    continue
                o = torch.empty_like(q)
                tensors = {"q": qh, "k": kh, "v": vh, "q2k_block_index": index, "o": o}
                if op == "bsa_fwd":
                    tensors["lse"] = torch.empty(B, H, S, dtype=torch.float32, device=dev)
                rt.plan(op, cfg, tensors).bind(tensors)()
                half[impl] = o
            torch.cuda.synchronize()
            for r in rows:
                if r["impl"] in half and r["impl"] != "attnjit bsa_fwd":
                    r["err_bf16_std0.5"] = rel_l2(half[r["impl"]], half["attnjit bsa_fwd"])
        except Exception as e:  # noqa: BLE001
            print(f"bsa: fp8 accuracy at std 0.5 not measured: {type(e).__name__}: {e}", file=sys.stderr)
    peer = next((r for r in rows if r["impl"] == "flex (compiled)" and "ms" in r), None)
    for r in rows:
        if peer is not None and "ms" in r:
            r["ratio"] = peer["ms"] / r["ms"]
        add_row(r)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lib", default=None, help="libattnjit.so (default: $ATTNJIT_LIB, then <repo>/build)")
    ap.add_argument("--suite", choices=("gqa", "paged_kv_write", "lightning_indexer", "bsa", "bsa_bwd", "decode",
                                        "prefill_append", "fp8_lightning_indexer", "topk_select", "all"),
                    default="all")
    ap.add_argument("--json", default=None, help="write every result (and the environment) here")
    ap.add_argument("--quick", action="store_true", help="a reduced set: D=128 S=4096 causal/full/window/softcap")
    ap.add_argument("--options", default=None, help="attnjit RuntimeOptions as JSON, e.g. '{\"log_level\":\"warn\"}'")
    ap.add_argument("--min-reps", type=int, default=20, help="at least this many timed repetitions (default 20)")
    ap.add_argument("--l2", choices=("flush", "stream"), default="flush",
                    help="flush: L2 flushed before every repetition (default); stream: calls back to back, no flush")
    ap.add_argument("--no-ref", action="store_true", help="skip the fp32 reference (errors vs peer only)")
    ap.add_argument("--no-varlen", action="store_true", help="skip the gqa_varlen_fwd rows")
    ap.add_argument("--ab-lib", action="append", default=[], metavar="NAME=PATH",
                    help="another libattnjit.so timed beside --lib on the same tensors (bsa_bwd, lightning_indexer); repeatable")
    args = ap.parse_args()
    global L2_MODE
    L2_MODE = args.l2

    if not torch.cuda.is_available():
        print("bench_torch.py needs a CUDA device", file=sys.stderr)
        return 2
    torch.cuda.init()
    dev_name = torch.cuda.get_device_name()
    meta = {
        "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "host": platform.node(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
        "device": dev_name,
        "argv": sys.argv,
        "timing": ("cuda events, back to back, no L2 flush" if args.l2 == "stream" else
                   "triton.testing.do_bench" if triton_do_bench else "cuda events"),
        "ceilings": {"bf16_gemm_tflops": GEMM_CEILING_TFLOPS, "d2d_copy_gbs": COPY_CEILING_GBS},
    }
    try:
        import triton
        meta["triton"] = triton.__version__
    except Exception:  # noqa: BLE001
        meta["triton"] = None

    rt = None
    args.rt_error = None
    try:
        rt = aj.Runtime(json.loads(args.options) if args.options else None, lib=args.lib)
        meta["lib"] = rt.library_path
    except Exception as e:  # noqa: BLE001
        args.rt_error = f"{type(e).__name__}: {e}"
        meta["lib_error"] = args.rt_error
    args.ab_rts = []
    for spec in args.ab_lib:
        ab_name, _, ab_path = spec.partition("=")
        args.ab_rts.append((ab_name, aj.Runtime(json.loads(args.options) if args.options else None, lib=ab_path)))
        meta.setdefault("ab_libs", {})[ab_name] = ab_path
    print(f"device {dev_name}; torch {torch.__version__}; triton {meta['triton']}; cudnn {meta['cudnn']}; "
          f"attnjit {meta.get('lib', args.rt_error)}")

    try:
        if args.suite in ("gqa", "all"):
            for c in gqa_cases(args.quick):
                run_case("gqa", case_name(c), case_name(c), lambda: run_gqa_case(rt, c, args))
        if args.suite in ("paged_kv_write", "all"):
            for cache in ("bf16", "e4m3"):
                run_case("paged_kv_write", f"bf16 -> {cache}", f"paged_kv_write bf16->{cache}",
                         lambda: run_paged_kv_write(rt, cache, args))
        if args.suite in ("lightning_indexer", "all"):
            for T, causal in ((8192, True), (32768, True), (8192, False)):
                run_case("lightning_indexer", f"T={T} {'causal' if causal else 'full'}", f"indexer T{T}",
                         lambda: run_lightning_indexer(rt, T, causal, args))
        for suite in ("fp8_lightning_indexer", "topk_select"):
            if args.suite in (suite, "all"):
                import bench_torch_fp8_indexer as fp8b  # the suites live in their own module
                run_case(suite, None, suite, lambda: (
                    fp8b.run_fp8_indexer if suite == "fp8_lightning_indexer" else fp8b.run_topk_select)(
                        rt, args, bench, add_row))
        if args.suite in ("bsa", "all"):
            for c in bsa_cases(args.quick):
                run_case("bsa", c, f"bsa_fwd {c}", lambda: run_bsa_case(rt, c, args))
        if args.suite in ("bsa_bwd", "all"):
            for c in bsa_cases(args.quick):  # the bsa suite's shapes
                run_case("bsa_bwd", c, f"bsa_bwd {c}", lambda: run_bsa_bwd_case(rt, c, args))
        if args.suite in ("decode", "all"):
            for c in decode_cases(args.quick):
                run_case("decode", decode_name(c), decode_name(c), lambda: run_decode_case(rt, c, args))
        if args.suite in ("prefill_append", "all"):
            for c in prefill_append_cases(args.quick):
                run_case("prefill_append", prefill_append_name(c), prefill_append_name(c),
                         lambda: run_prefill_append_case(rt, c, args))
    finally:
        print_table()
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"meta": meta, "results": ROWS}, f, indent=1, default=str)
            print(f"wrote {args.json}")
        if rt is not None:
            rt.close()
    wrong = [r for r in ROWS if r.get("check") == "WRONG"]
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
