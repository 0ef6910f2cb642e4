#!/usr/bin/env python3
"""Test cases for the hopper backend of lightning_indexer (templates/indexer/lightning_indexer_hopper.cuh):
every case of the portable grid and small set (tests/gen/lightning_indexer_cases.py) that the hopper kernel
serves (fp16/bf16, D 64 or 128, head tile not 192, topk within its buffers: lightning_indexer_hopper_geometry),
with `"backend": "hopper"` in its config, plus extra shapes aimed at the kernel's own tiling (128-key TMA
tiles in a two-stage ring, two consumer warpgroups of 64 keys, token blocks of 64 / 128 / 256 columns, two
n128 halves at 256 columns, 1..32 rows per CTA): lengths around multiples of 128, every head tile, topk
values that shrink the token block, batches, packed documents, compression, strided q / weights; and the
calls it refuses (expect_error "unsupported", naming "backend 'hopper'").

Writes tests/cases/gpu/lightning_indexer_hopper_grid.json and lightning_indexer_hopper_small.json (the small
set for compute-sanitizer). Run tests/gen/lightning_indexer_cases.py first (this reads its outputs).
Standard library only; deterministic.

Usage: python3 tests/gen/lightning_indexer_hopper_cases.py [--out-dir tests/cases]
"""
import json
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from casegen_common import case_args, dumps_one_case_per_line, pinned_to, write_cases_text  # noqa: E402
from lightning_indexer_cases import make_case, sum_candidates  # noqa: E402
from lightning_indexer_bigtopk_cases import candidate_cap, head_tile  # noqa: E402  (the kernels' shared limits)

SEED = 0x11D3C6
MAX_WORK = 6e8
BN = 128
SLOTS = 4  # kLiHopperSlots: score tiles between the consumers and the selection warps
STAGES = 2  # kLiHopperStages


def hopper_geometry(D, HP, topk):
    """lightning_indexer_hopper_geometry (templates/indexer/lightning_indexer_hopper_params.cuh): (R, COLS, CAP),
    R = 0 when not served."""
    if D not in (64, 128) or HP not in (8, 16, 32, 64, 128, 256) or topk < 1:
        return 0, 0, 0
    cols = 256
    while cols >= 64 and cols >= HP:
        R = cols // HP
        fixed = (1024 + cols * D * 2 + STAGES * BN * D * 2 + SLOTS * R * BN * 4 + cols * 4 + R * 256 * 4 + R * 16
                 + 2 * (STAGES + SLOTS) * 8)
        cap = candidate_cap(fixed, R, topk, BN)
        if cap is not None:
            return R, cols, cap
        cols //= 2
    return 0, 0, 0


def served(case):
    t = case["tensors"]
    if t["q"]["dtype"] not in ("fp16", "bf16"):
        return False
    _, _, H, D = t["q"]["shape"]
    topk = case["config"]["topk"]
    if D not in (64, 128) or head_tile(H) == 192:
        return False
    return topk == 0 or hopper_geometry(D, head_tile(H), topk)[0] >= 1


