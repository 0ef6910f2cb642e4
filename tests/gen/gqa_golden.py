#!/usr/bin/python3
"""Golden test cases for gqa_fwd and gqa_varlen_fwd (SPEC.md §2.7, §2.8), computed independently of the
C++ project (numpy, float64, nothing imported from the repository).

One generator for both ops (named after their family): the varlen cases continue the dense cases' random
stream, so splitting it would change them.
Writes tests/cases/gqa_fwd_golden.json and tests/cases/gqa_varlen_fwd_golden.json in the `attnjit test`
format (tools/cli/test_case.hpp). numpy 1.24 has float16 but neither bfloat16 nor float8, so:

  * bf16: the top 16 bits of an fp32, rounded to nearest even (inputs are finite).
  * e4m3 (float8_e4m3fn, SPEC.md §1.8): decoded from its definition (sign, 4-bit exponent with bias 7,
    3-bit mantissa, subnormals m * 2^-9, NaN = S.1111.111); random inputs are encoded to the nearest
    finite code (NaN codes never occur).

Inputs are given as exact bit patterns ({"kind": "bits"}) covering the whole storage of each tensor
(stride gaps included); FP8 scales and sinks as fp32 "values" (sinks may be "inf" / "-inf").

Semantics (SPEC.md §1.6, §1.7, §1.8, §2.7, §2.8), per request b, query head h, kv head r = h // (H / H_kv):
p_i = i + kv_len - q_len; q, k, v dequantised by q/k/v_scale[b, r] (FP8); RoPE of the first R channels
of q at p_i and of k at j with the given tables (neox pairs (c, c + R/2), interleaved pairs (2c, 2c + 1));
z = alpha * <q, k>, l = c * tanh(z / c) with softcap c > 0; key j visible iff j < kv_len and
(!causal || j <= p_i) and (wL == -1 || j >= p_i - wL) and (wR == -1 || j <= p_i + wR); row softmax with
sink s (varlen, optional; absent = -inf): s = +inf gives o = 0, lse = +inf; M = max(max l, s) = -inf
gives o = 0, lse = -inf; else Z = sum exp(l - M) + exp(s - M), o = sum exp(l - M) v / Z, lse = M + ln Z.

Expected outputs: "golden" o as the bits of the exact (float64) result rounded once to the output dtype
(float64 -> fp32 -> fp16/bf16, RNE, as the reference's store), lse as float64 values ("inf"/"-inf" as
strings). o is compared with rel_l2 at the SPEC.md §1.12 tolerance of its path (bf16 1e-2, fp16 5e-3,
FP8 inputs 5e-2; the same compare entry then checks the kernel against the reference on a GPU), lse
with the "lse" rule. Outputs are poisoned.

Usage: /usr/bin/python3 tests/gen/gqa_golden.py [--out-dir DIR] [--self-test-only]
"""
import math
import os
import sys
from functools import partial

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from casegen_common import TOL, CaseList, attention_config  # noqa: E402
from casegen_numeric import (E4M3, RandomTensor, attend, bf16_bits_from_finite_f32, bf16_from_bits,  # noqa: E402
                             e4m3_bits_nearest, fp16_from_bits, golden_main, out_bits, poison, rope_rotate,
                             round_out, values_spec)

SEED = 20240722

# ----------------------------------------------------------------------------------------------------
# Number formats (the conversions themselves are in tests/gen/casegen_numeric.py)


def self_test():
    # bf16 RNE: ties to even, carries into the exponent
    f = np.array([1.0, 1.00390625, 1.01171875, 1.0 + 2 ** -8 + 2 ** -20, -3.0, 65504.0, 3.3895314e38], np.float32)
    got = bf16_from_bits(bf16_bits_from_finite_f32(f))
    want = np.array([1.0, 1.0, 1.015625, 1.0078125, -3.0, 65536.0, 3.3895314e38], np.float64)
    assert np.allclose(got, want, rtol=0, atol=0) or np.all(got == want.astype(np.float32)), got
    # e4m3 table: extremes and a round trip
    assert E4M3[0x7E] == 448.0 and E4M3[0x08] == 2.0 ** -6 and E4M3[0x01] == 2.0 ** -9 and E4M3[0xFE] == -448.0
    assert np.isnan(E4M3[0x7F]) and np.isnan(E4M3[0xFF])
    codes = np.array([c for c in range(256) if c not in (0x7F, 0xFF, 0x80)], np.uint8)
    assert np.all(e4m3_bits_nearest(E4M3[codes]) == codes)
    assert e4m3_bits_nearest(np.array([1000.0]))[0] == 0x7E and e4m3_bits_nearest(np.array([-1e9]))[0] == 0xFE
    # fp16 store: double rounding path equals the reference's
    assert fp16_from_bits(round_out("fp16", np.array([1.0 / 3.0])))[0] == np.float16(1.0 / 3.0)
    print("  number formats ok")


