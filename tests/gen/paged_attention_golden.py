#!/usr/bin/python3
"""Golden test cases for gqa_paged_fwd and mha_decode_paged (SPEC.md §2.9, §2.11), computed independently
of the C++ project (numpy, float64, nothing imported from the repository).

One generator for both ops (named after their family, paged attention): the mha_decode_paged cases
continue the gqa_paged_fwd cases' random stream, so splitting it would change them.
Writes tests/cases/gqa_paged_fwd_golden.json and tests/cases/mha_decode_paged_golden.json in the
`attnjit test` format (tools/cli/test_case.hpp). numpy 1.24 has float16 but neither bfloat16 nor float8, so:

  * bf16: the top 16 bits of an fp32, rounded to nearest even (inputs are finite).
  * e4m3 (float8_e4m3fn, SPEC.md §1.8): decoded from its definition (sign, 4-bit exponent with bias 7,
    3-bit mantissa, subnormals m * 2^-9, NaN = S.1111.111); random inputs are encoded to the nearest
    finite code (NaN codes never occur in the rows an op reads).

Inputs are exact bit patterns ({"kind": "bits"}) covering the whole storage of each float tensor (stride
gaps included); index tensors, FP8 scales and sinks are "values" (sinks may be "inf" / "-inf").

The page pools are filled with RANDOM BYTES first (any bit pattern: NaN, inf, huge values; never an all-zero
pool) and only the rows the op reads are then overwritten with finite random values. Page-table entries of
logical pages >= ceil(kv_len / PS), and the whole table row of an empty request, hold out-of-range values
(999999, -1, NP, -123456): a reference or kernel that reads an unused row or entry produces NaN or faults.

Semantics, gqa_paged_fwd (SPEC.md §1.6-§1.8, §2.7, §2.9), per request b (q rows [cu[b], cu[b+1]),
kv_len = cache_seqlens[b]), query head h, kv head r = h // (H / H_kv): logical key j < kv_len is pool row
(page_table[b, j // PS], j % PS, r); p_i = kv_len - q_len + i; q dequantised by q_scale[b, r] when q is
e4m3, k / v by k_scale / v_scale[b, r] when the cache is e4m3 (per-tensor scales are zero-stride [B, H_kv]
views of one element); RoPE rotates the first R channels of q at p_i and of key j at j (neox pairs
(c, c + R/2), interleaved pairs (2c, 2c + 1)); z = alpha * <q, k>, l = c * tanh(z / c) with softcap c > 0;
key j visible iff (!causal || j <= p_i) and (wL == -1 || j >= p_i - wL) and (wR == -1 || j <= p_i + wR);
row softmax with sink s = sinks[h] (absent = -inf): s = +inf gives o = 0; M = max(max l, s) = -inf gives
o = 0; else o = sum exp(l - M) v / (sum exp(l - M) + exp(s - M)).

mha_decode_paged (SPEC.md §2.11): q [B, S_q, H, D], k / v [N_kv, H, D], L = real_seqlen_kv[b], key j < L is
row block_table[b, j // PS] * PS + j % PS (same head), alpha = 1/sqrt(D), causal visibility
j <= i + L - S_q, no sink; rows with no visible key are zeros.

Expected outputs: "golden" o as the bits of the exact (float64) result rounded once to the output dtype
(float64 -> fp32 -> fp16/bf16, RNE, as the reference's store). o is compared with rel_l2 at the SPEC.md
§1.12 tolerance of its path (bf16 1e-2, fp16 5e-3, any e4m3 operand 5e-2; the same compare entry then
checks the kernel against the reference on a GPU). Outputs are poisoned.

Usage: /usr/bin/python3 tests/gen/paged_attention_golden.py [--out-dir DIR] [--self-test-only]
"""
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from casegen_common import ELEM_BYTES, TOL, CaseList, attention_config, contiguous, storage_size  # noqa: E402
from casegen_numeric import (E4M3, STORAGE_DTYPE, attend, bf16_bits_from_finite_f32, bf16_from_bits,  # noqa: E402
                             bits_spec, e4m3_bits_nearest, fp16_from_bits, from_bits, golden_main, rope_rotate,
                             round_out, storage_index, to_bits, values_spec)

