#!/usr/bin/env python3
"""Test cases for the hopper backend of gqa_fwd and gqa_varlen_fwd: every case of the portable grid and
small set (tests/gen/gqa_cases.py) that the hopper kernel serves (fp16/bf16 q/k/v with the output in the
same dtype, D in {64, 128, 256}, no RoPE, k/v strides multiples of 16 bytes and non-zero), with
`"backend": "hopper"` in its config, plus extra shapes that stress the kernel's own tiling (128-row
query tiles, 128-key TMA boxes, two-stage ring): long sequences, every group size 1..16, lengths around
multiples of 64 and 128. Standard library only; deterministic.

Both files also hold groups of 32 to 256 heads a KV head for the Q boxes the producer loads by TMA
(q_tma_cases), and shapes aimed at the persistent scheduler (persistent_cases): 3 x 132 + 1 work tiles,
fewer tiles than SMs, many causal query tiles, two L2 sections, ragged batches of 45 requests; the small
set a few with 2-3 work tiles a CTA for the sanitizers.

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


INIT = {"kind": "normal", "mean": 0.0, "std": 1.0}
POISON = {"kind": "poison"}


def dense_tensors(dt, D, B, sq, skv, H, hkv):
    """q, k, v, o and lse of a dense BSHD call (o and lse poisoned outputs)."""
    return {
        "q": {"shape": [B, sq, H, D], "dtype": dt, "init": INIT},
        "k": {"shape": [B, skv, hkv, D], "dtype": dt, "init": INIT},
        "v": {"shape": [B, skv, hkv, D], "dtype": dt, "init": INIT},
        "o": {"shape": [B, sq, H, D], "dtype": dt, "init": POISON, "output": True},
        "lse": {"shape": [B, H, sq], "dtype": "fp32", "init": POISON, "output": True},
    }


def varlen_tensors(dt, D, ql, kl, H, hkv):
    """q, k, v, cu_seqlens_q / _kv, o and lse of a packed call over requests of ql query and kl key tokens."""
    cq, ck = [0], [0]
    for a, b_ in zip(ql, kl):
        cq.append(cq[-1] + a)
        ck.append(ck[-1] + b_)
    return {
        "q": {"shape": [cq[-1], H, D], "dtype": dt, "init": INIT},
        "k": {"shape": [ck[-1], hkv, D], "dtype": dt, "init": INIT},
        "v": {"shape": [ck[-1], hkv, D], "dtype": dt, "init": INIT},
        "cu_seqlens_q": {"shape": [len(cq)], "dtype": "int32", "init": {"kind": "values", "values": cq}},
        "cu_seqlens_kv": {"shape": [len(ck)], "dtype": "int32", "init": {"kind": "values", "values": ck}},
        "o": {"shape": [cq[-1], H, D], "dtype": dt, "init": POISON, "output": True},
        "lse": {"shape": [cq[-1], H], "dtype": "fp32", "init": POISON, "output": True},
    }


# The persistent kernel's grid (gqa_fwd / gqa_varlen_fwd on the hopper backend): at most one CTA per SM
# (132 on an H100 SXM or H200) walks work tiles blockIdx.x + k * gridDim.x; dense causal calls take the
# (batch, KV head) pairs in L2 sections of 32 MiB of K and V.
SMS = 132


def persistent_cases(rng, small=False):
    """Shapes aimed at the persistent scheduler: 3 x SMS + 1 work tiles (the first CTA takes four, every
    ring stage wraps its phase across work tiles), fewer tiles than SMs, causal calls with many query
    tiles, two L2 sections (the last partial), and ragged packed batches of more than 32 requests (two
    passes of the warp's tile scan) with empty requests."""
    out = []

    def dense(name, dt, D, B, sq, skv, H, hkv, cfg, seed):
        tensors = dense_tensors(dt, D, B, sq, skv, H, hkv)
        tol = 1e-2 if dt == "bf16" else 5e-3
        out.append({"name": f"hopper/persistent/dense/{name}/{dt}/d{D}/b{B}-sq{sq}-skv{skv}-h{H}kv{hkv}",
                    "op": "gqa_fwd", "config": dict(cfg, backend="hopper"), "seed": seed, "tensors": tensors,
                    "compare": {"o": {"mode": "rel_l2", "tol": tol}, "lse": {"mode": "lse"}}, "gpu_only": True})

    def varlen(name, dt, D, ql, kl, H, hkv, cfg, seed, sinks=False):
        tensors = varlen_tensors(dt, D, ql, kl, H, hkv)
        tq, tkv = tensors["q"]["shape"][0], tensors["k"]["shape"][0]
        if sinks:
            tensors["sinks"] = {"shape": [H], "dtype": "fp32",
                                "init": {"kind": "values", "values": [round(rng.uniform(-2.0, 6.0), 3) for _ in range(H)]}}
        tol = 1e-2 if dt == "bf16" else 5e-3
        out.append({"name": f"hopper/persistent/varlen/{name}/{dt}/d{D}/n{len(ql)}-tq{tq}-tkv{tkv}-h{H}kv{hkv}",
                    "op": "gqa_varlen_fwd", "config": dict(cfg, backend="hopper"), "seed": seed, "tensors": tensors,
                    "compare": {"o": {"mode": "rel_l2", "tol": tol}, "lse": {"mode": "lse"}}, "gpu_only": True})

    if small:
        # For compute-sanitizer: 2-3 work tiles a CTA, little arithmetic (racecheck / synccheck see the Q
        # reload, the ring carried across work tiles and the ping-pong turns across them).
        dense("sanitizer-300-tiles-causal", "bf16", 128, 1, 64, 300, 300, 300, {"is_causal": True}, 92000)
        dense("sanitizer-300-tiles", "bf16", 64, 1, 64, 300, 300, 300, {"is_causal": False}, 92001)
        ql = [rng.choice([0, 1, 65, 128, 200]) for _ in range(40)]
        varlen("sanitizer-ragged-40", "fp16", 256, ql, [q + rng.choice([0, 70]) for q in ql], 8, 8, {"is_causal": True},
               92002)
        return out
    seed = 91000
    n = 3 * SMS + 1  # work tiles: one query tile per (batch, KV head) pair
    # 3 x SMS + 1 tiles of 3 (D 128), 6 (D 64, 192-row tiles) and 5 (D 256, 64-key tiles) key tiles each.
    dense("tiles-3sm+1", "bf16", 128, 1, 100, 300, n, n, {"is_causal": False}, seed)
    dense("tiles-3sm+1-causal", "fp16", 128, 1, 128, 384, n, n, {"is_causal": True}, seed + 1)
    dense("tiles-3sm+1-causal", "bf16", 64, 1, 150, 700, n, n, {"is_causal": True}, seed + 2)
    dense("tiles-3sm+1", "bf16", 256, 1, 100, 300, n, n, {"is_causal": False}, seed + 3)
    # Fewer tiles than SMs: one CTA, a few.
    dense("one-tile", "bf16", 128, 1, 1, 1, 1, 1, {"is_causal": True}, seed + 4)
    dense("few-tiles", "fp16", 64, 2, 200, 200, 6, 3, {"is_causal": False}, seed + 5)
    # Causal with many query tiles (longest first) and a group of 4: 512 work tiles.
    dense("many-query-tiles", "bf16", 128, 2, 1024, 1024, 32, 8, {"is_causal": True}, seed + 6)
    dense("many-query-tiles-window-softcap", "bf16", 128, 1, 2048, 2048, 8, 4,
          {"is_causal": True, "window_size_left": 300, "softcap": 30.0}, seed + 7)
    # Two L2 sections at D 256, S 1024 (1 MiB of K and V a pair, 32 a section): 33 pairs, the last alone.
    dense("two-l2-sections", "bf16", 256, 3, 1024, 1024, 11, 11, {"is_causal": True}, seed + 8)
    # Ragged packed batches of 45 requests (two passes of the warp's scan), some empty.
    lens = [0, 1, 7, 64, 127, 128, 129, 191, 192, 193, 300, 700]
    for i, (dt, D, H, hkv, causal, sinks) in enumerate([("bf16", 128, 8, 2, True, False), ("fp16", 64, 12, 4, False, True),
                                                        ("bf16", 64, 6, 2, True, True), ("bf16", 256, 4, 4, True, False)]):
        ql = [rng.choice(lens) for _ in range(45)]
        kl = [q + rng.choice([0, 0, 5, 200]) for q in ql]
        cfg = {"is_causal": causal}
        if i == 3:
            cfg["window_size_left"] = 100
        varlen("ragged-45", dt, D, ql, kl, H, hkv, cfg, seed + 10 + i, sinks=sinks)
    return out


def q_tma_cases(small=False):
    """Large groups for the Q boxes the producer loads by TMA (min(g, 64) heads x 64 / min(g, 64) query
    rows a box; g 128 and 256: 64 heads of one query a box, two or four boxes a query): dense and packed,
    tiles that run past the queries (a zero-filled or next-request box)."""
    out = []
    seed = 93000
    shapes = [  # (packed, dtype, D, H, H_kv, causal, dense (B, S_q, S_kv) or packed (q lens, kv lens))
        (False, "bf16", 128, 64, 1, True, (2, 100, 100)),
        (False, "fp16", 64, 128, 1, False, (1, 33, 70)),
        (False, "bf16", 256, 256, 1, True, (1, 5, 5)),
        (False, "bf16", 128, 64, 2, False, (2, 1, 129)),
        (True, "bf16", 128, 64, 2, True, ([1, 5, 70], [1, 40, 70])),
        (True, "fp16", 256, 128, 1, True, ([3, 0, 2], [3, 0, 9])),
        (True, "bf16", 64, 32, 1, False, ([7, 64, 1], [100, 64, 1])),
    ]
    if small:
        shapes = [shapes[0], shapes[5]]
    for i, (packed, dt, D, H, hkv, causal, dims) in enumerate(shapes):
        tol = 1e-2 if dt == "bf16" else 5e-3
        if packed:
            tensors = varlen_tensors(dt, D, dims[0], dims[1], H, hkv)
            op, name = "gqa_varlen_fwd", f"hopper/q-tma/varlen/{dt}/d{D}/h{H}kv{hkv}/q{dims[0]}/kv{dims[1]}"
        else:
            B, sq, skv = dims
            tensors = dense_tensors(dt, D, B, sq, skv, H, hkv)
            op, name = "gqa_fwd", f"hopper/q-tma/dense/{dt}/d{D}/h{H}kv{hkv}/b{B}-sq{sq}-skv{skv}"
        out.append({"name": f"{name}/{'causal' if causal else 'full'}", "op": op,
                    "config": {"is_causal": causal, "backend": "hopper"}, "seed": seed + i, "tensors": tensors,
                    "compare": {"o": {"mode": "rel_l2", "tol": tol}, "lse": {"mode": "lse"}}, "gpu_only": True})
    return out


def main():
    args = case_args(__doc__).parse_args()
    derive_cases(os.path.join(args.out_dir, "gpu"),
                 [("gqa_grid.json", "gqa_hopper_grid.json"), ("gqa_small.json", "gqa_hopper_small.json")], eligible,
                 pinned_to,
                 lambda dst: extra_cases(random.Random(0x40FF)) + persistent_cases(random.Random(0x5C4ED)) + q_tma_cases()
                 if dst == "gqa_hopper_grid.json"
                 else persistent_cases(random.Random(0x5C4EE), small=True) + q_tma_cases(small=True))


if __name__ == "__main__":
    main()
