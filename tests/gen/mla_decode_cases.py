#!/usr/bin/env python3
"""Test cases for mla_decode (SPEC.md §2.13 and docs/ops/mla_decode.md's extensions) in the `attnjit test`
format (tools/cli/test_case.hpp). Standard library only; deterministic.

Writes:
  tests/cases/mla_decode_errors.json   one case per rejection rule (SPEC.md §2.13 "Rejected", the
                                       extensions' rules, §1.2 classes, §1.11 message format), each with
                                       the expected category and a fragment of the message. The output o
                                       holds a byte pattern, so the runner proves that a rejected call wrote
                                       nothing. Rules only a device call has (the 16-byte stride rule of
                                       class F) are marked gpu_only. Not expressible here and covered by
                                       tests/unit/mla_decode_test.cpp instead: the content checks of
                                       cache_seqlens / block_table (the kernel path cannot reach them while
                                       it has no kernel), device placement, overlapping outputs, the kernel
                                       impl's Unsupported error.
  under OUT_DIR/gpu/ (the GPU suite: gen_gpu_cases.sh writes them into tests/cases/gpu/):
    mla_decode_grid.json    --count (default 240) random configurations against the CPU reference:
                            fp16 / bf16, D 128 / 256 / 512, H_kv 1 (H up to 128) and > 1, N_kv not a tile
                            multiple and 0, cache_seqlens, paged caches (PS 16 .. 128, scattered pages,
                            poisoned pools), S_q 1 .. 4, padded strides.
    mla_decode_small.json   ~20 small cases for compute-sanitizer runs.

Usage: python3 tests/gen/mla_decode_cases.py [--out-dir tests/cases] [--gpu] [--count N]
"""
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from casegen_common import (Errors, pinned_to, OUTB, POISON, TOL, edited, errors_then_gpu_main, normal,  # noqa: E402
                            random_padded_strides, scatter_pages, tensor, values)

OP = "mla_decode"
ACCEPTED_D = "expected head dim D in {128, 256, 512}"


def base(dtype="fp16", B=1, H=2, H_kv=1, D=128, N_kv=5, PE=64, S_q=None):
    """A valid call's tensors: q [B, H, D] (or [B, S_q, H, D]), q_pe, k [B, N_kv, H_kv, D], k_pe, and the
    output o holding a byte pattern."""
    lead = [B] if S_q is None else [B, S_q]
    return {
        "q": tensor(lead + [H, D], dtype, normal()),
        "q_pe": tensor(lead + [H, PE], dtype, normal()),
        "k": tensor([B, N_kv, H_kv, D], dtype, normal()),
        "k_pe": tensor([B, N_kv, H_kv, PE], dtype, normal()),
        "o": tensor(lead + [H, D], dtype, OUTB, output=True),
    }


def paged_base(dtype="fp16", B=2, H=2, H_kv=1, D=128, NP=3, PS=16, W=2, PE=64):
    """A valid paged call: pools k [NP, PS, H_kv, D], k_pe [NP, PS, H_kv, PE], block_table [B, W],
    cache_seqlens [B] (lengths within W * PS, pages within NP)."""
    t = base(dtype, B, H, H_kv, D, 0, PE)
    t["k"] = tensor([NP, PS, H_kv, D], dtype, normal())
    t["k_pe"] = tensor([NP, PS, H_kv, PE], dtype, normal())
    t["block_table"] = tensor([B, W], "int32", values([(b * W + j) % NP for b in range(B) for j in range(W)]))
    t["cache_seqlens"] = tensor([B], "int32", values([min(PS + 1, W * PS)] * B))
    return t


