#!/usr/bin/env python3
"""Test cases for gqa_paged_fwd and mha_decode_paged (SPEC.md §2.9, §2.11) in the `attnjit test` format
(tools/cli/test_case.hpp). Standard library only; deterministic (fixed seeds).

Writes:
  tests/cases/gpu/paged_attention_grid.json   >= 300 random configurations, every one "gpu_only": the runner
      compares the kernel with the CPU reference on the same random inputs (no golden). Both ops.
      gqa_paged_fwd: dtype pairs (q, KV) (fp16, fp16), (bf16, bf16) and, in ~15 %, (fp16, e4m3), (bf16, e4m3),
      (e4m3, e4m3) with out_dtype fp16 / bf16, KV scales per request [B, H_kv] or per tensor (a zero-stride
      [B, H_kv] view of one element); page sizes 1, 2, 4, ..., 256 and 3, 5, 24; D 64, 128, 256; group sizes
      1, 2, 4, 8, 16 and H_kv = 1; B = 1..6 requests mixing decode (q_len 1), prefill chunks (q_len up to 300)
      and empty requests (q_len 0), kv_len in {1, PS - 1, PS, PS + 1, 63, 64, 65, 1000, 4097} with
      q_len <= kv_len; causal or not; windows; softcap; RoPE neox / interleaved with full and partial
      rotary_dim; sinks (finite, some -inf, some +inf); sm_scale; padded (class F) strides on q and the
      pools. mha_decode_paged: fp16 / bf16, the power-of-two page sizes 1..256, D 64 / 128 / 256, H 1..32,
      S_q = 1 (decode) and S_q > 1 (up to 64, also L < S_q), L = 0 requests, causal or not.
      Page tables are scattered random permutations (non-monotonic), W is often larger than needed, two
      requests may share a page (a read-only op), entries of logical pages >= ceil(kv_len / PS) hold
      out-of-range values (999999, -1, NP, 2^31 - 1) or valid but unrelated pages, pools have spare pages.
      Pools whose storage is small enough (within a total budget, GARBAGE_BUDGET) are given as exact bits:
      random finite values in the rows some request reads and RANDOM BYTES (NaN / inf patterns included)
      everywhere else (unused slots of partial last pages, unused and spare pages, stride gaps). The other
      pools are "normal" everywhere (the init kinds of tools/cli/test_case.hpp cover a whole tensor with one
      kind), so their unused rows hold plausible values that would change the result if read. o is poisoned.
      The CPU reference cost (sum over requests of q_len * H * kv_len * D, masking ignored) is capped per case
      and in total (MAX_TOTAL_COST).
  tests/cases/gpu/paged_attention_small.json  ~20 small cases (every feature, short lengths, all pools with
      random-byte garbage) for compute-sanitizer runs.
  tests/cases/gqa_paged_fwd_errors.json, tests/cases/mha_decode_paged_errors.json  one case per rejection of
      SPEC.md §2.9 / §2.11 ("Rejected" lists and the validate_inputs caller contract), with outputs filled
      with a byte pattern so the runner proves that a rejected call wrote nothing; one file per op.

One generator for both ops (named after their family, paged attention): the grid draws the op per case
from one random stream and the small set mixes them, so splitting it per op would change every case; the
GPU files stay shared and only the error files are written per op.

Tolerances (SPEC.md §1.12): o rel_l2 bf16 1e-2, fp16 5e-3, any e4m3 operand 5e-2.

Usage: python3 tests/gen/paged_attention_cases.py [--out-dir tests/cases] [--count N]
"""
import math
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from casegen_common import (ELEM_BYTES, Errors, OUTB, POISON, TOL, attention_config, attention_name_parts,  # noqa: E402
                            case_args, contiguous, encode_bits, fewer_heads, normal, random_padded_strides,
                            random_sinks, scatter_pages, storage_size, tensor, values, weighted, write_cases,
                            write_errors_per_op)

SEED = 0x9A6E0
MAX_TOTAL_COST = 1.45e10          # sum over the grid of q_len * H * kv_len * D
CASE_CAPS = [(1e8, 0.6), (7e8, 0.3), (3e9, 0.1)]  # per-case cost caps and how often each is drawn
RESERVE = 2e7
MAX_POOL_ELEMENTS = 12 * 1024 * 1024  # per pool
GARBAGE_BUDGET = 500_000          # pool elements written as exact bits (with random-byte garbage) in the grid
GARBAGE_CASE_MAX = 60_000         # per case (both pools)
PAIRS = [(("fp16", "fp16"), 0.425), (("bf16", "bf16"), 0.425), (("fp16", "e4m3"), 0.05), (("bf16", "e4m3"), 0.05),
         (("e4m3", "e4m3"), 0.05)]
GQA_PS = [1, 2, 4, 8, 16, 32, 64, 128, 256, 3, 5, 24]
MHA_PS = [1, 2, 4, 8, 16, 32, 64, 128, 256]
BAD_ENTRIES = [999999, -1, 2 ** 31 - 1, -123456]


# ----------------------------------------------------------------------------------------------------
# Bit patterns (stdlib, encode_bits in casegen_common): finite random values in used rows, random bytes elsewhere


def garbage_pool(rng, dtype, shape, strides, used_rows, std):
    """Bits of a pool: random bytes everywhere, then finite N(0, std) values in the used rows. A row is a
    tuple of leading indices (page, slot) for [NP, PS, H_kv, D] or (row,) for [N_kv, H, D]; it covers all
    heads and channels."""
    n = storage_size(shape, strides)
    top = 1 << (8 * ELEM_BYTES[dtype])
    bits = [rng.randrange(top) for _ in range(n)]
    heads, D = shape[-2], shape[-1]
    for row in sorted(used_rows):
        base = sum(i * s for i, s in zip(row, strides))
        for h in range(heads):
            off = base + h * strides[-2]
            for d in range(D):
                bits[off + d * strides[-1]] = encode_bits(dtype, rng.gauss(0.0, std))
    return {"kind": "bits", "bits": bits}


# ----------------------------------------------------------------------------------------------------
# Page tables


