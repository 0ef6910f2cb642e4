#!/usr/bin/env python3
"""Test cases for gqa_bwd (SPEC.md §2.12) in the `attnjit test` format (tools/cli/test_case.hpp). Standard
library only; deterministic.

Writes:
  tests/cases/gqa_bwd_errors.json   one case per rejection rule (SPEC.md §2.12 "Rejected", §1.2 classes,
                                    §1.11 message format), each with the expected category and a fragment of
                                    the message ("<tensor or key>: expected ..."). The outputs dq, dk, dv are
                                    filled with a byte pattern, so the runner proves that a rejected call wrote
                                    nothing (reference path; without a GPU the kernel path's descriptor checks
                                    must reject the same call too). Rules only a device call has (the 16-byte
                                    stride rule of class F) are marked gpu_only. Not expressible in this format,
                                    and covered by tests/unit/gqa_bwd_test.cpp instead: a non-finite sm_scale
                                    (JSON has no infinity), device placement, overlapping outputs, the kernel
                                    impl's Unsupported error.
  tests/cases/gpu/gqa_bwd_grid.json   >= 200 random configurations compared kernel vs CPU reference with
                                      poisoned outputs: causal and not; MHA, GQA (H / H_kv = 4, 8) and MQA;
                                      S = 1, S not a multiple of 64 or 128, S up to 8192; D 64/96/128/256;
                                      fp16/bf16; backends portable and hopper (hopper: D 64, 128);
                                      deterministic on and off (deterministic cases
                                      repeat the kernel call and require identical bytes); padded (class F)
                                      strides on some. Gradients compare in "grad" mode (SPEC.md §1.12's
                                      floor for tensors that cancel, e.g. dq, dk at S = 1). o and lse
                                      are the forward's: each case's "setup" runs gqa_fwd (the CPU reference
                                      on the host tensors: o rounded to the input dtype, lse fp32).
                                      Then 48 cases with gqa_fwd's sliding windows (beyond the contract:
                                      left windows 0 to 300 keys, with causal or, without it, with right
                                      windows), drawn from their own generator.
  tests/cases/gpu/gqa_bwd_small.json  ~28 small cases (every code path, windows included) for compute-sanitizer.
  tests/cases/gpu/gqa_bwd_hopper_d256_grid.json, gqa_bwd_hopper_d256_small.json
                                      the hopper backend at D 256 (the kernel splitting D over its consumer
                                      warpgroups; not deterministic), 64 and 12 cases of the same kinds, windows
                                      included. With ATTNJIT_TUNE_GQA_BWD_HOPPER_D256=0 in the environment
                                      every case of these files fails naming the switch.

Usage: python3 tests/gen/gqa_bwd_cases.py [--out-dir tests/cases] [--count N]
"""
import os
import random
import sys
from functools import partial

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from casegen_common import (Errors, OUTB, POISON, case_args, draw_heads, edited, normal, random_padded_strides, tensor,  # noqa: E402
                            write_cases)

OP = "gqa_bwd"
ACCEPTED_D = "expected head dim D in {64, 96, 128, 256}"
GRAD_TOL = 2e-2         # dq, dk, dv: rel L2 with SPEC.md §1.12's cancellation floor ("grad" mode), bf16's 2 x 1e-2
MAX_CASE_COST = 6e8     # B * H * S * S * D per case (the CPU reference's work)


def base(dtype="fp16", B=1, S=4, H=2, H_kv=1, D=64):
    """A valid call's tensors: q, o, do [B, S, H, D], k, v [B, S, H_kv, D], lse [B, H, S] fp32, and the
    outputs dq [B, S, H, D], dk, dv [B, S, H_kv, D] holding a byte pattern."""
    return {
        "q": tensor([B, S, H, D], dtype, normal()),
        "k": tensor([B, S, H_kv, D], dtype, normal()),
        "v": tensor([B, S, H_kv, D], dtype, normal()),
        "o": tensor([B, S, H, D], dtype, normal()),
        "do": tensor([B, S, H, D], dtype, normal()),
        "lse": tensor([B, H, S], "fp32", normal()),
        "dq": tensor([B, S, H, D], dtype, OUTB, output=True),
        "dk": tensor([B, S, H_kv, D], dtype, OUTB, output=True),
        "dv": tensor([B, S, H_kv, D], dtype, OUTB, output=True),
    }


