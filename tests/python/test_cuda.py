"""The package on CUDA tensors: every op's kernel through its op function (attnjit.<op>) against the same
call with impl="reference" on CPU copies (fresh random data, SPEC.md §1.12 tolerances, §1.9's rule for
index outputs), torch.compile(fullgraph=True) over a small attention block, a CUDA-graph capture of a
planned decode step, a caller stream, and autograd of bsa_fwd and gqa_fwd on the GPU.

The GPU tests skip (with the reason) where torch or a CUDA device is absent; tools/scripts/gpu_python.sh
runs them on a GPU host. The case builders are numpy code, and test_case_on_numpy_reference runs every
case through the numpy reference here too (no torch needed), so the cases stay valid calls in CI.
"""
import math
import zlib

import numpy as np
import pytest

import attnjit
from conftest import from_bf16_bits, to_bf16_bits

try:
    import torch
except ImportError:  # CI: the numpy-only subset
    torch = None

if torch is None:
    _NO_CUDA = "torch is not installed"
elif not torch.cuda.is_available():
    _NO_CUDA = "torch sees no CUDA device"
else:
    _NO_CUDA = None
needs_torch = pytest.mark.skipif(torch is None, reason="torch is not installed (see docs/python.md)")
needs_cuda = pytest.mark.skipif(_NO_CUDA is not None,
                                reason=f"{_NO_CUDA}: the CUDA tests run on a GPU host (tools/scripts/gpu_python.sh)")

# SPEC.md §1.12: norm-relative thresholds by output dtype; gradients twice their dtype's.
TOL = {"fp16": 5e-3, "bf16": 1e-2, "fp32": 1e-4, "fp8": 5e-2}


# ---- Test tensors: numpy values plus the dtype they are handed over in ----------------------------


class T:
    """A case tensor. `a` holds the exact values in a numpy type that stores them: float16 for fp16,
    uint16 bits for bf16, uint8 bits for e4m3, float32 / int32 / int64 as they are."""

    __slots__ = ("a", "dtype")

    def __init__(self, a, dtype):
        self.a, self.dtype = a, dtype

    @property
    def values(self):
        """float64 (int64 for indices) values, as the library sees them."""
        if self.dtype == "bf16":
            return from_bf16_bits(self.a).astype(np.float64)
        if self.dtype == "e4m3":
            return _E4M3[self.a].astype(np.float64)
        if self.dtype in ("int32", "int64"):
            return self.a.astype(np.int64)
        return self.a.astype(np.float64)


def _e4m3_table():
    b = np.arange(256)
    s = np.where(b & 0x80, -1.0, 1.0)
    e, m = (b >> 3) & 0xF, b & 7
    v = np.where(e == 0, m / 8 * 2.0 ** -6, (1 + m / 8) * 2.0 ** (e - 7.0))
    v = np.where((b & 0x7F) == 0x7F, np.nan, v)
    return (s * v).astype(np.float32)


_E4M3 = _e4m3_table()


def flt(rng, dtype, *shape, scale=1.0):
    x = rng.standard_normal(shape) * scale
    if dtype == "fp16":
        return T(x.astype(np.float16), "fp16")
    if dtype == "bf16":
        return T(to_bf16_bits(x), "bf16")
    return T(x.astype(np.float32), "fp32")


def e4m3(rng, *shape):
    """Random e4m3 bytes of magnitude 0.25 .. 3.75 (exponent fields 5..8): no NaN, no saturation."""
    bits = (rng.integers(0, 2, shape) << 7) | (rng.integers(5, 9, shape) << 3) | rng.integers(0, 8, shape)
    return T(bits.astype(np.uint8), "e4m3")


def i32(x):
    return T(np.asarray(x, np.int32), "int32")


def _numpy_arg(t):
    if t.dtype == "bf16":
        return attnjit.bf16(t.a.copy())
    if t.dtype == "e4m3":
        return attnjit.e4m3(t.a.copy())
    return t.a.copy()


def _torch_arg(t, device):
    if t.dtype == "bf16":
        x = torch.from_numpy(t.a.view(np.int16).copy()).view(torch.bfloat16)
    elif t.dtype == "e4m3":
        x = torch.from_numpy(t.a.copy()).view(torch.float8_e4m3fn)
    else:
        x = torch.from_numpy(t.a.copy())
    return x.to(device)


def _values(x):
    """An output as float64 (int64 for int32 outputs) numpy values."""
    if torch is not None and isinstance(x, torch.Tensor):
        x = x.detach().cpu()
        return x.numpy().astype(np.int64) if x.dtype in (torch.int32, torch.int64) else x.double().numpy()
    if isinstance(x, attnjit.HostView):
        return T(x.array, x.dtype).values
    return x.astype(np.int64) if x.dtype.kind == "i" else x.astype(np.float64)


def _bits(x):
    """A tensor's bytes (for outputs and pools compared bit for bit)."""
    if torch is not None and isinstance(x, torch.Tensor):
        return x.detach().cpu().contiguous().view(torch.uint8).numpy().copy()
    if isinstance(x, attnjit.HostView):
        return x.array.view(np.uint8).copy()
    return x.view(np.uint8).copy()


# ---- Cases -------------------------------------------------------------------------------------------


