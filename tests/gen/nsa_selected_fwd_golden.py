#!/usr/bin/python3
"""Golden test cases for nsa_selected_fwd (SPEC.md §2.17, metadata §2.14), computed independently of the
C++ project (numpy, float64).

Writes tests/cases/nsa_selected_fwd_golden.json in the `attnjit test` format (tools/cli/test_case.hpp).

Per case: request lengths -> offsets, token_indices (n, p); random q [T, H, D], k, v [T, H_kv, D] (exact
bits of their dtype); block_indices [T, H_kv, SEL] and block_counts [T, H_kv] drawn per row. Token t,
head h, r = h // (H / H_kv): limit = p + 1 when causal, len_n otherwise. Each slot u < block_counts[t, r]
with beta = block_indices[t, r, u] >= 0 and beta * bs < limit adds keys x in
[beta * bs, min((beta + 1) * bs, limit)) at packed rows offsets[n] + x (a repeated id adds its keys
again); l_x = scale <q[t, h], k_x>; row softmax with values v_x. No visible key: o = 0.

The rows hold: valid ids (distinct, or with a repeat in the "repeats" cases), -1 padding, future blocks
(beta * bs >= limit, skipped), ids past the request (non-causal: skipped the same way), and in the
unread suffix u >= count junk (valid ids, -1, huge values) that must never be read.

Expected: o rounded once to the dtype; rel_l2 at the dtype's threshold; all-zero rows exactly zero.

Usage: /usr/bin/python3 tests/gen/nsa_selected_fwd_golden.py [--out-dir DIR]
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from casegen_common import TOL, CaseList  # noqa: E402
from casegen_numeric import golden_main, int_tensor, out_bits, poison, softmax_row  # noqa: E402
from nsa_golden_common import meta, rand_tensor  # noqa: E402

SEED = 20261203
OP = "nsa_selected_fwd"


def draw_row(rng, nvis, nblocks, SEL, repeats):
    """One (t, r) row: (ids [SEL], count). Slots < count mix distinct visible ids of [0, nvis) (mostly),
    ids of [nvis, nblocks + 2) (future blocks, or past the request: skipped), -1 and, with repeats, a
    duplicate; slots >= count hold junk (never read)."""
    count = int(rng.integers(0, SEL + 1))
    vis = list(range(nvis))
    rng.shuffle(vis)
    ids = []
    for u in range(count):
        x = rng.random()
        if x < 0.15:
            ids.append(-1)
        elif x < 0.3:
            ids.append(int(rng.integers(nvis, nblocks + 2)))
        elif repeats and x < 0.45 and any(i >= 0 for i in ids):
            ids.append(int(rng.choice([i for i in ids if i >= 0])))
        elif vis:
            ids.append(int(vis.pop()))
        else:
            ids.append(-1)
    junk = [0, 1, -1, nblocks, 1 << 30, -5]
    ids += [int(junk[int(rng.integers(0, len(junk)))]) for _ in range(SEL - count)]
    return ids, count


def build_case(rng, name, seed, *, dtype, lens, bs, H, H_kv, D, SEL, scale, causal, repeats=False,
               q_head_bcast=False, tok_transposed=False, counts_strided=False, zero_counts=False):
    g = H // H_kv
    meta_t, off, tok, _ = meta(lens, None, tok_transposed)
    T = off[-1]
    q_spec, Q = rand_tensor(rng, dtype, [T, H, D], [D, 0, 1] if q_head_bcast else None)
    k_spec, K = rand_tensor(rng, dtype, [T, H_kv, D])
    v_spec, V = rand_tensor(rng, dtype, [T, H_kv, D])
    idx = np.zeros((T, H_kv, SEL), dtype=np.int64)
    cnt = np.zeros((T, H_kv), dtype=np.int64)
    for t in range(T):
        n, p = tok[t]
        nblocks = (lens[n] + bs - 1) // bs
        nvis = (p + bs) // bs if causal else nblocks
        for r in range(H_kv):
            ids, c = draw_row(rng, nvis, nblocks, SEL, repeats)
            idx[t, r] = ids
            cnt[t, r] = 0 if zero_counts else c
    o = np.zeros((T, H, D))
    empty = 0
    for t in range(T):
        n, p = tok[t]
        limit = p + 1 if causal else lens[n]
        for h in range(H):
            r = h // g
            rows = []
            for u in range(cnt[t, r]):
                beta = int(idx[t, r, u])
                if beta < 0 or beta * bs >= limit:
                    continue
                rows += [off[n] + x for x in range(beta * bs, min((beta + 1) * bs, limit))]
            if not rows:
                empty += 1
                continue
            rows = np.asarray(rows)
            o[t, h] = softmax_row(scale * (K[rows, r] @ Q[t, h]), V[rows, r])[0]
    tensors = {"q": q_spec, "k": k_spec, "v": v_spec,
               "block_indices": int_tensor([T, H_kv, SEL], idx.reshape(-1)),
               "block_counts": int_tensor([T, H_kv], cnt.reshape(-1),
                                          [H_kv * 3, 3] if counts_strided and T > 0 else None),
               **meta_t, "o": poison([T, H, D], dtype)}
    config = {"is_causal": causal, "scale": scale, "block_size": bs}
    case = {"name": name, "op": OP, "config": config, "seed": seed, "tensors": tensors,
            "compare": {"o": {"mode": "rel_l2", "tol": TOL[dtype]}}, "golden": {"o": {"bits": out_bits(dtype, o)}}}
    return case, f"T {T}, {empty} of {T * H} rows with no visible key"


def cases(rng):
    out = CaseList(rng, build_case, "nsa-selected-golden/", 32000)
    add = out.add

    add("fp16/causal/g16-h16kv1/d64/bs4/sel3/lens6-0-7", dtype="fp16", lens=[6, 0, 7], bs=4, H=16, H_kv=1, D=64,
        SEL=3, scale=0.125, causal=True, q_head_bcast=True)
    add("bf16/noncausal/g16-h32kv2/d64/bs3/sel4/lens4-2/tok-transposed/counts-strided", dtype="bf16", lens=[4, 2],
        bs=3, H=32, H_kv=2, D=64, SEL=4, scale=0.1, causal=False, q_head_bcast=True, tok_transposed=True,
        counts_strided=True)
    add("fp16/causal/g16-h16kv1/d128/bs2/sel5/lens4/repeats", dtype="fp16", lens=[4], bs=2, H=16, H_kv=1, D=128,
        SEL=5, scale=0.09, causal=True, repeats=True)
    add("bf16/noncausal/g32-h32kv1/d64/bs1/sel6/lens2-3/repeats", dtype="bf16", lens=[2, 3], bs=1, H=32, H_kv=1,
        D=64, SEL=6, scale=0.2, causal=False, repeats=True, q_head_bcast=True)
    add("fp16/causal/g16-h16kv1/d64/bs8/sel2/lens3-5/short-requests", dtype="fp16", lens=[3, 5], bs=8, H=16,
        H_kv=1, D=64, SEL=2, scale=0.15, causal=True, q_head_bcast=True)
    add("bf16/causal/g16-h16kv1/d64/bs4/sel2/lens4/zero-counts", dtype="bf16", lens=[4], bs=4, H=16, H_kv=1, D=64,
        SEL=2, scale=0.125, causal=True, zero_counts=True, q_head_bcast=True)
    add("fp16/noncausal/g16-h16kv1/d64/bs4/sel1/empty-batch", dtype="fp16", lens=[0], bs=4, H=16, H_kv=1, D=64,
        SEL=1, scale=0.125, causal=False)
    return out


def main():
    return golden_main(__doc__, SEED, [("nsa_selected_fwd_golden.json", cases)])


if __name__ == "__main__":
    sys.exit(main())
