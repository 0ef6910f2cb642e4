#!/usr/bin/env python3
"""Test cases for gqa_fwd and gqa_varlen_fwd (SPEC.md §2.7, §2.8) in the `attnjit test` format
(tools/cli/test_case.hpp). Standard library only; deterministic (fixed seeds).

Writes:
  tests/cases/gpu/gqa_grid.json   >= 320 random configurations, every one "gpu_only": the runner compares the
                                  kernel with the CPU reference on the same random inputs (no golden). Drawn
                                  across op, dtype (fp16, bf16; e4m3 with out_dtype fp16/bf16 in ~10 %), D in
                                  {64, 96, 128, 256}, (H, H_kv) with H / H_kv in {1, 2, 4, 8} and H <= 16,
                                  causal x windows (none / left / right / both, small windows 0, 1, 7 and ones
                                  that empty rows) x softcap (0, 20, 50) x rope (none / neox / interleaved, R = D,
                                  D / 2, 10 or another even width) x sinks (varlen: none / finite / some -inf /
                                  some +inf) x ragged lengths (1, 7, 63, 64, 65, 127, 128, 129, 1000, 4097, S_q !=
                                  S_kv mostly, S_q <= S_kv whenever causal or rope), varlen batches of 1..6
                                  requests with empty ones and kv_len = 0, dense batches of 1..3, padded (class F)
                                  strides and a few zero (broadcast) strides on the inputs, validate_inputs on
                                  some. The CPU reference cost (sum over requests of q_len * H * kv_len * D, an
                                  upper bound: masking only lowers it) is capped per case and in total
                                  (MAX_TOTAL_COST) so that the whole grid's reference stays within minutes.
  tests/cases/gpu/gqa_small.json  ~24 small cases (every feature, S <= 70) for compute-sanitizer runs.
  tests/cases/gqa_fwd_errors.json, tests/cases/gqa_varlen_fwd_errors.json
                                  one case per rejection of SPEC.md §2.7 / §2.8 ("Rejected" lists and the
                                  validate_inputs caller contract), with outputs filled with a byte pattern so
                                  the runner proves a rejected call wrote nothing; one file per op.

One generator for both ops (named after their family): the grid draws the op per case from one random
stream, so splitting it per op would change every case; the GPU files stay shared (gqa_grid.json,
gqa_small.json) and only the error files, which need no random stream, are written per op.

Tolerances (SPEC.md §1.12): o rel_l2 bf16 1e-2, fp16 5e-3, FP8 inputs 5e-2; lse with the "lse" rule.

Usage: python3 tests/gen/gqa_cases.py [--out-dir tests/cases] [--count N]
"""
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from casegen_common import (Errors, OUTB, POISON, TOL, attention_config, attention_name_parts, case_args,  # noqa: E402
                            contiguous, fewer_heads, normal, random_padded_strides, random_sinks, tensor, weighted,
                            write_cases, write_errors_per_op)

SEED = 0x6A0F
MAX_TOTAL_COST = 1.9e10           # sum over the grid of q_len * H * kv_len * D
CASE_CAPS = [(8e7, 0.65), (5e8, 0.27), (2.5e9, 0.08)]  # per-case cost caps and how often each is drawn
RESERVE = 2.5e7
LENGTHS = [1, 7, 63, 64, 65, 127, 128, 129, 1000, 4097]
# Grid seeds whose reference o holds an exact zero made by cancellation (an fp16 element |o| < 2^-25 whose
# contributions sum_j p_j |v_j| / Z are >= 3e-6; found by running the CPU reference over the grid). The
# runner requires every exact zero of the reference to be an exact zero of the kernel, which is meant for
# the rows the contract makes zero; a kernel within tolerance lands on a tiny nonzero there. Such a draw
# gets other inputs (seed + SEED_BUMP, repeatedly); its configuration is unchanged. Structural zeros (an
# e4m3 v element that is exactly 0 under a single visible or dominant key) are kept: the kernel must
# reproduce those. Any change to the draws below invalidates this list: re-run the check.
RESEED = {20066, 20137, 20155, 20165, 20198, 120198, 20207, 20267, 20313}
SEED_BUMP = 100000


def padded_contiguous(shape, dim, pad):
    """Row-major strides, except that the stride of `dim` (an axis whose extent is > 1, not the innermost)
    is padded by `pad` elements; the outer strides follow from it."""
    assert shape[dim] > 1 and dim < len(shape) - 1
    st = [1] * len(shape)
    for d in range(len(shape) - 2, -1, -1):
        st[d] = st[d + 1] * shape[d + 1] + (pad if d == dim else 0)
    return st


def sinks_init(values):
    return {"kind": "values", "values": [v if isinstance(v, str) else float(v) for v in values]}


# ----------------------------------------------------------------------------------------------------
# Random grid


class Draw:
    """One random configuration."""


def draw_lengths(rng, varlen, causal, rope, allow_equal=True):
    """(q_len, kv_len) for one dense batch or one request."""
    while True:
        ql, kl = rng.choice(LENGTHS), rng.choice(LENGTHS)
        if varlen and rng.random() < 0.12:
            ql = 0  # empty request
        if varlen and not causal and not rope and rng.random() < 0.06:
            kl = 0  # no keys at all: every row empty (zeros, lse = sink or -inf)
        if (causal or rope) and ql > kl:
            ql, kl = kl, ql
        if ql == kl and not allow_equal and ql > 0:
            continue
        return ql, kl


