#!/usr/bin/env python3
"""Test cases for topk_select (SPEC.md §2.2) in the `attnjit test` format (tools/cli/test_case.hpp).
Standard library only; deterministic (fixed seeds).

Writes:
  tests/cases/topk_select_errors.json             one case per rejection rule of §2.2 (category, message,
                                                  and that the poisoned output was not written)
  tests/cases/gpu/topk_select_grid.json           >= 100 random configurations, compare "topk" (§1.9 rule,
                                                  exact scores)
  tests/cases/gpu/topk_select_small.json          small shapes for compute-sanitizer

Grid axes: windows absent / present (outside [0, S_kv), ends < starts, empty, full),
starts/ends broadcast over B (stride 0) and strided, topk 1 .. 3000 (above and below the window), S_kv
0 .. 40000 (cached and uncached rows), G 1-3, scores normal or from a small alphabet with -inf (ties at
the threshold, whole rows of equal values: the radix select's fallback path).

Usage: python3 tests/gen/topk_select_cases.py [--out-dir tests/cases]
"""
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from casegen_common import Errors, OUTB, case_args, contiguous, storage_size, tensor, values, write_cases  # noqa: E402

SEED_TOPK = 0x70_4C
TOPK = "topk_select"
MAX_TOPK_ELEMENTS = 4_000_000


def normal(std=1.0):
    return {"kind": "normal", "mean": 0.0, "std": std}


ALPHABET = [-1e30, -3.5, -1.0, -0.25, 0.0, 0.5, 1.0, 2.0, 7.25, "-inf"]


def topk_case(rng, name, seed, B, S, S_kv, G, topk, *, wkind, score_kind, bcast=False, win_stride=1, gpu_only=True):
    shape = [B, S, S_kv, G]
    n = B * S * S_kv * G
    if score_kind == "normal":
        init = normal(rng.choice([1.0, 100.0]))
    elif score_kind == "uniform":
        init = {"kind": "uniform", "low": -1.0, "high": 1.0}
    elif score_kind == "alphabet":
        k = rng.choice([2, 4, len(ALPHABET)])
        alpha = ALPHABET[-k:]
        init = values([alpha[rng.randrange(k)] for _ in range(n)])
    elif score_kind == "equal":
        init = values([0.5] * n)
    else:
        raise ValueError(score_kind)
    tensors = {"index_score": tensor(shape, "fp32", init)}
    if wkind != "none":
        if wkind == "random":
            st, en = [], []
            for _ in range(B * S):
                a, b = rng.randint(-20, S_kv + 20), rng.randint(-20, S_kv + 20)
                if rng.random() < 0.6 and a > b:
                    a, b = b, a
                st.append(a)
                en.append(b)
        elif wkind == "causal":
            st = [0] * (B * S)
            en = [min(S_kv, max(1, S_kv - S + 1 + (i % S))) for i in range(B * S)]
        else:  # "narrow": windows around topk
            st, en = [], []
            for _ in range(B * S):
                a = rng.randint(0, max(0, S_kv - 1))
                w = rng.choice([max(topk - 1, 0), topk, topk + 1, 3 * topk])
                st.append(a)
                en.append(a + w)
        w_shape = [B, S]
        if bcast:
            strides = [0, win_stride]
            st, en = st[:S], en[:S]
        else:
            strides = [S * win_stride, win_stride]
        for nm, arr in (("starts", st), ("ends", en)):
            size = storage_size(w_shape, strides)
            store = [-31337] * size
            flat = 0
            for b in range(B if not bcast else 1):
                for s in range(S):
                    store[b * strides[0] + s * strides[1]] = arr[flat]
                    flat += 1
            tensors[nm] = tensor(w_shape, "int32", values(store), None if strides == contiguous(w_shape) else strides)
    tensors["indexes"] = tensor([B, S, G, topk], "int32", {"kind": "poison"}, output=True)
    return {"name": name, "op": TOPK, "config": {"topk": topk}, "seed": seed, "tensors": tensors,
            "compare": {"indexes": {"mode": "topk"}}, "gpu_only": gpu_only}


