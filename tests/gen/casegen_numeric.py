"""numpy helpers shared by the golden generators tests/gen/*_golden.py: number formats, strided storage,
random 16-bit / e4m3 inputs, tensor specs, RoPE, and the generators' common main().

numpy 1.24 has float16 but neither bfloat16 nor float8, so bf16 and e4m3 are implemented from their
definitions:

  * bf16: the top 16 bits of an fp32, rounded to nearest even.
  * e4m3 (float8_e4m3fn, SPEC.md §1.8): sign, 4-bit exponent (bias 7), 3-bit mantissa, subnormals
    m * 2^-9, NaN = S.1111.111, no infinities, largest finite 448.

Two e4m3 encoders with different jobs:
  * e4m3_bits_nearest: random INPUT values -> nearest finite code, ties to the lower magnitude.
  * e4m3_bits_satfinite: the STORE conversion of SPEC.md §1.8 (saturating, round to nearest even, NaN
    kept), what paged_kv_write's e4m3 cache must hold bit for bit.

Standard-library pieces (strides, JSON, scalar encoders) are in tests/gen/casegen_common.py.
"""
import math
import os

import numpy as np

from casegen_common import E4M3_POS_VALUES, case_args, contiguous, storage_size, tensor, write_golden

STORAGE_DTYPE = {"fp16": np.uint16, "bf16": np.uint16, "e4m3": np.uint8}

# ----------------------------------------------------------------------------------------------------
# fp32 / bf16 / fp16


def f32_bits(x):
    return np.ascontiguousarray(np.asarray(x, dtype=np.float32)).view(np.uint32)


def f32_from_bits(b):
    return np.ascontiguousarray(np.asarray(b, dtype=np.uint32)).view(np.float32)


def bf16_bits_from_f32(x):
    """fp32 -> bf16 bits, round to nearest even (overflow -> inf); NaN kept (quieted, sign kept)."""
    x = np.asarray(x, dtype=np.float32)
    b = f32_bits(x).astype(np.uint64)
    rounded = (b + 0x7FFF + ((b >> 16) & 1)) >> 16
    nan = (b >> 16 | 0x40) & 0xFFFF
    return np.where(np.isnan(x), nan, rounded).astype(np.uint16)


def bf16_bits_from_finite_f32(x):
    """bf16_bits_from_f32 for inputs that must all be finite (asserted)."""
    assert np.all(np.isfinite(np.asarray(x, dtype=np.float32)))
    return bf16_bits_from_f32(x)


def bf16_bits_to_f32(h):
    """bf16 bits -> float32 values (exact)."""
    return f32_from_bits(np.asarray(h, dtype=np.uint32) << 16)


def bf16_from_bits(bits):
    """bf16 bits -> float64 values (exact)."""
    return bf16_bits_to_f32(bits).astype(np.float64)


def fp16_bits_from_f32(x):
    """fp32 -> fp16 bits: numpy's conversion rounds to nearest even and keeps inf / NaN."""
    with np.errstate(over="ignore", invalid="ignore"):
        return np.ascontiguousarray(np.asarray(x, dtype=np.float32).astype(np.float16)).view(np.uint16)


def fp16_bits_to_f32(h):
    """fp16 bits -> float32 values (exact)."""
    return np.ascontiguousarray(np.asarray(h, dtype=np.uint16)).view(np.float16).astype(np.float32)


def fp16_from_bits(bits):
    """fp16 bits -> float64 values (exact)."""
    return fp16_bits_to_f32(bits).astype(np.float64)


# ----------------------------------------------------------------------------------------------------
# e4m3


def _e4m3_table():
    pos = list(E4M3_POS_VALUES)
    return np.array(pos + [np.nan] + [-v for v in pos] + [np.nan], dtype=np.float64)


E4M3 = _e4m3_table()  # value of every code 0x00..0xFF (float64; the NaN codes 0x7F / 0xFF are NaN)
E4M3_POS = E4M3[:0x7F]  # codes 0x00..0x7E: 0 .. 448, increasing
assert E4M3_POS[-1] == 448.0 and np.all(np.diff(E4M3_POS) > 0)


