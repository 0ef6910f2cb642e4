#!/usr/bin/env python3
"""Random GPU test grids for lightning_indexer (SPEC.md §2.1), in the `attnjit test` format
(tools/test_case.hpp). Standard library only; deterministic (fixed seed).

Writes, under tests/cases/gpu/ (kept out of the CI glob tests/cases/*.json):
  lightning_indexer_grid.json   >= 150 random configurations. No golden: the runner runs the kernel and
                                the CPU reference on the same fresh random inputs (indices poisoned) and
                                checks both by SPEC.md §1.9's top-k rule (compare mode "topk": counts,
                                trailing -1, distinct candidates, sorted reference scores within
                                1e-4 * max|score| + 1e-6); deterministic cases also require ascending
                                entries and a byte-identical second call ("repeat").
  lightning_indexer_small.json  ~16 small cases for compute-sanitizer runs.

Axes: fp16/bf16; causal or not; compress_ratio 1/2/4/128 (causal only); packed documents (B = 1, empty
documents, rows past cu_seqlens[N], inactive pool capacity); topk 0/1/7/64/2048 and odd values; T from 1
to 65536 (the large ones few, and with compression or short documents so the CPU reference and the
single-row scorer stay fast); H 1..64 (a few 65..256); D 16..256 (multiples of 8, some not of 16);
weights of mixed sign, all negative, or H = 1 with all-negative weights (exact-zero score ties);
padded q head strides and transposed weights. Each case's work B * sum|C| * H * D stays under MAX_WORK
(plus two issue-shape cases, H = 64, D = 128, topk = 2048).

Usage: python3 tools/gen_cases_lightning_indexer.py [--out-dir DIR] [--count N]
"""
import argparse
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from casegen_common import (add_indexer_outputs, contiguous, dumps_one_case_per_line, indexer_compare,  # noqa: E402
                            indexer_config, tensor, weighted, write_cases_text)

SEED = 0x11D3C5
OP = "lightning_indexer"
MAX_WORK = 6e8

H_CHOICES = [(1, 3), (2, 2), (3, 2), (4, 3), (8, 3), (13, 1), (16, 3), (32, 2), (48, 1), (64, 4)]
D_CHOICES = [(16, 3), (24, 1), (32, 3), (40, 1), (64, 3), (128, 4), (136, 1), (256, 2)]
TOPK_CHOICES = [(0, 1), (1, 3), (7, 3), (64, 4), (2048, 2), ("odd", 3)]
T_CHOICES = [(1, 1), (2, 1), ("small", 10), ("mid", 5), ("large", 1)]


