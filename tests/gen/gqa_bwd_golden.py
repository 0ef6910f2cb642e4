#!/usr/bin/python3
"""Golden test cases for gqa_bwd (SPEC.md §2.12), computed independently of the C++ project (numpy,
float64, nothing imported from the repository's C++ side).

Writes tests/cases/gqa_bwd_golden.json in the `attnjit test` format (tools/cli/test_case.hpp).

Per case: random q, k, v, do [B, S, H or H_kv, D] (exact bit patterns of their dtype, whole storage
including stride gaps; some cases pad the strides (class F) or broadcast k / v over the batch with a
zero stride). The forward runs here in float64 (SPEC.md §1.6, §2.12: square, key j visible to query i
iff j <= i when causal, every j < S otherwise, and with gqa_fwd's sliding windows (beyond the contract)
also i - window_size_left <= j and j <= i + window_size_right where those are >= 0; z_ij = alpha
<q_i, k_j> with alpha = sm_scale or 1/sqrt(D); row softmax), giving o (rounded once to the input dtype: float64 -> fp32 -> fp16/bf16, RNE)
and lse (fp32, natural log): both become exact inputs of the case. The backward then runs in float64
from those exact inputs:
  P_ij = exp(alpha <q_i, k_j> - lse_i) for visible j, Delta_i = <o_i, do_i>, dP_ij = <do_i, v_j>,
  dS_ij = P_ij (dP_ij - Delta_i), dq_i = alpha sum_j dS_ij k_j,
  dk_j = alpha sum dS_ij q_i and dv_j = sum P_ij do_i over every query head of the KV head's group.
Delta_i and dP_ij are exact dot products (math.fsum of exact float64 products of 16-bit values), so a
row whose only visible key is j (causal row 0; every row at S = 1) has o_i = v_j exactly, hence
dP_ij - Delta_i = 0 and dq_i = 0 exactly; at S = 1 dk is exactly 0 as well. Those are the exact zeros
the golden files carry (the CPU reference computes Delta and dP with one dot routine, so it reproduces
them; a kernel lands on rounding noise there).

Expected outputs: the bits of dq, dk, dv rounded once to the dtype; compared in the runner's "grad"
mode at twice the dtype's threshold (SPEC.md §1.12 gradients: fp16 1e-2, bf16 2e-2; the error over
max(||ref||, 1e-3 ||ref_abs||), so the cancelling tensors above are judged against the gradient's own
scale). Outputs are poisoned.

Usage: /usr/bin/python3 tests/gen/gqa_bwd_golden.py [--out-dir DIR]
"""
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from casegen_common import TOL, CaseList, contiguous, storage_size  # noqa: E402
from casegen_numeric import (RandomTensor, bits_spec, from_bits, gather, golden_main, out_bits, padded_strides, poison,  # noqa: E402
                             round_out, softmax_row, storage_index, values_spec)

SEED = 20261201
OP = "gqa_bwd"


def grad_tol(dtype):
    return 2 * TOL[dtype]


def exact_dot(a, b):
    """<a, b> of two float64 vectors holding 16-bit values: the products are exact, math.fsum rounds
    their sum once."""
    return math.fsum((a * b).tolist())


