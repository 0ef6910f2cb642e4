"""The dense family's suites of tools/bench/bench_torch.py: gqa (gqa_fwd and gqa_varlen_fwd vs SDPA FLASH /
CUDNN and flex_attention) and gqa_bwd (gqa_bwd vs the SDPA FLASH / CUDNN backward through autograd).
"""
from __future__ import annotations

import itertools
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
        # Each explicit backend on the same call: hopper (wgmma, TMA) and portable (mma.sync); then other
        # builds of the library (--ab-lib), each's auto plan, for A/B comparisons in one process.
        variants = [("attnjit hopper", rt, dict(config, backend="hopper"), "backend 'hopper' (wgmma, TMA, warp-specialised)"),
                    ("attnjit portable", rt, dict(config, backend="portable"),
                     "backend 'portable' (mma.sync, cp.async; FlashAttention-2 style)")]
        variants += [(f"attnjit plan_execute [{n}]", ab_rt, config, "another build (--ab-lib), same tensors")
                     for n, ab_rt in getattr(args, "ab_rts", [])]
        for impl, vrt, vconfig, vnote in variants:
            try:
                hplan = vrt.plan("gqa_fwd", vconfig, tensors)
                hcall = hplan.bind(tensors)
                o.fill_(float("nan"))
                hcall()
                torch.cuda.synchronize()
                extra = {"config": vconfig}
                if peer_out is not None:
                    extra["err_peer"] = rel_l2(o, peer_out)
                    extra["check"] = "ok" if extra["err_peer"] < CHECK_TOL else "WRONG"
                t = bench(hcall, args.min_reps)
                row(impl, t, o, vnote, extra=extra)
                hplan.close()
            except Exception as e:  # noqa: BLE001
                row(impl, error=f"{type(e).__name__}: {e}")
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
# gqa_bwd suite: dense GQA backward vs the SDPA FLASH (FA2, the named peer) and CUDNN backward

def gqa_bwd_cases(quick):
    """The gqa suite's shapes without windows or softcap (gqa_bwd has neither): D 128 at B x S = 16384 for
    S 1024, 4096, 16384; D 64 (B 4, S 4096, H 32/8); D 256 (B 4, S 4096, H 16/4); causal and not. --quick:
    D 128 S 4096, causal and not."""
    return [c for c in gqa_cases(quick) if c["wl"] < 0 and not c["softcap"]]


def gqa_bwd_name(c):
    return "bwd " + case_name(c)


