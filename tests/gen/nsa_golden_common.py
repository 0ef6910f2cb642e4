"""numpy helpers of the NSA golden generators (tests/gen/nsa_*_golden.py; SPEC.md §2.14-2.17): random
16-bit inputs stored as exact bits, and the packed metadata of a list of request lengths. Independent of
the C++ project.
"""
import numpy as np

from casegen_common import contiguous, storage_size
from casegen_numeric import from_bits, round_out, storage_index, to_bits


def gather(flat, shape, strides):
    if any(e == 0 for e in shape):
        return np.zeros(shape, dtype=np.float64)
    return flat[storage_index(shape, strides)]


def rand_tensor(rng, dtype, shape, strides=None, std=1.0):
    """A 16-bit input: random normal storage bits (whole storage, stride gaps included). Returns
    (spec, logical float64 values)."""
    st = list(strides) if strides is not None else contiguous(shape)
    n = storage_size(shape, st)
    bits = to_bits(dtype, rng.normal(0.0, std, size=n)) if n else np.zeros(0, np.uint16)
    spec = {"shape": list(shape), "dtype": dtype}
    if strides is not None:
        spec["strides"] = st
    spec["init"] = {"kind": "bits", "bits": [int(b) for b in bits]}
    return spec, gather(from_bits(dtype, bits), shape, st) if n else np.zeros(shape)


def int_tensor(shape, vals, strides=None, fill=-7777):
    """An int32 input holding the logical values `vals` (row-major) in storage of `strides`; storage gaps
    get `fill`."""
    st = list(strides) if strides is not None else contiguous(shape)
    n = storage_size(shape, st)
    store = np.full(n, fill, dtype=np.int64)
    if n:
        store[storage_index(shape, st).reshape(-1)] = np.asarray(vals, dtype=np.int64).reshape(-1)
    spec = {"shape": list(shape), "dtype": "int32"}
    if strides is not None:
        spec["strides"] = st
    spec["init"] = {"kind": "values", "values": [int(x) for x in store]}
    return spec


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


def poison(shape, dtype):
    return {"shape": list(shape), "dtype": dtype, "init": {"kind": "poison"}, "output": True}


def out_bits(dtype, x64):
    """Bits (row-major) of a float64 array rounded once to dtype (float64 -> fp32 -> 16-bit, RNE)."""
    return [int(b) for b in round_out(dtype, np.ascontiguousarray(x64).reshape(-1))]


def round_to(dtype, x32):
    """fp32 values rounded (RNE) to dtype, as float64 (nsa_topk's step 1)."""
    return from_bits(dtype, round_out(dtype, np.asarray(x32, dtype=np.float32).astype(np.float64)))
