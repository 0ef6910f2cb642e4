#!/usr/bin/python3
"""Golden test cases for mla_decode (SPEC.md §2.13 and the extensions of docs/ops/mla_decode.md),
computed independently of the C++ project (numpy, float64, nothing imported from the C++ side).

Writes tests/cases/mla_decode_golden.json in the `attnjit test` format (tools/cli/test_case.hpp).

Per case: random q [B, H, D] or [B, S_q, H, D], q_pe [..., H, 64], and the latent cache: k [B, N_kv,
H_kv, D], k_pe [B, N_kv, H_kv, 64], or, with block_table [B, W] int32, page pools k [NP, PS, H_kv, D],
k_pe [NP, PS, H_kv, 64] (exact bit patterns of their dtype, whole storage including stride gaps). Cache
rows no request may read (positions >= cache_seqlens[b], unused pool slots and pages) hold large garbage
(|x| about 30), so a reference that reads them misses by far; block_table entries past a request's used
pages are garbage page ids (-1, 9999), so reading them would fail the bounds check.
For request b, len = cache_seqlens[b] (N_kv without it), query token t < S_q, head h, r = h // (H / H_kv):
visible positions n < min(len, len - S_q + 1 + t) (every n < len at S_q = 1); position n is k[b, n] or
slot n % PS of page block_table[b, n // PS];
  l_n = (<q, k_n> + <q_pe, k_pe_n>) / sqrt(D + PE),   o = sum_n softmax(l)_n k_n[:D],
zeros when nothing is visible (N_kv = 0, len = 0, early tokens of S_q > len).

Expected output: the bits of o (float64 -> fp32 -> dtype, RNE), compared with rel_l2 at the dtype's
threshold (SPEC.md §1.12: fp16 5e-3, bf16 1e-2); rows the semantics make zero must be exact zeros.
Outputs are poisoned.

Usage: /usr/bin/python3 tests/gen/mla_decode_golden.py [--out-dir DIR]
"""
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from casegen_common import TOL, CaseList  # noqa: E402
from casegen_numeric import (RandomTensor, golden_main, out_bits, padded_strides, poison, storage_index,  # noqa: E402
                             softmax_row, to_bits, values_spec)

SEED = 20261202
OP = "mla_decode"
PE = 64
GARBAGE = 30.0


class Tensor(RandomTensor):
    """A 16-bit input whose cache rows no request may read can be overwritten with large garbage."""

    def garble(self, rng, index):
        """Overwrites logical element block `index` (a tuple of ints / slices) with large garbage."""
        where = storage_index(self.shape, self.strides)[index].reshape(-1)
        sign = rng.choice([-1.0, 1.0], size=where.size)
        self.bits[where] = to_bits(self.dtype, sign * (GARBAGE + rng.normal(0.0, 1.0, size=where.size)))
        self.refresh()


