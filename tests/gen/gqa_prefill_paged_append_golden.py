#!/usr/bin/python3
"""Golden test cases for gqa_prefill_paged_append (SPEC.md §2.10), computed independently of the C++ project
(numpy; nothing imported from the repository except the number-format helpers of tests/gen/casegen_*.py).

Writes tests/cases/gqa_prefill_paged_append_golden.json in the `attnjit test` format (tools/cli/test_case.hpp).

Semantics (SPEC.md §1.6-§1.8, §2.10), per request b with old = cache_seqlens[b], q_len = len_b,
new token i at pos_i = old + i, physical pool row row(x) = block_table[b, x // ps] * ps + x % ps:
  1. keys 0..old-1 are the cached rows k_pages[row(j)]; an e4m3 cache row is dequantised as
     rnd_q(decode(x) * k_scale) (same for v with v_scale; the product in fp32); keys old..old+q_len-1 are
     the chunk's k_new / v_new rows, used unquantised;
  2. fuse_rope: inv_freq[c] = 1 / rope_base^(2c/R) (fp32), angle = fp32(pos) * inv_freq[c] (an fp32
     product), cos / sin rounded to q's dtype; q and k_new rotated at pos_i (neox pairs (c, c + R/2),
     y_a = x_a cos - x_b sin, y_b = x_b cos + x_a sin in fp32, channels >= R unchanged) and rounded to
     q's dtype; cached keys are not rotated again;
  3. z = alpha * <q_i, k_j> (alpha = sm_scale or 1/sqrt(D)), l = c tanh(z / c) with softcap c > 0, key j
     visible iff !causal or j <= old + i; row softmax (float64), o rounded once to q's dtype
     (float64 -> fp32 -> 16-bit, RNE);
  4. append: k_pages[row(pos_i)] = store(k_i) (rotated with fuse_rope), v_pages[row(pos_i)] = store(v_i);
     store = the 16-bit value itself for a 16-bit cache, e4m3(fp32(x) / fp32(scale)) for an e4m3 cache
     (IEEE fp32 division, saturating RNE per §1.8: |x / scale| > 448 -> +-448). No other row changes.

Inputs are exact bit patterns ({"kind": "bits"}) over each float tensor's whole storage (stride gaps
included); index tensors and scales are "values". The pools are POISONED with the byte pattern 0xFF (NaN in
fp16, bf16 and e4m3) everywhere except the cached rows 0..old-1 of every request, which hold finite random
values: an op that reads a row it must not read (an unwritten slot, a page past the request's length, a
stale new row) turns o into NaN, and an op that fails to write a row leaves the NaN pattern, which fails the
pool compare. Block-table entries of logical pages >= ceil((old + q_len) / ps) hold out-of-range values
(999999, -1, NP, 2^31 - 1) or unrelated valid pages.

Expected outputs ("golden"): o's bits and the bits of both pools after the call (their whole storage).
Compare modes: o rel_l2 (SPEC.md §1.12: bf16 1e-2, fp16 5e-3, e4m3 cache 5e-2); pools "bitwise" for a
16-bit cache without RoPE and for an e4m3 cache, "ulp" with max_ulp 2 with fuse_rope (the precision of the
fp32 pow / cos / sin is not pinned by SPEC.md). To keep the golden pools independent of how an
implementation evaluates pow / cos / sin, every RoPE case is checked here to have no table entry whose
16-bit value would change under a 1-ulp perturbation of inv_freq or a 2-ulp one of cos / sin (the rope_base
is nudged until that holds at every position the case rotates).

Usage: /usr/bin/python3 tests/gen/gqa_prefill_paged_append_golden.py [--out PATH]
"""
import math
import os
import random
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from casegen_common import (TOL, case_args, contiguous, dumps_indented, random_padded_strides,  # noqa: E402
                            scatter_pages, storage_size, write_cases_text)
from casegen_numeric import (STORAGE_DTYPE, bf16_bits_from_f32, bf16_bits_to_f32, bits_spec, e4m3_bits_nearest,  # noqa: E402
                             e4m3_bits_satfinite, e4m3_from_bits, fp16_bits_from_f32, fp16_bits_to_f32,
                             round_out, storage_index, to_bits)

OP = "gqa_prefill_paged_append"
SEED = 20250611
POISON_BYTE = 0xFF  # NaN in fp16 (0xFFFF), bf16 (0xFFFF) and e4m3 (0xFF)
BAD_ENTRIES = [999999, -1, 2 ** 31 - 1]

