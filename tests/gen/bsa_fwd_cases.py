#!/usr/bin/env python3
"""Test cases for bsa_fwd (SPEC.md §2.4) and bsa_fp8_fwd (§2.6) in the `attnjit test` format
(tools/cli/test_case.hpp). Standard library only; deterministic (fixed seeds).

Writes:
  tests/cases/gpu/bsa_fwd_grid.json   >= 240 random bsa_fwd configurations ("gpu_only": kernel vs CPU reference
                                      on fresh random inputs, outputs poisoned): layout bhsd/bshd, bs 64/128,
                                      fp16/bf16, D and D_v each in {64, 96, 128}, MHA/GQA/MQA, fixed counts
                                      (block_sparse_num or K_max) and variable counts (with empty rows under
                                      allow_empty_block_nums), block_sizes absent or of rank 1/2/3 with short
                                      blocks, partial final query/key blocks (S_q, S_kv not block multiples),
                                      kv_splits 1/2/7/256/"auto", padded (class F) strides, validate_inputs on
                                      some; the inactive suffix of each index row holds out-of-range garbage.
  tests/cases/gpu/bsa_fp8_fwd_grid.json  60 bsa_fp8_fwd configurations (5e-2 vs the fp8 reference): fixed and
                                      variable counts, empty rows, block_sizes ranks with short blocks, any
                                      lengths, std 0.5/1/2, user scales, up to 10 (b, h) slices.
  tests/cases/gpu/bsa_fwd_small.json, bsa_fp8_fwd_small.json  small cases for compute-sanitizer runs.
  tests/cases/bsa_fwd_errors.json, tests/cases/bsa_fp8_fwd_errors.json  one case per rejection rule of §2.4
                                      and §2.6 (one file per op), including validate_inputs content rules;
                                      outputs hold a byte pattern so that the runner proves a rejected call
                                      wrote nothing.

One generator for both ops (named after bsa_fwd, whose metadata bsa_fp8_fwd shares): the grid draws the
bsa_fp8_fwd cases from the same random stream after the bsa_fwd ones, so a split would change them.

Tolerances (SPEC.md §1.12): o rel_l2 bf16 1e-2, fp16 5e-3, bsa_fp8_fwd 5e-2; lse with the "lse" rule. The
8e-2 check of bsa_fp8_fwd against the unquantised bsa_fwd reference is made by tests/gen/bsa_fwd_golden.py.

Usage: python3 tests/gen/bsa_fwd_cases.py [--out-dir tests/cases]
"""
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from casegen_common import (Errors, OUTB, POISON, TOL, case_args, normal, random_padded_strides, tensor,  # noqa: E402
                            weighted, write_cases, write_errors_per_op)

SEED = 0xB5A
MAX_TOTAL_COST = 1.2e10  # sum over the grid of B * H * S_q * visible keys * (D + D_v): the reference's work
CASE_CAP = 2.5e8
LENGTHS = [1, 17, 63, 64, 65, 127, 128, 129, 200, 511, 777, 1024, 2049]


def ceil_div(a, b):
    return (a + b - 1) // b


def values(shape, vals):
    return {"shape": list(shape), "dtype": "int32", "init": {"kind": "values", "values": [int(x) for x in vals]}}


def draw_metadata(rng, B, H, S_q, S_kv, bs, counts, K_max, fixed, empty, rank, short):
    """Index rows (active prefix unique in [0, N_kv), garbage suffix), counts, block_sizes."""
    N_q, N_kv = ceil_div(S_q, bs), ceil_div(S_kv, bs)
    nums = []
    index = []
    for _ in range(B * H * N_q):
        if counts == "variable":
            n = rng.randint(0 if empty else 1, min(K_max, N_kv))
            if empty and rng.random() < 0.15:
                n = 0
        else:
            n = fixed
        nums.append(n)
        act = rng.sample(range(N_kv), n)
        garbage = [rng.choice([-3, N_kv, N_kv + 17, 1 << 30]) for _ in range(K_max - n)]
        index.extend(act + garbage)
    bsz = None
    if rank:
        shape = {1: [N_kv], 2: [B, N_kv], 3: [B, H, N_kv]}[rank]
        count = 1
        for e in shape:
            count *= e
        if short:
            vals = [bs if rng.random() < 0.4 else rng.randint(1, bs) for _ in range(count)]
        else:
            vals = [bs] * count
        bsz = (shape, vals)
    return index, nums, bsz


