#!/usr/bin/env python3
"""Test cases for the split-KV decode path on the hopper backend (templates/paged/paged_decode_hopper.cuh)
in the `attnjit test` format: decode-like calls (at most 16 query rows per request on average) that the
kernel serves. gqa_paged_fwd cases say `"backend": "hopper"`, so a call it did not serve fails instead of
running elsewhere; mha_decode_paged cases (an explicit 'hopper' refuses that op, whose prefill path has no
hopper kernel) say `"backend": "auto"` and are drawn only from shapes the kernel serves, so on an sm_90a
GPU they run it. Built with tests/gen/paged_attention_cases.py's case builder (garbage pools,
scattered and shared pages, out-of-range table entries past each request's pages, poisoned output), drawn
for this kernel:

  fp16 / bf16, D 64 / 128, H_kv 1 / 2 / 4 / 8 and 16 / 24 / 32 (CTAs of eight heads each), group sizes
  1, 2, 3, 4, 5, 6, 8, 16 (rows of a tile cross
  queries when 16 % g != 0), page sizes 16, 32, 48, 64, 128, 256 (multiples of 16, also not powers of two),
  1..8 requests with q_len in {0, 1, 1, 1, 2, 3} (at most 16 / g), kv_len in {q_len .. 20000} with the page
  edges (PS - 1, PS, PS + 1), the 16-key chunk edges (15, 16, 17) and long contexts (many splits: the
  combine's multi-warp rows); causal or not, windows, softcap, sinks, sm_scale, padded strides on q and
  the pools. mha_decode_paged: H = H_kv 1..32 as above, S_q 1, 2, 3, 7, 16, lengths 0 (an empty cache),
  1, 15, 16, 17, PS - 1, PS, PS + 1, 1000, 4097, causal or not.

Writes tests/cases/gpu/paged_hopper_decode_grid.json (GPU grid) and tests/cases/gpu/
paged_hopper_decode_small.json (short cases, all pools with random-byte garbage, for compute-sanitizer).
Standard library only; deterministic.

Usage: python3 tests/gen/paged_hopper_decode_cases.py [--out-dir tests/cases] [--count N]
"""
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from casegen_common import case_args, weighted, write_cases  # noqa: E402
from paged_attention_cases import build_case, draw_16bit, draw_layout  # noqa: E402

SEED = 0x4D3C0
MAX_POOL_ELEMENTS = 12 * 1024 * 1024  # per pool
SMALL_POOL_ELEMENTS = 40_000          # per pool of a small case (its garbage bits are spelled out)
GARBAGE_BUDGET = 600_000
GARBAGE_CASE_MAX = 60_000


