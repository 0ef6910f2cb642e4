#!/usr/bin/env python3
"""GPU test cases for lightning_indexer's slab path (SPEC.md §2.1 with a topk beyond the fused kernel's
shared-memory candidate buffers: templates/indexer/lightning_indexer_big.cuh), in the `attnjit test` format
(tools/cli/test_case.hpp). Standard library only; deterministic (fixed seed).

Writes, under tests/cases/gpu/ (kept out of the CI glob tests/cases/*.json):
  lightning_indexer_bigtopk_grid.json   36 cases, topk 20000..70000. Every case's topk is above
                                        max_fused_topk(D, H) (a port of lightning_indexer_geometry below), so
                                        the planner takes the slab path on its own. No golden: the runner runs
                                        the kernel and the CPU reference on fresh random inputs (indices
                                        poisoned) and checks both by SPEC.md §1.9's top-k rule (compare mode
                                        "topk"); deterministic cases also require ascending entries and a
                                        byte-identical second call ("repeat").
  lightning_indexer_bigtopk_small.json  6 small cases for compute-sanitizer. Two take the slab path by
                                        themselves: T = 1 with topk 70000 (selection only), and T = 3300 with
                                        topk 3169, just past the smallest fused limit (D 256, H 193: scores
                                        and selection; its CPU side is the slow part of the file). The other
                                        four are small shapes with a small topk that the fused kernel would
                                        serve: they exercise the slab path only when the planner is told to
                                        take it, with the test-only environment variable
                                        ATTNJIT_TUNE_LI_FORCE_SLAB=1 (without it they run, and pass, on the fused
                                        kernel).

Axes of the grid: fp16/bf16; causal or not; compress_ratio 1/4; packed documents (empty ones, rows past
cu_seqlens[N], inactive pool capacity up to S = 70000); H 1/4/64; D 32/64/128; weights mixed, all negative
(scores <= 0, exact-zero ties) or all positive with H = 1 (the k-th score is an exact zero shared by many
candidates: ties at the selection boundary); deterministic (ascending, repeated) or not; padded q head
strides and head-major weights. Cases of two kinds:
  "sel": some rows have more than topk candidates, so the score kernel runs and the selection kernel
         selects. Such a row needs T > topk (4 * topk with compress_ratio 4), so the output [B, T, topk]
         int32 is at least topk^2 * 4 bytes (1.6 GB at topk 20000): these cases keep topk near the
         threshold (20000..27000) and T just above it, and the host needs memory for about five copies
         of the output (the r = 4 case: 6.4 GB of output).
  "fill": every row has at most topk candidates (topk up to 70000): no scores, the selection kernel
         writes 0..|C|-1, -1... ; cheap, and the only way to test topk 70000 at a sane output size.
The CPU side (reference + two §1.9 checks, each scoring every candidate of every row in double precision)
costs about 3 * sum|C| * (H * D + 30) multiply-adds: the generator prints the estimate (about 5.4e12 for
the grid, about 6 minutes on 16 cores; the single H = 64 "sel" case is a third of it).

Usage: python3 tests/gen/lightning_indexer_bigtopk_cases.py [--out-dir DIR]
"""
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from casegen_common import (add_indexer_outputs, case_args, dumps_one_case_per_line, indexer_compare,  # noqa: E402
                            indexer_config, tensor, weighted, write_cases_text)

SEED = 0xB16B00
OP = "lightning_indexer"
GRID_COUNT = 36
MAX_OUT_BYTES = 3.3e9   # per case, except the one compress_ratio 4 "sel" case
GRID_MAX_OUT_BYTES = 7e8  # what the grid file keeps (see grid())
MAX_SEL_COST = 1.2e11   # per random "sel" case, sum|C| * (H * D + 30)

# ---- The fused kernel's limit: templates/indexer/lightning_indexer_params.cuh, ported.
SMEM_LIMIT = 227 * 1024
ROW_INFO = 4


