"""The dense family's suite of tools/bench/bench_torch.py: gqa (gqa_fwd and gqa_varlen_fwd vs SDPA FLASH /
CUDNN and flex_attention).
"""
from __future__ import annotations

import math
import time
import warnings

import torch
import torch.nn.functional as F
from bench_rows import add_with_ratio, result_row
from bench_common import (CHECK_TOL, SDPBackend, add_row, bench, create_block_mask, flex_attention, flex_compiled,
                          host_us_per_call, output_fields, reference_fp32, rel_l2, sdpa_kernel, tflops_rate,
                          visible_pairs)


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