def build_errors():
    e = Errors(OP, "gqa-bwd-error/", 6000)
    err = e.err
    edit = partial(edited, base)

    # --- param: sm_scale finite and > 0; is_causal a boolean; unknown keys (gqa_fwd's options included) ---
    err("param/sm-scale-zero", {"sm_scale": 0.0}, base(), "param", "sm_scale: expected a finite value > 0, got 0")
    err("param/sm-scale-negative", {"sm_scale": -0.125}, base(), "param",
        "sm_scale: expected a finite value > 0, got -0.125")
    # JSON has no infinity or NaN (nlohmann rejects 1e999), so a non-finite sm_scale cannot be written; the
    # string spellings are rejected as non-numbers instead.
    err("param/sm-scale-string-inf", {"sm_scale": "inf"}, base(), "param", "sm_scale: expected a number")
    err("param/sm-scale-string-nan", {"sm_scale": "nan"}, base(), "param", "sm_scale: expected a number")
    err("param/is-causal-not-bool", {"is_causal": 1}, base(), "param", "is_causal: expected a boolean")
    err("param/unknown-key-causal", {"causal": True}, base(), "param", "causal: expected one of")
    err("param/window-left-below-minus-one", {"window_size_left": -2}, base(), "param",
        "window_size_left: expected an integer >= -1, got -2")
    err("param/window-right-fractional", {"window_size_right": 1.5}, base(), "param",
        "window_size_right: expected an integer >= -1, got 1.5")
    err("param/deterministic-not-bool", {"deterministic": 1}, base(), "param", "deterministic: expected a boolean")
    err("param/unknown-key-softcap", {"softcap": 20.0}, base(), "param", "softcap: expected one of")
    err("param/unknown-impl", {"impl": "fast"}, base(), "param", "impl: expected")

    # --- dtype: 16-bit inputs of one dtype, lse fp32, outputs in q's dtype ---
    e.all_dtypes({}, base, ("q", "k", "v", "o", "do", "dq", "dk", "dv"))
    e.dtype_mismatches({}, base, (("k", "bf16", "fp16"), ("v", "bf16", "fp16"), ("o", "fp16", "bf16"),
                                  ("do", "fp16", "bf16"), ("k", "fp32", "fp16"), ("dq", "bf16", "fp16"),
                                  ("dk", "fp16", "bf16"), ("dv", "fp32", "bf16")))
    for dt in ("fp16", "bf16"):
        err(f"dtype/lse-{dt}", {}, edit(lambda t: t["lse"].update(dtype=dt)), "dtype", f"lse: expected fp32, got {dt}")

    # --- args: every tensor required, no unknown names ---
    e.missing({}, base, ("q", "k", "v", "o", "do", "lse", "dq", "dk", "dv"))
    err("args/unknown-tensor-name", {}, edit(lambda t: t.update(dO=tensor([1, 4, 2, 64], "fp16", normal()))),
        "args", "dO: expected one of")
    err("args/gqa-fwd-tensor-q-scale", {}, edit(lambda t: t.update(q_scale=tensor([1, 1], "fp32", normal()))),
        "args", "q_scale: expected one of")

    # --- shape: ranks ---
    for n, shape, dims in (("q", [4, 2, 64], "[B, S, H, D]"), ("k", [1, 4, 1, 1, 64], "[B, S, H_kv, D]"),
                           ("v", [4, 1, 64], "[B, S, H_kv, D]"), ("o", [1, 8, 64], "[B, S, H, D]"),
                           ("do", [1, 4, 2, 64, 1], "[B, S, H, D]"), ("lse", [1, 2], "[B, H, S]"),
                           ("dq", [8, 64], "[B, S, H, D]"), ("dk", [4, 1, 64], "[B, S, H_kv, D]"),
                           ("dv", [1, 4, 1, 1, 64], "[B, S, H_kv, D]")):
        err(f"shape/{n}-rank-{len(shape)}", {}, edit(lambda t: t[n].update(shape=shape)), "shape",
            f"{n}: expected {4 if n != 'lse' else 3} dims {dims}")
    # accepted head dims (every tensor consistent, so the head-dim rule is what fails)
    for D in (16, 32, 80, 192, 512):
        err(f"shape/d{D}", {}, base(D=D), "shape", f"q: {ACCEPTED_D}, got {D}")
    # group size
    err("shape/h3-hkv2", {}, base(H=3, H_kv=2), "shape", "k: expected H_kv dividing H (H % H_kv == 0), got H = 3, H_kv = 2")
    err("shape/h2-hkv4", {}, base(H=2, H_kv=4), "shape", "k: expected H_kv dividing H (H % H_kv == 0), got H = 2, H_kv = 4")
    # square: S of k and v equal q's; batch and head dims agree
    err("shape/k-seq-differs", {}, edit(lambda t: [t[n]["shape"].__setitem__(1, 5) for n in ("k", "v", "dk", "dv")]),
        "shape", "k: expected dim 1 (S, q's sequence length) = 4, got 5")
    err("shape/v-seq-differs", {}, edit(lambda t: t["v"]["shape"].__setitem__(1, 3)), "shape",
        "v: expected dim 1 (S, q's sequence length) = 4, got 3")
    err("shape/k-batch-differs", {}, edit(lambda t: t["k"]["shape"].__setitem__(0, 2)), "shape",
        "k: expected dim 0 (B) = 1, got 2")
    err("shape/v-heads-differ", {}, edit(lambda t: t["v"]["shape"].__setitem__(2, 2), H=4, H_kv=1), "shape",
        "v: expected dim 2 (H_kv, k's heads) = 1, got 2")
    err("shape/k-d-differs", {}, edit(lambda t: t["k"]["shape"].__setitem__(3, 128)), "shape",
        "k: expected dim 3 (D) = 64, got 128")
    err("shape/v-d-differs", {}, edit(lambda t: t["v"]["shape"].__setitem__(3, 128)), "shape",
        "v: expected dim 3 (D) = 64, got 128")
    # o, do, dq have q's shape; dk, dv k's; lse [B, H, S]
    for n, dim, val, what in (("o", 2, 1, "H"), ("o", 1, 3, "S"), ("do", 3, 128, "D"), ("do", 0, 2, "B"),
                              ("dq", 2, 1, "H"), ("dq", 1, 5, "S"), ("dk", 2, 2, "H_kv"), ("dk", 1, 3, "S"),
                              ("dv", 3, 32, "D"), ("dv", 0, 2, "B")):
        want = base()[n]["shape"][dim]
        err(f"shape/{n}-dim{dim}-{val}", {}, edit(lambda t: t[n]["shape"].__setitem__(dim, val)), "shape",
            f"{n}: expected dim {dim} ({what}) = {want}, got {val}")
    err("shape/lse-bsh-order", {}, edit(lambda t: t["lse"].update(shape=[1, 4, 2])), "shape",
        "lse: expected dim 1 (H) = 2, got 4")
    err("shape/lse-seq-differs", {}, edit(lambda t: t["lse"]["shape"].__setitem__(2, 5)), "shape",
        "lse: expected dim 2 (S) = 4, got 5")
    err("shape/lse-batch-differs", {}, edit(lambda t: t["lse"]["shape"].__setitem__(0, 3)), "shape",
        "lse: expected dim 0 (B) = 1, got 3")

    # --- layout: inputs class F (innermost stride 1; on a device 16-byte strides), outputs class O ---
    e.innermost_strides({}, base, (("q", [512, 128, 64, 2]), ("k", [256, 128, 128, 2]), ("v", [256, 128, 128, 2]),
                                   ("o", [512, 128, 64, 2]), ("do", [512, 128, 64, 2])))
    # a head stride of 68 elements = 136 bytes: element-aligned (host reference accepts it), not 16-byte
    err("layout/q-head-stride-136-bytes", {}, edit(lambda t: t["q"].update(strides=[544, 136, 68, 1])), "layout",
        "q: expected dim 2 stride to be a multiple of 16 bytes", gpu_only=True)
    err("layout/do-token-stride-136-bytes", {}, edit(lambda t: t["do"].update(strides=[272, 68, 64, 1]), H=1),
        "layout", "do: expected dim 1 stride to be a multiple of 16 bytes", gpu_only=True)
    e.not_contiguous({}, base, (("dq", [1024, 256, 64, 1]), ("dk", [512, 128, 64, 1]), ("dv", [288, 72, 64, 1]),
                                ("dq", [512, 128, 64, 0])))
    return e.cases