# ----------------------------------------------------------------------------------------------------
# The independent reference (the inputs are casegen_numeric.RandomTensor, one head's attention
# casegen_numeric.attend)


def expected(c):
    """c: the case description (dict of numpy arrays / ints). Returns o64 [rows, H, D], lse64."""
    H, Hkv, D = c["H"], c["H_kv"], c["D"]
    g = H // Hkv
    qv, kv, vv = c["q"].val, c["k"].val, c["v"].val
    o_all = np.zeros(c["o_shape"])
    lse_all = np.full(c["lse_shape"], -math.inf)
    for b, (ql, kl, q0, k0) in enumerate(c["requests"]):
        for h in range(H):
            r = h // g
            if c["varlen"]:
                Q, K, V = qv[q0: q0 + ql, h, :], kv[k0: k0 + kl, r, :], vv[k0: k0 + kl, r, :]
            else:
                Q, K, V = qv[b, :, h, :], kv[b, :, r, :], vv[b, :, r, :]
            Q, K, V = Q.astype(np.float64).copy(), K.astype(np.float64).copy(), V.astype(np.float64).copy()
            if c["fp8"]:
                Q *= c["q_scale"][b, r]
                K *= c["k_scale"][b, r]
                V *= c["v_scale"][b, r]
            if c["rope"]:
                R = c["R"]
                cos, sin = c["rope_cos"].val, c["rope_sin"].val
                pq = np.arange(ql) + kl - ql
                assert ql == 0 or pq[0] >= 0
                Q = rope_rotate(Q, cos[pq], sin[pq], c["rope"], R)
                K = rope_rotate(K, cos[:kl], sin[:kl], c["rope"], R)
            sink = c["sinks"][h] if c["sinks"] is not None else -math.inf
            o, lse = attend(Q, K, V, c["alpha"], c["softcap"], c["causal"], c["wl"], c["wr"], sink)
            if c["varlen"]:
                o_all[q0: q0 + ql, h, :] = o
                lse_all[q0: q0 + ql, h] = lse
            else:
                o_all[b, :, h, :] = o
                lse_all[b, h, :] = lse
    return o_all, lse_all


# ----------------------------------------------------------------------------------------------------
# Case construction