class Case:
    """One call: op name, positional and keyword arguments (T for tensors), the names of what it
    returns, the in-place arguments compared after the call ({name: positional index}) and a check per
    name: a float (norm-relative threshold), "lse", "bits" or a callable(got, ref)."""

    def __init__(self, op, args, kwargs, outputs, checks, inplace=None):
        self.op, self.args, self.kwargs = op, args, kwargs
        self.outputs, self.checks, self.inplace = outputs, checks, inplace or {}

    @property
    def has_fp8(self):
        return any(isinstance(t, T) and t.dtype == "e4m3" for t in list(self.args) + list(self.kwargs.values()))


def run_case(case, mode):
    """mode "cuda": the kernels on CUDA tensors; "torch-ref": impl="reference" on CPU torch tensors;
    "numpy-ref": impl="reference" on numpy arrays. Returns {name: numpy array}."""
    if mode == "numpy-ref":
        conv = _numpy_arg
    else:
        device = "cuda" if mode == "cuda" else "cpu"
        conv = lambda t: _torch_arg(t, device)  # noqa: E731
    args = [conv(a) if isinstance(a, T) else a for a in case.args]
    kwargs = {k: conv(v) if isinstance(v, T) else v for k, v in case.kwargs.items()}
    if mode != "cuda":
        kwargs["impl"] = "reference"
    out = getattr(attnjit, case.op)(*args, **kwargs)
    outs = out if isinstance(out, tuple) else (() if out is None else (out,))
    assert len(outs) == len(case.outputs), f"{case.op}: returned {len(outs)} values"
    res = {}
    for name, x in zip(case.outputs, outs):
        res[name] = _bits(x) if case.checks.get(name) == "bits" else _values(x)
    for name, i in case.inplace.items():
        res[name] = _bits(args[i])
    return res


def rel_l2(got, ref):
    d = np.linalg.norm((np.asarray(got, np.float64) - ref).ravel())
    return d / max(np.linalg.norm(np.asarray(ref, np.float64).ravel()), 1e-12)


def check_rel(got, ref, tol, what="output"):
    assert got.shape == ref.shape, f"{what}: shape {got.shape}, reference {ref.shape}"
    assert not np.isnan(got).any(), f"{what}: NaN in the output"
    e = rel_l2(got, ref)
    assert e <= tol, f"{what}: relative L2 error {e:.3g} above {tol:g}"


def check_lse(got, ref, what="lse"):
    assert got.shape == ref.shape and not np.isnan(got).any(), what
    inf = np.isinf(ref)
    assert np.array_equal(got[inf], ref[inf]), f"{what}: infinite entries differ"
    fin = ~inf
    err = np.abs(got[fin] - ref[fin]) - 2e-3 * np.maximum(1.0, np.abs(ref[fin]))
    assert (err <= 0).all(), f"{what}: {int((err > 0).sum())} entries beyond 2e-3 (worst {err.max():.3g} over)"


def compare(case, got, ref):
    for name, how in case.checks.items():
        g, r = got[name], ref[name]
        what = f"{case.op}.{name}"
        if how == "bits":
            assert np.array_equal(g, r), f"{what}: {int((g != r).sum())} bytes differ from the reference"
        elif how == "lse":
            check_lse(g, r, what)
        elif callable(how):
            how(g, r)
        else:
            check_rel(g, r, how, what)


def topk_rule(got, n_rows, candidates, scores, tol, ascending=False, what="indices"):
    """SPEC.md §1.9 on got [n_rows, K]: per row r, candidates(r) (ids), scores(r) (indexable by id),
    tol(r, want) (the score tolerance): the count, trailing -1, distinct candidates, and the scores at
    the returned ids equal to the best ones within tol."""
    got = got.reshape(n_rows, -1)
    k = got.shape[1]
    for r in range(n_rows):
        cand = np.asarray(candidates(r), np.int64)
        n = min(k, cand.size)
        row = got[r]
        assert (row[n:] == -1).all(), f"{what}: row {r}: expected {n} valid entries then -1, got {row.tolist()}"
        valid = row[:n]
        assert np.isin(valid, cand).all() and len(set(valid.tolist())) == n, \
            f"{what}: row {r}: entries not distinct candidates: {valid.tolist()}"
        if ascending:
            assert (np.diff(valid) > 0).all(), f"{what}: row {r}: not in ascending order"
        if n:
            sc = np.asarray(scores(r), np.float64)
            have = np.sort(sc[valid])[::-1]
            want = np.sort(sc[cand])[::-1][:n]
            bad = np.abs(have - want) > tol(r, want)
            assert not bad.any(), (f"{what}: row {r}: the returned scores differ from the best {n} at "
                                   f"{np.flatnonzero(bad).tolist()[:4]}: {have[bad][:4]} against {want[bad][:4]}")


