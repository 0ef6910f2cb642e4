"""The shared part of the torch peer benchmarks (tools/bench/bench_torch.py and its per-family suite
modules): imports of torch and its optional peers (SDPA backends, FlexAttention, triton's timer), the
ceilings, timing (CUDA events / triton.testing.do_bench, L2 flush or --l2 stream), error and FLOP helpers,
the fp32 attention reference, and the result rows and table. See bench_torch.py's docstring for the method.
"""
from __future__ import annotations

import os
import re
import statistics
import sys
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_rows import per_second  # noqa: E402

import torch  # noqa: E402

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


MATCH = None  # --match: a regex; cases whose label does not match it are skipped


def run_case(suite, label, shape, fn):
    """One case of a suite: prints "[suite] label" ("[suite]" without a label) and runs fn(); an exception
    becomes an "(case)" error row of that shape (traceback on stderr). Frees torch's cached GPU memory.
    Skipped when MATCH is set and does not match the label (or the shape when there is no label)."""
    if MATCH is not None and not re.search(MATCH, label if label is not None else str(shape)):
        return
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


_FLEX_COMPILED = None


def flex_compiled():
    global _FLEX_COMPILED
    if _FLEX_COMPILED is None:
        _FLEX_COMPILED = torch.compile(flex_attention, dynamic=False)
    return _FLEX_COMPILED