SKV_TOPK = [0, 1, 5, 100, 1000, 2049, 4097, 8192, 16384, 16385, 20000, 40000]
TOPK_CHOICES = [1, 7, 64, 256, 1000, 2048, 3000]


def topk_grid(count):
    rng = random.Random(SEED_TOPK)
    cases = []
    i = 0
    while len(cases) < count:
        S_kv = SKV_TOPK[i % len(SKV_TOPK)] if i < 2 * len(SKV_TOPK) else rng.choice(SKV_TOPK)
        topk = rng.choice(TOPK_CHOICES)
        G = rng.choice([1, 1, 2, 3])
        B = rng.choice([1, 1, 2, 3])
        S = rng.choice([1, 3, 17, 64])
        i += 1
        while B * S * S_kv * G > MAX_TOPK_ELEMENTS and S > 1:
            S = max(1, S // 2)
        while B * S * S_kv * G > MAX_TOPK_ELEMENTS and B > 1:
            B -= 1
        wkind = rng.choice(["none", "random", "causal", "narrow"])
        n = B * S * S_kv * G
        score_kind = rng.choice(["normal", "uniform"] + (["alphabet", "alphabet"] if n <= 40_000 else []) +
                                (["equal"] if n <= 40_000 else []))
        bcast = wkind != "none" and B > 1 and rng.random() < 0.4
        win_stride = rng.choice([1, 1, 2]) if wkind != "none" else 1
        name = f"topk/b{B}/s{S}/skv{S_kv}/g{G}/k{topk}/{wkind}{'-bcast' if bcast else ''}/{score_kind}/#{len(cases)}"
        cases.append(topk_case(rng, name, 40000 + len(cases), B, S, S_kv, G, topk, wkind=wkind, score_kind=score_kind,
                               bcast=bcast, win_stride=win_stride))
    return cases


def topk_small():
    rng = random.Random(SEED_TOPK + 1)
    specs = [  # B, S, S_kv, G, topk, wkind, score_kind, bcast
        (1, 2, 100, 1, 7, "none", "normal", False),
        (2, 3, 1000, 2, 64, "random", "alphabet", True),
        (1, 2, 3000, 1, 256, "narrow", "uniform", False),
        (1, 1, 17000, 1, 1000, "none", "normal", False),
        (2, 2, 50, 3, 100, "random", "normal", False),
        (1, 2, 2049, 1, 2048, "causal", "alphabet", False),
        (1, 1, 4000, 1, 16, "none", "equal", False),
        (3, 1, 0, 1, 4, "random", "normal", True),
    ]
    return [topk_case(rng, f"topk-small/b{B}/s{S}/skv{K}/g{G}/k{k}/{w}/{sk}/#{j}", 41000 + j, B, S, K, G, k, wkind=w,
                      score_kind=sk, bcast=bc)
            for j, (B, S, K, G, k, w, sk, bc) in enumerate(specs)]


def topk_errors():
    e = Errors(TOPK, "topk-error/", 6000, config={"topk": 3})

    def base(B=1, S=2, S_kv=6, G=1, topk=3, window=True):
        t = {"index_score": tensor([B, S, S_kv, G], "fp32", normal())}
        if window:
            t["starts"] = tensor([B, S], "int32", values([0] * (B * S)))
            t["ends"] = tensor([B, S], "int32", values([S_kv] * (B * S)))
        t["indexes"] = tensor([B, S, G, topk], "int32", OUTB, output=True)
        return t

    err = e.rule

    # param
    err("param/topk-zero", base(topk=1), "param", "topk: expected an integer", config={"topk": 0})
    err("param/topk-negative", base(topk=1), "param", "topk: expected an integer", config={"topk": -2})
    err("param/topk-fraction", base(topk=1), "param", "topk: expected an integer", config={"topk": 2.5})
    err("param/topk-missing", base(), "param", "topk: expected an integer >= 1, got none", config={})
    err("param/topk-string", base(), "param", "topk: expected a number", config={"topk": "3"})
    err("param/unknown-key", base(), "param", "clean_logits: expected one of", config={"topk": 3, "clean_logits": True})
    # dtype
    t = base()
    t["index_score"]["dtype"] = "fp16"
    err("dtype/score-fp16", t, "dtype", "index_score: expected fp32")
    t = base()
    t["starts"]["dtype"] = "int64"
    err("dtype/starts-int64", t, "dtype", "starts: expected int32")
    t = base()
    t["ends"]["dtype"] = "fp32"
    err("dtype/ends-fp32", t, "dtype", "ends: expected int32")
    t = base()
    t["indexes"]["dtype"] = "int64"
    err("dtype/indexes-int64", t, "dtype", "indexes: expected int32")
    # args
    t = base()
    del t["ends"]
    err("args/starts-without-ends", t, "args", "ends: expected a tensor")
    t = base()
    del t["starts"]
    err("args/ends-without-starts", t, "args", "starts: expected a tensor")
    t = base()
    t["weights"] = tensor([2], "fp32", normal())
    err("args/unknown-tensor", t, "args", "weights: expected one of")
    t = base()
    del t["index_score"]
    err("args/score-missing", t, "args", "index_score: expected a tensor")
    # shape
    t = base()
    t["index_score"]["shape"] = [1, 2, 6]
    err("shape/score-rank3", t, "shape", "index_score: expected 4 dims")
    t = base(G=0)
    err("shape/g-zero", t, "shape", "expected G >= 1")
    t = base()
    t["starts"]["shape"] = [2, 2]
    t["starts"]["init"] = values([0] * 4)
    err("shape/starts-b-mismatch", t, "shape", "starts: expected dim 0 (B)")
    t = base()
    t["ends"]["shape"] = [1, 3]
    t["ends"]["init"] = values([6] * 3)
    err("shape/ends-s-mismatch", t, "shape", "ends: expected dim 1 (S)")
    t = base()
    t["starts"]["shape"] = [2]
    err("shape/starts-rank1", t, "shape", "starts: expected 2 dims")
    t = base()
    t["indexes"]["shape"] = [1, 2, 1, 4]
    err("shape/indexes-topk-mismatch", t, "shape", "indexes: expected dim 3 (topk)")
    t = base(G=2)
    t["indexes"]["shape"] = [1, 2, 1, 3]
    err("shape/indexes-g-mismatch", t, "shape", "indexes: expected dim 2 (G)")
    t = base()
    t["indexes"]["shape"] = [1, 2, 3]
    err("shape/indexes-rank3", t, "shape", "indexes: expected 4 dims")
    t = base(S=2)
    t["indexes"]["shape"] = [1, 3, 1, 3]
    err("shape/indexes-s-mismatch", t, "shape", "indexes: expected dim 1 (S)")
    # layout
    t = base()
    t["index_score"]["strides"] = [2 * 8, 8, 1, 1]
    err("layout/score-not-contiguous", t, "layout", "index_score: expected a contiguous")
    t = base()
    t["indexes"]["strides"] = [2 * 4, 4, 4, 1]
    err("layout/indexes-not-contiguous", t, "layout", "indexes: expected a contiguous")
    err("unsupported/backend-hopper", base(), "unsupported", "hopper", config={"topk": 3, "backend": "hopper"},
        gpu_only=True)
    return e.cases


def main():
    args = case_args(__doc__).parse_args()
    out = args.out_dir
    write_cases(os.path.join(out, "topk_select_errors.json"), topk_errors())
    write_cases(os.path.join(out, "gpu", "topk_select_grid.json"), topk_grid(120))
    write_cases(os.path.join(out, "gpu", "topk_select_small.json"), topk_small())
    return 0


if __name__ == "__main__":
    sys.exit(main())