def _meta(lens, bs=None):
    offsets = np.concatenate([[0], np.cumsum(lens)]).astype(np.int32)
    tok = np.array([(n, p) for n, ln in enumerate(lens) for p in range(ln)], np.int32).reshape(-1, 2)
    chunks = None
    if bs is not None:
        chunks = np.concatenate([[0], np.cumsum([-(-ln // bs) for ln in lens])]).astype(np.int32)
    return offsets, tok, chunks


def case_paged_kv_write(rng, dtype, cache):
    N, H_kv, D, NP, PS = 7, 2, 128, 4, 16
    fp8 = cache == "e4m3"
    k, v = flt(rng, dtype, N, H_kv, D, scale=200.0 if fp8 else 1.0), flt(rng, dtype, N, H_kv, D)
    pools = (e4m3(rng, NP, PS, H_kv, D), e4m3(rng, NP, PS, H_kv, D)) if fp8 else \
        (flt(rng, dtype, NP, PS, H_kv, D), flt(rng, dtype, NP, PS, H_kv, D))
    slots = rng.permutation(NP * PS)[:N].astype(np.int64)
    slots[3] = -1
    args = [k, v, *pools, T(slots, "int64")]
    if fp8:  # k / 0.5 takes some values past 448 (saturation)
        args += [T(np.array([0.5], np.float32), "fp32"), T(np.array([2.0], np.float32), "fp32")]
    return Case("paged_kv_write", args, {}, (), {"k_pages": "bits", "v_pages": "bits"},
                inplace={"k_pages": 2, "v_pages": 3})


def case_gqa_fwd(rng, dtype, variant):
    B, S_q, S_kv, H, H_kv, D = 2, 37, 75, 8, 2, 128
    kw = {"is_causal": variant != "noncausal", "return_lse": True}
    if variant == "window_softcap":
        S_q, S_kv, D = 50, 50, 64
        kw.update(is_causal=False, window_size=(20, 5), softcap=30.0)
    q, k, v = flt(rng, dtype, B, S_q, H, D), flt(rng, dtype, B, S_kv, H_kv, D), flt(rng, dtype, B, S_kv, H_kv, D)
    if variant == "rope":
        R = 64
        ang = np.arange(S_kv)[:, None] * 10000.0 ** (-np.arange(R // 2) / (R // 2))
        if dtype == "fp16":
            cast = lambda x: T(x.astype(np.float16), "fp16")  # noqa: E731
        else:
            cast = lambda x: T(to_bf16_bits(x), "bf16")  # noqa: E731
        kw.update(pos_encoding_mode="rope", rotary_dim=R, rope_cos=cast(np.cos(ang)), rope_sin=cast(np.sin(ang)))
    return Case("gqa_fwd", [q, k, v], kw, ("o", "lse"), {"o": TOL[dtype], "lse": "lse"})


def case_gqa_varlen_fwd(rng):
    H, H_kv, D = 8, 2, 128
    q_lens, kv_lens = [5, 0, 33, 1], [9, 4, 40, 70]
    q, k, v = flt(rng, "fp16", sum(q_lens), H, D), flt(rng, "fp16", sum(kv_lens), H_kv, D), \
        flt(rng, "fp16", sum(kv_lens), H_kv, D)
    cu_q, cu_kv = np.cumsum([0] + q_lens), np.cumsum([0] + kv_lens)
    sinks = T(rng.standard_normal(H).astype(np.float32), "fp32")
    return Case("gqa_varlen_fwd", [q, k, v, i32(cu_q), i32(cu_kv)], {"sinks": sinks, "return_lse": True},
                ("o", "lse"), {"o": TOL["fp16"], "lse": "lse"})


def case_gqa_paged_fwd(rng, variant):
    H, H_kv, D, PS, W = 8, 2, 128, 16, 4
    if variant == "mixed":
        q_lens, lens = [1, 20, 3], [37, 50, 3]
    else:  # decode: one query token per request (the split-KV decode path)
        q_lens, lens = [1, 1, 1, 1], [1, 37, 64, 20]
    B = len(q_lens)
    NP = B * W + 3
    qdt = "bf16" if variant == "decode_e4m3" else "fp16"
    q = flt(rng, qdt, sum(q_lens), H, D)
    if variant == "decode_e4m3":
        kp, vp = e4m3(rng, NP, PS, H_kv, D), e4m3(rng, NP, PS, H_kv, D)
    else:
        kp, vp = flt(rng, qdt, NP, PS, H_kv, D), flt(rng, qdt, NP, PS, H_kv, D)
    table = rng.permutation(NP)[:B * W].reshape(B, W)
    kw = {}
    if variant == "decode_e4m3":
        kw = {"k_scale": T(rng.uniform(0.5, 1.5, (B, H_kv)).astype(np.float32), "fp32"),
              "v_scale": T(rng.uniform(0.5, 1.5, (B, H_kv)).astype(np.float32), "fp32")}
    tol = TOL["fp8"] if variant == "decode_e4m3" else TOL[qdt]
    return Case("gqa_paged_fwd", [q, kp, vp, i32(table), i32(lens), i32(np.cumsum([0] + q_lens))], kw,
                ("o",), {"o": tol})


def case_mha_decode_paged(rng, S_q, causal):
    B, H, D, PS = 2, 4, 128, 16
    N_kv = 6 * PS
    q, k, v = flt(rng, "fp16", B, S_q, H, D), flt(rng, "fp16", N_kv, H, D), flt(rng, "fp16", N_kv, H, D)
    table = rng.permutation(6).reshape(B, 3)
    return Case("mha_decode_paged", [q, k, v, i32([40, 17]), i32(table)], {"page_size": PS, "is_causal": causal},
                ("o",), {"o": TOL["fp16"]})


def case_gqa_prefill_paged_append(rng):
    H, H_kv, D, PS, NPG, W = 8, 2, 128, 16, 8, 4
    q_lens, old = [3, 10], [20, 0]
    T_q = sum(q_lens)
    q, k_new, v_new = flt(rng, "fp16", T_q, H, D), flt(rng, "fp16", T_q, H_kv, D), flt(rng, "fp16", T_q, H_kv, D)
    kp, vp = flt(rng, "fp16", NPG * PS, H_kv, D), flt(rng, "fp16", NPG * PS, H_kv, D)
    one = T(np.ones(1, np.float32), "fp32")
    table = rng.permutation(NPG).reshape(2, W)
    args = [q, k_new, v_new, kp, vp, one, T(np.ones(1, np.float32), "fp32"), i32(np.cumsum([0] + q_lens)), i32(old),
            i32(table)]
    return Case("gqa_prefill_paged_append", args, {"page_size": PS, "max_seqlen_q": max(q_lens)}, ("o",),
                {"o": TOL["fp16"], "k_pages": "bits", "v_pages": "bits"}, inplace={"k_pages": 3, "v_pages": 4})


def case_fp8_lightning_indexer(rng):
    B, S, H, D, S_kv, G = 1, 20, 32, 64, 50, 1
    q, k = flt(rng, "bf16", B, S, H, D), flt(rng, "bf16", B, S_kv, G, D)
    w = T(rng.standard_normal((S, H)).astype(np.float32), "fp32")
    ks = rng.integers(-3, 12, S)
    ke = ks + rng.integers(-2, 45, S)

    def check(got, ref):
        assert got.shape == ref.shape == (B, S, S_kv, G) and not np.isnan(got).any()
        assert np.array_equal(np.isneginf(got), np.isneginf(ref)), "fp8_lightning_indexer: -inf pattern differs"
        inside = np.isfinite(ref)
        err = ((got[inside] - ref[inside]) ** 2).sum() / max((ref[inside] ** 2).sum(), 1e-30)
        assert err <= 1e-3, f"fp8_lightning_indexer: normalised squared error {err:.3g} above 1e-3"

    return Case("fp8_lightning_indexer", [q, k, w, i32(ks), i32(ke)], {}, ("logits",), {"logits": check})


def case_topk_select(rng, windows):
    B, S, S_kv, G, K = 2, 6, 300, 2, 32
    score = T(rng.standard_normal((B, S, S_kv, G)).astype(np.float32), "fp32")
    starts = rng.integers(-10, 200, (B, S))
    ends = starts + rng.integers(-5, 150, (B, S))
    starts[0, 0], ends[0, 0] = 250, 400
    args = [score, i32(starts), i32(ends)] if windows else [score]
    sc = score.values

    def cand(r):
        b, s, g = np.unravel_index(r, (B, S, G))
        lo, hi = (max(starts[b, s], 0), min(ends[b, s], S_kv)) if windows else (0, S_kv)
        return np.arange(lo, max(lo, hi))

    def scores(r):
        b, s, g = np.unravel_index(r, (B, S, G))
        return sc[b, s, :, g]

    def check(got, ref):
        topk_rule(got, B * S * G, cand, scores, lambda r, want: 0.0, what="topk_select")

    return Case("topk_select", args, {"topk": K}, ("indexes",), {"indexes": check})


def case_lightning_indexer(rng, causal):
    B, Tn, H, D, K = 1, 96, 16, 64, 64
    q, k, w = flt(rng, "fp16", B, Tn, H, D), flt(rng, "fp16", B, Tn, D), flt(rng, "fp16", B, Tn, H)
    qv, kv, wv = q.values[0], k.values[0], w.values[0]
    sc = np.einsum("th,tsh->ts", wv, np.maximum(np.einsum("thd,sd->tsh", qv, kv), 0.0)) / math.sqrt(H * D)

    def cand(t):
        return np.arange(t + 1) if causal else np.arange(Tn)

    def tol(t, want):
        return 1e-4 * np.abs(sc[t, cand(t)]).max() + 1e-6

    def check(got, ref):
        topk_rule(got, Tn, cand, lambda t: sc[t], tol, ascending=True, what="lightning_indexer")

    return Case("lightning_indexer", [q, k, w], {"topk": K, "causal": causal}, ("indices",), {"indices": check})


def _bsa_index(rng, B, H, N_q, N_kv, K):
    return np.stack([rng.permutation(N_kv)[:K] for _ in range(B * H * N_q)]).reshape(B, H, N_q, K).astype(np.int32)


def case_bsa_fwd(rng, layout):
    B, H_q, H_kv, S_q, S_kv, D = 1, 4, 2, 130, 200, 128
    shp = (lambda h, s: (B, h, s, D)) if layout == "bhsd" else (lambda h, s: (B, s, h, D))
    q, k, v = flt(rng, "fp16", *shp(H_q, S_q)), flt(rng, "fp16", *shp(H_kv, S_kv)), flt(rng, "fp16", *shp(H_kv, S_kv))
    idx = _bsa_index(rng, B, H_q, 3, 4, 3)
    nums = rng.integers(1, 4, (B, H_q, 3))
    return Case("bsa_fwd", [q, k, v, i32(idx), i32(nums)], {"layout": layout, "return_lse": True}, ("o", "lse"),
                {"o": TOL["fp16"], "lse": "lse"})


def case_bsa_bwd(rng):
    B, H_q, H_kv, S, D = 1, 4, 2, 160, 128
    q, k, v = flt(rng, "fp16", B, H_q, S, D), flt(rng, "fp16", B, H_kv, S, D), flt(rng, "fp16", B, H_kv, S, D)
    idx, nums = i32(_bsa_index(rng, B, H_q, 3, 3, 2)), i32(rng.integers(1, 3, (B, H_q, 3)))
    o, lse = attnjit.bsa_fwd(*(_numpy_arg(t) for t in (q, k, v, idx, nums)), return_lse=True)
    do = flt(rng, "fp16", B, H_q, S, D)
    return Case("bsa_bwd", [do, q, k, v, T(o, "fp16"), T(lse, "fp32"), idx, nums], {}, ("dq", "dk", "dv"),
                {"dq": 2e-2, "dk": 2e-2, "dv": 2e-2})


def case_bsa_fp8_fwd(rng):
    q = flt(rng, "bf16", 1, 2, 100, 128, scale=0.5)
    k, v = flt(rng, "bf16", 1, 2, 150, 128, scale=0.5), flt(rng, "bf16", 1, 2, 150, 128, scale=0.5)
    return Case("bsa_fp8_fwd", [q, k, v, i32(_bsa_index(rng, 1, 2, 2, 3, 2))], {}, ("o",), {"o": TOL["fp8"]})


def case_gqa_bwd(rng, causal):
    B, S, H, H_kv, D = 1, 77, 8, 2, 128
    q, k, v = flt(rng, "fp16", B, S, H, D), flt(rng, "fp16", B, S, H_kv, D), flt(rng, "fp16", B, S, H_kv, D)
    o, lse = attnjit.gqa_fwd(q.a, k.a, v.a, is_causal=causal, return_lse=True)
    do = flt(rng, "fp16", B, S, H, D)
    g = 2 * TOL["fp16"]
    return Case("gqa_bwd", [q, k, v, T(o, "fp16"), do, T(lse, "fp32")], {"is_causal": causal}, ("dq", "dk", "dv"),
                {"dq": g, "dk": g, "dv": g})


def case_mla_decode(rng, paged):
    B, H, H_kv, D, PE, N = 2, 16, 1, 512, 64, 100
    q, q_pe = flt(rng, "fp16", B, H, D), flt(rng, "fp16", B, H, PE)
    lens = i32([100, 37])
    if paged:
        PS, NP = 64, 5
        k, k_pe = flt(rng, "fp16", NP, PS, H_kv, D), flt(rng, "fp16", NP, PS, H_kv, PE)
        args = [q, q_pe, k, k_pe, lens, i32(rng.permutation(NP)[:4].reshape(B, 2))]
    else:
        args = [q, q_pe, flt(rng, "fp16", B, N, H_kv, D), flt(rng, "fp16", B, N, H_kv, PE), lens]
    return Case("mla_decode", args, {}, ("o",), {"o": TOL["fp16"]})


def case_dsa_decode(rng):
    B, S, H, H_kv, D, tail, S_kv, K = 1, 4, 16, 1, 512, 64, 120, 32
    q, kv = flt(rng, "fp16", B, S, H, D + tail), flt(rng, "fp16", B, S_kv, H_kv, D + tail)
    idx = rng.integers(-1, S_kv + 10, (B, S, H_kv, K))  # -1, past S_kv and future (causal) entries mixed in
    return Case("dsa_decode", [q, kv, i32(idx)], {"dim_tail": tail, "stride_kv": 1, "q_start_index_s": 100},
                ("o",), {"o": TOL["fp16"]})


def case_nsa_compressed_fwd(rng):
    lens, bs, H, H_kv, D = [37, 0, 70], 16, 16, 1, 128
    off, tok, co = _meta(lens, bs)
    q = flt(rng, "fp16", int(off[-1]), H, D)
    kc, vc = flt(rng, "fp16", int(co[-1]), H_kv, D), flt(rng, "fp16", int(co[-1]), H_kv, D)
    return Case("nsa_compressed_fwd", [q, kc, vc, i32(off), i32(co), i32(tok)],
                {"scale": 0.088, "bs": bs, "return_lse": True}, ("o", "lse"), {"o": TOL["fp16"], "lse": "lse"})


def case_nsa_topk(rng):
    lens, bs, H, H_kv, D, S, scale = [40, 150], 16, 16, 1, 128, 4, 0.088
    off, tok, co = _meta(lens, bs)
    Tn = int(off[-1])
    q, kc = flt(rng, "fp16", Tn, H, D), flt(rng, "fp16", int(co[-1]), H_kv, D)
    # step 1: q * scale rounded to the input dtype (fp32 product)
    qs = (q.a.astype(np.float32) * np.float32(scale)).astype(np.float16).astype(np.float64)
    kcv = kc.values

    def importance(t):
        n, p = tok[t]
        cur, complete = p // bs, (p + 1) // bs
        dots = qs[t] @ kcv[co[n]:co[n] + cur + 1, 0].T  # [H, cur + 1] (H_kv = 1)
        if complete:
            m = dots[:, :complete].max(-1, keepdims=True)
            lse = m + np.log(np.exp(dots[:, :complete] - m).sum(-1, keepdims=True))
        else:
            lse = np.zeros((H, 1))
        w = np.exp(dots - lse)
        c = np.arange(cur + 1)
        w[:, (c == 0) | (c == cur - 1) | (c == cur)] = 1.0
        return w.sum(0)

    imps = [importance(t) for t in range(Tn)]
    def check(got, ref):
        topk_rule(got, Tn, lambda t: np.arange(tok[t][1] // bs + 1), lambda t: imps[t],
                  lambda t, want: 1e-4 * np.abs(want) + 1e-5, what="nsa_topk")

    return Case("nsa_topk", [q, kc, i32(off), i32(co), i32(tok)], {"scale": scale, "selected_block_num": S, "bs": bs},
                ("block_indices",), {"block_indices": check})


def case_nsa_selected_fwd(rng):
    lens, bs, SEL, H, H_kv, D = [40, 25], 8, 3, 16, 1, 128
    off, tok, _ = _meta(lens)
    Tn = int(off[-1])
    q, k, v = flt(rng, "fp16", Tn, H, D), flt(rng, "fp16", Tn, H_kv, D), flt(rng, "fp16", Tn, H_kv, D)
    nblk = np.array([-(-lens[n] // bs) for n, _ in tok])
    bi = np.stack([rng.integers(-1, nblk[t], (H_kv, SEL)) for t in range(Tn)])
    bc = rng.integers(1, SEL + 1, (Tn, H_kv))
    return Case("nsa_selected_fwd", [q, k, v, i32(bi), i32(bc), i32(off), i32(tok)],
                {"is_causal": True, "scale": 0.088, "block_size": bs}, ("o",), {"o": TOL["fp16"]})


CASES = {
    "paged_kv_write-fp16": lambda r: case_paged_kv_write(r, "fp16", "same"),
    "paged_kv_write-bf16": lambda r: case_paged_kv_write(r, "bf16", "same"),
    "paged_kv_write-fp16-e4m3": lambda r: case_paged_kv_write(r, "fp16", "e4m3"),
    "gqa_fwd-fp16-causal": lambda r: case_gqa_fwd(r, "fp16", "causal"),
    "gqa_fwd-bf16-causal": lambda r: case_gqa_fwd(r, "bf16", "causal"),
    "gqa_fwd-fp16-noncausal": lambda r: case_gqa_fwd(r, "fp16", "noncausal"),
    "gqa_fwd-fp16-window_softcap": lambda r: case_gqa_fwd(r, "fp16", "window_softcap"),
    "gqa_fwd-fp16-rope": lambda r: case_gqa_fwd(r, "fp16", "rope"),
    "gqa_varlen_fwd-fp16-sinks": case_gqa_varlen_fwd,
    "gqa_paged_fwd-fp16-decode": lambda r: case_gqa_paged_fwd(r, "decode"),
    "gqa_paged_fwd-fp16-mixed": lambda r: case_gqa_paged_fwd(r, "mixed"),
    "gqa_paged_fwd-bf16-decode_e4m3": lambda r: case_gqa_paged_fwd(r, "decode_e4m3"),
    "mha_decode_paged-sq1": lambda r: case_mha_decode_paged(r, 1, False),
    "mha_decode_paged-sq3-causal": lambda r: case_mha_decode_paged(r, 3, True),
    "gqa_prefill_paged_append-fp16": case_gqa_prefill_paged_append,
    "fp8_lightning_indexer-bf16": case_fp8_lightning_indexer,
    "topk_select-windows": lambda r: case_topk_select(r, True),
    "topk_select-whole": lambda r: case_topk_select(r, False),
    "lightning_indexer-causal": lambda r: case_lightning_indexer(r, True),
    "lightning_indexer-noncausal": lambda r: case_lightning_indexer(r, False),
    "bsa_fwd-bhsd": lambda r: case_bsa_fwd(r, "bhsd"),
    "bsa_fwd-bshd": lambda r: case_bsa_fwd(r, "bshd"),
    "bsa_bwd-fp16": case_bsa_bwd,
    "bsa_fp8_fwd-bf16": case_bsa_fp8_fwd,
    "gqa_bwd-causal": lambda r: case_gqa_bwd(r, True),
    "gqa_bwd-noncausal": lambda r: case_gqa_bwd(r, False),
    "mla_decode-contiguous": lambda r: case_mla_decode(r, False),
    "mla_decode-paged": lambda r: case_mla_decode(r, True),
    "dsa_decode-d512": case_dsa_decode,
    "nsa_compressed_fwd-d128": case_nsa_compressed_fwd,
    "nsa_topk-d128": case_nsa_topk,
    "nsa_selected_fwd-d128": case_nsa_selected_fwd,
}


def build(name):
    return CASES[name](np.random.default_rng(zlib.crc32(name.encode())))


def test_every_op_has_a_cuda_case():
    covered = {n.split("-")[0] for n in CASES}
    assert set(attnjit.list_ops()) <= covered, f"ops without a CUDA case: {set(attnjit.list_ops()) - covered}"


@pytest.mark.parametrize("name", sorted(CASES))
def test_case_on_numpy_reference(name):
    """The case is a valid call and its checks accept the reference against itself (no torch needed)."""
    case = build(name)
    ref = run_case(case, "numpy-ref")
    compare(case, ref, ref)


_fp8_dlpack = None


def _fp8_dlpack_ok():
    global _fp8_dlpack
    if _fp8_dlpack is None:
        try:
            torch.empty(1, dtype=torch.float8_e4m3fn).__dlpack__()
            _fp8_dlpack = True
        except Exception:  # noqa: BLE001 - any refusal means no float8 through DLPack
            _fp8_dlpack = False
    return _fp8_dlpack


@needs_cuda
@pytest.mark.parametrize("name", sorted(CASES))
def test_kernel_matches_reference(name):
    case = build(name)
    if case.has_fp8 and not _fp8_dlpack_ok():
        pytest.skip(f"torch {torch.__version__} does not export float8_e4m3fn tensors through DLPack")
    got = run_case(case, "cuda")
    ref = run_case(case, "torch-ref")
    compare(case, got, ref)


# ---- torch: compile, CUDA graphs, streams, autograd on the GPU ------------------------------------------


def _rel(a, b):
    a, b = a.detach().double(), b.detach().double()
    return float(torch.linalg.norm(a - b) / torch.linalg.norm(b).clamp_min(1e-12))


def _block(dim=256, H=4, H_kv=2, D=64, attn="attnjit"):
    """q/k/v projections, causal GQA attention, output projection."""

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.wq = torch.nn.Linear(dim, H * D)
            self.wk = torch.nn.Linear(dim, H_kv * D)
            self.wv = torch.nn.Linear(dim, H_kv * D)
            self.wo = torch.nn.Linear(H * D, dim)
            self.attn = attn

        def forward(self, x):
            B, S, _ = x.shape
            q = self.wq(x).view(B, S, H, D)
            k = self.wk(x).view(B, S, H_kv, D)
            v = self.wv(x).view(B, S, H_kv, D)
            if self.attn == "attnjit":
                o = attnjit.gqa_fwd(q, k, v, is_causal=True)
            else:  # torch SDPA, the same attention
                tr = lambda t: t.transpose(1, 2).repeat_interleave(H // t.shape[2], dim=1)  # noqa: E731
                o = torch.nn.functional.scaled_dot_product_attention(tr(q), tr(k), tr(v), is_causal=True)
                o = o.transpose(1, 2)
            return self.wo(o.reshape(B, S, H * D))

    return Block()


@needs_cuda
def test_compile_fullgraph_block_matches_eager():
    torch.manual_seed(0)
    m = _block().cuda().half()
    x = torch.randn(2, 64, 256, device="cuda", dtype=torch.float16)
    with torch.no_grad():
        eager = m(x)
        out = torch.compile(m, fullgraph=True)(x)
        sdpa = _block(attn="sdpa").cuda().half()
        sdpa.load_state_dict(m.state_dict())
        want = sdpa(x)
    assert _rel(out, eager) <= 5e-3
    assert _rel(eager, want) <= 1e-2


@needs_cuda
def test_compile_fullgraph_block_backward_matches_eager():
    """Training: the parameters require grad, so gqa_fwd takes its autograd op (backward gqa_bwd)."""
    torch.manual_seed(1)
    m = _block().cuda().half()
    x = torch.randn(2, 64, 256, device="cuda", dtype=torch.float16)
    eager = m(x)
    eager.float().square().mean().backward()
    grads = {n: p.grad.clone() for n, p in m.named_parameters()}
    m.zero_grad(set_to_none=True)
    out = torch.compile(m, fullgraph=True)(x)
    out.float().square().mean().backward()
    assert _rel(out, eager) <= 5e-3
    for n, p in m.named_parameters():
        assert _rel(p.grad, grads[n]) <= 1e-2, n


def _decode_inputs(B=4, H=32, H_kv=8, D=128, PS=16, W=8):
    g = torch.Generator().manual_seed(7)
    NP = B * W
    q = torch.randn(B, H, D, generator=g).half().cuda()
    kp = torch.randn(NP, PS, H_kv, D, generator=g).half().cuda()
    vp = torch.randn(NP, PS, H_kv, D, generator=g).half().cuda()
    table = torch.randperm(NP, generator=g).to(torch.int32).view(B, W).cuda()
    lens = torch.tensor([100, 17, W * PS, 1], dtype=torch.int32).cuda()
    cu = torch.arange(B + 1, dtype=torch.int32).cuda()
    return q, kp, vp, table, lens, cu


@needs_cuda
@pytest.mark.parametrize("mode", ["run", "execute", "run_workspace"])
def test_cuda_graph_decode_step(mode):
    """Plan before capture; capture Plan.run / Plan.execute; change the inputs in place; replay."""
    q, kp, vp, table, lens, cu = _decode_inputs()
    o = torch.empty_like(q)
    if mode == "run_workspace":
        p = attnjit.plan(attnjit.gqa_paged_fwd, q, kp, vp, table, lens, cu, out=o, workspace=True)
        ws = torch.empty(max(p.workspace_size, 256), dtype=torch.uint8, device="cuda")
        p.set_workspace(ws)
    else:
        p = attnjit.plan(attnjit.gqa_paged_fwd, q, kp, vp, table, lens, cu, out=o)
    named = {"q": q, "k_pages": kp, "v_pages": vp, "page_table": table, "cache_seqlens": lens, "cu_seqlens_q": cu,
             "o": o}
    tensors = tuple(named[n] for n in p.names)

    def step():
        if mode == "execute":
            p.execute(*tensors, stream=torch.cuda.current_stream().cuda_stream)
        else:
            p.run(q, kp, vp, table, lens, cu, out=o)

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm up off the default stream, as torch's capture recipe does
        step()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        step()
    g = torch.Generator().manual_seed(11)
    for _ in range(3):
        q.copy_(torch.randn(q.shape, generator=g).half())
        kp.copy_(torch.randn(kp.shape, generator=g).half())
        lens.copy_(torch.randint(1, 129, lens.shape, generator=g, dtype=torch.int32))
        o.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        eager = attnjit.gqa_paged_fwd(q, kp, vp, table, lens, cu)
        ref = attnjit.gqa_paged_fwd(q.cpu(), kp.cpu(), vp.cpu(), table.cpu(), lens.cpu(), cu.cpu(), impl="reference")
        assert not torch.isnan(o).any()
        assert _rel(o, eager) <= 1e-3
        assert _rel(o.cpu(), ref) <= TOL["fp16"]


@needs_cuda
def test_caller_stream():
    torch.manual_seed(2)
    q = torch.randn(1, 40, 8, 128, device="cuda", dtype=torch.float16)
    k = torch.randn(1, 60, 2, 128, device="cuda", dtype=torch.float16)
    v = torch.randn(1, 60, 2, 128, device="cuda", dtype=torch.float16)
    want = attnjit.gqa_fwd(q, k, v)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    o = torch.empty_like(q)
    attnjit.gqa_fwd(q, k, v, out=o, stream=s)
    attnjit.gqa_fwd(q, k, v, out=o, stream=s.cuda_stream)  # a CUstream handle works too
    torch.cuda.current_stream().wait_stream(s)
    assert _rel(o, want) <= 1e-3


@needs_torch
def test_gqa_fwd_autograd_is_registered():
    assert hasattr(torch.ops.attnjit, "gqa_fwd_autograd") and hasattr(torch.ops.attnjit, "bsa_fwd_autograd")


@needs_cuda
def test_bsa_fwd_autograd_cuda():
    torch.manual_seed(3)
    B, H, S, D = 1, 2, 128, 128
    q, k, v = (torch.randn(B, H, S, D, device="cuda", dtype=torch.float16, requires_grad=True) for _ in range(3))
    index = torch.tensor([0, 1], dtype=torch.int32, device="cuda").expand(B, H, 2, 2).contiguous()  # every block
    o = attnjit.bsa_fwd(q, k, v, index)
    assert o.grad_fn is not None
    do = torch.randn_like(o)
    o.backward(do)
    qd, kd, vd = (t.detach().double().requires_grad_() for t in (q, k, v))
    ref = torch.softmax(qd @ kd.transpose(-1, -2) / math.sqrt(D), -1) @ vd
    ref.backward(do.double())
    assert _rel(o, ref) <= TOL["fp16"]
    for got, want in ((q.grad, qd.grad), (k.grad, kd.grad), (v.grad, vd.grad)):
        assert _rel(got, want) <= 2e-2


@needs_cuda
@pytest.mark.parametrize("causal", [True, False])
def test_gqa_fwd_autograd_matches_sdpa(causal):
    torch.manual_seed(4)
    B, S, H, H_kv, D = 2, 100, 8, 2, 128
    q = torch.randn(B, S, H, D, device="cuda", dtype=torch.float16, requires_grad=True)
    k = torch.randn(B, S, H_kv, D, device="cuda", dtype=torch.float16, requires_grad=True)
    v = torch.randn(B, S, H_kv, D, device="cuda", dtype=torch.float16, requires_grad=True)
    o, lse = attnjit.gqa_fwd(q, k, v, is_causal=causal, return_lse=True)
    assert o.grad_fn is not None
    do = torch.randn_like(o)
    o.backward(do)
    q32, k32, v32 = (t.detach().float().transpose(1, 2).requires_grad_() for t in (q, k, v))
    rep = lambda t: t.repeat_interleave(H // H_kv, dim=1)  # noqa: E731
    ref = torch.nn.functional.scaled_dot_product_attention(q32, rep(k32), rep(v32), is_causal=causal)
    ref.backward(do.float().transpose(1, 2))
    assert _rel(o, ref.transpose(1, 2)) <= TOL["fp16"]
    for name, got, want in (("dq", q.grad, q32.grad), ("dk", k.grad, k32.grad), ("dv", v.grad, v32.grad)):
        assert _rel(got, want.transpose(1, 2)) <= 2 * TOL["fp16"], name
