#!/usr/bin/python3
"""Golden test cases for nsa_topk (SPEC.md §2.16, metadata §2.14), computed independently of the C++
project (numpy, float64).

Writes tests/cases/nsa_topk_golden.json in the `attnjit test` format (tools/cli/test_case.hpp).

Per case: request lengths -> offsets, token_indices (n, p), chunk_offsets (ceil(len / bs) per request);
random q [T, H, D], k_cmp [C, H_kv, D] (exact bits of their dtype). Token t, KV head r, its group of
G = H / H_kv query heads, cur = p // bs:
  1. qs_h = rnd_dtype(fp32(q[t, h]) * fp32(scale)) elementwise;
  2. lse_h = ln sum_{c < (p + 1) // bs} exp(<qs_h, K_c>) (0 when no chunk is complete);
  3. imp_c = sum_h w_{h,c} for c in [0, cur], w = 1 for the forced chunks {0, cur - 1, cur}, else
     exp(<qs_h, K_c> - lse_h);
  4. m = min(S, cur + 1) chunks of highest importance, then S - m entries of -1.
The golden rows list them by descending importance, ties by ascending chunk id.

Outputs are compared with the "topk" mode (SPEC.md §1.9; tools/cli/topk_check.cpp's nsa_topk scorer
recomputes the importance): the count m, trailing -1 padding, distinct members of [0, cur], and the
importances at the entries, sorted, equal the top-m importances within 1e-4 * max |imp| + 1e-5, so the
forced chunks' ties (all score G) and near-ties may go either way. The order is never compared.

Cases: p < bs (cur = 0, one candidate), cur + 1 < S (padding), cur + 1 > S (a real selection, and
S = 1 / 2 where even the forced chunks do not all fit), lengths not multiples of bs (the partial current
chunk is a candidate, its last complete neighbour too), empty requests, G = 16 (H_kv 1 and 2) and
G = 32, D 64 and 128, fp16 / bf16, token_indices stored transposed, T = 0.

Usage: /usr/bin/python3 tests/gen/nsa_topk_golden.py [--out-dir DIR]
"""
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from casegen_common import CaseList  # noqa: E402
from casegen_numeric import golden_main, poison  # noqa: E402
from nsa_golden_common import meta, rand_tensor, round_to  # noqa: E402

SEED = 20261204
OP = "nsa_topk"


def build_case(rng, name, seed, *, dtype, lens, bs, H, H_kv, D, S, scale, tok_transposed=False, k_std=1.0):
    g = H // H_kv
    tensors, off, tok, co = meta(lens, bs, tok_transposed)
    T, C = off[-1], co[-1]
    q_spec, Q = rand_tensor(rng, dtype, [T, H, D])
    k_spec, K = rand_tensor(rng, dtype, [C, H_kv, D], std=k_std)
    QS = round_to(dtype, Q.astype(np.float32) * np.float32(scale))
    golden = []
    selections = 0
    for t in range(T):
        n, p = tok[t]
        cur, complete = p // bs, (p + 1) // bs
        for r in range(H_kv):
            cand = np.arange(cur + 1)
            Kc = K[co[n] + cand, r]
            imp = np.zeros(cur + 1)
            for h in range(r * g, (r + 1) * g):
                dots = Kc @ QS[t, h]
                lse = 0.0
                if complete:
                    m = dots[:complete].max()
                    lse = m + math.log(np.exp(dots[:complete] - m).sum())
                w = np.exp(dots - lse)
                w[[c for c in (0, cur - 1, cur) if c >= 0]] = 1.0
                imp += w
            m = min(S, cur + 1)
            selections += cur + 1 > S
            order = np.lexsort((cand, -imp))[:m]
            golden += [int(cand[i]) for i in order] + [-1] * (S - m)
    tensors = {"q": q_spec, "k_cmp": k_spec, **tensors, "block_indices": poison([T, H_kv, S], "int32")}
    case = {"name": name, "op": OP, "config": {"scale": scale, "selected_block_num": S, "bs": bs}, "seed": seed,
            "tensors": tensors, "compare": {"block_indices": {"mode": "topk"}},
            "golden": {"block_indices": {"values": golden}}}
    return case, f"T {T}, C {C}, {selections} of {T * H_kv} rows select among more than S candidates"


def cases(rng):
    out = CaseList(rng, build_case, "nsa-topk-golden/", 33000)
    add = out.add

    add("fp16/g16-h16kv1/d64/bs1/s4/lens9-0-3", dtype="fp16", lens=[9, 0, 3], bs=1, H=16, H_kv=1, D=64, S=4,
        scale=0.125, k_std=2.0)
    add("bf16/g16-h32kv2/d64/bs1/s2/lens4-2/tok-transposed", dtype="bf16", lens=[4, 2], bs=1, H=32, H_kv=2, D=64,
        S=2, scale=0.125, tok_transposed=True)
    add("fp16/g32-h32kv1/d64/bs1/s5/lens7", dtype="fp16", lens=[7], bs=1, H=32, H_kv=1, D=64, S=5, scale=0.2,
        k_std=2.0)
    add("bf16/g16-h16kv1/d128/bs2/s8/lens5-1", dtype="bf16", lens=[5, 1], bs=2, H=16, H_kv=1, D=128, S=8,
        scale=0.088)
    add("fp16/g16-h16kv1/d64/bs3/s4/lens14", dtype="fp16", lens=[14], bs=3, H=16, H_kv=1, D=64, S=4, scale=0.15,
        k_std=2.0)
    add("fp16/g16-h16kv1/d64/bs1/s1/lens4", dtype="fp16", lens=[4], bs=1, H=16, H_kv=1, D=64, S=1, scale=0.3)
    add("bf16/g16-h16kv1/d64/bs4/s128/lens0-0", dtype="bf16", lens=[0, 0], bs=4, H=16, H_kv=1, D=64, S=128,
        scale=0.125)
    return out


def main():
    return golden_main(__doc__, SEED, [("nsa_topk_golden.json", cases)])


if __name__ == "__main__":
    sys.exit(main())