def sum_candidates(T, S, causal, r, docs):
    """B = 1 count of (row, candidate) pairs."""
    if docs is None:
        return sum((t + 1) // r for t in range(T)) if causal else T * S
    total = 0
    for L in docs:
        total += sum((u + 1) // r for u in range(L)) if causal else L * (L // r)
    return total


def random_docs(rng, T, r):
    """Document query lengths covering at most T tokens: some empty, maybe a tail past the end."""
    docs, used = [], 0
    cap = T - (rng.randrange(0, max(1, T // 4) + 1) if rng.random() < 0.5 else 0)
    while used < cap:
        if rng.random() < 0.15:
            docs.append(0)
            continue
        L = min(cap - used, rng.choice([1, 2, 3, r, 2 * r + 1, rng.randrange(1, max(2, cap // 2 + 1)), cap - used]))
        L = max(L, 1)
        docs.append(L)
        used += L
        if len(docs) > 40:
            break
    if rng.random() < 0.3:
        docs.insert(rng.randrange(len(docs) + 1), 0)
    return docs or [0]


def make_case(rng, idx, prefix, dtype, B, T, H, D, topk, causal, r, docs, wkind, det, strided):
    cu = cuk = None
    if docs is not None:
        cu, cuk = [0], [0]
        for L in docs:
            cu.append(cu[-1] + L)
            cuk.append(cuk[-1] + L // r)
        S = cuk[-1] + rng.choice([0, 0, 1, 5])  # inactive capacity
    else:
        S = T // r
    config = indexer_config(topk, causal, r, det)
    normal = {"kind": "normal", "mean": 0.0, "std": 1.0}
    if wkind == "mixed":
        winit = normal
    elif wkind == "negative":
        winit = {"kind": "normal", "mean": -1.0, "std": 0.3}
    else:  # "positive"
        winit = {"kind": "normal", "mean": 1.0, "std": 0.3}
    q_strides = w_strides = None
    if strided:
        ph = rng.choice([8, 16])
        q_strides = [T * H * (D + ph), H * (D + ph), D + ph, 1]
        w_strides = [T * H, 1, T]  # weights stored head-major
    tensors = {"q": tensor([B, T, H, D], dtype, normal, q_strides), "k": tensor([B, S, D], dtype, normal),
               "weights": tensor([B, T, H], dtype, winit, w_strides)}
    add_indexer_outputs(tensors, B, T, topk, cu, cuk)
    cmp = indexer_compare(det)
    tag = f"{dtype}/b{B}t{T}h{H}d{D}k{topk}" + ("/causal" if causal else "") + (f"/r{r}" if r != 1 else "") + \
          (f"/packed{len(docs)}" if docs is not None else "") + (f"/w-{wkind}" if wkind != "mixed" else "") + \
          ("/det" if det else "") + ("/strided" if strided else "")
    config = dict(config, backend="portable")  # tools/gen_cases_lightning_indexer_hopper.py derives the hopper grid
    case = {"name": f"{prefix}/{idx:03d}/{tag}", "op": OP, "config": config, "seed": rng.randrange(1, 2**31),
            "tensors": tensors, "compare": {"indices": cmp}}
    if det:
        case["repeat"] = True
    return case


def draw_T(rng, kind):
    if kind in (1, 2):
        return kind
    if kind == "small":
        return rng.randrange(3, 300)
    if kind == "mid":
        return rng.randrange(300, 4100)
    return rng.choice([16384, 32768, 65536])


def grid(count):
    rng = random.Random(SEED)
    cases = []
    idx = 0
    while len(cases) < count:
        dtype = rng.choice(["fp16", "bf16"])
        causal = rng.random() < 0.65
        r = weighted(rng, [(1, 5), (2, 1), (4, 1), (128, 1)]) if causal else 1
        packed = rng.random() < 0.3
        T = draw_T(rng, weighted(rng, T_CHOICES))
        H = weighted(rng, H_CHOICES)
        D = weighted(rng, D_CHOICES)
        topk = weighted(rng, TOPK_CHOICES)
        if topk == "odd":
            topk = rng.choice([2, 3, 5, 17, 100, 255, 513])
        B = 1 if packed or T > 4096 else rng.choice([1, 1, 2, 3])
        if T > 4096:  # keep the reference fast: compression or short documents, small H * D
            if not (causal and r == 128):
                packed = True
            H, D = rng.choice([(1, 16), (2, 16), (4, 16), (2, 32)])
        docs = random_docs(rng, T, r) if packed else None
        wkind = weighted(rng, [("mixed", 6), ("negative", 2), ("positive", 1)])
        if H == 1 and rng.random() < 0.6:
            wkind = "negative"  # all scores <= 0: exact-zero ties
        det = rng.random() < 0.3
        strided = rng.random() < 0.15 and T <= 4096
        S = (T // r) if docs is None else sum(L // r for L in docs)
        work = B * sum_candidates(T, S, causal, r, docs) * H * D
        if work > MAX_WORK:
            continue
        idx += 1
        cases.append(make_case(rng, idx, "li-grid", dtype, B, T, H, D, topk, causal, r, docs, wkind, det, strided))
    # The shape, scaled to what the CPU reference checks in seconds; and the big head tiles.
    cases.append(make_case(rng, idx + 1, "li-grid", "bf16", 1, 2300, 64, 128, 2048, True, 1, None, "mixed", True, False))
    cases.append(make_case(rng, idx + 2, "li-grid", "fp16", 1, 2200, 64, 128, 2048, False, 1, None, "mixed", False, False))
    cases.append(make_case(rng, idx + 3, "li-grid", "bf16", 1, 3000, 64, 128, 2048, True, 1, [1000, 0, 2100], "mixed",
                           True, False))
    # The long sequences: 2^16 tokens compressed 128x, 2^16 tokens in 512-token documents, 2^14 tokens 4x.
    cases.append(make_case(rng, idx + 8, "li-grid", "bf16", 1, 65536, 2, 16, 64, True, 128, None, "mixed", True, False))
    cases.append(make_case(rng, idx + 9, "li-grid", "fp16", 1, 65536, 1, 16, 64, True, 1, [512] * 128, "mixed", False,
                           False))
    cases.append(make_case(rng, idx + 10, "li-grid", "bf16", 1, 16384, 2, 16, 2048, True, 4, None, "mixed", True,
                           False))
    for j, (H, D) in enumerate([(65, 64), (128, 32), (192, 16), (256, 256)]):
        cases.append(make_case(rng, idx + 4 + j, "li-grid", rng.choice(["fp16", "bf16"]), 1, 300, H, D,
                               rng.choice([7, 64]), True, 1, None, "mixed", True, False))
    return cases


def small():
    rng = random.Random(SEED + 1)
    cases = []
    specs = [  # dtype, B, T, H, D, topk, causal, r, docs, wkind, det, strided
        ("bf16", 1, 1, 1, 16, 1, True, 1, None, "mixed", False, False),
        ("fp16", 2, 37, 4, 32, 7, True, 1, None, "mixed", True, False),
        ("bf16", 1, 300, 64, 128, 64, True, 1, None, "mixed", True, False),
        ("fp16", 1, 200, 8, 64, 64, False, 1, None, "negative", False, True),
        ("bf16", 1, 130, 1, 16, 5, True, 1, None, "negative", True, False),
        ("fp16", 1, 150, 3, 24, 7, True, 2, None, "mixed", False, False),
        ("bf16", 1, 300, 2, 40, 1, True, 4, None, "mixed", True, False),
        ("fp16", 1, 700, 4, 16, 2, True, 128, None, "mixed", False, False),
        ("bf16", 1, 90, 16, 64, 7, True, 1, [0, 30, 0, 41, 5], "mixed", True, False),
        ("fp16", 1, 90, 16, 64, 17, False, 1, [20, 0, 50], "mixed", False, False),
        ("bf16", 1, 64, 65, 32, 3, False, 1, None, "mixed", False, False),
        ("fp16", 1, 40, 256, 256, 5, True, 1, None, "mixed", True, False),
        ("bf16", 1, 2100, 4, 16, 2048, True, 1, None, "mixed", True, False),
        ("fp16", 1, 50, 2, 16, 0, True, 1, None, "mixed", False, False),
        ("bf16", 1, 300, 32, 136, 100, False, 1, None, "mixed", False, False),
        ("fp16", 1, 120, 4, 8, 9, True, 1, [60, 60], "mixed", True, False),
    ]
    for i, s in enumerate(specs):
        dtype, B, T, H, D, topk, causal, r, docs, wkind, det, strided = s
        cases.append(make_case(rng, i, "li-small", dtype, B, T, H, D, topk, causal, r, docs, wkind, det, strided))
    return cases


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap.add_argument("--out-dir", default=os.path.join(root, "tests/cases/gpu"))
    ap.add_argument("--count", type=int, default=170)
    args = ap.parse_args()
    g = grid(args.count)
    write_cases_text(os.path.join(args.out_dir, "lightning_indexer_grid.json"), g, dumps_one_case_per_line(g))
    s = small()
    write_cases_text(os.path.join(args.out_dir, "lightning_indexer_small.json"), s, dumps_one_case_per_line(s))


if __name__ == "__main__":
    main()