def head_tile(H):
    if H <= 8:
        return 8
    if H <= 16:
        return 16
    if H <= 32:
        return 32
    return (H + 63) // 64 * 64


def candidate_cap(fixed, R, topk, BN):
    """The candidate slots per row a selection kernel gets from the shared memory left after `fixed` bytes
    (R rows, 8 bytes a slot, a multiple of 32, at most what topk + 8 tiles of BN need), or None when that
    is fewer than topk + 2 * BN (the geometry does not serve it)."""
    avail = SMEM_LIMIT - fixed
    cap = avail // (8 * R) if avail > 0 else 0
    cap = cap // 32 * 32
    most = topk + 8 * BN
    if cap > most:
        cap = (most + 31) // 32 * 32
    return cap if cap >= topk + 2 * BN else None


def fused_fits(D, HP, topk):
    """lightning_indexer_geometry(D, HP, topk).R >= 1."""
    DP = (D + 15) // 16 * 16
    pitch = DP + 8
    R = 256 // HP
    while R >= 1:
        COLS = R * HP
        WN = COLS if COLS < 64 else 64
        WGN = COLS // WN
        WGM = 8 // WGN
        BN = 128 if (DP <= 128 or WGM == 8) else 64
        q_bytes = COLS * pitch * 2
        k_bytes = 2 * BN * pitch * 2
        part_bytes = 2 * WGN * (WN // HP if WN >= HP else 1) * BN * 4
        hist_bytes = R * 256 * 4
        row_bytes = R * ROW_INFO * 4 + R * 4 * 4
        fixed = q_bytes + k_bytes + part_bytes + hist_bytes + row_bytes
        if candidate_cap(fixed, R, topk, BN) is not None:
            return True
        R //= 2
    return False


def max_fused_topk(D, H):
    """The largest topk the fused kernel serves for (D, H); the slab path takes every larger one."""
    HP = head_tile(H)
    lo, hi = 0, 1 << 20
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if fused_fits(D, HP, mid):
            lo = mid
        else:
            hi = mid - 1
    return lo


# ---- Shapes, costs, cases.

def row_counts(T, S, causal, r, docs):
    """Candidate count of every row (one batch element)."""
    if docs is None:
        return [(t + 1) // r for t in range(T)] if causal else [S] * T
    counts = []
    for L in docs:
        counts += [(u + 1) // r for u in range(L)] if causal else [L // r] * L
    return counts + [0] * (T - len(counts))


class Shape:
    def __init__(self, B, T, H, D, topk, causal, r, docs, extra_cap):
        self.B, self.T, self.H, self.D, self.topk = B, T, H, D, topk
        self.causal, self.r, self.docs, self.extra_cap = causal, r, docs, extra_cap
        if docs is None:
            self.S = T // r
        else:
            assert sum(docs) <= T
            self.S = sum(L // r for L in docs) + extra_cap
        counts = row_counts(T, self.S, causal, r, docs)
        self.sum_c = B * sum(counts)
        self.sel_rows = B * sum(1 for n in counts if n > topk)
        self.cost = self.sum_c * (H * D + 30)
        self.out_bytes = B * T * topk * 4

    def check(self, kind, max_out=MAX_OUT_BYTES):
        assert self.topk > max_fused_topk(self.D, self.H), "the fused kernel would serve this case"
        assert 20000 <= self.topk <= 70000 or kind == "small", self.topk
        assert (self.sel_rows > 0) == (kind == "sel"), (kind, self.sel_rows)
        assert self.out_bytes <= max_out, self.out_bytes


def make_case(rng, name, dtype, shape, wkind, det, strided):
    s = shape
    B, T, H, D = s.B, s.T, s.H, s.D
    cu = cuk = None
    if s.docs is not None:
        cu, cuk = [0], [0]
        for L in s.docs:
            cu.append(cu[-1] + L)
            cuk.append(cuk[-1] + L // s.r)
    normal = {"kind": "normal", "mean": 0.0, "std": 1.0}
    winit = {"mixed": normal, "negative": {"kind": "normal", "mean": -1.0, "std": 0.3},
             "positive": {"kind": "normal", "mean": 1.0, "std": 0.3}}[wkind]
    q_strides = w_strides = None
    if strided:
        ph = 8
        q_strides = [T * H * (D + ph), H * (D + ph), D + ph, 1]
        w_strides = [T * H, 1, T]  # weights stored head-major
    tensors = {"q": tensor([B, T, H, D], dtype, normal, q_strides), "k": tensor([B, s.S, D], dtype, normal),
               "weights": tensor([B, T, H], dtype, winit, w_strides)}
    add_indexer_outputs(tensors, B, T, s.topk, cu, cuk)
    tag = f"{dtype}/b{B}t{T}s{s.S}h{H}d{D}k{s.topk}" + ("/causal" if s.causal else "") + \
          (f"/r{s.r}" if s.r != 1 else "") + (f"/packed{len(s.docs)}" if s.docs is not None else "") + \
          (f"/w-{wkind}" if wkind != "mixed" else "") + ("/det" if det else "") + ("/strided" if strided else "")
    case = {"name": f"{name}/{tag}", "op": OP, "config": dict(indexer_config(s.topk, s.causal, s.r, det), backend="portable"),
            "seed": rng.randrange(1, 2**31), "tensors": tensors, "compare": {"indices": indexer_compare(det)}}
    if det:
        case["repeat"] = True
    return case


def sel_topk(rng, D, H, spread):
    """A topk in [max(20000, threshold + 1), + spread]."""
    return max(20000, max_fused_topk(D, H) + 1) + rng.randrange(0, spread + 1)


def fixed_grid(rng):
    """(kind, dtype, Shape, wkind, det, strided): the cases every run needs."""
    out = []

    def add(kind, dtype, shape, wkind="mixed", det=False, strided=False, max_out=MAX_OUT_BYTES):
        shape.check(kind, max_out)
        out.append((kind, dtype, shape, wkind, det, strided))

    # "sel": causal prefixes (rows t >= topk select), one per (H, D) that stays affordable on the CPU.
    k = sel_topk(rng, 32, 1, 0)  # the first topk past the fused kernel's buffers (D 32, H 1)
    add("sel", "fp16", Shape(1, k + 700, 1, 32, k, True, 1, None, 0), det=True)
    k = sel_topk(rng, 32, 1, 1000)
    add("sel", "bf16", Shape(1, k + rng.randrange(500, 1500), 1, 32, k, True, 1, None, 0))
    k = sel_topk(rng, 64, 1, 600)
    add("sel", "fp16", Shape(1, k + rng.randrange(300, 1500), 1, 64, k, True, 1, None, 0), wkind="positive", det=True)
    k = sel_topk(rng, 128, 1, 400)
    add("sel", "bf16", Shape(1, k + 2000, 1, 128, k, True, 1, None, 0), wkind="negative")
    k = sel_topk(rng, 32, 4, 300)
    add("sel", "fp16", Shape(1, k + 500, 4, 32, k, True, 1, None, 0), det=True)
    k = sel_topk(rng, 64, 4, 100)
    add("sel", "bf16", Shape(1, k + 200, 4, 64, k, True, 1, None, 0), strided=True)
    k = sel_topk(rng, 128, 4, 200)
    add("sel", "fp16", Shape(1, k + 300, 4, 128, k, True, 1, None, 0))
    # H = 64 (D 32): the heaviest case on the CPU (about 6.7e11 multiply-adds per pass).
    k = sel_topk(rng, 32, 64, 50)
    add("sel", "bf16", Shape(1, k + 150, 64, 32, k, True, 1, None, 0), det=True)
    # Non-causal: every row selects.
    k = sel_topk(rng, 128, 1, 200)
    add("sel", "bf16", Shape(1, k + 300, 1, 128, k, False, 1, None, 0), det=True)
    k = sel_topk(rng, 32, 1, 100)
    add("sel", "fp16", Shape(1, k + 200, 1, 32, k, False, 1, None, 0), wkind="negative")
    # Two batch elements.
    k = sel_topk(rng, 128, 1, 100)
    add("sel", "fp16", Shape(2, k + 200, 1, 128, k, True, 1, None, 0), det=True)
    # Packed: one long document among empty and short ones, rows past the end, inactive capacity.
    k = sel_topk(rng, 128, 1, 300)
    add("sel", "bf16", Shape(1, k + 400 + 157 + 40, 1, 128, k, True, 1, [0, k + 400, 0, 150, 0, 7], 5), det=True)
    k = sel_topk(rng, 128, 1, 100)
    add("sel", "fp16", Shape(1, 300 + k + 100 + 50, 1, 128, k, False, 1, [300, 0, k + 100, 50], 0))
    # compress_ratio 4: rows u >= 4 * topk select (the largest output of the grid, 6.4 GB).
    k = 20000
    add("sel", "bf16", Shape(1, 4 * k + 200, 1, 128, k, True, 4, None, 0), max_out=6.5e9)

    # "fill": every |C| <= topk (no scores; the selection kernel writes 0..|C|-1, -1...).
    add("fill", "bf16", Shape(1, 2000, 64, 128, rng.randrange(20000, 70001), True, 1, None, 0), det=True)
    add("fill", "fp16", Shape(1, 1500, 64, 64, rng.randrange(30000, 70001), False, 1, None, 0))
    add("fill", "bf16", Shape(1, 1000, 64, 32, max_fused_topk(32, 64) + 1, True, 1, None, 0))
    add("fill", "fp16", Shape(1, 2100, 4, 32, 70000, True, 1, [0, 1200, 0, 800], 70000 - 2000), det=True)
    add("fill", "bf16", Shape(1, 20000, 1, 128, 20000, True, 4, None, 0))
    add("fill", "fp16", Shape(3, 700, 4, 64, rng.randrange(40000, 60001), False, 1, None, 0), strided=True)
    add("fill", "bf16", Shape(1, 1300, 4, 128, 30000, False, 1, [0, 500, 0, 0, 700], 5), det=True)
    add("fill", "fp16", Shape(1, 1, 1, 32, 70000, False, 1, None, 0), det=True)
    return out


def random_grid(rng, count):
    """Random further cases (dtype, H, D, flags), kept under the cost and output limits."""
    out = []
    while len(out) < count:
        dtype = rng.choice(["fp16", "bf16"])
        H = weighted(rng, [(1, 4), (4, 3), (64, 1)])
        D = rng.choice([32, 64, 128])
        causal = rng.random() < 0.7
        r = 4 if causal and rng.random() < 0.2 else 1
        packed = rng.random() < 0.35
        kind = "sel" if H < 64 and r == 1 and rng.random() < 0.5 else "fill"
        wkind = weighted(rng, [("mixed", 5), ("negative", 2), ("positive", 1)])
        if H != 1 and wkind == "positive":
            wkind = "mixed"
        det = rng.random() < 0.4
        strided = rng.random() < 0.2
        if kind == "sel":
            topk = sel_topk(rng, D, H, 600)
            L = topk + rng.randrange(1, 800)
        else:
            topk = rng.randrange(max(20000, max_fused_topk(D, H) + 1), 70001)
            L = rng.randrange(1, 4000 if H < 64 else 1500)
        if packed:
            docs = [L]
            for _ in range(rng.randrange(1, 4)):
                docs.insert(rng.randrange(len(docs) + 1), rng.choice([0, 0, 1, 3, 100, rng.randrange(1, 600)]))
            T = sum(docs) + rng.choice([0, 0, 17])
            extra = rng.choice([0, 5, rng.randrange(0, 60000)])
            shape = Shape(1, T, H, D, topk, causal, r, docs, extra)
        else:
            B = 1 if kind == "sel" else rng.choice([1, 2])
            shape = Shape(B, L * r, H, D, topk, causal, r, None, 0)
        if shape.sel_rows == 0 and kind == "sel":
            continue
        if shape.out_bytes > MAX_OUT_BYTES or (kind == "sel" and shape.cost > MAX_SEL_COST) or \
                (kind == "fill" and shape.cost > 4e10):
            continue
        shape.check(kind)
        out.append((kind, dtype, shape, wkind, det, strided))
    return out


def grid():
    rng = random.Random(SEED)
    specs = fixed_grid(rng)
    specs += random_grid(rng, GRID_COUNT - len(specs))
    # NOTE: a row with more candidates than a topk beyond the fused limit (17632 at D 128, H 64) needs
    # T > topk, so such "sel" cases write over 1.2 GB of indices and take minutes of CPU reference each;
    # the file keeps the cases up to GRID_MAX_OUT_BYTES. The slab selection over long rows is validated by
    # running the regular grid with ATTNJIT_TUNE_LI_FORCE_SLAB=1 (tools/scripts/gpu_suite.sh does).
    specs = [sp for sp in specs if sp[2].out_bytes <= GRID_MAX_OUT_BYTES]
    cases = []
    for i, (kind, dtype, shape, wkind, det, strided) in enumerate(specs):
        cases.append(make_case(rng, f"li-big-grid/{i:03d}/{kind}", dtype, shape, wkind, det, strided))
    cost = sum(3 * s[2].cost for s in specs)
    out = sum(s[2].out_bytes for s in specs)
    return cases, f" (CPU side about {cost:.2e} multiply-adds; outputs {out / 2**30:.1f} GiB in all)"


def small():
    """compute-sanitizer set. The "forced" cases need ATTNJIT_TUNE_LI_FORCE_SLAB=1 to run on the slab path."""
    rng = random.Random(SEED + 1)
    specs = [  # name, dtype, Shape, wkind, det, strided
        ("natural", "bf16", Shape(1, 1, 1, 8, 70000, False, 1, None, 0), "mixed", False, False),
        ("forced", "bf16", Shape(2, 300, 64, 128, 100, True, 1, None, 0), "mixed", True, False),
        ("forced", "fp16", Shape(1, 400, 4, 24, 17, True, 2, [0, 150, 0, 200, 3], 4), "mixed", True, False),
        ("forced", "bf16", Shape(1, 2600, 1, 16, 1500, False, 1, None, 0), "negative", True, False),
        ("forced", "fp16", Shape(1, 120, 3, 256, 30, False, 1, None, 0), "mixed", False, True),
        # The smallest fused limit (D 256, H tile 256: 3168): the score kernel on its own, no forcing (the
        # CPU side costs about 8e11 multiply-adds).
        ("natural", "fp16", Shape(1, 3300, 193, 256, max_fused_topk(256, 193) + 1, True, 1, None, 0), "mixed",
         False, False),
    ]
    cases = []
    for i, (kind, dtype, shape, wkind, det, strided) in enumerate(specs):
        if kind == "natural":
            assert shape.topk > max_fused_topk(shape.D, shape.H)
        else:
            assert shape.topk <= max_fused_topk(shape.D, shape.H) and shape.sel_rows > 0
        cases.append(make_case(rng, f"li-big-small/{i:02d}/{kind}", dtype, shape, wkind, det, strided))
    return cases


def main():
    args = case_args(__doc__).parse_args()
    gpu = os.path.join(args.out_dir, "gpu")
    g, note = grid()
    write_cases_text(os.path.join(gpu, "lightning_indexer_bigtopk_grid.json"), g, dumps_one_case_per_line(g),
                     note)
    s = small()
    write_cases_text(os.path.join(gpu, "lightning_indexer_bigtopk_small.json"), s, dumps_one_case_per_line(s))


if __name__ == "__main__":
    main()
