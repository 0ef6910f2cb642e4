#!/usr/bin/python3
"""Golden test cases for lightning_indexer (SPEC.md §2.1), computed independently of the C++ project.
(Its rejection cases, tests/cases/lightning_indexer_errors.json, come from tests/gen/lightning_indexer_cases.py.)

Writes tests/cases/lightning_indexer_golden.json in the `attnjit test` format (tools/cli/test_case.hpp). numpy only:

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

Usage: /usr/bin/python3 tests/gen/lightning_indexer_golden.py [--out PATH]
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from casegen_common import (add_indexer_outputs, case_args, dumps_indented, indexer_compare,  # noqa: E402
                            indexer_config, tensor, write_cases_text)
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


def main():
    args = case_args(__doc__, out_dir=False, out_file="lightning_indexer_golden.json").parse_args()
    g = golden_cases()
    write_cases_text(args.out, g, dumps_indented({"cases": g}) + "\n")


if __name__ == "__main__":
    main()
