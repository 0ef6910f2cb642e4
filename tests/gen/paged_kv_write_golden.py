#!/usr/bin/python3
"""Golden test cases for paged_kv_write (SPEC.md §2.19), computed independently of the C++ project.

Writes tests/cases/paged_kv_write_golden.json in the `attnjit test` format (tools/cli/test_case.hpp).
Everything here is numpy (1.24: float16, no bfloat16, no float8), so bf16 and e4m3 are implemented
from their definitions:

  * bf16: the top 16 bits of an fp32, rounded to nearest even (NaN kept, quieted).
  * e4m3 (float8_e4m3fn, SPEC.md §1.8): sign, 4-bit exponent (bias 7), 3-bit mantissa, NaN = S.1111.111,
    no infinities, largest finite 448, smallest subnormal 2^-9. Every store saturates: NaN stays NaN,
    +-inf and finite |x| > 448 become +-448 (0x7E / 0xFE), everything else rounds to nearest, ties to
    even, through the subnormals (|x| <= 2^-10 becomes a signed zero).
    The encoder picks the nearest entry of the table of all 127 non-negative finite codes (exact in
    float64), ties to the even code; a second, formula-based encoder cross-checks it in the self-test
    that runs before every generation (--self-test-only runs just that).
  * store(x) for an e4m3 cache is e4m3(x / scale) with the division done in IEEE fp32 (numpy float32
    division is correctly rounded).

The cases: every dtype pair (fp16->fp16, bf16->bf16, fp16->e4m3, bf16->e4m3), D 16, 64 and 576, page
sizes 1, 2, 3, 4, 16, H_kv 1 and 3, N 0, 1, 2, 3, 7, 13, scattered and skipped (-1) slots, pools poisoned with a
byte pattern (their whole storage is compared bitwise, so unwritten rows and stride gaps must keep the
poison), strided k/v (padded head and token strides), a broadcast (zero-stride) k, strided pools
(padded slot and head strides), a strided slot_mapping whose gaps hold decoy slots, and e4m3 edge
values (saturation, +-inf, NaN, subnormals, flush to zero, exact ties) under scales 0.5, 1, 0.0625, 3.

Usage: /usr/bin/python3 tests/gen/paged_kv_write_golden.py [--out PATH] [--self-test-only] [--negative-nan]
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from casegen_common import (case_args, class_f_ok, contiguous, dumps_indented, storage_size, tensor,  # noqa: E402
                            write_cases_text)
from casegen_numeric import (E4M3_POS, STORAGE_DTYPE, bf16_bits_from_f32, bf16_bits_to_f32,  # noqa: E402
                             e4m3_bits_satfinite, e4m3_from_bits, f32_bits, f32_from_bits, fp16_bits_from_f32,
                             fp16_bits_to_f32)

SEED = 20240219

# The sign of the NaN byte produced from a NaN input. SPEC.md §1.8 says the store "equals CUDA
# __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3)"; on an H200 (sm_90a) that conversion, and the
# kernel's path (__fdiv_rn, then __nv_cvt_float2_to_fp8x2), turn EVERY NaN into the canonical 0x7F:
# the GPU division already returns the canonical NaN 0x7FFFFFFF, and cvt.rn.satfinite.e4m3x2.f32 of
# 0xFFC00000 gives 0x7F as well (checked exhaustively over all 65536 fp16 and bf16 inputs under scales
# 0.0625, 0.25, 0.5, 1, 2.5, 3: this encoder equals the hardware bit for bit on all of them). A host
# x86 division keeps the NaN's sign, so a host reference that ORs the sign in gives 0xFF for a negative
# NaN. The default golden cases use positive NaN inputs only, so they hold either way;
# --negative-nan adds two cases that pin negative NaN inputs to 0x7F (the hardware behaviour).
NAN_KEEPS_SIGN = False


# ----------------------------------------------------------------------------------------------------
# 16-bit formats (fp32 <-> fp16 / bf16 bits, float32 values: tests/gen/casegen_numeric.py)

TO_BITS = {"fp16": fp16_bits_from_f32, "bf16": bf16_bits_from_f32}
FROM_BITS = {"fp16": fp16_bits_to_f32, "bf16": bf16_bits_to_f32}


# ----------------------------------------------------------------------------------------------------
# e4m3

def f32_to_e4m3(x):
    """Saturating RNE fp32 -> e4m3 (SPEC.md §1.8): casegen_numeric.e4m3_bits_satfinite with this file's
    NaN sign rule (NAN_KEEPS_SIGN). Decoding: casegen_numeric.e4m3_from_bits, table E4M3_POS."""
    return e4m3_bits_satfinite(x, nan_keeps_sign=NAN_KEEPS_SIGN)


def f32_to_e4m3_formula(x):
    """Second encoder (exponent / quantum / rint), only used to cross-check f32_to_e4m3."""
    x = np.asarray(x, dtype=np.float32)
    sign = ((f32_bits(x) >> 24) & 0x80).astype(np.uint8)
    with np.errstate(invalid="ignore"):
        a = np.abs(x.astype(np.float64))
    out = np.zeros(x.shape, dtype=np.uint8)
    for i, v in np.ndenumerate(a):
        if np.isnan(v):
            c = 0x7F
        elif v > 448.0:
            c = 0x7E
        else:
            if v < 2.0 ** -6:
                q = 2.0 ** -9
            else:
                q = 2.0 ** (int(np.floor(np.log2(v))) - 3)
                # guard log2 rounding at binade edges
                while v >= 16 * q:
                    q *= 2
                while v < 8 * q:
                    q /= 2
            r = float(np.rint(v / q)) * q  # np.rint: round half to even; v / q exact
            if r < 2.0 ** -6:
                c = int(round(r / 2.0 ** -9))
            else:
                e = int(np.floor(np.log2(r)))
                while r >= 2.0 ** (e + 1):
                    e += 1
                while r < 2.0 ** e:
                    e -= 1
                c = ((e + 7) << 3) | int((r / 2.0 ** e - 1.0) * 8)
            c = min(c, 0x7E)
        out[i] = c
    if NAN_KEEPS_SIGN:
        return out | sign
    return np.where(np.isnan(x), out, out | sign).astype(np.uint8)


def e4m3_store(x16_f32, scale):
    """store() of §2.19 for an e4m3 cache: e4m3(x / scale), the quotient an IEEE fp32 division."""
    with np.errstate(over="ignore", invalid="ignore", divide="ignore", under="ignore"):
        q = np.asarray(x16_f32, dtype=np.float32) / np.float32(scale)
    return f32_to_e4m3(q)


HAND_CHECKS = [
    # (scaled fp32 value, expected e4m3 byte, why)
    (448.0, 0x7E, "largest finite"),
    (-448.0, 0xFE, "largest finite, negative"),
    (449.0, 0x7E, "> 448 saturates"),
    (464.0, 0x7E, "midpoint 448/480 saturates (a non-saturating cast gives NaN/480)"),
    (1e9, 0x7E, "huge saturates"),
    (-1e9, 0xFE, "huge negative saturates"),
    (float("inf"), 0x7E, "+inf saturates"),
    (float("-inf"), 0xFE, "-inf saturates"),
    (float("nan"), 0x7F, "NaN stays NaN"),
    (432.0, 0x7E, "tie 416/448 -> even mantissa (448, m=6)"),
    (424.0, 0x7D, "416 (m=5) nearer"),
    (440.0, 0x7E, "448 nearer"),
    (2.0 ** -10, 0x00, "tie 0 / 2^-9 -> 0 (flush)"),
    (-(2.0 ** -10), 0x80, "tie -> signed zero"),
    (2.0 ** -11, 0x00, "below half the smallest subnormal"),
    (2.0 ** -10 + 2.0 ** -20, 0x01, "just above 2^-10 rounds up to 2^-9"),
    (3 * 2.0 ** -10, 0x02, "tie 1*2^-9 / 2*2^-9 -> even (2)"),
    (5 * 2.0 ** -10, 0x02, "tie 2*2^-9 / 3*2^-9 -> even (2)"),
    (7 * 2.0 ** -10, 0x04, "tie 3*2^-9 / 4*2^-9 -> even (4)"),
    (15 * 2.0 ** -10, 0x08, "tie 7*2^-9 / 2^-6 -> even (smallest normal 0x08)"),
    (2.0 ** -9, 0x01, "smallest subnormal"),
    (2.0 ** -6, 0x08, "smallest normal"),
    (0.0546875, 0x16, "7/128 = 1.75 * 2^-5, exact"),
    (1.0625, 0x38, "tie 1.0 / 1.125 -> even (1.0)"),
    (1.1875, 0x3A, "tie 1.125 / 1.25 -> even (1.25)"),
    (1.5, 0x3C, "exact"),
    (-2.25, 0xC1, "exact, negative"),
    (0.0, 0x00, "+0"),
    (-0.0, 0x80, "-0 keeps its sign"),
    (3.4028234663852886e38, 0x7E, "fp32 max saturates"),
    (1e-45, 0x00, "fp32 subnormal flushes"),
]


def self_test(verbose=True):
    vals = np.array([v for v, _, _ in HAND_CHECKS], dtype=np.float32)
    want = np.array([c for _, c, _ in HAND_CHECKS], dtype=np.uint8)
    got = f32_to_e4m3(vals)
    got2 = f32_to_e4m3_formula(vals)
    for (v, c, why), g, g2 in zip(HAND_CHECKS, got, got2):
        if verbose:
            print(f"  e4m3({v!r:>24}) = 0x{int(g):02X}  (want 0x{c:02X}: {why})")
        assert g == c and g2 == c, (v, hex(g), hex(g2), hex(c))
    # A negative NaN (0xFFC00000) and a signalling-pattern NaN (0xFF800001).
    neg_nan = f32_to_e4m3(f32_from_bits(np.array([0xFFC00000, 0xFF800001, 0x7F800001], dtype=np.uint32)))
    assert list(neg_nan) == ([0xFF, 0xFF, 0x7F] if NAN_KEEPS_SIGN else [0x7F, 0x7F, 0x7F]), neg_nan
    # Decoding round trip: every finite code maps to itself.
    codes = np.array([c for c in range(256) if c & 0x7F != 0x7F], dtype=np.uint8)
    assert np.array_equal(f32_to_e4m3(e4m3_from_bits(codes).astype(np.float32)), codes)
    # bf16 rounding checks.
    assert bf16_bits_from_f32(np.float32(1.0))[()] == 0x3F80
    assert bf16_bits_from_f32(f32_from_bits(np.uint32(0x3F808000)))[()] == 0x3F80  # tie -> even
    assert bf16_bits_from_f32(f32_from_bits(np.uint32(0x3F818000)))[()] == 0x3F82  # tie -> even (up)
    assert bf16_bits_from_f32(f32_from_bits(np.uint32(0x3F808001)))[()] == 0x3F81
    assert bf16_bits_from_f32(f32_from_bits(np.uint32(0x7F7FFFFF)))[()] == 0x7F80  # overflow -> inf
    assert bf16_bits_from_f32(f32_from_bits(np.uint32(0x7F800001)))[()] & 0x7FC0 == 0x7FC0  # NaN kept
    # Cross-check the two e4m3 encoders on every fp16 and bf16 input under every scale used here.
    all16 = np.arange(65536, dtype=np.uint32).astype(np.uint16)
    rng = np.random.default_rng(7)
    for dt in ("fp16", "bf16"):
        x = FROM_BITS[dt](all16)
        for s in (0.5, 1.0, 0.0625, 3.0, 0.25, 2.5):
            a = e4m3_store(x, s)
            # the formula encoder is slow: a random subset plus everything near the interesting ranges
            with np.errstate(all="ignore"):
                q = x / np.float32(s)
            aq = np.abs(q.astype(np.float64))
            pick = (aq < 2.0 ** -5) | ((aq > 400) & (aq < 500)) | ~np.isfinite(q) | (rng.random(q.shape) < 0.03)
            b = f32_to_e4m3_formula(q[pick])
            bad = np.nonzero(a[pick] != b)[0]
            assert bad.size == 0, (dt, s, q[pick][bad[:5]], a[pick][bad[:5]], b[bad[:5]])
    if verbose:
        print("  self-test passed (hand values, code round trip, bf16 rounding, encoder cross-check)")


# ----------------------------------------------------------------------------------------------------
# Tensors and cases

def check_class_f(name, dtype, shape, strides, written):
    """Class F/W (SPEC.md §1.2): innermost stride 1, other strides multiples of 16 bytes (extent-1
    axes exempt), zero strides only on read-only tensors."""
    assert class_f_ok(dtype, shape, strides, written), (name, shape, strides)


def flat_index(strides, idx):
    return sum(i * s for i, s in zip(idx, strides))


class Tensor:
    def __init__(self, name, dtype, shape, strides=None, output=False):
        self.name, self.dtype, self.shape = name, dtype, list(shape)
        self.contiguous = strides is None
        self.strides = contiguous(self.shape) if strides is None else list(strides)
        self.output = output
        self.size = storage_size(self.shape, self.strides)

    def spec(self, init):
        return tensor(self.shape, self.dtype, init, None if self.contiguous else self.strides, self.output)


def bits_init(arr):
    return {"kind": "bits", "bits": [int(v) for v in np.asarray(arr).ravel()]}


def paged_kv_write_reference(kdt, cdt, k, v, kp, vp, slots, k_scale, v_scale):
    """The independent reference: returns the expected k_pages / v_pages storages.

    k, v, kp, vp: (Tensor, storage ndarray); slots: list of int (logical slot_mapping)."""
    (kt, ks), (vt, vs), (kpt, kps), (vpt, vps) = k, v, kp, vp
    out_k, out_v = kps.copy(), vps.copy()
    N, H, D = kt.shape
    PS = kpt.shape[1]
    for n in range(N):
        slot = slots[n]
        if slot < 0:
            continue
        page, off = slot // PS, slot % PS
        for h in range(H):
            for (st, src, pt, dst, scale) in ((kt, ks, kpt, out_k, k_scale), (vt, vs, vpt, out_v, v_scale)):
                s0 = flat_index(st.strides, (n, h, 0))
                row = src[s0 + np.arange(D) * st.strides[2]]
                d0 = flat_index(pt.strides, (page, off, h, 0))
                dst_idx = d0 + np.arange(D) * pt.strides[3]
                if cdt == kdt:
                    dst[dst_idx] = row  # a bitwise copy
                else:
                    dst[dst_idx] = e4m3_store(FROM_BITS[kdt](row), scale)
    return out_k, out_v


# Scaled targets t (the fp32 value x / scale that reaches the e4m3 conversion); the inputs are
# x = rnd_dtype(t * scale), so most of them land exactly on t.
EDGE_TARGETS = [
    448.0, 449.0, 450.0, 464.0, 465.0, 480.0, 500.0, 1000.0, 1e5, 1e9,
    432.0, 424.0, 440.0, 416.0, 240.0, 256.0,
    2.0 ** -6, 2.0 ** -7, 2.0 ** -9, 2.0 ** -10, 2.0 ** -11, 2.0 ** -12, 3 * 2.0 ** -10, 5 * 2.0 ** -10,
    7 * 2.0 ** -10, 15 * 2.0 ** -10, 13 * 2.0 ** -11, 2.0 ** -10 * 1.5,
    0.0546875, 1.0625, 1.1875, 1.5, 2.25, 0.1, 1.0 / 3.0, 3.14159, 0.0, 17.0, 19.0, 288.0, 304.0,
]


def edge_inputs(dtype, scale):
    """16-bit input bits covering the e4m3 edges for `scale`, plus +-inf, NaN, dtype max / min."""
    t = np.array(EDGE_TARGETS, dtype=np.float64)
    t = np.concatenate([t, -t])
    x = (t * scale).astype(np.float32)
    bits = list(TO_BITS[dtype](x))
    if dtype == "fp16":
        bits += [0x7C00, 0xFC00, 0x7E00, 0x7C01, 0x7BFF, 0xFBFF, 0x0001, 0x8001, 0x0400, 0x8000, 0x03FF]
    else:
        bits += [0x7F80, 0xFF80, 0x7FC0, 0x7F81, 0x7F7F, 0xFF7F, 0x0001, 0x8001, 0x0080, 0x8000, 0x3C80]
    return np.array(bits, dtype=np.uint16)


def random_16bit(dtype, n, rng, std=1.0):
    return TO_BITS[dtype](rng.normal(0.0, std, size=n).astype(np.float32))


class Coverage:
    def __init__(self):
        self.counts = {}

    def add(self, kdt, scale, x16_f32):
        with np.errstate(all="ignore"):
            q = np.asarray(x16_f32, dtype=np.float32) / np.float32(scale)
        a = np.abs(q.astype(np.float64))
        fin = np.isfinite(q)
        hi = np.searchsorted(E4M3_POS, np.where(fin & (a <= 448), a, 0.0), side="left")
        lo = np.maximum(hi - 1, 0)
        tie = fin & (a <= 448) & (hi > 0) & (E4M3_POS[hi] - a == a - E4M3_POS[lo]) & (E4M3_POS[hi] != a)
        cats = {
            "saturate(|x/s|>448 finite)": fin & (a > 448),
            "+inf": np.isposinf(q),
            "-inf": np.isneginf(q),
            "NaN": np.isnan(q),
            "exactly +-448": a == 448,
            "subnormal range (2^-10 < |x/s| < 2^-6)": fin & (a > 2.0 ** -10) & (a < 2.0 ** -6),
            "flush to signed zero (0 < |x/s| <= 2^-10)": fin & (a > 0) & (a <= 2.0 ** -10),
            "exact tie (RNE)": tie,
            "negative zero result": fin & (a <= 2.0 ** -10) & (np.signbit(q)),
        }
        key = (kdt, float(scale))
        c = self.counts.setdefault(key, {k: 0 for k in cats})
        for k, m in cats.items():
            c[k] += int(np.count_nonzero(m))

    def report(self):
        lines = []
        for (kdt, s), c in sorted(self.counts.items()):
            lines.append(f"  {kdt}->e4m3 scale {s}: " + ", ".join(f"{k} {v}" for k, v in c.items()))
        return "\n".join(lines)


def build_case(name, kdt, cdt, N, H, D, NP, PS, slots, rng, *, k_strides=None, v_strides=None,
               kp_strides=None, vp_strides=None, slot_stride=1, k_scale=None, v_scale=None, poison=0xA5,
               v_poison=None, k_bits=None, v_bits=None, std=1.0, config=None, seed=0, cov=None,
               values_init=False):
    assert len(slots) == N
    e4m3 = cdt == "e4m3"
    assert e4m3 == (k_scale is not None) == (v_scale is not None)
    k = Tensor("k", kdt, [N, H, D], k_strides)
    v = Tensor("v", kdt, [N, H, D], v_strides)
    kp = Tensor("k_pages", cdt, [NP, PS, H, D], kp_strides, output=True)
    vp = Tensor("v_pages", cdt, [NP, PS, H, D], vp_strides, output=True)
    check_class_f("k", kdt, k.shape, k.strides, False)
    check_class_f("v", kdt, v.shape, v.strides, False)
    check_class_f("k_pages", cdt, kp.shape, kp.strides, True)
    check_class_f("v_pages", cdt, vp.shape, vp.strides, True)
    cap = NP * PS
    pos = [s for s in slots if s >= 0]
    assert all(s == -1 or 0 <= s < cap for s in slots) and len(set(pos)) == len(pos), name

    # k / v storages: random finite values everywhere (stride gaps too), then the requested bits on
    # the logical elements of the written tokens.
    def fill(t, bits):
        st = random_16bit(kdt, t.size, rng, std)
        if t.size and bits is not None:
            idx = [flat_index(t.strides, (n, h, d)) for n in range(N) if slots[n] >= 0
                   for h in range(H) for d in range(D)]
            # with zero strides several logical elements share one storage element: keep unique ones
            uniq = list(dict.fromkeys(idx))
            m = min(len(uniq), len(bits))
            st[np.array(uniq[:m], dtype=np.int64)] = bits[:m]
        return st

    ks, vs = fill(k, k_bits), fill(v, v_bits)
    sd = STORAGE_DTYPE[cdt]

    def pattern(p, size):
        b = np.full(size, p, dtype=np.uint8)
        return b if sd == np.uint8 else (b.astype(np.uint16) * 0x101).astype(np.uint16)

    kps = pattern(poison, kp.size)
    vps = pattern(poison if v_poison is None else v_poison, vp.size)
    exp_k, exp_v = paged_kv_write_reference(kdt, cdt, (k, ks), (v, vs), (kp, kps), (vp, vps), slots,
                                            k_scale, v_scale)
    if cov is not None and e4m3:
        for (t, st, sc) in ((k, ks, k_scale), (v, vs, v_scale)):
            idx = [flat_index(t.strides, (n, h, d)) for n in range(N) if slots[n] >= 0
                   for h in range(H) for d in range(D)]
            if idx:
                cov.add(kdt, sc, FROM_BITS[kdt](st[np.array(idx, dtype=np.int64)]))

    # slot_mapping storage (strided: the gaps hold decoy slots, unused valid ones, never read)
    sm = Tensor("slot_mapping", "int64", [N], None if slot_stride == 1 else [slot_stride])
    sm_store = np.zeros(sm.size, dtype=np.int64)
    unused = [s for s in range(cap) if s not in set(pos)] or [-1]
    for i in range(sm.size):
        sm_store[i] = unused[i % len(unused)]
    for n in range(N):
        sm_store[n * slot_stride] = slots[n]

    tensors = {}
    if values_init:
        for st in (ks, vs):
            vals = FROM_BITS[kdt](st)
            assert np.all(np.isfinite(vals)) and not np.any((vals == 0) & np.signbit(vals)), name
        tensors["k"] = k.spec({"kind": "values", "values": [float(x) for x in FROM_BITS[kdt](ks)]})
        tensors["v"] = v.spec({"kind": "values", "values": [float(x) for x in FROM_BITS[kdt](vs)]})
    else:
        tensors["k"] = k.spec(bits_init(ks))
        tensors["v"] = v.spec(bits_init(vs))
    if values_init:
        dec = (lambda a: e4m3_from_bits(a)) if e4m3 else (lambda a: FROM_BITS[cdt](a))
        for arr in (kps, vps, exp_k, exp_v):
            vals = dec(arr)
            assert np.all(np.isfinite(vals)) and not np.any((vals == 0) & np.signbit(vals)), name
        tensors["k_pages"] = kp.spec({"kind": "values", "values": [float(x) for x in dec(kps)]})
        tensors["v_pages"] = vp.spec({"kind": "values", "values": [float(x) for x in dec(vps)]})
    else:
        tensors["k_pages"] = kp.spec(bits_init(kps))
        tensors["v_pages"] = vp.spec(bits_init(vps))
    tensors["slot_mapping"] = sm.spec({"kind": "values", "values": [int(x) for x in sm_store]})
    if e4m3:
        tensors["k_scale"] = Tensor("k_scale", "fp32", [1]).spec({"kind": "values", "values": [float(k_scale)]})
        tensors["v_scale"] = Tensor("v_scale", "fp32", [1]).spec({"kind": "values", "values": [float(v_scale)]})
    if values_init:
        golden = {"k_pages": {"values": [float(x) for x in dec(exp_k)]},
                  "v_pages": {"values": [float(x) for x in dec(exp_v)]}}
    else:
        golden = {"k_pages": {"bits": [int(x) for x in exp_k]}, "v_pages": {"bits": [int(x) for x in exp_v]}}
    case = {
        "name": name,
        "op": "paged_kv_write",
        "config": config or {},
        "seed": seed,
        "tensors": tensors,
        "compare": {"k_pages": {"mode": "bitwise"}, "v_pages": {"mode": "bitwise"}},
        "golden": golden,
    }
    written = sum(1 for s in slots if s >= 0)
    changed = int(np.count_nonzero(exp_k != kps)) + int(np.count_nonzero(exp_v != vps))
    return case, written, changed


def scattered_slots(rng, N, cap, skip_every=None, n_skip=0):
    """N slots: distinct, non-sequential picks from [0, cap), with n_skip of them replaced by -1."""
    assert N <= cap
    s = [int(x) for x in rng.permutation(cap)[:N]]
    if n_skip:
        for i in rng.choice(N, size=n_skip, replace=False):
            s[int(i)] = -1
    return s


def build_cases(negative_nan=False):
    rng = np.random.default_rng(SEED)
    cov = Coverage()
    cases = []
    seed = [100]

    def add(name, *a, **kw):
        seed[0] += 1
        case, written, changed = build_case(name, *a, rng=rng, seed=seed[0], cov=cov, **kw)
        cases.append(case)
        return case

    # --- 16-bit caches (bitwise copies) ---
    add("pkw-golden/fp16-fp16/d16/ps1/h1/n7/scattered+skip", "fp16", "fp16", 7, 1, 16, 12, 1,
        [9, -1, 0, 4, -1, 11, 2])
    add("pkw-golden/bf16-bf16/d16/ps3/h3/n13/strided-k-v", "bf16", "bf16", 13, 3, 16, 6, 3,
        scattered_slots(rng, 13, 18, n_skip=3),
        k_strides=[3 * 32 + 8, 32, 1], v_strides=[3 * 24, 24, 1], poison=0x5A)
    add("pkw-golden/fp16-fp16/d64/ps16/h3/n13/all-slots-reversed", "fp16", "fp16", 13, 3, 64, 1, 16,
        [15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3], poison=0xFF)
    add("pkw-golden/bf16-bf16/d64/ps16/h1/n0", "bf16", "bf16", 0, 1, 64, 2, 16, [], poison=0xCD)
    add("pkw-golden/fp16-fp16/d16/ps3/h3/n7/all-skipped", "fp16", "fp16", 7, 3, 16, 3, 3, [-1] * 7, poison=0x7F)
    add("pkw-golden/bf16-bf16/d16/ps3/h3/n7/strided-pools", "bf16", "bf16", 7, 3, 16, 4, 3,
        scattered_slots(rng, 7, 12, n_skip=2),
        kp_strides=[3 * 80 + 16, 80, 24, 1], vp_strides=[3 * 64 + 32, 64, 16, 1], poison=0xA5, v_poison=0x3C)
    add("pkw-golden/fp16-fp16/d576/ps3/h1/n2", "fp16", "fp16", 2, 1, 576, 1, 3, [2, 0], poison=0xEE)
    add("pkw-golden/bf16-bf16/d16/ps2/h3/n3/broadcast-k+strided-slots", "bf16", "bf16", 3, 3, 16, 3, 2,
        [4, -1, 1], k_strides=[0, 16, 1], slot_stride=2, poison=0x11)
    add("pkw-golden/fp16-fp16/d16/ps1/h3/n1/specials-copied", "fp16", "fp16", 1, 3, 16, 3, 1, [1],
        k_bits=np.array([0x7C00, 0xFC00, 0x7E00, 0xFE00, 0x7C01, 0xFD55, 0x0001, 0x8000, 0x7BFF] * 6, np.uint16),
        v_bits=np.array([0x7E01, 0x8001, 0xFFFF, 0x7FFF, 0x0000] * 10, np.uint16), poison=0x00)
    add("pkw-golden/bf16-bf16/d16/ps1/h1/n1/specials-copied", "bf16", "bf16", 1, 1, 16, 2, 1, [0],
        k_bits=np.array([0x7F80, 0xFF80, 0x7FC0, 0xFFC1, 0x7F81, 0x0001, 0x8000, 0x7F7F] * 2, np.uint16),
        v_bits=np.array([0xFFFF, 0x7FFF, 0x0000, 0x8001] * 4, np.uint16), poison=0x99)

    # --- e4m3 caches: edge values under every scale, both input dtypes ---
    for kdt in ("fp16", "bf16"):
        for (ksc, vsc) in ((1.0, 0.0625), (3.0, 0.5)):
            kb, vb = edge_inputs(kdt, ksc), edge_inputs(kdt, vsc)
            H, D = (3, 16) if kdt == "fp16" else (1, 64)
            need = max(len(kb), len(vb))
            N = 7
            assert N * H * D >= need
            add(f"pkw-golden/{kdt}-e4m3/d{D}/ps3/h{H}/n{N}/edges/kscale{ksc:g}/vscale{vsc:g}", kdt, "e4m3",
                N, H, D, 4, 3, scattered_slots(rng, N, 12, n_skip=1) if kdt == "fp16" else [10, 3, 7, 0, 11, 5, 2],
                k_scale=ksc, v_scale=vsc, k_bits=kb, v_bits=rng.permutation(vb),
                poison=0xA5 if ksc == 1.0 else 0x7F)
    # random data with saturation (large std) and subnormals (small std)
    add("pkw-golden/fp16-e4m3/d16/ps16/h1/n13/std200/scale0.5", "fp16", "e4m3", 13, 1, 16, 2, 16,
        scattered_slots(rng, 13, 32, n_skip=2), k_scale=0.5, v_scale=1.0, std=200.0, poison=0x5A)
    add("pkw-golden/bf16-e4m3/d64/ps3/h3/n7/std300/scale3", "bf16", "e4m3", 7, 3, 64, 3, 3,
        scattered_slots(rng, 7, 9, n_skip=1), k_scale=3.0, v_scale=0.0625, std=300.0, poison=0xC3)
    add("pkw-golden/bf16-e4m3/d16/ps1/h3/n13/std0.01/scale0.0625", "bf16", "e4m3", 13, 3, 16, 16, 1,
        scattered_slots(rng, 13, 16, n_skip=4), k_scale=0.0625, v_scale=3.0, std=0.01, poison=0xA5)
    add("pkw-golden/fp16-e4m3/d16/ps3/h3/n7/std0.004/scale0.5", "fp16", "e4m3", 7, 3, 16, 3, 3,
        scattered_slots(rng, 7, 9), k_scale=0.5, v_scale=1.0, std=0.004, poison=0x3C)
    add("pkw-golden/bf16-e4m3/d16/ps1/h3/n1", "bf16", "e4m3", 1, 3, 16, 5, 1, [3], k_scale=1.0, v_scale=0.5,
        std=50.0, poison=0xFF)
    add("pkw-golden/fp16-e4m3/d64/ps16/h1/n0", "fp16", "e4m3", 0, 1, 64, 1, 16, [], k_scale=1.0, v_scale=3.0)
    add("pkw-golden/fp16-e4m3/d576/ps3/h1/n2/std400/scale0.5", "fp16", "e4m3", 2, 1, 576, 1, 3, [1, 2],
        k_scale=0.5, v_scale=3.0, std=400.0, poison=0x7F)
    add("pkw-golden/bf16-e4m3/d576/ps3/h1/n2/std100/scale1", "bf16", "e4m3", 2, 1, 576, 1, 3, [0, -1],
        k_scale=1.0, v_scale=0.0625, std=100.0, poison=0x00)
    add("pkw-golden/fp16-e4m3/d16/ps3/h3/n7/strided-kv+pools/std100", "fp16", "e4m3", 7, 3, 16, 3, 3,
        scattered_slots(rng, 7, 9, n_skip=2), k_strides=[3 * 48 + 32, 48, 1], v_strides=[3 * 32 + 16, 32, 1],
        kp_strides=[3 * 80 + 16, 80, 16, 1], vp_strides=[3 * 96, 96, 32, 1], k_scale=0.5, v_scale=3.0,
        std=100.0, poison=0xA5, v_poison=0x5A)
    add("pkw-golden/bf16-e4m3/d64/ps2/h3/n3/broadcast-v+strided-slots+validate", "bf16", "e4m3", 3, 3, 64, 2, 2,
        [2, 0, -1], v_strides=[3 * 64, 0, 1], slot_stride=3, k_scale=1.0, v_scale=0.5, std=300.0, poison=0xB7,
        config={"validate_inputs": True})
    add("pkw-golden/fp16-fp16/d16/ps3/h3/n13/validate", "fp16", "fp16", 13, 3, 16, 5, 3,
        scattered_slots(rng, 13, 15, n_skip=5), poison=0x5A, config={"validate_inputs": True})
    add("pkw-golden/bf16-bf16/d64/ps4/h1/n13", "bf16", "bf16", 13, 1, 64, 4, 4,
        scattered_slots(rng, 13, 16), poison=0xA5)

    # --- "values" inits (dyadic values, exact in every format involved) ---
    kv = np.array([(i % 17 - 8) * 0.375 for i in range(3 * 16)], dtype=np.float32)
    add("pkw-golden/fp16-fp16/d16/ps2/h1/n3/values-init", "fp16", "fp16", 3, 1, 16, 3, 2, [4, -1, 1],
        k_bits=fp16_bits_from_f32(kv), v_bits=fp16_bits_from_f32(-kv * 2 + 0.0), poison=0xC7, values_init=True)
    big = np.array([1000.0, -1000.0, 448.0, -464.0, 0.5, -0.25, 0.001953125, 3.0, 0.375, -96.0, 1.0625, 2.5,
                    12.0, -13.0, 0.0, 7.0] * 2, dtype=np.float32)
    add("pkw-golden/bf16-e4m3/d16/ps4/h1/n2/values-init", "bf16", "e4m3", 2, 1, 16, 1, 4, [3, 0],
        k_scale=2.0, v_scale=0.5, k_bits=bf16_bits_from_f32(big), v_bits=bf16_bits_from_f32(big[::-1] * 0.5),
        poison=0xB0, values_init=True)  # 0xB0 = e4m3 -0.5
    add("pkw-golden/fp16-e4m3/d16/ps1/h3/n2/values-init", "fp16", "e4m3", 2, 3, 16, 3, 1, [2, 0],
        k_scale=1.0, v_scale=0.25, k_bits=fp16_bits_from_f32(np.tile(big, 3)),
        v_bits=fp16_bits_from_f32(np.tile(big[::-1], 3)), poison=0x30, values_init=True)  # 0x30 = 0.5
    if negative_nan:
        # Pins a negative NaN input (fp16 0xFE00 / 0xFC01, bf16 0xFFC0) to the canonical 0x7F.
        add("pkw-golden/fp16-e4m3/d16/ps1/h1/n1/negative-nan", "fp16", "e4m3", 1, 1, 16, 2, 1, [1],
            k_scale=1.0, v_scale=0.5, k_bits=np.array([0xFE00, 0xFC01, 0x7E00, 0xFFFF] * 4, np.uint16),
            v_bits=np.array([0xFE00, 0x3C00] * 8, np.uint16), poison=0xA5)
        add("pkw-golden/bf16-e4m3/d16/ps1/h1/n1/negative-nan", "bf16", "e4m3", 1, 1, 16, 2, 1, [0],
            k_scale=3.0, v_scale=1.0, k_bits=np.array([0xFFC0, 0xFF81, 0x7FC0, 0xFFFF] * 4, np.uint16),
            v_bits=np.array([0xFFC0, 0x3F80] * 8, np.uint16), poison=0xA5)
    return cases, cov


def main():
    ap = case_args(__doc__, out_dir=False, out_file="paged_kv_write_golden.json")
    ap.add_argument("--self-test-only", action="store_true")
    ap.add_argument("--negative-nan", action="store_true",
                    help="also emit cases whose e4m3 inputs hold negative NaNs (expected: 0x7F, as on the GPU)")
    args = ap.parse_args()
    print("e4m3 / bf16 self-test:")
    self_test()
    if args.self_test_only:
        return 0
    cases, cov = build_cases(args.negative_nan)
    write_cases_text(args.out, cases, dumps_indented({"cases": cases}) + "\n")
    for c in cases:
        sizes = {n: (len(t["init"].get("bits", t["init"].get("values", [])))) for n, t in c["tensors"].items()}
        print(f"  {c['name']}: storage {sizes}")
    print("e4m3 edge coverage (written elements, x / scale):")
    print(cov.report())
    return 0


if __name__ == "__main__":
    sys.exit(main())