def build_case(name, seed, *, dtype, B, S, H, H_kv, D, causal, backend, det, scale=None, padded=False, rng=None,
               wl=-1, wr=-1):
    qs, ks = [B, S, H, D], [B, S, H_kv, D]
    tensors = {}
    for n, shp in (("q", qs), ("k", ks), ("v", ks), ("do", qs)):
        st = random_padded_strides(rng, shp, dtype) if padded and n in ("q", "k", "do") else None
        tensors[n] = tensor(shp, dtype, normal(), strides=st)
    tensors["o"] = tensor(qs, dtype, POISON)
    tensors["lse"] = tensor([B, H, S], "fp32", POISON)
    tensors["dq"] = tensor(qs, dtype, POISON, output=True)
    tensors["dk"] = tensor(ks, dtype, POISON, output=True)
    tensors["dv"] = tensor(ks, dtype, POISON, output=True)
    config = {"is_causal": causal, "backend": backend}
    fwd_config = {"is_causal": causal}
    if scale is not None:
        config["sm_scale"] = scale
        fwd_config["sm_scale"] = scale
    for key, w in (("window_size_left", wl), ("window_size_right", wr)):
        if w >= 0:
            config[key] = w
            fwd_config[key] = w
    if det:
        config["deterministic"] = True
    return {"name": name, "op": OP, "config": config, "seed": seed, "tensors": tensors,
            "setup": [{"op": "gqa_fwd", "config": fwd_config,
                       "tensors": {n: n for n in ("q", "k", "v", "o", "lse")}}],
            "compare": {n: {"mode": "grad", "tol": GRAD_TOL} for n in ("dq", "dk", "dv")},
            "gpu_only": True, **({"repeat": True} if det else {})}


