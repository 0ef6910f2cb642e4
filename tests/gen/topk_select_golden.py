#!/usr/bin/python3
"""Golden test cases for topk_select (SPEC.md §2.2), computed independently of the C++ project (numpy).

Writes tests/cases/topk_select_golden.json in the `attnjit test` format (tools/cli/test_case.hpp).

Semantics, per row (b, s, g): the window is [lo, hi) with lo = max(starts[b, s], 0), hi = min(ends[b, s],
S_kv) (empty when hi <= lo), or [0, S_kv) without starts/ends; n = min(topk, hi - lo); the row holds n
distinct window positions (absolute) with the highest index_score[b, s, j, g] (-inf is an ordinary
score), then -1. The golden rows list the positions by descending score, ties by ascending position.

Outputs are compared with the "topk" mode (SPEC.md §1.9, tools/cli/topk_check.cpp's topk_select scorer):
the count, trailing -1 padding, distinct window members, and the sorted scores at the entries equal to
the row's top-n scores exactly (scores are inputs). The order of entries is never compared.

Cases: no window; windows before the start, past the end, ends < starts, empty and full windows; topk
above and below the window width, topk = 1; repeated score values (ties across the threshold),
all-equal rows, -inf scores (inside and at the threshold), G = 1, 2, 3; starts/ends broadcast over B
(stride 0) and strided with decoys in the gaps; S_kv = 0; longer rows (3000 and 20000 keys) with heavy
ties so that a GPU run exercises every pass of the radix select, including the whole-row fallback.

Usage: /usr/bin/python3 tests/gen/topk_select_golden.py [--out PATH]
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from casegen_common import case_args, contiguous, dumps_indented, storage_size, tensor, write_cases_text  # noqa: E402
from casegen_numeric import fmt_value, storage_index  # noqa: E402

SEED = 20261201


def select(scores, lo, hi, topk):
    """Expected row: positions by descending score (ties: smaller position first), then -1."""
    width = max(hi - lo, 0)
    n = min(topk, width)
    pos = np.arange(lo, lo + width)
    vals = scores[lo:lo + width].astype(np.float64)
    order = np.lexsort((pos, -vals))  # primary: -score, secondary: position
    row = [int(pos[i]) for i in order[:n]]
    return row + [-1] * (topk - n)


def make_case(rng, name, B, S, S_kv, G, topk, *, windows=None, kind="normal", bcast=False, win_stride=1):
    shape = [B, S, S_kv, G]
    n = B * S * S_kv * G
    if kind == "normal":
        sc = rng.standard_normal(n).astype(np.float32)
    elif kind == "ties":  # few distinct values, some -inf
        sc = rng.choice(np.array([-np.inf, -1.5, 0.0, 0.25, 0.5, 2.0], np.float32), size=n)
    elif kind == "coarse":  # many repeats of a few hundred values
        sc = (np.round(rng.standard_normal(n) * 40) / 16).astype(np.float32)
    elif kind == "equal":
        sc = np.full(n, 0.75, np.float32)
    elif kind == "neginf":
        sc = rng.standard_normal(n).astype(np.float32)
        sc[rng.random(n) < 0.6] = -np.inf
    else:
        raise ValueError(kind)
    scores = sc.reshape(shape)
    tensors = {"index_score": tensor(shape, "fp32", {"kind": "values", "values": [fmt_value(x) for x in sc]})}
    if windows is not None:
        st_all, en_all = np.asarray(windows[0], np.int64), np.asarray(windows[1], np.int64)
        if bcast:
            w_shape = [B, S]
            strides = [0, win_stride]
            st_vals = np.broadcast_to(st_all.reshape(1, S), (B, S))
            en_vals = np.broadcast_to(en_all.reshape(1, S), (B, S))
        else:
            w_shape = [B, S]
            strides = [S * win_stride, win_stride]
            st_vals, en_vals = st_all.reshape(B, S), en_all.reshape(B, S)
        for nm, vals in (("starts", st_vals), ("ends", en_vals)):
            size = storage_size(w_shape, strides)
            store = np.full(size, -999, np.int64)
            if size:
                store[storage_index(w_shape, strides).reshape(-1)] = np.asarray(vals).reshape(-1)
            tensors[nm] = tensor(w_shape, "int32", {"kind": "values", "values": [int(x) for x in store]},
                                 None if strides == contiguous(w_shape) else strides)
    else:
        st_vals = np.zeros((B, S), np.int64)
        en_vals = np.full((B, S), S_kv, np.int64)
    tensors["indexes"] = tensor([B, S, G, topk], "int32", {"kind": "poison"}, output=True)
    golden = []
    for b in range(B):
        for s in range(S):
            lo = max(int(st_vals[b, s]), 0)
            hi = min(int(en_vals[b, s]), S_kv)
            for g in range(G):
                golden += select(scores[b, s, :, g], lo, hi, topk)
    return {
        "name": name,
        "op": "topk_select",
        "config": {"topk": topk},
        "tensors": tensors,
        "compare": {"indexes": {"mode": "topk"}},
        "golden": {"indexes": {"values": golden}},
    }


def build():
    rng = np.random.default_rng(SEED)
    cases = []
    add = cases.append
    add(make_case(rng, "topk/no-window/g1/k7", 1, 3, 50, 1, 7))
    add(make_case(rng, "topk/no-window/g3/k1", 2, 2, 17, 3, 1))
    add(make_case(rng, "topk/no-window/k-above-skv", 1, 2, 10, 2, 20))
    # windows: before 0, past S_kv, ends < starts, empty, full, ordinary (B = 2, S = 4)
    win = ([-5, 3, 30, 12, 0, 7, 39, -2], [6, 20, 60, 5, 40, 7, 45, 1])
    add(make_case(rng, "topk/window/ties/g2/k6", 2, 4, 40, 2, 6, windows=win, kind="ties"))
    add(make_case(rng, "topk/window/normal/g1/k3", 2, 4, 40, 1, 3, windows=win))
    add(make_case(rng, "topk/window/bcast-b/g2/k5", 3, 4, 33, 2, 5,
                  windows=([-1, 2, 10, 40], [9, 30, 8, 50]), kind="coarse", bcast=True))
    add(make_case(rng, "topk/window/strided/g1/k4", 2, 3, 25, 1, 4,
                  windows=([0, 5, -3, 20, 1, 2], [25, 9, 4, 30, 1, 24]), win_stride=3))
    add(make_case(rng, "topk/window/neginf/g1/k8", 1, 3, 64, 1, 8, windows=([0, 10, 30], [64, 20, 64]), kind="neginf"))
    add(make_case(rng, "topk/no-window/equal/k5", 1, 2, 31, 1, 5, kind="equal"))
    add(make_case(rng, "topk/no-window/empty-skv", 1, 2, 0, 1, 3))
    add(make_case(rng, "topk/window/empty-skv", 2, 1, 0, 2, 2, windows=([0, -1], [4, 0])))
    add(make_case(rng, "topk/no-window/long/coarse/k100", 1, 2, 3000, 1, 100, kind="coarse"))
    add(make_case(rng, "topk/window/long/ties/g2/k300", 1, 2, 3000, 2, 300, windows=([5, -10], [2990, 4000]), kind="ties"))
    add(make_case(rng, "topk/no-window/long/equal/k2048", 1, 1, 20000, 1, 2048, kind="equal"))
    for i, c in enumerate(cases):
        c["seed"] = 200 + i
    return cases


def main():
    args = case_args(__doc__, out_dir=False, out_file="topk_select_golden.json").parse_args()
    cases = build()
    write_cases_text(args.out, cases, dumps_indented({"cases": cases}) + "\n")


if __name__ == "__main__":
    main()