def visible_estimate(S_kv, bs, counts, K_max, fixed):
    n = K_max if counts == "variable" else fixed
    return min(S_kv, n * bs)


def fwd_case(name, seed, *, dtype, layout, bs, B, H, H_kv, S_q, S_kv, D, Dv, counts, K_max, fixed=None,
             config_fixed=True, empty=False, rank=0, short=False, kv_splits=1, scale=None, validate=False,
             with_lse=True, strided=False, rng=None):
    index, nums, bsz = draw_metadata(rng, B, H, S_q, S_kv, bs, counts, K_max, fixed, empty, rank, short)
    N_q = ceil_div(S_q, bs)
    shp = (lambda h, s, d: [B, h, s, d]) if layout == "bhsd" else (lambda h, s, d: [B, s, h, d])
    tensors = {}
    for nm, shape in (("q", shp(H, S_q, D)), ("k", shp(H_kv, S_kv, D)), ("v", shp(H_kv, S_kv, Dv))):
        st = random_padded_strides(rng, shape, dtype) if strided and rng.random() < 0.6 else None
        tensors[nm] = tensor(shape, dtype, normal(), st)
    tensors["q2k_block_index"] = values([B, H, N_q, K_max], index)
    if counts == "variable":
        tensors["q2k_block_nums"] = values([B, H, N_q], nums)
    if bsz:
        tensors["block_sizes"] = values(bsz[0], bsz[1])
    tensors["o"] = tensor(shp(H, S_q, Dv), dtype, POISON, output=True)
    compare = {"o": {"mode": "rel_l2", "tol": TOL[dtype]}}
    if with_lse:
        tensors["lse"] = tensor([B, H, S_q], "fp32", POISON, output=True)
        compare["lse"] = {"mode": "lse"}
    # The portable kernels, whatever 'auto' would pick on the GPU (tests/gen/bsa_fwd_hopper_cases.py derives
    # the hopper backend's cases from these).
    config = {"layout": layout, "sparse_block_size": bs, "backend": "portable"}
    if scale is not None:
        config["scale"] = scale
    if counts != "variable" and config_fixed:
        config["block_sparse_num"] = fixed
    if empty:
        config["allow_empty_block_nums"] = True
    if kv_splits != 1:
        config["kv_splits"] = kv_splits
    if validate:
        config["validate_inputs"] = True
    return {"name": name, "op": "bsa_fwd", "config": config, "seed": seed, "tensors": tensors, "compare": compare,
            "gpu_only": True}