def build_case(rng, name, seed, *, dtype, B, H, H_kv, D, N_kv=None, S_q=None, lens=None, paged=None,
               strides=None, pages_spare=1):
    """S_q None: q rank 3. lens: cache_seqlens values (None: absent). paged: page size PS (needs lens);
    the pool gets ceil(len / PS) pages per request, scattered, plus pages_spare unused garbage pages.
    strides: {"q" | "q_pe" | "k" | "k_pe": pads} for padded class F strides."""
    assert H % H_kv == 0
    g = H // H_kv
    strides = strides or {}
    scale = 1.0 / math.sqrt(D + PE)
    rank4 = S_q is not None
    Sq = S_q if rank4 else 1
    q_shape = [B, Sq, H, D] if rank4 else [B, H, D]
    qpe_shape = q_shape[:-1] + [PE]

    def make(nm, shape):
        return Tensor(rng, dtype, shape, padded_strides(shape, strides[nm]) if nm in strides else None)

    q = make("q", q_shape)
    q_pe = make("q_pe", qpe_shape)
    tensors = {}
    if paged is None:
        k = make("k", [B, N_kv, H_kv, D])
        k_pe = make("k_pe", [B, N_kv, H_kv, PE])
        L = list(lens) if lens is not None else [N_kv] * B
        for b in range(B):
            if L[b] < N_kv:  # positions past the request's length are never read
                k.garble(rng, (b, slice(L[b], None)))
                k_pe.garble(rng, (b, slice(L[b], None)))

        def pos(b, n):
            return (b, n)
    else:
        PS = paged
        L = list(lens)
        need = [(x + PS - 1) // PS for x in L]
        NP = sum(need) + pages_spare
        perm = [int(p) for p in rng.permutation(NP)]
        W = max(need + [1]) + 1  # one table column more than any request uses
        table, at = [], 0
        for b in range(B):
            row = perm[at: at + need[b]]
            at += need[b]
            row += [[-1, 9999][(b + j) % 2] for j in range(W - len(row))]  # unused entries: never read
            table.append(row)
        k = make("k", [NP, PS, H_kv, D])
        k_pe = make("k_pe", [NP, PS, H_kv, PE])
        used = np.zeros((NP, PS), dtype=bool)
        for b in range(B):
            for n in range(L[b]):
                used[table[b][n // PS], n % PS] = True
        for p in range(NP):
            for s in range(PS):
                if not used[p, s]:
                    k.garble(rng, (p, s))
                    k_pe.garble(rng, (p, s))
        tensors["block_table"] = values_spec("int32", [B, W], [x for row in table for x in row])

        def pos(b, n):
            return (table[b][n // PS], n % PS)
    if lens is not None:
        tensors["cache_seqlens"] = values_spec("int32", [B], lens)

    Q = q.val.reshape(B, Sq, H, D)
    QP = q_pe.val.reshape(B, Sq, H, PE)
    o = np.zeros((B, Sq, H, D))
    empty_rows = 0
    for b in range(B):
        for t in range(Sq):
            vis = max(0, min(L[b], L[b] - Sq + 1 + t))
            for h in range(H):
                r = h // g
                if vis == 0:
                    empty_rows += 1
                    continue
                keys = np.array([k.val[pos(b, n)][r] for n in range(vis)])
                kpes = np.array([k_pe.val[pos(b, n)][r] for n in range(vis)])
                o[b, t, h] = softmax_row((keys @ Q[b, t, h] + kpes @ QP[b, t, h]) * scale, keys)[0]
    o_bits = out_bits(dtype, o)

    spec = {"q": q.spec(), "q_pe": q_pe.spec(), "k": k.spec(), "k_pe": k_pe.spec()}
    spec.update(tensors)
    spec["o"] = poison(q_shape, dtype)
    case = {"name": name, "op": OP, "config": {}, "seed": seed, "tensors": spec,
            "compare": {"o": {"mode": "rel_l2", "tol": TOL[dtype]}}, "golden": {"o": {"bits": o_bits}}}
    return case, f"{empty_rows} exact-zero rows" if empty_rows else "no exact-zero rows"


def cases(rng):
    out = CaseList(rng, build_case, "mla-decode-golden/", 31000)
    add = out.add

    # The contract: q [B, H, D], no lengths; H_kv = 1 (MQA, the DeepSeek shape) and H_kv > 1; D 128/256/512;
    # N_kv not a tile multiple; N_kv = 0.
    add("fp16/h4kv1/d128/n5", dtype="fp16", B=1, H=4, H_kv=1, D=128, N_kv=5)
    add("bf16/h4kv2/d256/n3", dtype="bf16", B=1, H=4, H_kv=2, D=256, N_kv=3)
    add("bf16/h4kv1/d512/n3", dtype="bf16", B=1, H=4, H_kv=1, D=512, N_kv=3)
    add("fp16/h2kv2/d512/n1", dtype="fp16", B=1, H=2, H_kv=2, D=512, N_kv=1)
    add("fp16/h2kv1/b2/d128/n0", dtype="fp16", B=2, H=2, H_kv=1, D=128, N_kv=0)
    add("bf16/h4kv1/d128/n9/strided", dtype="bf16", B=1, H=4, H_kv=1, D=128, N_kv=9,
        strides={"q": [8, 16], "q_pe": [0, 8], "k": [16, 8, 8], "k_pe": [8, 0, 16]})
    add("fp16/h2kv1/b0/d128/n4", dtype="fp16", B=0, H=2, H_kv=1, D=128, N_kv=4)
    # cache_seqlens: ragged lengths with garbage past them, a zero length, a full one.
    add("fp16/h2kv1/b3/d128/n6/lens-6-0-3", dtype="fp16", B=3, H=2, H_kv=1, D=128, N_kv=6, lens=[6, 0, 3])
    add("bf16/h4kv2/b2/d128/n5/lens-2-5", dtype="bf16", B=2, H=4, H_kv=2, D=128, N_kv=5, lens=[2, 5])
    # Paged latent cache: scattered pages, garbage in unused slots / pages and in unused table entries.
    add("fp16/h2kv1/b2/d128/paged-ps16/lens-5-18", dtype="fp16", B=2, H=2, H_kv=1, D=128, lens=[5, 18], paged=16,
        pages_spare=0)
    add("bf16/h4kv2/b2/d128/paged-ps16/lens-0-5", dtype="bf16", B=2, H=4, H_kv=2, D=128, lens=[0, 5], paged=16,
        pages_spare=0)
    add("bf16/h4kv1/d128/paged-ps64/len40", dtype="bf16", B=1, H=4, H_kv=1, D=128, lens=[40], paged=64,
        pages_spare=0)
    add("fp16/h2kv1/d128/paged-ps32/len20", dtype="fp16", B=1, H=2, H_kv=1, D=128, lens=[20], paged=32,
        pages_spare=0)
    # S_q > 1 query tokens (the last S_q cache positions, causal), with and without lengths and pages;
    # len < S_q makes the early tokens empty.
    add("fp16/h2kv1/b1/sq3/d128/n6", dtype="fp16", B=1, H=2, H_kv=1, D=128, N_kv=6, S_q=3)
    add("bf16/h2kv2/b2/sq3/d128/n5/lens-5-2", dtype="bf16", B=2, H=2, H_kv=2, D=128, N_kv=5, S_q=3, lens=[5, 2])
    add("fp16/h2kv1/b2/sq3/d128/paged-ps16/lens-9-2", dtype="fp16", B=2, H=2, H_kv=1, D=128, S_q=3, lens=[9, 2],
        paged=16, pages_spare=0)
    add("bf16/h2kv1/sq1/d512/n3", dtype="bf16", B=1, H=2, H_kv=1, D=512, N_kv=3, S_q=1)
    return out


def main():
    return golden_main(__doc__, SEED, [("mla_decode_golden.json", cases)])


if __name__ == "__main__":
    sys.exit(main())
