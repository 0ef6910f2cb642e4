#!/usr/bin/python3
"""Golden test cases for nsa_compressed_fwd (SPEC.md §2.15, metadata §2.14), computed independently of
the C++ project (numpy, float64).

Writes tests/cases/nsa_compressed_fwd_golden.json in the `attnjit test` format (tools/cli/test_case.hpp).

Per case: request lengths -> offsets, token_indices (n, p), chunk_offsets (ceil(len / bs) chunks per
request, the trailing partial chunk included); random q [T, H, DK], k_cmp [C, H_kv, DK],
v_cmp [C, H_kv, DV] (exact bits of their dtype). Token t, head h, r = h // (H / H_kv): visible chunks
c < (p + 1) // bs of its request; l_c = scale <q[t, h], k_cmp[chunk_offsets[n] + c, r]>; row softmax
with values v_cmp; no complete chunk (p < bs - 1): o = 0, lse = -inf.

Expected: o rounded once to the dtype (rel_l2 at the dtype's threshold; all-zero rows exactly zero),
lse fp32 natural log ("lse" rule: 2e-3 * max(1, |ref|), -inf exact). Outputs poisoned.

Cases: requests shorter than bs (no complete chunk), lengths not multiples of bs, empty requests, a
request of exactly bs tokens, bs = 1; G = 16 (H_kv 1 and 2) and G = 32; DK / DV 64 and 128 (DK != DV
too); fp16 / bf16; with and without lse; q broadcast over heads (head stride 0) and token_indices
stored transposed (class M strides); T = 0.

Usage: /usr/bin/python3 tests/gen/nsa_compressed_fwd_golden.py [--out-dir DIR]
"""
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from casegen_common import TOL, CaseList  # noqa: E402
from casegen_numeric import fmt_value, golden_main, out_bits, poison, softmax_row  # noqa: E402
from nsa_golden_common import meta, rand_tensor  # noqa: E402

SEED = 20261202
OP = "nsa_compressed_fwd"


def build_case(rng, name, seed, *, dtype, lens, bs, H, H_kv, DK, DV, scale, with_lse=True, q_head_bcast=False,
               tok_transposed=False):
    g = H // H_kv
    tensors, off, tok, co = meta(lens, bs, tok_transposed)
    T, C = off[-1], co[-1]
    q_strides = [DK, 0, 1] if q_head_bcast else None
    q_spec, Q = rand_tensor(rng, dtype, [T, H, DK], q_strides)
    k_spec, K = rand_tensor(rng, dtype, [C, H_kv, DK])
    v_spec, V = rand_tensor(rng, dtype, [C, H_kv, DV])
    o = np.zeros((T, H, DV))
    lse = np.full((T, H), -math.inf)
    for t in range(T):
        n, p = tok[t]
        nc = (p + 1) // bs
        for h in range(H):
            if nc == 0:
                continue
            r = h // g
            rows = co[n] + np.arange(nc)
            o[t, h], lse[t, h] = softmax_row(scale * (K[rows, r] @ Q[t, h]), V[rows, r])
    tensors = {"q": q_spec, "k_cmp": k_spec, "v_cmp": v_spec, **tensors, "o": poison([T, H, DV], dtype)}
    golden = {"o": {"bits": out_bits(dtype, o)}}
    compare = {"o": {"mode": "rel_l2", "tol": TOL[dtype]}}
    if with_lse:
        tensors["lse"] = poison([T, H], "fp32")
        golden["lse"] = {"values": [fmt_value(x) for x in lse.astype(np.float32).reshape(-1)]}
        compare["lse"] = {"mode": "lse"}
    case = {"name": name, "op": OP, "config": {"scale": scale, "bs": bs}, "seed": seed, "tensors": tensors,
            "compare": compare, "golden": golden}
    if DK != DV:  # the kernels keep one head dim: the kernel impl refuses the call, the reference serves it
        case["kernel_unsupported"] = "the kernels take DK = DV"
    empty = int(sum(1 for t in range(T) if (tok[t][1] + 1) // bs == 0))
    return case, f"T {T}, C {C}, {empty} tokens with no complete chunk"


def cases(rng):
    out = CaseList(rng, build_case, "nsa-compressed-golden/", 31000)
    add = out.add

    add("fp16/g16-h16kv1/d64/bs4/lens3-0-6", dtype="fp16", lens=[3, 0, 6], bs=4, H=16, H_kv=1, DK=64, DV=64,
        scale=0.125)
    add("bf16/g16-h32kv2/dk64-dv128/bs2/lens1-3/q-head-bcast/tok-transposed", dtype="bf16", lens=[1, 3], bs=2,
        H=32, H_kv=2, DK=64, DV=128, scale=0.2, q_head_bcast=True, tok_transposed=True)
    add("fp16/g32-h32kv1/dk128-dv64/bs3/lens0-5-2/q-head-bcast/no-lse", dtype="fp16", lens=[0, 5, 2], bs=3, H=32,
        H_kv=1, DK=128, DV=64, scale=0.09, with_lse=False, q_head_bcast=True)
    add("bf16/g16-h16kv1/d128/bs1/lens3", dtype="bf16", lens=[3], bs=1, H=16, H_kv=1, DK=128, DV=128, scale=0.088)
    add("fp16/g16-h16kv1/d64/bs2/lens2-3/q-head-bcast", dtype="fp16", lens=[2, 3], bs=2, H=16, H_kv=1, DK=64,
        DV=64, scale=0.3, q_head_bcast=True)
    add("bf16/g16-h16kv1/d64/bs4/empty-batch", dtype="bf16", lens=[0, 0], bs=4, H=16, H_kv=1, DK=64, DV=64,
        scale=0.125)
    return out


def main():
    return golden_main(__doc__, SEED, [("nsa_compressed_fwd_golden.json", cases)])


if __name__ == "__main__":
    sys.exit(main())