def e4m3_from_bits(bits):
    """e4m3 codes -> float64 values (exact; 0x80 is -0.0, the NaN codes give NaN)."""
    return E4M3[np.asarray(bits, dtype=np.uint8)]


def e4m3_bits_nearest(x):
    """INPUT encoder: nearest finite code (saturating at 448); ties go to the lower magnitude. For random
    input values only; the store conversion of SPEC.md §1.8 is e4m3_bits_satfinite."""
    x = np.asarray(x, dtype=np.float64)
    a = np.minimum(np.abs(x), 448.0)
    hi = np.clip(np.searchsorted(E4M3_POS, a), 0, 0x7E)
    lo = np.clip(hi - 1, 0, 0x7E)
    pick = np.where(np.abs(E4M3_POS[hi] - a) < np.abs(a - E4M3_POS[lo]), hi, lo)
    return (pick | np.where(x < 0, 0x80, 0)).astype(np.uint8)


def e4m3_bits_satfinite(x, nan_keeps_sign=False):
    """STORE encoder, SPEC.md §1.8: saturating round-to-nearest-even fp32 -> e4m3 by nearest-table search.
    NaN -> 0x7F (0xFF for a negative NaN when nan_keeps_sign), +-inf and finite |x| > 448 -> +-448
    (0x7E / 0xFE), everything else to the nearest code, ties to the even code, through the subnormals
    (|x| <= 2^-10 becomes a signed zero)."""
    x = np.asarray(x, dtype=np.float32)
    sign = ((f32_bits(x) >> 24) & 0x80).astype(np.uint8)
    with np.errstate(invalid="ignore"):
        a = np.abs(x.astype(np.float64))  # exact
    out = np.zeros(x.shape, dtype=np.uint8)
    nan = np.isnan(x)
    big = ~nan & (a > 448.0)  # includes +-inf
    mid = ~nan & ~big
    am = a[mid]
    hi = np.searchsorted(E4M3_POS, am, side="left")  # POS[hi-1] < am <= POS[hi]
    lo = np.maximum(hi - 1, 0)
    # All differences below are exact in float64 for float32 inputs >= 2^-10 (span < 2^53); for
    # smaller inputs the choice (zero) is clear-cut, so the comparisons are exact decisions.
    d_lo = am - E4M3_POS[lo]
    d_hi = E4M3_POS[hi] - am
    take_hi = (hi == 0) | (d_hi < d_lo) | ((d_hi == d_lo) & (hi % 2 == 0))
    out[mid] = np.where(take_hi, hi, lo).astype(np.uint8)
    out[big] = 0x7E
    out[nan] = 0x7F
    if nan_keeps_sign:
        return out | sign
    return np.where(nan, out, out | sign).astype(np.uint8)


# ----------------------------------------------------------------------------------------------------
# Random inputs and the reference's store


def to_bits(dtype, x):
    """Finite float64 input values -> storage bits of `dtype` (numpy uint array); e4m3 by the input
    encoder e4m3_bits_nearest."""
    if dtype == "fp16":
        return fp16_bits_from_f32(x)
    if dtype == "bf16":
        return bf16_bits_from_finite_f32(x)
    if dtype == "e4m3":
        return e4m3_bits_nearest(x)
    raise ValueError(dtype)


def from_bits(dtype, bits):
    """Storage bits -> float64 values (any pattern: NaN / inf decode without warnings)."""
    with np.errstate(all="ignore"):
        return {"fp16": fp16_from_bits, "bf16": bf16_from_bits, "e4m3": e4m3_from_bits}[dtype](bits)


def round_out(dtype, x64):
    """The reference's single store: float64 -> fp32 (RNE) -> fp16 / bf16 (RNE). Returns bits."""
    f32 = np.asarray(x64, dtype=np.float64).astype(np.float32)
    return fp16_bits_from_f32(f32) if dtype == "fp16" else bf16_bits_from_finite_f32(f32)


def out_bits(dtype, x64):
    """Bits (row-major) of a float64 array rounded once to dtype (round_out), as a list of ints: a golden
    file's expected output."""
    return [int(b) for b in round_out(dtype, np.ascontiguousarray(x64).reshape(-1))]


