"""The bsa family's suites of tools/bench/bench_torch.py: bsa (bsa_fwd, bsa_fp8_fwd) and bsa_bwd, vs
FlexAttention on the same BlockMask.
"""
from __future__ import annotations

import math
import sys

import torch
from bench_common import add_row, bench, flex_compiled, rel_l2


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
    # Other builds of the library on the same call (--ab-lib): their 'auto' bsa_fwd plan.
    variants = [v + (rt,) for v in variants]
    variants += [(f"attnjit bsa_fwd [{n}]", "bsa_fwd", variants[0][2], ab_rt) for n, ab_rt in args.ab_rts]
    outs = {}
    for impl, op, cfg, vrt in variants:
        o = torch.empty_like(q)
        tensors = {"q": q, "k": k, "v": v, "q2k_block_index": index, "o": o}
        if op == "bsa_fwd":
            tensors["lse"] = torch.empty(B, H, S, dtype=torch.float32, device=dev)
        try:
            plan = vrt.plan(op, cfg, tensors)
            call = plan.bind(tensors)
            t = bench(call, min_reps=args.min_reps)
            err = rel_l2(o, peer_out) if peer_out is not None else None
            rows.append(row(impl, t, note=plan.describe() if hasattr(plan, "describe") else "", err=err))
            if vrt is rt:
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
