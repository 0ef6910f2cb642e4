#!/usr/bin/env python3
"""Test cases for gqa_prefill_paged_append (SPEC.md §2.10) in the `attnjit test` format (tools/cli/test_case.hpp).
Standard library only; deterministic (fixed seeds).

Writes:
  tests/cases/gpu/gqa_prefill_paged_append_grid.json   >= 120 random configurations, every one "gpu_only": the
      runner compares the kernel with the CPU reference on the same random inputs (no golden): q fp16 / bf16,
      cache = q's dtype or (~20 %) e4m3 with scales drawn so that a few new values exceed 448 after scaling
      (saturation); page sizes 1, 2, 4, ..., 256; D 64, 128, 256; group sizes 1..16 (H_kv 1..8); B 1..8
      requests whose cached length is 0, 1, ps - 1, ps, ps + 1 or long (hundreds to thousands of tokens) and
      whose chunk is empty, a single token, short, crossing page boundaries or long (up to 1024); causal or
      not; softcap; sm_scale; fuse_rope with full or partial rotary_dim and various rope_base / max_position
      slack; validate_inputs; padded (class F) strides on q / k_new / v_new; scattered, non-monotonic page
      tables with spare pages, W larger than needed (unused entries hold out-of-range values or unrelated
      pages), sometimes a cached first page shared (read-only) by two requests.
      The pools are poisoned with the byte pattern 0xFF (NaN in fp16, bf16, e4m3) except the cached rows
      0..old-1 of every request, which are random ({"kind": "rows"} init): an op that reads a row it must not
      read turns o into NaN; one that fails to write an appended row leaves the NaN pattern.
      Compared: o rel_l2 (bf16 1e-2, fp16 5e-3, e4m3 cache 5e-2); both pools over their whole storage,
      "bitwise" for a 16-bit cache without RoPE and for an e4m3 cache, "ulp" (max 2) with fuse_rope, so
      every row the op must not write is checked to be unchanged (SPEC.md §2.10 "Tests").
      The CPU reference cost (sum over requests of q_len * H * (old + q_len) * D) is capped per case and in
      total (MAX_TOTAL_COST).
  tests/cases/gpu/gqa_prefill_paged_append_small.json  ~16 small cases (every feature, short lengths) for
      compute-sanitizer runs.
  tests/cases/gqa_prefill_paged_append_errors.json     one case per rejection rule of SPEC.md §2.10 (param,
      dtype, shape, args, layout) and per validate_inputs caller-contract rule (content), each checking the
      category, a message substring (the argument's name) and, with the pools and o filled with a byte
      pattern, that a rejected call wrote nothing.

Usage: python3 tests/gen/gqa_prefill_paged_append_cases.py [--out-dir tests/cases] [--count N]
"""
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from casegen_common import (OUTB, POISON, TOL, case_args, fewer_heads, normal, random_padded_strides,  # noqa: E402
                            scatter_pages, tensor, values, weighted, write_cases)

OP = "gqa_prefill_paged_append"
SEED = 0x9A7E11
MAX_TOTAL_COST = 1.2e10            # sum over the grid of q_len * H * (old + q_len) * D
CASE_CAPS = [(1e8, 0.55), (6e8, 0.3), (2.5e9, 0.15)]  # per-case cost caps and how often each is drawn
RESERVE = 2e7
MAX_POOL_ELEMENTS = 12 * 1024 * 1024  # per pool
PAGE_SIZES = [1, 2, 4, 8, 16, 32, 64, 128, 256]
BAD_ENTRIES = [999999, -1, 2 ** 31 - 1, -123456]
POOL_POISON = {"kind": "bytes", "pattern": 255}  # NaN in fp16 / bf16 / e4m3


class Draw:
    pass


# ----------------------------------------------------------------------------------------------------
# Pages


