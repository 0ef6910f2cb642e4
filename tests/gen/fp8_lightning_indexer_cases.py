#!/usr/bin/env python3
"""Test cases for fp8_lightning_indexer (SPEC.md §2.3) in the `attnjit test` format
(tools/cli/test_case.hpp). Standard library only; deterministic (fixed seeds).

Writes:
  tests/cases/fp8_lightning_indexer_errors.json   one case per rejection rule of §2.3 (category, message,
                                                  and that the poisoned output was not written)
  tests/cases/gpu/fp8_lightning_indexer_grid.json >= 100 random configurations, kernel vs CPU reference on
                                                  fresh random inputs, logits poisoned (NaN); compare
                                                  "masked_nse" (tol 1e-3: -inf pattern exact with
                                                  clean_logits, sum d^2 / sum ref^2 inside windows)
  tests/cases/gpu/fp8_lightning_indexer_small.json small shapes for compute-sanitizer

Grid axes: bf16 / e4m3 (scale present or absent), D 64 / 128, H/G in
{1, 2, 3, 4, 5, 8, 12, 16, 32, 64, 128}, G 1-4, B 1-3, S and S_kv around the 128-key tile (1 .. 2100),
negative weights, windows: full, document-causal (TileOPs' shape), random (outside [0, S_kv), ke < ks,
empty), sliding; clean_logits on / off; strided q / k / weights / windows, broadcast q over B, scales
strided; validate_inputs on some cases. Each case's reference cost B * S * S_kv * H * D is bounded.

Usage: python3 tests/gen/fp8_lightning_indexer_cases.py [--out-dir tests/cases]
"""
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from casegen_common import Errors, OUTB, case_args, contiguous, storage_size, tensor, values, write_cases  # noqa: E402

SEED_FP8 = 0xF8_1D
FP8 = "fp8_lightning_indexer"
MAX_FP8_COST = 6e8  # B * S * S_kv * H * D per case (reference time)


def normal(std=1.0):
    return {"kind": "normal", "mean": 0.0, "std": std}


# ----------------------------------------------------------------------------------------------------
# Windows