def draw_fwd(rng, idx, seed, small=False):
    while True:
        dtype = rng.choice(["fp16", "bf16"])
        layout = rng.choice(["bhsd", "bshd"])
        bs = rng.choice([64, 128])
        D = weighted(rng, [(64, 3), (96, 1), (128, 3)])
        Dv = D if rng.random() < 0.6 else rng.choice([64, 96, 128])
        g = rng.choice([1, 1, 2, 4, 8])
        H_kv = rng.choice([1, 2]) if g > 1 else rng.choice([1, 2, 3])
        if rng.random() < 0.15:
            H_kv, g = 1, rng.choice([2, 4, 6])  # MQA
        H = H_kv * g
        B = rng.choice([1, 1, 2, 3])
        lens = [x for x in LENGTHS if not small or x <= 130]
        S_q, S_kv = rng.choice(lens), rng.choice(lens)
        N_kv = ceil_div(S_kv, bs)
        counts = rng.choice(["fixed", "fixed_kmax", "variable"])
        K_max = rng.randint(1, max(1, min(N_kv, 12)))
        fixed = None
        empty = False
        if counts == "variable":
            if rng.random() < 0.3:
                K_max = rng.randint(1, 14)  # K_max may exceed N_kv with variable counts
            empty = rng.random() < 0.4
        elif counts == "fixed":
            fixed = rng.randint(1, K_max)
        else:
            fixed = K_max
        rank = weighted(rng, [(0, 3), (1, 1), (2, 1), (3, 1)])
        short = rank > 0 and rng.random() < 0.75
        kv_splits = weighted(rng, [(1, 4), (2, 2), (7, 2), (256, 1), ("auto", 2)])
        cost = B * H * S_q * visible_estimate(S_kv, bs, counts, K_max, fixed) * (D + Dv)
        if cost <= (2e6 if small else CASE_CAP):
            break
    scale = rng.choice([None, None, 0.05, 0.3])
    c = fwd_case(f"bsa-fwd-{'small' if small else 'grid'}/{idx:03d}/{dtype}/{layout}/bs{bs}/d{D}-dv{Dv}/h{H}kv{H_kv}/"
                 f"b{B}/sq{S_q}-skv{S_kv}/{counts}{K_max}{'/empty' if empty else ''}/bsz{rank}"
                 f"{'-short' if short else ''}/splits{kv_splits}",
                 seed, dtype=dtype, layout=layout, bs=bs, B=B, H=H, H_kv=H_kv, S_q=S_q, S_kv=S_kv, D=D, Dv=Dv,
                 counts="variable" if counts == "variable" else "fixed", K_max=K_max, fixed=fixed,
                 config_fixed=counts == "fixed", empty=empty, rank=rank, short=short, kv_splits=kv_splits, scale=scale,
                 validate=rng.random() < 0.15, with_lse=rng.random() < 0.85, strided=rng.random() < 0.3, rng=rng)
    return c, cost


def fp8_case(name, seed, rng, *, B, H, S_q, S_kv, counts, K_max, fixed, empty, rank, short, validate, std,
             scale=None, repeat=False):
    index, nums, bsz = draw_metadata(rng, B, H, S_q, S_kv, 64, counts, K_max, fixed, empty, rank, short)
    N_q = ceil_div(S_q, 64)
    tensors = {"q": tensor([B, H, S_q, 128], "bf16", normal(std)), "k": tensor([B, H, S_kv, 128], "bf16", normal(std)),
               "v": tensor([B, H, S_kv, 128], "bf16", normal(std)),
               "q2k_block_index": values([B, H, N_q, K_max], index)}
    if counts == "variable":
        tensors["q2k_block_nums"] = values([B, H, N_q], nums)
    if bsz:
        tensors["block_sizes"] = values(bsz[0], bsz[1])
    tensors["o"] = tensor([B, H, S_q, 128], "bf16", POISON, output=True)
    # The portable kernel, whatever 'auto' would pick on the GPU (tests/gen/bsa_fwd_hopper_cases.py derives the
    # hopper backend's cases from these).
    config = {"backend": "portable"}
    if scale is not None:
        config["scale"] = scale
    if counts != "variable":
        config["block_sparse_num"] = fixed
    if empty:
        config["allow_empty_block_nums"] = True
    if validate:
        config["validate_inputs"] = True
    c = {"name": name, "op": "bsa_fp8_fwd", "config": config, "seed": seed, "tensors": tensors,
         "compare": {"o": {"mode": "rel_l2", "tol": TOL["e4m3"]}}, "gpu_only": True}
    if repeat:
        c["repeat"] = True  # the kernels are deterministic (no atomics): a second call is byte-identical
    return c