def extra_grid():
    """Shapes aimed at the hopper kernel's tiles (each under MAX_WORK of CPU reference work)."""
    rng = random.Random(SEED)
    out = []
    idx = 0
    lengths = [1, 2, 63, 127, 128, 129, 255, 256, 257, 383, 511, 640, 1000, 2049, 2300, 3001]
    heads = [1, 3, 8, 9, 16, 17, 32, 33, 48, 64, 65, 100, 128, 200, 256]
    while len(out) < 110:
        dtype = rng.choice(["fp16", "bf16"])
        D = rng.choice([64, 128, 128])
        H = rng.choice(heads)
        causal = rng.random() < 0.6
        r = rng.choice([1, 1, 1, 2, 4, 128]) if causal else 1
        packed = rng.random() < 0.25
        T = rng.choice(lengths)
        HP = head_tile(H)
        max_topk = 0
        for k in (20000, 16000, 12000, 9000, 6000, 4000, 3000, 2048, 1000):
            if hopper_geometry(D, HP, k)[0] >= 1:
                max_topk = k
                break
        topk = rng.choice([1, 2, 7, 64, 100, 255, 513, 2048, max_topk])
        if topk == 0 or hopper_geometry(D, HP, topk)[0] < 1:
            continue
        B = 1 if packed else rng.choice([1, 1, 2, 3])
        docs = None
        if packed:
            docs = []
            used = 0
            while used < T:
                if rng.random() < 0.15:
                    docs.append(0)
                    continue
                L = min(T - used, rng.choice([1, 127, 128, 129, 300, T]))
                docs.append(L)
                used += L
            if rng.random() < 0.3:
                docs.append(0)
        S = (T // r) if docs is None else sum(L // r for L in docs)
        work = B * sum_candidates(T, S, causal, r, docs) * H * D
        if work > MAX_WORK:
            continue
        wkind = rng.choice(["mixed", "mixed", "mixed", "negative", "positive"])
        if H == 1 and rng.random() < 0.6:
            wkind = "negative"
        det = rng.random() < 0.4
        strided = rng.random() < 0.2
        idx += 1
        out.append(pinned_to(make_case(rng, idx, "li-hopper-extra", dtype, B, T, H, D, topk, causal, r, docs, wkind,
                                       det, strided), prefix=""))
    # The shape, scaled to what the CPU reference checks in seconds; every token-block width of
    # H = 64 (topk large enough that R drops to 2 and 1: 128 and 64 columns); H = 256 (one token of 256 heads).
    fixed = [("bf16", 1, 2300, 64, 128, 2048, True, 1, None, "mixed", True, False),
             ("fp16", 1, 2200, 64, 128, 2048, False, 1, None, "mixed", False, False),
             ("bf16", 1, 3000, 64, 128, 2048, True, 1, [1000, 0, 2100], "mixed", True, False),
             ("bf16", 1, 2600, 64, 128, 2500, True, 1, None, "mixed", True, False),
             ("fp16", 1, 2400, 64, 64, 2047, True, 1, None, "mixed", True, False)]
    for D, HP in ((128, 8), (64, 8), (128, 16), (64, 16), (128, 32), (64, 32), (64, 64)):
        for cols in (128, 64):
            # the smallest topk that narrows the token block to `cols` columns
            best = 0
            for k in range(1, 40000, 32):
                R, c, _ = hopper_geometry(D, HP, k)
                if R >= 1 and c == cols:
                    best = k
                    break
            if best:
                fixed.append(("bf16" if cols == 128 else "fp16", 1, best + 300, HP, D, best, True, 1, None, "mixed",
                              True, False))
    fixed.append(("fp16", 1, 700, 256, 128, 300, True, 1, None, "mixed", True, False))
    fixed.append(("bf16", 2, 900, 256, 64, 513, False, 1, None, "mixed", False, False))
    rng2 = random.Random(SEED + 7)
    for j, s in enumerate(fixed):
        dtype, B, T, H, D, topk, causal, r, docs, wkind, det, strided = s
        S = (T // r) if docs is None else sum(L // r for L in docs)
        if B * sum_candidates(T, S, causal, r, docs) * H * D > 2.5e10:
            continue
        out.append(pinned_to(make_case(rng2, j, "li-hopper-fixed", dtype, B, T, H, D, topk, causal, r, docs, wkind,
                                       det, strided), prefix=""))
    return out


def error_cases():
    """Calls the hopper kernel does not serve: refused with Unsupported, naming backend 'hopper'."""
    rng = random.Random(SEED + 11)
    out = []
    specs = [("d16", 1, 8, 2, 16, 2, "it serves head dims 64 and 128, got 16"),
             ("d256", 1, 40, 4, 256, 5, "it serves head dims 64 and 128, got 256"),
             ("h150", 1, 40, 150, 64, 5, "it serves H up to 128 or from 193 to 256"),
             ("topk-beyond-buffers", 1, 40, 64, 128, 40000, "topk 40000 exceeds its shared-memory candidate buffers")]
    for i, (tag, B, T, H, D, topk, msg) in enumerate(specs):
        c = make_case(rng, i, "li-hopper-error", "bf16", B, T, H, D, topk, True, 1, None, "mixed", False, False)
        c = pinned_to(c, prefix="")
        c["name"] = f"li-hopper-error/unsupported/{tag}"
        del c["compare"]
        c["expect_error"] = {"category": "unsupported", "contains": "backend 'hopper': " + msg}
        c["gpu_only"] = True
        out.append(c)
    return out


def small_extra():
    """A few small shapes for compute-sanitizer that cover each column width and the two-half split."""
    rng = random.Random(SEED + 3)
    specs = [  # dtype, B, T, H, D, topk, causal, r, docs, wkind, det, strided
        ("bf16", 1, 300, 64, 128, 64, True, 1, None, "mixed", True, False),     # COLS 256, two halves
        ("fp16", 2, 200, 64, 64, 17, False, 1, None, "mixed", False, True),     # strided q / weights
        ("bf16", 1, 260, 128, 128, 7, True, 1, None, "mixed", True, False),     # HP 128, two head groups
        ("fp16", 1, 150, 256, 64, 5, True, 1, None, "mixed", False, False),     # one token of 256 heads
        ("bf16", 1, 300, 8, 64, 100, True, 2, None, "negative", True, False),   # R 32
        ("fp16", 1, 200, 16, 128, 9, True, 1, [0, 70, 0, 129, 1], "mixed", True, False),  # packed
        ("bf16", 1, 300, 8, 128, 7, True, 1, None, "mixed", True, False),      # R 16, 128 columns, one group
        ("fp16", 1, 1100, 8, 64, 1000, True, 1, None, "mixed", True, False),    # R 8, 64 columns
        ("fp16", 1, 1, 4, 64, 1, True, 1, None, "mixed", False, False),
    ]
    out = []
    for i, s in enumerate(specs):
        dtype, B, T, H, D, topk, causal, r, docs, wkind, det, strided = s
        out.append(pinned_to(make_case(rng, i, "li-hopper-small", dtype, B, T, H, D, topk, causal, r, docs, wkind, det,
                                       strided), prefix=""))
    return out


def main():
    args = case_args(__doc__).parse_args()
    gpu = os.path.join(args.out_dir, "gpu")
    with open(os.path.join(gpu, "lightning_indexer_grid.json")) as f:
        grid = [pinned_to(c) for c in json.load(f)["cases"] if served(c)]
    grid += extra_grid() + error_cases()
    write_cases_text(os.path.join(gpu, "lightning_indexer_hopper_grid.json"), grid,
                     dumps_one_case_per_line(grid))
    with open(os.path.join(gpu, "lightning_indexer_small.json")) as f:
        small = [pinned_to(c) for c in json.load(f)["cases"] if served(c)]
    small += small_extra()
    write_cases_text(os.path.join(gpu, "lightning_indexer_hopper_small.json"), small,
                     dumps_one_case_per_line(small))


if __name__ == "__main__":
    main()
