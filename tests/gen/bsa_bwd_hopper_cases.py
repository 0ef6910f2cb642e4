#!/usr/bin/env python3
"""Test cases for the hopper backend of bsa_bwd: every case of the portable grid and small set
(tests/gen/bsa_bwd_cases.py; the hopper main kernel serves every shape the op accepts) with
`"backend": "hopper"` in its config, plus longer issue-like shapes (many key blocks per row, many query
blocks per key block, GQA, both block sizes, short final blocks). Standard library only; deterministic.

Writes tests/cases/gpu/bsa_bwd_hopper_grid.json and tests/cases/gpu/bsa_bwd_hopper_small.json. Run
tests/gen/bsa_bwd_cases.py first (this reads its outputs).

Usage: python3 tests/gen/bsa_bwd_hopper_cases.py [--out-dir tests/cases]
"""
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from casegen_common import case_args, derive_cases, pinned_to  # noqa: E402
from bsa_bwd_cases import build_case  # noqa: E402


def extra_cases(count):
    rng = random.Random(0xB5AB + 7)
    out = []
    for i in range(count):
        bs = rng.choice([64, 128])
        D = rng.choice([64, 128, 128])
        H_kv = rng.choice([1, 2])
        H = H_kv * rng.choice([1, 2, 4])
        S_q = rng.choice([1024, 1500, 2048])
        S_kv = rng.choice([1024, 1900, 2048])
        N_kv = -(-S_kv // bs)
        K_max = rng.randint(2, min(N_kv, 6))
        counts = rng.choice(["fixed", "variable"])
        dtype = rng.choice(["fp16", "bf16"])
        layout = rng.choice(["bhsd", "bshd"])
        sizes_rank = rng.choice([0, 0, 1, 3])
        name = (f"hopper/bsa-bwd-extra/{i:03d}/{dtype}/{layout}/bs{bs}/d{D}/h{H}kv{H_kv}/sq{S_q}-skv{S_kv}/"
                f"kmax{K_max}-{counts}/sizes-r{sizes_rank}")
        out.append(build_case(name, 91000 + i, dtype=dtype, layout=layout, bs=bs, B=1, H=H, H_kv=H_kv, S_q=S_q,
                              S_kv=S_kv, D=D, K_max=K_max, counts=counts, fixed=K_max, sizes_rank=sizes_rank,
                              rng=rng, backend="hopper"))
    return out


def main():
    args = case_args(__doc__).parse_args()
    gpu = os.path.join(args.out_dir, "gpu")
    derive_cases(gpu, [("bsa_bwd_grid.json", "bsa_bwd_hopper_grid.json"), ("bsa_bwd_small.json", "bsa_bwd_hopper_small.json")],
                 lambda c: True, pinned_to, lambda dst: extra_cases(16) if dst.endswith("grid.json") else [])


if __name__ == "__main__":
    main()