def draw_fp8(rng, idx, seed, small=False):
    lens = [x for x in LENGTHS if not small or x <= 130]
    B, H = rng.choice([1, 2]), rng.choice([1, 2, 4])
    S_q, S_kv = rng.choice(lens), rng.choice(lens)
    N_kv = ceil_div(S_kv, 64)
    counts = rng.choice(["fixed", "variable"])
    K_max = rng.randint(1, max(1, min(N_kv, 10)))
    fixed = rng.randint(1, K_max) if counts == "fixed" else None
    empty = counts == "variable" and rng.random() < 0.4
    rank = weighted(rng, [(0, 2), (1, 1), (2, 1), (3, 1)])
    short = rank > 0 and rng.random() < 0.7
    std = rng.choice([0.5, 0.5, 1.0, 2.0])
    # Drawn after the fields above so that the earlier cases' draws stay as they were.
    scale = rng.choice([None, None, None, 0.03, 0.2])
    if not small and rng.random() < 0.2:
        B, H = rng.choice([(3, 2), (2, 5), (1, 8)])  # more (b, h) slices: V scales over batches, grid y
    return fp8_case(f"bsa-fp8-fwd-{'small' if small else 'grid'}/{idx:03d}/h{H}/b{B}/sq{S_q}-skv{S_kv}/{counts}{K_max}"
                    f"{'/empty' if empty else ''}/bsz{rank}{'-short' if short else ''}/std{std}"
                    f"{'' if scale is None else f'/scale{scale}'}", seed, rng, B=B, H=H,
                    S_q=S_q, S_kv=S_kv, counts=counts, K_max=K_max, fixed=fixed, empty=empty, rank=rank, short=short,
                    validate=rng.random() < 0.15, std=std, scale=scale, repeat=idx % 4 == 1)


def build_grid(count=240, fp8_count=60):
    rng = random.Random(SEED)
    cases, total = [], 0.0
    seed = 30000
    while len(cases) < count:
        seed += 1
        c, cost = draw_fwd(rng, len(cases), seed)
        if total + cost > MAX_TOTAL_COST:
            continue
        total += cost
        cases.append(c)
    # Every kv_splits value, each block_sizes rank and both layouts with both block sizes are present.
    for key in ("splits1", "splits2", "splits7", "splits256", "splitsauto"):
        assert any(c["name"].endswith("/" + key) for c in cases), key
    for key in ("bsz1", "bsz2", "bsz3", "/empty",
                "bhsd/bs64", "bhsd/bs128", "bshd/bs64", "bshd/bs128", "variable", "fixed"):
        assert any(key in c["name"] for c in cases), key
    for i in range(fp8_count):
        seed += 1
        cases.append(draw_fp8(rng, i, seed))
    return cases, total


def build_small():
    rng = random.Random(SEED + 1)
    cases = []
    seed = 40000
    for i in range(18):
        seed += 1
        cases.append(draw_fwd(rng, i, seed, small=True)[0])
    for i in range(8):
        seed += 1
        cases.append(draw_fp8(rng, i, seed, small=True))
    return cases


# ----------------------------------------------------------------------------------------------------
# Errors


def fwd_tensors(dtype="bf16", layout="bhsd", B=1, H=2, H_kv=1, S_q=70, S_kv=130, D=64, Dv=64, bs=64, K_max=2,
                index=None, nums=None, bsz=None, lse=True):
    N_q, N_kv = ceil_div(S_q, bs), ceil_div(S_kv, bs)
    shp = (lambda h, s, d: [B, h, s, d]) if layout == "bhsd" else (lambda h, s, d: [B, s, h, d])
    t = {"q": tensor(shp(H, S_q, D), dtype, normal()), "k": tensor(shp(H_kv, S_kv, D), dtype, normal()),
         "v": tensor(shp(H_kv, S_kv, Dv), dtype, normal())}
    if index is None:
        index = [(u + m) % N_kv for _ in range(B * H) for m in range(N_q) for u in range(K_max)]
    t["q2k_block_index"] = values([B, H, N_q, K_max], index)
    if nums is not None:
        t["q2k_block_nums"] = values([B, H, N_q], nums)
    if bsz is not None:
        t["block_sizes"] = values(bsz[0], bsz[1])
    t["o"] = tensor(shp(H, S_q, Dv), dtype, OUTB, output=True)
    if lse:
        t["lse"] = tensor([B, H, S_q], "fp32", OUTB, output=True)
    return t