def grid_case(rng, idx, seed, cost_cap, small=False):
    d = Draw()
    d.varlen = rng.random() < 0.5
    d.op = "gqa_varlen_fwd" if d.varlen else "gqa_fwd"
    r = rng.random()
    if r < 0.10:
        d.dtype, d.out_dtype = "e4m3", rng.choice(["fp16", "bf16"])
    else:
        d.dtype, d.out_dtype = rng.choice(["fp16", "bf16"]), None
    d.cdt = d.out_dtype or d.dtype
    d.D = rng.choice([64, 96, 128, 256])
    g = rng.choice([1, 2, 4, 8])
    d.H_kv = rng.choice([h for h in (1, 2, 4, 8, 16) if h * g <= (8 if small else 16)])
    if rng.random() < 0.15:
        d.H_kv = 1  # MQA / single kv head
    d.H = g * d.H_kv
    d.causal = rng.random() < 0.5
    wkind = weighted(rng, [("none", 0.4), ("left", 0.2), ("right", 0.15), ("both", 0.25)])
    wvals = [0, 1, 7, 16, 63, 100, 511]
    d.wl = rng.choice(wvals) if wkind in ("left", "both") else -1
    d.wr = rng.choice(wvals) if wkind in ("right", "both") else -1
    d.softcap = rng.choice([20.0, 50.0]) if rng.random() < 0.3 else 0.0
    rk = weighted(rng, [(None, 0.55), ("neox", 0.25), ("interleaved", 0.2)])
    d.rope = rk
    d.R = None
    if rk:
        d.R = weighted(rng, [(d.D, 0.4), (d.D // 2, 0.3), (10, 0.15), (2 * rng.randint(1, d.D // 2), 0.15)])
    d.sinks = None
    if d.varlen:
        d.sinks = weighted(rng, [(None, 0.4), ("finite", 0.3), ("neginf", 0.15), ("posinf", 0.15)])
    d.std = 3.0 if rng.random() < 0.2 else 1.0
    d.lse = rng.random() < 0.5
    d.validate = rng.random() < 0.1
    d.strided = rng.random() < 0.15
    d.bcast = rng.random() < 0.03
    d.sm_scale = rng.choice([0.05, 0.3]) if rng.random() < 0.08 else None

    # lengths under the cost cap
    for attempt in range(400):
        if d.varlen:
            nreq = rng.randint(1, 6)
            reqs = [draw_lengths(rng, True, d.causal, d.rope) for _ in range(nreq)]
        else:
            B = rng.randint(1, 3)
            ql, kl = draw_lengths(rng, False, d.causal, d.rope, allow_equal=rng.random() < 0.2)
            if rng.random() < 0.1:
                ql = kl  # S_q = S_kv (square prefill)
            reqs = [(ql, kl)] * B
        if small:
            reqs = [(min(q, 70), min(k, 70)) for q, k in reqs]
            if (d.causal or d.rope):
                reqs = [(min(q, k), k) for q, k in reqs]
        cost = sum(q * k for q, k in reqs) * d.H * d.D
        if cost <= cost_cap:
            break
        if attempt > 200 and d.H > 1:  # many tries failed: fewer heads (keep the group size if possible)
            fewer_heads(d)
    else:
        reqs = [(min(q, 7), min(k, 7)) for q, k in reqs]
        cost = sum(q * k for q, k in reqs) * d.H * d.D
    d.reqs = reqs
    d.cost = cost
    return build_grid_case(rng, d, idx, seed)


def build_grid_case(rng, d, idx, seed):
    H, H_kv, D = d.H, d.H_kv, d.D
    tensors = {}
    rotary_dim = bool(d.rope) and (d.R != D or rng.random() < 0.5)  # a full-width R is stated half the time
    config = attention_config(d.causal, d.wl, d.wr, d.sm_scale, d.softcap, d.rope, d.R, rotary_dim, d.out_dtype,
                              d.validate)
    # The portable kernel, whatever 'auto' would pick on the GPU (tests/gen/gqa_hopper_cases.py derives the
    # hopper backend's cases from these).
    config["backend"] = "portable"
    if d.varlen:
        B = len(d.reqs)
        cu_q, cu_k = [0], [0]
        for q, k in d.reqs:
            cu_q.append(cu_q[-1] + q)
            cu_k.append(cu_k[-1] + k)
        T_q, T_kv = cu_q[-1], cu_k[-1]
        q_shape, kv_shape, lse_shape = [T_q, H, D], [T_kv, H_kv, D], [T_q, H]
        max_kv = max([k for _, k in d.reqs] + [0])
    else:
        B = len(d.reqs)
        S_q, S_kv = d.reqs[0]
        q_shape, kv_shape, lse_shape = [B, S_q, H, D], [B, S_kv, H_kv, D], [B, H, S_q]
        max_kv = S_kv
    qs = ks = vs = None
    if d.strided:
        qs = random_padded_strides(rng, q_shape, d.dtype)
        ks = random_padded_strides(rng, kv_shape, d.dtype)
        vs = random_padded_strides(rng, kv_shape, d.dtype)
    if d.bcast:
        # a zero (broadcast) stride on a read-only input: v shared across kv heads (or batch entries)
        dim = 1 if d.varlen else (0 if B > 1 else 2)
        if kv_shape[dim] > 1:
            vs = random_padded_strides(rng, kv_shape, d.dtype, zero_dim=dim)
        else:
            d.bcast = False
    tensors["q"] = tensor(q_shape, d.dtype, normal(d.std), qs)
    tensors["k"] = tensor(kv_shape, d.dtype, normal(d.std), ks)
    tensors["v"] = tensor(kv_shape, d.dtype, normal(1.0), vs)
    if d.varlen:
        tensors["cu_seqlens_q"] = tensor([B + 1], "int32", {"kind": "values", "values": cu_q})
        tensors["cu_seqlens_kv"] = tensor([B + 1], "int32", {"kind": "values", "values": cu_k})
    if d.dtype == "e4m3":
        for n in ("q_scale", "k_scale", "v_scale"):
            tensors[n] = tensor([B, H_kv], "fp32", {"kind": "uniform", "low": 0.5, "high": 2.0})
    if d.rope:
        P = max_kv + rng.choice([0, 0, 1, 5, 64])
        for n in ("rope_cos", "rope_sin"):
            tensors[n] = tensor([P, d.R // 2], d.cdt, {"kind": "uniform", "low": -1.0, "high": 1.0})
    if d.sinks:
        tensors["sinks"] = tensor([H], "fp32", sinks_init(random_sinks(rng, d.sinks, H)))
    tensors["o"] = tensor(q_shape, d.cdt, POISON, output=True)
    compare = {"o": {"mode": "rel_l2", "tol": TOL[d.dtype]}}
    if d.lse:
        tensors["lse"] = tensor(lse_shape, "fp32", POISON, output=True)
        compare["lse"] = {"mode": "lse"}

    # name
    parts = [d.op, d.dtype if d.dtype != "e4m3" else f"e4m3-{d.out_dtype}", f"d{D}", f"h{H}kv{H_kv}",
             "causal" if d.causal else "noncausal"] + attention_name_parts(d)
    if d.varlen:
        parts.append(f"b{B}-tq{q_shape[0]}-tkv{kv_shape[0]}")
    else:
        parts.append(f"b{B}-sq{q_shape[1]}-skv{kv_shape[1]}")
    if d.std != 1.0:
        parts.append(f"std{d.std:g}")
    if d.strided:
        parts.append("strided")
    if d.bcast:
        parts.append("bcast-v")
    if d.lse:
        parts.append("lse")
    if d.validate:
        parts.append("validate")
    parts.append(f"#{idx}")
    case = {"name": "/".join(parts), "op": d.op, "config": config, "seed": seed, "tensors": tensors,
            "compare": compare, "gpu_only": True}
    return case, d.cost


def build_grid(count, small=False):
    rng = random.Random(SEED + (7 if small else 0))
    cases, total = [], 0.0
    base_seed = 9000 if small else 20000
    idx = 0
    while len(cases) < count:
        if small:
            cap = 2e7
        else:
            cap = weighted(rng, [(c, w) for c, w in CASE_CAPS])
            # keep room for the remaining cases (about RESERVE each) under MAX_TOTAL_COST
            cap = min(cap, max(1e6, MAX_TOTAL_COST - total - (count - len(cases) - 1) * RESERVE))
        seed = base_seed + idx
        while seed in RESEED:
            seed += SEED_BUMP
        case, cost = grid_case(rng, idx, seed, cap, small=small)
        cases.append(case)
        total += cost
        idx += 1
    return cases, total


# ----------------------------------------------------------------------------------------------------
# Small cases (compute-sanitizer): every feature at S <= 70


def build_small():
    rng = random.Random(SEED + 99)
    specs = [
        # (op, dtype, out, D, H, H_kv, causal, wl, wr, cap, rope, R, sinks, reqs)
        ("gqa_fwd", "fp16", None, 64, 4, 2, True, -1, -1, 0, None, None, None, [(33, 70)] * 2),
        ("gqa_fwd", "bf16", None, 128, 8, 1, False, -1, -1, 0, None, None, None, [(70, 7)]),
        ("gqa_fwd", "fp16", None, 96, 2, 2, False, 3, 0, 0, None, None, None, [(65, 9)]),
        ("gqa_fwd", "bf16", None, 256, 2, 1, True, 7, -1, 20.0, None, None, None, [(1, 65)]),
        ("gqa_fwd", "fp16", None, 64, 8, 8, True, -1, -1, 0, "neox", 32, None, [(63, 64)]),
        ("gqa_fwd", "bf16", None, 128, 4, 1, False, -1, 1, 0, "interleaved", 10, None, [(64, 64)] * 3),
        ("gqa_fwd", "e4m3", "fp16", 64, 4, 2, True, -1, -1, 0, None, None, None, [(17, 40)] * 2),
        ("gqa_fwd", "e4m3", "bf16", 128, 2, 1, False, 1, 1, 50.0, "neox", 128, None, [(33, 33)]),
        ("gqa_fwd", "fp16", None, 256, 1, 1, False, -1, -1, 0, None, None, None, [(7, 0)]),
        ("gqa_fwd", "bf16", None, 64, 2, 2, False, 0, 0, 0, None, None, None, [(70, 1)]),
        ("gqa_fwd", "fp16", None, 64, 16, 2, True, -1, -1, 0, None, None, None, [(7, 7)]),
        ("gqa_fwd", "bf16", None, 96, 4, 4, True, 16, -1, 0, "interleaved", 96, None, [(20, 65)]),
        ("gqa_varlen_fwd", "fp16", None, 64, 4, 2, True, -1, -1, 0, None, None, None,
         [(3, 10), (0, 5), (65, 70), (1, 1)]),
        ("gqa_varlen_fwd", "bf16", None, 128, 8, 2, False, -1, -1, 0, None, None, "finite",
         [(7, 0), (64, 33), (1, 70)]),
        ("gqa_varlen_fwd", "fp16", None, 256, 2, 1, True, 7, -1, 0, None, None, "neginf", [(1, 63), (1, 2), (1, 70)]),
        ("gqa_varlen_fwd", "bf16", None, 96, 4, 1, False, 1, 3, 20.0, None, None, "posinf", [(65, 7), (0, 0), (7, 7)]),
        ("gqa_varlen_fwd", "fp16", None, 64, 2, 2, True, -1, -1, 0, "neox", 10, "finite", [(5, 64), (63, 65)]),
        ("gqa_varlen_fwd", "bf16", None, 128, 4, 4, False, -1, 0, 0, "interleaved", 64, None, [(30, 30), (1, 69)]),
        ("gqa_varlen_fwd", "e4m3", "bf16", 64, 4, 2, True, -1, -1, 0, None, None, "finite", [(9, 17), (40, 40)]),
        ("gqa_varlen_fwd", "e4m3", "fp16", 256, 2, 2, False, -1, -1, 50.0, "neox", 256, "neginf",
         [(3, 3), (0, 9), (12, 60)]),
        ("gqa_varlen_fwd", "fp16", None, 64, 16, 1, False, -1, -1, 0, None, None, None, [(70, 0), (33, 1)]),
        ("gqa_varlen_fwd", "bf16", None, 64, 8, 4, True, 0, 0, 0, None, None, "finite", [(64, 64), (0, 64)]),
        ("gqa_varlen_fwd", "fp16", None, 128, 2, 1, True, -1, -1, 0, None, None, None, []),  # B = 0
        ("gqa_fwd", "bf16", None, 64, 2, 1, True, -1, -1, 0, None, None, None, "B0"),
    ]
    cases = []
    for i, (op, dt, out, D, H, Hkv, causal, wl, wr, cap, rope, R, sinks, reqs) in enumerate(specs):
        d = Draw()
        d.varlen = op == "gqa_varlen_fwd"
        d.op, d.dtype, d.out_dtype, d.cdt = op, dt, out, out or dt
        d.D, d.H, d.H_kv, d.causal, d.wl, d.wr, d.softcap = D, H, Hkv, causal, wl, wr, float(cap)
        d.rope, d.R, d.sinks, d.std = rope, R, sinks, 3.0 if i % 5 == 4 else 1.0
        d.lse = i % 3 != 2
        d.validate = i % 4 == 1
        d.strided = i % 6 == 3
        d.bcast = False
        d.sm_scale = None
        b0 = reqs == "B0"
        d.reqs = [(5, 5)] if b0 else reqs
        d.cost = sum(q * k for q, k in d.reqs) * H * D
        case, _ = build_grid_case(rng, d, i, 9500 + i)
        if b0:  # dense B = 0: every tensor's batch extent 0
            for n in ("q", "k", "v", "o", "lse"):
                if n in case["tensors"]:
                    case["tensors"][n]["shape"][0] = 0
            case["name"] = case["name"].replace("/b1-", "/b0-")
        cases.append(case)
    for c in cases:
        c["name"] = "small/" + c["name"]
    return cases


# ----------------------------------------------------------------------------------------------------
# Error cases

def dense_base(dtype="fp16", B=1, S_q=4, S_kv=4, H=2, H_kv=1, D=64, out_dtype=None, rope_R=None, P=None):
    cdt = out_dtype or dtype
    t = {
        "q": tensor([B, S_q, H, D], dtype, normal()),
        "k": tensor([B, S_kv, H_kv, D], dtype, normal()),
        "v": tensor([B, S_kv, H_kv, D], dtype, normal()),
    }
    if dtype == "e4m3":
        for n in ("q_scale", "k_scale", "v_scale"):
            t[n] = tensor([B, H_kv], "fp32", {"kind": "uniform", "low": 0.5, "high": 2.0})
    if rope_R:
        for n in ("rope_cos", "rope_sin"):
            t[n] = tensor([P or S_kv, rope_R // 2], cdt, {"kind": "uniform", "low": -1.0, "high": 1.0})
    t["o"] = tensor([B, S_q, H, D], cdt, OUTB, output=True)
    t["lse"] = tensor([B, H, S_q], "fp32", OUTB, output=True)
    return t


def varlen_base(dtype="fp16", cu_q=(0, 2, 5), cu_kv=(0, 3, 7), H=2, H_kv=1, D=64, out_dtype=None, rope_R=None,
                P=None, sinks=False):
    cdt = out_dtype or dtype
    T_q, T_kv, B = cu_q[-1] if cu_q else 0, cu_kv[-1] if cu_kv else 0, len(cu_q) - 1
    t = {
        "q": tensor([T_q, H, D], dtype, normal()),
        "k": tensor([T_kv, H_kv, D], dtype, normal()),
        "v": tensor([T_kv, H_kv, D], dtype, normal()),
        "cu_seqlens_q": tensor([len(cu_q)], "int32", {"kind": "values", "values": list(cu_q)}),
        "cu_seqlens_kv": tensor([len(cu_kv)], "int32", {"kind": "values", "values": list(cu_kv)}),
    }
    if dtype == "e4m3":
        for n in ("q_scale", "k_scale", "v_scale"):
            t[n] = tensor([B, H_kv], "fp32", {"kind": "uniform", "low": 0.5, "high": 2.0})
    if rope_R:
        for n in ("rope_cos", "rope_sin"):
            t[n] = tensor([P or T_kv, rope_R // 2], cdt, {"kind": "uniform", "low": -1.0, "high": 1.0})
    if sinks:
        t["sinks"] = tensor([H], "fp32", {"kind": "uniform", "low": -1.0, "high": 1.0})
    t["o"] = tensor([T_q, H, D], cdt, OUTB, output=True)
    t["lse"] = tensor([T_q, H], "fp32", OUTB, output=True)
    return t


ROPE = {"pos_encoding_mode": "rope", "rotary_dim": 32}


def build_errors():
    e = Errors(None, "gqa-error/", 5000)
    err = e.err_op

    for op in ("gqa_fwd", "gqa_varlen_fwd"):
        base = dense_base if op == "gqa_fwd" else varlen_base
        p = "dense" if op == "gqa_fwd" else "varlen"
        # --- param ---
        err(f"{p}/param/window-left-minus2", op, {"window_size_left": -2}, base(), "param", "window_size_left")
        err(f"{p}/param/window-right-minus5", op, {"is_causal": False, "window_size_right": -5}, base(), "param",
            "window_size_right")
        err(f"{p}/param/softcap-negative", op, {"softcap": -1.0}, base(), "param", "softcap")
        err(f"{p}/param/sm-scale-zero", op, {"sm_scale": 0.0}, base(), "param", "sm_scale")
        err(f"{p}/param/sm-scale-negative", op, {"sm_scale": -0.125}, base(), "param", "sm_scale")
        err(f"{p}/param/rotary-dim-without-rope", op, {"rotary_dim": 32}, base(), "param", "rotary_dim")
        err(f"{p}/param/rotary-dim-odd", op, {"pos_encoding_mode": "rope", "rotary_dim": 33}, base(rope_R=32),
            "param", "rotary_dim")
        err(f"{p}/param/rotary-dim-0", op, {"pos_encoding_mode": "rope", "rotary_dim": 0}, base(rope_R=32),
            "param", "rotary_dim")
        err(f"{p}/param/unknown-pos-encoding-mode", op, {"pos_encoding_mode": "alibi"}, base(), "param",
            "pos_encoding_mode")
        err(f"{p}/param/unknown-rope-layout", op, {"pos_encoding_mode": "rope", "rope_layout": "gptj"},
            base(rope_R=64), "param", "rope_layout")
        err(f"{p}/param/out-dtype-fp32", op, {"out_dtype": "fp32"}, base(), "param", "out_dtype")
        err(f"{p}/param/out-dtype-e4m3", op, {"out_dtype": "e4m3"}, base(dtype="e4m3", out_dtype="fp16"), "param",
            "out_dtype")
        err(f"{p}/param/unknown-config-key", op, {"causal": True}, base(), "param", "causal")
        # JSON has no infinity (nlohmann rejects 1e999), so a non-finite softcap cannot be written; a
        # string is rejected as a non-number instead.
        err(f"{p}/param/softcap-string-inf", op, {"softcap": "inf"}, base(), "param", "softcap")
        # --- dtype ---
        err(f"{p}/dtype/q-fp32", op, {}, base(dtype="fp32", out_dtype="fp16"), "dtype", "q: expected")
        t = base(dtype="fp16")
        t["k"]["dtype"] = "bf16"
        err(f"{p}/dtype/k-differs", op, {}, t, "dtype", "k: expected")
        t = base(dtype="bf16")
        t["v"]["dtype"] = "fp16"
        err(f"{p}/dtype/v-differs", op, {}, t, "dtype", "v: expected")
        err(f"{p}/dtype/fp8-without-out-dtype", op, {}, base(dtype="e4m3", out_dtype="bf16"), "dtype",
            "out_dtype: expected")
        err(f"{p}/dtype/fp16-with-out-dtype-bf16", op, {"out_dtype": "bf16"}, base(dtype="fp16"), "dtype",
            "out_dtype: expected")
        t = base(dtype="e4m3", out_dtype="fp16")
        t["q_scale"]["dtype"] = "fp16"
        err(f"{p}/dtype/q-scale-fp16", op, {"out_dtype": "fp16"}, t, "dtype", "q_scale: expected")
        t = base(dtype="e4m3", out_dtype="bf16")
        t["v_scale"]["dtype"] = "bf16"
        err(f"{p}/dtype/v-scale-bf16", op, {"out_dtype": "bf16"}, t, "dtype", "v_scale: expected")
        t = base(dtype="fp16", rope_R=32)
        t["rope_cos"]["dtype"] = "bf16"
        err(f"{p}/dtype/rope-cos-bf16-for-fp16", op, dict(ROPE), t, "dtype", "rope_cos: expected")
        t = base(dtype="e4m3", out_dtype="bf16", rope_R=32)
        t["rope_cos"]["dtype"] = "fp32"
        err(f"{p}/dtype/rope-cos-fp32-for-fp8-bf16", op, dict(ROPE, out_dtype="bf16"), t, "dtype",
            "rope_cos: expected")
        t = base(dtype="e4m3", out_dtype="bf16", rope_R=32)
        t["rope_sin"]["dtype"] = "e4m3"
        err(f"{p}/dtype/rope-sin-e4m3-for-fp8-bf16", op, dict(ROPE, out_dtype="bf16"), t, "dtype",
            "rope_sin: expected")
        t = base(dtype="fp16")
        t["o"]["dtype"] = "bf16"
        err(f"{p}/dtype/o-bf16-for-fp16", op, {}, t, "dtype", "o: expected")
        t = base(dtype="e4m3", out_dtype="fp16")
        t["o"]["dtype"] = "bf16"
        err(f"{p}/dtype/o-bf16-for-fp8-out-fp16", op, {"out_dtype": "fp16"}, t, "dtype", "o: expected")
        t = base()
        t["lse"]["dtype"] = "fp16"
        err(f"{p}/dtype/lse-fp16", op, {}, t, "dtype", "lse: expected")
        # --- args ---
        t = base(dtype="e4m3", out_dtype="fp16")
        del t["q_scale"]
        err(f"{p}/args/fp8-q-scale-missing", op, {"out_dtype": "fp16"}, t, "args", "q_scale: expected")
        t = base(dtype="e4m3", out_dtype="fp16")
        del t["v_scale"]
        err(f"{p}/args/fp8-v-scale-missing", op, {"out_dtype": "fp16"}, t, "args", "v_scale: expected")
        t = base(dtype="e4m3", out_dtype="bf16")
        for n in ("q_scale", "k_scale", "v_scale"):
            del t[n]
        err(f"{p}/args/fp8-all-scales-missing", op, {"out_dtype": "bf16"}, t, "args", "_scale: expected")
        t = base(dtype="fp16")
        t["k_scale"] = tensor([1 if op == "gqa_fwd" else 2, 1], "fp32", {"kind": "uniform", "low": 0.5, "high": 2.0})
        err(f"{p}/args/k-scale-for-fp16", op, {}, t, "args", "k_scale: expected")
        t = base(dtype="fp16", rope_R=32)
        del t["rope_sin"]
        err(f"{p}/args/rope-sin-missing", op, dict(ROPE), t, "args", "rope_sin: expected")
        t = base(dtype="bf16", rope_R=64)
        del t["rope_cos"], t["rope_sin"]
        err(f"{p}/args/rope-tables-missing", op, {"pos_encoding_mode": "rope"}, t, "args", "rope_")
        t = base(dtype="fp16", rope_R=64)
        del t["rope_sin"]
        err(f"{p}/args/rope-cos-without-rope", op, {}, t, "args", "rope_cos: expected")
        t = base()
        t["qq"] = tensor([4], "fp32", normal())
        err(f"{p}/args/unknown-tensor-name", op, {}, t, "args", "qq: expected")
        t = base()
        del t["o"]
        err(f"{p}/args/o-missing", op, {}, t, "args", "o: expected")
        # --- shape ---
        t = base()
        t["q"]["shape"] = t["q"]["shape"][1:] if op == "gqa_fwd" else [1] + t["q"]["shape"]
        err(f"{p}/shape/q-rank", op, {}, t, "shape", "q: expected")
        t = base()
        t["k"]["shape"] = t["k"]["shape"][:-1] + [1, 64]
        err(f"{p}/shape/k-rank", op, {}, t, "shape", "k: expected")
        t = base(D=64)
        t["k"]["shape"][-1] = 128
        t["v"]["shape"][-1] = 128
        err(f"{p}/shape/k-d-mismatch", op, {}, t, "shape", "k: expected")
        t = base()
        t["v"]["shape"][-3 if op == "gqa_fwd" else 0] += 1
        err(f"{p}/shape/v-tokens-mismatch", op, {}, t, "shape", "v: expected")
        err(f"{p}/shape/h-not-multiple-of-hkv", op, {}, base(H=3, H_kv=2), "shape", "k: expected")
        err(f"{p}/shape/d80", op, {}, base(D=80), "shape", "q: expected")
        err(f"{p}/shape/d32", op, {}, base(D=32), "shape", "q: expected")
        err(f"{p}/shape/d512", op, {}, base(D=512), "shape", "q: expected")
        err(f"{p}/shape/rotary-dim-gt-d", op, {"pos_encoding_mode": "rope", "rotary_dim": 128},
            base(D=64, rope_R=128), "shape", "rotary_dim: expected")
        t = base(rope_R=32)
        t["rope_cos"]["shape"][1] = 32
        t["rope_sin"]["shape"][1] = 32
        err(f"{p}/shape/rope-tables-r-mismatch", op, dict(ROPE), t, "shape", "rope_")
        t = base(rope_R=32)
        t["rope_sin"]["shape"][0] += 3
        err(f"{p}/shape/rope-sin-p-differs", op, dict(ROPE), t, "shape", "rope_sin: expected")
        t = base(dtype="e4m3", out_dtype="fp16")
        t["k_scale"]["shape"] = [t["k_scale"]["shape"][0], 2]
        err(f"{p}/shape/k-scale-hkv-mismatch", op, {"out_dtype": "fp16"}, t, "shape", "k_scale: expected")
        t = base(dtype="e4m3", out_dtype="bf16")
        t["q_scale"]["shape"] = [t["q_scale"]["shape"][0] + 1, 1]
        err(f"{p}/shape/q-scale-b-mismatch", op, {"out_dtype": "bf16"}, t, "shape", "q_scale: expected")
        t = base(dtype="e4m3", out_dtype="bf16")
        t["v_scale"]["shape"] = [t["v_scale"]["shape"][0]]
        err(f"{p}/shape/v-scale-rank1", op, {"out_dtype": "bf16"}, t, "shape", "v_scale: expected")
        t = base()
        t["o"]["shape"][-2] = 1
        err(f"{p}/shape/o-heads", op, {}, t, "shape", "o: expected")
        t = base()
        if op == "gqa_fwd":
            t["lse"]["shape"] = [1, 4, 2]  # [B, S_q, H] instead of [B, H, S_q]
        else:
            t["lse"]["shape"] = [2, 5]  # [H, T_q] instead of [T_q, H]
        err(f"{p}/shape/lse-transposed", op, {}, t, "shape", "lse: expected")
        # --- layout ---
        t = base()
        sh = t["q"]["shape"]
        t["q"]["strides"] = [x * 2 for x in contiguous(sh)]
        err(f"{p}/layout/q-innermost-stride2", op, {}, t, "layout", "q: expected")
        t = base()
        sh = t["v"]["shape"]
        t["v"]["strides"] = [x * 2 for x in contiguous(sh)]
        err(f"{p}/layout/v-innermost-stride2", op, {}, t, "layout", "v: expected")
        t = base()
        t["o"]["strides"] = padded_contiguous(t["o"]["shape"], len(t["o"]["shape"]) - 3, 64)
        err(f"{p}/layout/o-not-contiguous", op, {}, t, "layout", "o: expected")
        t = base()
        t["lse"]["strides"] = padded_contiguous(t["lse"]["shape"], len(t["lse"]["shape"]) - 2, 4)
        err(f"{p}/layout/lse-not-contiguous", op, {}, t, "layout", "lse: expected")
        t = base(H=2, H_kv=1)
        st = contiguous(t["q"]["shape"])
        st[-2] = 68  # head stride of 136 bytes: not a multiple of 16 (device rule only)
        st[-3 if op == "gqa_fwd" else 0] = 2 * 68
        if op == "gqa_fwd":
            st[0] = 4 * 2 * 68
        t["q"]["strides"] = st
        err(f"{p}/layout/q-head-stride-136-bytes", op, {}, t, "layout", "q: expected", gpu_only=True)
        # backend 'hopper' never falls back: what it does not serve is refused, naming why (device rule).
        err(f"{p}/unsupported/hopper-head-dim-96", op, {"backend": "hopper"}, base(D=96), "unsupported",
            "backend 'hopper': it serves head dims 64, 128 and 256, got 96", gpu_only=True)

    # --- gqa_fwd only ---
    err("dense/shape/b-mismatch", "gqa_fwd", {}, dict(dense_base(), k=tensor([2, 4, 1, 64], "fp16", normal()),
                                                       v=tensor([2, 4, 1, 64], "fp16", normal())),
        "shape", "k: expected")
    err("dense/shape/sq-gt-skv-causal", "gqa_fwd", {"is_causal": True}, dense_base(S_q=5, S_kv=4), "shape",
        "q: expected")
    err("dense/shape/sq-gt-skv-rope", "gqa_fwd", dict(ROPE, is_causal=False), dense_base(S_q=5, S_kv=4, rope_R=32),
        "shape", "q: expected")
    err("dense/shape/p-lt-skv", "gqa_fwd", dict(ROPE), dense_base(S_q=4, S_kv=6, rope_R=32, P=5), "shape",
        "rope_")
    err("dense/args/sinks-not-an-input", "gqa_fwd", {}, dict(dense_base(), sinks=tensor([2], "fp32", normal())),
        "args", "sinks: expected")
    err("dense/args/cu-seqlens-not-an-input", "gqa_fwd", {},
        dict(dense_base(), cu_seqlens_q=tensor([2], "int32", {"kind": "values", "values": [0, 4]})),
        "args", "cu_seqlens_q: expected")

    # --- gqa_varlen_fwd only ---
    V = "gqa_varlen_fwd"
    err("varlen/shape/offsets-unequal-length", V, {}, varlen_base(cu_q=(0, 2, 5), cu_kv=(0, 7)), "shape",
        "cu_seqlens_kv: expected")
    t = varlen_base(cu_q=(0,), cu_kv=(0,))
    t["cu_seqlens_q"] = tensor([0], "int32", {"kind": "values", "values": []})
    t["cu_seqlens_kv"] = tensor([0], "int32", {"kind": "values", "values": []})
    err("varlen/shape/offsets-length-0", V, {}, t, "shape", "cu_seqlens_")
    t = varlen_base()
    t["cu_seqlens_q"] = tensor([1, 3], "int32", {"kind": "values", "values": [0, 2, 5]})
    err("varlen/shape/offsets-rank2", V, {}, t, "shape", "cu_seqlens_q: expected")
    t = varlen_base()
    t["cu_seqlens_kv"]["dtype"] = "int64"
    err("varlen/dtype/cu-seqlens-kv-int64", V, {}, t, "dtype", "cu_seqlens_kv: expected")
    t = varlen_base()
    t["cu_seqlens_q"] = tensor([3], "int32", {"kind": "values", "values": [0, -1, 2, -1, 5]}, strides=[2])
    err("varlen/layout/cu-seqlens-q-strided", V, {}, t, "layout", "cu_seqlens_q: expected")
    t = varlen_base(H=2, sinks=True)
    t["sinks"]["shape"] = [3]
    err("varlen/shape/sinks-not-h", V, {}, t, "shape", "sinks: expected")
    t = varlen_base(H=2, sinks=True)
    t["sinks"]["shape"] = [1, 2]
    err("varlen/shape/sinks-rank2", V, {}, t, "shape", "sinks: expected")
    t = varlen_base(sinks=True)
    t["sinks"]["dtype"] = "fp16"
    err("varlen/dtype/sinks-fp16", V, {}, t, "dtype", "sinks: expected")
    t = varlen_base()
    t["lse"]["shape"] = [5, 2, 1]
    err("varlen/shape/lse-rank3", V, {}, t, "shape", "lse: expected")
    t = varlen_base()
    t["lse"]["shape"] = [4, 2]
    err("varlen/shape/lse-tq-mismatch", V, {}, t, "shape", "lse: expected")
    t = varlen_base()
    t["o"]["shape"][0] = 6
    err("varlen/shape/o-tq-mismatch", V, {}, t, "shape", "o: expected")
    t = varlen_base(dtype="e4m3", out_dtype="fp16")
    t["q_scale"]["shape"] = [3, 1]  # [B + 1, H_kv]
    err("varlen/shape/q-scale-b-plus-1", V, {"out_dtype": "fp16"}, t, "shape", "q_scale: expected")

    # --- content (validate_inputs) ---
    VI = {"validate_inputs": True}
    t = dense_base(dtype="e4m3", out_dtype="fp16")
    t["q_scale"]["init"] = {"kind": "values", "values": [0.0]}
    err("dense/content/q-scale-zero", "gqa_fwd", dict(VI, out_dtype="fp16"), t, "content", "q_scale: expected")
    t = dense_base(dtype="e4m3", out_dtype="bf16", B=2)
    t["k_scale"]["init"] = {"kind": "values", "values": [1.0, "inf"]}
    err("dense/content/k-scale-inf", "gqa_fwd", dict(VI, out_dtype="bf16"), t, "content", "k_scale: expected")
    t = varlen_base(dtype="e4m3", out_dtype="fp16")
    t["v_scale"]["init"] = {"kind": "values", "values": [1.5, -0.5]}
    err("varlen/content/v-scale-negative", V, dict(VI, out_dtype="fp16"), t, "content", "v_scale: expected")
    t = varlen_base(dtype="e4m3", out_dtype="bf16")
    t["k_scale"]["init"] = {"kind": "bits", "bits": [1065353216, 2143289344]}  # 1.0, NaN
    err("varlen/content/k-scale-nan", V, dict(VI, out_dtype="bf16"), t, "content", "k_scale: expected")
    err("varlen/content/cu-seqlens-q-not-starting-at-0", V, VI, varlen_base(cu_q=(1, 2, 5), cu_kv=(0, 3, 7)),
        "content", "cu_seqlens_q: expected")
    err("varlen/content/cu-seqlens-kv-not-starting-at-0", V, dict(VI, is_causal=False),
        varlen_base(cu_q=(0, 2, 5), cu_kv=(2, 3, 7)), "content", "cu_seqlens_kv: expected")
    t = varlen_base(cu_q=(0, 2, 5), cu_kv=(0, 3, 7))
    t["cu_seqlens_kv"]["init"]["values"] = [0, 8, 7]
    err("varlen/content/cu-seqlens-kv-decreasing", V, dict(VI, is_causal=False), t, "content",
        "cu_seqlens_kv: expected")
    t = varlen_base(cu_q=(0, 2, 5), cu_kv=(0, 3, 7))
    t["cu_seqlens_q"]["init"]["values"] = [0, 3, 1, 5]
    t["cu_seqlens_q"]["shape"] = [4]
    t["cu_seqlens_kv"]["init"]["values"] = [0, 3, 5, 7]
    t["cu_seqlens_kv"]["shape"] = [4]
    err("varlen/content/cu-seqlens-q-decreasing", V, dict(VI, is_causal=False), t, "content", "cu_seqlens_q: expected")
    t = varlen_base(cu_q=(0, 2, 5), cu_kv=(0, 3, 7))
    t["cu_seqlens_q"]["init"]["values"] = [0, 2, 4]  # T_q = 5
    err("varlen/content/cu-seqlens-q-end-ne-tq", V, VI, t, "content", "cu_seqlens_q: expected")
    t = varlen_base(cu_q=(0, 2, 5), cu_kv=(0, 3, 7))
    t["cu_seqlens_kv"]["init"]["values"] = [0, 3, 6]  # T_kv = 7
    err("varlen/content/cu-seqlens-kv-end-ne-tkv", V, dict(VI, is_causal=False), t, "content",
        "cu_seqlens_kv: expected")
    err("varlen/content/causal-q-len-gt-kv-len", V, dict(VI, is_causal=True),
        varlen_base(cu_q=(0, 4, 5), cu_kv=(0, 3, 7)), "content", "cu_seqlens_q: expected")
    err("varlen/content/rope-q-len-gt-kv-len", V, dict(VI, is_causal=False, **ROPE),
        varlen_base(cu_q=(0, 4, 5), cu_kv=(0, 3, 7), rope_R=32, P=8), "content", "cu_seqlens_q: expected")
    err("varlen/content/rope-p-lt-kv-len", V, dict(VI, **ROPE),
        varlen_base(cu_q=(0, 2, 5), cu_kv=(0, 3, 10), rope_R=32, P=6), "content", "rope_cos: expected")
    t = varlen_base(H=2, sinks=True)
    t["sinks"]["init"] = {"kind": "bits", "bits": [2143289344, 0]}  # NaN, 0.0
    err("varlen/content/sink-nan", V, VI, t, "content", "sinks: expected")
    t = varlen_base(H=4, H_kv=2, sinks=True)
    t["sinks"]["init"] = {"kind": "bits", "bits": [0, 1065353216, 4290772992, 0]}  # 0, 1, -NaN, 0
    err("varlen/content/sink-negative-nan", V, VI, t, "content", "sinks: expected")
    return e.cases


# ----------------------------------------------------------------------------------------------------


def main():
    args = case_args(__doc__, count=336).parse_args()
    grid, total = build_grid(args.count)
    write_cases(os.path.join(args.out_dir, "gpu", "gqa_grid.json"), grid,
          f"; reference cost bound {total:.3g} (sum of q_len * H * kv_len * D)")
    small = build_small()
    write_cases(os.path.join(args.out_dir, "gpu", "gqa_small.json"), small)
    write_errors_per_op(args.out_dir, build_errors(), ("gqa_fwd", "gqa_varlen_fwd"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
