#!/usr/bin/python3
"""Golden test cases for dsa_decode (SPEC.md §2.18), computed independently of the C++ project (numpy,
float64, nothing imported from the C++ side).

Writes tests/cases/dsa_decode_golden.json in the `attnjit test` format (tools/cli/test_case.hpp).

Per case: random q [B, S, H, D + dim_tail], kv [B, S_kv, H_kv, D + dim_tail] (exact bit patterns of their
dtype, whole storage including stride gaps) and indices [B, S, H_kv, K] int32: per row a random
permutation of key positions with -1, S_kv, other out-of-range values (S_kv + 3, -7) and repeated
entries mixed in; the causal rule makes the large positions "future" entries for the early rows.
Row (b, s, h), r = h // (H / H_kv), q_pos = q_start_index_s + s: slot u with x = indices[b, s, r, u] is
valid iff 0 <= x < S_kv and (not causal, or (x + 1) * stride_kv <= q_pos + 1); every valid slot is one
member of the row's softmax (a repeated index counts twice); logit alpha * <q[b, s, h], kv[b, x, r]>
over all D + dim_tail channels (alpha = sm_scale or 1/sqrt(D + dim_tail)), value kv[b, x, r, :D]; rows
with no valid slot are zeros (with q_start_index_s = 0 and stride_kv = 4 the first three rows always).

Expected output: the bits of o [B, S, H, D] (float64 -> fp32 -> dtype, RNE), compared with rel_l2 at the
dtype's threshold (SPEC.md §1.12: fp16 5e-3, bf16 1e-2); zero rows must be exact zeros. Outputs are
poisoned.

Usage: /usr/bin/python3 tests/gen/dsa_decode_golden.py [--out-dir DIR]
"""
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from casegen_common import TOL, CaseList  # noqa: E402
from casegen_numeric import (RandomTensor, golden_main, out_bits, padded_strides, poison, softmax_row,  # noqa: E402
                             values_spec)

SEED = 20261203
OP = "dsa_decode"


def index_row(rng, S_kv, K):
    """K int32 entries: distinct key positions (as many as fit) with invalid and repeated entries mixed in."""
    row = [int(x) for x in rng.permutation(max(S_kv, 1))[:K]] if S_kv else []
    row += [-1] * (K - len(row))
    for u in range(K):
        c = rng.random()
        if c < 0.12:
            row[u] = -1
        elif c < 0.18:
            row[u] = S_kv
        elif c < 0.21:
            row[u] = int(rng.choice([S_kv + 3, -7, 2 ** 31 - 1]))
        elif c < 0.30 and u > 0:
            row[u] = row[int(rng.integers(0, u))]  # a repeat of an earlier slot
    return row


def build_case(rng, name, seed, *, dtype, B, S, H, H_kv, S_kv, K, D, dim_tail, stride_kv, q_start, causal=True,
               sm_scale=None, strides=None, indices=None):
    assert H % H_kv == 0
    g = H // H_kv
    Dqk = D + dim_tail
    alpha = sm_scale if sm_scale is not None else 1.0 / math.sqrt(Dqk)
    strides = strides or {}

    def make(nm, shape):
        return RandomTensor(rng, dtype, shape, padded_strides(shape, strides[nm]) if nm in strides else None)

    q = make("q", [B, S, H, Dqk])
    kv = make("kv", [B, S_kv, H_kv, Dqk])
    if indices is None:
        idx = np.array([index_row(rng, S_kv, K) for _ in range(B * S * H_kv)], dtype=np.int64).reshape(B, S, H_kv, K)
    else:
        idx = np.array(indices, dtype=np.int64).reshape(B, S, H_kv, K)

    o = np.zeros((B, S, H, D))
    zero_rows = 0
    for b in range(B):
        for s in range(S):
            q_pos = q_start + s
            for h in range(H):
                r = h // g
                xs = [int(x) for x in idx[b, s, r]
                      if 0 <= x < S_kv and (not causal or (x + 1) * stride_kv <= q_pos + 1)]
                if not xs:
                    zero_rows += 1
                    continue
                keys = kv.val[b, xs, r]  # one row per valid slot, repeats included
                o[b, s, h] = softmax_row(alpha * (keys @ q.val[b, s, h]), keys[:, :D])[0]
    o_bits = out_bits(dtype, o)

    config = {"dim_tail": dim_tail, "stride_kv": stride_kv, "q_start_index_s": q_start}
    if sm_scale is not None:
        config["sm_scale"] = sm_scale
    if not causal:
        config["is_causal"] = False
    tensors = {"q": q.spec(), "kv": kv.spec(),
               "indices": values_spec("int32", [B, S, H_kv, K], idx.reshape(-1)), "o": poison([B, S, H, D], dtype)}
    case = {"name": name, "op": OP, "config": config, "seed": seed, "tensors": tensors,
            "compare": {"o": {"mode": "rel_l2", "tol": TOL[dtype]}}, "golden": {"o": {"bits": o_bits}}}
    return case, f"{zero_rows} exact-zero rows" if zero_rows else "no exact-zero rows"