def windows(rng, kind, S, S_kv):
    """(ks, ke) lists of length S."""
    ks, ke = [], []
    if kind == "full":
        return [0] * S, [S_kv] * S
    if kind == "causal-docs":
        # TileOPs' benchmark shape: documents, each query sees its document's keys up to its position
        # (queries aligned to the end of the keys).
        off = S_kv - S
        s = 0
        while s < S:
            doc = rng.randint(1, max(1, 2 * max(S // 4, 1)))
            start = s
            for i in range(start, min(S, start + doc)):
                ks.append(max(start + off, 0) if start + off >= 0 else 0)
                ke.append(i + off + 1)
            s += doc
        return ks[:S], ke[:S]
    if kind == "random":
        for _ in range(S):
            a = rng.randint(-8, S_kv + 8)
            b = rng.randint(-8, S_kv + 8)
            if rng.random() < 0.6 and a > b:
                a, b = b, a
            ks.append(a)
            ke.append(b)
        return ks, ke
    if kind == "sliding":
        w = rng.choice([1, 16, 100, 300])
        off = S_kv - S
        for i in range(S):
            ke.append(i + off + 1)
            ks.append(i + off + 1 - w)
        return ks, ke
    raise ValueError(kind)


# ----------------------------------------------------------------------------------------------------
# fp8_lightning_indexer


def fp8_case(rng, name, seed, dtype, B, S, S_kv, H, G, D, *, wkind, clean=True, scale=False, strided=False,
             q_bcast=False, validate=False, gpu_only=True):
    es = 1 if dtype == "e4m3" else 2
    unit = 16 // es
    q_shape, k_shape = [B, S, H, D], [B, S_kv, G, D]
    q_st = k_st = w_st = None
    if strided:
        ph = unit * rng.choice([0, 1, 3])
        q_st = [S * H * (D + ph) + unit * rng.choice([0, 2]), H * (D + ph), D + ph, 1]
        pk = unit * rng.choice([1, 2])
        k_st = [S_kv * G * (D + pk) + unit, G * (D + pk), D + pk, 1]
        if S > 1 and H > 1:
            w_st = [1, S]  # transposed weights
    if q_bcast:
        st = q_st or contiguous(q_shape)
        q_st = [0] + st[1:]
    q_std = rng.choice([0.5, 1.0, 3.0]) if dtype == "bf16" else rng.choice([0.5, 2.0, 20.0])
    k_std = rng.choice([0.01, 1.0, 30.0]) if dtype == "bf16" else rng.choice([0.5, 2.0, 20.0])
    tensors = {
        "index_q": tensor(q_shape, dtype, normal(q_std), q_st),
        "index_k": tensor(k_shape, dtype, normal(k_std), k_st),
        "weights": tensor([S, H], "fp32", normal(rng.choice([0.1, 1.0])), w_st),
    }
    ks, ke = windows(rng, wkind, S, S_kv)
    win_stride = rng.choice([1, 1, 2]) if strided else 1
    for nm, arr in (("cu_seqlen_ks", ks), ("cu_seqlen_ke", ke)):
        if win_stride == 1:
            tensors[nm] = tensor([S], "int32", values(arr))
        else:
            store = []
            for v in arr:
                store += [v, -77777]
            tensors[nm] = tensor([S], "int32", values(store[:storage_size([S], [2])]), [2])
    if scale:
        s_st = None
        if strided:
            s_st = [S_kv * (G + 1) + 1, G + 1, 1]
        tensors["index_k_scale"] = tensor([B, S_kv, G], "fp32", {"kind": "uniform", "low": 0.05, "high": 2.0}, s_st)
    tensors["logits"] = tensor([B, S, S_kv, G], "fp32", {"kind": "poison"}, output=True)
    config = {}
    if not clean:
        config["clean_logits"] = False
    if validate:
        config["validate_inputs"] = True
    return {"name": name, "op": FP8, "config": config, "seed": seed, "tensors": tensors,
            "compare": {"logits": {"mode": "masked_nse", "tol": 1e-3}}, "gpu_only": gpu_only}


HG_CHOICES = [1, 2, 3, 4, 5, 8, 12, 16, 32, 32, 64, 64, 128]
S_CHOICES = [1, 2, 7, 33, 64, 100, 129, 257, 511]
SKV_CHOICES = [1, 5, 64, 127, 128, 129, 300, 1000, 1025, 2100]
WKINDS = ["full", "causal-docs", "random", "sliding"]


def fp8_grid(count):
    rng = random.Random(SEED_FP8)
    cases = []
    i = 0
    while len(cases) < count:
        dtype = ["bf16", "e4m3"][i % 2]
        D = rng.choice([64, 128])
        HG = HG_CHOICES[i % len(HG_CHOICES)] if i < 2 * len(HG_CHOICES) else rng.choice(HG_CHOICES)
        G = rng.choice([1, 1, 1, 2, 3, 4]) if HG <= 32 else rng.choice([1, 1, 2])
        H = HG * G
        B = rng.choice([1, 1, 2, 3])
        S = rng.choice(S_CHOICES)
        S_kv = rng.choice(SKV_CHOICES)
        i += 1
        while B * S * S_kv * H * D > MAX_FP8_COST and S > 1:
            S = max(1, S // 2)
        if B * S * S_kv * H * D > MAX_FP8_COST:
            continue
        wkind = rng.choice(WKINDS)
        clean = rng.random() < 0.7
        scale = dtype == "e4m3" and rng.random() < 0.6
        strided = rng.random() < 0.25
        q_bcast = B > 1 and rng.random() < 0.1
        validate = scale and rng.random() < 0.2
        tags = [wkind, "clean" if clean else "noclean"] + (["scale"] if scale else []) + \
            (["strided"] if strided else []) + (["bcast-q"] if q_bcast else []) + (["validate"] if validate else [])
        name = f"fp8li/{dtype}/d{D}/hg{HG}/g{G}/b{B}/s{S}/skv{S_kv}/" + "/".join(tags) + f"/#{len(cases)}"
        cases.append(fp8_case(rng, name, 30000 + len(cases), dtype, B, S, S_kv, H, G, D, wkind=wkind, clean=clean,
                              scale=scale, strided=strided, q_bcast=q_bcast, validate=validate))
    return cases


def fp8_small():
    rng = random.Random(SEED_FP8 + 1)
    specs = [  # dtype, B, S, S_kv, H, G, D, wkind, clean, scale, strided
        ("bf16", 1, 3, 130, 4, 1, 64, "random", True, False, False),
        ("e4m3", 2, 5, 40, 8, 2, 128, "full", True, True, True),
        ("bf16", 1, 9, 200, 32, 1, 64, "causal-docs", True, False, False),
        ("e4m3", 1, 70, 17, 1, 1, 64, "random", False, False, False),
        ("bf16", 2, 4, 129, 6, 2, 128, "sliding", False, False, True),
        ("e4m3", 1, 2, 300, 128, 1, 64, "full", True, True, False),
        ("bf16", 1, 33, 64, 2, 2, 64, "random", True, False, False),
        ("e4m3", 3, 2, 5, 12, 4, 128, "random", True, False, True),
        ("bf16", 1, 1, 1, 64, 1, 128, "full", True, False, False),
        ("e4m3", 1, 17, 260, 5, 1, 64, "causal-docs", True, True, False),
    ]
    return [fp8_case(rng, f"fp8li-small/{d}/b{B}/s{S}/skv{K}/h{H}/g{G}/d{D}/{w}/#{j}", 31000 + j, d, B, S, K, H, G, D,
                     wkind=w, clean=c, scale=sc, strided=st)
            for j, (d, B, S, K, H, G, D, w, c, sc, st) in enumerate(specs)]


def fp8_errors():
    e = Errors(FP8, "fp8li-error/", 5000, config={})

    def base(dtype="bf16", B=1, S=2, S_kv=3, H=4, G=1, D=64, scale=False):
        t = {
            "index_q": tensor([B, S, H, D], dtype, normal()),
            "index_k": tensor([B, S_kv, G, D], dtype, normal()),
            "weights": tensor([S, H], "fp32", normal()),
            "cu_seqlen_ks": tensor([S], "int32", values([0] * S)),
            "cu_seqlen_ke": tensor([S], "int32", values([S_kv] * S)),
            "logits": tensor([B, S, S_kv, G], "fp32", OUTB, output=True),
        }
        if scale:
            t["index_k_scale"] = tensor([B, S_kv, G], "fp32", {"kind": "uniform", "low": 0.5, "high": 1.0})
        return t

    err = e.rule

    # dtype
    t = base()
    t["index_q"]["dtype"] = t["index_k"]["dtype"] = "fp16"
    err("dtype/q-fp16", t, "dtype", "index_q: expected bf16 or e4m3")
    t = base()
    t["index_k"]["dtype"] = "e4m3"
    err("dtype/k-differs", t, "dtype", "index_k: expected bf16")
    t = base()
    t["weights"]["dtype"] = "bf16"
    err("dtype/weights-bf16", t, "dtype", "weights: expected fp32")
    t = base()
    t["cu_seqlen_ks"]["dtype"] = "int64"
    err("dtype/ks-int64", t, "dtype", "cu_seqlen_ks: expected int32")
    t = base()
    t["cu_seqlen_ke"]["dtype"] = "fp32"
    err("dtype/ke-fp32", t, "dtype", "cu_seqlen_ke: expected int32")
    t = base("e4m3", scale=True)
    t["index_k_scale"]["dtype"] = "fp16"
    err("dtype/scale-fp16", t, "dtype", "index_k_scale: expected fp32")
    t = base()
    t["logits"]["dtype"] = "bf16"
    err("dtype/logits-bf16", t, "dtype", "logits: expected fp32")
    # args
    err("args/scale-with-bf16", base(scale=True), "args", "index_k_scale: expected no tensor")
    t = base()
    del t["weights"]
    err("args/weights-missing", t, "args", "weights: expected a tensor")
    t = base()
    del t["cu_seqlen_ke"]
    err("args/ke-missing", t, "args", "cu_seqlen_ke: expected a tensor")
    t = base()
    t["index_v"] = tensor([1], "fp32", normal())
    err("args/unknown-tensor", t, "args", "index_v: expected one of")
    # shape
    t = base()
    t["index_q"]["shape"] = [2, 4, 64]
    err("shape/q-rank3", t, "shape", "index_q: expected 4 dims")
    t = base()
    t["index_k"]["shape"] = [1, 3, 64]
    err("shape/k-rank3", t, "shape", "index_k: expected 4 dims")
    t = base(B=2)
    t["index_k"]["shape"][0] = 1
    err("shape/k-b-mismatch", t, "shape", "index_k: expected dim 0 (B)")
    t = base(D=128)
    t["index_k"]["shape"][3] = 64
    err("shape/k-d-mismatch", t, "shape", "index_k: expected dim 3 (D)")
    err("shape/d-96", base(D=96), "shape", "expected D = 64 or 128")
    err("shape/d-32", base(D=32), "shape", "expected D = 64 or 128")
    err("shape/h-not-multiple-of-g", base(H=4, G=3), "shape", "expected G to divide H")
    err("shape/hg-above-128", base(H=256, G=1), "shape", "1 <= H/G <= 128")
    err("shape/h-zero", base(H=0), "shape", "expected H >= 1")
    err("shape/g-zero", base(G=0), "shape", "expected G >= 1")
    t = base()
    t["weights"]["shape"] = [3, 4]
    err("shape/weights-s-mismatch", t, "shape", "weights: expected dim 0 (S)")
    t = base()
    t["weights"]["shape"] = [2, 5]
    err("shape/weights-h-mismatch", t, "shape", "weights: expected dim 1 (H)")
    t = base()
    t["weights"]["shape"] = [1, 2, 4]
    err("shape/weights-rank3", t, "shape", "weights: expected 2 dims")
    t = base()
    t["cu_seqlen_ks"] = tensor([3], "int32", values([0, 0, 0]))
    err("shape/ks-not-s", t, "shape", "cu_seqlen_ks: expected dim 0 (S)")
    t = base()
    t["cu_seqlen_ke"] = tensor([1, 2], "int32", values([3, 3]))
    err("shape/ke-rank2", t, "shape", "cu_seqlen_ke: expected 1 dims")
    t = base("e4m3", scale=True)
    t["index_k_scale"]["shape"] = [1, 3, 2]
    err("shape/scale-g-mismatch", t, "shape", "index_k_scale: expected dim 2 (G)")
    t = base("e4m3", scale=True)
    t["index_k_scale"]["shape"] = [1, 4, 1]
    err("shape/scale-skv-mismatch", t, "shape", "index_k_scale: expected dim 1 (S_kv)")
    t = base("e4m3", scale=True)
    t["index_k_scale"]["shape"] = [1, 3]
    err("shape/scale-rank2", t, "shape", "index_k_scale: expected 3 dims")
    t = base()
    t["logits"]["shape"] = [1, 2, 4, 1]
    err("shape/logits-skv-mismatch", t, "shape", "logits: expected dim 2 (S_kv)")
    t = base(G=2, H=4)
    t["logits"]["shape"] = [1, 2, 3, 1]
    err("shape/logits-g-mismatch", t, "shape", "logits: expected dim 3 (G)")
    t = base()
    t["logits"]["shape"] = [1, 2, 3]
    err("shape/logits-rank3", t, "shape", "logits: expected 4 dims")
    # layout
    t = base()
    t["index_q"]["strides"] = [2 * 4 * 128, 4 * 128, 128, 2]
    err("layout/q-innermost-stride", t, "layout", "index_q: expected innermost stride 1")
    t = base()
    t["index_k"]["strides"] = [3 * 68, 68, 68, 1]  # 136-byte key rows: not a multiple of 16 bytes (device rule)
    err("layout/k-row-stride-not-16-bytes", t, "layout", "index_k: expected dim 1 stride", gpu_only=True)
    t = base()
    t["logits"]["strides"] = [2 * 3 * 2, 3 * 2, 2, 1]
    err("layout/logits-not-contiguous", t, "layout", "logits: expected a contiguous")
    t = base()
    t["weights"]["strides"] = [4, 1]
    t["index_q"]["strides"] = [2 * 4 * 64, 4 * 64, 64, 1]
    t["index_q"]["shape"] = [1, 2, 4, 64]
    t["index_q"]["strides"] = [2 * 4 * 64, 4 * 64, 1, 1]
    err("layout/q-head-stride-1", t, "layout", "index_q: expected dim 2 stride", gpu_only=True)
    # config
    err("param/clean-logits-string", base(), "param", "clean_logits: expected a boolean", config={"clean_logits": "yes"})
    err("param/unknown-key", base(), "param", "topk: expected one of", config={"topk": 4})
    err("param/validate-number", base(), "param", "validate_inputs: expected a boolean", config={"validate_inputs": 1})
    err("unsupported/backend-hopper", base(), "unsupported", "hopper", config={"backend": "hopper"}, gpu_only=True)
    # content (validate_inputs): index_k_scale finite and > 0
    for tag, bad in (("zero", 0.0), ("negative", -0.5), ("inf", "inf"), ("neg-inf", "-inf")):
        t = base("e4m3", B=1, S_kv=3, G=1, scale=True)
        t["index_k_scale"]["init"] = values([1.0, bad, 2.0])
        err(f"content/scale-{tag}", t, "content", "index_k_scale: expected finite values > 0",
            config={"validate_inputs": True})
    t = base("e4m3", B=1, S_kv=3, G=1, scale=True)
    t["index_k_scale"]["init"] = {"kind": "bits", "bits": [1065353216, 1065353216, 2143289344]}  # 1, 1, NaN
    err("content/scale-nan", t, "content", "index_k_scale: expected finite values > 0", config={"validate_inputs": True})
    return e.cases


def main():
    args = case_args(__doc__).parse_args()
    out = args.out_dir
    write_cases(os.path.join(out, "fp8_lightning_indexer_errors.json"), fp8_errors())
    write_cases(os.path.join(out, "gpu", "fp8_lightning_indexer_grid.json"), fp8_grid(120))
    write_cases(os.path.join(out, "gpu", "fp8_lightning_indexer_small.json"), fp8_small())
    return 0


if __name__ == "__main__":
    sys.exit(main())