# ----------------------------------------------------------------------------------------------------
# Strided storage and "values" specs


def storage_index(shape, strides):
    """Storage index of every logical element (an int64 array of `shape`)."""
    idx = np.zeros(shape, dtype=np.int64)
    for d, (e, s) in enumerate(zip(shape, strides)):
        sh = [1] * len(shape)
        sh[d] = e
        idx = idx + (np.arange(e, dtype=np.int64) * s).reshape(sh)
    return idx


def gather(flat, shape, strides):
    """Logical values (a copy) of a flat storage array through strides; zeros when any extent is 0."""
    if any(e == 0 for e in shape):
        return np.zeros(shape, dtype=np.float64)
    return flat[storage_index(shape, strides)]


def padded_strides(shape, pads):
    """Class F strides: innermost 1, each outer stride the packed one plus pads[d] elements (pads in
    multiples of 8 elements = 16 bytes for 16-bit types, so the strides stay class F on a device too),
    outermost pad first."""
    assert len(pads) == len(shape) - 1 and all(p % 8 == 0 for p in pads)
    st = [1]
    acc = shape[-1]
    for d in range(len(shape) - 2, -1, -1):
        acc += pads[d]
        st.insert(0, acc)
        acc *= shape[d]
    return st


class RandomTensor:
    """A float input given by the bits of its whole storage (stride gaps included): random normal values
    (or `values`, one per storage element) encoded by to_bits; `val` holds the logical values as float64."""

    def __init__(self, rng, dtype, shape, strides=None, std=1.0, values=None):
        self.dtype, self.shape = dtype, list(shape)
        self.strides = list(strides) if strides is not None else contiguous(self.shape)
        self.explicit_strides = strides is not None
        n = storage_size(self.shape, self.strides)
        if values is None:
            values = rng.normal(0.0, std, size=n)
        self.bits = to_bits(dtype, np.asarray(values, dtype=np.float64).reshape(-1)) if n else np.zeros(0, np.uint16)
        assert self.bits.size == n
        self.refresh()

    def refresh(self):
        """Recomputes `val` after `bits` changed."""
        self.val = gather(from_bits(self.dtype, self.bits), self.shape, self.strides)

    def spec(self):
        return bits_spec(self.dtype, self.shape, self.bits, self.strides if self.explicit_strides else None)


def bits_spec(dtype, shape, bits, strides=None):
    """An input tensor's spec given by the bits of its whole storage (strides stated only when given)."""
    return tensor(shape, dtype, {"kind": "bits", "bits": [int(b) for b in bits]}, strides)


def poison(shape, dtype):
    """An output tensor's spec, poisoned."""
    return tensor(shape, dtype, {"kind": "poison"}, output=True)


def int_tensor(shape, vals, strides=None, fill=-7777):
    """An int32 input holding the logical values `vals` (row-major) in storage of `strides`; storage gaps
    get `fill`."""
    st = list(strides) if strides is not None else contiguous(shape)
    n = storage_size(shape, st)
    store = np.full(n, fill, dtype=np.int64)
    if n:
        store[storage_index(shape, st).reshape(-1)] = np.asarray(vals, dtype=np.int64).reshape(-1)
    return values_spec("int32", shape, store, strides)


def fmt_value(x):
    """A JSON "values" entry: integers stay integers, floats are floats, +-inf the strings "inf" / "-inf"."""
    if isinstance(x, (int, np.integer)):
        return int(x)
    x = float(x)
    return "inf" if x == math.inf else "-inf" if x == -math.inf else x


def values_spec(dtype, shape, values, strides=None):
    """An input tensor's spec given by its storage values (fmt_value each; strides stated only when given)."""
    return tensor(shape, dtype, {"kind": "values", "values": [fmt_value(x) for x in values]}, strides)


# ----------------------------------------------------------------------------------------------------
# Reference math


def softmax_row(z, values):
    """One attention row in float64: logits z [n] (n >= 1), values [n, D] -> (o [D], lse) with
    o = sum_j softmax(z)_j values_j and lse = log sum_j exp(z_j) (natural log)."""
    m = z.max()
    w = np.exp(z - m)
    return (w @ values) / w.sum(), m + math.log(w.sum())