def build_case(rng, name, seed, *, varlen, dtype, H, H_kv, D, causal=True, wl=-1, wr=-1, softcap=0.0,
               sm_scale=None, rope=None, R=None, P=None, out_dtype=None, with_lse=True, validate=False,
               B=1, S_q=0, S_kv=0, q_lens=None, kv_lens=None, sinks=None, q_strides=None, k_strides=None,
               std=1.0, extra_config=None, explicit_rotary_dim=True):
    fp8 = dtype == "e4m3"
    cdt = out_dtype if fp8 else dtype
    if varlen:
        B = len(q_lens)
        cu_q, cu_k = [0], [0]
        for ql, kl in zip(q_lens, kv_lens):
            cu_q.append(cu_q[-1] + int(ql))
            cu_k.append(cu_k[-1] + int(kl))
        T_q, T_kv = cu_q[-1], cu_k[-1]
        requests = [(q_lens[b], kv_lens[b], cu_q[b], cu_k[b]) for b in range(B)]
        q_shape, kv_shape, lse_shape = [T_q, H, D], [T_kv, H_kv, D], [T_q, H]
    else:
        requests = [(S_q, S_kv, 0, 0) for _ in range(B)]
        q_shape, kv_shape, lse_shape = [B, S_q, H, D], [B, S_kv, H_kv, D], [B, H, S_q]
    c = {"varlen": varlen, "H": H, "H_kv": H_kv, "D": D, "fp8": fp8, "rope": rope, "R": R or D,
         "causal": causal, "wl": wl, "wr": wr, "softcap": softcap, "requests": requests,
         "alpha": sm_scale if sm_scale is not None else 1.0 / math.sqrt(D),
         "o_shape": q_shape, "lse_shape": lse_shape, "sinks": None}
    tensors = {}
    c["q"] = RandomTensor(rng, dtype, q_shape, q_strides, std=std)
    c["k"] = RandomTensor(rng, dtype, kv_shape, k_strides, std=std)
    c["v"] = RandomTensor(rng, dtype, kv_shape, std=1.0 if not fp8 else std)
    for n in ("q", "k", "v"):
        tensors[n] = c[n].spec()
    if varlen:
        tensors["cu_seqlens_q"] = {"shape": [B + 1], "dtype": "int32", "init": {"kind": "values", "values": cu_q}}
        tensors["cu_seqlens_kv"] = {"shape": [B + 1], "dtype": "int32", "init": {"kind": "values", "values": cu_k}}
    if fp8:
        for n in ("q_scale", "k_scale", "v_scale"):
            s = rng.uniform(0.5, 2.0, size=(B, H_kv)).astype(np.float32)
            c[n] = s.astype(np.float64)
            tensors[n] = values_spec("fp32", [B, H_kv], s.reshape(-1))
    if rope:
        R = R or D
        assert R % 2 == 0 and 2 <= R <= D
        half = R // 2
        theta = 10000.0 ** (-np.arange(half) * 2.0 / R)
        ang = np.arange(P)[:, None] * theta[None, :]
        c["rope_cos"] = RandomTensor(rng, cdt, [P, half], values=np.cos(ang).reshape(-1))
        c["rope_sin"] = RandomTensor(rng, cdt, [P, half], values=np.sin(ang).reshape(-1))
        tensors["rope_cos"] = c["rope_cos"].spec()
        tensors["rope_sin"] = c["rope_sin"].spec()
    if sinks is not None:
        sk = np.array(sinks, dtype=np.float64)
        assert sk.shape == (H,)
        c["sinks"] = [float(np.float32(x)) for x in sk]
        tensors["sinks"] = values_spec("fp32", [H], c["sinks"])
    o64, lse64 = expected(c)
    tensors["o"] = poison(q_shape, cdt)
    if with_lse:
        tensors["lse"] = poison(lse_shape, "fp32")
    config = attention_config(causal, wl, wr, sm_scale, softcap, rope, R, explicit_rotary_dim, out_dtype, validate)
    if extra_config:
        config.update(extra_config)
    golden = {"o": {"bits": out_bits(cdt, o64)}}
    compare = {"o": {"mode": "rel_l2", "tol": TOL[dtype]}}
    if with_lse:
        golden["lse"] = {"values": [float(x) if math.isfinite(x) else ("inf" if x > 0 else "-inf")
                                    for x in lse64.reshape(-1)]}
        compare["lse"] = {"mode": "lse"}
    # sanity: nothing unexpected in the expectation
    assert np.all(np.isfinite(o64))
    n_empty = int(np.sum(~np.isfinite(lse64)))
    case = {"name": name, "op": "gqa_varlen_fwd" if varlen else "gqa_fwd", "config": config, "seed": seed,
            "tensors": tensors, "compare": compare, "golden": golden}
    return case, n_empty