def assign_pages(rng, reqs, ps, spare, share):
    """Scattered, non-monotonic physical pages for every request's logical pages 0..ceil((old+q_len)/ps)-1.
    With `share`, logical page 0 of one request is redirected to logical page 0 of another when both lie
    entirely inside the cached prefixes (read by both, written by neither). Returns (NP, pages, shared)."""
    total, pages = scatter_pages(rng, [(o + n + ps - 1) // ps for o, n in reqs], spare)
    shared = False
    if share:
        owners = [b for b, (o, _) in enumerate(reqs) if o >= ps]
        if len(owners) >= 2:
            b1, b2 = rng.sample(owners, 2)
            pages[b2][0] = pages[b1][0]  # the freed page stays in the pool as a spare
            shared = True
    return total, pages, shared


def table_values(rng, pages, W, NP):
    flat = []
    for pg in pages:
        row = list(pg)
        while len(row) < W:
            row.append(rng.randrange(NP) if NP > 0 and rng.random() < 0.25 else rng.choice(BAD_ENTRIES + [NP]))
        flat += row
    return flat


def cached_ranges(reqs, pages, ps):
    """[[first_row, count], ...] of the pool rows holding the cached tokens 0..old-1 (dim 0 of [PT, H_kv, D])."""
    rows = set()
    for (old, _), pg in zip(reqs, pages):
        for p in range((old + ps - 1) // ps):
            n = min(ps, old - p * ps)
            rows.add((pg[p] * ps, n))
    merged = {}
    for first, n in rows:  # a shared page appears once (same first row; the longer count wins)
        merged[first] = max(merged.get(first, 0), n)
    return [[f, merged[f]] for f in sorted(merged)]


def written_rows(reqs, pages, ps):
    out = []
    for (old, n), pg in zip(reqs, pages):
        for x in range(old, old + n):
            out.append(pg[x // ps] * ps + x % ps)
    return out


# ----------------------------------------------------------------------------------------------------
# One case


def cost_of(d):
    return sum(n * (o + n) for o, n in d.reqs) * d.H * d.D


def build_case(rng, d, idx, seed, name_prefix=""):
    H, H_kv, D, ps = d.H, d.H_kv, d.D, d.ps
    B = len(d.reqs)
    e4m3 = d.cache == "e4m3"
    spare = d.spare if d.spare is not None else rng.choice([0, 1, 3])
    NP, pages, shared = assign_pages(rng, d.reqs, ps, spare, d.share)
    W = max([len(p) for p in pages] + [1]) + rng.choice([0, 0, 1, 5])
    PT = NP * ps
    wr = written_rows(d.reqs, pages, ps)
    assert len(set(wr)) == len(wr)
    ranges = cached_ranges(d.reqs, pages, ps)
    cached = {f + i for f, n in ranges for i in range(n)}
    assert not (cached & set(wr))

    cu = [0]
    for _, n in d.reqs:
        cu.append(cu[-1] + n)
    T = cu[-1]
    tensors = {}
    for name, heads, std in (("q", H, d.q_std), ("k_new", H_kv, 1.0), ("v_new", H_kv, 1.0)):
        shape = [T, heads, D]
        st = random_padded_strides(rng, shape, d.dt) if d.strided and T > 0 else None
        tensors[name] = tensor(shape, d.dt, normal(std), st)
    pool_shape = [PT, H_kv, D]
    for name, sc in (("k_pages", d.k_scale), ("v_pages", d.v_scale)):
        std = 1.0 / sc if e4m3 else 1.0  # cached e4m3 rows dequantise to about N(0, 1)
        init = {"kind": "rows", "ranges": ranges, "init": normal(round(std, 6)), "else": POOL_POISON}
        tensors[name] = tensor(pool_shape, d.cache, init, output=True)
    tensors["k_scale"] = tensor([1], "fp32", values([d.k_scale]))
    tensors["v_scale"] = tensor([1], "fp32", values([d.v_scale]))
    tensors["cu_seqlens_q"] = tensor([B + 1], "int32", values(cu))
    tensors["cache_seqlens"] = tensor([B], "int32", values([o for o, _ in d.reqs]))
    tensors["block_table"] = tensor([B, W], "int32", values(table_values(rng, pages, W, NP)))
    tensors["o"] = tensor([T, H, D], d.dt, POISON, output=True)

    max_q = max([n for _, n in d.reqs] + [1])
    config = {"page_size": ps, "max_seqlen_q": max_q + d.mq_slack, "is_causal": d.causal}
    if d.cache_key or e4m3:
        config["cache_dtype"] = d.cache
    if d.sm_scale is not None:
        config["sm_scale"] = d.sm_scale
    if d.softcap:
        config["softcap"] = d.softcap
    if d.rope:
        config["fuse_rope"] = True
        if d.rope_base != 10000.0 or rng.random() < 0.3:
            config["rope_base"] = d.rope_base
        config["max_position"] = max([o + n for o, n in d.reqs] + [1]) + d.mp_slack
        if d.R != D or rng.random() < 0.5:
            config["rotary_dim"] = d.R
    if d.validate:
        config["validate_inputs"] = True

    pool_cmp = {"mode": "ulp", "max_ulp": 2} if d.rope else {"mode": "bitwise"}
    compare = {"o": {"mode": "rel_l2", "tol": TOL["e4m3" if e4m3 else d.dt]}, "k_pages": pool_cmp,
               "v_pages": dict(pool_cmp)}

    parts = [f"{d.dt}-{d.cache}", f"d{D}", f"h{H}kv{H_kv}", f"ps{ps}", "causal" if d.causal else "noncausal"]
    if d.softcap:
        parts.append(f"cap{d.softcap:g}")
    if d.sm_scale is not None:
        parts.append(f"sm{d.sm_scale:g}")
    if d.rope:
        parts.append(f"rope-r{d.R}-base{d.rope_base:g}-mp+{d.mp_slack}")
    if e4m3:
        parts.append(f"scales{d.k_scale:g},{d.v_scale:g}")
    parts.append("old" + ",".join(str(o) for o, _ in d.reqs) + "-q" + ",".join(str(n) for _, n in d.reqs)
                 if d.reqs else "b0")
    parts.append(f"np{NP}-w{W}")
    if shared:
        parts.append("shared-page")
    if d.strided and T > 0:
        parts.append("strided")
    if d.validate:
        parts.append("validate")
    parts.append(f"#{idx}")
    case = {"name": name_prefix + "/".join(parts), "op": OP, "config": config, "seed": seed, "tensors": tensors,
            "compare": compare, "gpu_only": True}
    return case


# ----------------------------------------------------------------------------------------------------
# Random grid


def draw(rng, small):
    d = Draw()
    d.dt = rng.choice(["fp16", "bf16"])
    d.cache = "e4m3" if rng.random() < 0.2 else d.dt
    d.cache_key = rng.random() < 0.3
    d.D = weighted(rng, [(64, 0.35), (128, 0.45), (256, 0.2)])
    d.ps = rng.choice(PAGE_SIZES)
    g = rng.choice([1, 2, 4, 8, 16])
    cap_h = 16 if small else 64
    d.H_kv = rng.choice([h for h in (1, 2, 4, 8) if h * g <= cap_h] or [1])
    d.H = g * d.H_kv
    d.causal = rng.random() < 0.7
    d.softcap = rng.choice([2.0, 10.0, 30.0]) if rng.random() < 0.2 else 0.0
    d.sm_scale = rng.choice([0.04, 0.3]) if rng.random() < 0.1 else None
    d.rope = d.cache != "e4m3" and rng.random() < 0.3
    d.R = None
    d.rope_base = 10000.0
    d.mp_slack = 0
    if d.rope:
        d.R = weighted(rng, [(d.D, 0.4), (d.D // 2, 0.25), (2, 0.1), (2 * rng.randint(1, d.D // 2), 0.25)])
        d.rope_base = rng.choice([10000.0, 10000.0, 500000.0, 1000.0])
        d.mp_slack = rng.choice([0, 0, 1, 100])
    d.k_scale = d.v_scale = 0.5
    if d.cache == "e4m3":
        # x ~ N(0, 1): a fraction P(|x| > u) of the new values saturates (|x / scale| > 448)
        d.k_scale = round(rng.choice([2.5, 3.5, 6.0]) / 448.0, 6)
        d.v_scale = round(rng.choice([2.5, 3.5, 6.0]) / 448.0, 6)
    d.q_std = 2.0 if d.softcap and rng.random() < 0.5 else 1.0
    d.validate = rng.random() < 0.12
    d.strided = rng.random() < 0.2
    d.share = rng.random() < 0.2
    d.mq_slack = rng.choice([0, 0, 1, 37])
    d.spare = None
    return d


def one_request(rng, ps, small):
    long_old = rng.randint(40, 100) if small else rng.choice([rng.randint(100, 700), rng.randint(700, 3000)])
    old = rng.choice([0, 0, 1, max(ps - 1, 0), ps, ps + 1, 2 * ps + 3, long_old])
    r = rng.random()
    if r < 0.1:
        n = 0
    elif r < 0.25:
        n = 1
    elif r < 0.55:
        n = rng.randint(2, 40)
    elif r < 0.75:
        n = max(1, ps - (old % ps) + rng.randint(1, 5))  # crosses the next page boundary
    else:
        n = rng.randint(41, 90) if small else rng.choice([rng.randint(41, 300), rng.randint(300, 1024)])
    return old, n


def draw_lengths(rng, d, cap, small):
    for attempt in range(400):
        nreq = rng.randint(1, 8 if not small else 3)
        d.reqs = [one_request(rng, d.ps, small) for _ in range(nreq)]
        pool = (sum((o + n + d.ps - 1) // d.ps for o, n in d.reqs) + 3) * d.ps * d.H_kv * d.D
        if cost_of(d) <= cap and pool <= MAX_POOL_ELEMENTS:
            return
        if attempt > 200 and d.H > 1:  # fewer heads (keep the group size if possible)
            fewer_heads(d)
    d.reqs = [(min(o, 7), min(n, 7)) for o, n in d.reqs]


def build_grid(count):
    rng = random.Random(SEED)
    cases, total, idx = [], 0.0, 0
    while len(cases) < count:
        cap = weighted(rng, CASE_CAPS)
        cap = min(cap, max(1e6, MAX_TOTAL_COST - total - (count - len(cases) - 1) * RESERVE))
        d = draw(rng, False)
        draw_lengths(rng, d, cap, False)
        cases.append(build_case(rng, d, idx, 41000 + idx))
        total += cost_of(d)
        idx += 1
    return cases, total


# ----------------------------------------------------------------------------------------------------
# Small cases (compute-sanitizer): every feature, short lengths


def build_small():
    rng = random.Random(SEED + 99)
    # (dt, cache, D, H, H_kv, ps, causal, softcap, rope R (None = off), reqs)
    specs = [
        ("bf16", "bf16", 64, 4, 2, 16, True, 0.0, None, [(0, 5), (7, 6), (12, 9)]),
        ("fp16", "fp16", 128, 8, 1, 1, True, 0.0, None, [(3, 4), (0, 0), (1, 1)]),
        ("bf16", "bf16", 256, 2, 2, 4, False, 0.0, None, [(5, 7), (0, 3)]),
        ("fp16", "fp16", 64, 16, 1, 64, True, 0.0, None, [(60, 10), (64, 1)]),
        ("bf16", "bf16", 128, 4, 2, 256, True, 10.0, None, [(250, 9), (0, 2)]),
        ("fp16", "fp16", 64, 4, 2, 8, True, 0.0, 64, [(9, 12), (0, 4)]),
        ("bf16", "bf16", 128, 4, 1, 2, False, 0.0, 32, [(3, 5), (6, 2)]),
        ("fp16", "fp16", 256, 2, 1, 16, True, 5.0, 2, [(17, 3), (0, 20)]),
        ("bf16", "e4m3", 64, 4, 2, 16, True, 0.0, None, [(5, 13), (20, 4)]),
        ("fp16", "e4m3", 128, 8, 4, 4, False, 0.0, None, [(2, 6), (0, 1)]),
        ("bf16", "e4m3", 256, 2, 2, 32, True, 30.0, None, [(33, 31), (1, 0)]),
        ("bf16", "bf16", 64, 2, 2, 16, True, 0.0, None, []),  # B = 0
        ("fp16", "fp16", 64, 4, 2, 8, True, 0.0, None, [(4, 0), (0, 0)]),  # T_q = 0
        ("bf16", "bf16", 128, 32, 2, 16, True, 0.0, None, [(40, 70), (16, 33)]),
        ("fp16", "fp16", 64, 4, 4, 4, True, 0.0, None, [(8, 3), (9, 2), (4, 1)]),  # shared first page
        ("bf16", "bf16", 64, 8, 2, 1, False, 0.0, 48, [(2, 9), (11, 4)]),
    ]
    cases = []
    for i, (dt, cache, D, H, H_kv, ps, causal, cap, R, reqs) in enumerate(specs):
        d = Draw()
        d.dt, d.cache, d.D, d.H, d.H_kv, d.ps, d.causal, d.softcap = dt, cache, D, H, H_kv, ps, causal, cap
        d.cache_key = i % 3 == 0
        d.sm_scale = 0.2 if i == 3 else None
        d.rope = R is not None
        d.R = R
        d.rope_base = 10000.0 if i % 2 else 500000.0
        d.mp_slack = i % 3
        d.k_scale, d.v_scale = (round(3.0 / 448, 6), round(2.5 / 448, 6)) if cache == "e4m3" else (0.5, 0.5)
        d.q_std = 1.0
        d.validate = i % 4 == 1
        d.strided = i % 5 == 2
        d.share = i == 14
        d.mq_slack = i % 2
        d.spare = 1 if i % 2 else 0
        d.reqs = reqs
        cases.append(build_case(rng, d, i, 9900 + i, name_prefix="small/"))
    assert any("shared-page" in c["name"] for c in cases)
    return cases


# ----------------------------------------------------------------------------------------------------
# Error cases: a valid base call, one mutation each


def base_error_case():
    """B = 2 requests (old 3, q_len 2) and (old 5, q_len 4), page size 4, H 4, H_kv 2, D 64, bf16, 6 pages."""
    t = {
        "q": tensor([6, 4, 64], "bf16", normal()),
        "k_new": tensor([6, 2, 64], "bf16", normal()),
        "v_new": tensor([6, 2, 64], "bf16", normal()),
        "k_pages": tensor([24, 2, 64], "bf16", dict(OUTB), output=True),
        "v_pages": tensor([24, 2, 64], "bf16", dict(OUTB), output=True),
        "k_scale": tensor([1], "fp32", values([0.5])),
        "v_scale": tensor([1], "fp32", values([0.5])),
        "cu_seqlens_q": tensor([3], "int32", values([0, 2, 6])),
        "cache_seqlens": tensor([2], "int32", values([3, 5])),
        "block_table": tensor([2, 3], "int32", values([0, 1, 999999, 2, 3, 4])),
        "o": tensor([6, 4, 64], "bf16", dict(OUTB), output=True),
    }
    return {"page_size": 4, "max_seqlen_q": 8}, t


def build_errors():
    cases = []
    seed = [8800]

    def add(name, category, contains, config=None, drop=(), gpu_only=False, **changes):
        cfg, t = base_error_case()
        if config:
            for k, v in config.items():
                if v is None:
                    cfg.pop(k, None)
                else:
                    cfg[k] = v
        for n in drop:
            t.pop(n)
        for n, ch in changes.items():
            if ch is None:
                continue
            if n not in t:
                t[n] = ch
                continue
            t[n] = dict(t[n], **ch)
        case = {"name": f"prefill-append-error/{category}/{name}", "op": OP, "config": cfg, "seed": seed[0],
                "tensors": t, "expect_error": {"category": category, "contains": contains}}
        if gpu_only:
            case["gpu_only"] = True
        cases.append(case)
        seed[0] += 1

    def e4m3_pools():
        return {"k_pages": {"dtype": "e4m3"}, "v_pages": {"dtype": "e4m3"}}

    rope = {"fuse_rope": True, "max_position": 64}

    # ---- param (construction)
    add("page-size-3", "param", "page_size", config={"page_size": 3})
    add("page-size-0", "param", "page_size", config={"page_size": 0})
    add("page-size-negative", "param", "page_size", config={"page_size": -4})
    add("page-size-missing", "param", "page_size", config={"page_size": None})
    add("max-seqlen-q-0", "param", "max_seqlen_q", config={"max_seqlen_q": 0})
    add("max-seqlen-q-missing", "param", "max_seqlen_q", config={"max_seqlen_q": None})
    add("fuse-rope-without-max-position", "param", "max_position", config={"fuse_rope": True})
    add("max-position-0", "param", "max_position", config={"fuse_rope": True, "max_position": 0})
    add("fuse-rope-with-e4m3-cache", "param", "fuse_rope", config=dict(rope, cache_dtype="e4m3"), **e4m3_pools())
    add("rotary-dim-without-fuse-rope", "param", "rotary_dim", config={"rotary_dim": 32})
    add("rotary-dim-odd", "param", "rotary_dim", config=dict(rope, rotary_dim=31))
    add("rotary-dim-0", "param", "rotary_dim", config=dict(rope, rotary_dim=0))
    add("softcap-negative", "param", "softcap", config={"softcap": -1.0})
    add("sm-scale-0", "param", "sm_scale", config={"sm_scale": 0.0})
    add("sm-scale-negative", "param", "sm_scale", config={"sm_scale": -0.125})
    add("rope-base-0", "param", "rope_base", config=dict(rope, rope_base=0.0))
    add("rope-base-negative", "param", "rope_base", config=dict(rope, rope_base=-10000.0))
    add("cache-dtype-fp32", "param", "cache_dtype", config={"cache_dtype": "fp32"})
    add("cache-dtype-unknown", "param", "cache_dtype", config={"cache_dtype": "int8"})
    add("unknown-parameter", "param", "page_sizes", config={"page_sizes": 4})
    add("window-is-not-a-parameter", "param", "window_size_left", config={"window_size_left": 8})

    # ---- dtype
    add("q-fp32", "dtype", "q: expected", q={"dtype": "fp32"})
    add("q-e4m3", "dtype", "q: expected", q={"dtype": "e4m3"})
    add("k-new-differs", "dtype", "k_new: expected", k_new={"dtype": "fp16"})
    add("v-new-differs", "dtype", "v_new: expected", v_new={"dtype": "fp16"})
    add("pools-e4m3-without-cache-dtype", "dtype", "k_pages: expected", **e4m3_pools())
    add("k-pages-fp16-for-bf16", "dtype", "k_pages: expected", k_pages={"dtype": "fp16"}, v_pages={"dtype": "fp16"})
    add("v-pages-differs", "dtype", "v_pages: expected", v_pages={"dtype": "e4m3"})
    add("pools-bf16-for-e4m3-cache", "dtype", "k_pages: expected", config={"cache_dtype": "e4m3"})
    add("cache-dtype-fp16-for-bf16-q", "dtype", "cache_dtype: expected", config={"cache_dtype": "fp16"},
        k_pages={"dtype": "fp16"}, v_pages={"dtype": "fp16"})
    add("k-scale-bf16", "dtype", "k_scale: expected", k_scale={"dtype": "bf16"})
    add("v-scale-fp16-e4m3-cache", "dtype", "v_scale: expected", config={"cache_dtype": "e4m3"},
        v_scale={"dtype": "fp16"}, **e4m3_pools())
    add("cu-seqlens-q-int64", "dtype", "cu_seqlens_q: expected", cu_seqlens_q={"dtype": "int64"})
    add("cache-seqlens-int64", "dtype", "cache_seqlens: expected", cache_seqlens={"dtype": "int64"})
    add("block-table-int64", "dtype", "block_table: expected", block_table={"dtype": "int64"})
    add("o-fp16-for-bf16", "dtype", "o: expected", o={"dtype": "fp16"})
    add("o-fp32", "dtype", "o: expected", o={"dtype": "fp32"})

    # ---- args
    for n in ("q", "k_new", "v_new", "k_pages", "v_pages", "k_scale", "v_scale", "cu_seqlens_q", "cache_seqlens",
              "block_table", "o"):
        add(f"{n.replace('_', '-')}-missing", "args", f"{n}: expected", drop=(n,))
    add("k-scale-missing-16bit-cache", "args", "k_scale: expected", drop=("k_scale", "v_scale"))
    add("lse-is-not-an-output", "args", "lse: expected",
        lse={"shape": [6, 4], "dtype": "fp32", "init": dict(OUTB), "output": True})
    add("page-table-is-not-an-input", "args", "page_table: expected",
        page_table={"shape": [2, 3], "dtype": "int32", "init": values([0, 1, 2, 3, 4, 5])})
    add("rope-cos-is-not-an-input", "args", "rope_cos: expected", config=rope,
        rope_cos={"shape": [64, 32], "dtype": "bf16", "init": normal()})

    # ---- shape
    add("q-rank4", "shape", "q: expected", q={"shape": [1, 6, 4, 64]}, o={"shape": [1, 6, 4, 64]})
    add("k-new-rank2", "shape", "k_new: expected", k_new={"shape": [6, 128]})
    add("k-new-tokens-differ", "shape", "k_new: expected", k_new={"shape": [5, 2, 64]})
    add("v-new-heads-differ", "shape", "v_new: expected", v_new={"shape": [6, 1, 64]})
    add("k-new-d-differs", "shape", "k_new: expected", k_new={"shape": [6, 2, 128]})
    add("k-pages-rank4", "shape", "k_pages: expected", k_pages={"shape": [6, 4, 2, 64]},
        v_pages={"shape": [6, 4, 2, 64]})
    add("k-pages-pt-not-multiple", "shape", "k_pages: expected", k_pages={"shape": [22, 2, 64]},
        v_pages={"shape": [22, 2, 64]})
    add("v-pages-pt-differs", "shape", "v_pages: expected", v_pages={"shape": [20, 2, 64]})
    add("v-pages-heads-differ", "shape", "v_pages: expected", v_pages={"shape": [24, 1, 64]})
    add("k-pages-heads-differ-from-k-new", "shape", "k_pages: expected", k_pages={"shape": [24, 1, 64]},
        v_pages={"shape": [24, 1, 64]})
    add("k-pages-d-differs", "shape", "k_pages: expected", k_pages={"shape": [24, 2, 128]},
        v_pages={"shape": [24, 2, 128]})
    add("h-not-multiple-of-hkv", "shape", "k_new: expected H_kv dividing", q={"shape": [6, 3, 64]},
        o={"shape": [6, 3, 64]})
    for D in (96, 32, 512):
        add(f"d{D}", "shape", "q: expected", q={"shape": [6, 4, D]}, k_new={"shape": [6, 2, D]},
            v_new={"shape": [6, 2, D]}, k_pages={"shape": [24, 2, D]}, v_pages={"shape": [24, 2, D]},
            o={"shape": [6, 4, D]})
    add("rotary-dim-gt-d", "shape", "rotary_dim: expected", config=dict(rope, rotary_dim=66))
    add("k-scale-2", "shape", "k_scale: expected", k_scale={"shape": [2], "init": values([0.5, 0.5])})
    add("v-scale-rank2", "shape", "v_scale: expected", v_scale={"shape": [1, 1], "init": values([0.5])})
    add("k-scale-per-head-e4m3", "shape", "k_scale: expected", config={"cache_dtype": "e4m3"},
        k_scale={"shape": [2, 2], "init": values([0.5] * 4)}, **e4m3_pools())
    add("cu-seqlens-q-rank2", "shape", "cu_seqlens_q: expected",
        cu_seqlens_q={"shape": [3, 1], "init": values([0, 2, 6])})
    add("cu-seqlens-q-length-0", "shape", "cu_seqlens_q: expected", cu_seqlens_q={"shape": [0], "init": values([])})
    add("cache-seqlens-length", "shape", "cache_seqlens: expected",
        cache_seqlens={"shape": [3], "init": values([3, 5, 0])})
    add("cache-seqlens-rank2", "shape", "cache_seqlens: expected", cache_seqlens={"shape": [2, 1]})
    add("block-table-rank1", "shape", "block_table: expected", block_table={"shape": [6]})
    add("block-table-b-mismatch", "shape", "block_table: expected",
        block_table={"shape": [3, 2], "init": values([0, 1, 2, 3, 4, 5])})
    add("o-heads", "shape", "o: expected", o={"shape": [6, 2, 64]})
    add("o-tokens", "shape", "o: expected", o={"shape": [7, 4, 64]})
    add("o-rank2", "shape", "o: expected", o={"shape": [6, 256]})

    # ---- layout
    add("q-innermost-stride2", "layout", "q: expected", q={"shape": [6, 4, 64], "strides": [512, 128, 2]})
    add("k-new-head-stride-136-bytes", "layout", "k_new: expected", gpu_only=True,  # a device alignment rule
        k_new={"strides": [136, 68, 1]})
    add("v-new-innermost-stride2", "layout", "v_new: expected", v_new={"strides": [256, 128, 2]})
    add("k-pages-padded-not-contiguous", "layout", "k_pages: expected", k_pages={"strides": [144, 72, 1]})
    add("v-pages-row-stride-padded", "layout", "v_pages: expected", v_pages={"strides": [192, 64, 1]})
    add("o-not-contiguous", "layout", "o: expected", o={"strides": [512, 128, 1]})
    add("cu-seqlens-q-strided", "layout", "cu_seqlens_q: expected",
        cu_seqlens_q={"strides": [2], "init": values([0, 77, 2, 77, 6])})

    # ---- content (validate_inputs): the caller contract of SPEC.md §2.10
    v = {"validate_inputs": True}
    add("cu-seqlens-q-not-starting-at-0", "content", "cu_seqlens_q: expected", config=v,
        cu_seqlens_q={"init": values([1, 2, 6])})
    add("cu-seqlens-q-decreasing", "content", "cu_seqlens_q: expected", config=v,
        cu_seqlens_q={"init": values([0, 4, 2])})
    add("cu-seqlens-q-end-ne-tq", "content", "cu_seqlens_q: expected", config=v,
        cu_seqlens_q={"init": values([0, 2, 5])})
    add("q-len-above-max-seqlen-q", "content", "cu_seqlens_q: expected request lengths <= max_seqlen_q",
        config=dict(v, max_seqlen_q=3))
    add("cache-seqlens-negative", "content", "cache_seqlens: expected", config=v,
        cache_seqlens={"init": values([-1, 5])})
    add("old-plus-q-len-above-capacity", "content", "cache_seqlens: expected old + q_len <= W * page_size", config=v,
        cache_seqlens={"init": values([3, 9])})  # 9 + 4 > W * ps = 12
    add("block-table-entry-out-of-range", "content", "block_table: expected", config=v,
        block_table={"init": values([0, 6, 999999, 2, 3, 4])})  # 6 = PT / ps
    add("block-table-entry-negative", "content", "block_table: expected", config=v,
        block_table={"init": values([0, 1, 999999, 2, -1, 4])})
    add("written-rows-collide", "content", "block_table: expected the rows written by the call to be distinct",
        config=v, block_table={"init": values([0, 1, 999999, 2, 3, 1])})  # both append into row 4 (page 1, slot 0)
    add("written-row-read-by-other-request", "content", "block_table: expected no request to read", config=v,
        block_table={"init": values([0, 2, 999999, 2, 3, 4])})  # request 0 appends into request 1's cached page 2
    add("k-scale-zero-e4m3", "content", "k_scale: expected", config=dict(v, cache_dtype="e4m3"),
        k_scale={"init": values([0.0])}, **e4m3_pools())
    add("v-scale-nan-e4m3", "content", "v_scale: expected", config=dict(v, cache_dtype="e4m3"),
        v_scale={"init": values(["nan"])}, **e4m3_pools())
    add("k-scale-inf-e4m3", "content", "k_scale: expected", config=dict(v, cache_dtype="e4m3"),
        k_scale={"init": values(["inf"])}, **e4m3_pools())
    add("v-scale-negative-e4m3", "content", "v_scale: expected", config=dict(v, cache_dtype="e4m3"),
        v_scale={"init": values([-0.5])}, **e4m3_pools())
    add("position-beyond-max-position", "content", "cache_seqlens: expected old + q_len <= max_position",
        config=dict(v, fuse_rope=True, max_position=8))
    return cases


def main():
    args = case_args(__doc__, count=140).parse_args()
    grid, total = build_grid(args.count)
    write_cases(os.path.join(args.out_dir, "gpu", "gqa_prefill_paged_append_grid.json"), grid,
                extra=f"; reference cost bound {total:.3g} (sum of q_len * H * (old + q_len) * D)")
    small = build_small()
    write_cases(os.path.join(args.out_dir, "gpu", "gqa_prefill_paged_append_small.json"), small)
    errors = build_errors()
    write_cases(os.path.join(args.out_dir, "gqa_prefill_paged_append_errors.json"), errors)
    return 0


if __name__ == "__main__":
    sys.exit(main())
