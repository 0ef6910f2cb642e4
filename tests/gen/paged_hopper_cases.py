#!/usr/bin/env python3
"""Test cases for the hopper backend of gqa_paged_fwd (its prefill path: templates/dense/gqa_fwd_hopper.cuh
with paged keys): every case of the portable paged grid and small set (tests/gen/paged_attention_cases.py) that the
hopper kernel serves (gqa_paged_fwd, fp16 / bf16 q with pools and output in the same dtype, no RoPE, D 64 /
128 / 256, and not decode-like: more than 16 query rows per request on average, T_q * H / H_kv > 16 * B)
with `"backend": "hopper"` in its config. Standard library only; deterministic.

Writes tests/cases/gpu/paged_hopper_grid.json and tests/cases/gpu/paged_hopper_small.json. Run
tests/gen/paged_attention_cases.py first (this reads its outputs).

Usage: python3 tests/gen/paged_hopper_cases.py [--out-dir tests/cases]
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from casegen_common import case_args, derive_cases, pinned_to  # noqa: E402


def eligible(case):
    if case["op"] != "gqa_paged_fwd":
        return False
    t, cfg = case["tensors"], case["config"]
    q = t["q"]
    if q["dtype"] not in ("fp16", "bf16") or t["k_pages"]["dtype"] != q["dtype"] or t["o"]["dtype"] != q["dtype"]:
        return False
    if cfg.get("pos_encoding_mode", "none") != "none" or q["shape"][-1] not in (64, 128, 256):
        return False
    T, H, H_kv, B = q["shape"][0], q["shape"][1], t["k_pages"]["shape"][2], t["cu_seqlens_q"]["shape"][0] - 1
    return T * (H // H_kv) > 16 * B


def main():
    args = case_args(__doc__).parse_args()
    derive_cases(os.path.join(args.out_dir, "gpu"),
                 [("paged_attention_grid.json", "paged_hopper_grid.json"),
                  ("paged_attention_small.json", "paged_hopper_small.json")], eligible, pinned_to)


if __name__ == "__main__":
    main()