def build_case(rng, name, seed, *, dtype, causal, B, S, H, H_kv, D, sm_scale=None, strides=None,
               kv_batch_broadcast=False, window=(-1, -1)):
    """strides: {tensor name: pads} for padded class F strides of q, k, v, o or do;
    kv_batch_broadcast: k and v get a zero batch stride (one K/V shared by every batch entry)."""
    assert H % H_kv == 0
    g = H // H_kv
    alpha = sm_scale if sm_scale is not None else 1.0 / math.sqrt(D)
    strides = strides or {}
    q_shape, kv_shape = [B, S, H, D], [B, S, H_kv, D]

    def make(nm, shape):
        st = padded_strides(shape, strides[nm]) if nm in strides else None
        if kv_batch_broadcast and nm in ("k", "v"):
            st = list(st or contiguous(shape))
            st[0] = 0
        return RandomTensor(rng, dtype, shape, st)

    q = make("q", q_shape)
    k = make("k", kv_shape)
    v = make("v", kv_shape)
    do = make("do", q_shape)
    Q, K, V, dO = q.val, k.val, v.val, do.val

    wl, wr = window

    def keys(i):
        """Visible keys of query i: j <= i when causal, i - wl <= j (wl >= 0), j <= i + wr (wr >= 0)."""
        lo = max(0, i - wl) if wl >= 0 else 0
        hi = i if causal else S - 1
        if wr >= 0:
            hi = min(hi, i + wr)
        return np.arange(lo, hi + 1)

    # Forward in float64.
    o64 = np.zeros((B, S, H, D))
    lse64 = np.zeros((B, H, S))
    for b in range(B):
        for h in range(H):
            r = h // g
            for i in range(S):
                js = keys(i)
                o64[b, i, h], lse64[b, h, i] = softmax_row(alpha * (K[b, js, r] @ Q[b, i, h]), V[b, js, r])
    # o rounded to the dtype becomes an exact input, in its own (possibly padded) storage.
    o_st = padded_strides(q_shape, strides["o"]) if "o" in strides else contiguous(q_shape)
    o_store = np.zeros(storage_size(q_shape, o_st))
    o_store[storage_index(q_shape, o_st)] = o64
    if "o" in strides:  # the gaps get random values (never read)
        gaps = np.ones(o_store.size, dtype=bool)
        gaps[storage_index(q_shape, o_st).reshape(-1)] = False
        o_store[gaps] = rng.normal(0.0, 1.0, size=int(gaps.sum()))
    o_bits = round_out(dtype, o_store)
    O = gather(from_bits(dtype, o_bits), q_shape, o_st)
    lse32 = lse64.astype(np.float32)
    L = lse32.astype(np.float64)

    # Backward in float64 from the exact inputs.
    dq = np.zeros((B, S, H, D))
    dk = np.zeros((B, S, H_kv, D))
    dv = np.zeros((B, S, H_kv, D))
    for b in range(B):
        for h in range(H):
            r = h // g
            for i in range(S):
                delta = exact_dot(O[b, i, h], dO[b, i, h])
                for j in keys(i):
                    p = math.exp(alpha * float(Q[b, i, h] @ K[b, j, r]) - L[b, h, i])
                    ds = p * (exact_dot(dO[b, i, h], V[b, j, r]) - delta)
                    dq[b, i, h] += alpha * ds * K[b, j, r]
                    dk[b, j, r] += alpha * ds * Q[b, i, h]
                    dv[b, j, r] += p * dO[b, i, h]

    o_spec = bits_spec(dtype, q_shape, o_bits, o_st if "o" in strides else None)
    tensors = {"q": q.spec(), "k": k.spec(), "v": v.spec(), "o": o_spec, "do": do.spec(),
               "lse": values_spec("fp32", [B, H, S], lse32.reshape(-1)),
               "dq": poison(q_shape, dtype), "dk": poison(kv_shape, dtype), "dv": poison(kv_shape, dtype)}
    config = {"is_causal": causal}
    if wl >= 0:
        config["window_size_left"] = wl
    if wr >= 0:
        config["window_size_right"] = wr
    if sm_scale is not None:
        config["sm_scale"] = sm_scale
    golden = {"dq": {"bits": out_bits(dtype, dq)}, "dk": {"bits": out_bits(dtype, dk)},
              "dv": {"bits": out_bits(dtype, dv)}}
    compare = {n: {"mode": "grad", "tol": grad_tol(dtype)} for n in ("dq", "dk", "dv")}
    case = {"name": name, "op": OP, "config": config, "seed": seed, "tensors": tensors, "compare": compare,
            "golden": golden}
    zero_rows = {n: int(np.sum(np.all(x == 0, axis=-1))) for n, x in (("dq", dq), ("dk", dk), ("dv", dv))}
    note = ", ".join(f"{n} {z} exact-zero rows" for n, z in zero_rows.items() if z)
    return case, note or "no exact-zero rows"