def cases(rng):
    out = CaseList(rng, build_case, "dsa-decode-golden/", 41000)
    add = out.add

    # stride_kv 1 and 4; q_start_index_s 0 (the early rows of stride 4 are exactly zero) and > 0; causal and
    # not; dim_tail 0 / 16 / 64 / 128; D 64 / 128 / 256 / 512; H_kv = 1 (g up to 16) and H_kv = 2 (g = 16, the
    # smallest group the H_kv > 1 rule allows); K = 1; sm_scale; strided q and kv; empty calls.
    add("fp16/h2kv1/s4/skv8/k6/d64/tail0/stride1/qs0", dtype="fp16", B=1, S=4, H=2, H_kv=1, S_kv=8, K=6, D=64,
        dim_tail=0, stride_kv=1, q_start=0)
    add("bf16/h2kv1/b2/s5/skv6/k5/d64/tail16/stride4/qs0", dtype="bf16", B=2, S=5, H=2, H_kv=1, S_kv=6, K=5, D=64,
        dim_tail=16, stride_kv=4, q_start=0)
    add("fp16/h4kv1/s3/skv10/k8/d128/tail64/stride4/qs13", dtype="fp16", B=1, S=3, H=4, H_kv=1, S_kv=10, K=8, D=128,
        dim_tail=64, stride_kv=4, q_start=13)
    add("bf16/h2kv1/s2/skv7/k6/d64/tail0/stride1/qs3", dtype="bf16", B=1, S=2, H=2, H_kv=1, S_kv=7, K=6, D=64,
        dim_tail=0, stride_kv=1, q_start=3)
    add("fp16/h32kv2/s2/skv5/k4/d64/tail16/stride1/qs2", dtype="fp16", B=1, S=2, H=32, H_kv=2, S_kv=5, K=4, D=64,
        dim_tail=16, stride_kv=1, q_start=2)
    add("bf16/h8kv1/s1/skv4/k4/d512/tail64/stride1/qs3", dtype="bf16", B=1, S=1, H=8, H_kv=1, S_kv=4, K=4, D=512,
        dim_tail=64, stride_kv=1, q_start=3)
    add("fp16/h2kv1/s2/skv3/k3/d256/tail128/stride2/qs4", dtype="fp16", B=1, S=2, H=2, H_kv=1, S_kv=3, K=3, D=256,
        dim_tail=128, stride_kv=2, q_start=4)
    add("bf16/h4kv1/s3/skv6/k5/d64/tail0/noncausal/stride4/qs0", dtype="bf16", B=1, S=3, H=4, H_kv=1, S_kv=6, K=5,
        D=64, dim_tail=0, stride_kv=4, q_start=0, causal=False)
    add("fp16/h2kv1/s3/skv5/k1/d64/tail16/stride1/qs0", dtype="fp16", B=1, S=3, H=2, H_kv=1, S_kv=5, K=1, D=64,
        dim_tail=16, stride_kv=1, q_start=0)
    add("bf16/h2kv1/s2/skv6/k4/d128/tail0/stride1/qs5/scale0.05", dtype="bf16", B=1, S=2, H=2, H_kv=1, S_kv=6, K=4,
        D=128, dim_tail=0, stride_kv=1, q_start=5, sm_scale=0.05)
    add("fp16/h4kv1/b2/s2/skv6/k5/d64/tail32/stride1/qs4/strided", dtype="fp16", B=2, S=2, H=4, H_kv=1, S_kv=6, K=5,
        D=64, dim_tail=32, stride_kv=1, q_start=4, strides={"q": [16, 8, 8], "kv": [0, 8, 16]})
    # Hand-written index rows: every valid key once, the same key in every slot (counts K times = once),
    # a row of only invalid entries, and the stride-4 boundary ((x + 1) * 4 <= q_pos + 1 exactly).
    add("fp16/h2kv1/s4/skv4/k4/d64/tail0/stride4/qs7/hand", dtype="fp16", B=1, S=4, H=2, H_kv=1, S_kv=4, K=4, D=64,
        dim_tail=0, stride_kv=4, q_start=7,
        indices=[0, 1, 2, 3, 1, 1, 1, 1, -1, 4, 9, -2, 2, 3, 1, 0])
    add("bf16/h2kv1/s0/skv4/k2/d64/tail0/stride1/qs0", dtype="bf16", B=1, S=0, H=2, H_kv=1, S_kv=4, K=2, D=64,
        dim_tail=0, stride_kv=1, q_start=0)
    add("fp16/h2kv1/s2/skv0/k3/d64/tail0/stride1/qs0", dtype="fp16", B=1, S=2, H=2, H_kv=1, S_kv=0, K=3, D=64,
        dim_tail=0, stride_kv=1, q_start=0)
    return out


def main():
    return golden_main(__doc__, SEED, [("dsa_decode_golden.json", cases)])


if __name__ == "__main__":
    sys.exit(main())
