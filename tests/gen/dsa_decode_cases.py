#!/usr/bin/env python3
"""Test cases for dsa_decode (SPEC.md §2.18) in the `attnjit test` format (tools/cli/test_case.hpp). Standard
library only; deterministic.

Writes:
  tests/cases/dsa_decode_errors.json   one case per rejection rule (SPEC.md §2.18 "Rejected", §1.2 classes,
                                       §1.11 message format), each with the expected category and a fragment
                                       of the message. The output o holds a byte pattern, so the runner proves
                                       that a rejected call wrote nothing. Rules only a device call has (the
                                       16-byte stride rule of class F) are marked gpu_only. Not expressible
                                       here and covered by tests/unit/dsa_decode_test.cpp instead: a
                                       non-finite sm_scale, device placement, overlapping outputs, the
                                       kernel impl's Unsupported error.
  under OUT_DIR/gpu/ (the GPU suite: gen_gpu_cases.sh writes them into tests/cases/gpu/):
    dsa_decode_grid.json    --count (default 240) random configurations against the CPU reference: fp16 /
                            bf16, D 64 .. 512, dim_tail 0 / 16 .. 128, H_kv 1 (g up to 128) and > 1 (g 16 ..
                            128), stride_kv 1 .. 4, q_start_index_s 0 and > 0, causal or not, K 1 .. 128,
                            indices mixing -1, S_kv, far out-of-range, future and repeated entries.
    dsa_decode_small.json   ~20 small cases for compute-sanitizer runs.

Usage: python3 tests/gen/dsa_decode_cases.py [--out-dir tests/cases] [--gpu] [--count N]
"""
import os
import random
import sys
from functools import partial

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from casegen_common import (Errors, pinned_to, OUTB, POISON, TOL, config_with, edited, errors_then_gpu_main,  # noqa: E402
                            normal, random_padded_strides, tensor, values)

OP = "dsa_decode"
CFG = {"dim_tail": 0, "stride_kv": 1, "q_start_index_s": 0}


def base(dtype="fp16", B=1, S=2, H=2, H_kv=1, S_kv=4, K=3, D=64, dim_tail=0):
    """A valid call's tensors: q [B, S, H, D + dim_tail], kv [B, S_kv, H_kv, D + dim_tail], indices
    [B, S, H_kv, K] int32, and the output o [B, S, H, D] holding a byte pattern."""
    n = B * S * H_kv * K
    return {
        "q": tensor([B, S, H, D + dim_tail], dtype, normal()),
        "kv": tensor([B, S_kv, H_kv, D + dim_tail], dtype, normal()),
        "indices": tensor([B, S, H_kv, K], "int32", values([i % max(S_kv, 1) for i in range(n)])),
        "o": tensor([B, S, H, D], dtype, OUTB, output=True),
    }


def reshape_indices(t, dim, val):
    """indices with extent `val` on `dim` (values resized to match)."""
    shape = t["indices"]["shape"]
    shape[dim] = val
    n = shape[0] * shape[1] * shape[2] * shape[3]
    t["indices"]["init"] = values([0] * n)


def cfg(**kw):
    return config_with(CFG, **kw)


