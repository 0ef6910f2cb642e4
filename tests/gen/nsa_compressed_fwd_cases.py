#!/usr/bin/env python3
"""Test cases for nsa_compressed_fwd (SPEC.md §2.15, metadata §2.14) in the `attnjit test` format
(tools/cli/test_case.hpp). Standard library only; deterministic (fixed seeds).

Writes:
  tests/cases/gpu/nsa_compressed_fwd_grid.json   >= 150 random configurations compared kernel vs CPU
                        reference on the same random inputs (no golden): fp16 / bf16, DK / DV 64 / 128
                        (DK != DV too), group size 16 / 32 / 64 with H_kv 1 / 2 / 4, bs 1 / 3 / 16 / 32 /
                        64 / 100, 1-6 requests with empty ones, ones shorter than bs and lengths that are not
                        multiples of bs, lse present or absent, padded (class F) input strides, q broadcast
                        over heads, validate_inputs on some. o: rel_l2 at the dtype's threshold (rows with
                        no complete chunk exactly zero); lse: the "lse" rule. Outputs poisoned.
  tests/cases/gpu/nsa_compressed_fwd_small.json  ~12 small cases (every feature) for compute-sanitizer.
  tests/cases/nsa_compressed_fwd_errors.json     one case per rejection rule of SPEC.md §2.15 / §2.14
                        (§1.2 classes, §1.11 format) and per validate_inputs caller-contract item; outputs
                        hold a byte pattern, so the runner proves that a rejected call wrote nothing. Rules
                        only a device call has (16-byte strides of class F) are gpu_only. Not expressible
                        here, covered by tests/unit/nsa_test.cpp: a non-finite scale, device placement,
                        overlapping outputs, the kernel impl's Unsupported error.
  tests/cases/gpu/nsa_compressed_fwd_hopper_{grid,small}.json  the same cases pinned to backend 'hopper'
                        (the portable files pin 'portable').
The GPU cases keep DK = DV (the kernels' rule; DK != DV is the reference's alone, covered by the golden
file and tests/unit/nsa_test.cpp). The grid ends with NSA-shaped cases: one long request, H 32 / H_kv 2,
D 128, bs 32 and 64.

Usage: python3 tests/gen/nsa_compressed_fwd_cases.py [--out-dir tests/cases]
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from casegen_common import Errors, OUTB, POISON, TOL, config_with, edited, normal, tensor  # noqa: E402
from nsa_cases_common import (head_errors, lens_label, maybe_padded, metadata, metadata_shape_errors,  # noqa: E402
                              offsets_errors, random_heads, random_lens_within, set_values, token_errors,
                              write_all)

OP = "nsa_compressed_fwd"
SEED = 0x45A1
MAX_COST = 3e8  # T * H * (visible chunks, upper bound) * (DK + DV) per grid case


def base(dtype="fp16", lens=(3, 5), bs=4, H=16, H_kv=1, DK=64, DV=64, lse=True):
    """A valid call: q [T, H, DK], k_cmp [C, H_kv, DK], v_cmp [C, H_kv, DV], metadata, o [T, H, DV] and lse
    [T, H] holding a byte pattern."""
    meta, T, C = metadata(list(lens), bs)
    t = {"q": tensor([T, H, DK], dtype, normal()), "k_cmp": tensor([C, H_kv, DK], dtype, normal()),
         "v_cmp": tensor([C, H_kv, DV], dtype, normal()), **meta, "o": tensor([T, H, DV], dtype, OUTB, output=True)}
    if lse:
        t["lse"] = tensor([T, H], "fp32", OUTB, output=True)
    return t


CFG = {"scale": 0.125, "bs": 4}


def cfg(**kw):
    return config_with(CFG, **kw)


def build_errors():
    e = Errors(OP, "nsa-compressed-error/", 9000)
    err = e.err

    # --- param ---
    err("param/scale-missing", cfg(scale=None), base(), "param", "scale: expected a finite value > 0, got none")
    err("param/scale-zero", cfg(scale=0.0), base(), "param", "scale: expected a finite value > 0, got 0")
    err("param/scale-negative", cfg(scale=-0.5), base(), "param", "scale: expected a finite value > 0, got -0.5")
    err("param/scale-string-inf", cfg(scale="inf"), base(), "param", "scale: expected a number")
    err("param/bs-missing", cfg(bs=None), base(), "param", "bs: expected an integer in [1, 2147483647], got none")
    err("param/bs-zero", cfg(bs=0), base(), "param", "bs: expected an integer in [1, 2147483647], got 0")
    err("param/bs-fraction", cfg(bs=2.5), base(), "param", "bs: expected an integer in [1, 2147483647], got 2.5")
    err("param/validate-inputs-not-bool", cfg(validate_inputs=1), base(), "param", "validate_inputs: expected a boolean")
    err("param/unknown-key-block-size", cfg(block_size=4), base(), "param", "block_size: expected one of")
    err("param/unknown-impl", cfg(impl="fast"), base(), "param", "impl: expected")

    # --- dtype ---
    e.all_dtypes(CFG, base, ("q", "k_cmp", "v_cmp", "o"))
    e.dtype_mismatches(CFG, base, (("k_cmp", "bf16", "fp16"), ("v_cmp", "fp16", "bf16"), ("o", "fp16", "bf16"),
                                   ("o", "fp32", "fp16")))
    err("dtype/lse-bf16", CFG, edited(base, lambda t: t["lse"].update(dtype="bf16")), "dtype",
        "lse: expected fp32, got bf16")
    e.int64_metadata(CFG, base, ("offsets", "chunk_offsets", "token_indices"))

    # --- args ---
    e.missing(CFG, base, ("q", "k_cmp", "v_cmp", "offsets", "chunk_offsets", "token_indices", "o"))
    err("args/unknown-tensor-block-indices", CFG,
        edited(base, lambda t: t.update(block_indices=tensor([8, 1, 2], "int32", {"kind": "values", "values": [0] * 16}))),
        "args", "block_indices: expected one of")

    # --- shape: ranks ---
    for n, shape, nd, dims in (("q", [8, 16, 1, 64], 3, "[T, H, DK]"), ("k_cmp", [3, 64], 3, "[C, H_kv, DK]"),
                               ("v_cmp", [3, 1, 1, 64], 3, "[C, H_kv, DV]"), ("o", [128, 64], 3, "[T, H, DV]"),
                               ("lse", [8, 16, 1], 2, "[T, H]"), ("offsets", [3, 1], 1, "[N + 1]"),
                               ("chunk_offsets", [1, 3], 1, "[N + 1]"), ("token_indices", [16], 2, "[T, 2]")):
        def f(t, n=n, shape=shape):
            t[n]["shape"] = shape
            if n in ("offsets", "chunk_offsets"):
                t[n]["init"] = {"kind": "values", "values": [0, 3, 8] if n == "offsets" else [0, 1, 3]}
            if n == "token_indices":
                t[n]["init"] = {"kind": "values", "values": [0] * 16}
        err(f"shape/{n}-rank-{len(shape)}", CFG, edited(base, f), "shape", f"{n}: expected {nd} dims {dims}")
    # extents
    err("shape/k-cmp-dk-differs", CFG, edited(base, lambda t: t["k_cmp"]["shape"].__setitem__(2, 128)), "shape",
        "k_cmp: expected dim 2 (DK, q's head dim) = 64, got 128")
    err("shape/v-cmp-rows-differ", CFG, edited(base, lambda t: t["v_cmp"]["shape"].__setitem__(0, 4)), "shape",
        "v_cmp: expected dim 0 (C, k_cmp's rows) = 3, got 4")
    err("shape/v-cmp-heads-differ", CFG, edited(base, lambda t: t["v_cmp"]["shape"].__setitem__(1, 2)), "shape",
        "v_cmp: expected dim 1 (H_kv, k_cmp's heads) = 1, got 2")
    for n, dim, val, what, want in (("o", 0, 7, "T", 8), ("o", 1, 32, "H", 16), ("o", 2, 128, "DV, v_cmp's head dim", 64),
                                    ("lse", 0, 9, "T", 8), ("lse", 1, 1, "H", 16)):
        err(f"shape/{n}-dim{dim}-{val}", CFG, edited(base, lambda t: t[n]["shape"].__setitem__(dim, val)), "shape",
            f"{n}: expected dim {dim} ({what}) = {want}, got {val}")
    err("shape/lse-th-transposed", CFG, edited(base, lambda t: t["lse"].update(shape=[16, 8])), "shape",
        "lse: expected dim 0 (T) = 8, got 16")
    metadata_shape_errors(e, CFG, base, token_rows=7, token_width=3)
    err("shape/chunk-offsets-length-differs", CFG,
        edited(base, lambda t: t["chunk_offsets"].update(shape=[4], init={"kind": "values", "values": [0, 1, 3, 3]})),
        "shape", "chunk_offsets: expected dim 0 (N + 1, offsets' length) = 3, got 4")
    # head dims and head rules
    for DK, DV in ((96, 64), (256, 64), (32, 64)):
        err(f"shape/dk{DK}", CFG, base(DK=DK, DV=DV), "shape", f"q: expected head dim DK in {{64, 128}}, got {DK}")
    for DV in (32, 96, 256):
        err(f"shape/dv{DV}", CFG, base(DV=DV), "shape", f"v_cmp: expected head dim DV in {{64, 128}}, got {DV}")
    head_errors(e, CFG, base, "k_cmp", (16, 3), ((8, 1), (48, 2)))
    err("shape/h16-hkv16-mha", CFG, base(H=16, H_kv=16), "shape", "(group 1)")

    # --- layout ---
    e.innermost_strides(CFG, base, (("q", [2048, 128, 2]), ("k_cmp", [128, 128, 2]), ("v_cmp", [128, 128, 2])))
    err("layout/q-head-stride-136-bytes", CFG, edited(base, lambda t: t["q"].update(strides=[1088, 68, 1])), "layout",
        "q: expected dim 1 stride to be a multiple of 16 bytes", gpu_only=True)
    err("layout/v-cmp-row-stride-136-bytes", CFG, edited(base, lambda t: t["v_cmp"].update(strides=[68, 64, 1])),
        "layout", "v_cmp: expected dim 0 stride to be a multiple of 16 bytes", gpu_only=True)
    err("layout/offsets-strided", CFG,
        edited(base, lambda t: t["offsets"].update(strides=[2], init={"kind": "values", "values": [0, -1, 3, -1, 8]})),
        "layout", "offsets: expected a contiguous (row-major) tensor")
    err("layout/chunk-offsets-strided", CFG,
        edited(base, lambda t: t["chunk_offsets"].update(strides=[2], init={"kind": "values", "values": [0, -1, 1, -1, 3]})),
        "layout", "chunk_offsets: expected a contiguous (row-major) tensor")
    e.not_contiguous(CFG, base, (("o", [2048, 64, 1]), ("o", [1024, 64, 0]), ("lse", [32, 1]), ("lse", [1, 8])))

    # --- content (validate_inputs): the caller contract of §2.14 ---
    V = cfg(validate_inputs=True)
    offsets_errors(e, V, base, first=1, decreasing=(9, 8), last=7)
    # token 3 claims request 0; token 7 request 2 (of 2); token 4 position 2 instead of 1
    token_errors(e, V, base, (("request-wrong", 6, 0), ("request-out-of-range", 14, 2), ("position-wrong", 9, 2)))
    err("content/chunk-offsets-first-nonzero", V, edited(base, lambda t: set_values(t, "chunk_offsets", [1, 1, 3])),
        "content", "chunk_offsets: expected element 0 to be 0, got 1")
    err("content/chunk-count-floor-not-ceil", V, edited(base, lambda t: set_values(t, "chunk_offsets", [0, 0, 1]),
                                                         ), "content",
        "chunk_offsets: expected request 0's chunk count chunk_offsets[1] - chunk_offsets[0] to be ceil(len 3 / bs 4) = 1, got 0")

    def more_rows(t):
        for n in ("k_cmp", "v_cmp"):
            t[n]["shape"][0] = 4
    err("content/chunk-offsets-last-not-c", V, edited(base, more_rows), "content",
        "chunk_offsets: expected the last element (index 2) to be C = 4 (k_cmp's rows), got 3")
    return e.cases


def grid_case(rng, name, seed, small):
    dtype, H_kv, G, H = random_heads(rng, small)
    DK = rng.choice([64, 128])
    DV = DK  # the kernels' rule (see the module doc)
    bs = rng.choice([1, 3, 16] if small else [1, 3, 16, 32, 32, 64, 64, 100])
    N = rng.randint(1, 3 if small else 6)
    max_len = 40 if small else rng.choice([64, 200, 700, 1500])
    lens = random_lens_within(rng, N, max_len, bs, lambda ls: sum(ls) * H * (max(ls) // bs + 1) * (DK + DV),
                              2e6 if small else MAX_COST)
    with_lse = rng.random() < 0.75
    validate = rng.random() < 0.2
    padded = rng.random() < 0.3
    q_bcast = rng.random() < 0.1
    meta, T, C = metadata(lens, bs)
    qs = [DK, 0, 1] if q_bcast and T else maybe_padded(rng, [T, H, DK], dtype, padded)
    t = {"q": tensor([T, H, DK], dtype, normal(), qs),
         "k_cmp": tensor([C, H_kv, DK], dtype, normal(), maybe_padded(rng, [C, H_kv, DK], dtype, padded)),
         "v_cmp": tensor([C, H_kv, DV], dtype, normal(), maybe_padded(rng, [C, H_kv, DV], dtype, padded)),
         **meta, "o": tensor([T, H, DV], dtype, POISON, output=True)}
    compare = {"o": {"mode": "rel_l2", "tol": TOL[dtype]}}
    if with_lse:
        t["lse"] = tensor([T, H], "fp32", POISON, output=True)
        compare["lse"] = {"mode": "lse"}
    scale = round(rng.uniform(0.5, 1.5) / DK ** 0.5, 4)
    config = {"scale": scale, "bs": bs}
    if validate:
        config["validate_inputs"] = True
    lname = lens_label(lens, T)
    full = (f"{name}/{dtype}/g{G}-h{H}kv{H_kv}/dk{DK}-dv{DV}/bs{bs}/lens{lname}" + ("/lse" if with_lse else "") +
            ("/padded" if padded and not q_bcast else "") + ("/q-bcast" if q_bcast else "") +
            ("/validate" if validate else ""))
    return {"name": full, "op": OP, "config": config, "seed": seed, "tensors": t, "compare": compare}


def nsa_shaped():
    """Long single requests at the shape NSA runs (scaled down so the CPU reference stays quick)."""
    cases = []
    for i, (dtype, bs, T) in enumerate((("bf16", 64, 2048), ("fp16", 32, 1999), ("bf16", 16, 1500))):
        meta, T, C = metadata([T], bs)
        t = {"q": tensor([T, 32, 128], dtype, normal()), "k_cmp": tensor([C, 2, 128], dtype, normal()),
             "v_cmp": tensor([C, 2, 128], dtype, normal()), **meta,
             "o": tensor([T, 32, 128], dtype, POISON, output=True), "lse": tensor([T, 32], "fp32", POISON, output=True)}
        cases.append({"name": f"nsa-compressed-grid/nsa-shape/{dtype}/g16-h32kv2/d128/bs{bs}/T{T}", "op": OP,
                      "config": {"scale": 0.0884, "bs": bs}, "seed": 97000 + i, "tensors": t,
                      "compare": {"o": {"mode": "rel_l2", "tol": TOL[dtype]}, "lse": {"mode": "lse"}}})
    return cases


def main():
    return write_all(__doc__, OP, "compressed", SEED, grid_case, build_errors, 90000, 95000, extra=nsa_shaped,
                     hopper=True)


if __name__ == "__main__":
    sys.exit(main())
