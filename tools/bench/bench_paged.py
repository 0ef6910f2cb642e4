"""The paged family's suites of tools/bench/bench_torch.py: decode (gqa_paged_fwd and mha_decode_paged with one
query token per request vs SDPA on gathered K/V) and prefill_append (gqa_prefill_paged_append vs dense
attention over the same keys).
"""
from __future__ import annotations

import math
import time

import torch
import torch.nn.functional as F
from bench_rows import add_with_ratio, per_second, result_row
from bench_common import (CHECK_TOL, COPY_CEILING_GBS, SDPBackend, add_row, bench, host_us_per_call, output_fields,
                          reference_fp32, rel_l2, sdpa_kernel, tflops_rate, visible_pairs)


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