def softmax_rows(z, values):
    """softmax_row of every row of logits z [r, n] (n >= 1) over values [n, D] -> (o [r, D], lse [r])."""
    mx = z.max(axis=1, keepdims=True)
    w = np.exp(z - mx)
    zs = w.sum(axis=1, keepdims=True)
    return (w @ values) / zs, (mx + np.log(zs))[:, 0]


def attend(Q, K, V, alpha, softcap, causal, wl, wr, sink, p0=None):
    """One (request, head) of gqa-style attention in float64: Q [ql, D], K / V [kl, D] -> o [ql, D], lse [ql].
    Query i sits at position p = p0 + i (default p0 = kl - ql: the queries are the last positions), key j
    at j; key j is visible iff (not causal or j <= p), (wl < 0 or j >= p - wl) and (wr < 0 or j <= p + wr).
    Logits alpha <q, k>, softcapped (softcap * tanh(z / softcap)) when softcap > 0; sink is an extra logit
    in every row's softmax (-inf: none; +inf: every row zero with lse +inf). A row with nothing visible
    and no sink is zero with lse -inf."""
    ql, kl = Q.shape[0], K.shape[0]
    if p0 is None:
        p0 = kl - ql
    o = np.zeros((ql, Q.shape[1]))
    lse = np.full(ql, -math.inf)
    if ql == 0:
        return o, lse
    if sink == math.inf:
        return o, np.full(ql, math.inf)
    p = np.arange(ql)[:, None] + p0
    j = np.arange(kl)[None, :]
    vis = np.ones((ql, kl), dtype=bool)
    if causal:
        vis &= j <= p
    if wl >= 0:
        vis &= j >= p - wl
    if wr >= 0:
        vis &= j <= p + wr
    z = alpha * (Q @ K.T) if kl else np.zeros((ql, 0))
    lg = softcap * np.tanh(z / softcap) if softcap > 0 else z
    lg = np.where(vis, lg, -math.inf)
    for i in range(ql):
        row = lg[i]
        m = max(float(row.max()) if kl else -math.inf, sink)
        if m == -math.inf:
            continue
        w = np.exp(row - m)  # exp(-inf) = 0 for hidden keys
        zsum = w.sum() + math.exp(sink - m)
        o[i] = (w @ V) / zsum if kl else 0.0
        lse[i] = m + math.log(zsum)
    return o, lse


def rope_rotate(x, cos, sin, layout, R):
    """x [n, D], cos/sin [n, R/2] (rows already at each vector's position) -> rotated copy (neox pairs
    (c, c + R/2), interleaved pairs (2c, 2c + 1))."""
    y = x.copy()
    if layout == "neox":
        a, b = x[:, : R // 2], x[:, R // 2: R]
        y[:, : R // 2] = a * cos - b * sin
        y[:, R // 2: R] = b * cos + a * sin
    else:
        a, b = x[:, 0:R:2], x[:, 1:R:2]
        y[:, 0:R:2] = a * cos - b * sin
        y[:, 1:R:2] = b * cos + a * sin
    return y


# ----------------------------------------------------------------------------------------------------
# Command line


def golden_main(doc, seed, files, self_test=None):
    """The main() of a golden generator: parses --out-dir (and, with self_test, --self-test-only; the self
    test runs first). Then, with one np.random.default_rng(seed), for each (file_name, cases[, describe]) of
    files in order: builds cases(rng) (a list of (case, note)), writes it to OUT_DIR/file_name and prints
    each case's describe(note) (default str)."""
    ap = case_args(doc)
    if self_test is not None:
        ap.add_argument("--self-test-only", action="store_true")
    args = ap.parse_args()
    if self_test is not None:
        print("self-test:")
        self_test()
        if args.self_test_only:
            return 0
    rng = np.random.default_rng(seed)
    for file_name, cases, *describe in files:
        built = cases(rng)
        write_golden(os.path.join(args.out_dir, file_name), built)
        for c, note in built:
            print(f"  {c['name']}: {(describe[0] if describe else str)(note)}")
    return 0