def build_errors():
    e = Errors(OP, "mla-decode-error/", 7000)
    err = e.err
    def edit(f, make=base, **kw):
        return edited(make, f, **kw)

    # --- param: validate_inputs a boolean; no other key (the contract has no parameters) ---
    err("param/validate-inputs-not-bool", {"validate_inputs": 1}, base(), "param", "validate_inputs: expected a boolean")
    err("param/unknown-key-sm-scale", {"sm_scale": 0.1}, base(), "param", "sm_scale: expected one of")
    err("param/unknown-key-page-size", {"page_size": 64}, base(), "param", "page_size: expected one of")
    err("param/unknown-key-is-causal", {"is_causal": True}, base(), "param", "is_causal: expected one of")
    err("param/unknown-impl", {"impl": "fast"}, base(), "param", "impl: expected")

    # --- dtype: 16-bit inputs of one dtype, o in q's dtype, metadata int32 ---
    e.all_dtypes({}, base, ("q", "q_pe", "k", "k_pe", "o"))
    e.dtype_mismatches({}, base, (("q_pe", "bf16", "fp16"), ("k", "bf16", "fp16"), ("k_pe", "fp16", "bf16"),
                                  ("o", "fp16", "bf16"), ("k", "fp32", "fp16"), ("o", "fp32", "fp16")))
    err("dtype/cache-seqlens-int64", {}, edit(lambda t: t.update(cache_seqlens=tensor([1], "int64", values([5])))),
        "dtype", "cache_seqlens: expected int32, got int64")
    err("dtype/block-table-int64", {}, edit(lambda t: t["block_table"].update(dtype="int64"), make=paged_base),
        "dtype", "block_table: expected int32, got int64")

    # --- args: q, q_pe, k, k_pe, o required; cache_seqlens required with block_table; no unknown names ---
    e.missing({}, base, ("q", "q_pe", "k", "k_pe", "o"))
    err("args/block-table-without-cache-seqlens", {}, edit(lambda t: t.pop("cache_seqlens"), make=paged_base), "args",
        "cache_seqlens: expected a tensor with block_table")
    err("args/unknown-tensor-v", {}, edit(lambda t: t.update(v=tensor([1, 5, 1, 128], "fp16", normal()))), "args",
        "v: expected one of")
    err("args/unknown-tensor-kv", {}, edit(lambda t: t.update(kv=tensor([1, 5, 1, 192], "fp16", normal()))), "args",
        "kv: expected one of")

    # --- shape: ranks ---
    err("shape/q-rank-2", {}, edit(lambda t: t["q"].update(shape=[2, 128])), "shape",
        "q: expected 3 dims [B, H, D] or 4 dims [B, S_q, H, D]")
    err("shape/q-rank-5", {}, edit(lambda t: t["q"].update(shape=[1, 1, 1, 2, 128])), "shape",
        "q: expected 3 dims [B, H, D] or 4 dims [B, S_q, H, D]")
    err("shape/q-pe-rank-4-for-rank-3-q", {}, edit(lambda t: t["q_pe"].update(shape=[1, 1, 2, 64])), "shape",
        "q_pe: expected 3 dims [B, H, PE] (q's rank)")
    err("shape/o-rank-3-for-rank-4-q", {}, edit(lambda t: t["o"].update(shape=[1, 2, 128]), S_q=1), "shape",
        "o: expected 4 dims [B, S_q, H, D] (q's rank)")
    err("shape/k-rank-3", {}, edit(lambda t: t["k"].update(shape=[5, 1, 128])), "shape",
        "k: expected 4 dims [B, N_kv, H_kv, D]")
    err("shape/k-pe-rank-5", {}, edit(lambda t: t["k_pe"].update(shape=[1, 5, 1, 1, 64])), "shape",
        "k_pe: expected 4 dims [B, N_kv, H_kv, PE]")
    err("shape/paged-k-rank-3", {}, edit(lambda t: t["k"].update(shape=[48, 1, 128]), make=paged_base), "shape",
        "k: expected 4 dims [NP, PS, H_kv, D] (a page pool, with block_table)")
    err("shape/cache-seqlens-rank-2", {}, edit(lambda t: t.update(cache_seqlens=tensor([1, 1], "int32", values([5])))),
        "shape", "cache_seqlens: expected 1 dims [B]")
    err("shape/block-table-rank-1", {}, edit(lambda t: t["block_table"].update(shape=[4],
                                                                            init=values([0, 1, 2, 0])),
                                             make=paged_base), "shape", "block_table: expected 2 dims [B, W]")
    # extents against q
    err("shape/q-pe-batch", {}, edit(lambda t: t["q_pe"]["shape"].__setitem__(0, 2)), "shape",
        "q_pe: expected dim 0 (B) = 1, got 2")
    err("shape/q-pe-heads", {}, edit(lambda t: t["q_pe"]["shape"].__setitem__(1, 4)), "shape",
        "q_pe: expected dim 1 (H) = 2, got 4")
    err("shape/q-pe-sq", {}, edit(lambda t: t["q_pe"]["shape"].__setitem__(1, 2), S_q=3), "shape",
        "q_pe: expected dim 1 (S_q) = 3, got 2")
    err("shape/o-heads", {}, edit(lambda t: t["o"]["shape"].__setitem__(1, 1)), "shape",
        "o: expected dim 1 (H) = 2, got 1")
    err("shape/o-d", {}, edit(lambda t: t["o"]["shape"].__setitem__(2, 192)), "shape",
        "o: expected dim 2 (D) = 128, got 192")
    err("shape/o-sq", {}, edit(lambda t: t["o"]["shape"].__setitem__(1, 1), S_q=2), "shape",
        "o: expected dim 1 (S_q) = 2, got 1")
    err("shape/k-batch", {}, edit(lambda t: t["k"]["shape"].__setitem__(0, 2)), "shape",
        "k: expected dim 0 (B) = 1, got 2")
    err("shape/k-d", {}, edit(lambda t: t["k"]["shape"].__setitem__(3, 256)), "shape",
        "k: expected dim 3 (D, q's head dim) = 128, got 256")
    err("shape/k-pe-batch", {}, edit(lambda t: t["k_pe"]["shape"].__setitem__(0, 3)), "shape",
        "k_pe: expected dim 0 (B) = 1, got 3")
    err("shape/k-pe-nkv", {}, edit(lambda t: t["k_pe"]["shape"].__setitem__(1, 4)), "shape",
        "k_pe: expected dim 1 (N_kv, k's cache length) = 5, got 4")
    err("shape/k-pe-heads", {}, edit(lambda t: t["k_pe"]["shape"].__setitem__(2, 2)), "shape",
        "k_pe: expected dim 2 (H_kv, k's heads) = 1, got 2")
    err("shape/k-pe-pe", {}, edit(lambda t: t["k_pe"]["shape"].__setitem__(3, 32)), "shape",
        "k_pe: expected dim 3 (PE, q_pe's head dim) = 64, got 32")
    # accepted head dims, rope dim, head counts
    for D in (64, 96, 192, 576):
        err(f"shape/d{D}", {}, base(D=D), "shape", f"q: {ACCEPTED_D}, got {D}")
    for PE in (32, 128):
        err(f"shape/pe{PE}", {}, base(PE=PE), "shape", f"q_pe: expected rope head dim PE = 64, got {PE}")
    err("shape/h3-hkv2", {}, base(H=3, H_kv=2), "shape", "k: expected H_kv dividing H (H % H_kv == 0), got H = 3, H_kv = 2")
    err("shape/h2-hkv4", {}, base(H=2, H_kv=4), "shape", "k: expected H_kv dividing H (H % H_kv == 0), got H = 2, H_kv = 4")
    err("shape/h0", {}, base(H=0), "shape", "q: expected H >= 1 query heads, got 0")
    # cache_seqlens / block_table extents; the paged pools
    err("shape/cache-seqlens-batch", {}, edit(lambda t: t.update(cache_seqlens=tensor([2], "int32", values([5, 5])))),
        "shape", "cache_seqlens: expected dim 0 (B) = 1, got 2")
    err("shape/block-table-batch", {}, edit(lambda t: t["block_table"].update(shape=[3, 2], init=values([0] * 6)),
                                            make=paged_base), "shape", "block_table: expected dim 0 (B) = 2, got 3")
    for PS in (8, 24, 40):
        err(f"shape/paged-ps{PS}", {}, paged_base(PS=PS), "shape",
            f"k: expected page size PS a multiple of 16 (64 is the usual one), got {PS}")
    err("shape/paged-k-pe-pages", {}, edit(lambda t: t["k_pe"]["shape"].__setitem__(0, 4), make=paged_base), "shape",
        "k_pe: expected dim 0 (NP, k's page count) = 3, got 4")
    err("shape/paged-k-pe-page-size", {}, edit(lambda t: t["k_pe"]["shape"].__setitem__(1, 32), make=paged_base),
        "shape", "k_pe: expected dim 1 (PS, k's page size) = 16, got 32")

    # --- layout: inputs class F, metadata class M, o class O ---
    e.innermost_strides({}, base, (("q", [512, 256, 2]), ("q_pe", [256, 128, 2]), ("k", [1280, 256, 256, 2]),
                                   ("k_pe", [640, 128, 128, 2])))
    err("layout/k-token-stride-264-bytes", {}, edit(lambda t: t["k"].update(strides=[660, 132, 128, 1])), "layout",
        "k: expected dim 1 stride to be a multiple of 16 bytes", gpu_only=True)
    err("layout/q-pe-head-stride-136-bytes", {}, edit(lambda t: t["q_pe"].update(strides=[136, 68, 1])), "layout",
        "q_pe: expected dim 1 stride to be a multiple of 16 bytes", gpu_only=True)
    e.not_contiguous({}, base, (("o", [512, 256, 1]), ("o", [256, 128, 0])))
    return e.cases


