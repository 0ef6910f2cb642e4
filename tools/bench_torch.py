#!/usr/bin/env python3
"""Side-by-side benchmark of attnjit against PyTorch peers, in one process, on the same tensors.

Run on the GPU host (H200; PyTorch with CUDA, Triton, cuDNN):

    python3 tools/bench_torch.py --lib build/libattnjit.so [--suite gqa|paged_kv_write|all] \
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

Timing (GPU.md "Measuring"): CUDA events after warm-up, the median of >= 20 repetitions
(triton.testing.do_bench with L2 flushed before every repetition, its rep time stretched so that
long kernels still get >= 20 repetitions; our own event loop, also flushing L2, when triton is absent).
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
        r = {"suite": "gqa", "shape": name, "impl": impl, "params": params, "peer": peer}
        if error is not None:
            r["error"] = error
        if t is not None:
            r.update(t)
            r["tflops"] = flops / (t["ms"] * 1e-3) / 1e12
            r["frac_of_gemm_ceiling"] = r["tflops"] / GEMM_CEILING_TFLOPS
        if out is not None:
            if ref is not None:
                r["err_ref"] = rel_l2(out, ref)
                r["maxabs_ref"] = max_abs(out, ref)
            r["nan_count"] = int(torch.isnan(out).sum().item())
        r["note"] = note
        if extra:
            r.update(extra)
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
    order = {"attnjit plan_execute": 0, "attnjit run (cached)": 1, "attnjit varlen_fwd": 2}
    case_rows.sort(key=lambda r: order.get(r["impl"], 10))
    for r in case_rows:
        if peer_ms and r.get("ms") and not r.get("error"):
            r["ratio"] = peer_ms / r["ms"]
        add_row(r)


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

    def row(impl, t=None, note="", error=None, extra=None):
        r = {"suite": "paged_kv_write", "shape": name, "impl": impl, "params": params, "peer": "index_copy_"}
        if error is not None:
            r["error"] = error
        if t is not None:
            r.update(t)
            r["gbs"] = bytes_moved / (t["ms"] * 1e-3) / 1e9
            r["frac_of_copy_ceiling"] = r["gbs"] / COPY_CEILING_GBS
        r["note"] = note
        if extra:
            r.update(extra)
        case_rows.append(r)

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

def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lib", default=None, help="libattnjit.so (default: $ATTNJIT_LIB, then <repo>/build)")
    ap.add_argument("--suite", choices=("gqa", "paged_kv_write", "all"), default="all")
    ap.add_argument("--json", default=None, help="write every result (and the environment) here")
    ap.add_argument("--quick", action="store_true", help="a reduced set: D=128 S=4096 causal/full/window/softcap")
    ap.add_argument("--options", default=None, help="attnjit RuntimeOptions as JSON, e.g. '{\"log_level\":\"warn\"}'")
    ap.add_argument("--min-reps", type=int, default=20, help="at least this many timed repetitions (default 20)")
    ap.add_argument("--no-ref", action="store_true", help="skip the fp32 reference (errors vs peer only)")
    ap.add_argument("--no-varlen", action="store_true", help="skip the gqa_varlen_fwd rows")
    args = ap.parse_args()

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
        "timing": "triton.testing.do_bench" if triton_do_bench else "cuda events",
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
    print(f"device {dev_name}; torch {torch.__version__}; triton {meta['triton']}; cudnn {meta['cudnn']}; "
          f"attnjit {meta.get('lib', args.rt_error)}")

    try:
        if args.suite in ("gqa", "all"):
            for c in gqa_cases(args.quick):
                print(f"[gqa] {case_name(c)}")
                sys.stdout.flush()
                try:
                    run_gqa_case(rt, c, args)
                    torch.cuda.empty_cache()
                except Exception as e:  # noqa: BLE001
                    traceback.print_exc()
                    add_row({"suite": "gqa", "shape": case_name(c), "impl": "(case)", "error": f"{type(e).__name__}: {e}"})
                    torch.cuda.empty_cache()
        if args.suite in ("paged_kv_write", "all"):
            for cache in ("bf16", "e4m3"):
                print(f"[paged_kv_write] bf16 -> {cache}")
                sys.stdout.flush()
                try:
                    run_paged_kv_write(rt, cache, args)
                    torch.cuda.empty_cache()
                except Exception as e:  # noqa: BLE001
                    traceback.print_exc()
                    add_row({"suite": "paged_kv_write", "shape": f"paged_kv_write bf16->{cache}", "impl": "(case)",
                             "error": f"{type(e).__name__}: {e}"})
                    torch.cuda.empty_cache()
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