SEED = 20240905
BAD_PAGES = [999999, -1, -123456, 2 ** 31 - 1]  # never valid; NP itself is added per case

# ----------------------------------------------------------------------------------------------------
# Number formats (the conversions themselves are in tests/gen/casegen_numeric.py)


def self_test():
    f = np.array([1.0, 1.00390625, 1.01171875, 1.0 + 2 ** -8 + 2 ** -20, -3.0, 65504.0], np.float32)
    got = bf16_from_bits(bf16_bits_from_finite_f32(f))
    want = np.array([1.0, 1.0, 1.015625, 1.0078125, -3.0, 65536.0], np.float64)
    assert np.all(got == want), got
    assert E4M3[0x7E] == 448.0 and E4M3[0x08] == 2.0 ** -6 and E4M3[0x01] == 2.0 ** -9 and E4M3[0xFE] == -448.0
    assert np.isnan(E4M3[0x7F]) and np.isnan(E4M3[0xFF])
    codes = np.array([c for c in range(256) if c not in (0x7F, 0xFF, 0x80)], np.uint8)
    assert np.all(e4m3_bits_nearest(E4M3[codes]) == codes)
    assert fp16_from_bits(round_out("fp16", np.array([1.0 / 3.0])))[0] == np.float16(1.0 / 3.0)
    # the paged gather: a hand-made pool with two pages, PS = 2, read through a scattered table
    pool = np.arange(4 * 1 * 1).reshape(2, 2, 1, 1).astype(np.float64)
    rows = [pool[[1, 0][j // 2], j % 2, 0, 0] for j in range(3)]
    assert rows == [2.0, 3.0, 0.0]
    # the row softmax: a +inf sink zeroes, a -inf sink is absent, an empty row is zero
    Q, K, V = np.ones((1, 2)), np.array([[1.0, 0.0], [0.0, 1.0]]), np.array([[1.0, 2.0], [3.0, 4.0]])
    o, _ = attend(Q, K, V, 1.0, 0.0, False, -1, -1, math.inf, 0)
    assert np.all(o == 0)
    o, _ = attend(Q, K, V, 1.0, 0.0, False, -1, -1, -math.inf, 0)
    assert np.allclose(o, [[2.0, 3.0]])
    o, _ = attend(Q, K, V, 1.0, 0.0, True, -1, -1, -math.inf, -5)  # p = -5 + ... : nothing visible
    assert np.all(o == 0)
    print("  number formats, gather and softmax ok")


# ----------------------------------------------------------------------------------------------------
# Tensors


class Tensor:
    """A float tensor given by the bits of its whole storage; `val` is the decoded logical view."""

    def __init__(self, dtype, shape, strides=None, bits=None):
        self.dtype, self.shape = dtype, list(shape)
        self.strides = list(strides) if strides is not None else contiguous(shape)
        self.explicit_strides = strides is not None
        n = storage_size(self.shape, self.strides)
        self.bits = np.zeros(n, STORAGE_DTYPE[dtype]) if bits is None else np.asarray(bits, STORAGE_DTYPE[dtype])
        assert self.bits.size == n

    @staticmethod
    def random(rng, dtype, shape, strides=None, std=1.0, values=None):
        t = Tensor(dtype, shape, strides)
        n = t.bits.size
        if values is None:
            values = rng.normal(0.0, std, size=n)
        if n:
            t.bits = to_bits(dtype, np.asarray(values, dtype=np.float64).reshape(-1))
        return t

    @staticmethod
    def garbage(rng, dtype, shape, strides=None):
        """Random bytes everywhere (NaN / inf / huge patterns included)."""
        t = Tensor(dtype, shape, strides)
        n = t.bits.size
        t.bits = rng.integers(0, 256 ** ELEM_BYTES[dtype], size=n, dtype=np.int64).astype(STORAGE_DTYPE[dtype])
        return t

    def set_logical(self, index_tuple, values):
        """Overwrites the logical elements selected by numpy `index_tuple` with encoded finite values."""
        idx = storage_index(self.shape, self.strides)[index_tuple]
        self.bits[idx.reshape(-1)] = to_bits(self.dtype, np.asarray(values, np.float64).reshape(-1))

    @property
    def val(self):
        if any(e == 0 for e in self.shape):
            return np.zeros(self.shape)
        return from_bits(self.dtype, self.bits)[storage_index(self.shape, self.strides)]

    def spec(self):
        return bits_spec(self.dtype, self.shape, self.bits, self.strides if self.explicit_strides else None)


def padded_strides(shape, dtype, pads):
    """Class F strides: innermost 1; the stride of dim d is (the stride of d + 1) * extent(d + 1) plus pads[d]
    elements (a multiple of 16 bytes)."""
    unit = 16 // ELEM_BYTES[dtype]
    st = [1] * len(shape)
    for d in range(len(shape) - 2, -1, -1):
        assert pads[d] % unit == 0
        st[d] = st[d + 1] * shape[d + 1] + pads[d]
    return st


# ----------------------------------------------------------------------------------------------------
# Page assignment (the reference itself, one head's attention, is casegen_numeric.attend)


def assign_pages(rng, kv_lens, q_lens, PS, spare_pages, share=False):
    """Scattered, non-monotonic pages: returns (NP, per-request list of physical pages of the used logical
    pages). Requests with q_len = 0 still get pages for their kv_len (never read). With `share`, the last
    request reuses the first request's first page (a read-only op may share pages)."""
    need = [(kl + PS - 1) // PS for kl in kv_lens]
    total = sum(need) + spare_pages
    perm = [int(x) for x in rng.permutation(total)]
    pages, at = [], 0
    for n in need:
        pages.append(perm[at: at + n])
        at += n
    if share and len(pages) >= 2 and pages[0] and pages[-1]:
        # the shared page is full in request 0 when kv_len[0] >= PS; keep the slot count of the last request
        pages[-1][0] = pages[0][0]
    return total, pages


def table_rows(rng, pages, W, NP, trash=True):
    """page_table rows: the used pages, then out-of-range garbage (or, trash=False, valid but unused pages)."""
    rows = []
    bad = BAD_PAGES + [NP, NP + 7]
    for pg in pages:
        assert len(pg) <= W
        row = list(pg)
        while len(row) < W:
            row.append(int(bad[rng.integers(len(bad))]) if trash else int(rng.integers(max(NP, 1))))
        rows.append(row)
    return rows


# ----------------------------------------------------------------------------------------------------
# gqa_paged_fwd


def gqa_paged_case(rng, name, seed, *, q_dtype, kv_dtype, H, H_kv, D, PS, reqs, out_dtype=None, causal=True,
                   wl=-1, wr=-1, softcap=0.0, sm_scale=None, rope=None, R=None, P=None, sinks=None,
                   scales="per-request", W_extra=1, spare_pages=2, share=False, std=1.0, validate=False,
                   q_pads=None, pool_pads=None, v_pool_pads=None, table_pad=0, explicit_rotary_dim=True):
    B = len(reqs)
    q_lens = [q for q, _ in reqs]
    kv_lens = [k for _, k in reqs]
    assert all(q <= k for q, k in reqs)
    cdt = out_dtype if q_dtype == "e4m3" else q_dtype
    fp8_path = q_dtype == "e4m3" or kv_dtype == "e4m3"
    cu = [0]
    for ql in q_lens:
        cu.append(cu[-1] + ql)
    T_q = cu[-1]
    NP, pages = assign_pages(rng, kv_lens, q_lens, PS, spare_pages, share)
    W = max([len(p) for p in pages] + [0]) + W_extra
    alpha = sm_scale if sm_scale is not None else 1.0 / math.sqrt(D)
    alpha = float(np.float32(alpha))  # the call's scale is an fp32

    tensors = {}
    q_shape = [T_q, H, D]
    q = Tensor.random(rng, q_dtype, q_shape, padded_strides(q_shape, q_dtype, q_pads) if q_pads else None, std=std)
    pool_shape = [NP, PS, H_kv, D]
    pools = {}
    for n, pads in (("k_pages", pool_pads), ("v_pages", v_pool_pads if v_pool_pads is not None else pool_pads)):
        st = padded_strides(pool_shape, kv_dtype, pads) if pads else None
        t = Tensor.garbage(rng, kv_dtype, pool_shape, st)
        # the rows the op reads: (page, slot) of every key of every request with queries, all heads
        for b, (ql, kl) in enumerate(reqs):
            if ql == 0:
                continue
            for j in range(kl):
                pg, s = pages[b][j // PS], j % PS
                t.set_logical((pg, s), rng.normal(0.0, std if n == "k_pages" else 1.0, size=H_kv * D))
        pools[n] = t
    tensors["q"] = q.spec()
    tensors["k_pages"] = pools["k_pages"].spec()
    tensors["v_pages"] = pools["v_pages"].spec()
    rows = table_rows(rng, pages, W, NP)
    if table_pad:  # a strided [B, W] view: gaps hold valid-looking page numbers that must not be used
        st = [W + table_pad, 1]
        flat = []
        for b in range(B):
            flat += rows[b]
            if b + 1 < B:
                flat += [int(rng.integers(max(NP, 1))) for _ in range(table_pad)]
        tensors["page_table"] = values_spec("int32", [B, W], flat, st)
    else:
        tensors["page_table"] = values_spec("int32", [B, W], [x for r in rows for x in r])
    tensors["cache_seqlens"] = values_spec("int32", [B], kv_lens)
    tensors["cu_seqlens_q"] = values_spec("int32", [B + 1], cu)

    scale = {}
    if q_dtype == "e4m3":
        s = rng.uniform(0.5, 2.0, size=(B, H_kv)).astype(np.float32)
        scale["q_scale"] = s.astype(np.float64)
        tensors["q_scale"] = values_spec("fp32", [B, H_kv], s.reshape(-1))
    if kv_dtype == "e4m3":
        for n in ("k_scale", "v_scale"):
            if scales == "per-tensor":  # a zero-stride view of one element
                s = np.float32(rng.uniform(0.5, 2.0))
                scale[n] = np.full((B, H_kv), float(s))
                tensors[n] = values_spec("fp32", [B, H_kv], [s], strides=[0, 0])
            else:
                s = rng.uniform(0.5, 2.0, size=(B, H_kv)).astype(np.float32)
                scale[n] = s.astype(np.float64)
                tensors[n] = values_spec("fp32", [B, H_kv], s.reshape(-1))
    cos = sin = None
    if rope:
        R = R or D
        assert R % 2 == 0 and 2 <= R <= D
        half = R // 2
        P = P if P is not None else max(kv_lens + [0])
        theta = 10000.0 ** (-np.arange(half) * 2.0 / R)
        ang = np.arange(P)[:, None] * theta[None, :]
        ct = Tensor.random(rng, cdt, [P, half], values=np.cos(ang).reshape(-1))
        st = Tensor.random(rng, cdt, [P, half], values=np.sin(ang).reshape(-1))
        cos, sin = ct.val, st.val
        tensors["rope_cos"] = ct.spec()
        tensors["rope_sin"] = st.spec()
    sink_vals = None
    if sinks is not None:
        assert len(sinks) == H
        sink_vals = [float(np.float32(x)) for x in sinks]
        tensors["sinks"] = values_spec("fp32", [H], sink_vals)

    # expected o
    qv, kp, vp = q.val, pools["k_pages"].val, pools["v_pages"].val
    g = H // H_kv
    o64 = np.zeros(q_shape)
    n_zero_rows = 0
    for b, (ql, kl) in enumerate(reqs):
        if ql == 0:
            continue
        q0 = cu[b]
        p0 = kl - ql
        pg = np.array([pages[b][j // PS] for j in range(kl)], dtype=np.int64)
        sl = np.arange(kl) % PS
        for h in range(H):
            r = h // g
            Q = qv[q0: q0 + ql, h, :].copy()
            K = kp[pg, sl, r, :].copy() if kl else np.zeros((0, D))
            V = vp[pg, sl, r, :].copy() if kl else np.zeros((0, D))
            assert np.all(np.isfinite(K)) and np.all(np.isfinite(V))
            if q_dtype == "e4m3":
                Q *= scale["q_scale"][b, r]
            if kv_dtype == "e4m3":
                K *= scale["k_scale"][b, r]
                V *= scale["v_scale"][b, r]
            if rope:
                pq = np.arange(ql) + p0
                Q = rope_rotate(Q, cos[pq], sin[pq], rope, R)
                K = rope_rotate(K, cos[:kl], sin[:kl], rope, R)
            sink = sink_vals[h] if sink_vals is not None else -math.inf
            o, _ = attend(Q, K, V, alpha, softcap, causal, wl, wr, sink, p0)
            n_zero_rows += int(np.sum(np.all(o == 0, axis=1)))
            o64[q0: q0 + ql, h, :] = o
    assert np.all(np.isfinite(o64))
    tensors["o"] = {"shape": q_shape, "dtype": cdt, "init": {"kind": "poison"}, "output": True}

    config = attention_config(causal, wl, wr, sm_scale, softcap, rope, R, explicit_rotary_dim, out_dtype, validate)
    tol = TOL["e4m3"] if fp8_path else TOL[cdt]
    case = {"name": name, "op": "gqa_paged_fwd", "config": config, "seed": seed, "tensors": tensors,
            "compare": {"o": {"mode": "rel_l2", "tol": tol}},
            "golden": {"o": {"bits": [int(x) for x in round_out(cdt, o64.reshape(-1))]}}}
    return case, n_zero_rows


def gqa_paged_cases(rng):
    cases = CaseList(rng, gqa_paged_case, "gqa-paged-golden/", 6000)
    add = cases.add

    add("fp16/d64/h4kv2/ps16/causal/mixed/q1,5,0-kv37,20,9", q_dtype="fp16", kv_dtype="fp16", H=4, H_kv=2, D=64,
        PS=16, reqs=[(1, 37), (5, 20), (0, 9)], W_extra=2, validate=True)
    add("bf16/d128/h8kv1/mqa/ps1/noncausal/q1,3,1-kv5,3,1", q_dtype="bf16", kv_dtype="bf16", H=8, H_kv=1, D=128,
        PS=1, reqs=[(1, 5), (3, 3), (1, 1)], causal=False, spare_pages=5)
    add("fp16/d64/h2kv2/mha/ps3/causal/wl4/q6,1-kv17,10", q_dtype="fp16", kv_dtype="fp16", H=2, H_kv=2, D=64, PS=3,
        reqs=[(6, 17), (1, 10)], wl=4, W_extra=3)
    add("bf16/d64/h4kv1/ps64/causal/q1,7,2-kv100,64,65", q_dtype="bf16", kv_dtype="bf16", H=4, H_kv=1, D=64, PS=64,
        reqs=[(1, 100), (7, 64), (2, 65)], spare_pages=1)
    add("fp16/d64/h2kv1/ps16/causal/cap20/std3/q9-kv25", q_dtype="fp16", kv_dtype="fp16", H=2, H_kv=1, D=64, PS=16,
        reqs=[(9, 25)], softcap=20.0, std=3.0)
    add("fp16/d64/h4kv2/ps16/causal/rope-neox-r32/q3,1-kv19,33/p36", q_dtype="fp16", kv_dtype="fp16", H=4, H_kv=2,
        D=64, PS=16, reqs=[(3, 19), (1, 33)], rope="neox", R=32, P=36)
    add("bf16/d64/h2kv1/ps3/noncausal/wl3-wr1/rope-interleaved-r10/q4,2-kv8,11", q_dtype="bf16", kv_dtype="bf16",
        H=2, H_kv=1, D=64, PS=3, reqs=[(4, 8), (2, 11)], causal=False, wl=3, wr=1, rope="interleaved", R=10)
    add("bf16/d64/h4kv2/ps16/noncausal/sinks-inf-mix/q2,3-kv18,5", q_dtype="bf16", kv_dtype="bf16", H=4, H_kv=2,
        D=64, PS=16, reqs=[(2, 18), (3, 5)], causal=False, sinks=[math.inf, -math.inf, 1.5, -2.0], validate=True)
    add("fp16/d64/h4kv4/ps16/causal/wl2-wr0/sinks/q5,1-kv21,16", q_dtype="fp16", kv_dtype="fp16", H=4, H_kv=4, D=64,
        PS=16, reqs=[(5, 21), (1, 16)], wl=2, wr=0, sinks=[0.5, -1.25, 3.0, 8.0])
    add("fp16-e4m3/d64/h4kv2/ps16/causal/per-request-scales/q1,4-kv29,12", q_dtype="fp16", kv_dtype="e4m3", H=4,
        H_kv=2, D=64, PS=16, reqs=[(1, 29), (4, 12)], validate=True)
    add("bf16-e4m3/d128/h2kv1/ps3/causal/per-tensor-scales/wl5/rope-neox-r64/q3,1-kv10,7", q_dtype="bf16",
        kv_dtype="e4m3", H=2, H_kv=1, D=128, PS=3, reqs=[(3, 10), (1, 7)], scales="per-tensor", wl=5, rope="neox",
        R=64, P=12)
    add("e4m3-e4m3-fp16/d64/h4kv2/ps16/causal/per-tensor-kv-scales/q2,1-kv20,3", q_dtype="e4m3", kv_dtype="e4m3",
        out_dtype="fp16", H=4, H_kv=2, D=64, PS=16, reqs=[(2, 20), (1, 3)], scales="per-tensor", validate=True)
    add("e4m3-e4m3-bf16/d64/h2kv2/ps1/noncausal/cap5/std2/sinks/q3-kv6", q_dtype="e4m3", kv_dtype="e4m3",
        out_dtype="bf16", H=2, H_kv=2, D=64, PS=1, reqs=[(3, 6)], causal=False, softcap=5.0, std=2.0,
        sinks=[0.25, -math.inf], spare_pages=3)
    add("fp16/d256/h2kv1/ps16/causal/q4,1-kv40,17", q_dtype="fp16", kv_dtype="fp16", H=2, H_kv=1, D=256, PS=16,
        reqs=[(4, 40), (1, 17)], spare_pages=1)
    add("bf16/d64/h2kv1/ps16/causal/strided-q-pools-table/shared-page/sm0.2/q2,1,3-kv20,16,33", q_dtype="bf16",
        kv_dtype="bf16", H=2, H_kv=1, D=64, PS=16, reqs=[(2, 20), (1, 16), (3, 33)], share=True, sm_scale=0.2,
        q_pads=[8, 16, 0], pool_pads=[8, 16, 8, 0], v_pool_pads=[0, 8, 0, 0], table_pad=3)
    add("fp16/d64/h2kv2/ps16/causal/b0", q_dtype="fp16", kv_dtype="fp16", H=2, H_kv=2, D=64, PS=16, reqs=[],
        spare_pages=2)
    add("bf16-e4m3/d64/h4kv1/ps5/noncausal/all-q0-but-one/q0,0,2-kv0,7,9", q_dtype="bf16", kv_dtype="e4m3", H=4,
        H_kv=1, D=64, PS=5, reqs=[(0, 0), (0, 7), (2, 9)], causal=False)
    return cases


# ----------------------------------------------------------------------------------------------------
# mha_decode_paged


def mha_case(rng, name, seed, *, dtype, H, D, PS, S_q, lens, causal, W_extra=1, spare_pages=2, q_pads=None,
             kv_pads=None, validate=False, std=1.0):
    B = len(lens)
    NP, pages = assign_pages(rng, lens, [S_q] * B, PS, spare_pages)
    W = max([len(p) for p in pages] + [0]) + W_extra
    N_kv = NP * PS
    q_shape = [B, S_q, H, D]
    q = Tensor.random(rng, dtype, q_shape, padded_strides(q_shape, dtype, q_pads) if q_pads else None, std=std)
    kv_shape = [N_kv, H, D]
    pools = {}
    for n in ("k", "v"):
        t = Tensor.garbage(rng, dtype, kv_shape, padded_strides(kv_shape, dtype, kv_pads) if kv_pads else None)
        if S_q > 0:
            for b, L in enumerate(lens):
                for j in range(L):
                    row = pages[b][j // PS] * PS + j % PS
                    t.set_logical((row,), rng.normal(0.0, std if n == "k" else 1.0, size=H * D))
        pools[n] = t
    rows = table_rows(rng, pages, W, NP)
    tensors = {"q": q.spec(), "k": pools["k"].spec(), "v": pools["v"].spec(),
               "real_seqlen_kv": values_spec("int32", [B], lens),
               "block_table": values_spec("int32", [B, W], [x for r in rows for x in r])}
    alpha = 1.0 / math.sqrt(D)
    qv, kv, vv = q.val, pools["k"].val, pools["v"].val
    o64 = np.zeros(q_shape)
    n_zero_rows = 0
    for b, L in enumerate(lens):
        if S_q == 0:
            continue
        idx = np.array([pages[b][j // PS] * PS + j % PS for j in range(L)], dtype=np.int64)
        for h in range(H):
            K = kv[idx, h, :] if L else np.zeros((0, D))
            V = vv[idx, h, :] if L else np.zeros((0, D))
            assert np.all(np.isfinite(K)) and np.all(np.isfinite(V))
            o, _ = attend(qv[b, :, h, :], K, V, alpha, 0.0, causal, -1, -1, -math.inf, L - S_q)
            n_zero_rows += int(np.sum(np.all(o == 0, axis=1)))
            o64[b, :, h, :] = o
    tensors["o"] = {"shape": q_shape, "dtype": dtype, "init": {"kind": "poison"}, "output": True}
    config = {"page_size": PS, "is_causal": causal}
    if validate:
        config["validate_inputs"] = True
    case = {"name": name, "op": "mha_decode_paged", "config": config, "seed": seed, "tensors": tensors,
            "compare": {"o": {"mode": "rel_l2", "tol": TOL[dtype]}},
            "golden": {"o": {"bits": [int(x) for x in round_out(dtype, o64.reshape(-1))]}}}
    return case, n_zero_rows


def mha_cases(rng):
    cases = CaseList(rng, mha_case, "mha-decode-paged-golden/", 7000)
    add = cases.add

    add("fp16/d64/h2/ps16/noncausal/sq1/l37,0,16/w+2", dtype="fp16", H=2, D=64, PS=16, S_q=1, lens=[37, 0, 16],
        causal=False, W_extra=2, validate=True)
    add("bf16/d128/h4/ps1/causal/sq4/l9,2,0", dtype="bf16", H=4, D=128, PS=1, S_q=4, lens=[9, 2, 0], causal=True,
        spare_pages=4)
    add("fp16/d256/h1/ps32/causal/sq3/l40,33", dtype="fp16", H=1, D=256, PS=32, S_q=3, lens=[40, 33],
        causal=True, spare_pages=0)
    add("bf16/d64/h1/ps64/noncausal/sq2/l130,64", dtype="bf16", H=1, D=64, PS=64, S_q=2, lens=[130, 64],
        causal=False, spare_pages=0)
    add("bf16/d64/h8/ps3/noncausal/sq5/l3,11", dtype="bf16", H=8, D=64, PS=3, S_q=5, lens=[3, 11], causal=False)
    add("fp16/d128/h2/ps16/causal/sq2/l1,33,17,16", dtype="fp16", H=2, D=128, PS=16, S_q=2, lens=[1, 33, 17, 16],
        causal=True, validate=True, spare_pages=1)
    add("bf16/d64/h4/ps8/causal/sq1/l0,5,8,9/w+3", dtype="bf16", H=4, D=64, PS=8, S_q=1, lens=[0, 5, 8, 9],
        causal=True, W_extra=3)
    add("fp16/d64/h2/ps4/noncausal/sq6/l2/strided-q-kv/l<sq", dtype="fp16", H=2, D=64, PS=4, S_q=6, lens=[2, 13],
        causal=False, q_pads=[8, 8, 0], kv_pads=[16, 8, 0], std=2.0)
    add("bf16/d64/h2/ps5/causal/sq7/l3,20/l<sq", dtype="bf16", H=2, D=64, PS=5, S_q=7, lens=[3, 20], causal=True)
    add("fp16/d64/h2/ps16/causal/sq0/l5,9", dtype="fp16", H=2, D=64, PS=16, S_q=0, lens=[5, 9], causal=True)
    add("bf16/d64/h2/ps16/noncausal/b0", dtype="bf16", H=2, D=64, PS=16, S_q=1, lens=[], causal=False)
    return cases


def main():
    def describe(n_zero):
        return f"{n_zero} rows the contract makes zero"
    return golden_main(__doc__, SEED, [("gqa_paged_fwd_golden.json", gqa_paged_cases, describe),
                                       ("mha_decode_paged_golden.json", mha_cases, describe)], self_test=self_test)


if __name__ == "__main__":
    sys.exit(main())