# ----------------------------------------------------------------------------------------------------
# GPU cases (with --gpu)


def grid_case(rng, idx, prefix, *, dtype, B, H, H_kv, D, S_q, N_kv=None, lens=None, PS=None, strided=False):
    """One compare case: normal inputs, poisoned o; paged: scattered pages (ceil(len / PS) per request,
    plus spare pages) and poisoned-free random pools; q rank 3 when S_q is None."""
    lead = [B] if S_q is None else [B, S_q]
    t = {}

    def st(shape):
        return random_padded_strides(rng, shape, dtype) if strided else None

    t["q"] = tensor(lead + [H, D], dtype, normal(), st(lead + [H, D]))
    t["q_pe"] = tensor(lead + [H, 64], dtype, normal(), st(lead + [H, 64]))
    if PS is None:
        t["k"] = tensor([B, N_kv, H_kv, D], dtype, normal(), st([B, N_kv, H_kv, D]))
        t["k_pe"] = tensor([B, N_kv, H_kv, 64], dtype, normal(), st([B, N_kv, H_kv, 64]))
    else:
        need = [(x + PS - 1) // PS for x in lens]
        NP, pages = scatter_pages(rng, need, rng.randrange(0, 3))
        NP = max(NP, 1)
        W = max(need + [1]) + rng.randrange(0, 2)
        table = []
        for p in pages:
            table += p + [rng.choice([-1, 0, NP + 5]) for _ in range(W - len(p))]
        # Pages no request uses hold NaN: a kernel reading one fails the case.
        used = {"kind": "rows", "ranges": [[pg, 1] for pg in sorted(x for p in pages for x in p)], "init": normal(),
                "else": POISON}
        t["k"] = tensor([NP, PS, H_kv, D], dtype, used, st([NP, PS, H_kv, D]))
        t["k_pe"] = tensor([NP, PS, H_kv, 64], dtype, used, st([NP, PS, H_kv, 64]))
        t["block_table"] = tensor([B, W], "int32", values(table))
    if lens is not None:
        t["cache_seqlens"] = tensor([B], "int32", values(lens))
    t["o"] = tensor(lead + [H, D], dtype, POISON, output=True)
    desc = f"{dtype}/b{B}/sq{S_q or 1}/h{H}kv{H_kv}/d{D}/" + (f"ps{PS}" if PS else f"n{N_kv}") + \
        ("/lens" if lens is not None else "") + ("/strided" if strided else "")
    return {"name": f"{prefix}/{idx:03d}/{desc}", "op": OP, "config": {}, "seed": 80000 + idx, "tensors": t,
            "compare": {"o": {"mode": "rel_l2", "tol": TOL[dtype]}}, "gpu_only": True}


def random_config(rng, small):
    dtype = rng.choice(["fp16", "bf16"])
    D = rng.choice([128, 256, 512])
    H_kv = rng.choice([1, 1, 1, 2, 4])
    g = rng.choice([1, 2, 4, 8, 16] if small else [1, 4, 8, 16, 32, 64, 128 // H_kv])
    H = H_kv * g
    B = rng.randrange(1, 3 if small else 5)
    S_q = rng.choice([None, None, 1, 2, 4])
    kind = rng.choice(["plain", "lens", "paged"])
    top = 80 if small else 1100
    kw = dict(dtype=dtype, B=B, H=H, H_kv=H_kv, D=D, S_q=S_q, strided=rng.random() < 0.25)
    if kind == "paged":
        PS = rng.choice([16, 64] if small else [16, 32, 64, 64, 128])
        kw.update(PS=PS, lens=[rng.choice([0, rng.randrange(1, top)]) for _ in range(B)])
    else:
        N_kv = rng.choice([0, 1, rng.randrange(2, top)])
        kw.update(N_kv=N_kv)
        if kind == "lens":
            kw.update(lens=[rng.randrange(0, N_kv + 1) for _ in range(B)])
    return kw


def gpu_cases(count):
    rng = random.Random(20261202)
    grid = [grid_case(rng, i, "mla-decode-grid", **random_config(rng, False)) for i in range(count)]
    # The DeepSeek shape: H_kv = 1, H = 128, D = 512, a few cache lengths, paged and not.
    for j, (n, ps) in enumerate(((1, None), (257, None), (1000, 64), (63, 64))):
        kw = dict(dtype=["bf16", "fp16"][j % 2], B=2, H=128, H_kv=1, D=512, S_q=None)
        if ps:
            kw.update(PS=ps, lens=[n, n // 2])
        else:
            kw.update(N_kv=n)
        grid.append(grid_case(rng, count + j, "mla-decode-grid/deepseek", **kw))
    small = [grid_case(rng, 500 + i, "mla-decode-small", **random_config(rng, True)) for i in range(20)]
    # The portable grid pins its backend; the hopper copies take every case the hopper kernel serves.
    # kv_splits: "auto" (small grids mostly split), every fourth case one pass, every seventh 3 splits.
    for i, c in enumerate(grid + small):
        c["config"]["backend"] = "portable"
        if i % 4 == 0:
            c["config"]["kv_splits"] = 1
        elif i % 7 == 0:
            c["config"]["kv_splits"] = 3
    served = [c for c in grid if True]
    served_small = [c for c in small if True]
    return (grid, small, [pinned_to(c) for c in served], [pinned_to(c) for c in served_small])


def main():
    return errors_then_gpu_main(__doc__, OP, build_errors, gpu_cases, count=240, gpu_default=True)


if __name__ == "__main__":
    sys.exit(main())