def fp8_tensors(B=1, H=2, S_q=70, S_kv=130, K_max=2, index=None, nums=None, bsz=None):
    t = fwd_tensors("bf16", "bhsd", B, H, H, S_q, S_kv, 128, 128, 64, K_max, index, nums, bsz, lse=False)
    return t


def build_errors():
    e = Errors(None, "bsa-errors/{op}/", None)
    err = e.err_op

    F = "bsa_fwd"
    # param
    err("param/layout", F, {"layout": "sbhd"}, fwd_tensors(), "param", "layout")
    err("param/sparse-block-size-32", F, {"sparse_block_size": 32}, fwd_tensors(), "param", "sparse_block_size")
    err("param/kv-splits-0", F, {"kv_splits": 0}, fwd_tensors(), "param", "kv_splits")
    err("param/kv-splits-257", F, {"kv_splits": 257}, fwd_tensors(), "param", "kv_splits")
    err("param/kv-splits-1.5", F, {"kv_splits": 1.5}, fwd_tensors(), "param", "kv_splits")
    err("param/kv-splits-word", F, {"kv_splits": "many"}, fwd_tensors(), "param", "kv_splits")
    err("param/scale-0", F, {"scale": 0}, fwd_tensors(), "param", "scale")
    err("param/scale-negative", F, {"scale": -0.1}, fwd_tensors(), "param", "scale")
    err("param/block-sparse-num-0", F, {"block_sparse_num": 0}, fwd_tensors(), "param", "block_sparse_num")
    err("param/block-sparse-num-above-kmax", F, {"block_sparse_num": 3}, fwd_tensors(), "param", "K_max = 2")
    err("param/unknown-key", F, {"causal": True}, fwd_tensors(), "param", "causal")
    err("param/allow-empty-not-bool", F, {"allow_empty_block_nums": 1}, fwd_tensors(), "param", "allow_empty_block_nums")
    # dtype
    err("dtype/q-fp32", F, {}, {**fwd_tensors(), "q": tensor([1, 2, 70, 64], "fp32", normal())}, "dtype", "q:")
    err("dtype/q-e4m3", F, {}, {**fwd_tensors(), "q": tensor([1, 2, 70, 64], "e4m3", normal())}, "dtype", "q:")
    err("dtype/k-differs", F, {}, {**fwd_tensors(), "k": tensor([1, 1, 130, 64], "fp16", normal())}, "dtype", "k:")
    err("dtype/v-differs", F, {}, {**fwd_tensors(), "v": tensor([1, 1, 130, 64], "fp16", normal())}, "dtype", "v:")
    t = fwd_tensors()
    t["q2k_block_index"] = {**t["q2k_block_index"], "dtype": "int64"}
    err("dtype/index-int64", F, {}, t, "dtype", "q2k_block_index")
    t = fwd_tensors(nums=[1, 2, 1, 2])
    t["q2k_block_nums"] = {**t["q2k_block_nums"], "dtype": "int64"}
    err("dtype/nums-int64", F, {}, t, "dtype", "q2k_block_nums")
    t = fwd_tensors(bsz=([3], [64, 64, 2]))
    t["block_sizes"] = {**t["block_sizes"], "dtype": "fp32"}
    err("dtype/block-sizes-fp32", F, {}, t, "dtype", "block_sizes")
    err("dtype/lse-fp16", F, {}, {**fwd_tensors(), "lse": tensor([1, 2, 70], "fp16", OUTB, output=True)}, "dtype", "lse")
    err("dtype/o-differs", F, {}, {**fwd_tensors(), "o": tensor([1, 2, 70, 64], "fp16", OUTB, output=True)}, "dtype", "o:")
    # shape
    err("shape/q-rank3", F, {}, {**fwd_tensors(), "q": tensor([2, 70, 64], "bf16", normal())}, "shape", "q:")
    err("shape/k-rank5", F, {}, {**fwd_tensors(), "k": tensor([1, 1, 1, 130, 64], "bf16", normal())}, "shape", "k:")
    err("shape/k-batch", F, {}, {**fwd_tensors(), "k": tensor([2, 1, 130, 64], "bf16", normal())}, "shape", "k:")
    err("shape/v-heads", F, {}, {**fwd_tensors(), "v": tensor([1, 2, 130, 64], "bf16", normal())}, "shape", "v:")
    err("shape/v-length", F, {}, {**fwd_tensors(), "v": tensor([1, 1, 129, 64], "bf16", normal())}, "shape", "v:")
    err("shape/k-head-dim", F, {}, {**fwd_tensors(), "k": tensor([1, 1, 130, 128], "bf16", normal())}, "shape", "k:")
    err("shape/heads-not-divisible", F, {}, fwd_tensors(H=3, H_kv=2), "shape", "H_kv dividing")
    err("shape/d-80", F, {}, fwd_tensors(D=80, Dv=64), "shape", "head dim D")
    err("shape/d-256", F, {}, fwd_tensors(D=256, Dv=64), "shape", "head dim D")
    err("shape/dv-32", F, {}, fwd_tensors(D=64, Dv=32), "shape", "D_v")
    err("shape/batch-0", F, {}, fwd_tensors(B=0, index=[]), "shape", "B >= 1")
    err("shape/sq-0", F, {}, fwd_tensors(S_q=0, index=[]), "shape", "S_q >= 1")
    err("shape/skv-0", F, {}, fwd_tensors(S_kv=0, index=[0] * 8), "shape", "S_kv >= 1")
    t = fwd_tensors()
    t["q2k_block_index"] = values([1, 2, 3, 2], [0] * 12)
    err("shape/index-nq", F, {}, t, "shape", "q2k_block_index")
    t = fwd_tensors()
    t["q2k_block_index"] = values([1, 2, 2, 0], [])
    err("shape/index-kmax-0", F, {}, t, "shape", "K_max >= 1")
    t = fwd_tensors()
    t["q2k_block_index"] = values([1, 2, 2], [0] * 4)
    err("shape/index-rank3", F, {}, t, "shape", "q2k_block_index")
    t = fwd_tensors(nums=[1] * 4)
    t["q2k_block_nums"] = values([1, 1, 2], [1, 1])
    err("shape/nums-heads", F, {}, t, "shape", "q2k_block_nums")
    err("shape/block-sizes-rank1-length", F, {}, fwd_tensors(bsz=([2], [64, 64])), "shape", "block_sizes")
    err("shape/block-sizes-rank2-batch", F, {}, fwd_tensors(bsz=([2, 3], [64] * 6)), "shape", "block_sizes")
    err("shape/block-sizes-rank3-heads", F, {}, fwd_tensors(bsz=([1, 1, 3], [64] * 3)), "shape", "block_sizes")
    err("shape/block-sizes-rank4", F, {}, fwd_tensors(bsz=([1, 2, 1, 3], [64] * 6)), "shape", "rank 1, 2 or 3")
    err("shape/o-head-dim", F, {}, {**fwd_tensors(Dv=128), "o": tensor([1, 2, 70, 64], "bf16", OUTB, output=True)},
        "shape", "o:")
    err("shape/o-layout", F, {"layout": "bshd"}, {**fwd_tensors(layout="bshd"),
                                                  "o": tensor([1, 2, 70, 64], "bf16", OUTB, output=True)}, "shape", "o:")
    err("shape/lse", F, {}, {**fwd_tensors(), "lse": tensor([1, 2, 64], "fp32", OUTB, output=True)}, "shape", "lse")
    err("shape/bshd-q-read-as-bhsd", F, {}, fwd_tensors(layout="bshd"), "shape", "")
    # args
    t = fwd_tensors()
    del t["q2k_block_index"]
    err("args/index-missing", F, {}, t, "args", "q2k_block_index")
    t = fwd_tensors()
    del t["o"]
    err("args/o-missing", F, {}, t, "args", "o")
    err("args/unknown-tensor", F, {}, {**fwd_tensors(), "sinks": tensor([2], "fp32", normal())}, "args", "sinks")
    # layout
    err("layout/q-inner-stride", F, {}, {**fwd_tensors(), "q": tensor([1, 2, 70, 64], "bf16", normal(),
                                                                     [2 * 70 * 128, 70 * 128, 128, 2])}, "layout", "q:")
    err("layout/k-row-stride-not-16-bytes", F, {}, {**fwd_tensors(), "k": tensor([1, 1, 130, 64], "bf16", normal(),
                                                                                [130 * 68, 130 * 68, 68, 1])},
        "layout", "k:", gpu_only=True)
    err("layout/o-strided", F, {}, {**fwd_tensors(), "o": tensor([1, 2, 70, 64], "bf16", OUTB,
                                                                 [2 * 70 * 72, 70 * 72, 72, 1], output=True)},
        "layout", "o:")
    err("layout/lse-strided", F, {}, {**fwd_tensors(), "lse": tensor([1, 2, 70], "fp32", OUTB, [2 * 80, 80, 1],
                                                                     output=True)}, "layout", "lse")
    # content (validate_inputs)
    V = {"validate_inputs": True}
    err("content/index-out-of-range", F, V, fwd_tensors(index=[0, 1, 1, 3, 0, 1, 1, 2]), "content", "q2k_block_index")
    err("content/index-negative", F, V, fwd_tensors(index=[0, 1, 1, 2, -1, 1, 1, 2]), "content", "q2k_block_index")
    err("content/index-duplicate", F, V, fwd_tensors(index=[0, 1, 1, 1, 0, 1, 1, 2]), "content", "unique")
    err("content/nums-zero-without-allow", F, V, fwd_tensors(nums=[1, 0, 2, 2]), "content", "allow_empty_block_nums")
    err("content/nums-above-kmax", F, {**V, "allow_empty_block_nums": True}, fwd_tensors(nums=[1, 3, 2, 2]),
        "content", "q2k_block_nums")
    err("content/nums-negative", F, {**V, "allow_empty_block_nums": True}, fwd_tensors(nums=[1, -1, 2, 2]),
        "content", "q2k_block_nums")
    err("content/block-size-0-referenced", F, V, fwd_tensors(bsz=([3], [64, 0, 64])), "content", "block_sizes")
    err("content/block-size-above-bs", F, V, fwd_tensors(bsz=([3], [65, 64, 64])), "content", "block_sizes")
    err("content/block-size-rank3-slice", F, V, fwd_tensors(bsz=([1, 2, 3], [64, 64, 64, 64, 0, 64])), "content",
        "[0, 1, 1]")
    err("content/suffix-dup-ignored-but-prefix-bad", F, {**V, "block_sparse_num": 1},
        fwd_tensors(index=[0, 0, 5, 9, 1, 1, 2, 2]), "content", "q2k_block_index")
    # unsupported
    # backend 'hopper' never falls back: what it does not serve is refused, naming why (device rules).
    err("unsupported/backend-hopper-dv-differs", F, {"backend": "hopper"}, fwd_tensors(Dv=128), "unsupported",
        "backend 'hopper': it serves D = D_v in {64, 128}", gpu_only=True)
    err("unsupported/backend-hopper-kv-splits", F, {"backend": "hopper", "kv_splits": 4}, fwd_tensors(), "unsupported",
        "backend 'hopper': kv_splits > 1", gpu_only=True)

    P = "bsa_fp8_fwd"
    err("param/layout-key", P, {"layout": "bhsd"}, fp8_tensors(), "param", "layout")
    err("param/sparse-block-size-key", P, {"sparse_block_size": 64}, fp8_tensors(), "param", "sparse_block_size")
    err("param/kv-splits-key", P, {"kv_splits": 2}, fp8_tensors(), "param", "kv_splits")
    err("param/scale-negative", P, {"scale": -1.0}, fp8_tensors(), "param", "scale")
    err("param/block-sparse-num-above-kmax", P, {"block_sparse_num": 5}, fp8_tensors(), "param", "block_sparse_num")
    err("dtype/fp16", P, {}, {**fp8_tensors(), "q": tensor([1, 2, 70, 128], "fp16", normal())}, "dtype", "q:")
    err("dtype/o-fp16", P, {}, {**fp8_tensors(), "o": tensor([1, 2, 70, 128], "fp16", OUTB, output=True)}, "dtype", "o:")
    err("shape/d-64", P, {}, {**fwd_tensors("bf16", "bhsd", 1, 2, 2, 70, 130, 64, 64, 64, lse=False)}, "shape", "128")
    err("shape/dv-64", P, {}, {**fwd_tensors("bf16", "bhsd", 1, 2, 2, 70, 130, 128, 64, 64, lse=False)}, "shape", "D_v")
    err("shape/gqa", P, {}, {**fp8_tensors(), "k": tensor([1, 1, 130, 128], "bf16", normal()),
                             "v": tensor([1, 1, 130, 128], "bf16", normal())}, "shape", "H_kv = H_q")
    err("shape/rank3", P, {}, {**fp8_tensors(), "q": tensor([2, 70, 128], "bf16", normal())}, "shape", "q:")
    err("shape/index-nq-bs128", P, {}, fwd_tensors("bf16", "bhsd", 1, 2, 2, 70, 130, 128, 128, 128, lse=False),
        "shape", "q2k_block_index")
    err("args/lse-not-an-output", P, {}, {**fp8_tensors(), "lse": tensor([1, 2, 70], "fp32", OUTB, output=True)},
        "args", "lse")
    err("layout/q-padded", P, {}, {**fp8_tensors(), "q": tensor([1, 2, 70, 128], "bf16", normal(),
                                                               [2 * 70 * 136, 70 * 136, 136, 1])}, "layout", "q:")
    err("content/index-duplicate", P, V, fp8_tensors(index=[0, 0, 1, 2, 0, 1, 1, 2]), "content", "unique")
    err("content/nums-zero-without-allow", P, V, fp8_tensors(nums=[1, 0, 2, 2]), "content", "q2k_block_nums")
    err("content/block-size-0", P, V, fp8_tensors(bsz=([1, 3], [0, 64, 64])), "content", "block_sizes")
    return e.cases


def main():
    args = case_args(__doc__).parse_args()
    grid, total = build_grid()
    fp8 = [c for c in grid if c["op"] == "bsa_fp8_fwd"]
    grid = [c for c in grid if c["op"] == "bsa_fwd"]
    write_cases(os.path.join(args.out_dir, "gpu", "bsa_fwd_grid.json"), grid, f", reference cost {total:.2e}")
    write_cases(os.path.join(args.out_dir, "gpu", "bsa_fp8_fwd_grid.json"), fp8)
    small = build_small()
    write_cases(os.path.join(args.out_dir, "gpu", "bsa_fwd_small.json"), [c for c in small if c["op"] == "bsa_fwd"])
    write_cases(os.path.join(args.out_dir, "gpu", "bsa_fp8_fwd_small.json"),
                [c for c in small if c["op"] == "bsa_fp8_fwd"])
    write_errors_per_op(args.out_dir, build_errors(), ("bsa_fwd", "bsa_fp8_fwd"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