def draw(rng, small=False):
    d = {"dtype": rng.choice(["fp16", "bf16"]), "causal": rng.random() < 0.6, "det": rng.random() < 0.35}
    d["backend"] = rng.choice(["portable", "hopper"])
    d["D"] = rng.choice([64, 128] if d["backend"] == "hopper" else [64, 96, 128, 256])
    d["H_kv"], d["H"] = draw_heads(rng, (4, 8), small, gqa_kv_small=[1])
    r = rng.random()
    if small:
        d["S"] = rng.choice([1, 2, 17, 63, 64, 65, 130, 200])
    elif r < 0.08:
        d["S"] = 1
    elif r < 0.55:
        d["S"] = rng.randint(2, 300)
    elif r < 0.9:
        d["S"] = rng.choice([64, 127, 128, 129, 191, 256, 383, 512, 640, 1000, 1024, 1500])
    else:
        d["S"] = rng.choice([2048, 3000, 4096, 8192])
    d["B"] = rng.choice([1, 2, 3]) if d["S"] < 1024 else 1
    d["scale"] = rng.choice([None, None, None, 0.07])
    d["padded"] = (not small) and rng.random() < 0.2
    return d


def cost(d):
    return d["B"] * d["H"] * d["S"] * d["S"] * d["D"]


def case_name(prefix, i, d):
    g = d["H"] // d["H_kv"]
    att = "mha" if g == 1 else ("mqa" if d["H_kv"] == 1 else f"gqa{g}")
    parts = [prefix + f"/{i:03d}", d["backend"], d["dtype"], f"d{d['D']}", att, f"b{d['B']}", f"s{d['S']}",
             "causal" if d["causal"] else "full"]
    if d["det"]:
        parts.append("det")
    if d["scale"] is not None:
        parts.append("scale")
    if d["padded"]:
        parts.append("padded")
    if d.get("wl", -1) >= 0 or d.get("wr", -1) >= 0:
        parts.append(f"wl{d.get('wl', -1)}-wr{d.get('wr', -1)}")
    return "-".join(parts)


def draw_window(rng, d, small):
    """gqa_fwd's sliding window (beyond the contract): a left window (some narrower than a 64-row slot,
    some past a 128-key block), and without causal a right window too."""
    d["wl"] = rng.choice([0, 1, 5, 17, 63, 64, 100, 300, -1] if not small else [0, 3, 40, -1])
    d["wr"] = -1 if d["causal"] else rng.choice([-1, 0, 3, 64, 200] if not small else [-1, 0, 9])
    if d["wl"] < 0 and d["wr"] < 0:
        d["wl"] = 2
    return d