def cases(rng):
    out = CaseList(rng, build_case, "gqa-bwd-golden/", 21000)
    add = out.add

    # MHA, GQA (g = 4 with H_kv > 1), MQA (H_kv = 1 with g = 4 and g = 8); causal and not; S = 1; S not a
    # multiple of 64; D 64/96/128/256; fp16/bf16; sm_scale unset and set; padded and broadcast strides.
    add("fp16/causal/mha-h2kv2/s9/d64", dtype="fp16", causal=True, B=1, S=9, H=2, H_kv=2, D=64)
    add("bf16/noncausal/gqa-h8kv2/s3/d64", dtype="bf16", causal=False, B=1, S=3, H=8, H_kv=2, D=64)
    add("fp16/causal/mqa-h8kv1/s3/d64", dtype="fp16", causal=True, B=1, S=3, H=8, H_kv=1, D=64)
    add("bf16/causal/gqa-h4kv2/s1/d128", dtype="bf16", causal=True, B=1, S=1, H=4, H_kv=2, D=128)
    add("fp16/noncausal/mqa-h2kv1/s1/d256", dtype="fp16", causal=False, B=1, S=1, H=2, H_kv=1, D=256)
    add("bf16/causal/mha-h1kv1/s3/d256/scale0.11", dtype="bf16", causal=True, B=1, S=3, H=1, H_kv=1, D=256,
        sm_scale=0.11)
    add("fp16/noncausal/mqa-h2kv1/s5/d128/scale0.2/q-k-do-strided", dtype="fp16", causal=False, B=1, S=5, H=2,
        H_kv=1, D=128, sm_scale=0.2, strides={"q": [16, 8, 8], "k": [0, 24, 8], "do": [8, 0, 16]})
    add("bf16/causal/mqa-h4kv1/s4/d96", dtype="bf16", causal=True, B=1, S=4, H=4, H_kv=1, D=96)
    add("fp16/causal/gqa-h4kv2/b2/s2/d64/kv-batch-broadcast", dtype="fp16", causal=True, B=2, S=2, H=4, H_kv=2,
        D=64, kv_batch_broadcast=True)
    add("bf16/noncausal/mha-h1kv1/s11/d64/scale0.3", dtype="bf16", causal=False, B=1, S=11, H=1, H_kv=1, D=64,
        sm_scale=0.3)
    add("fp16/noncausal/mqa-h4kv1/s3/d96/v-o-strided", dtype="fp16", causal=False, B=1, S=3, H=4, H_kv=1, D=96,
        strides={"v": [8, 16, 8], "o": [0, 8, 24]})
    add("bf16/noncausal/gqa-h4kv2/b2/s1/d64", dtype="bf16", causal=False, B=2, S=1, H=4, H_kv=2, D=64)
    # Sliding windows (beyond the contract; gqa_fwd's window_size_left / window_size_right): causal with a
    # left window, both sides without causal, a right window only, a zero-width window (the diagonal).
    add("bf16/causal/gqa-h4kv2/s13/d64/wl3", dtype="bf16", causal=True, B=1, S=13, H=4, H_kv=2, D=64, window=(3, -1))
    add("fp16/noncausal/mqa-h2kv1/s9/d128/wl2-wr1", dtype="fp16", causal=False, B=1, S=9, H=2, H_kv=1, D=128,
        window=(2, 1))
    add("bf16/noncausal/mha-h1kv1/s7/d96/wr0", dtype="bf16", causal=False, B=1, S=7, H=1, H_kv=1, D=96, window=(-1, 0))
    add("fp16/causal/mha-h2kv2/s6/d256/wl0", dtype="fp16", causal=True, B=1, S=6, H=2, H_kv=2, D=256, window=(0, -1))
    add("bf16/causal/mqa-h4kv1/s10/d64/wl4-wr2", dtype="bf16", causal=True, B=1, S=10, H=4, H_kv=1, D=64,
        window=(4, 2))
    # Empty calls: nothing to compute, every output has zero elements.
    add("fp16/causal/mha-h2kv2/s0/d64", dtype="fp16", causal=True, B=1, S=0, H=2, H_kv=2, D=64)
    add("bf16/noncausal/gqa-h4kv2/b0/s3/d128", dtype="bf16", causal=False, B=0, S=3, H=4, H_kv=2, D=128)
    return out


def main():
    return golden_main(__doc__, SEED, [("gqa_bwd_golden.json", cases)])


if __name__ == "__main__":
    sys.exit(main())
