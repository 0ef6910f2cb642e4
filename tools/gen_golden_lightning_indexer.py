#!/usr/bin/python3
"""Golden and error test cases for lightning_indexer (SPEC.md §2.1), computed independently of the C++ project.

Writes tests/cases/lightning_indexer_golden.json and tests/cases/lightning_indexer_errors.json in the
`attnjit test` format (tools/test_case.hpp). numpy only:

  * inputs are random values rounded to the case's dtype, stored as raw bits (exact);
  * score(t, s) = sum_h w[t, h] * relu(<q[t, h], k_s>) / sqrt(H * D) in float64, rounded once to float32,
    -0 canonicalised to +0;
  * candidate sets per SPEC.md §2.1 step 1 (causal prefixes (u + 1) // r, packed documents with
    document-local indices, rows past cu_seqlens[N] empty);
  * selection: the first n = min(topk, |C|) candidates under (score desc, index asc), where "score
    desc" is the order of the float32 bit patterns mapped to ordered uint32 (NaN-free inputs here), then
    written in ascending index order and padded with -1.

The cases are compared with mode "topk" (SPEC.md §1.9), so the golden indices are themselves checked
against the C++ scorer, and ties may go either way except where a case is deterministic ("ascending").
Covered: fp16 and bf16, causal and not, compress_ratio 1/2/4/128, packed documents (empty ones, rows past
the end, inactive pool capacity), H = 1 (exact-zero ties), H = 65 (a padded head tile), D = 8/24/256,
negative weights, topk above and below |C|, topk = 0, strided q/weights, repeated deterministic calls.

Usage: /usr/bin/python3 tools/gen_golden_lightning_indexer.py [--out-golden PATH] [--out-errors PATH]
"""
import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from casegen_common import (OUTB, add_indexer_outputs, dumps_indented, dumps_one_case_per_line,  # noqa: E402
                            indexer_compare, indexer_config, tensor, write_cases_text)
from casegen_numeric import from_bits, to_bits  # noqa: E402

SEED = 20261201
OP = "lightning_indexer"


def ordered_key(f32):
    b = np.asarray(f32, dtype=np.float32).view(np.uint32).astype(np.uint64)
    return np.where(b & 0x80000000, (~b) & 0xFFFFFFFF, b | 0x80000000)


def candidates(T, S, causal, r, cu, cuk):
    """Per row t: (pool offset, candidate count)."""
    rows = []
    for t in range(T):
        if cu is None:
            u, base, n = t, 0, S
        else:
            d = next((d for d in range(len(cu) - 1) if cu[d] <= t < cu[d + 1]), None)
            if d is None:
                rows.append((0, 0))
                continue
            u, base, n = t - cu[d], cuk[d], cuk[d + 1] - cuk[d]
        if causal:
            n = (u + 1) // r
        rows.append((base, n))
    return rows


def reference(q, k, w, topk, causal, r, cu, cuk):
    """q [B,T,H,D], k [B,S,D], w [B,T,H] float64 -> indices [B,T,topk] int."""
    B, T, H, D = q.shape
    S = k.shape[1]
    out = np.full((B, T, topk), -1, dtype=np.int64)
    for b in range(B):
        for t, (base, n) in enumerate(candidates(T, S, causal, r, cu, cuk)):
            if n == 0 or topk == 0:
                continue
            dots = q[b, t] @ k[b, base:base + n].T  # [H, n]
            sc = (w[b, t][:, None] * np.maximum(dots, 0.0)).sum(axis=0) / np.sqrt(H * D)
            f = sc.astype(np.float32)
            f[f == 0] = 0.0
            key = ordered_key(f)
            order = sorted(range(n), key=lambda s: (-int(key[s]), s))
            chosen = sorted(order[:min(topk, n)])
            out[b, t, :len(chosen)] = chosen
    return out


def bits_tensor(rng, dtype, shape, std=1.0, strides=None, low=None):
    """Random values rounded to dtype: (json tensor spec with raw bits over the whole storage, logical float64)."""
    if strides is None:
        strides = []
        acc = 1
        for e in reversed(shape):
            strides.insert(0, acc)
            acc *= e
    n = 1 + sum((e - 1) * s for e, s in zip(shape, strides)) if all(e > 0 for e in shape) else 0
    vals = rng.normal(0.0, std, size=n) if low is None else rng.uniform(low, -low, size=n)
    bits = to_bits(dtype, vals.astype(np.float32))
    stor = from_bits(dtype, bits)
    idx = np.zeros(shape, dtype=np.int64)
    for d, (e, s) in enumerate(zip(shape, strides)):
        sh = [1] * len(shape)
        sh[d] = e
        idx = idx + (np.arange(e, dtype=np.int64) * s).reshape(sh)
    logical = stor[idx] if n else np.zeros(shape)
    spec = tensor(shape, dtype, {"kind": "bits", "bits": [int(x) for x in bits]},
                  strides=None if strides == _contig(shape) else strides)
    return spec, logical