def dense_cases(rng):
    cases = CaseList(rng, partial(build_case, varlen=False), "gqa-golden/", 3000)
    add = cases.add

    add("fp16/d64/h2kv2/causal/sq16-skv16/b2", dtype="fp16", H=2, H_kv=2, D=64, B=2, S_q=16, S_kv=16)
    add("bf16/d64/h4kv2/causal/sq5-skv23", dtype="bf16", H=4, H_kv=2, D=64, S_q=5, S_kv=23, validate=True)
    add("fp16/d64/h4kv1/noncausal/sq1-skv37/mqa/sm0.1", dtype="fp16", H=4, H_kv=1, D=64, S_q=1, S_kv=37,
        causal=False, sm_scale=0.1)
    add("bf16/d64/h2kv1/noncausal/sq20-skv9", dtype="bf16", H=2, H_kv=1, D=64, S_q=20, S_kv=9, causal=False)
    add("fp16/d64/h2kv2/noncausal/sq21-skv8/wr1/empty-rows", dtype="fp16", H=2, H_kv=2, D=64, S_q=21, S_kv=8,
        causal=False, wr=1)
    add("bf16/d64/h2kv2/noncausal/sq19-skv6/wl2-wr0/empty-rows", dtype="bf16", H=2, H_kv=2, D=64, S_q=19, S_kv=6,
        causal=False, wl=2, wr=0)
    add("fp16/d64/h8kv2/causal/wl3/sq9-skv14", dtype="fp16", H=8, H_kv=2, D=64, S_q=9, S_kv=14, wl=3)
    add("bf16/d64/h2kv2/noncausal/wl2-wr1/sq17-skv17/k-strided", dtype="bf16", H=2, H_kv=2, D=64, S_q=17,
        S_kv=17, causal=False, wl=2, wr=1, k_strides=[17 * 160 + 64, 160, 72, 1])
    add("fp16/d64/h2kv1/causal/wl0/sq11-skv11", dtype="fp16", H=2, H_kv=1, D=64, S_q=11, S_kv=11, wl=0)
    add("bf16/d64/h2kv1/noncausal/wr3/sq7-skv25", dtype="bf16", H=2, H_kv=1, D=64, S_q=7, S_kv=25, causal=False,
        wr=3)
    add("bf16/d64/h2kv2/causal/cap20/std3/sq13-skv13", dtype="bf16", H=2, H_kv=2, D=64, S_q=13, S_kv=13,
        softcap=20.0, std=3.0)
    add("fp16/d64/h2kv1/causal/rope-neox-r32/sq10-skv19/p24", dtype="fp16", H=2, H_kv=1, D=64, S_q=10, S_kv=19,
        rope="neox", R=32, P=24)
    add("bf16/d64/h2kv2/noncausal/wl4/rope-interleaved-r10/sq12-skv12/p12", dtype="bf16", H=2, H_kv=2, D=64,
        S_q=12, S_kv=12, causal=False, wl=4, rope="interleaved", R=10, P=12)
    add("e4m3-fp16/d64/h4kv2/causal/sq7-skv12/b2", dtype="e4m3", out_dtype="fp16", H=4, H_kv=2, D=64, B=2, S_q=7,
        S_kv=12, validate=True)
    add("e4m3-bf16/d64/h2kv1/noncausal/cap5/std2/rope-neox-r64/sq9-skv15/no-lse", dtype="e4m3", out_dtype="bf16",
        H=2, H_kv=1, D=64, S_q=9, S_kv=15, causal=False, softcap=5.0, std=2.0, rope="neox", P=15, with_lse=False,
        explicit_rotary_dim=False)
    add("fp16/d96/h2kv1/causal/sq6-skv9", dtype="fp16", H=2, H_kv=1, D=96, S_q=6, S_kv=9)
    add("bf16/d128/h4kv4/noncausal/sq5-skv8/rope-interleaved-r128/p10", dtype="bf16", H=4, H_kv=4, D=128, S_q=5,
        S_kv=8, causal=False, rope="interleaved", R=128, P=10)
    add("fp16/d256/h1kv1/causal/wl2/sq4-skv7", dtype="fp16", H=1, H_kv=1, D=256, S_q=4, S_kv=7, wl=2)
    add("bf16/d64/h2kv1/noncausal/sq3-skv0/all-empty", dtype="bf16", H=2, H_kv=1, D=64, S_q=3, S_kv=0,
        causal=False)
    add("fp16/d64/h2kv2/causal/b0", dtype="fp16", H=2, H_kv=2, D=64, B=0, S_q=5, S_kv=5)
    return cases