def build_errors():
    e = Errors(OP, "dsa-decode-error/", 7500)
    err = e.err
    edit = partial(edited, base)

    # --- param: dim_tail, stride_kv, q_start_index_s required integers in range; sm_scale finite > 0 ---
    for key, rule in (("dim_tail", "0 or a power of two in [16, 128]"), ("stride_kv", "an integer >= 1"),
                      ("q_start_index_s", "an integer >= 0")):
        c = dict(CFG)
        c.pop(key)
        err(f"param/{key}-missing", c, base(), "param", f"{key}: expected {rule}, got none ({key} is required)")
    for v in (8, 24, 256, -16, 1):
        err(f"param/dim-tail-{v}", cfg(dim_tail=v), base(), "param",
            f"dim_tail: expected 0 or a power of two in [16, 128], got {v}")
    err("param/dim-tail-fraction", cfg(dim_tail=16.5), base(), "param", "dim_tail: expected 0 or a power of two")
    for v in (0, -1):
        err(f"param/stride-kv-{v}", cfg(stride_kv=v), base(), "param", f"stride_kv: expected an integer >= 1, got {v}")
    err("param/stride-kv-fraction", cfg(stride_kv=1.5), base(), "param", "stride_kv: expected an integer >= 1, got 1.5")
    err("param/q-start-negative", cfg(q_start_index_s=-1), base(), "param",
        "q_start_index_s: expected an integer >= 0, got -1")
    err("param/q-start-too-large", cfg(q_start_index_s=2 ** 31), base(), "param",
        "q_start_index_s: expected an integer >= 0, got 2147483648")
    err("param/q-start-string", cfg(q_start_index_s="0"), base(), "param", "q_start_index_s: expected a number")
    err("param/sm-scale-zero", cfg(sm_scale=0.0), base(), "param", "sm_scale: expected a finite value > 0, got 0")
    err("param/sm-scale-negative", cfg(sm_scale=-0.5), base(), "param", "sm_scale: expected a finite value > 0, got -0.5")
    err("param/sm-scale-string-inf", cfg(sm_scale="inf"), base(), "param", "sm_scale: expected a number")
    err("param/is-causal-not-bool", cfg(is_causal=1), base(), "param", "is_causal: expected a boolean")
    err("param/unknown-key-causal", cfg(causal=True), base(), "param", "causal: expected one of")
    err("param/unknown-key-topk", cfg(topk=4), base(), "param", "topk: expected one of")
    err("param/unknown-impl", cfg(impl="fast"), base(), "param", "impl: expected")

    # --- dtype ---
    e.all_dtypes(CFG, base, ("q", "kv", "o"))
    e.dtype_mismatches(CFG, base, (("kv", "bf16", "fp16"), ("o", "fp16", "bf16"), ("kv", "fp32", "bf16"),
                                   ("o", "fp32", "fp16")))
    err("dtype/indices-int64", CFG, edit(lambda t: t["indices"].update(dtype="int64")), "dtype",
        "indices: expected int32, got int64")
    err("dtype/indices-fp16", CFG, edit(lambda t: t["indices"].update(dtype="fp16")), "dtype",
        "indices: expected int32, got fp16")

    # --- args ---
    e.missing(CFG, base, ("q", "kv", "indices", "o"))
    err("args/unknown-tensor-k", CFG, edit(lambda t: t.update(k=tensor([1, 4, 1, 64], "fp16", normal()))), "args",
        "k: expected one of")
    err("args/unknown-tensor-lse", CFG, edit(lambda t: t.update(lse=tensor([1, 2, 2], "fp32", POISON, output=True))),
        "args", "lse: expected one of")

    # --- shape: ranks ---
    for n, shape, dims in (("q", [2, 2, 64], "[B, S, H, D + dim_tail]"),
                           ("kv", [4, 1, 64], "[B, S_kv, H_kv, D + dim_tail]"),
                           ("indices", [1, 2, 3], "[B, S, H_kv, K]"), ("o", [1, 2, 2, 64, 1], "[B, S, H, D]")):
        err(f"shape/{n}-rank-{len(shape)}", CFG, edit(lambda t: t[n].update(shape=shape)), "shape",
            f"{n}: expected 4 dims {dims}")
    # q / kv last dims equal, batch equal; indices [B, S, H_kv, K], K >= 1; o [B, S, H, D]
    err("shape/kv-last-dim", CFG, edit(lambda t: t["kv"]["shape"].__setitem__(3, 80)), "shape",
        "kv: expected dim 3 (D + dim_tail, q's last dim) = 64, got 80")
    err("shape/kv-batch", CFG, edit(lambda t: t["kv"]["shape"].__setitem__(0, 2)), "shape",
        "kv: expected dim 0 (B) = 1, got 2")
    for dim, val, what, want in ((0, 2, "B", 1), (1, 3, "S, q's sequence length", 2), (2, 2, "H_kv, kv's heads", 1)):
        err(f"shape/indices-dim{dim}", CFG, edit(lambda t: reshape_indices(t, dim, val)), "shape",
            f"indices: expected dim {dim} ({what}) = {want}, got {val}")
    err("shape/indices-k0", CFG, edit(lambda t: t["indices"].update(shape=[1, 2, 1, 0], init=values([]))), "shape",
        "indices: expected K >= 1 index slots, got 0")
    for dim, val, what, want in ((0, 2, "B", 1), (1, 1, "S", 2), (2, 4, "H", 2),
                                 (3, 80, "D = q.shape[-1] - dim_tail", 64)):
        err(f"shape/o-dim{dim}", CFG, edit(lambda t: t["o"]["shape"].__setitem__(dim, val)), "shape",
            f"o: expected dim {dim} ({what}) = {want}, got {val}")
    # accepted D = q.shape[-1] - dim_tail
    for D, tail in ((32, 0), (96, 0), (192, 0), (1024, 0), (64, 16)):
        t = base(D=D + tail)
        t["o"]["shape"][3] = D
        err(f"shape/q-last-dim-{D + tail}-tail0", CFG, t, "shape",
            f"q: expected head dim D = q.shape[-1] - dim_tail in {{64, 128, 256, 512}}, got {D + tail} - 0 = {D + tail}")
    err("shape/d-after-tail-48", cfg(dim_tail=16), base(D=48, dim_tail=16), "shape",
        "q: expected head dim D = q.shape[-1] - dim_tail in {64, 128, 256, 512}, got 64 - 16 = 48")
    err("shape/q-narrower-than-tail", cfg(dim_tail=128), edit(lambda t: t["o"]["shape"].__setitem__(3, 1)), "shape",
        "got 64 - 128 = -64")
    # head counts and the group-size rules (as in TileOPs)
    err("shape/h3-hkv2", CFG, base(H=3, H_kv=2), "shape", "kv: expected H_kv dividing H (H % H_kv == 0), got H = 3, H_kv = 2")
    err("shape/h0", CFG, base(H=0), "shape", "q: expected H >= 1 query heads, got 0")
    for H in (96, 100):
        err(f"shape/h{H}-kv1-group-not-le64-or-mult64", CFG, base(H=H), "shape",
            f"q: expected group size g = H / H_kv <= 64 or a multiple of 64, got {H}")
    for H, H_kv in ((8, 2), (24, 2), (48, 2), (64, 8)):
        err(f"shape/h{H}-kv{H_kv}-group-rule", CFG, base(H=H, H_kv=H_kv), "shape",
            f"q: expected group size g = H / H_kv a power of two >= 16 when H_kv > 1, got {H // H_kv}")

    # --- layout ---
    e.innermost_strides(CFG, base, (("q", [512, 256, 128, 2]), ("kv", [512, 128, 128, 2])))
    err("layout/q-head-stride-136-bytes", CFG, edit(lambda t: t["q"].update(strides=[272, 136, 68, 1])), "layout",
        "q: expected dim 2 stride to be a multiple of 16 bytes", gpu_only=True)
    err("layout/kv-token-stride-132-bytes", CFG, edit(lambda t: t["kv"].update(strides=[264, 66, 64, 1])), "layout",
        "kv: expected dim 1 stride to be a multiple of 16 bytes", gpu_only=True)
    e.not_contiguous(CFG, base, (("o", [512, 256, 64, 1]), ("o", [256, 128, 64, 0])))
    return e.cases


