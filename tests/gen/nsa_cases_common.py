"""Helpers of the NSA case generators (tests/gen/nsa_*_cases.py; SPEC.md §2.14-2.17). Standard library
only: the packed metadata of a list of request lengths as "values" tensors, random request lengths, and
the generators' common main() (the error-case builder is casegen_common.Errors).
"""
import os
import random

from casegen_common import case_args, contiguous, random_padded_strides, tensor, write_cases


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


def set_values(t, name, vals):
    t[name]["init"] = ints(vals)



def build_set(grid_case, seed, prefix, count, seed0, small):
    """count cases grid_case(rng, "prefix/NNN", seed0 + i, small), all from one random.Random(seed + seed0)."""
    rng = random.Random(seed + seed0)
    return [grid_case(rng, f"{prefix}/{i:03d}", seed0 + i, small) for i in range(count)]


def write_all(doc, op, name, seed, grid_case, build_errors, grid_seed0, small_seed0):
    """The main() of an NSA case generator: OUT_DIR/gpu/<op>_grid.json (--count cases, default 160, named
    nsa-<name>-grid/NNN), OUT_DIR/gpu/<op>_small.json (12 small ones, nsa-<name>-small/NNN) and
    OUT_DIR/<op>_errors.json (build_errors())."""
    args = case_args(doc, count=160).parse_args()
    write_cases(os.path.join(args.out_dir, "gpu", f"{op}_grid.json"),
                build_set(grid_case, seed, f"nsa-{name}-grid", args.count, grid_seed0, small=False))
    write_cases(os.path.join(args.out_dir, "gpu", f"{op}_small.json"),
                build_set(grid_case, seed, f"nsa-{name}-small", 12, small_seed0, small=True))
    write_cases(os.path.join(args.out_dir, f"{op}_errors.json"), build_errors())
    return 0