def varlen_cases(rng):
    cases = CaseList(rng, partial(build_case, varlen=True), "gqa-varlen-golden/", 4000)
    add = cases.add

    add("fp16/d64/h4kv2/causal/q3,0,5-kv7,4,5", dtype="fp16", H=4, H_kv=2, D=64, q_lens=[3, 0, 5],
        kv_lens=[7, 4, 5], validate=True)
    add("bf16/d64/h2kv1/noncausal/decode/q1,1,1,1-kv9,1,17,0", dtype="bf16", H=2, H_kv=1, D=64,
        q_lens=[1, 1, 1, 1], kv_lens=[9, 1, 17, 0], causal=False)
    add("fp16/d64/h4kv4/causal/sinks-finite/q6,2-kv6,11", dtype="fp16", H=4, H_kv=4, D=64, q_lens=[6, 2],
        kv_lens=[6, 11], sinks=[0.5, -1.25, 3.0, 8.0])
    add("bf16/d64/h4kv2/noncausal/sinks-inf-mix/q2,3,1-kv0,5,4", dtype="bf16", H=4, H_kv=2, D=64,
        q_lens=[2, 3, 1], kv_lens=[0, 5, 4], causal=False, sinks=[math.inf, -math.inf, 1.5, -2.0], validate=True)
    add("bf16/d64/h2kv2/causal/q-strided/sinks/q4,7-kv9,7", dtype="bf16", H=2, H_kv=2, D=64, q_lens=[4, 7],
        kv_lens=[9, 7], sinks=[-0.5, 2.0], q_strides=[2 * 80 + 16, 80, 1])
    add("fp16/d64/h2kv1/causal/wl2-wr0/q5,9-kv13,9", dtype="fp16", H=2, H_kv=1, D=64, q_lens=[5, 9],
        kv_lens=[13, 9], wl=2, wr=0)
    add("bf16/d64/h2kv2/causal/cap20/sinks/std3/q8-kv12", dtype="bf16", H=2, H_kv=2, D=64, q_lens=[8],
        kv_lens=[12], softcap=20.0, sinks=[16.0, -3.0], std=3.0)
    add("fp16/d64/h4kv2/causal/rope-neox-r32/q3,5-kv10,5/p12", dtype="fp16", H=4, H_kv=2, D=64, q_lens=[3, 5],
        kv_lens=[10, 5], rope="neox", R=32, P=12)
    add("bf16/d64/h2kv1/noncausal/rope-interleaved-r10/q4,0,6-kv4,3,11/p11", dtype="bf16", H=2, H_kv=1, D=64,
        q_lens=[4, 0, 6], kv_lens=[4, 3, 11], causal=False, rope="interleaved", R=10, P=11)
    add("e4m3-fp16/d64/h4kv2/causal/q4,6-kv8,6", dtype="e4m3", out_dtype="fp16", H=4, H_kv=2, D=64,
        q_lens=[4, 6], kv_lens=[8, 6], validate=True)
    add("e4m3-bf16/d64/h2kv1/noncausal/sinks/q1,5-kv7,0", dtype="e4m3", out_dtype="bf16", H=2, H_kv=1, D=64,
        q_lens=[1, 5], kv_lens=[7, 0], causal=False, sinks=[0.25, -math.inf])
    add("fp16/d128/h4kv1/causal/mqa/q2,3-kv5,3", dtype="fp16", H=4, H_kv=1, D=128, q_lens=[2, 3], kv_lens=[5, 3])
    add("bf16/d256/h1kv1/noncausal/wr0/q3-kv6", dtype="bf16", H=1, H_kv=1, D=256, q_lens=[3], kv_lens=[6],
        causal=False, wr=0)
    add("fp16/d96/h2kv2/causal/sinks/q2,4-kv4,4", dtype="fp16", H=2, H_kv=2, D=96, q_lens=[2, 4], kv_lens=[4, 4],
        sinks=[-1.0, 0.0])
    add("bf16/d64/h2kv1/noncausal/wr1/q9-kv3/empty-rows", dtype="bf16", H=2, H_kv=1, D=64, q_lens=[9],
        kv_lens=[3], causal=False, wr=1)
    add("fp16/d64/h2kv2/causal/b0", dtype="fp16", H=2, H_kv=2, D=64, q_lens=[], kv_lens=[])
    return cases


def main():
    def describe(n_empty):
        return f"{n_empty} empty or +inf lse rows"
    return golden_main(__doc__, SEED, [("gqa_fwd_golden.json", dense_cases, describe),
                                       ("gqa_varlen_fwd_golden.json", varlen_cases, describe)], self_test=self_test)


if __name__ == "__main__":
    sys.exit(main())