# ----------------------------------------------------------------------------------------------------
# GPU cases (with --gpu)


def index_row(rng, S_kv, K):
    """K entries: distinct positions with -1, S_kv, far out-of-range and repeated entries mixed in."""
    row = rng.sample(range(S_kv), min(K, S_kv)) if S_kv else []
    row += [-1] * (K - len(row))
    for u in range(K):
        c = rng.random()
        if c < 0.1:
            row[u] = -1
        elif c < 0.15:
            row[u] = S_kv
        elif c < 0.17:
            row[u] = rng.choice([-2 ** 31, 2 ** 31 - 1, S_kv + 7])
        elif c < 0.22 and u:
            row[u] = row[rng.randrange(u)]
    return row


def grid_case(rng, idx, prefix, *, dtype, B, S, H, H_kv, S_kv, K, D, dim_tail, stride_kv, q_start, causal, sm_scale,
              strided):
    Dqk = D + dim_tail

    def st(shape):
        return random_padded_strides(rng, shape, dtype) if strided else None

    idx_vals = [x for _ in range(B * S * H_kv) for x in index_row(rng, S_kv, K)]
    t = {"q": tensor([B, S, H, Dqk], dtype, normal(), st([B, S, H, Dqk])),
         "kv": tensor([B, S_kv, H_kv, Dqk], dtype, normal(), st([B, S_kv, H_kv, Dqk])),
         "indices": tensor([B, S, H_kv, K], "int32", values(idx_vals)),
         "o": tensor([B, S, H, D], dtype, POISON, output=True)}
    config = {"dim_tail": dim_tail, "stride_kv": stride_kv, "q_start_index_s": q_start}
    if sm_scale is not None:
        config["sm_scale"] = sm_scale
    if not causal:
        config["is_causal"] = False
    desc = (f"{dtype}/b{B}/s{S}/h{H}kv{H_kv}/skv{S_kv}/k{K}/d{D}/tail{dim_tail}/stride{stride_kv}/qs{q_start}"
            + ("" if causal else "/noncausal") + ("/strided" if strided else ""))
    return {"name": f"{prefix}/{idx:03d}/{desc}", "op": OP, "config": config, "seed": 90000 + idx, "tensors": t,
            "compare": {"o": {"mode": "rel_l2", "tol": TOL[dtype]}}, "gpu_only": True}