def build_set(prefix, count, seed, small, window_count=0):
    rng = random.Random(seed)
    out = []
    # Fixed corners first: every (backend, D) with S = 1 and a ragged S, causal and deterministic.
    corners = []
    for backend, dims in (("portable", (64, 96, 128, 256)), ("hopper", (64, 128))):
        for D in dims:
            corners.append(dict(dtype="bf16", causal=True, det=False, backend=backend, D=D, H=4, H_kv=1, S=1, B=1,
                                scale=None, padded=False))
            corners.append(dict(dtype="fp16", causal=True, det=True, backend=backend, D=D, H=8, H_kv=2,
                                S=77 if small else 333, B=2, scale=None, padded=False))
            corners.append(dict(dtype="bf16", causal=False, det=not small, backend=backend, D=D, H=2, H_kv=2,
                                S=130 if small else 1000, B=1, scale=None, padded=False))
    if not small:  # the longest sequences, at the smallest head count the CPU reference can afford
        for backend in ("portable", "hopper"):
            corners.append(dict(dtype="bf16", causal=True, det=backend == "hopper", backend=backend, D=64, H=1, H_kv=1,
                                S=8192, B=1, scale=None, padded=False))
    i = 0
    for d in corners:
        out.append(build_case(case_name(prefix, i, d), seed + i, rng=rng, **d))
        i += 1
    while len(out) < count:
        d = draw(rng, small)
        if cost(d) > (2e7 if small else MAX_CASE_COST):
            continue
        out.append(build_case(case_name(prefix, i, d), seed + i, rng=rng, **d))
        i += 1
    # Windowed cases after the rest (their own draws, so the cases above stay what they were).
    wrng = random.Random(seed + 7)
    while len(out) < count + window_count:
        d = draw_window(wrng, draw(wrng, small), small)
        if cost(d) > (2e7 if small else MAX_CASE_COST):
            continue
        out.append(build_case(case_name(prefix, i, d), seed + i, rng=wrng, **d))
        i += 1
    return out


def build_d256_set(prefix, count, seed, small):
    """The hopper D 256 kernel: corners (S = 1, ragged S across 64-key blocks, causal and not, MQA / GQA / MHA,
    windows), then random draws of the grid's kinds pinned to backend hopper, D 256, not deterministic."""
    rng = random.Random(seed)
    common = dict(backend="hopper", D=256, det=False, scale=None, padded=False)
    corners = [dict(dtype="bf16", causal=True, H=4, H_kv=1, S=1, B=1, **common),
               dict(dtype="fp16", causal=True, H=8, H_kv=2, S=77 if small else 333, B=2, **common),
               dict(dtype="bf16", causal=False, H=2, H_kv=2, S=130 if small else 1000, B=1, **common),
               dict(dtype="fp16", causal=False, H=4, H_kv=4, S=64, B=1, **common),
               dict(dtype="bf16", causal=True, H=2, H_kv=1, S=65 if small else 129, B=3, **common),
               dict(dtype="bf16", causal=True, H=2, H_kv=2, S=100 if small else 700, B=1, wl=40, wr=-1, **common),
               dict(dtype="fp16", causal=False, H=4, H_kv=2, S=90 if small else 500, B=1, wl=3, wr=9, **common)]
    out = []
    for i, d in enumerate(corners):
        out.append(build_case(case_name(prefix, i, d), seed + i, rng=rng, **d))
    i = len(out)
    while len(out) < count:
        d = draw(rng, small)
        d.update(backend="hopper", D=256, det=False)
        if rng.random() < 0.25:
            draw_window(rng, d, small)
        if cost(d) > (2e7 if small else MAX_CASE_COST):
            continue
        out.append(build_case(case_name(prefix, i, d), seed + i, rng=rng, **d))
        i += 1
    return out


def main():
    args = case_args(__doc__, count=216).parse_args()
    write_cases(os.path.join(args.out_dir, "gpu", "gqa_bwd_grid.json"), build_set("gqa-bwd-grid", args.count, 90000, False, 48))
    write_cases(os.path.join(args.out_dir, "gpu", "gqa_bwd_small.json"), build_set("gqa-bwd-small", 22, 91000, True, 6))
    write_cases(os.path.join(args.out_dir, "gpu", "gqa_bwd_hopper_d256_grid.json"),
                build_d256_set("gqa-bwd-hopper-d256-grid", 64, 92000, False))
    write_cases(os.path.join(args.out_dir, "gpu", "gqa_bwd_hopper_d256_small.json"),
                build_d256_set("gqa-bwd-hopper-d256-small", 12, 93000, True))
    cases = build_errors()
    write_cases(os.path.join(args.out_dir, "gqa_bwd_errors.json"), cases)
    return 0


if __name__ == "__main__":
    sys.exit(main())