def draw_decode(rng, small):
    d = draw_16bit(rng, "gqa_paged_fwd", [64, 128], [16, 16, 32, 48, 64, 64, 128, 256] if not small else [16, 32, 48])
    d.H_kv = rng.choice([1, 2, 4, 8, 8, 16, 24, 32])
    g = rng.choice([1, 2, 3, 4, 4, 5, 6, 8, 16] if d.H_kv <= 8 else [1, 2])
    d.H = g * d.H_kv
    d.causal = rng.random() < 0.6
    wkind = weighted(rng, [("none", 0.55), ("left", 0.25), ("right", 0.05), ("both", 0.15)])
    wvals = [0, 1, 7, 16, 63, 100, 511, 3000]
    d.wl = rng.choice(wvals) if wkind in ("left", "both") else -1
    d.wr = rng.choice(wvals) if wkind in ("right", "both") else -1
    d.softcap = rng.choice([20.0, 50.0]) if rng.random() < 0.25 else 0.0
    d.rope, d.R = None, None
    d.sinks = weighted(rng, [(None, 0.55), ("finite", 0.25), ("neginf", 0.1), ("posinf", 0.1)])
    d.scales = None
    d.std = 3.0 if rng.random() < 0.15 else 1.0
    d.sm_scale = rng.choice([0.05, 0.3]) if rng.random() < 0.07 else None
    draw_layout(d, rng)
    qmax = max(1, 16 // g)
    for _ in range(200):
        nreq = rng.randint(1, 8 if not small else 3)
        reqs = []
        for _ in range(nreq):
            ql = min(rng.choice([0, 1, 1, 1, 2, 3]), qmax)
            kv_opts = [1, 15, 16, 17, d.PS - 1, d.PS, d.PS + 1, 100, 1000, 4097, 20000]
            if small:
                kv_opts = [1, 15, 16, 17, d.PS - 1, d.PS, d.PS + 1, 70]
            kl = max(rng.choice(kv_opts), ql)
            reqs.append((ql, kl))
        pool = (sum((k + d.PS - 1) // d.PS for _, k in reqs) + 3) * d.PS * d.H_kv * d.D
        if pool <= (SMALL_POOL_ELEMENTS if small else MAX_POOL_ELEMENTS):
            break
        if d.H_kv > 1:
            d.H_kv = d.H_kv // 2 if d.H_kv <= 8 or d.H_kv % 16 == 0 else 8
            d.H = g * d.H_kv
    else:
        reqs = [(min(q, 17), 17) for q, _ in reqs]
    d.reqs = reqs
    d.lens = [k for _, k in reqs]
    return d


def draw_mha_decode(rng, small):
    d = draw_16bit(rng, "mha_decode_paged", [64, 128], [16, 32, 48, 64, 128] if not small else [16, 32])
    d.H = d.H_kv = rng.choice([1, 2, 4, 8, 16, 24, 32] if not small else [2, 8, 16])
    d.causal = rng.random() < 0.5
    d.S_q = rng.choice([1, 1, 1, 2, 3, 7, 16] if not small else [1, 2, 3])
    d.std = 3.0 if rng.random() < 0.15 else 1.0
    draw_layout(d, rng)
    for _ in range(200):
        nreq = rng.randint(1, 6 if not small else 3)
        opts = [0, 1, 15, 16, 17, d.PS - 1, d.PS, d.PS + 1, 1000, 4097] if not small else [0, 1, 15, 17, d.PS + 1, 40]
        d.lens = [rng.choice(opts) for _ in range(nreq)]
        pool = (sum((k + d.PS - 1) // d.PS for k in d.lens) + 3) * d.PS * d.H * d.D
        if pool <= (SMALL_POOL_ELEMENTS if small else MAX_POOL_ELEMENTS):
            break
        if d.H > 8:
            d.H = d.H_kv = d.H // 2 if d.H % 16 == 0 else 8
    return d


def build(count, small, n_mha):
    rng = random.Random(SEED + (7 if small else 0))
    cases, garbage_left = [], GARBAGE_BUDGET if not small else 10 ** 9
    for idx in range(count + n_mha):
        if idx >= count:
            d = draw_mha_decode(rng, small)
            case, _, used = build_case(rng, d, idx, (9950 if small else 42000) + idx, garbage_left,
                                       name_prefix="hopper-decode-auto/" if not small else "small/hopper-decode-auto/",
                                       garbage_case_max=GARBAGE_CASE_MAX if not small else 10 ** 9)
            case["config"]["backend"] = "auto"
            assert d.S_q <= 16 and d.H % 8 == 0 or d.H in (1, 2, 4), case["name"]
            cases.append(case)
            garbage_left -= used
            continue
        d = draw_decode(rng, small)
        case, _, used = build_case(rng, d, idx, (9900 if small else 41000) + idx, garbage_left,
                                   name_prefix="hopper-decode/" if not small else "small/hopper-decode/",
                                   garbage_case_max=GARBAGE_CASE_MAX if not small else 10 ** 9)
        case["config"]["backend"] = "hopper"
        T, G = sum(q for q, _ in d.reqs), d.H // d.H_kv
        assert T * G <= 16 * len(d.reqs), case["name"]  # decode-like
        cases.append(case)
        garbage_left -= used
    return cases


def main():
    args = case_args(__doc__, count=160).parse_args()
    write_cases(os.path.join(args.out_dir, "gpu", "paged_hopper_decode_grid.json"), build(args.count, False, 60))
    small = build(10, True, 4)
    # Two CTAs per query tile (H_kv = 16: head groups of eight) under the sanitizers too.
    rng = random.Random(SEED + 11)
    for idx, op in ((14, "gqa_paged_fwd"), (15, "mha_decode_paged")):
        d = draw_decode(rng, True) if op == "gqa_paged_fwd" else draw_mha_decode(rng, True)
        d.D, d.PS, d.H_kv, d.H, d.share, d.pool_strided = 64, 16, 16, 16, False, False
        if op == "gqa_paged_fwd":
            d.reqs, d.lens = [(1, 17), (2, 5)], [17, 5]
        else:
            d.S_q, d.lens = 2, [17, 5]
        case, _, _ = build_case(rng, d, idx, 9990 + idx, 10 ** 9, name_prefix="small/hopper-decode-h16/",
                                garbage_case_max=10 ** 9, spare=0)
        case["config"]["backend"] = "hopper" if op == "gqa_paged_fwd" else "auto"
        small.append(case)
    write_cases(os.path.join(args.out_dir, "gpu", "paged_hopper_decode_small.json"), small)
    return 0


if __name__ == "__main__":
    sys.exit(main())