def random_config(rng, small):
    H_kv = rng.choice([1, 1, 2, 4])
    g = rng.choice([1, 2, 4, 16, 32, 64] if small else [1, 3, 8, 16, 32, 64, 128]) if H_kv == 1 else \
        rng.choice([16, 32] if small else [16, 32, 64, 128])
    S_kv = rng.choice([0, 1, rng.randrange(2, 64 if small else 2048)])
    stride_kv = rng.choice([1, 1, 2, 4])
    S = rng.randrange(1, 4 if small else 6)
    return dict(dtype=rng.choice(["fp16", "bf16"]), B=rng.randrange(1, 3), S=S, H=H_kv * g, H_kv=H_kv, S_kv=S_kv,
                K=rng.choice([1, 16, 64] if small else [1, 7, 32, 64, 128]),
                D=rng.choice([64, 128] if small else [64, 128, 256, 512]),
                dim_tail=rng.choice([0, 16, 32, 64, 128]), stride_kv=stride_kv,
                q_start=rng.choice([0, rng.randrange(1, max(2, S_kv * stride_kv + 8))]),
                causal=rng.random() < 0.8, sm_scale=rng.choice([None, None, None, 0.07]), strided=rng.random() < 0.2)


def gpu_cases(count):
    rng = random.Random(20261203)
    grid = [grid_case(rng, i, "dsa-decode-grid", **random_config(rng, False)) for i in range(count)]
    # The DeepSeek shape: H_kv = 1, H = 128, D = 512, dim_tail = 64; q_start_index_s 0 with stride 4 (early
    # rows zero) and > 0.
    for j, (stride, qs) in enumerate(((4, 0), (1, 900), (4, 4000))):
        grid.append(grid_case(rng, count + j, "dsa-decode-grid/deepseek", dtype=["bf16", "fp16"][j % 2], B=1, S=4,
                              H=128, H_kv=1, S_kv=1024, K=64, D=512, dim_tail=64, stride_kv=stride, q_start=qs,
                              causal=True, sm_scale=None, strided=False))
    # A DeepSeek-sized index list (K 2048 of S_kv 4096, split over the slots for one request).
    grid.append(grid_case(rng, count + 3, "dsa-decode-grid/deepseek", dtype="bf16", B=1, S=2, H=128, H_kv=1,
                          S_kv=4096, K=2048, D=512, dim_tail=64, stride_kv=1, q_start=3000, causal=True,
                          sm_scale=None, strided=False))
    small = [grid_case(rng, 500 + i, "dsa-decode-small", **random_config(rng, True)) for i in range(20)]
    # The portable grid pins its backend; the hopper copies take every case the hopper kernel serves.
    # kv_splits: "auto" (small grids mostly split), every fourth case one pass, every seventh 3 splits.
    for i, c in enumerate(grid + small):
        c["config"]["backend"] = "portable"
        if i % 4 == 0:
            c["config"]["kv_splits"] = 1
        elif i % 7 == 0:
            c["config"]["kv_splits"] = 3
    served = [c for c in grid if c["tensors"]["o"]["shape"][-1] >= 128]
    served_small = [c for c in small if c["tensors"]["o"]["shape"][-1] >= 128]
    return (grid, small, [pinned_to(c) for c in served], [pinned_to(c) for c in served_small])


def main():
    return errors_then_gpu_main(__doc__, OP, build_errors, gpu_cases, count=240, gpu_default=True)


if __name__ == "__main__":
    sys.exit(main())
