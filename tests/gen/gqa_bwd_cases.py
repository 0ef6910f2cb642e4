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
No GPU grids yet: gqa_bwd has no GPU kernel (they come with the kernels).

Usage: python3 tests/gen/gqa_bwd_cases.py [--out-dir tests/cases]
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from casegen_common import OUTB, case_args, normal, tensor, write_cases  # noqa: E402

OP = "gqa_bwd"
ACCEPTED_D = "expected head dim D in {64, 96, 128, 256}"


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
    cases = []

    def err(name, config, tensors, category, contains, gpu_only=False):
        c = {"name": "gqa-bwd-error/" + name, "op": OP, "config": config, "seed": 6000 + len(cases),
             "tensors": tensors, "expect_error": {"category": category, "contains": contains}}
        if gpu_only:
            c["gpu_only"] = True
        cases.append(c)

    def edit(f, **kw):
        t = base(**kw)
        f(t)
        return t

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
    err("param/unknown-key-window", {"window_size_left": 4}, base(), "param", "window_size_left: expected one of")
    err("param/unknown-key-softcap", {"softcap": 20.0}, base(), "param", "softcap: expected one of")
    err("param/unknown-impl", {"impl": "fast"}, base(), "param", "impl: expected")

    # --- dtype: 16-bit inputs of one dtype, lse fp32, outputs in q's dtype ---
    for dt in ("fp32", "e4m3"):
        t = base()
        for n in ("q", "k", "v", "o", "do", "dq", "dk", "dv"):
            t[n]["dtype"] = dt
        err(f"dtype/all-{dt}", {}, t, "dtype", "q: expected fp16 or bf16, got " + dt)
    for n, dt, want in (("k", "bf16", "fp16"), ("v", "bf16", "fp16"), ("o", "fp16", "bf16"), ("do", "fp16", "bf16"),
                        ("k", "fp32", "fp16"), ("dq", "bf16", "fp16"), ("dk", "fp16", "bf16"),
                        ("dv", "fp32", "bf16")):
        err(f"dtype/{n}-{dt}-for-{want}", {}, edit(lambda t: t[n].update(dtype=dt), dtype=want), "dtype",
            f"{n}: expected {want} (q's dtype), got {dt}")
    for dt in ("fp16", "bf16"):
        err(f"dtype/lse-{dt}", {}, edit(lambda t: t["lse"].update(dtype=dt)), "dtype", f"lse: expected fp32, got {dt}")

    # --- args: every tensor required, no unknown names ---
    for n in ("q", "k", "v", "o", "do", "lse", "dq", "dk", "dv"):
        err(f"args/{n}-missing", {}, edit(lambda t: t.pop(n)), "args", f"{n}: expected a tensor, got none")
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
    for n, strides in (("q", [512, 128, 64, 2]), ("k", [256, 128, 128, 2]), ("v", [256, 128, 128, 2]),
                       ("o", [512, 128, 64, 2]), ("do", [512, 128, 64, 2])):
        err(f"layout/{n}-innermost-stride2", {}, edit(lambda t: t[n].update(strides=strides)), "layout",
            f"{n}: expected innermost stride 1")
    # a head stride of 68 elements = 136 bytes: element-aligned (host reference accepts it), not 16-byte
    err("layout/q-head-stride-136-bytes", {}, edit(lambda t: t["q"].update(strides=[544, 136, 68, 1])), "layout",
        "q: expected dim 2 stride to be a multiple of 16 bytes", gpu_only=True)
    err("layout/do-token-stride-136-bytes", {}, edit(lambda t: t["do"].update(strides=[272, 68, 64, 1]), H=1),
        "layout", "do: expected dim 1 stride to be a multiple of 16 bytes", gpu_only=True)
    for n, strides in (("dq", [1024, 256, 64, 1]), ("dk", [512, 128, 64, 1]), ("dv", [288, 72, 64, 1]),
                       ("dq", [512, 128, 64, 0])):
        nm = f"layout/{n}-strides-" + "-".join(map(str, strides))
        err(nm, {}, edit(lambda t: t[n].update(strides=strides)), "layout",
            f"{n}: expected a contiguous (row-major) tensor")
    return cases


def main():
    args = case_args(__doc__).parse_args()
    cases = build_errors()
    write_cases(os.path.join(args.out_dir, "gqa_bwd_errors.json"), cases)
    return 0


if __name__ == "__main__":
    sys.exit(main())
