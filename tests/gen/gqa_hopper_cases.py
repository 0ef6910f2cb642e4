#!/usr/bin/env python3
"""Test cases for the hopper backend of gqa_fwd and gqa_varlen_fwd: every case of the portable grid and
small set (tests/gen/gqa_cases.py) that the hopper kernel serves (fp16/bf16 q/k/v with the output in the
same dtype, D in {64, 128, 256}, no RoPE, k/v strides multiples of 16 bytes and non-zero), with
`"backend": "hopper"` in its config, plus extra shapes that stress the kernel's own tiling (128-row
query tiles, 128-key TMA boxes, two-stage ring): long sequences, every group size 1..16, lengths around
multiples of 64 and 128. Standard library only; deterministic.

Writes tests/cases/gpu/gqa_hopper_grid.json and tests/cases/gpu/gqa_hopper_small.json (the small set for
compute-sanitizer). Run tests/gen/gqa_cases.py first (this reads its outputs).

Usage: python3 tests/gen/gqa_hopper_cases.py [--out-dir tests/cases]
"""
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from casegen_common import case_args, derive_cases, pinned_to  # noqa: E402


def strides_ok(t):
    st = t.get("strides")
    if st is None:
        return True
    return all(s != 0 and (s * 2) % 16 == 0 for s in st[:-1]) and st[-1] == 1


def eligible(case):
    cfg = case["config"]
    if cfg.get("pos_encoding_mode", "none") != "none":
        return False
    t = case["tensors"]
    if t["q"]["dtype"] not in ("fp16", "bf16") or "out_dtype" in cfg:
        return False
    if t["q"]["shape"][-1] not in (64, 128, 256):
        return False
    return strides_ok(t["k"]) and strides_ok(t["v"])


def extra_cases(rng):
    """Dense and packed shapes aimed at the hopper kernel's tiles."""
    out = []
    seed = 90000
    for i in range(100):
        varlen = i % 2 == 1
        dt = rng.choice(["fp16", "bf16"])
        D = rng.choice([64, 128, 128, 256])
        g = rng.choice([1, 2, 3, 4, 5, 8, 16])
        hkv = rng.choice([1, 2])
        H = g * hkv
        causal = rng.random() < 0.5
        lens = [rng.choice([1, 63, 64, 65, 127, 128, 129, 255, 256, 257, 500, 1024, 2049]) for _ in range(3)]
        cfg = {"is_causal": causal}
        if rng.random() < 0.25:
            cfg["window_size_left"] = rng.choice([0, 63, 200])
        if rng.random() < 0.2:
            cfg["softcap"] = 30.0
        cfg["backend"] = "hopper"
        tol = 1e-2 if dt == "bf16" else 5e-3
        init = {"kind": "normal", "mean": 0.0, "std": 1.0}
        if varlen:
            ql = [rng.choice([0, 1, 65, 128, 300]) for _ in range(3)]
            kl = [max(q, l) for q, l in zip(ql, lens)]
            cq, ck = [0], [0]
            for a, b_ in zip(ql, kl):
                cq.append(cq[-1] + a)
                ck.append(ck[-1] + b_)
            tq, tk = cq[-1], ck[-1]
            tensors = {
                "q": {"shape": [tq, H, D], "dtype": dt, "init": init},
                "k": {"shape": [tk, hkv, D], "dtype": dt, "init": init},
                "v": {"shape": [tk, hkv, D], "dtype": dt, "init": init},
                "cu_seqlens_q": {"shape": [4], "dtype": "int32", "init": {"kind": "values", "values": cq}},
                "cu_seqlens_kv": {"shape": [4], "dtype": "int32", "init": {"kind": "values", "values": ck}},
                "o": {"shape": [tq, H, D], "dtype": dt, "init": {"kind": "poison"}, "output": True},
            }
            op = "gqa_varlen_fwd"
            name = f"hopper/extra/varlen/{dt}/d{D}/h{H}kv{hkv}/{'causal' if causal else 'full'}/q{ql}/kv{kl}"
        else:
            B = rng.choice([1, 2])
            skv = lens[0]
            sq = rng.choice([skv, max(1, skv // 2), 1]) if causal else lens[1]
            tensors = {
                "q": {"shape": [B, sq, H, D], "dtype": dt, "init": init},
                "k": {"shape": [B, skv, hkv, D], "dtype": dt, "init": init},
                "v": {"shape": [B, skv, hkv, D], "dtype": dt, "init": init},
                "o": {"shape": [B, sq, H, D], "dtype": dt, "init": {"kind": "poison"}, "output": True},
                "lse": {"shape": [B, H, sq], "dtype": "fp32", "init": {"kind": "poison"}, "output": True},
            }
            op = "gqa_fwd"
            name = f"hopper/extra/dense/{dt}/d{D}/h{H}kv{hkv}/{'causal' if causal else 'full'}/b{B}-sq{sq}-skv{skv}"
        compare = {"o": {"mode": "rel_l2", "tol": tol}}
        if "lse" in tensors:
            compare["lse"] = {"mode": "lse"}
        out.append({"name": name + f"/#{i}", "op": op, "config": cfg, "seed": seed + i, "tensors": tensors,
                    "compare": compare, "gpu_only": True})
    return out


def main():
    args = case_args(__doc__).parse_args()
    derive_cases(os.path.join(args.out_dir, "gpu"),
                 [("gqa_grid.json", "gqa_hopper_grid.json"), ("gqa_small.json", "gqa_hopper_small.json")], eligible,
                 pinned_to, lambda dst: extra_cases(random.Random(0x40FF)) if dst == "gqa_hopper_grid.json" else [])


if __name__ == "__main__":
    main()
