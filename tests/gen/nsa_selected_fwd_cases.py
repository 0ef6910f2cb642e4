#!/usr/bin/env python3
"""Test cases for nsa_selected_fwd (SPEC.md §2.17, metadata §2.14) in the `attnjit test` format
(tools/cli/test_case.hpp). Standard library only; deterministic (fixed seeds).

Writes:
  tests/cases/gpu/nsa_selected_fwd_grid.json   >= 150 random configurations compared kernel vs CPU
                        reference on the same random inputs (no golden): fp16 / bf16, D 64 / 128, group
                        size 16 / 32 / 64 (48 and 128 on every eighth seed) with H_kv 1 / 2 / 4, causal and not, block_size 1 / 3 / 16 / 32 /
                        64 / 128, SEL 1..16, 1-6 requests (empty ones, lengths not multiples of the block
                        size), per-row counts below SEL with junk (valid ids, -1, huge values) in the unread
                        suffix, -1 padding, future blocks, repeated ids on some, padded (class F) strides,
                        strided (class M) indices and counts, validate_inputs on some. o: rel_l2 at the
                        dtype's threshold (rows with no visible key exactly zero). Outputs poisoned.
  tests/cases/gpu/nsa_selected_fwd_small.json  ~12 small cases for compute-sanitizer.
  tests/cases/gpu/nsa_selected_fwd_hopper_{grid,small}.json  the same cases pinned to backend 'hopper'
                        (names prefixed "hopper/"): the wgmma kernel on the same shapes.
  tests/cases/nsa_selected_fwd_errors.json     one case per rejection rule of SPEC.md §2.17 / §2.14 and per
                        validate_inputs caller-contract item (block_counts in [0, SEL] included); outputs
                        hold a byte pattern (a rejected call writes nothing). Device-only rules are
                        gpu_only; a non-finite scale, device placement, overlapping outputs and the kernel
                        impl's Unsupported error are covered by tests/unit/nsa_test.cpp.
The grid and small files pin backend 'portable'.

Usage: python3 tests/gen/nsa_selected_fwd_cases.py [--out-dir tests/cases]
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from casegen_common import Errors, OUTB, POISON, TOL, config_with, edited, normal, tensor  # noqa: E402
from nsa_cases_common import (head_errors, ints, lens_label, maybe_padded, metadata,  # noqa: E402
                              metadata_shape_errors, offsets_errors, random_heads, random_lens_within,
                              set_values, token_errors, write_all)

OP = "nsa_selected_fwd"
SEED = 0x45A3
MAX_COST = 3e8  # T * H * SEL * block_size * D per grid case


def base(dtype="fp16", lens=(3, 5), H=16, H_kv=1, D=64, SEL=2):
    """A valid call (block_size 4): q [T, H, D], k, v [T, H_kv, D], block_indices [T, H_kv, SEL] (block 0,
    then -1), block_counts [T, H_kv] (1), metadata, o [T, H, D] holding a byte pattern."""
    meta, T, _ = metadata(list(lens))
    return {"q": tensor([T, H, D], dtype, normal()), "k": tensor([T, H_kv, D], dtype, normal()),
            "v": tensor([T, H_kv, D], dtype, normal()),
            "block_indices": tensor([T, H_kv, SEL], "int32", ints(([0] + [-1] * (SEL - 1)) * T * H_kv)),
            "block_counts": tensor([T, H_kv], "int32", ints([1] * T * H_kv)),
            **meta, "o": tensor([T, H, D], dtype, OUTB, output=True)}


CFG = {"is_causal": True, "scale": 0.125, "block_size": 4}


def cfg(**kw):
    return config_with(CFG, **kw)


def build_errors():
    e = Errors(OP, "nsa-selected-error/", 9500)
    err = e.err

    # --- param ---
    err("param/is-causal-missing", cfg(is_causal=None), base(), "param",
        "is_causal: expected a boolean, got none (is_causal is required)")
    err("param/is-causal-not-bool", cfg(is_causal=1), base(), "param", "is_causal: expected a boolean")
    err("param/scale-missing", cfg(scale=None), base(), "param", "scale: expected a finite value > 0, got none")
    err("param/scale-zero", cfg(scale=0.0), base(), "param", "scale: expected a finite value > 0, got 0")
    err("param/scale-negative", cfg(scale=-1.0), base(), "param", "scale: expected a finite value > 0, got -1")
    err("param/block-size-missing", cfg(block_size=None), base(), "param",
        "block_size: expected an integer in [1, 2147483647], got none")
    err("param/block-size-zero", cfg(block_size=0), base(), "param",
        "block_size: expected an integer in [1, 2147483647], got 0")
    err("param/block-size-negative", cfg(block_size=-64), base(), "param",
        "block_size: expected an integer in [1, 2147483647], got -64")
    err("param/unknown-key-bs", cfg(bs=4), base(), "param", "bs: expected one of")
    err("param/validate-inputs-not-bool", cfg(validate_inputs="yes"), base(), "param",
        "validate_inputs: expected a boolean")

    # --- dtype ---
    e.all_dtypes(CFG, base, ("q", "k", "v", "o"))
    e.dtype_mismatches(CFG, base, (("k", "bf16", "fp16"), ("v", "fp16", "bf16"), ("o", "bf16", "fp16")))
    e.int64_metadata(CFG, base, ("block_indices", "block_counts", "offsets", "token_indices"))

    # --- args ---
    e.missing(CFG, base, ("q", "k", "v", "block_indices", "block_counts", "offsets", "token_indices", "o"))
    err("args/unknown-tensor-chunk-offsets", CFG,
        edited(base, lambda t: t.update(chunk_offsets=tensor([3], "int32", ints([0, 1, 3])))), "args",
        "chunk_offsets: expected one of")
    err("args/unknown-tensor-lse", CFG, edited(base, lambda t: t.update(lse=tensor([8, 16], "fp32", OUTB, output=True))),
        "args", "lse: expected one of")

    # --- shape: ranks ---
    for n, shape, nd, dims in (("q", [8, 16, 1, 64], 3, "[T, H, D]"), ("k", [8, 64], 3, "[T, H_kv, D]"),
                               ("v", [8, 1, 1, 64], 3, "[T, H_kv, D]"), ("block_indices", [8, 2], 3, "[T, H_kv, SEL]"),
                               ("block_counts", [8], 2, "[T, H_kv]"), ("o", [8, 1024], 3, "[T, H, D]"),
                               ("offsets", [3, 1], 1, "[N + 1]"), ("token_indices", [8, 2, 1], 2, "[T, 2]")):
        err(f"shape/{n}-rank-{len(shape)}", CFG, edited(base, lambda t: t[n].update(shape=shape)), "shape",
            f"{n}: expected {nd} dims {dims}")
    # one token count T everywhere; heads and dims agree
    for n, dim, val, what, want in (("k", 0, 9, "T, q's tokens", 8), ("v", 0, 7, "T, q's tokens", 8),
                                    ("k", 2, 128, "D, q's head dim", 64), ("v", 2, 128, "D, q's head dim", 64),
                                    ("v", 1, 2, "H_kv, k's heads", 1), ("block_indices", 0, 7, "T, q's tokens", 8),
                                    ("block_indices", 1, 2, "H_kv, k's heads", 1),
                                    ("block_counts", 0, 9, "T, q's tokens", 8),
                                    ("block_counts", 1, 2, "H_kv, k's heads", 1), ("o", 0, 7, "T", 8),
                                    ("o", 1, 32, "H", 16), ("o", 2, 128, "D", 64)):
        def f(t, n=n, dim=dim, val=val):
            t[n]["shape"][dim] = val
            if t[n]["dtype"] == "int32":
                size = 1
                for x in t[n]["shape"]:
                    size *= x
                t[n]["init"] = ints([0] * size)
        err(f"shape/{n}-dim{dim}-{val}", CFG, edited(base, f), "shape", f"{n}: expected dim {dim} ({what}) = {want}, got {val}")
    err("shape/sel-zero", CFG, edited(base, lambda t: t["block_indices"].update(shape=[8, 1, 0], init=ints([]))),
        "shape", "block_indices: expected SEL >= 1 slots (dim 2), got 0")
    metadata_shape_errors(e, CFG, base, token_rows=9, token_width=1)
    for D in (32, 96, 256):
        err(f"shape/d{D}", CFG, base(D=D), "shape", f"q: expected head dim D in {{64, 128}}, got {D}")
    head_errors(e, CFG, base, "k", (32, 3), ((8, 1), (32, 4)))

    # --- layout ---
    e.innermost_strides(CFG, base, (("q", [2048, 128, 2]), ("k", [128, 128, 2]), ("v", [128, 128, 2])))
    err("layout/k-token-stride-136-bytes", CFG, edited(base, lambda t: t["k"].update(strides=[68, 64, 1])), "layout",
        "k: expected dim 0 stride to be a multiple of 16 bytes", gpu_only=True)
    err("layout/offsets-strided", CFG,
        edited(base, lambda t: t["offsets"].update(strides=[2], init=ints([0, -1, 3, -1, 8]))), "layout",
        "offsets: expected a contiguous (row-major) tensor")
    e.not_contiguous(CFG, base, (("o", [2048, 64, 1]), ("o", [1024, 64, 0])))

    # --- content (validate_inputs) ---
    V = cfg(validate_inputs=True)
    offsets_errors(e, V, base, first=2, decreasing=(5, 4), last=9)
    token_errors(e, V, base, (("request-wrong", 2, 1), ("request-negative", 0, -1), ("position-wrong", 15, 5)))
    cnt = [1] * 8
    cnt[5] = 3
    err("content/block-counts-above-sel", V, edited(base, lambda t: set_values(t, "block_counts", cnt)), "content",
        "block_counts: expected values in [0, SEL = 2], got 3 at [5, 0]")
    cnt2 = [1] * 8
    cnt2[2] = -1
    err("content/block-counts-negative", V, edited(base, lambda t: set_values(t, "block_counts", cnt2)), "content",
        "block_counts: expected values in [0, SEL = 2], got -1 at [2, 0]")
    return e.cases


def grid_case(rng, name, seed, small):
    dtype, H_kv, G, H = random_heads(rng, small)
    # The kernel's other row-group counts: 48 rows, and groups past 64 in tiles of 64 rows (chosen by
    # the seed, not the rng, so that the other cases stay as they were).
    if seed % 8 == 5:
        G = 48 if seed // 8 % 2 == 0 else 128
        H = G * H_kv
    D = rng.choice([64, 128])
    causal = rng.random() < 0.7
    bs = rng.choice([1, 3, 16] if small else [1, 3, 16, 32, 64, 64, 128])
    SEL = rng.randint(1, 4 if small else 16)
    N = rng.randint(1, 3 if small else 6)
    max_len = 40 if small else rng.choice([64, 300, 1000, 2000])
    lens = random_lens_within(rng, N, max_len, bs, lambda ls: sum(ls) * H * SEL * bs * D, 3e6 if small else MAX_COST)
    repeats = rng.random() < 0.2
    validate = rng.random() < 0.2
    padded = rng.random() < 0.3
    strided_meta = rng.random() < 0.2
    meta, T, _ = metadata(lens)
    # indices and counts, row by row
    idx, cnt = [], []
    off = 0
    for n, ln in enumerate(lens):
        nblocks = (ln + bs - 1) // bs
        for p in range(ln):
            nvis = (p + bs) // bs if causal else nblocks
            for _ in range(H_kv):
                count = rng.randint(0, SEL)
                vis = rng.sample(range(nvis), min(nvis, SEL))
                row = []
                for u in range(count):
                    x = rng.random()
                    if x < 0.1:
                        row.append(-1)
                    elif x < 0.2:
                        row.append(rng.randint(nvis, nblocks + 2))
                    elif repeats and x < 0.3 and any(i >= 0 for i in row):
                        row.append(rng.choice([i for i in row if i >= 0]))
                    elif vis:
                        row.append(vis.pop())
                    else:
                        row.append(-1)
                row += [rng.choice([0, -1, nblocks, 1 << 30, -7]) for _ in range(SEL - count)]
                idx += row
                cnt.append(count)
        off += ln
    if strided_meta and T:
        idx_st, cnt_st = [H_kv * (SEL + 3), SEL + 3, 1], [H_kv * 2, 2]
        store_i = [-9] * (1 + (T - 1) * idx_st[0] + (H_kv - 1) * idx_st[1] + (SEL - 1))
        store_c = [-9] * (1 + (T - 1) * cnt_st[0] + (H_kv - 1) * cnt_st[1])
        for t in range(T):
            for r in range(H_kv):
                store_c[t * cnt_st[0] + r * cnt_st[1]] = cnt[t * H_kv + r]
                for u in range(SEL):
                    store_i[t * idx_st[0] + r * idx_st[1] + u] = idx[(t * H_kv + r) * SEL + u]
        bi = tensor([T, H_kv, SEL], "int32", ints(store_i), idx_st)
        bc = tensor([T, H_kv], "int32", ints(store_c), cnt_st)
    else:
        bi = tensor([T, H_kv, SEL], "int32", ints(idx))
        bc = tensor([T, H_kv], "int32", ints(cnt))
    t = {"q": tensor([T, H, D], dtype, normal(), maybe_padded(rng, [T, H, D], dtype, padded)),
         "k": tensor([T, H_kv, D], dtype, normal(), maybe_padded(rng, [T, H_kv, D], dtype, padded)),
         "v": tensor([T, H_kv, D], dtype, normal(), maybe_padded(rng, [T, H_kv, D], dtype, padded)),
         "block_indices": bi, "block_counts": bc, **meta, "o": tensor([T, H, D], dtype, POISON, output=True)}
    scale = round(rng.uniform(0.5, 1.5) / D ** 0.5, 4)
    config = {"is_causal": causal, "scale": scale, "block_size": bs}
    if validate:
        config["validate_inputs"] = True
    lname = lens_label(lens, T)
    full = (f"{name}/{dtype}/{'causal' if causal else 'noncausal'}/g{G}-h{H}kv{H_kv}/d{D}/bs{bs}/sel{SEL}/lens{lname}" +
            ("/repeats" if repeats else "") + ("/padded" if padded else "") + ("/strided-meta" if strided_meta else "") +
            ("/validate" if validate else ""))
    return {"name": full, "op": OP, "config": config, "seed": seed, "tensors": t,
            "compare": {"o": {"mode": "rel_l2", "tol": TOL[dtype]}}}


def main():
    return write_all(__doc__, OP, "selected", SEED, grid_case, build_errors, 91000, 96000, hopper=True)


if __name__ == "__main__":
    sys.exit(main())
