"""Helpers of the NSA case generators (tests/gen/nsa_*_cases.py; SPEC.md §2.14-2.17). Standard library
only: the packed metadata of a list of request lengths as "values" tensors, random request lengths, and
the rejection cases of the metadata and head rules every NSA op shares, and the generators' common main()
(the error-case builder is casegen_common.Errors).
"""
import os
import random

from casegen_common import case_args, contiguous, edited, pinned_to, random_padded_strides, tensor, write_cases


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


def random_lens_within(rng, N, max_len, short, cost, limit):
    """random_lens(rng, N, max_len, short) drawn again with max_len halved until cost(lens) <= limit."""
    while True:
        lens = random_lens(rng, N, max_len, short=short)
        if cost(lens) <= limit:
            return lens
        max_len = max(1, max_len // 2)


def maybe_padded(rng, shape, dtype, padded):
    """Class F strides for a 16-bit input: random 16-byte paddings when `padded`, else None (contiguous)."""
    if not padded or any(e == 0 for e in shape):
        return None
    st = random_padded_strides(rng, shape, dtype)
    return None if st == contiguous(shape) else st


def set_values(t, name, vals):
    t[name]["init"] = ints(vals)



def random_heads(rng, small):
    """dtype, H_kv, group size G (a multiple of 16) and H = G * H_kv of a grid case (four rng.choice calls)."""
    dtype = rng.choice(["fp16", "bf16"])
    H_kv = rng.choice([1, 1, 2] if small else [1, 1, 2, 4])
    G = rng.choice([16, 16, 32] if small else [16, 16, 32, 64])
    return dtype, H_kv, G, G * H_kv


def lens_label(lens, T):
    """The lengths part of a grid case's name: the lengths themselves, or n<N>-t<T> for more than three."""
    return "-".join(map(str, lens)) if len(lens) <= 3 else f"n{len(lens)}-t{T}"


# ----------------------------------------------------------------------------------------------------
# Rejection cases shared by the NSA ops. base(**kw) returns a valid call's tensors for requests of lengths
# (3, 5) (T = 8 tokens, offsets [0, 3, 8]) with H and H_kv keywords; e is a casegen_common.Errors.

# token_indices of that call: (request, position) per token
BASE_TOKENS = [0, 0, 0, 1, 0, 2, 1, 0, 1, 1, 1, 2, 1, 3, 1, 4]
BASE_OFFSETS = [0, 3, 8]


def head_errors(e, config, base, kv, not_dividing, bad_groups):
    """shape/h<H>-hkv<H_kv>: H_kv not dividing H (not_dividing = (H, H_kv)), then group sizes that are not
    multiples of 16 (bad_groups: (H, H_kv) pairs); kv names the tensor the message blames."""
    H, H_kv = not_dividing
    e.err(f"shape/h{H}-hkv{H_kv}", config, base(H=H, H_kv=H_kv), "shape",
          f"{kv}: expected H_kv dividing H (H % H_kv == 0), got H = {H}, H_kv = {H_kv}")
    for H, H_kv in bad_groups:
        g = H // H_kv
        e.err(f"shape/h{H}-hkv{H_kv}-group{g}", config, base(H=H, H_kv=H_kv), "shape",
              f"{kv}: expected a group size H / H_kv that is a multiple of 16, got H = {H}, H_kv = {H_kv} (group {g})")


def metadata_shape_errors(e, config, base, token_rows, token_width=None):
    """shape/offsets-empty, shape/token-indices-rows-differ (token_rows rows instead of T) and, when given,
    shape/token-indices-width-<token_width>."""
    e.err("shape/offsets-empty", config, edited(base, lambda t: t["offsets"].update(shape=[0], init=ints([]))),
          "shape", "offsets: expected at least 1 element ([N + 1]), got 0")
    e.err("shape/token-indices-rows-differ", config,
          edited(base, lambda t: t["token_indices"].update(shape=[token_rows, 2], init=ints([0] * 2 * token_rows))),
          "shape", f"token_indices: expected dim 0 (T, q's tokens) = 8, got {token_rows}")
    if token_width is not None:
        e.err(f"shape/token-indices-width-{token_width}", config,
              edited(base, lambda t: t["token_indices"].update(shape=[8, token_width],
                                                               init=ints([0] * 8 * token_width))),
              "shape", f"token_indices: expected dim 1 ((request, position)) = 2, got {token_width}")


def offsets_errors(e, config, base, first, decreasing, last):
    """content/offsets-*: offsets [first, 3, 8] (first != 0), [0, a, b] with (a, b) = decreasing, a > b, and
    [0, 3, last] (last != T)."""
    a, b = decreasing
    for name, vals, contains in (
            ("first-nonzero", [first, 3, 8], f"offsets: expected element 0 to be 0, got {first}"),
            ("decreasing", [0, a, b], f"offsets: expected non-decreasing offsets, got {b} after {a} at index 2"),
            ("last-not-t", [0, 3, last], f"offsets: expected the last offset (index 2) to be T = 8, got {last}")):
        e.err(f"content/offsets-{name}", config, edited(base, lambda t: set_values(t, "offsets", vals)), "content",
              contains)


def token_errors(e, config, base, edits):
    """content/token-<name>: for (name, i, value), BASE_TOKENS with flat entry i set to value (even i: token
    i // 2's request id, odd i: its position)."""
    for name, i, value in edits:
        tok = list(BASE_TOKENS)
        tok[i] = value
        k = i // 2
        if i % 2 == 0:
            contains = (f"token_indices: expected token {k}'s request id n with offsets[n] <= {k} < offsets[n + 1], "
                        f"got {value} at [{k}, 0]")
        else:
            n = BASE_TOKENS[i - 1]
            contains = (f"token_indices: expected token {k}'s position {k} - offsets[{n}] = {k - BASE_OFFSETS[n]}, "
                        f"got {value} at [{k}, 1]")
        e.err(f"content/token-{name}", config, edited(base, lambda t: set_values(t, "token_indices", tok)), "content",
              contains)


# ----------------------------------------------------------------------------------------------------
# Command line


def build_set(grid_case, seed, prefix, count, seed0, small):
    """count cases grid_case(rng, "prefix/NNN", seed0 + i, small), all from one random.Random(seed + seed0)."""
    rng = random.Random(seed + seed0)
    return [grid_case(rng, f"{prefix}/{i:03d}", seed0 + i, small) for i in range(count)]


def write_all(doc, op, name, seed, grid_case, build_errors, grid_seed0, small_seed0, extra=None, hopper=False):
    """The main() of an NSA case generator: OUT_DIR/gpu/<op>_grid.json (--count cases, default 160, named
    nsa-<name>-grid/NNN, then the cases of extra() if given), OUT_DIR/gpu/<op>_small.json (12 small ones,
    nsa-<name>-small/NNN) and OUT_DIR/<op>_errors.json (build_errors()). With `hopper` (the op has a hopper
    kernel) the grid and small sets pin backend 'portable' and their copies pinned to 'hopper' are written
    as <op>_hopper_grid.json and <op>_hopper_small.json."""
    args = case_args(doc, count=160).parse_args()
    grid = build_set(grid_case, seed, f"nsa-{name}-grid", args.count, grid_seed0, small=False)
    grid += extra() if extra else []
    small = build_set(grid_case, seed, f"nsa-{name}-small", 12, small_seed0, small=True)
    if hopper:
        for c in grid + small:
            c["config"]["backend"] = "portable"
        write_cases(os.path.join(args.out_dir, "gpu", f"{op}_hopper_grid.json"), [pinned_to(c) for c in grid])
        write_cases(os.path.join(args.out_dir, "gpu", f"{op}_hopper_small.json"), [pinned_to(c) for c in small])
    write_cases(os.path.join(args.out_dir, "gpu", f"{op}_grid.json"), grid)
    write_cases(os.path.join(args.out_dir, "gpu", f"{op}_small.json"), small)
    write_cases(os.path.join(args.out_dir, f"{op}_errors.json"), build_errors())
    return 0
