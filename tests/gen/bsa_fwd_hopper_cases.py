#!/usr/bin/env python3
"""Test cases for the hopper backend of bsa_fwd: every case of the portable grid and small set
(tests/gen/bsa_fwd_cases.py) that the hopper kernel serves (sparse block size 64 or 128, D = D_v in {64, 128}),
with `"backend": "hopper"` in its config and kv_splits dropped (the hopper kernel takes a whole query
block per CTA; kv_splits never changes results beyond rounding), plus extra issue-like shapes: many
query blocks, GQA, long rows of active blocks, short final blocks. Standard library only; deterministic.

Writes tests/cases/gpu/bsa_fwd_hopper_{grid,small}.json.
Run tests/gen/bsa_fwd_cases.py first (this reads its outputs).

Usage: python3 tests/gen/bsa_fwd_hopper_cases.py [--out-dir tests/cases]
"""
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from casegen_common import case_args, derive_cases, pinned_to  # noqa: E402


def eligible(case):
    t = case["tensors"]
    return (case["config"].get("sparse_block_size") in (64, 128) and t["k"]["shape"][-1] == t["v"]["shape"][-1]
            and t["k"]["shape"][-1] in (64, 128))


def hopperise(case):  # kv_splits dropped: one CTA takes a whole query block
    return pinned_to(case, drop=("kv_splits",))


def extra_cases(rng, count):
    out = []
    for i in range(count):
        dt = rng.choice(["fp16", "bf16"])
        D = rng.choice([64, 128])
        layout = rng.choice(["bhsd", "bshd"])
        g = rng.choice([1, 1, 2, 4])
        hkv = rng.choice([1, 2])
        H = g * hkv
        B = rng.choice([1, 2])
        bs = rng.choice([64, 128])
        S_q = rng.choice([128, 300, 1024, 2000])
        S_kv = rng.choice([128, 129, 1000, 2048, 4000])
        N_q, N_kv = (S_q + bs - 1) // bs, (S_kv + bs - 1) // bs
        K_max = rng.randint(1, N_kv)
        variable = rng.random() < 0.5
        idx, nums = [], []
        for _ in range(B * H * N_q):
            n = rng.randint(0 if variable else K_max, K_max) if variable else K_max
            blocks = rng.sample(range(N_kv), K_max)
            idx += blocks
            nums.append(n)
        init = {"kind": "normal", "mean": 0.0, "std": 1.0}

        def shp(h, s, d):
            return [B, h, s, d] if layout == "bhsd" else [B, s, h, d]

        tensors = {
            "q": {"shape": shp(H, S_q, D), "dtype": dt, "init": init},
            "k": {"shape": shp(hkv, S_kv, D), "dtype": dt, "init": init},
            "v": {"shape": shp(hkv, S_kv, D), "dtype": dt, "init": init},
            "q2k_block_index": {"shape": [B, H, N_q, K_max], "dtype": "int32", "init": {"kind": "values", "values": idx}},
        }
        config = {"layout": layout, "sparse_block_size": bs, "backend": "hopper"}
        if variable:
            tensors["q2k_block_nums"] = {"shape": [B, H, N_q], "dtype": "int32", "init": {"kind": "values", "values": nums}}
            config["allow_empty_block_nums"] = True
        tensors["o"] = {"shape": shp(H, S_q, D), "dtype": dt, "init": {"kind": "poison"}, "output": True}
        tensors["lse"] = {"shape": [B, H, S_q], "dtype": "fp32", "init": {"kind": "poison"}, "output": True}
        compare = {"o": {"mode": "rel_l2", "tol": 1e-2 if dt == "bf16" else 5e-3}, "lse": {"mode": "lse"}}
        name = (f"hopper/bsa-fwd-extra/{i:03d}/{dt}/{layout}/bs{bs}/d{D}/h{H}kv{hkv}/b{B}/sq{S_q}-skv{S_kv}/"
                f"{'variable' if variable else 'fixed'}{K_max}")
        out.append({"name": name, "op": "bsa_fwd", "config": config, "seed": 95000 + i, "tensors": tensors,
                    "compare": compare, "gpu_only": True})
    return out


def main():
    args = case_args(__doc__).parse_args()
    rng = random.Random(0xB5A0)
    derive_cases(os.path.join(args.out_dir, "gpu"),
                 [("bsa_fwd_grid.json", "bsa_fwd_hopper_grid.json"), ("bsa_fwd_small.json", "bsa_fwd_hopper_small.json")],
                 eligible, hopperise, lambda dst: extra_cases(rng, 40 if dst == "bsa_fwd_hopper_grid.json" else 0))


if __name__ == "__main__":
    main()