def assign_pages(rng, kv_lens, PS, spare, share):
    """Scattered, non-monotonic physical pages for every request's used logical pages. Returns (NP, pages).
    With `share`, one logical page of a request is redirected to a page of another request (read-only op)."""
    total, pages = scatter_pages(rng, [(k + PS - 1) // PS for k in kv_lens], spare)
    shared = False
    if share:
        owners = [b for b in range(len(pages)) if pages[b]]
        if len(owners) >= 2:
            b1, b2 = rng.sample(owners, 2)
            pages[b2][rng.randrange(len(pages[b2]))] = pages[b1][rng.randrange(len(pages[b1]))]
            shared = True
    return total, pages, shared


def table_values(rng, pages, W, NP):
    flat = []
    for pg in pages:
        row = list(pg)
        while len(row) < W:
            if rng.random() < 0.25 and NP > 0:
                row.append(rng.randrange(NP))  # a valid page that is not this request's
            else:
                row.append(rng.choice(BAD_ENTRIES + [NP]))
        flat += row
    return flat


# ----------------------------------------------------------------------------------------------------
# Random grid


class Draw:
    pass


def gqa_lengths(rng, PS, small):
    kv_opts = [1, max(PS - 1, 1), PS, PS + 1, 63, 64, 65, 1000, 4097]
    if small:
        kv_opts = [1, max(PS - 1, 1), PS, PS + 1, 17, 40]
    r = rng.random()
    if r < 0.1:
        ql = 0
        kl = rng.choice([0] + kv_opts)
        return ql, kl
    kl = rng.choice(kv_opts)
    if r < 0.6:
        ql = 1
    else:
        ql = rng.choice([2, 3, 7, 16, 31, 63, 64, 65, 128, 129, 300] if not small else [2, 3, 7, 16, 33])
    ql = min(ql, kl)
    if rng.random() < 0.1 and kl <= 300:
        ql = kl  # whole-prompt prefill
    return ql, kl


def mha_lengths(rng, PS, small):
    opts = [0, 1, max(PS - 1, 1), PS, PS + 1, 63, 64, 65, 1000, 4097]
    if small:
        opts = [0, 1, max(PS - 1, 1), PS, PS + 1, 20]
    return rng.choice(opts)


def draw_16bit(rng, op, D_choices, PS_choices):
    """A Draw of `op` with q, KV and output in one 16-bit dtype, its head dim and page size."""
    d = Draw()
    d.op = op
    d.q_dtype = d.kv_dtype = d.cdt = rng.choice(["fp16", "bf16"])
    d.out_dtype = None
    d.fp8 = False
    d.D = rng.choice(D_choices)
    d.PS = rng.choice(PS_choices)
    return d


def draw_layout(d, rng):
    """validate_inputs, padded strides on q and on the pools, and a page shared by two requests."""
    d.validate = rng.random() < 0.1
    d.q_strided = rng.random() < 0.15
    d.pool_strided = rng.random() < 0.15
    d.share = rng.random() < 0.2


def draw_gqa(rng, small):
    d = Draw()
    d.op = "gqa_paged_fwd"
    (d.q_dtype, d.kv_dtype) = weighted(rng, PAIRS)
    d.out_dtype = rng.choice(["fp16", "bf16"]) if d.q_dtype == "e4m3" else None
    d.cdt = d.out_dtype or d.q_dtype
    d.fp8 = d.q_dtype == "e4m3" or d.kv_dtype == "e4m3"
    d.D = rng.choice([64, 128, 256])
    d.PS = rng.choice(GQA_PS)
    g = rng.choice([1, 2, 4, 8, 16])
    d.H_kv = 1 if rng.random() < 0.3 else rng.choice([h for h in (1, 2, 4, 8) if h * g <= (16 if small else 32)] or [1])
    d.H = g * d.H_kv
    d.causal = rng.random() < 0.6
    wkind = weighted(rng, [("none", 0.5), ("left", 0.2), ("right", 0.1), ("both", 0.2)])
    wvals = [0, 1, 7, 16, 63, 100, 511]
    d.wl = rng.choice(wvals) if wkind in ("left", "both") else -1
    d.wr = rng.choice(wvals) if wkind in ("right", "both") else -1
    d.softcap = rng.choice([20.0, 50.0]) if rng.random() < 0.25 else 0.0
    d.rope = weighted(rng, [(None, 0.65), ("neox", 0.2), ("interleaved", 0.15)])
    d.R = None
    if d.rope:
        d.R = weighted(rng, [(d.D, 0.4), (d.D // 2, 0.3), (10, 0.15), (2 * rng.randint(1, d.D // 2), 0.15)])
    d.sinks = weighted(rng, [(None, 0.55), ("finite", 0.25), ("neginf", 0.1), ("posinf", 0.1)])
    d.scales = rng.choice(["per-request", "per-tensor"]) if d.kv_dtype == "e4m3" else None
    d.std = 3.0 if rng.random() < 0.15 else 1.0
    d.sm_scale = rng.choice([0.05, 0.3]) if rng.random() < 0.07 else None
    draw_layout(d, rng)
    return d


def draw_mha(rng, small):
    d = draw_16bit(rng, "mha_decode_paged", [64, 128, 256], MHA_PS)
    d.H = d.H_kv = rng.choice([1, 2, 4, 8, 16, 32] if not small else [1, 2, 4, 8])
    d.causal = rng.random() < 0.5
    d.S_q = 1 if rng.random() < 0.6 else rng.choice([2, 3, 4, 7, 16, 33, 64] if not small else [2, 3, 5])
    d.std = 3.0 if rng.random() < 0.15 else 1.0
    draw_layout(d, rng)
    return d


def cost_of(d):
    if d.op == "mha_decode_paged":
        return sum(d.S_q * L for L in d.lens) * d.H * d.D
    return sum(q * k for q, k in d.reqs) * d.H * d.D


def draw_lengths(rng, d, cap, small):
    for attempt in range(400):
        nreq = rng.randint(1, 6)
        if d.op == "mha_decode_paged":
            d.lens = [mha_lengths(rng, d.PS, small) for _ in range(nreq)]
        else:
            d.reqs = [gqa_lengths(rng, d.PS, small) for _ in range(nreq)]
            d.lens = [k for _, k in d.reqs]
        pool = (sum((k + d.PS - 1) // d.PS for k in d.lens) + 3) * d.PS * d.H_kv * d.D
        if cost_of(d) <= cap and pool <= MAX_POOL_ELEMENTS:
            return
        if attempt > 200 and d.H > 1:  # fewer heads (keep the group size if possible)
            if d.op == "mha_decode_paged":
                d.H = d.H_kv = d.H // 2
            else:
                fewer_heads(d)
    # give up: short lengths
    if d.op == "mha_decode_paged":
        d.lens = [min(L, 7) for L in d.lens]
    else:
        d.reqs = [(min(q, 7), min(k, 7)) for q, k in d.reqs]
        d.reqs = [(min(q, k), k) for q, k in d.reqs]
        d.lens = [k for _, k in d.reqs]


def build_case(rng, d, idx, seed, garbage_left, name_prefix="", garbage_case_max=GARBAGE_CASE_MAX, spare=None):
    """Returns (case, cost, garbage elements used)."""
    H, H_kv, D, PS = d.H, d.H_kv, d.D, d.PS
    mha = d.op == "mha_decode_paged"
    B = len(d.lens)
    spare = rng.choice([0, 1, 3]) if spare is None else spare
    NP, pages, shared = assign_pages(rng, d.lens, PS, spare, d.share)
    W = max([len(p) for p in pages] + [0]) + rng.choice([0, 0, 1, 5])
    W = max(W, 1) if B == 0 else W
    tensors, config = {}, {}

    # which pool rows the op reads
    used = set()
    for b in range(B):
        ql = d.S_q if mha else d.reqs[b][0]
        if ql == 0:
            continue
        for j in range(d.lens[b]):
            pg, s = pages[b][j // PS], j % PS
            used.add((pg * PS + s,) if mha else (pg, s))
    pool_shape = [NP * PS, H, D] if mha else [NP, PS, H_kv, D]
    pool_strides = {}
    for n in ("k", "v"):
        pool_strides[n] = random_padded_strides(rng, pool_shape, d.kv_dtype) if d.pool_strided else None
    pool_elems = sum(storage_size(pool_shape, pool_strides[n] or contiguous(pool_shape)) for n in ("k", "v"))
    use_garbage = pool_elems <= min(garbage_case_max, garbage_left)
    garbage_used = pool_elems if use_garbage else 0

    if mha:
        q_shape = [B, d.S_q, H, D]
    else:
        cu = [0]
        for q, _ in d.reqs:
            cu.append(cu[-1] + q)
        q_shape = [cu[-1], H, D]
    qs = random_padded_strides(rng, q_shape, d.q_dtype) if d.q_strided and all(e > 0 for e in q_shape) else None
    tensors["q"] = tensor(q_shape, d.q_dtype, normal(d.std), qs)
    names = ("k", "v") if mha else ("k_pages", "v_pages")
    for n, key in zip(names, ("k", "v")):
        std = d.std if key == "k" else 1.0
        st = pool_strides[key]
        if use_garbage:
            init = garbage_pool(rng, d.kv_dtype, pool_shape, st or contiguous(pool_shape), used, std)
        else:
            init = normal(std)
        tensors[n] = tensor(pool_shape, d.kv_dtype, init, st)
    if mha:
        tensors["real_seqlen_kv"] = tensor([B], "int32", values(d.lens))
        tensors["block_table"] = tensor([B, W], "int32", values(table_values(rng, pages, W, NP)))
        config["page_size"] = PS
        config["is_causal"] = d.causal
    else:
        tensors["page_table"] = tensor([B, W], "int32", values(table_values(rng, pages, W, NP)))
        tensors["cache_seqlens"] = tensor([B], "int32", values(d.lens))
        tensors["cu_seqlens_q"] = tensor([B + 1], "int32", values(cu))
        if d.q_dtype == "e4m3":
            tensors["q_scale"] = tensor([B, H_kv], "fp32", {"kind": "uniform", "low": 0.5, "high": 2.0})
        if d.kv_dtype == "e4m3":
            for n in ("k_scale", "v_scale"):
                if d.scales == "per-tensor":
                    tensors[n] = tensor([B, H_kv], "fp32", {"kind": "uniform", "low": 0.5, "high": 2.0},
                                        strides=[0, 0])
                else:
                    tensors[n] = tensor([B, H_kv], "fp32", {"kind": "uniform", "low": 0.5, "high": 2.0})
        if d.rope:
            P = max(d.lens + [1]) + rng.choice([0, 0, 1, 5, 64])
            for n in ("rope_cos", "rope_sin"):
                tensors[n] = tensor([P, d.R // 2], d.cdt, {"kind": "uniform", "low": -1.0, "high": 1.0})
        if d.sinks:
            tensors["sinks"] = tensor([H], "fp32", values(random_sinks(rng, d.sinks, H)))
        rotary_dim = bool(d.rope) and (d.R != D or rng.random() < 0.5)  # a full-width R is stated half the time
        config.update(attention_config(d.causal, d.wl, d.wr, d.sm_scale, d.softcap, d.rope, d.R, rotary_dim,
                                       d.out_dtype))
    if d.validate:
        config["validate_inputs"] = True
    config["backend"] = "portable"  # the hopper grid (tests/gen/paged_hopper_cases.py) derives from these
    tensors["o"] = tensor(q_shape, d.cdt, POISON, output=True)
    tol = TOL["e4m3"] if d.fp8 else TOL[d.cdt]

    # name
    if mha:
        parts = [d.op, d.q_dtype, f"d{D}", f"h{H}", f"ps{PS}", "causal" if d.causal else "noncausal", f"sq{d.S_q}",
                 "l" + ",".join(str(x) for x in d.lens) if d.lens else "b0"]
    else:
        pair = d.q_dtype if not d.fp8 else f"{d.q_dtype}-{d.kv_dtype}" + (f"-{d.out_dtype}" if d.out_dtype else "")
        parts = [d.op, pair, f"d{D}", f"h{H}kv{H_kv}", f"ps{PS}", "causal" if d.causal else "noncausal"]
        parts += attention_name_parts(d)
        if d.scales:
            parts.append(f"scales-{d.scales}")
        parts.append("q" + ",".join(str(q) for q, _ in d.reqs) + "-kv" + ",".join(str(k) for _, k in d.reqs)
                     if d.reqs else "b0")
    parts.append(f"np{NP}-w{W}")
    if shared:
        parts.append("shared-page")
    if use_garbage:
        parts.append("garbage-pools")
    if d.std != 1.0:
        parts.append(f"std{d.std:g}")
    if qs:
        parts.append("strided-q")
    if d.pool_strided:
        parts.append("strided-pools")
    if d.validate:
        parts.append("validate")
    parts.append(f"#{idx}")
    case = {"name": name_prefix + "/".join(parts), "op": d.op, "config": config, "seed": seed, "tensors": tensors,
            "compare": {"o": {"mode": "rel_l2", "tol": tol}}, "gpu_only": True}
    return case, cost_of(d), garbage_used


def build_grid(count):
    rng = random.Random(SEED)
    cases, total, garbage_left = [], 0.0, GARBAGE_BUDGET
    idx = 0
    while len(cases) < count:
        cap = weighted(rng, CASE_CAPS)
        cap = min(cap, max(1e6, MAX_TOTAL_COST - total - (count - len(cases) - 1) * RESERVE))
        d = draw_mha(rng, False) if rng.random() < 0.3 else draw_gqa(rng, False)
        draw_lengths(rng, d, cap, False)
        case, cost, g = build_case(rng, d, idx, 30000 + idx, garbage_left)
        cases.append(case)
        total += cost
        garbage_left -= g
        idx += 1
    return cases, total, GARBAGE_BUDGET - garbage_left


# ----------------------------------------------------------------------------------------------------
# Small cases (compute-sanitizer): every feature, short lengths, garbage pools


def build_small():
    rng = random.Random(SEED + 99)
    G = "gqa_paged_fwd"
    M = "mha_decode_paged"
    # (op, q, kv, out, D, H, H_kv, PS, causal, wl, wr, cap, rope, R, sinks, scales, reqs or (S_q, lens))
    specs = [
        (G, "fp16", "fp16", None, 64, 4, 2, 16, True, -1, -1, 0, None, None, None, None, [(1, 37), (5, 20), (0, 9)]),
        (G, "bf16", "bf16", None, 128, 8, 1, 1, False, -1, -1, 0, None, None, "finite", None, [(1, 5), (3, 3)]),
        (G, "fp16", "fp16", None, 256, 2, 2, 3, True, 4, -1, 0, None, None, None, None, [(6, 17), (1, 10)]),
        (G, "bf16", "bf16", None, 64, 16, 1, 64, True, -1, -1, 0, None, None, None, None, [(1, 65), (7, 64)]),
        (G, "fp16", "fp16", None, 64, 2, 1, 5, True, -1, -1, 20.0, None, None, "neginf", None, [(9, 25), (0, 0)]),
        (G, "fp16", "fp16", None, 128, 4, 2, 16, True, -1, -1, 0, "neox", 64, None, None, [(3, 19), (1, 33)]),
        (G, "bf16", "bf16", None, 64, 2, 1, 24, False, 3, 1, 0, "interleaved", 10, "posinf", None, [(4, 30), (2, 11)]),
        (G, "fp16", "e4m3", None, 64, 4, 2, 16, True, -1, -1, 0, None, None, None, "per-request", [(1, 29), (4, 12)]),
        (G, "bf16", "e4m3", None, 128, 2, 1, 3, True, 5, -1, 0, "neox", 128, None, "per-tensor", [(3, 10), (1, 7)]),
        (G, "e4m3", "e4m3", "fp16", 64, 4, 2, 8, True, -1, -1, 0, None, None, "finite", "per-tensor", [(2, 20), (1, 3)]),
        (G, "e4m3", "e4m3", "bf16", 256, 2, 2, 2, False, -1, -1, 50.0, None, None, None, "per-request", [(3, 6)]),
        (G, "fp16", "e4m3", None, 64, 2, 1, 256, False, -1, 0, 0, None, None, None, "per-tensor", [(1, 1), (2, 40)]),
        (G, "bf16", "bf16", None, 64, 2, 2, 16, True, -1, -1, 0, None, None, None, None, []),  # B = 0
        (G, "fp16", "fp16", None, 64, 4, 1, 4, True, 0, 0, 0, None, None, None, None, [(0, 5), (0, 0), (1, 1)]),
        (M, "fp16", "fp16", None, 64, 2, 2, 16, False, -1, -1, 0, None, None, None, None, (1, [37, 0, 16])),
        (M, "bf16", "bf16", None, 128, 4, 4, 1, True, -1, -1, 0, None, None, None, None, (4, [9, 2, 0])),
        (M, "fp16", "fp16", None, 256, 1, 1, 32, True, -1, -1, 0, None, None, None, None, (3, [20, 9])),
        (M, "bf16", "bf16", None, 64, 8, 8, 2, False, -1, -1, 0, None, None, None, None, (5, [3, 11])),
        (M, "fp16", "fp16", None, 64, 1, 1, 128, True, -1, -1, 0, None, None, None, None, (2, [1, 100, 0])),
        (M, "bf16", "bf16", None, 64, 2, 2, 16, False, -1, -1, 0, None, None, None, None, (0, [5, 9])),  # S_q = 0
        (M, "fp16", "fp16", None, 64, 2, 2, 16, True, -1, -1, 0, None, None, None, None, (1, [])),  # B = 0
    ]
    cases = []
    for i, (op, qd, kvd, out, D, H, Hkv, PS, causal, wl, wr, cap, rope, R, sinks, scales, reqs) in enumerate(specs):
        d = Draw()
        d.op, d.q_dtype, d.kv_dtype, d.out_dtype = op, qd, kvd, out
        d.cdt = out or qd
        d.fp8 = qd == "e4m3" or kvd == "e4m3"
        d.D, d.H, d.H_kv, d.PS, d.causal = D, H, Hkv, PS, causal
        d.std = 3.0 if i % 5 == 4 else 1.0
        d.validate = i % 4 == 1
        d.q_strided = i % 6 == 3
        d.pool_strided = i % 5 == 2
        d.share = i % 3 == 0
        if op == M:
            d.S_q, d.lens = reqs
        else:
            d.reqs = reqs
            d.lens = [k for _, k in reqs]
            d.wl, d.wr, d.softcap, d.rope, d.R, d.sinks, d.scales = wl, wr, float(cap), rope, R, sinks, scales
            d.sm_scale = 0.2 if i == 3 else None
        case, _, _ = build_case(rng, d, i, 9700 + i, 10 ** 9, name_prefix="small/", garbage_case_max=10 ** 9,
                                spare=1 if i % 2 or not d.lens else 0)
        assert "garbage-pools" in case["name"], case["name"]
        cases.append(case)
    return cases


# ----------------------------------------------------------------------------------------------------
# Error cases


def gqa_base(q_dtype="fp16", kv_dtype=None, out_dtype=None, reqs=((1, 5), (3, 9)), H=2, H_kv=1, D=64, PS=4, NP=None,
             W=None, rope_R=None, P=None, sinks=False, scales=None):
    """A valid gqa_paged_fwd call (before the one change an error case makes). Pages are 0, 1, 2, ..."""
    kv_dtype = kv_dtype or q_dtype
    cdt = out_dtype or q_dtype
    B = len(reqs)
    cu = [0]
    for q, _ in reqs:
        cu.append(cu[-1] + q)
    need = [(k + PS - 1) // PS for _, k in reqs]
    NP = NP if NP is not None else sum(need) + 1
    W = W if W is not None else max(need + [1])
    table, nxt = [], 0
    for n in need:
        row = list(range(nxt, nxt + n)) + [999999] * (W - n)
        nxt += n
        table += row
    t = {
        "q": tensor([cu[-1], H, D], q_dtype, normal()),
        "k_pages": tensor([NP, PS, H_kv, D], kv_dtype, normal()),
        "v_pages": tensor([NP, PS, H_kv, D], kv_dtype, normal()),
        "page_table": tensor([B, W], "int32", values(table)),
        "cache_seqlens": tensor([B], "int32", values([k for _, k in reqs])),
        "cu_seqlens_q": tensor([B + 1], "int32", values(cu)),
    }
    if q_dtype == "e4m3":
        t["q_scale"] = tensor([B, H_kv], "fp32", {"kind": "uniform", "low": 0.5, "high": 2.0})
    if kv_dtype == "e4m3":
        for n in ("k_scale", "v_scale"):
            if scales == "per-tensor":
                t[n] = tensor([B, H_kv], "fp32", values([1.5]), strides=[0, 0])
            else:
                t[n] = tensor([B, H_kv], "fp32", {"kind": "uniform", "low": 0.5, "high": 2.0})
    if rope_R:
        for n in ("rope_cos", "rope_sin"):
            t[n] = tensor([P or max(k for _, k in reqs), rope_R // 2], cdt, {"kind": "uniform", "low": -1.0, "high": 1.0})
    if sinks:
        t["sinks"] = tensor([H], "fp32", {"kind": "uniform", "low": -1.0, "high": 1.0})
    t["o"] = tensor([cu[-1], H, D], cdt, OUTB, output=True)
    return t


def mha_base(dtype="fp16", B=2, S_q=1, H=2, D=64, PS=4, lens=(5, 3), NP=None, W=None):
    need = [(k + PS - 1) // PS for k in lens]
    NP = NP if NP is not None else sum(need) + 1
    W = W if W is not None else max(need + [1])
    table, nxt = [], 0
    for n in need:
        table += list(range(nxt, nxt + n)) + [999999] * (W - n)
        nxt += n
    return {
        "q": tensor([B, S_q, H, D], dtype, normal()),
        "k": tensor([NP * PS, H, D], dtype, normal()),
        "v": tensor([NP * PS, H, D], dtype, normal()),
        "real_seqlen_kv": tensor([B], "int32", values(list(lens))),
        "block_table": tensor([B, W], "int32", values(table)),
        "o": tensor([B, S_q, H, D], dtype, OUTB, output=True),
    }


ROPE = {"pos_encoding_mode": "rope", "rotary_dim": 32}
VI = {"validate_inputs": True}
MHA_CFG = {"page_size": 4}


def build_errors():
    e = Errors(None, "paged-error/", 8000)
    err = e.err_op

    G = "gqa_paged_fwd"
    # ---------------- gqa_paged_fwd: param ----------------
    err("gqa/param/window-left-minus2", G, {"window_size_left": -2}, gqa_base(), "param", "window_size_left")
    err("gqa/param/window-right-minus3", G, {"is_causal": False, "window_size_right": -3}, gqa_base(), "param",
        "window_size_right")
    err("gqa/param/softcap-negative", G, {"softcap": -2.0}, gqa_base(), "param", "softcap")
    err("gqa/param/sm-scale-zero", G, {"sm_scale": 0.0}, gqa_base(), "param", "sm_scale")
    err("gqa/param/rotary-dim-without-rope", G, {"rotary_dim": 32}, gqa_base(), "param", "rotary_dim")
    err("gqa/param/rotary-dim-odd", G, {"pos_encoding_mode": "rope", "rotary_dim": 31}, gqa_base(rope_R=32), "param",
        "rotary_dim")
    err("gqa/param/unknown-pos-encoding-mode", G, {"pos_encoding_mode": "alibi"}, gqa_base(), "param",
        "pos_encoding_mode")
    err("gqa/param/unknown-rope-layout", G, {"pos_encoding_mode": "rope", "rope_layout": "gptj"}, gqa_base(rope_R=64),
        "param", "rope_layout")
    err("gqa/param/out-dtype-fp32", G, {"out_dtype": "fp32"}, gqa_base(), "param", "out_dtype")
    err("gqa/param/page-size-is-not-a-parameter", G, {"page_size": 4}, gqa_base(), "param", "page_size")
    # ---------------- dtype ----------------
    err("gqa/dtype/q-fp32", G, {}, gqa_base(q_dtype="fp32", kv_dtype="fp16", out_dtype="fp16"), "dtype", "q: expected")
    err("gqa/dtype/pair-fp16-bf16", G, {}, gqa_base(q_dtype="fp16", kv_dtype="bf16"), "dtype", "k_pages: expected")
    err("gqa/dtype/pair-bf16-fp16", G, {}, gqa_base(q_dtype="bf16", kv_dtype="fp16"), "dtype", "k_pages: expected")
    err("gqa/dtype/pair-e4m3-fp16", G, {"out_dtype": "fp16"}, gqa_base(q_dtype="e4m3", kv_dtype="fp16", out_dtype="fp16"),
        "dtype", "k_pages: expected")
    err("gqa/dtype/pair-e4m3-bf16", G, {"out_dtype": "bf16"}, gqa_base(q_dtype="e4m3", kv_dtype="bf16", out_dtype="bf16"),
        "dtype", "k_pages: expected")
    err("gqa/dtype/kv-fp32", G, {}, gqa_base(q_dtype="fp16", kv_dtype="fp32"), "dtype", "k_pages: expected")
    t = gqa_base(q_dtype="fp16", kv_dtype="e4m3")
    t["v_pages"]["dtype"] = "fp16"
    err("gqa/dtype/v-pages-differs", G, {}, t, "dtype", "v_pages: expected")
    t = gqa_base(q_dtype="bf16")
    t["v_pages"]["dtype"] = "fp16"
    err("gqa/dtype/v-pages-fp16-for-bf16", G, {}, t, "dtype", "v_pages: expected")
    err("gqa/dtype/e4m3-q-without-out-dtype", G, {}, gqa_base(q_dtype="e4m3", kv_dtype="e4m3", out_dtype="bf16"),
        "dtype", "out_dtype: expected")
    err("gqa/dtype/fp16-with-out-dtype-bf16", G, {"out_dtype": "bf16"}, gqa_base(q_dtype="fp16"), "dtype",
        "out_dtype: expected")
    err("gqa/dtype/fp16-e4m3-with-out-dtype-bf16", G, {"out_dtype": "bf16"}, gqa_base(q_dtype="fp16", kv_dtype="e4m3"),
        "dtype", "out_dtype: expected")
    for n in ("page_table", "cache_seqlens", "cu_seqlens_q"):
        t = gqa_base()
        t[n]["dtype"] = "int64"
        err(f"gqa/dtype/{n.replace('_', '-')}-int64", G, {}, t, "dtype", f"{n}: expected")
    t = gqa_base(q_dtype="fp16", kv_dtype="e4m3")
    t["k_scale"]["dtype"] = "fp16"
    err("gqa/dtype/k-scale-fp16", G, {}, t, "dtype", "k_scale: expected")
    t = gqa_base(q_dtype="e4m3", kv_dtype="e4m3", out_dtype="fp16")
    t["q_scale"]["dtype"] = "bf16"
    err("gqa/dtype/q-scale-bf16", G, {"out_dtype": "fp16"}, t, "dtype", "q_scale: expected")
    t = gqa_base(q_dtype="fp16", rope_R=32)
    t["rope_cos"]["dtype"] = "bf16"
    err("gqa/dtype/rope-cos-bf16-for-fp16", G, dict(ROPE), t, "dtype", "rope_cos: expected")
    t = gqa_base(q_dtype="e4m3", kv_dtype="e4m3", out_dtype="bf16", rope_R=32)
    t["rope_sin"]["dtype"] = "e4m3"
    err("gqa/dtype/rope-sin-e4m3-for-e4m3-bf16", G, dict(ROPE, out_dtype="bf16"), t, "dtype", "rope_sin: expected")
    t = gqa_base(sinks=True)
    t["sinks"]["dtype"] = "fp16"
    err("gqa/dtype/sinks-fp16", G, {}, t, "dtype", "sinks: expected")
    t = gqa_base(q_dtype="fp16")
    t["o"]["dtype"] = "bf16"
    err("gqa/dtype/o-bf16-for-fp16", G, {}, t, "dtype", "o: expected")
    t = gqa_base(q_dtype="bf16", kv_dtype="e4m3")
    t["o"]["dtype"] = "fp16"
    err("gqa/dtype/o-fp16-for-bf16-e4m3", G, {}, t, "dtype", "o: expected")
    t = gqa_base(q_dtype="e4m3", kv_dtype="e4m3", out_dtype="fp16")
    t["o"]["dtype"] = "bf16"
    err("gqa/dtype/o-bf16-for-e4m3-out-fp16", G, {"out_dtype": "fp16"}, t, "dtype", "o: expected")
    # ---------------- args ----------------
    t = gqa_base(q_dtype="fp16")
    t["k_scale"] = tensor([2, 1], "fp32", {"kind": "uniform", "low": 0.5, "high": 2.0})
    t["v_scale"] = tensor([2, 1], "fp32", {"kind": "uniform", "low": 0.5, "high": 2.0})
    err("gqa/args/kv-scales-for-fp16-cache", G, {}, t, "args", "k_scale: expected")
    t = gqa_base(q_dtype="bf16", kv_dtype="e4m3")
    t["q_scale"] = tensor([2, 1], "fp32", {"kind": "uniform", "low": 0.5, "high": 2.0})
    err("gqa/args/q-scale-for-bf16-q", G, {}, t, "args", "q_scale: expected")
    t = gqa_base(q_dtype="fp16", kv_dtype="e4m3")
    del t["k_scale"]
    err("gqa/args/k-scale-missing-for-e4m3-cache", G, {}, t, "args", "k_scale: expected")
    t = gqa_base(q_dtype="bf16", kv_dtype="e4m3")
    del t["v_scale"]
    err("gqa/args/v-scale-missing-for-e4m3-cache", G, {}, t, "args", "v_scale: expected")
    t = gqa_base(q_dtype="e4m3", kv_dtype="e4m3", out_dtype="fp16")
    del t["q_scale"]
    err("gqa/args/q-scale-missing-for-e4m3-q", G, {"out_dtype": "fp16"}, t, "args", "q_scale: expected")
    t = gqa_base(q_dtype="e4m3", kv_dtype="e4m3", out_dtype="bf16")
    for n in ("k_scale", "v_scale"):
        del t[n]
    err("gqa/args/kv-scales-missing-for-e4m3-e4m3", G, {"out_dtype": "bf16"}, t, "args", "_scale: expected")
    t = gqa_base(rope_R=32)
    del t["rope_sin"]
    err("gqa/args/rope-sin-missing", G, dict(ROPE), t, "args", "rope_sin: expected")
    t = gqa_base(rope_R=64)
    err("gqa/args/rope-tables-without-rope", G, {}, t, "args", "rope_cos: expected")
    for n in ("page_table", "cache_seqlens", "cu_seqlens_q", "k_pages", "o"):
        t = gqa_base()
        del t[n]
        err(f"gqa/args/{n.replace('_', '-')}-missing", G, {}, t, "args", f"{n}: expected")
    t = gqa_base()
    t["lse"] = tensor([4, 2], "fp32", OUTB, output=True)
    err("gqa/args/lse-is-not-an-output", G, {}, t, "args", "lse: expected")
    t = gqa_base()
    t["block_table"] = t.pop("page_table")
    err("gqa/args/block-table-is-not-an-input", G, {}, t, "args", "block_table: expected")
    # ---------------- shape ----------------
    t = gqa_base()
    t["q"]["shape"] = [1] + t["q"]["shape"]
    t["o"]["shape"] = [1] + t["o"]["shape"]
    err("gqa/shape/q-rank4", G, {}, t, "shape", "q: expected")
    t = gqa_base()
    for n in ("k_pages", "v_pages"):
        sh = t[n]["shape"]
        t[n]["shape"] = [sh[0] * sh[1], sh[2], sh[3]]
    err("gqa/shape/k-pages-rank3", G, {}, t, "shape", "k_pages: expected")
    t = gqa_base()
    t["v_pages"]["shape"][1] = 8
    err("gqa/shape/v-pages-page-size-differs", G, {}, t, "shape", "v_pages: expected")
    t = gqa_base()
    t["v_pages"]["shape"][0] += 1
    err("gqa/shape/v-pages-np-differs", G, {}, t, "shape", "v_pages: expected")
    t = gqa_base(D=64)
    for n in ("k_pages", "v_pages"):
        t[n]["shape"][3] = 128
    err("gqa/shape/k-pages-d-mismatch", G, {}, t, "shape", "k_pages: expected")
    err("gqa/shape/d96-not-accepted", G, {}, gqa_base(D=96), "shape", "q: expected")
    err("gqa/shape/d32", G, {}, gqa_base(D=32), "shape", "q: expected")
    err("gqa/shape/d512", G, {}, gqa_base(D=512), "shape", "q: expected")
    err("gqa/shape/h-not-multiple-of-hkv", G, {}, gqa_base(H=3, H_kv=2), "shape", "k_pages: expected")
    t = gqa_base()
    t["page_table"] = tensor([6], "int32", values([0, 1, 999999, 2, 3, 4]))
    err("gqa/shape/page-table-rank1", G, {}, t, "shape", "page_table: expected")
    t = gqa_base()
    t["page_table"] = tensor([3, 3], "int32", values([0, 1, 2, 3, 4, 5, 6, 7, 8]))
    err("gqa/shape/page-table-b-mismatch", G, {}, t, "shape", "page_table: expected")
    t = gqa_base()
    t["cache_seqlens"] = tensor([3], "int32", values([5, 9, 1]))
    err("gqa/shape/cache-seqlens-length", G, {}, t, "shape", "cache_seqlens: expected")
    t = gqa_base()
    t["cache_seqlens"] = tensor([2, 1], "int32", values([5, 9]))
    err("gqa/shape/cache-seqlens-rank2", G, {}, t, "shape", "cache_seqlens: expected")
    t = gqa_base()
    t["cu_seqlens_q"] = tensor([0], "int32", values([]))
    err("gqa/shape/cu-seqlens-q-length-0", G, {}, t, "shape", "cu_seqlens_q: expected")
    t = gqa_base()
    t["cu_seqlens_q"] = tensor([1, 3], "int32", values([0, 1, 4]))
    err("gqa/shape/cu-seqlens-q-rank2", G, {}, t, "shape", "cu_seqlens_q: expected")
    t = gqa_base(H=2, sinks=True)
    t["sinks"]["shape"] = [3]
    err("gqa/shape/sinks-not-h", G, {}, t, "shape", "sinks: expected")
    t = gqa_base(H=2, sinks=True)
    t["sinks"]["shape"] = [1, 2]
    err("gqa/shape/sinks-rank2", G, {}, t, "shape", "sinks: expected")
    t = gqa_base(q_dtype="fp16", kv_dtype="e4m3")
    t["k_scale"]["shape"] = [2, 2]
    err("gqa/shape/k-scale-hkv-mismatch", G, {}, t, "shape", "k_scale: expected")
    t = gqa_base(q_dtype="bf16", kv_dtype="e4m3")
    t["v_scale"] = tensor([1], "fp32", values([1.5]))
    err("gqa/shape/v-scale-per-tensor-rank1", G, {}, t, "shape", "v_scale: expected")
    t = gqa_base(q_dtype="e4m3", kv_dtype="e4m3", out_dtype="fp16")
    t["q_scale"]["shape"] = [3, 1]
    err("gqa/shape/q-scale-b-plus-1", G, {"out_dtype": "fp16"}, t, "shape", "q_scale: expected")
    err("gqa/shape/rotary-dim-gt-d", G, {"pos_encoding_mode": "rope", "rotary_dim": 128}, gqa_base(D=64, rope_R=128),
        "shape", "rotary_dim: expected")
    t = gqa_base(rope_R=32)
    for n in ("rope_cos", "rope_sin"):
        t[n]["shape"][1] = 32
    err("gqa/shape/rope-tables-r-mismatch", G, dict(ROPE), t, "shape", "rope_")
    t = gqa_base(rope_R=32)
    t["rope_sin"]["shape"][0] += 2
    err("gqa/shape/rope-sin-p-differs", G, dict(ROPE), t, "shape", "rope_sin: expected")
    t = gqa_base()
    t["o"]["shape"][1] = 1
    err("gqa/shape/o-heads", G, {}, t, "shape", "o: expected")
    t = gqa_base()
    t["o"]["shape"][0] += 1
    err("gqa/shape/o-tq", G, {}, t, "shape", "o: expected")
    # ---------------- layout ----------------
    t = gqa_base()
    t["q"]["strides"] = [x * 2 for x in contiguous(t["q"]["shape"])]
    err("gqa/layout/q-innermost-stride2", G, {}, t, "layout", "q: expected")
    t = gqa_base()
    t["k_pages"]["strides"] = [x * 2 for x in contiguous(t["k_pages"]["shape"])]
    err("gqa/layout/k-pages-innermost-stride2", G, {}, t, "layout", "k_pages: expected")
    t = gqa_base()
    st = contiguous(t["o"]["shape"])
    st[0] += 64
    t["o"]["strides"] = st
    err("gqa/layout/o-not-contiguous", G, {}, t, "layout", "o: expected")
    t = gqa_base()
    t["cu_seqlens_q"] = tensor([3], "int32", values([0, -1, 1, -1, 4]), strides=[2])
    err("gqa/layout/cu-seqlens-q-strided", G, {}, t, "layout", "cu_seqlens_q: expected")
    t = gqa_base(H_kv=2, H=2)
    sh = t["v_pages"]["shape"]
    t["v_pages"]["strides"] = [sh[1] * 2 * 68, 2 * 68, 68, 1]  # head stride 136 bytes (device rule only)
    err("gqa/layout/v-pages-head-stride-136-bytes", G, {}, t, "layout", "v_pages: expected", gpu_only=True)
    # ---------------- content (validate_inputs) ----------------
    err("gqa/content/cu-seqlens-q-not-starting-at-0", G, VI,
        dict(gqa_base(), cu_seqlens_q=tensor([3], "int32", values([1, 2, 4]))), "content", "cu_seqlens_q: expected")
    err("gqa/content/cu-seqlens-q-decreasing", G, VI,
        dict(gqa_base(reqs=((1, 5), (3, 9), (0, 2))), cu_seqlens_q=tensor([4], "int32", values([0, 3, 1, 4]))),
        "content", "cu_seqlens_q: expected")
    err("gqa/content/cu-seqlens-q-end-ne-tq", G, VI,
        dict(gqa_base(), cu_seqlens_q=tensor([3], "int32", values([0, 1, 3]))), "content", "cu_seqlens_q: expected")
    t = gqa_base(reqs=((1, 5), (3, 9)))
    t["cache_seqlens"]["init"] = values([5, 2])
    err("gqa/content/q-len-gt-kv-len", G, dict(VI, is_causal=False), t, "content", "cache_seqlens: expected")
    t = gqa_base(reqs=((1, 5), (3, 9)), PS=4)  # W = 3: capacity 12
    t["cache_seqlens"]["init"] = values([5, 13])
    err("gqa/content/kv-len-gt-w-times-ps", G, VI, t, "content", "cache_seqlens: expected")
    t = gqa_base(reqs=((1, 5), (3, 9)))
    t["cache_seqlens"]["init"] = values([-1, 9])
    t["cu_seqlens_q"]["init"] = values([0, 0, 3])
    t["q"]["shape"][0] = 3
    t["o"]["shape"][0] = 3
    err("gqa/content/kv-len-negative", G, VI, t, "content", "cache_seqlens: expected")
    t = gqa_base(reqs=((1, 5), (3, 9)), PS=4)  # pages 0, 1 | 2, 3, 4 ; NP = 6
    t["page_table"]["init"] = values([0, 1, 999999, 2, 6, 4])
    err("gqa/content/page-table-entry-eq-np", G, VI, t, "content", "page_table: expected")
    t = gqa_base(reqs=((1, 5), (3, 9)), PS=4)
    t["page_table"]["init"] = values([0, -3, 999999, 2, 3, 4])
    err("gqa/content/page-table-entry-negative", G, VI, t, "content", "page_table: expected")
    err("gqa/content/rope-p-lt-kv-len", G, dict(VI, **ROPE), gqa_base(rope_R=32, P=8), "content", "rope_cos: expected")
    t = gqa_base(q_dtype="fp16", kv_dtype="e4m3")
    t["k_scale"]["init"] = values([1.0, 0.0])
    err("gqa/content/k-scale-zero", G, VI, t, "content", "k_scale: expected")
    t = gqa_base(q_dtype="bf16", kv_dtype="e4m3", scales="per-tensor")
    t["v_scale"]["init"] = values([-1.0])
    err("gqa/content/v-scale-negative-per-tensor", G, VI, t, "content", "v_scale: expected")
    t = gqa_base(q_dtype="e4m3", kv_dtype="e4m3", out_dtype="bf16")
    t["q_scale"]["init"] = values([1.0, "inf"])
    err("gqa/content/q-scale-inf", G, dict(VI, out_dtype="bf16"), t, "content", "q_scale: expected")
    t = gqa_base(H=2, sinks=True)
    t["sinks"]["init"] = {"kind": "bits", "bits": [0, 2143289344]}  # 0.0, NaN
    err("gqa/content/sink-nan", G, VI, t, "content", "sinks: expected")

    # ---------------- mha_decode_paged ----------------
    M = "mha_decode_paged"
    err("mha/param/page-size-0", M, {"page_size": 0}, mha_base(), "param", "page_size")
    err("mha/param/page-size-negative", M, {"page_size": -4}, mha_base(), "param", "page_size")
    err("mha/param/page-size-missing", M, {}, mha_base(), "param", "page_size")
    err("mha/param/page-size-fractional", M, {"page_size": 2.5}, mha_base(), "param", "page_size")
    err("mha/param/sm-scale-is-not-a-parameter", M, dict(MHA_CFG, sm_scale=0.1), mha_base(), "param", "sm_scale")
    err("mha/dtype/q-e4m3", M, MHA_CFG, mha_base(dtype="e4m3"), "dtype", "q: expected")
    err("mha/dtype/q-fp32", M, MHA_CFG, mha_base(dtype="fp32"), "dtype", "q: expected")
    t = mha_base(dtype="fp16")
    t["k"]["dtype"] = "bf16"
    err("mha/dtype/k-differs", M, MHA_CFG, t, "dtype", "k: expected")
    t = mha_base(dtype="bf16")
    t["v"]["dtype"] = "fp16"
    err("mha/dtype/v-differs", M, MHA_CFG, t, "dtype", "v: expected")
    t = mha_base(dtype="fp16")
    t["k"]["dtype"] = "e4m3"
    t["v"]["dtype"] = "e4m3"
    err("mha/dtype/e4m3-cache", M, MHA_CFG, t, "dtype", "k: expected")
    for n in ("block_table", "real_seqlen_kv"):
        t = mha_base()
        t[n]["dtype"] = "int64"
        err(f"mha/dtype/{n.replace('_', '-')}-int64", M, MHA_CFG, t, "dtype", f"{n}: expected")
    t = mha_base(dtype="fp16")
    t["o"]["dtype"] = "bf16"
    err("mha/dtype/o-bf16-for-fp16", M, MHA_CFG, t, "dtype", "o: expected")
    for n in ("block_table", "real_seqlen_kv", "k", "o"):
        t = mha_base()
        del t[n]
        err(f"mha/args/{n.replace('_', '-')}-missing", M, MHA_CFG, t, "args", f"{n}: expected")
    t = mha_base()
    t["cache_seqlens"] = t.pop("real_seqlen_kv")
    err("mha/args/cache-seqlens-is-not-an-input", M, MHA_CFG, t, "args", "cache_seqlens: expected")
    t = mha_base()
    t["sinks"] = tensor([2], "fp32", normal())
    err("mha/args/sinks-not-an-input", M, MHA_CFG, t, "args", "sinks: expected")
    t = mha_base()
    t["q"]["shape"] = t["q"]["shape"][1:]
    t["o"]["shape"] = t["o"]["shape"][1:]
    err("mha/shape/q-rank3", M, MHA_CFG, t, "shape", "q: expected")
    t = mha_base()
    for n in ("k", "v"):
        sh = t[n]["shape"]
        t[n]["shape"] = [sh[0] // 4, 4, sh[1], sh[2]]
    err("mha/shape/k-rank4", M, MHA_CFG, t, "shape", "k: expected")
    t = mha_base(H=2)
    for n in ("k", "v"):
        t[n]["shape"][1] = 1
    err("mha/shape/head-counts-differ", M, MHA_CFG, t, "shape", "k: expected")
    t = mha_base(H=4)
    for n in ("k", "v"):
        t[n]["shape"][1] = 2
    err("mha/shape/gqa-heads-not-accepted", M, MHA_CFG, t, "shape", "k: expected")
    t = mha_base(D=64)
    for n in ("k", "v"):
        t[n]["shape"][2] = 128
    err("mha/shape/d-mismatch", M, MHA_CFG, t, "shape", "k: expected")
    err("mha/shape/d96-not-accepted", M, MHA_CFG, mha_base(D=96), "shape", "q: expected")
    err("mha/shape/d32", M, MHA_CFG, mha_base(D=32), "shape", "q: expected")
    t = mha_base()
    for n in ("k", "v"):
        t[n]["shape"][0] += 2
    err("mha/shape/n-kv-not-multiple-of-page-size", M, MHA_CFG, t, "shape", "k: expected")
    t = mha_base()
    t["v"]["shape"][0] += 4
    err("mha/shape/v-rows-differ", M, MHA_CFG, t, "shape", "v: expected")
    t = mha_base()
    t["block_table"] = tensor([4], "int32", values([0, 1, 2, 999999]))
    err("mha/shape/block-table-rank1", M, MHA_CFG, t, "shape", "block_table: expected")
    t = mha_base()
    t["block_table"] = tensor([3, 2], "int32", values([0, 1, 2, 3, 4, 5]))
    err("mha/shape/block-table-b-mismatch", M, MHA_CFG, t, "shape", "block_table: expected")
    t = mha_base()
    t["real_seqlen_kv"] = tensor([3], "int32", values([5, 3, 1]))
    err("mha/shape/real-seqlen-kv-length", M, MHA_CFG, t, "shape", "real_seqlen_kv: expected")
    t = mha_base()
    t["o"]["shape"][1] = 2
    err("mha/shape/o-sq", M, MHA_CFG, t, "shape", "o: expected")
    t = mha_base()
    t["q"]["strides"] = [x * 2 for x in contiguous(t["q"]["shape"])]
    err("mha/layout/q-innermost-stride2", M, MHA_CFG, t, "layout", "q: expected")
    t = mha_base()
    t["k"]["strides"] = [x * 2 for x in contiguous(t["k"]["shape"])]
    err("mha/layout/k-innermost-stride2", M, MHA_CFG, t, "layout", "k: expected")
    t = mha_base()
    st = contiguous(t["o"]["shape"])
    st[0] += 64
    t["o"]["strides"] = st
    err("mha/layout/o-not-contiguous", M, MHA_CFG, t, "layout", "o: expected")
    t = mha_base(H=2)
    t["v"]["strides"] = [2 * 68, 68, 1]  # row stride 272 bytes is fine, head stride 136 bytes is not (device)
    err("mha/layout/v-head-stride-136-bytes", M, MHA_CFG, t, "layout", "v: expected", gpu_only=True)
    t = mha_base(lens=(5, 3), PS=4)  # W = 2: capacity 8
    t["real_seqlen_kv"]["init"] = values([9, 3])
    err("mha/content/real-seqlen-kv-gt-w-times-page-size", M, dict(MHA_CFG, **VI), t, "content",
        "real_seqlen_kv: expected")
    t = mha_base(lens=(5, 3), PS=4)
    t["real_seqlen_kv"]["init"] = values([5, -2])
    err("mha/content/real-seqlen-kv-negative", M, dict(MHA_CFG, **VI), t, "content", "real_seqlen_kv: expected")
    t = mha_base(lens=(5, 3), PS=4)  # pages 0, 1 | 2 ; NP = 4
    t["block_table"]["init"] = values([0, 4, 2, 999999])
    err("mha/content/block-table-entry-eq-np", M, dict(MHA_CFG, **VI), t, "content", "block_table: expected")
    t = mha_base(lens=(5, 3), PS=4)
    t["block_table"]["init"] = values([0, 1, -1, 999999])
    err("mha/content/block-table-entry-negative", M, dict(MHA_CFG, **VI), t, "content", "block_table: expected")
    # ---------------- backend 'hopper' (on sm_90a; elsewhere it refuses for the arch) ----------------
    err("gqa/unsupported/hopper-decode-like", G, {"backend": "hopper"}, gqa_base(), "unsupported",
        "its hopper kernel cannot serve this one: it reads pages in 16-slot boxes", gpu_only=True)
    err("gqa/unsupported/hopper-rope", G, {"backend": "hopper", "pos_encoding_mode": "rope", "rotary_dim": 32},
        gqa_base(reqs=((20, 30), (40, 50)), rope_R=32), "unsupported", "backend 'hopper'", gpu_only=True)
    err("mha/unsupported/hopper", M, dict(MHA_CFG, backend="hopper"), mha_base(), "unsupported",
        "it serves gqa_paged_fwd only", gpu_only=True)
    return e.cases


# ----------------------------------------------------------------------------------------------------


def main():
    args = case_args(__doc__, count=320).parse_args()
    grid, total, garbage = build_grid(args.count)
    n_mha = sum(1 for c in grid if c["op"] == "mha_decode_paged")
    n_garbage = sum(1 for c in grid if "garbage-pools" in c["name"])
    write_cases(os.path.join(args.out_dir, "gpu", "paged_attention_grid.json"), grid,
          f"; {n_mha} mha_decode_paged, {len(grid) - n_mha} gqa_paged_fwd; {n_garbage} with random-byte garbage "
          f"pools ({garbage} elements); reference cost bound {total:.3g} (sum of q_len * H * kv_len * D)")
    write_cases(os.path.join(args.out_dir, "gpu", "paged_attention_small.json"), build_small())
    write_errors_per_op(args.out_dir, build_errors(), ("gqa_paged_fwd", "mha_decode_paged"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
