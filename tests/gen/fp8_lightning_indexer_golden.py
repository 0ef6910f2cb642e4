#!/usr/bin/python3
"""Golden test cases for fp8_lightning_indexer (SPEC.md §2.3), computed independently of the C++ project
(numpy, float64; nothing imported from the C++ side).

Writes tests/cases/fp8_lightning_indexer_golden.json in the `attnjit test` format (tools/cli/test_case.hpp).

Semantics, per batch b, query s, key t, group g (heads [g H/G, (g+1) H/G)):
  1. bf16 call: q8 = e4m3(q) (no scale); per key row sigma = max(max_d |k|, 1e-4) / 448 in fp32,
     k8 = e4m3(k / sigma) with an IEEE fp32 division (numpy float32 division is correctly rounded),
     kappa = sigma. e4m3 call: q8 = q, k8 = k, kappa = index_k_scale or 1.
     e4m3(x) is the saturating round-to-nearest-even store of SPEC.md §1.8 (casegen_numeric's
     e4m3_bits_satfinite: nearest entry of the table of all finite codes, ties to the even code).
  2. lo = clamp(ks[s], 0, S_kv), hi = clamp(ke[s], lo, S_kv).
  3. t in [lo, hi): logits = kappa * sum_h w[s, h] * relu(<q8, k8>) in float64, rounded once to fp32.
  4. t outside: -inf with clean_logits; otherwise untouched (the poison NaN stays, "nan" in the golden
     values; the compare mode skips those elements).

Inputs are exact bit patterns ({"kind": "bits"}) over the whole storage of each tensor (stride gaps
included); weights, scales and windows are "values". The logits are compared with the "masked_nse"
mode (tools/cli/test_case.hpp): the +-inf pattern exactly, sum(d^2) / sum(ref^2) <= 1e-6 over the finite
reference elements (SPEC.md allows 1e-3; the reference and this script both compute in float64, and the
kernel's fp32 sums stay far below 1e-6).

Cases: both dtypes, D 64 and 128, H/G 1, 2, 3, 4, 5, 8, 16, 128, G 1, 2 and 4, negative weights, windows
outside [0, S_kv), ke < ks, empty and full windows, S_kv crossing a 128-key tile, saturating and
subnormal queries, zero key rows (sigma floor), a broadcast (zero-stride) query batch axis, padded key
strides, transposed weights, strided windows with decoys in the gaps, scales present and absent,
clean_logits on and off, empty outputs (S_kv = 0, S = 0, B = 0), validate_inputs with valid scales.

Usage: /usr/bin/python3 tests/gen/fp8_lightning_indexer_golden.py [--out PATH]
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from casegen_common import case_args, contiguous, dumps_indented, storage_size, tensor, write_cases_text  # noqa: E402
from casegen_numeric import (bf16_bits_from_finite_f32, bf16_bits_to_f32, e4m3_bits_nearest,  # noqa: E402
                             e4m3_bits_satfinite, e4m3_from_bits, fmt_value, storage_index)

SEED = 20261130
NSE_TOL = 1e-6


def e4m3_round(x32):
    """Saturating RNE fp32 -> e4m3 -> float64 value (SPEC.md §1.8)."""
    return e4m3_from_bits(e4m3_bits_satfinite(np.asarray(x32, dtype=np.float32)))


def self_test():
    # e4m3 store: saturation, ties to even, subnormals, flush to zero
    x = np.array([448.0, 464.0, 1e9, -500.0, 0.0703125, 2.0 ** -10, 2.0 ** -10 * 1.01, 1.0625, 1.1875], np.float32)
    want = np.array([448.0, 448.0, 448.0, -448.0, 0.0703125, 0.0, 2.0 ** -9, 1.0, 1.25])
    got = e4m3_round(x)
    assert np.array_equal(got, want), got
    # sigma and the division are fp32
    k = np.array([3.0, -7.0], np.float32)
    sigma = np.float32(max(np.float32(7.0), np.float32(1e-4))) / np.float32(448.0)
    assert sigma.dtype == np.float32 and np.float32(-7.0) / sigma == np.float32(-448.0), sigma
    _ = k


# ----------------------------------------------------------------------------------------------------
# Inputs


def strided_storage(values, shape, strides, filler):
    """Storage array (1-D) holding `values` (an array of `shape`) at the strided positions, `filler`
    values (same dtype) in the gaps."""
    n = storage_size(shape, strides)
    st = filler(n)
    if n:
        st[storage_index(shape, strides).reshape(-1)] = np.asarray(values).reshape(-1)
    return st


def reference(dtype, q, k, w, ks, ke, scale, clean, HG):
    """q, k: float32 input values [B,S,H,D], [B,S_kv,G,D]; returns float32 logits [B,S,S_kv,G] (NaN where
    the op leaves the output untouched)."""
    B, S, H, D = q.shape
    S_kv, G = k.shape[1], k.shape[2]
    if dtype == "bf16":
        q8 = e4m3_round(q)
        amax = np.abs(k).max(axis=3) if D else np.zeros(k.shape[:3], np.float32)
        sigma = (np.maximum(amax.astype(np.float32), np.float32(1e-4)) / np.float32(448.0)).astype(np.float32)
        k8 = e4m3_round((k / sigma[..., None]).astype(np.float32))
        kappa = sigma.astype(np.float64)
    else:
        q8, k8 = q.astype(np.float64), k.astype(np.float64)
        kappa = scale.astype(np.float64) if scale is not None else np.ones((B, S_kv, G))
    out = np.full((B, S, S_kv, G), np.nan, dtype=np.float32)
    for s in range(S):
        lo = min(max(int(ks[s]), 0), S_kv)
        hi = min(max(int(ke[s]), lo), S_kv)
        if clean:
            out[:, s, :, :] = -np.inf
        for g in range(G):
            heads = range(g * HG, (g + 1) * HG)
            for t in range(lo, hi):
                for b in range(B):
                    acc = 0.0
                    for h in heads:
                        dot = float(np.dot(q8[b, s, h].astype(np.float64), k8[b, t, g].astype(np.float64)))
                        acc += float(w[s, h]) * max(dot, 0.0)
                    out[b, s, t, g] = np.float32(kappa[b, t, g] * acc)
    return out


def make_case(rng, name, dtype, B, S, S_kv, H, G, D, *, windows, clean=True, scale=False, validate=False,
              q_std=1.0, k_std=1.0, q_special=False, k_special=False, q_bcast=False, k_pad=0, w_transposed=False,
              win_stride=1, scale_stride=None):
    HG = H // G
    # q / k values (float32) and storage bits
    qv = (rng.standard_normal((B, S, H, D)) * q_std).astype(np.float32)
    kv = (rng.standard_normal((B, S_kv, G, D)) * k_std).astype(np.float32)
    if q_special and qv.size:
        flat = qv.reshape(-1)
        idx = rng.choice(flat.size, size=min(flat.size, 12), replace=False)
        flat[idx] = np.array([600.0, -1000.0, 448.0, -464.0, 2.0 ** -11, -2.0 ** -9, 3e-3, 460.0, -2.0 ** -10,
                              0.0, 1.0625, 1.1875][:len(idx)], np.float32)
    if k_special and kv.size:
        kv[0, 0, 0, :] = 0.0                      # zero row: sigma = 1e-4 / 448
        if S_kv > 1:
            kv[0, 1, 0, :] = (kv[0, 1, 0, :] * 1e-6).astype(np.float32)  # amax below the 1e-4 floor
        if S_kv > 2:
            kv[0, 2, 0, 3] = 3.0e4                # one huge value, the rest tiny after scaling
    if dtype == "bf16":
        qbits = bf16_bits_from_finite_f32(qv)
        kbits = bf16_bits_from_finite_f32(kv)
        qv = bf16_bits_to_f32(qbits).reshape(qv.shape)
        kv = bf16_bits_to_f32(kbits).reshape(kv.shape)
    else:
        qbits = e4m3_bits_nearest(qv)
        kbits = e4m3_bits_nearest(kv)
        qv = e4m3_from_bits(qbits).astype(np.float32).reshape(qv.shape)
        kv = e4m3_from_bits(kbits).astype(np.float32).reshape(kv.shape)
    filler = {"bf16": lambda n: bf16_bits_from_finite_f32(rng.standard_normal(n).astype(np.float32) * 50),
              "e4m3": lambda n: e4m3_bits_nearest(rng.standard_normal(n) * 50)}[dtype]
    unit = 16 if dtype == "e4m3" else 8  # elements per 16 bytes

    q_shape, k_shape = [B, S, H, D], [B, S_kv, G, D]
    q_st = contiguous(q_shape)
    if q_bcast:
        q_st = [0] + q_st[1:]
        qv = np.broadcast_to(qv[:1], qv.shape).copy()
        qbits = np.broadcast_to(qbits.reshape(q_shape)[:1], q_shape).copy()
    k_st = contiguous(k_shape)
    if k_pad:
        row = D + k_pad * unit
        k_st = [S_kv * G * row + unit, G * row, row, 1]
    tensors = {
        "index_q": tensor(q_shape, dtype, {"kind": "bits", "bits": strided_storage(qbits.reshape(q_shape), q_shape, q_st,
                                                                                     filler).tolist()},
                          None if q_st == contiguous(q_shape) else q_st),
        "index_k": tensor(k_shape, dtype, {"kind": "bits", "bits": strided_storage(kbits.reshape(k_shape), k_shape, k_st,
                                                                                     filler).tolist()},
                          None if k_st == contiguous(k_shape) else k_st),
    }
    # weights [S, H] fp32 (some negative), possibly transposed storage
    w = (rng.standard_normal((S, H)) * 0.5).astype(np.float32)
    w_st = [1, S] if w_transposed and S > 1 and H > 1 else contiguous([S, H])
    w_store = strided_storage(w, [S, H], w_st, lambda n: np.full(n, 777.0, np.float32))
    tensors["weights"] = tensor([S, H], "fp32", {"kind": "values", "values": [fmt_value(x) for x in w_store]},
                                None if w_st == contiguous([S, H]) else w_st)
    ks, ke = windows
    ks, ke = np.asarray(ks, np.int64), np.asarray(ke, np.int64)
    for nm, arr in (("cu_seqlen_ks", ks), ("cu_seqlen_ke", ke)):
        st = [win_stride]
        store = strided_storage(arr, [S], st, lambda n: np.full(n, -12345, np.int64))
        tensors[nm] = tensor([S], "int32", {"kind": "values", "values": [int(x) for x in store]},
                             None if win_stride == 1 else st)
    sc = None
    if scale:
        sc = rng.uniform(0.05, 3.0, (B, S_kv, G)).astype(np.float32)
        s_shape = [B, S_kv, G]
        s_st = scale_stride or contiguous(s_shape)
        store = strided_storage(sc, s_shape, s_st, lambda n: np.full(n, -1.0, np.float32))
        tensors["index_k_scale"] = tensor(s_shape, "fp32", {"kind": "values", "values": [fmt_value(x) for x in store]},
                                          None if scale_stride is None else s_st)
    tensors["logits"] = tensor([B, S, S_kv, G], "fp32", {"kind": "poison"}, output=True)
    out = reference(dtype, qv.reshape(q_shape), kv.reshape(k_shape), w, ks, ke, sc, clean, HG)
    config = {}
    if not clean:
        config["clean_logits"] = False
    if validate:
        config["validate_inputs"] = True
    return {
        "name": name,
        "op": "fp8_lightning_indexer",
        "config": config,
        "tensors": tensors,
        "compare": {"logits": {"mode": "masked_nse", "tol": NSE_TOL}},
        "golden": {"logits": {"values": [fmt_value(x) if not np.isnan(x) else "nan" for x in out.reshape(-1)]}},
    }


def build():
    rng = np.random.default_rng(SEED)
    cases = []
    add = cases.append
    # Windows: before the start, past the end, ke < ks, empty, full, ordinary.
    w6 = ([-5, 0, 30, 12, 20, 3], [4, 37, 60, 9, 20, 36])
    add(make_case(rng, "fp8li/bf16/d64/hg4/g1/windows-outside", "bf16", 1, 6, 37, 4, 1, 64, windows=w6))
    add(make_case(rng, "fp8li/bf16/d128/hg3/g2/no-clean", "bf16", 2, 4, 19, 6, 2, 128,
                  windows=([0, -3, 5, 18], [19, 7, 2, 25]), clean=False))
    add(make_case(rng, "fp8li/e4m3/d64/hg2/g2/scale", "e4m3", 2, 5, 21, 4, 2, 64,
                  windows=([0, 2, -1, 10, 21], [21, 9, 30, 10, 22]), scale=True))
    add(make_case(rng, "fp8li/e4m3/d128/hg1/g1/no-scale", "e4m3", 1, 9, 13, 1, 1, 128,
                  windows=([0, 1, 2, 3, 4, 5, 6, -7, 13], [1, 3, 5, 7, 9, 11, 13, 100, 13])))
    add(make_case(rng, "fp8li/bf16/d64/hg16/specials", "bf16", 1, 3, 9, 16, 1, 64,
                  windows=([0, 2, 0], [9, 8, 3]), q_special=True, k_special=True, q_std=4.0))
    add(make_case(rng, "fp8li/e4m3/d64/hg8/g1/strided", "e4m3", 2, 5, 11, 8, 1, 64,
                  windows=([0, 1, 3, -2, 6], [11, 4, 9, 5, 6]), scale=True, q_bcast=True, k_pad=1,
                  w_transposed=True, win_stride=2, scale_stride=[11 * 3, 3, 1]))
    add(make_case(rng, "fp8li/bf16/d64/hg5/g1/tile-crossing", "bf16", 1, 3, 130, 5, 1, 64,
                  windows=([0, 100, 127], [130, 129, 130])))
    add(make_case(rng, "fp8li/e4m3/d64/hg128/g1/scale", "e4m3", 1, 2, 9, 128, 1, 64,
                  windows=([0, 4], [9, 6]), scale=True))
    add(make_case(rng, "fp8li/e4m3/d128/hg2/g4/no-clean", "e4m3", 1, 3, 10, 8, 4, 128,
                  windows=([1, 0, 9], [8, 10, 4]), clean=False, scale=True))
    add(make_case(rng, "fp8li/bf16/d128/hg4/g2/strided-validate", "bf16", 2, 3, 17, 8, 2, 128,
                  windows=([0, 5, 16], [17, 12, 17]), k_pad=2, q_bcast=True, validate=True))
    add(make_case(rng, "fp8li/e4m3/d64/hg1/g2/validate", "e4m3", 1, 4, 6, 2, 2, 64,
                  windows=([0, 1, 2, 3], [6, 5, 4, 3]), scale=True, validate=True))
    add(make_case(rng, "fp8li/bf16/d64/hg4/empty-skv", "bf16", 1, 2, 0, 4, 1, 64, windows=([0, 0], [0, 5])))
    add(make_case(rng, "fp8li/e4m3/d64/hg2/empty-s", "e4m3", 1, 0, 5, 2, 1, 64, windows=([], [])))
    add(make_case(rng, "fp8li/bf16/d128/hg2/empty-b", "bf16", 0, 2, 5, 2, 1, 128, windows=([0, 1], [5, 3])))
    for i, c in enumerate(cases):
        c["seed"] = 100 + i
    return cases


def main():
    args = case_args(__doc__, out_dir=False, out_file="fp8_lightning_indexer_golden.json").parse_args()
    self_test()
    cases = build()
    write_cases_text(args.out, cases, dumps_indented({"cases": cases}) + "\n")


if __name__ == "__main__":
    main()
