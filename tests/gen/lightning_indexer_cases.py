#!/usr/bin/env python3
"""Test cases for lightning_indexer (SPEC.md §2.1): rejection cases and random GPU test grids, in the
`attnjit test` format (tools/cli/test_case.hpp). Standard library only; deterministic (fixed seed).

Writes tests/cases/lightning_indexer_errors.json (one case per rejection rule, outputs filled with a byte
pattern that must survive) and, under tests/cases/gpu/ (kept out of the CI glob tests/cases/*.json):
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

Usage: python3 tests/gen/lightning_indexer_cases.py [--out-dir tests/cases] [--count N]
"""
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from casegen_common import (OUTB, add_indexer_outputs, case_args, dumps_one_case_per_line, indexer_compare,  # noqa: E402
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
    config = dict(config, backend="portable")  # tests/gen/lightning_indexer_hopper_cases.py derives the hopper grid
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
    # The issue's shape, scaled to what the CPU reference checks in seconds; and the big head tiles.
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


# ----------------------------------------------------------------------------------------------------
# Rejections: one case per rule, outputs filled with a byte pattern that must survive.


def err_case(name, category, contains, config=None, q=(1, 8, 2, 16), k=None, w=None, out=None, dt="bf16",
             kdt=None, wdt=None, odt="int32", extra=None, drop=(), gpu_only=False, strides=None, cu=None, cuk=None):
    cfg = {"topk": 2} if config is None else config
    B, T, H, D = q if len(q) == 4 else (1, q[0], q[1], q[2])
    r = cfg.get("compress_ratio", 1) if isinstance(cfg.get("compress_ratio", 1), int) else 1
    k = k or (B, T // max(r, 1), D)
    w = w or (B, T, H)
    tk = cfg.get("topk", 2) if isinstance(cfg.get("topk", 2), int) and cfg.get("topk", 2) >= 0 else 2
    out = out or (B, T, tk)
    strides = strides or {}
    def init(d):
        return {"kind": "bytes"} if d.startswith("int") else {"kind": "normal", "mean": 0.0, "std": 1.0}
    tensors = {"q": tensor(q, dt, init(dt), strides.get("q")), "k": tensor(k, kdt or dt, init(kdt or dt), strides.get("k")),
               "weights": tensor(w, wdt or dt, init(wdt or dt), strides.get("weights"))}
    if cu is not None:
        tensors["cu_seqlens"] = tensor([len(cu[0])], cu[1], {"kind": "values", "values": cu[0]}, strides.get("cu_seqlens"))
    if cuk is not None:
        tensors["cu_seqlens_k"] = tensor([len(cuk[0])], cuk[1], {"kind": "values", "values": cuk[0]})
    tensors["indices"] = tensor(out, odt, OUTB, strides.get("indices"), output=True)
    for d in drop:
        del tensors[d]
    if extra:
        tensors.update(extra)
    case = {"name": f"li-err/{category}/{name}", "op": OP, "config": cfg, "tensors": tensors,
            "expect_error": {"category": category, "contains": contains}}
    if gpu_only:
        case["gpu_only"] = True
    return case


def error_cases():
    n = {"kind": "normal", "mean": 0.0, "std": 1.0}
    i32 = "int32"
    e = []
    # param
    e.append(err_case("topk-negative", "param", "topk: expected an integer >= 0", config={"topk": -1}))
    e.append(err_case("topk-missing", "param", "topk: expected an integer >= 0, got none", config={}))
    e.append(err_case("topk-fraction", "param", "topk: expected an integer >= 0", config={"topk": 2.5}))
    e.append(err_case("ratio-zero", "param", "compress_ratio: expected an integer >= 1",
                      config={"topk": 2, "causal": True, "compress_ratio": 0}))
    e.append(err_case("ratio-noncausal", "param", "compress_ratio: expected 1 without causal = true",
                      config={"topk": 2, "compress_ratio": 2}))
    e.append(err_case("unknown-key", "param", "top_k: expected one of", config={"topk": 2, "top_k": 2}))
    e.append(err_case("causal-type", "param", "causal: expected a boolean", config={"topk": 2, "causal": 1}))
    # dtype
    e.append(err_case("q-int32", "dtype", "q: expected", dt="int32", kdt="bf16", wdt="bf16"))
    e.append(err_case("q-fp32-kernel", "dtype", "q: expected fp16 or bf16, got fp32", dt="fp32", gpu_only=True))
    e.append(err_case("k-differs", "dtype", "k: expected bf16 (q's dtype), got fp16", kdt="fp16"))
    e.append(err_case("weights-differs", "dtype", "weights: expected bf16 (q's dtype), got fp16", wdt="fp16"))
    e.append(err_case("cu-int64", "dtype", "cu_seqlens: expected int32", cu=([0, 8], "int64"), cuk=([0, 8], i32),
                      k=(1, 8, 16)))
    e.append(err_case("cuk-int64", "dtype", "cu_seqlens_k: expected int32", cu=([0, 8], i32), cuk=([0, 8], "int64"),
                      k=(1, 8, 16)))
    e.append(err_case("indices-int64", "dtype", "indices: expected int32", odt="int64"))
    # shape
    e.append(err_case("q-rank", "shape", "q: expected 4 dims", q=(8, 2, 16), k=(1, 8, 16), w=(1, 8, 2), out=(1, 8, 2)))
    e.append(err_case("k-rank", "shape", "k: expected 3 dims", k=(1, 8, 1, 16)))
    e.append(err_case("weights-rank", "shape", "weights: expected 3 dims", w=(8, 2)))
    e.append(err_case("indices-rank", "shape", "indices: expected 3 dims", out=(8, 2)))
    e.append(err_case("k-batch", "shape", "k: expected dim 0 (B, q's batch) = 2", q=(2, 8, 2, 16), k=(1, 8, 16)))
    e.append(err_case("k-headdim", "shape", "k: expected dim 2 (D, q's head dim) = 16", k=(1, 8, 24)))
    e.append(err_case("weights-batch", "shape", "weights: expected dim 0 (B, q's batch) = 2", q=(2, 8, 2, 16),
                      w=(1, 8, 2)))
    e.append(err_case("weights-tokens", "shape", "weights: expected dim 1 (T, q's tokens) = 8", w=(1, 7, 2)))
    e.append(err_case("weights-heads", "shape", "weights: expected dim 2 (H, q's heads) = 2", w=(1, 8, 3)))
    e.append(err_case("t-zero", "shape", "q: expected 1 <= T <= 2^20, got T = 0", q=(1, 0, 2, 16), k=(1, 0, 16)))
    big = 2**20 + 1
    e.append(err_case("t-too-large", "shape", "q: expected 1 <= T <= 2^20, got T = 1048577", q=(1, big, 1, 8),
                      k=(1, big, 8), w=(1, big, 1), out=(1, big, 0), config={"topk": 0},
                      strides={"q": [0, 0, 0, 1], "k": [0, 0, 1], "weights": [0, 0, 0]}))
    e.append(err_case("h-zero", "shape", "q: expected 1 <= H <= 256, got H = 0", q=(1, 8, 0, 16), w=(1, 8, 0)))
    e.append(err_case("h-257", "shape", "q: expected 1 <= H <= 256, got H = 257", q=(1, 2, 257, 8), k=(1, 2, 8),
                      w=(1, 2, 257)))
    e.append(err_case("d-4", "shape", "expected head dim D a multiple of 8 in [8, 256], got 4", q=(1, 8, 2, 4)))
    e.append(err_case("d-12", "shape", "expected head dim D a multiple of 8 in [8, 256], got 12", q=(1, 8, 2, 12)))
    e.append(err_case("d-264", "shape", "expected head dim D a multiple of 8 in [8, 256], got 264", q=(1, 4, 1, 264)))
    e.append(err_case("s-not-t-over-r", "shape", "k: expected S = T // compress_ratio = 8 // 2 = 4",
                      config={"topk": 2, "causal": True, "compress_ratio": 2}, k=(1, 5, 16)))
    e.append(err_case("s-not-t", "shape", "k: expected S = T // compress_ratio = 8 // 1 = 8", k=(1, 9, 16)))
    e.append(err_case("packed-batch", "shape", "q: expected B = 1 with packed offsets", q=(2, 8, 2, 16),
                      k=(2, 8, 16), cu=([0, 8], i32), cuk=([0, 8], i32)))
    e.append(err_case("offsets-empty", "shape", "cu_seqlens: expected length N + 1 >= 1, got 0", cu=([], i32),
                      cuk=([], i32)))
    e.append(err_case("offsets-lengths", "shape", "cu_seqlens_k: expected dim 0 (N + 1, cu_seqlens' length) = 2",
                      cu=([0, 8], i32), cuk=([0, 4, 8], i32)))
    e.append(err_case("offsets-rank", "shape", "cu_seqlens: expected 1 dims", cu=([0, 8], i32), cuk=([0, 8], i32),
                      extra={"cu_seqlens": tensor([1, 2], i32, {"kind": "values", "values": [0, 8]})}))
    e.append(err_case("indices-topk", "shape", "indices: expected dim 2 (topk) = 2", out=(1, 8, 3)))
    e.append(err_case("indices-tokens", "shape", "indices: expected dim 1 (T) = 8", out=(1, 7, 2)))
    # args
    e.append(err_case("only-cu", "args", "cu_seqlens_k: expected a tensor together with cu_seqlens",
                      cu=([0, 8], i32)))
    e.append(err_case("only-cuk", "args", "cu_seqlens: expected a tensor together with cu_seqlens_k",
                      cuk=([0, 8], i32)))
    e.append(err_case("unknown-tensor", "args", "scores: expected one of",
                      extra={"scores": tensor([1], "fp32", n)}))
    e.append(err_case("missing-weights", "args", "weights: expected a tensor, got none", drop=("weights",)))
    e.append(err_case("missing-indices", "args", "indices: expected a tensor, got none", drop=("indices",)))
    # layout
    e.append(err_case("q-inner-stride", "layout", "q: expected innermost stride 1", q=(1, 8, 2, 16),
                      strides={"q": [512, 64, 32, 2]}))
    e.append(err_case("k-inner-stride", "layout", "k: expected innermost stride 1", strides={"k": [256, 32, 2]}))
    e.append(err_case("q-head-stride-16B", "layout", "q: expected dim 2 stride to be a multiple of 16 bytes",
                      strides={"q": [8 * 2 * 20, 2 * 20, 20, 1]}, gpu_only=True))
    e.append(err_case("cu-strided", "layout", "cu_seqlens: expected a contiguous", cu=([0, 8], i32),
                      cuk=([0, 8], i32), k=(1, 8, 16),
                      extra={"cu_seqlens": tensor([2], i32, {"kind": "values", "values": [0, 99, 8]}, [2])}))
    e.append(err_case("indices-strided", "layout", "indices: expected a contiguous", strides={"indices": [40, 5, 1]}))
    # unsupported
    e.append(err_case("backend-hopper", "unsupported", "backend 'hopper'", config={"topk": 2, "backend": "hopper"},
                      gpu_only=True))
    # NOTE: no topk is unsupported: a topk beyond the fused kernel's shared-memory buffers takes the slab path
    # (tests/cases/gpu/lightning_indexer_bigtopk_*.json, tests/gen/lightning_indexer_bigtopk_cases.py).
    # content (validate_inputs): packed offsets
    vi = {"topk": 2, "causal": True, "validate_inputs": True}
    e.append(err_case("cu-first", "content", "cu_seqlens: expected element 0 to be 0, got 1", config=vi,
                      cu=([1, 8], i32), cuk=([0, 7], i32), k=(1, 8, 16)))
    e.append(err_case("cu-decreasing", "content", "cu_seqlens: expected non-decreasing offsets, got 3 after 5",
                      config=vi, cu=([0, 5, 3], i32), cuk=([0, 5, 3], i32), k=(1, 8, 16)))
    e.append(err_case("cu-beyond-t", "content", "cu_seqlens: expected the last offset to be at most T = 8, got 9",
                      config=vi, cu=([0, 9], i32), cuk=([0, 8], i32), k=(1, 8, 16)))
    e.append(err_case("cuk-beyond-s", "content", "cu_seqlens_k: expected the last offset to be at most S = 6, got 8",
                      config=vi, cu=([0, 8], i32), cuk=([0, 8], i32), k=(1, 6, 16)))
    e.append(err_case("span-mismatch", "content", "expected document 1's candidate span", config=dict(vi, compress_ratio=2),
                      cu=([0, 4, 8], i32), cuk=([0, 2, 3], i32), k=(1, 4, 16)))
    return e


def main():
    args = case_args(__doc__, count=170).parse_args()
    gpu = os.path.join(args.out_dir, "gpu")
    g = grid(args.count)
    write_cases_text(os.path.join(gpu, "lightning_indexer_grid.json"), g, dumps_one_case_per_line(g))
    s = small()
    write_cases_text(os.path.join(gpu, "lightning_indexer_small.json"), s, dumps_one_case_per_line(s))
    e = error_cases()
    write_cases_text(os.path.join(args.out_dir, "lightning_indexer_errors.json"), e, dumps_one_case_per_line(e))


if __name__ == "__main__":
    main()