TO_BITS16 = {"fp16": fp16_bits_from_f32, "bf16": bf16_bits_from_f32}
FROM_BITS16 = {"fp16": fp16_bits_to_f32, "bf16": bf16_bits_to_f32}


def rnd_q(dt, x32):
    """fp32 values -> (bits, fp32 values) of q's 16-bit dtype, RNE."""
    bits = TO_BITS16[dt](np.asarray(x32, np.float32))
    return bits, FROM_BITS16[dt](bits)


def decode(dt, bits):
    """Storage bits -> fp32 values (exact)."""
    if dt == "e4m3":
        return e4m3_from_bits(bits).astype(np.float32)
    return FROM_BITS16[dt](bits)


# ----------------------------------------------------------------------------------------------------
# RoPE tables (SPEC.md §2.10 step 2)


def inv_freq(base, R):
    c = np.arange(R // 2, dtype=np.float64)
    return (1.0 / np.power(float(base), 2.0 * c / R)).astype(np.float32)


def rope_tables(dt, base, R, positions):
    """cos / sin [n, R/2] as q-dtype values (fp32 arrays) at the given positions."""
    ang = np.asarray(positions, np.float32)[:, None] * inv_freq(base, R)[None, :]  # fp32 product
    cos = rnd_q(dt, np.cos(ang.astype(np.float64)).astype(np.float32))[1]
    sin = rnd_q(dt, np.sin(ang.astype(np.float64)).astype(np.float32))[1]
    return cos, sin


def rope_tables_robust(dt, base, R, positions):
    """True when no table entry at `positions` has a 16-bit value that depends on how pow / cos / sin are
    evaluated: perturbing inv_freq (c > 0) by +-1 fp32 ulp and cos / sin by +-2 fp32 ulp leaves every rounded
    entry unchanged. Entries of c = 0 (inv_freq 1, angle = pos exactly) cannot be moved by the base."""
    ref_c, ref_s = rope_tables(dt, base, R, positions)
    f = inv_freq(base, R)
    pos = np.asarray(positions, np.float32)[:, None]
    for k in (-1, 0, 1):
        fk = f.copy()
        for _ in range(abs(k)):
            fk = np.nextafter(fk, np.float32(np.inf) if k > 0 else np.float32(-np.inf)).astype(np.float32)
        fk[0] = 1.0  # base^0 = 1 exactly in any evaluation
        ang = (pos * fk[None, :]).astype(np.float64)
        for fn, ref in ((np.cos, ref_c), (np.sin, ref_s)):
            v = fn(ang).astype(np.float32)
            for u in (-2, 0, 2):
                w = v
                for _ in range(abs(u)):
                    w = np.nextafter(w, np.float32(np.inf) if u > 0 else np.float32(-np.inf)).astype(np.float32)
                if not np.array_equal(rnd_q(dt, w)[1], ref):
                    return False
    return True


def rotate_neox(x32, cos, sin, R):
    """x [n, heads, D] fp32 (exact 16-bit values), cos / sin [n, R/2]: the rotation in fp32 (the products
    of two 16-bit values are exact in fp32, so the difference is rounded once)."""
    y = x32.copy()
    a = x32[:, :, : R // 2]
    b = x32[:, :, R // 2: R]
    c = cos[:, None, :].astype(np.float32)
    s = sin[:, None, :].astype(np.float32)
    y[:, :, : R // 2] = (a * c - b * s).astype(np.float32)
    y[:, :, R // 2: R] = (b * c + a * s).astype(np.float32)
    return y


# ----------------------------------------------------------------------------------------------------
# Tensors


class Tensor:
    """A float tensor given by the bits of its whole storage."""

    def __init__(self, dtype, shape, strides=None):
        self.dtype, self.shape = dtype, list(shape)
        self.explicit = strides is not None
        self.strides = list(strides) if strides is not None else contiguous(shape)
        self.bits = np.zeros(storage_size(self.shape, self.strides), STORAGE_DTYPE[dtype])

    def fill_random(self, rng, std=1.0):
        n = self.bits.size
        if n:
            self.bits = to_bits(self.dtype, rng.normal(0.0, std, size=n))
        return self

    def index(self):
        return storage_index(self.shape, self.strides)

    def logical_bits(self):
        return self.bits[self.index()] if self.bits.size else np.zeros(self.shape, self.bits.dtype)

    def spec(self, output=False):
        s = bits_spec(self.dtype, self.shape, self.bits, self.strides if self.explicit else None)
        if output:
            s["output"] = True
        return s


def values(shape, dtype, vals):
    return {"shape": list(shape), "dtype": dtype,
            "init": {"kind": "values", "values": [v if isinstance(v, str) else v for v in vals]}}


# ----------------------------------------------------------------------------------------------------
# One case


def build_case(idx, name, *, dt="bf16", cache=None, H=4, H_kv=2, D=64, ps=16, reqs=((0, 4),), causal=True,
               softcap=0.0, sm_scale=None, rope=False, R=None, rope_base=10000.0, max_position=None,
               k_scale=0.5, v_scale=0.5, scale_values=None, strided=False, share_prefix=False, spare=1,
               extra_w=1, big=0.0, validate=False, max_seqlen_q=None, q_std=1.0, cache_dtype_key=False):
    """reqs: (old, q_len) per request. big: fraction of k_new / v_new entries set to large values (e4m3
    saturation). scale_values: override the k_scale / v_scale JSON values (e.g. "nan" for a 16-bit cache)."""
    seed = SEED + 97 * idx
    rng = np.random.default_rng(seed)
    prng = random.Random(seed)
    cache = cache or dt
    e4m3 = cache == "e4m3"
    B = len(reqs)
    olds = [o for o, _ in reqs]
    lens = [n for _, n in reqs]
    T = sum(lens)
    cu = [0]
    for n in lens:
        cu.append(cu[-1] + n)
    g = H // H_kv
    Rr = R if R is not None else D
    alpha = sm_scale if sm_scale is not None else 1.0 / math.sqrt(D)

    # ---- pages: scattered, non-monotonic; optional shared (read-only) first page between two requests
    need = [(o + n + ps - 1) // ps for o, n in reqs]
    W = max(need + [1]) + extra_w
    total, pages = scatter_pages(prng, need, spare)
    if share_prefix:
        owners = [b for b in range(B) if olds[b] >= ps]  # logical page 0 lies entirely in the cached prefix
        assert len(owners) >= 2, name
        b1, b2 = owners[0], owners[1]
        pages[b2][0] = pages[b1][0]
    NP = total
    PT = NP * ps
    table = []
    for b in range(B):
        row = list(pages[b])
        while len(row) < W:
            row.append(prng.randrange(NP) if prng.random() < 0.3 else prng.choice(BAD_ENTRIES + [NP]))
        table += row

    def phys(b, x):
        return pages[b][x // ps] * ps + x % ps

    # ---- pools: poison everywhere, finite random cached rows
    kp = Tensor(cache, [PT, H_kv, D])
    vp = Tensor(cache, [PT, H_kv, D])
    kp.bits[:] = POISON_BYTE * (0x0101 if not e4m3 else 1)
    vp.bits[:] = POISON_BYTE * (0x0101 if not e4m3 else 1)
    kpv = kp.bits.reshape(PT, H_kv, D)
    vpv = vp.bits.reshape(PT, H_kv, D)
    cached_rows = sorted({phys(b, j) for b in range(B) for j in range(olds[b])})
    for r in cached_rows:
        for t, sc in ((kpv, k_scale), (vpv, v_scale)):
            x = rng.normal(0.0, 1.0, size=(H_kv, D))
            t[r] = e4m3_bits_nearest(x / sc) if e4m3 else to_bits(cache, x)

    # ---- q, k_new, v_new (optionally padded class F strides)
    def make(shape, std):
        st = random_padded_strides(prng, shape, dt) if strided else None
        return Tensor(dt, shape, st).fill_random(rng, std)

    q = make([T, H, D], q_std)
    kn = make([T, H_kv, D], 1.0)
    vn = make([T, H_kv, D], 1.0)
    if big > 0 and T > 0:
        for t, sc in ((kn, k_scale), (vn, v_scale)):
            idx_all = t.index().reshape(-1)
            pick = rng.random(idx_all.size) < big
            mag = rng.uniform(470.0, 3000.0, size=int(pick.sum())) * sc  # |x / scale| > 448: saturates
            t.bits[idx_all[pick]] = to_bits(dt, mag * rng.choice([-1.0, 1.0], size=mag.size))

    qv = decode(dt, q.logical_bits())
    kv_new = decode(dt, kn.logical_bits())
    vv_new = decode(dt, vn.logical_bits())
    kn_bits = kn.logical_bits()

    if rope:
        mp = max_position if max_position is not None else max([o + n for o, n in reqs] + [1])
        positions = [olds[b] + i for b in range(B) for i in range(lens[b])]
        base = rope_base
        tries = 0
        while not rope_tables_robust(dt, base, Rr, positions):
            base = float(np.float32(base * 1.0137))
            tries += 1
            assert tries < 200, name
        rope_base = base
        cos, sin = rope_tables(dt, base, Rr, positions)
        qv = rnd_q(dt, rotate_neox(qv, cos, sin, Rr))[1]
        kb, kv_new = rnd_q(dt, rotate_neox(kv_new, cos, sin, Rr))
        kn_bits = kb

    # ---- attention (float64), then the append
    o = np.zeros((T, H, D), np.float64)
    out_k, out_v = kp.bits.copy().reshape(PT, H_kv, D), vp.bits.copy().reshape(PT, H_kv, D)
    vn_bits = vn.logical_bits()
    for b in range(B):
        old, n = olds[b], lens[b]
        if n == 0:
            continue
        rows = [phys(b, j) for j in range(old)]
        if e4m3:
            ko = rnd_q(dt, (decode(cache, kpv[rows]) * np.float32(k_scale)).astype(np.float32))[1]
            vo = rnd_q(dt, (decode(cache, vpv[rows]) * np.float32(v_scale)).astype(np.float32))[1]
        else:
            ko, vo = decode(cache, kpv[rows]), decode(cache, vpv[rows])
        t0 = cu[b]
        K = np.concatenate([ko.reshape(old, H_kv, D), kv_new[t0: t0 + n]], 0).astype(np.float64)
        V = np.concatenate([vo.reshape(old, H_kv, D), vv_new[t0: t0 + n]], 0).astype(np.float64)
        assert np.all(np.isfinite(K)) and np.all(np.isfinite(V))
        j = np.arange(old + n)[None, :]
        i = np.arange(n)[:, None]
        vis = (j <= old + i) if causal else np.ones((n, old + n), bool)
        for h in range(H):
            r = h // g
            z = alpha * (qv[t0: t0 + n, h].astype(np.float64) @ K[:, r].T)
            if softcap > 0:
                z = softcap * np.tanh(z / softcap)
            z = np.where(vis, z, -np.inf)
            m = z.max(axis=1, keepdims=True)
            p = np.exp(z - m)
            o[t0: t0 + n, h] = (p @ V[:, r]) / p.sum(axis=1, keepdims=True)
        for ii in range(n):
            row = phys(b, old + ii)
            if e4m3:
                with np.errstate(over="ignore"):
                    out_k[row] = e4m3_bits_satfinite(kv_new[t0 + ii] / np.float32(k_scale))
                    out_v[row] = e4m3_bits_satfinite(vv_new[t0 + ii] / np.float32(v_scale))
            else:
                out_k[row] = kn_bits[t0 + ii]
                out_v[row] = vn_bits[t0 + ii]

    # ---- sanity of the case itself
    written = [phys(b, olds[b] + i) for b in range(B) for i in range(lens[b])]
    assert len(set(written)) == len(written), name
    assert not (set(written) & set(cached_rows)), name

    # ---- JSON
    config = {"page_size": ps, "max_seqlen_q": max_seqlen_q or max(lens + [1]), "is_causal": causal}
    if cache_dtype_key or e4m3:
        config["cache_dtype"] = cache
    if sm_scale is not None:
        config["sm_scale"] = sm_scale
    if softcap:
        config["softcap"] = softcap
    if rope:
        config["fuse_rope"] = True
        config["rope_base"] = rope_base
        config["max_position"] = mp
        if R is not None:
            config["rotary_dim"] = R
    if validate:
        config["validate_inputs"] = True
    ks, vs = scale_values if scale_values is not None else (k_scale, v_scale)
    tensors = {
        "q": q.spec(),
        "k_new": kn.spec(),
        "v_new": vn.spec(),
        "k_pages": kp.spec(output=True),
        "v_pages": vp.spec(output=True),
        "k_scale": values([1], "fp32", [ks]),
        "v_scale": values([1], "fp32", [vs]),
        "cu_seqlens_q": values([B + 1], "int32", cu),
        "cache_seqlens": values([B], "int32", olds),
        "block_table": values([B, W], "int32", table),
        "o": {"shape": [T, H, D], "dtype": dt, "init": {"kind": "poison"}, "output": True},
    }
    pool_cmp = {"mode": "ulp", "max_ulp": 2} if rope else {"mode": "bitwise"}
    compare = {"o": {"mode": "rel_l2", "tol": TOL["e4m3" if e4m3 else dt]}, "k_pages": pool_cmp,
               "v_pages": dict(pool_cmp)}
    golden = {"o": {"bits": [int(x) for x in round_out(dt, o.reshape(-1))]},
              "k_pages": {"bits": [int(x) for x in out_k.reshape(-1)]},
              "v_pages": {"bits": [int(x) for x in out_v.reshape(-1)]}}
    case = {"name": f"prefill-append-golden/{name}", "op": OP, "config": config, "seed": seed, "tensors": tensors,
            "compare": compare, "golden": golden}
    cost = sum(n * H * (o_ + n) * D for o_, n in reqs)
    return case, cost


# ----------------------------------------------------------------------------------------------------
# The cases


def build_cases():
    specs = [
        # name, kwargs
        ("bf16/ps16/old0-partial-crossing", dict(dt="bf16", H=4, H_kv=2, ps=16, reqs=[(0, 5), (7, 6), (12, 9)],
                                                  cache_dtype_key=True)),
        ("fp16/ps4/mqa/qlen0-requests", dict(dt="fp16", H=8, H_kv=1, ps=4,
                                             reqs=[(0, 0), (3, 6), (9, 1), (0, 7), (5, 0)])),
        ("bf16/ps1/mha", dict(dt="bf16", H=2, H_kv=2, ps=1, reqs=[(0, 3), (5, 4), (2, 0), (1, 1)])),
        ("fp16/ps64/crossing", dict(dt="fp16", H=2, H_kv=1, ps=64, reqs=[(60, 10), (0, 3)], spare=1)),
        ("bf16/ps8/non-causal", dict(dt="bf16", H=4, H_kv=2, ps=8, reqs=[(5, 7), (0, 4), (8, 8)], causal=False)),
        ("fp16/ps16/softcap-sm-scale", dict(dt="fp16", H=4, H_kv=2, ps=16, reqs=[(10, 9), (0, 6)], softcap=5.0,
                                            sm_scale=0.3, q_std=2.0)),
        ("bf16/ps16/non-causal-softcap", dict(dt="bf16", H=4, H_kv=2, ps=16, reqs=[(20, 5), (3, 14)], causal=False,
                                              softcap=3.0, q_std=2.0)),
        ("bf16/ps16/rope-full", dict(dt="bf16", H=4, H_kv=2, ps=16, reqs=[(0, 6), (13, 7), (30, 4)], rope=True)),
        ("fp16/ps4/rope-partial-r32-non-causal", dict(dt="fp16", H=4, H_kv=2, ps=4, reqs=[(6, 5), (0, 3), (2, 7)],
                                                      rope=True, R=32, rope_base=500.0, causal=False)),
        ("bf16/ps2/rope-r16-d128-maxpos-slack", dict(dt="bf16", H=2, H_kv=1, D=128, ps=2, reqs=[(3, 4), (0, 2)],
                                                     rope=True, R=16, max_position=40)),
        ("fp16/ps8/rope-r2-softcap", dict(dt="fp16", H=4, H_kv=1, ps=8, reqs=[(9, 5), (1, 3)], rope=True, R=2,
                                          softcap=4.0)),
        ("bf16/ps16/e4m3-saturating", dict(dt="bf16", cache="e4m3", H=4, H_kv=2, ps=16, reqs=[(0, 5), (18, 9), (7, 0)],
                                            k_scale=0.0625, v_scale=0.125, big=0.05)),
        ("fp16/ps2/e4m3-non-causal-softcap", dict(dt="fp16", cache="e4m3", H=4, H_kv=2, ps=2,
                                                   reqs=[(5, 4), (0, 3), (2, 2)], k_scale=3.0, v_scale=0.5, big=0.05,
                                                   causal=False, softcap=6.0)),
        ("bf16/ps64/e4m3-crossing", dict(dt="bf16", cache="e4m3", H=2, H_kv=1, ps=64, reqs=[(62, 5), (0, 2)],
                                          k_scale=0.25, v_scale=0.0625, big=0.03, spare=0)),
        ("fp16/ps16/gqa16", dict(dt="fp16", H=16, H_kv=1, ps=16, reqs=[(5, 4), (16, 3)], cache_dtype_key=True)),
        ("bf16/ps16/gqa8-hkv2", dict(dt="bf16", H=16, H_kv=2, ps=16, reqs=[(17, 3), (0, 2)])),
        ("bf16/ps4/d256", dict(dt="bf16", H=2, H_kv=1, D=256, ps=4, reqs=[(3, 3), (0, 2)])),
        ("fp16/ps8/d128-strided", dict(dt="fp16", H=4, H_kv=2, D=128, ps=8, reqs=[(4, 5), (11, 3)], strided=True)),
        ("bf16/ps8/rope-strided", dict(dt="bf16", H=4, H_kv=2, ps=8, reqs=[(6, 4), (0, 5)], strided=True, rope=True,
                                       R=48, rope_base=1000.0)),
        ("bf16/ps4/shared-prefix-page", dict(dt="bf16", H=4, H_kv=2, ps=4, reqs=[(6, 3), (9, 4), (0, 2)],
                                             share_prefix=True)),
        ("fp16/ps16/scales-ignored-16bit-validate", dict(dt="fp16", H=4, H_kv=2, ps=16, reqs=[(3, 4), (0, 2)],
                                                         scale_values=("nan", -2.0), validate=True)),
        ("bf16/ps16/e4m3-validate", dict(dt="bf16", cache="e4m3", H=4, H_kv=2, ps=16, reqs=[(9, 8), (0, 3)],
                                          k_scale=0.125, v_scale=0.25, big=0.02, validate=True)),
        ("bf16/ps16/rope-validate-maxpos-exact", dict(dt="bf16", H=4, H_kv=1, ps=16, reqs=[(21, 6), (0, 27)], rope=True,
                                                      validate=True)),
        ("bf16/ps32/longer", dict(dt="bf16", H=4, H_kv=1, ps=32, reqs=[(70, 40), (30, 50)], max_seqlen_q=128,
                                   spare=0)),
        ("fp16/ps8/all-empty", dict(dt="fp16", H=4, H_kv=1, ps=8, reqs=[(5, 0), (0, 0), (20, 0)])),
        ("bf16/ps16/b0", dict(dt="bf16", H=4, H_kv=2, ps=4, reqs=[], spare=2)),
    ]
    cases, total = [], 0
    for i, (name, kw) in enumerate(specs):
        c, cost = build_case(i, name, **kw)
        cases.append(c)
        total += cost
    return cases, total


def self_test():
    # rounding helpers
    b, v = rnd_q("bf16", np.array([1.0, 1.00390625, 1.01171875], np.float32))
    assert list(v) == [1.0, 1.0, 1.015625], v
    # e4m3 store: saturation and a tie to even
    assert list(e4m3_bits_satfinite(np.array([500.0, -1e9, 432.0, 1.0625], np.float32))) == [0x7E, 0xFE, 0x7E, 0x38]
    # RoPE: R = 2 at pos 0 is the identity; a quarter turn at inv_freq 1 (c = 0) rotates (a, b) -> (-b, a)
    cos, sin = rope_tables("fp16", 10000.0, 2, [0])
    assert cos[0, 0] == 1.0 and sin[0, 0] == 0.0
    x = np.array([[[1.0, 2.0, 3.0]]], np.float32)
    y = rotate_neox(x, np.array([[0.0]], np.float32), np.array([[1.0]], np.float32), 2)
    assert list(y[0, 0]) == [-2.0, 1.0, 3.0], y
    f = inv_freq(10000.0, 4)
    assert f[0] == 1.0 and abs(f[1] - 0.01) < 1e-9
    print("  self-test passed (rounding, e4m3 store, RoPE)")


def main():
    args = case_args(__doc__, out_dir=False, out_file="gqa_prefill_paged_append_golden.json").parse_args()
    self_test()
    cases, cost = build_cases()
    write_cases_text(args.out, cases, dumps_indented({"cases": cases}) + "\n",
                     extra=f"; reference cost {cost:.3g} (sum of q_len * H * (old + q_len) * D)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