def _contig(shape):
    st, acc = [], 1
    for e in reversed(shape):
        st.insert(0, acc)
        acc *= e
    return st


def golden_case(rng, name, dtype, B, T, H, D, topk, causal=False, r=1, docs=None, S=None, w_neg=False,
                deterministic=False, q_strides=None, w_strides=None, repeat=False):
    """docs: list of per-document query lengths (packed; B = 1); S: pool capacity (packed) else T // r."""
    cu = cuk = None
    if docs is not None:
        assert B == 1
        cu = [0]
        cuk = [0]
        for L in docs:
            cu.append(cu[-1] + L)
            cuk.append(cuk[-1] + L // r)
        assert cu[-1] <= T
        S = max(S or 0, cuk[-1])
    else:
        S = T // r
    qs, q = bits_tensor(rng, dtype, [B, T, H, D], strides=q_strides)
    ks, k = bits_tensor(rng, dtype, [B, S, D])
    ws, w = bits_tensor(rng, dtype, [B, T, H], strides=w_strides)
    if w_neg:
        w = -np.abs(w)
        ws_bits = to_bits(dtype, -np.abs(from_bits(dtype, np.array(ws["init"]["bits"], dtype=np.uint64))).astype(np.float32))
        ws["init"]["bits"] = [int(x) for x in ws_bits]
    ref = reference(q, k, w, topk, causal, r, cu, cuk)
    config = indexer_config(topk, causal, r, deterministic)
    tensors = {"q": qs, "k": ks, "weights": ws}
    add_indexer_outputs(tensors, B, T, topk, cu, cuk)
    cmp = indexer_compare(deterministic)
    case = {"name": f"li/{name}", "op": OP, "config": config, "seed": int(rng.integers(1, 2**31)),
            "tensors": tensors, "compare": {"indices": cmp},
            "golden": {"indices": {"values": [int(x) for x in ref.reshape(-1)]}}}
    if repeat:
        case["repeat"] = True
    return case


def golden_cases():
    rng = np.random.default_rng(SEED)
    c = []
    c.append(golden_case(rng, "bf16/noncausal/b2", "bf16", 2, 9, 3, 16, 4))
    c.append(golden_case(rng, "fp16/causal/d8", "fp16", 1, 13, 4, 8, 5, causal=True, deterministic=True))
    c.append(golden_case(rng, "bf16/causal/r2/d24", "bf16", 1, 12, 2, 24, 3, causal=True, r=2))
    c.append(golden_case(rng, "fp16/causal/r4", "fp16", 1, 17, 5, 16, 2, causal=True, r=4, deterministic=True))
    c.append(golden_case(rng, "bf16/causal/r128", "bf16", 1, 300, 2, 8, 1, causal=True, r=128))
    c.append(golden_case(rng, "bf16/packed/noncausal/tail", "bf16", 1, 15, 3, 16, 4, docs=[5, 0, 7], S=14))
    c.append(golden_case(rng, "fp16/packed/causal/r2", "fp16", 1, 21, 2, 16, 2, causal=True, r=2,
                         docs=[6, 0, 5, 8], S=11, deterministic=True))
    c.append(golden_case(rng, "bf16/packed/causal/empty-first", "bf16", 1, 10, 4, 8, 3, causal=True, docs=[0, 4, 3],
                         deterministic=True, repeat=True))
    c.append(golden_case(rng, "fp16/h1/ties/negw", "fp16", 1, 11, 1, 8, 3, w_neg=True, deterministic=True))
    c.append(golden_case(rng, "bf16/h1/ties/causal", "bf16", 2, 10, 1, 16, 4, causal=True, w_neg=True,
                         deterministic=True, repeat=True))
    c.append(golden_case(rng, "fp16/negw/topk-above-S", "fp16", 1, 9, 6, 16, 20, w_neg=True))
    c.append(golden_case(rng, "bf16/topk0", "bf16", 1, 5, 2, 8, 0, causal=True))
    c.append(golden_case(rng, "bf16/h65/d256", "bf16", 1, 6, 65, 256, 2))
    c.append(golden_case(rng, "fp16/strided-q-w", "fp16", 2, 7, 3, 16, 3, causal=True,
                         q_strides=[7 * 3 * 24, 3 * 24, 24, 1], w_strides=[7 * 3, 1, 7]))
    return c


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
    # (tests/cases/gpu/lightning_indexer_bigtopk_*.json, tools/gen_cases_lightning_indexer_big.py).
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
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap.add_argument("--out-golden", default=os.path.join(root, "tests/cases/lightning_indexer_golden.json"))
    ap.add_argument("--out-errors", default=os.path.join(root, "tests/cases/lightning_indexer_errors.json"))
    args = ap.parse_args()
    g = golden_cases()
    write_cases_text(args.out_golden, g, dumps_indented({"cases": g}) + "\n")
    e = error_cases()
    write_cases_text(args.out_errors, e, dumps_one_case_per_line(e))


if __name__ == "__main__":
    main()
