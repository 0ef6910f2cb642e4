#!/usr/bin/env python3
"""Test cases for nsa_topk (SPEC.md §2.16, metadata §2.14) in the `attnjit test` format
(tools/cli/test_case.hpp). Standard library only; deterministic (fixed seeds).

Writes:
  tests/cases/gpu/nsa_topk_grid.json   >= 150 random configurations compared kernel vs CPU reference on the
                        same random inputs (no golden) by the "topk" rule (SPEC.md §1.9 with candidate set
                        [0, cur], expected count min(S, cur + 1), importance tolerance 1e-4 * |ref| + 1e-5;
                        tools/cli/topk_check.cpp's nsa_topk scorer): fp16 / bf16, D 64 / 128, group size 16 /
                        32 / 64 with H_kv 1 / 2 / 4, bs 1 / 3 / 16 / 32 / 64, S 1..128 (above and below the
                        candidate counts), 1-6 requests (empty ones, ones shorter than bs, lengths not
                        multiples of bs), padded (class F) strides, validate_inputs on some. Outputs poisoned.
                        Then the fixed cases of window_cases(): requests with more candidates than the kernel's
                        on-chip window (1024 chunks a token: several windows merged into
                        the running top-S), group sizes 48 and 80 / 128 (a partial warp, tiles of 64 heads),
                        many short requests in one CTA.
  tests/cases/gpu/nsa_topk_small.json  ~12 small cases for compute-sanitizer, plus one two-window case.
  tests/cases/gpu/nsa_topk_hopper_{grid,small}.json  the same cases pinned to backend 'hopper' (the grid
                        and small files above pin 'portable').
  tests/cases/nsa_topk_errors.json     one case per rejection rule of SPEC.md §2.16 / §2.14 and per
                        validate_inputs caller-contract item; the output holds a byte pattern (a rejected call
                        writes nothing). Device-only rules are gpu_only; a non-finite scale, device placement
                        and the kernel impl's Unsupported error are covered by tests/unit/nsa_test.cpp.

Usage: python3 tests/gen/nsa_topk_cases.py [--out-dir tests/cases]
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from casegen_common import (Errors, OUTB, POISON, case_args, config_with, edited, normal, pinned_to, tensor,  # noqa: E402
                            write_cases)
from nsa_cases_common import (build_set, head_errors, ints, lens_label, maybe_padded, metadata,  # noqa: E402
                              metadata_shape_errors, offsets_errors, random_heads, random_lens_within,
                              set_values, token_errors)

OP = "nsa_topk"
SEED = 0x45A2
MAX_COST = 2e8  # T * H * (candidates, upper bound) * D per grid case


def base(dtype="fp16", lens=(3, 5), bs=4, H=16, H_kv=1, D=64, S=2):
    """A valid call: q [T, H, D], k_cmp [C, H_kv, D], metadata, block_indices [T, H_kv, S] holding a byte
    pattern."""
    meta, T, C = metadata(list(lens), bs)
    return {"q": tensor([T, H, D], dtype, normal()), "k_cmp": tensor([C, H_kv, D], dtype, normal()), **meta,
            "block_indices": tensor([T, H_kv, S], "int32", OUTB, output=True)}


CFG = {"scale": 0.125, "selected_block_num": 2, "bs": 4}


def cfg(**kw):
    return config_with(CFG, **kw)


def build_errors():
    e = Errors(OP, "nsa-topk-error/", 9300)
    err = e.err

    # --- param ---
    err("param/scale-missing", cfg(scale=None), base(), "param", "scale: expected a finite value > 0, got none")
    err("param/scale-zero", cfg(scale=0.0), base(), "param", "scale: expected a finite value > 0, got 0")
    err("param/scale-negative", cfg(scale=-0.25), base(), "param", "scale: expected a finite value > 0, got -0.25")
    err("param/s-missing", cfg(selected_block_num=None), base(), "param",
        "selected_block_num: expected an integer in [1, 128], got none")
    err("param/s-zero", cfg(selected_block_num=0), base(), "param",
        "selected_block_num: expected an integer in [1, 128], got 0")
    err("param/s-129", cfg(selected_block_num=129), base(S=129), "param",
        "selected_block_num: expected an integer in [1, 128], got 129")
    err("param/s-fraction", cfg(selected_block_num=1.5), base(), "param",
        "selected_block_num: expected an integer in [1, 128], got 1.5")
    err("param/bs-missing", cfg(bs=None), base(), "param", "bs: expected an integer in [1, 2147483647], got none")
    err("param/bs-zero", cfg(bs=0), base(), "param", "bs: expected an integer in [1, 2147483647], got 0")
    err("param/unknown-key-topk", cfg(topk=2), base(), "param", "topk: expected one of")
    err("param/validate-inputs-not-bool", cfg(validate_inputs=0), base(), "param", "validate_inputs: expected a boolean")

    # --- dtype ---
    e.all_dtypes(CFG, base, ("q", "k_cmp"))
    err("dtype/k-cmp-bf16-for-fp16", CFG, edited(base, lambda t: t["k_cmp"].update(dtype="bf16")), "dtype",
        "k_cmp: expected fp16 (q's dtype), got bf16")
    e.int64_metadata(CFG, base, ("block_indices", "offsets", "chunk_offsets", "token_indices"))

    # --- args ---
    e.missing(CFG, base, ("q", "k_cmp", "offsets", "chunk_offsets", "token_indices", "block_indices"))
    err("args/unknown-tensor-lse", CFG, edited(base, lambda t: t.update(lse=tensor([8, 16], "fp32", normal()))),
        "args", "lse: expected one of")

    # --- shape ---
    for n, shape, nd, dims in (("q", [8, 16, 1, 64], 3, "[T, H, D]"), ("k_cmp", [3, 64], 3, "[C, H_kv, D]"),
                               ("block_indices", [8, 2], 3, "[T, H_kv, S]"), ("offsets", [3, 1], 1, "[N + 1]"),
                               ("chunk_offsets", [3, 1], 1, "[N + 1]"), ("token_indices", [16], 2, "[T, 2]")):
        err(f"shape/{n}-rank-{len(shape)}", CFG, edited(base, lambda t: t[n].update(shape=shape)), "shape",
            f"{n}: expected {nd} dims {dims}")
    err("shape/k-cmp-d-differs", CFG, edited(base, lambda t: t["k_cmp"]["shape"].__setitem__(2, 128)), "shape",
        "k_cmp: expected dim 2 (D, q's head dim) = 64, got 128")
    for dim, val, what, want in ((0, 7, "T", 8), (1, 2, "H_kv", 1), (2, 3, "S, selected_block_num", 2)):
        err(f"shape/block-indices-dim{dim}-{val}", CFG,
            edited(base, lambda t: t["block_indices"]["shape"].__setitem__(dim, val)), "shape",
            f"block_indices: expected dim {dim} ({what}) = {want}, got {val}")
    metadata_shape_errors(e, CFG, base, token_rows=6)
    err("shape/chunk-offsets-length-differs", CFG,
        edited(base, lambda t: t["chunk_offsets"].update(shape=[2], init=ints([0, 3]))), "shape",
        "chunk_offsets: expected dim 0 (N + 1, offsets' length) = 3, got 2")
    for D in (32, 96, 256):
        err(f"shape/d{D}", CFG, base(D=D), "shape", f"q: expected head dim D in {{64, 128}}, got {D}")
    head_errors(e, CFG, base, "k_cmp", (16, 5), ((4, 1), (64, 8)))

    # --- layout ---
    e.innermost_strides(CFG, base, (("q", [2048, 128, 2]), ("k_cmp", [128, 128, 2])))
    err("layout/q-token-stride-2056-bytes", CFG, edited(base, lambda t: t["q"].update(strides=[1028, 64, 1])),
        "layout", "q: expected dim 0 stride to be a multiple of 16 bytes", gpu_only=True)
    err("layout/chunk-offsets-strided", CFG,
        edited(base, lambda t: t["chunk_offsets"].update(strides=[3], init=ints([0, 9, 9, 1, 9, 9, 3]))), "layout",
        "chunk_offsets: expected a contiguous (row-major) tensor")
    e.not_contiguous(CFG, base, [("block_indices", st) for st in ([4, 2, 1], [2, 2, 0], [1, 2, 8])])

    # --- content (validate_inputs) ---
    V = cfg(validate_inputs=True)
    offsets_errors(e, V, base, first=-1, decreasing=(9, 8), last=6)
    token_errors(e, V, base, (("request-wrong", 4, 1), ("position-wrong", 13, 0)))
    err("content/chunk-offsets-first-nonzero", V, edited(base, lambda t: set_values(t, "chunk_offsets", [2, 1, 3])),
        "content", "chunk_offsets: expected element 0 to be 0, got 2")
    err("content/chunk-count-wrong", V, edited(base, lambda t: set_values(t, "chunk_offsets", [0, 1, 2])), "content",
        "chunk_offsets: expected request 1's chunk count chunk_offsets[2] - chunk_offsets[1] to be ceil(len 5 / bs 4) = 2, got 1")

    def more_rows(t):
        t["k_cmp"]["shape"][0] = 5
    err("content/chunk-offsets-last-not-c", V, edited(base, more_rows), "content",
        "chunk_offsets: expected the last element (index 2) to be C = 5 (k_cmp's rows), got 3")
    return e.cases


def grid_case(rng, name, seed, small):
    dtype, H_kv, G, H = random_heads(rng, small)
    D = rng.choice([64, 128])
    bs = rng.choice([1, 3, 16] if small else [1, 3, 16, 32, 64, 64])
    S = rng.choice([1, 2, 4, 7] if small else [1, 2, 3, 4, 8, 16, 16, 32, 64, 100, 128])
    N = rng.randint(1, 3 if small else 6)
    max_len = 40 if small else rng.choice([64, 300, 1000, 3000])
    lens = random_lens_within(rng, N, max_len, bs, lambda ls: sum(ls) * H * (max(ls) // bs + 1) * D,
                              2e6 if small else MAX_COST)
    validate = rng.random() < 0.2
    padded = rng.random() < 0.3
    meta, T, C = metadata(lens, bs)
    t = {"q": tensor([T, H, D], dtype, normal(), maybe_padded(rng, [T, H, D], dtype, padded)),
         "k_cmp": tensor([C, H_kv, D], dtype, normal(), maybe_padded(rng, [C, H_kv, D], dtype, padded)),
         **meta, "block_indices": tensor([T, H_kv, S], "int32", POISON, output=True)}
    scale = round(rng.uniform(0.5, 1.5) / D ** 0.5, 4)
    config = {"scale": scale, "selected_block_num": S, "bs": bs}
    if validate:
        config["validate_inputs"] = True
    lname = lens_label(lens, T)
    full = (f"{name}/{dtype}/g{G}-h{H}kv{H_kv}/d{D}/bs{bs}/s{S}/lens{lname}" + ("/padded" if padded else "") +
            ("/validate" if validate else ""))
    return {"name": full, "op": OP, "config": config, "seed": seed, "tensors": t,
            "compare": {"block_indices": {"mode": "topk"}}}


# (name, dtype, H, H_kv, D, bs, lens, S, validate) of the fixed cases; the reference's cost is about
# sum(len^2) / (2 bs) * H * D each (at most ~4.5e9, seconds on the CPU).
WINDOW_CASES = (
    ("g16-two-windows", "fp16", 16, 1, 64, 1, [1100], 16, False),
    ("g16-two-windows-ragged", "bf16", 16, 1, 64, 1, [5, 1500, 3], 128, True),
    ("g32-two-windows", "fp16", 32, 1, 64, 1, [2100], 7, False),
    ("g64-three-windows", "bf16", 64, 1, 64, 1, [2200], 20, True),
    ("g16-d128-s128-two-windows", "bf16", 16, 1, 128, 2, [2600], 128, False),
    ("g128-two-head-tiles", "fp16", 128, 1, 64, 3, [300, 7], 16, False),
    ("g80-partial-head-tile", "bf16", 80, 1, 64, 4, [200], 4, True),
    ("g48-partial-warp", "fp16", 96, 2, 128, 16, [500, 33], 8, False),
    ("g16-short-requests", "bf16", 32, 2, 64, 1, [1, 2, 1, 3, 0, 5, 1, 1, 2, 0, 7], 3, False),
)


def window_case(name, seed, dtype, H, H_kv, D, bs, lens, S, validate):
    meta, T, C = metadata(lens, bs)
    t = {"q": tensor([T, H, D], dtype, normal()), "k_cmp": tensor([C, H_kv, D], dtype, normal()), **meta,
         "block_indices": tensor([T, H_kv, S], "int32", POISON, output=True)}
    config = {"scale": round(1.25 / D ** 0.5, 4), "selected_block_num": S, "bs": bs}
    if validate:
        config["validate_inputs"] = True
    return {"name": name, "op": OP, "config": config, "seed": seed, "tensors": t,
            "compare": {"block_indices": {"mode": "topk"}}}


def window_cases(prefix, seed0, items):
    return [window_case(f"{prefix}/{i:03d}-{it[0]}", seed0 + i, *it[1:]) for i, it in enumerate(items)]


def main():
    args = case_args(__doc__, count=160).parse_args()
    grid = (build_set(grid_case, SEED, "nsa-topk-grid", args.count, 92000, small=False) +
            window_cases("nsa-topk-window", 92500, WINDOW_CASES))
    small = (build_set(grid_case, SEED, "nsa-topk-small", 12, 97000, small=True) +
             window_cases("nsa-topk-small-window", 97500,
                          (("g16-two-windows", "fp16", 16, 1, 64, 1, [1030], 4, False),)))
    # The grid and small sets pin backend 'portable'; their copies pinned to 'hopper' run the wgmma kernel.
    for c in grid + small:
        c["config"]["backend"] = "portable"
    write_cases(os.path.join(args.out_dir, "gpu", f"{OP}_grid.json"), grid)
    write_cases(os.path.join(args.out_dir, "gpu", f"{OP}_small.json"), small)
    write_cases(os.path.join(args.out_dir, "gpu", f"{OP}_hopper_grid.json"), [pinned_to(c) for c in grid])
    write_cases(os.path.join(args.out_dir, "gpu", f"{OP}_hopper_small.json"), [pinned_to(c) for c in small])
    write_cases(os.path.join(args.out_dir, f"{OP}_errors.json"), build_errors())
    return 0


if __name__ == "__main__":
    sys.exit(main())
