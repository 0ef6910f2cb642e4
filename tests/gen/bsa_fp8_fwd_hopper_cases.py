#!/usr/bin/env python3
"""Test cases for the hopper backend of bsa_fp8_fwd (the FP8 wgmma attention): every case of the portable
bsa_fp8_fwd grid and small set (tests/gen/bsa_fwd_cases.py) with `"backend": "hopper"`, plus issue-like
shapes (long rows of active 64-key blocks, many query blocks, N(0, 0.5^2) and N(0, 1) inputs). Standard
library only; deterministic.

Writes tests/cases/gpu/bsa_fp8_fwd_hopper_{grid,small}.json.
Run tests/gen/bsa_fwd_cases.py first (this reads its outputs).

Usage: python3 tests/gen/bsa_fp8_fwd_hopper_cases.py [--out-dir tests/cases]
"""
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from casegen_common import case_args, derive_cases, pinned_to  # noqa: E402
from bsa_fwd_cases import fp8_case  # noqa: E402


def fp8_extra_cases(rng, count):
    out = []
    for i in range(count):
        S_q = rng.choice([1000, 2048, 4096])
        S_kv = rng.choice([2048, 4100, 8192])
        N_kv = (S_kv + 63) // 64
        K_max = rng.randint(8, min(32, N_kv))
        counts = rng.choice(["fixed", "variable"])
        fixed = rng.randint(1, K_max) if counts == "fixed" else None
        B, H = rng.choice([(1, 1), (1, 2), (2, 1)])
        std = rng.choice([0.5, 1.0])
        c = fp8_case(f"bsa-fp8-fwd-extra/{i:03d}/h{H}/b{B}/sq{S_q}-skv{S_kv}/{counts}{K_max}/std{std}", 96000 + i, rng,
                     B=B, H=H, S_q=S_q, S_kv=S_kv, counts=counts, K_max=K_max, fixed=fixed, empty=False, rank=0,
                     short=False, validate=False, std=std)
        out.append(pinned_to(c))
    return out


def main():
    args = case_args(__doc__).parse_args()
    rng8 = random.Random(0xB5A8)
    derive_cases(os.path.join(args.out_dir, "gpu"),
                 [("bsa_fp8_fwd_grid.json", "bsa_fp8_fwd_hopper_grid.json"),
                  ("bsa_fp8_fwd_small.json", "bsa_fp8_fwd_hopper_small.json")],
                 lambda c: c["op"] == "bsa_fp8_fwd", pinned_to,
                 lambda dst: fp8_extra_cases(rng8, 12 if dst == "bsa_fp8_fwd_hopper_grid.json" else 0))


if __name__ == "__main__":
    main()
