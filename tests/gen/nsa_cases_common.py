"""Helpers of the NSA case generators (tests/gen/nsa_*_cases.py; SPEC.md §2.14-2.17). Standard library
only: the packed metadata of a list of request lengths as "values" tensors, random request lengths, and
the error-case builder.
"""
import copy

from casegen_common import POISON, contiguous, random_padded_strides, tensor


def ints(vals):
    return {"kind": "values", "values": [int(x) for x in vals]}


def metadata(lens, bs=None):
    """offsets [N + 1], token_indices [T, 2] (request id, position) and, with bs, chunk_offsets [N + 1]
    (ceil(len / bs) chunks per request) of requests with lengths `lens`, as int32 "values" tensors.
    Returns (tensors, T, C)."""
    off = [0]
    for n in lens:
        off.append(off[-1] + n)
    tok = [x for n, ln in enumerate(lens) for p in range(ln) for x in (n, p)]
    t = {"offsets": tensor([len(off)], "int32", ints(off)), "token_indices": tensor([off[-1], 2], "int32", ints(tok))}
    C = None
    if bs is not None:
        co = [0]
        for n in lens:
            co.append(co[-1] + (n + bs - 1) // bs)
        t["chunk_offsets"] = tensor([len(co)], "int32", ints(co))
        C = co[-1]
    return t, off[-1], C


def random_lens(rng, N, max_len, short=0):
    """N request lengths in [0, max_len]: some empty, some shorter than `short` (a block size), the rest
    uniform (one rng draw per request, then one for its length)."""
    lens = []
    for _ in range(N):
        x = rng.random()
        if x < 0.1:
            lens.append(0)
        elif x < 0.25 and short > 1:
            lens.append(rng.randint(1, short - 1))
        else:
            lens.append(rng.randint(1, max_len))
    return lens


def maybe_padded(rng, shape, dtype, padded):
    """Class F strides for a 16-bit input: random 16-byte paddings when `padded`, else None (contiguous)."""
    if not padded or any(e == 0 for e in shape):
        return None
    st = random_padded_strides(rng, shape, dtype)
    return None if st == contiguous(shape) else st


class Errors:
    """Collects the error cases of one op: err(name, config, tensors, category, contains, gpu_only)."""

    def __init__(self, op, prefix, seed0):
        self.op, self.prefix, self.seed0, self.cases = op, prefix, seed0, []

    def err(self, name, config, tensors, category, contains, gpu_only=False):
        c = {"name": self.prefix + name, "op": self.op, "config": config, "seed": self.seed0 + len(self.cases),
             "tensors": tensors, "expect_error": {"category": category, "contains": contains}}
        if gpu_only:
            c["gpu_only"] = True
        self.cases.append(c)


def edited(base, f, **kw):
    t = copy.deepcopy(base(**kw))
    f(t)
    return t


def set_values(t, name, vals):
    t[name]["init"] = ints(vals)


POISON_INIT = POISON
