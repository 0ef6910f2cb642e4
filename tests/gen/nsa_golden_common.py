"""numpy helpers of the NSA golden generators (tests/gen/nsa_*_golden.py; SPEC.md §2.14-2.17): random
16-bit inputs as (spec, values) pairs, and the packed metadata of a list of request lengths. Independent
of the C++ project. The pieces every golden generator shares are in tests/gen/casegen_numeric.py.
"""
import numpy as np

from casegen_numeric import RandomTensor, from_bits, int_tensor, round_out


def rand_tensor(rng, dtype, shape, strides=None, std=1.0):
    """A 16-bit input: random normal storage bits (whole storage, stride gaps included). Returns
    (spec, logical float64 values)."""
    t = RandomTensor(rng, dtype, shape, strides, std=std)
    return t.spec(), t.val


def meta(lens, bs=None, token_indices_transposed=False):
    """Packed metadata of requests with lengths `lens` (SPEC.md §2.14): offsets, token_indices (n, p) per
    token, chunk_offsets (ceil(len / bs) chunks each, when bs is given). token_indices_transposed stores
    token_indices [T, 2] with strides [1, T] (class M allows any strides). Returns (tensors, offsets,
    tok, chunk_offsets) with the values as Python lists."""
    off = [0]
    for n in lens:
        off.append(off[-1] + n)
    T = off[-1]
    tok = [(n, p) for n, ln in enumerate(lens) for p in range(ln)]
    tensors = {"offsets": int_tensor([len(off)], off)}
    flat = [x for pair in tok for x in pair]
    if token_indices_transposed and T > 1:
        tensors["token_indices"] = int_tensor([T, 2], flat, strides=[1, T])
    else:
        tensors["token_indices"] = int_tensor([T, 2], flat)
    co = None
    if bs is not None:
        co = [0]
        for n in lens:
            co.append(co[-1] + (n + bs - 1) // bs)
        tensors["chunk_offsets"] = int_tensor([len(co)], co)
    return tensors, off, tok, co


def round_to(dtype, x32):
    """fp32 values rounded (RNE) to dtype, as float64 (nsa_topk's step 1)."""
    return from_bits(dtype, round_out(dtype, np.asarray(x32, dtype=np.float32).astype(np.float64)))