def torch_o_lse(q, k, v, causal, scale):
    """o (dtype of q) and lse (fp32, natural log) of the forward in fp32 torch math, chunked over queries:
    the fallback when attnjit's gqa_fwd cannot serve the call."""
    B, S, H, D = q.shape
    H_kv = k.shape[2]
    g = H // H_kv
    o = torch.empty_like(q)
    lse = torch.empty(B, H, S, dtype=torch.float32, device=q.device)
    chunk = max(1, min(S, (1 << 28) // (H * S)))  # <= 1 GiB of fp32 scores
    prev_tf32 = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        j = torch.arange(S, device=q.device)[None, :]
        for b in range(B):
            kf = k[b].float().transpose(0, 1).repeat_interleave(g, 0)  # [H, S, D]
            vf = v[b].float().transpose(0, 1).repeat_interleave(g, 0)
            for c0 in range(0, S, chunk):
                c1 = min(S, c0 + chunk)
                s = torch.matmul(q[b, c0:c1].float().transpose(0, 1), kf.transpose(1, 2)).mul_(scale)
                if causal:
                    i = torch.arange(c0, c1, device=q.device)[:, None]
                    s.masked_fill_(j > i, float("-inf"))
                lse[b, :, c0:c1] = torch.logsumexp(s, dim=-1)
                o[b, c0:c1] = torch.matmul(torch.softmax(s, dim=-1), vf).transpose(0, 1).to(q.dtype)
                del s
    finally:
        torch.backends.cuda.matmul.allow_tf32 = prev_tf32
    return o, lse


def max_rel_l2(ours, ref):
    """The largest rel L2 of (dq, dk, dv) against the reference gradients (BSHD-shaped, any strides)."""
    return max(rel_l2(a, b) for a, b in zip(ours, ref))


def run_gqa_bwd_case(rt, c, args):
    """bf16 BSHD GQA backward. q, k, v, do random (seed fixed); o and lse from attnjit's gqa_fwd (torch fp32
    math when it cannot serve the call). Rows: attnjit gqa_bwd (backend auto), portable, deterministic
    (auto + deterministic, with a bitwise-repeatability check), each --ab-lib build's auto and deterministic; SDPA FLASH (FA2) and
    CUDNN backward through autograd on BHSD transposed views, the forward run once untimed and
    torch.autograd.grad(out, (q, k, v), do, retain_graph=True) timed alone. err_peer: the largest rel L2
    of dq, dk, dv against FA2's gradients (cuDNN's when FLASH fails). FLOPs: 2.5 x 4 B H D x visible pairs
    (FlashAttention's backward count; causal counts S (S + 1) / 2 pairs)."""
    torch.manual_seed(4321)
    B, S, H, H_kv, D = c["B"], c["S"], c["H"], c["H_kv"], c["D"]
    causal = c["causal"]
    g = H // H_kv
    scale = 1.0 / math.sqrt(D)
    dev, dt = "cuda", torch.bfloat16
    q = torch.randn(B, S, H, D, dtype=dt, device=dev)
    k = torch.randn(B, S, H_kv, D, dtype=dt, device=dev)
    v = torch.randn(B, S, H_kv, D, dtype=dt, device=dev)
    do = torch.randn(B, S, H, D, dtype=dt, device=dev)
    name = gqa_bwd_name(c)
    pairs = visible_pairs(S, S, causal)
    flops = 2.5 * 4.0 * B * H * D * pairs
    params = dict(B=B, S=S, H=H, H_kv=H_kv, D=D, causal=causal, flops=flops, visible_pairs_per_bh=pairs)
    config = {"is_causal": causal}
    case_rows = []

    def row(impl, t=None, note="", error=None, extra=None):
        r = result_row("gqa_bwd", name, impl, params, "FA2", t, note, error, extra, rate=tflops_rate(flops))
        case_rows.append(r)
        return r

    # ---- The forward's o and lse.
    o = torch.empty_like(q)
    lse = torch.empty(B, H, S, dtype=torch.float32, device=dev)
    o_note = "o, lse from attnjit gqa_fwd"
    try:
        if rt is None:
            raise RuntimeError(args.rt_error)
        rt.run("gqa_fwd", config, {"q": q, "k": k, "v": v, "o": o, "lse": lse})
        torch.cuda.synchronize()
    except Exception as e:  # noqa: BLE001
        o_note = f"o, lse from torch fp32 math (gqa_fwd unavailable: {type(e).__name__})"
        o, lse = torch_o_lse(q, k, v, causal, scale)
        torch.cuda.synchronize()

    # ---- torch SDPA backward: FLASH (FA2, the peer) and CUDNN, on BHSD transposed views of the BSHD tensors.
    peer_grads = {}  # impl -> (dq, dk, dv) as BSHD-shaped views
    do_t = do.transpose(1, 2)
    if sdpa_kernel is None:
        row("sdpa FLASH (FA2) bwd", error="torch.nn.attention.sdpa_kernel not available")
    else:
        for impl, backend in (("sdpa FLASH (FA2) bwd", SDPBackend.FLASH_ATTENTION),
                              ("sdpa CUDNN bwd", SDPBackend.CUDNN_ATTENTION)):
            try:
                with sdpa_kernel(backend):
                    qq = q.transpose(1, 2).detach().requires_grad_(True)
                    note = "enable_gqa=True"
                    try:
                        kk = k.transpose(1, 2).detach().requires_grad_(True)
                        vv = v.transpose(1, 2).detach().requires_grad_(True)
                        out = F.scaled_dot_product_attention(qq, kk, vv, is_causal=causal, enable_gqa=True)
                        grads = torch.autograd.grad(out, (qq, kk, vv), do_t, retain_graph=True)
                        torch.cuda.synchronize()
                        rep = False
                    except Exception as e1:  # noqa: BLE001 -- GQA refused: K/V repeated to H heads
                        out = grads = None
                        kk = k.transpose(1, 2).repeat_interleave(g, dim=1).detach().requires_grad_(True)
                        vv = v.transpose(1, 2).repeat_interleave(g, dim=1).detach().requires_grad_(True)
                        out = F.scaled_dot_product_attention(qq, kk, vv, is_causal=causal)
                        grads = torch.autograd.grad(out, (qq, kk, vv), do_t, retain_graph=True)
                        torch.cuda.synchronize()
                        rep = True
                        note = (f"k/v repeat_interleave'd to H heads once, untimed; dk, dv summed over each group "
                                f"after timing (enable_gqa failed: {type(e1).__name__}: {str(e1)[:80]})")

                    def fn(out=out, qq=qq, kk=kk, vv=vv):
                        return torch.autograd.grad(out, (qq, kk, vv), do_t, retain_graph=True)

                    t = bench(fn, args.min_reps)
                dq_p, dk_p, dv_p = grads
                if rep:  # [B, H, S, D] -> the group sums [B, H_kv, S, D], in fp32
                    dk_p = dk_p.float().reshape(B, H_kv, g, S, D).sum(2)
                    dv_p = dv_p.float().reshape(B, H_kv, g, S, D).sum(2)
                peer_grads[impl] = (dq_p.transpose(1, 2), dk_p.transpose(1, 2), dv_p.transpose(1, 2))
                note += "; forward once outside the timed region, autograd.grad(retain_graph=True) timed"
                extra = {}
                if impl != "sdpa FLASH (FA2) bwd" and "sdpa FLASH (FA2) bwd" in peer_grads:
                    extra["err_peer"] = max_rel_l2(peer_grads[impl], peer_grads["sdpa FLASH (FA2) bwd"])
                row(impl, t, note, extra=extra)
                del out, grads, fn
            except Exception as e:  # noqa: BLE001
                row(impl, error=f"{type(e).__name__}: {e}")
    ref_grads = peer_grads.get("sdpa FLASH (FA2) bwd", peer_grads.get("sdpa CUDNN bwd"))
    ref_note = "" if ref_grads is None else ("err_peer vs FA2's gradients" if "sdpa FLASH (FA2) bwd" in peer_grads
                                             else "err_peer vs cuDNN's gradients (FLASH failed)")

    # ---- attnjit gqa_bwd: plan once, time the bound plan_execute.
    def grads_like():
        return torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)

    def bwd_tensors(dq, dk, dv):
        return {"q": q, "k": k, "v": v, "o": o, "do": do, "lse": lse, "dq": dq, "dk": dk, "dv": dv}

    def checked(ours, versus, vnote):
        extra = {"config": None}
        extra["nan_count"] = int(sum(torch.isnan(x).sum().item() for x in ours))
        if versus is not None:
            extra["err_peer"] = max_rel_l2(ours, versus)
            extra["check"] = "ok" if extra["err_peer"] < CHECK_TOL and not extra["nan_count"] else "WRONG"
        return extra, vnote

    ours = None
    if rt is None:
        row("attnjit gqa_bwd", error=args.rt_error)
    else:
        for impl, cfg in (("attnjit gqa_bwd", config),
                          ("attnjit gqa_bwd portable", dict(config, backend="portable")),
                          ("attnjit gqa_bwd deterministic", dict(config, deterministic=True))):
            try:
                grads = grads_like()
                tensors = bwd_tensors(*grads)
                t0 = time.perf_counter()
                plan = rt.plan("gqa_bwd", cfg, tensors)
                plan_s = time.perf_counter() - t0
                call = plan.bind(tensors)
                for x in grads:
                    x.fill_(float("nan"))  # poison: an unwritten element shows as NaN
                call()
                torch.cuda.synchronize()
                extra, note = checked(grads, ref_grads, ref_note)
                extra["config"] = cfg
                extra["plan_create_s"] = plan_s
                note = f"{o_note}; plan_create {plan_s * 1e3:.0f} ms (incl. JIT)" + (f"; {note}" if note else "")
                if impl == "attnjit gqa_bwd deterministic":
                    # Two calls into separate buffers must give identical bytes, and the timed repetitions
                    # (into the first set) must keep giving them.
                    second = grads_like()
                    for x in second:
                        x.fill_(float("nan"))
                    plan.bind(bwd_tensors(*second))()
                    torch.cuda.synchronize()
                    same = all(torch.equal(a, b) for a, b in zip(grads, second))
                    t = bench(call, args.min_reps)
                    torch.cuda.synchronize()
                    same_after = all(torch.equal(a, b) for a, b in zip(grads, second))
                    extra["bitwise_repeatable"] = same
                    extra["bitwise_repeatable_after_timing"] = same_after
                    note += (f"; two calls bitwise identical: {'yes' if same else 'NO'}, still after "
                             f"{t['reps']} timed calls: {'yes' if same_after else 'NO'}")
                    if not (same and same_after):
                        extra["check"] = "WRONG"
                    del second
                else:
                    t = bench(call, args.min_reps)
                if impl == "attnjit gqa_bwd":
                    ours = tuple(x.clone() for x in grads)
                row(impl, t, note, extra=extra)
                plan.close()
                del grads, tensors
            except Exception as e:  # noqa: BLE001
                row(impl, error=f"{type(e).__name__}: {e}")
        # Other builds of the library on the same call (--ab-lib), for A/B comparisons in one process: the
        # default and the deterministic plan of each.
        for (ab_name, ab_rt), (suffix, ab_cfg) in itertools.product(
                getattr(args, "ab_rts", []), (("", config), (" deterministic", dict(config, deterministic=True)))):
            try:
                grads = grads_like()
                tensors = bwd_tensors(*grads)
                plan = ab_rt.plan("gqa_bwd", ab_cfg, tensors)
                call = plan.bind(tensors)
                for x in grads:
                    x.fill_(float("nan"))
                call()
                torch.cuda.synchronize()
                extra, note = checked(grads, ours, "err_peer vs the --lib plan's gradients")
                extra["config"] = ab_cfg
                t = bench(call, args.min_reps)
                row(f"attnjit gqa_bwd{suffix} [{ab_name}]", t, note, extra=extra)
                plan.close()
                del grads, tensors
            except Exception as e:  # noqa: BLE001
                row(f"attnjit gqa_bwd{suffix} [{ab_name}]", error=f"{type(e).__name__}: {e}")

    # Ratios: against FA2 (the ratio column) and against cuDNN (ratio_cudnn, also at the head of the note).
    def peer_ms(impl):
        r = next((r for r in case_rows if r["impl"] == impl and r.get("ms") and not r.get("error")), None)
        return r["ms"] if r is not None else None

    fa2_ms, cudnn_ms = peer_ms("sdpa FLASH (FA2) bwd"), peer_ms("sdpa CUDNN bwd")
    for r in case_rows:
        if cudnn_ms and r.get("ms") and not r.get("error") and r["impl"] != "sdpa CUDNN bwd":
            r["ratio_cudnn"] = cudnn_ms / r["ms"]
            r["note"] = f"{r['ratio_cudnn']:.2f}x cuDNN; " + r["note"]
    # Print order: ours first, then peers.
    case_rows.sort(key=lambda r: 0 if r["impl"].startswith("attnjit") else 1)
    add_with_ratio(case_rows, fa2_ms, add_row)
