#!/usr/bin/python3
"""Golden test cases for bsa_fwd (SPEC.md §2.4) and bsa_fp8_fwd (§2.6), computed independently of the C++
project (numpy, float64; nothing imported from the repository's C++ side).

Writes tests/cases/bsa_fwd_golden.json and tests/cases/bsa_fp8_fwd_golden.json in the `attnjit test` format.
One generator for both ops (named after bsa_fwd, whose semantics bsa_fp8_fwd quantises): the bsa_fp8_fwd
cases continue the bsa_fwd cases' random stream, so splitting it would change them.

bsa_fwd semantics, per batch b, query head h, query i (block m = i // bs), KV head r = h // (H_q / H_kv):
count n = q2k_block_nums[b, h, m] or block_sparse_num (or K_max); active blocks A = index[b, h, m, :n];
len(kb) = min(bsz(kb), S_kv - kb * bs) with bsz from block_sizes by rank ([N_kv], [B, N_kv],
[B, H_q, N_kv]) or bs; visible keys = union over A of [kb * bs, kb * bs + len(kb)); l = scale * <q, k>;
row softmax; an empty row gives o = 0 and lse = -inf. The inactive suffix of every index row holds
garbage (out-of-range values) to prove it is never read.

bsa_fp8_fwd: Q per row s_q = max(max|q|, 1e-3) / 448, q8 = e4m3(q / s_q); K centred by the fp32 mean over
all keys of (b, h), per 16-key group s_k = max(max|kc|, 1e-3) / 448, k8 = e4m3(kc / s_k); V per (h, d) over
b and j, s_v likewise; fp32 arithmetic and the saturating RNE store of §1.8; then the exact attention above.
Its golden cases compare the reference against these values (5e-2 rel_l2: the mean's summation order may
move a code by one step), and the script itself checks, for inputs drawn as 0.5 * N(0, 1), that the
quantised result lies within 8e-2 of the unquantised bsa_fwd result (SPEC.md §2.6 tests) and reports the
error of a simulated kernel that also rounds the probabilities to e4m3.

Usage: /usr/bin/python3 tests/gen/bsa_fwd_golden.py [--out-dir DIR]
"""
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from casegen_common import TOL, CaseList  # noqa: E402
from casegen_numeric import (RandomTensor, e4m3_bits_satfinite, e4m3_from_bits, golden_main, out_bits,  # noqa: E402
                             poison, softmax_rows, values_spec)

SEED = 20250214


def input_specs(q, k, v, meta):
    """The input tensors of a case: q, k, v, q2k_block_index, and q2k_block_nums / block_sizes when the
    metadata has them."""
    tensors = {"q": q.spec(), "k": k.spec(), "v": v.spec(),
               "q2k_block_index": values_spec("int32", meta["index"].shape, meta["index"].reshape(-1))}
    if meta["nums"] is not None:
        tensors["q2k_block_nums"] = values_spec("int32", meta["nums"].shape, meta["nums"].reshape(-1))
    if meta["bsz"] is not None:
        tensors["block_sizes"] = values_spec("int32", meta["bsz"].shape, meta["bsz"].reshape(-1))
    return tensors


def to_bhsd(x, layout):
    return x if layout == "bhsd" else np.transpose(x, (0, 2, 1, 3))


def from_bhsd(x, layout):
    return x if layout == "bhsd" else np.transpose(x, (0, 2, 1, 3))


def visible_keys(index, nums, fixed, bsz, rank, b, h, m, bs, S_kv):
    n = int(nums[b, h, m]) if nums is not None else fixed
    keys = []
    seen = set()
    for u in range(n):
        kb = int(index[b, h, m, u])
        if kb in seen:
            continue
        seen.add(kb)
        size = bs if bsz is None else int(bsz[kb] if rank == 1 else bsz[b, kb] if rank == 2 else bsz[b, h, kb])
        ln = min(size, S_kv - kb * bs)
        keys.extend(range(kb * bs, kb * bs + ln))
    return np.array(keys, dtype=np.int64)


def attention(Q, K, V, meta, scale):
    """Q [B, H, S_q, D], K [B, H_kv, S_kv, D], V [B, H_kv, S_kv, D_v] float64 -> o, lse (BHSD)."""
    B, H, S_q, _ = Q.shape
    H_kv, S_kv, Dv = K.shape[1], K.shape[2], V.shape[3]
    g = H // H_kv
    bs = meta["bs"]
    o = np.zeros((B, H, S_q, Dv))
    lse = np.full((B, H, S_q), -math.inf)
    for b in range(B):
        for h in range(H):
            r = h // g
            for m in range((S_q + bs - 1) // bs):
                keys = visible_keys(meta["index"], meta["nums"], meta["fixed"], meta["bsz"], meta["rank"], b, h, m, bs,
                                    S_kv)
                rows = slice(m * bs, min(S_q, (m + 1) * bs))
                if keys.size == 0:
                    continue
                o[b, h, rows], lse[b, h, rows] = softmax_rows(scale * (Q[b, h, rows] @ K[b, r, keys].T), V[b, r, keys])
    return o, lse


def make_metadata(rng, B, H, S_q, S_kv, bs, K_max, counts, empty_rows=False, rank=0, short=False):
    """counts: "fixed" (all rows use K_max or fixed n) or "variable". Returns the metadata dict and the
    fixed count (None for variable)."""
    N_q, N_kv = (S_q + bs - 1) // bs, (S_kv + bs - 1) // bs
    assert K_max <= N_kv or counts == "variable"
    index = np.zeros((B, H, N_q, K_max), dtype=np.int64)
    nums = None
    fixed = None
    if counts == "variable":
        nums = rng.integers(0 if empty_rows else 1, min(K_max, N_kv) + 1, size=(B, H, N_q))
        if empty_rows:
            nums.reshape(-1)[0] = 0
    else:
        fixed = counts
    for b in range(B):
        for h in range(H):
            for m in range(N_q):
                n = int(nums[b, h, m]) if nums is not None else fixed
                act = rng.permutation(N_kv)[:n]
                garbage = rng.choice([-7, N_kv, N_kv + 5, 2 ** 30], size=K_max - n)
                index[b, h, m] = np.concatenate([act, garbage])
    bsz = None
    if rank:
        shape = {1: (N_kv,), 2: (B, N_kv), 3: (B, H, N_kv)}[rank]
        bsz = np.full(shape, bs, dtype=np.int64)
        if short:
            bsz = rng.integers(1, bs + 1, size=shape)
            flat = bsz.reshape(-1)
            flat[: max(1, flat.size // 3)] = bs  # some full blocks too
            rng.shuffle(flat)
            bsz = flat.reshape(shape)
    return {"index": index, "nums": nums, "fixed": fixed, "bsz": bsz, "rank": rank, "bs": bs}


def bsa_fwd_case(rng, name, seed, *, dtype, layout="bhsd", bs=64, B=1, H=2, H_kv=2, S_q=64, S_kv=64, D=64, Dv=None,
                 K_max=2, counts=None, block_sparse_num=None, empty_rows=False, rank=0, short=False, kv_splits=None,
                 scale=None, with_lse=True, validate=False, q_strides=None, std=1.0):
    Dv = Dv or D
    if counts is None:
        counts = block_sparse_num if block_sparse_num is not None else K_max
    meta = make_metadata(rng, B, H, S_q, S_kv, bs, K_max, counts, empty_rows, rank, short)
    shp = (lambda h, s, d: [B, h, s, d]) if layout == "bhsd" else (lambda h, s, d: [B, s, h, d])
    q = RandomTensor(rng, dtype, shp(H, S_q, D), q_strides, std=std)
    k = RandomTensor(rng, dtype, shp(H_kv, S_kv, D), std=std)
    v = RandomTensor(rng, dtype, shp(H_kv, S_kv, Dv))
    alpha = scale if scale is not None else 1.0 / math.sqrt(D)
    o64, lse64 = attention(to_bhsd(q.val, layout), to_bhsd(k.val, layout), to_bhsd(v.val, layout), meta, alpha)
    o64 = from_bhsd(o64, layout)
    tensors = input_specs(q, k, v, meta)
    tensors["o"] = poison(o64.shape, dtype)
    config = {"layout": layout, "sparse_block_size": bs}
    if scale is not None:
        config["scale"] = scale
    if block_sparse_num is not None:
        config["block_sparse_num"] = block_sparse_num
    if empty_rows:
        config["allow_empty_block_nums"] = True
    if kv_splits is not None:
        config["kv_splits"] = kv_splits
    if validate:
        config["validate_inputs"] = True
    golden = {"o": {"bits": out_bits(dtype, o64)}}
    compare = {"o": {"mode": "rel_l2", "tol": TOL[dtype]}}
    if with_lse:
        tensors["lse"] = poison([B, H, S_q], "fp32")
        golden["lse"] = {"values": [float(x) if math.isfinite(x) else "-inf" for x in lse64.reshape(-1)]}
        compare["lse"] = {"mode": "lse"}
    n_empty = int(np.sum(~np.isfinite(lse64)))
    return {"name": name, "op": "bsa_fwd", "config": config, "seed": seed, "tensors": tensors, "compare": compare,
            "golden": golden}, n_empty


def bsa_fwd_cases(rng):
    cases = CaseList(rng, bsa_fwd_case, "bsa-fwd-golden/", 5000)
    add = cases.add

    add("bf16/bhsd/bs64/d64/mha/fixed-kmax/sq70-skv130", dtype="bf16", S_q=70, S_kv=130, K_max=3)
    add("fp16/bshd/bs64/d64-dv128/gqa/variable/empty/bsz1-short/validate", dtype="fp16", layout="bshd", H=4, H_kv=2,
        S_q=100, S_kv=180, Dv=128, K_max=3, counts="variable", empty_rows=True, rank=1, short=True, validate=True)
    add("bf16/bhsd/bs128/d128-dv64/mqa/bsz3-short/splits2", dtype="bf16", bs=128, H=2, H_kv=1, S_q=130, S_kv=300,
        D=128, Dv=64, K_max=2, rank=3, short=True, kv_splits=2)
    add("fp16/bhsd/bs128/d96/bsz2-short/splits7/scale", dtype="fp16", bs=128, B=2, H=1, H_kv=1, S_q=40, S_kv=260, D=96,
        K_max=3, rank=2, short=True, kv_splits=7, scale=0.07)
    add("bf16/bshd/bs64/d64/fixed3-of-kmax5/splits-auto/no-lse", dtype="bf16", layout="bshd", H=2, H_kv=1, S_q=65,
        S_kv=320, K_max=5, block_sparse_num=3, kv_splits="auto", with_lse=False)
    add("fp16/bhsd/bs64/d64/sq1-skv1", dtype="fp16", H=1, H_kv=1, S_q=1, S_kv=1, K_max=1)
    add("bf16/bhsd/bs64/d64/q-strided/variable/splits256", dtype="bf16", S_q=64, S_kv=200, K_max=4, counts="variable",
        kv_splits=256, q_strides=[2 * 64 * 80 + 8, 64 * 80, 80, 1])
    add("fp16/bshd/bs128/d128/gqa/variable/empty/splits2/std3", dtype="fp16", layout="bshd", bs=128, H=4, H_kv=2,
        S_q=129, S_kv=257, D=128, K_max=3, counts="variable", empty_rows=True, kv_splits=2, std=3.0)
    return cases


# ----------------------------------------------------------------------------------------------------
# bsa_fp8_fwd


def quantize(qv, kv, vv):
    """qv, kv, vv: BHSD float64 values of bf16 inputs -> dequantised float64 operands (SPEC.md §2.6 1-3)."""
    f32 = np.float32
    floor = f32(1e-3)
    q = qv.astype(f32)
    sq = (np.maximum(np.abs(q).max(axis=3, keepdims=True), floor) / f32(448)).astype(f32)
    q8 = e4m3_from_bits(e4m3_bits_satfinite((q / sq).astype(f32)))
    k = kv.astype(f32)
    mu = (kv.sum(axis=2, keepdims=True) / kv.shape[2]).astype(f32)  # the exact mean, rounded to fp32
    kc = (k - mu).astype(f32)
    B, H, S_kv, D = kc.shape
    G = (S_kv + 15) // 16
    pad = np.zeros((B, H, G * 16, D), dtype=f32)
    pad[:, :, :S_kv] = np.abs(kc)
    sk = (np.maximum(pad.reshape(B, H, G, 16 * D).max(axis=3), floor) / f32(448)).astype(f32)  # [B, H, G]
    sk_key = np.repeat(sk, 16, axis=2)[:, :, :S_kv, None]
    k8 = e4m3_from_bits(e4m3_bits_satfinite((kc / sk_key).astype(f32)))
    v = vv.astype(f32)
    sv = (np.maximum(np.abs(v).max(axis=(0, 2), keepdims=True), floor) / f32(448)).astype(f32)  # [1, H, 1, D]
    v8 = e4m3_from_bits(e4m3_bits_satfinite((v / sv).astype(f32)))
    return (q8 * sq.astype(np.float64), k8 * sk_key.astype(np.float64), v8 * sv.astype(np.float64))


def attention_p_e4m3(Q, K, V, meta, scale):
    """The kernel's extra rounding, simulated: probabilities exp(l - max) rounded to e4m3 in the numerator
    (the denominator keeps the fp32 sum). For the accuracy statement only."""
    B, H, S_q, _ = Q.shape
    bs = meta["bs"]
    o = np.zeros((B, H, S_q, V.shape[3]))
    for b in range(B):
        for h in range(H):
            for m in range((S_q + bs - 1) // bs):
                keys = visible_keys(meta["index"], meta["nums"], meta["fixed"], meta["bsz"], meta["rank"], b, h, m, bs,
                                    K.shape[2])
                rows = slice(m * bs, min(S_q, (m + 1) * bs))
                if keys.size == 0:
                    continue
                z = scale * (Q[b, h, rows] @ K[b, h, keys].T)
                w = np.exp(z - z.max(axis=1, keepdims=True))
                w8 = e4m3_from_bits(e4m3_bits_satfinite(w.astype(np.float32)))
                o[b, h, rows] = (w8 @ V[b, h, keys]) / w.sum(axis=1, keepdims=True)
    return o


def rel(a, b):
    return float(np.linalg.norm((a - b).reshape(-1)) / np.linalg.norm(b.reshape(-1)))


def fp8_case(rng, name, seed, *, B=1, H=2, S_q=64, S_kv=128, K_max=2, counts=None, block_sparse_num=None,
             empty_rows=False, rank=0, short=False, scale=None, validate=False, std=0.5):
    bs, D = 64, 128
    if counts is None:
        counts = block_sparse_num if block_sparse_num is not None else K_max
    meta = make_metadata(rng, B, H, S_q, S_kv, bs, K_max, counts, empty_rows, rank, short)
    q = RandomTensor(rng, "bf16", [B, H, S_q, D], std=std)
    k = RandomTensor(rng, "bf16", [B, H, S_kv, D], std=std)
    v = RandomTensor(rng, "bf16", [B, H, S_kv, D], std=std)
    alpha = scale if scale is not None else 1.0 / math.sqrt(D)
    Qd, Kd, Vd = quantize(q.val, k.val, v.val)
    o64, _ = attention(Qd, Kd, Vd, meta, alpha)
    exact, _ = attention(q.val, k.val, v.val, meta, alpha)
    sim = attention_p_e4m3(Qd, Kd, Vd, meta, alpha)
    stats = {"fp8_ref_vs_bsa_fwd": rel(o64, exact), "sim_kernel_vs_fp8_ref": rel(sim, o64),
             "sim_kernel_vs_bsa_fwd": rel(sim, exact)}
    if std == 0.5:
        assert stats["fp8_ref_vs_bsa_fwd"] <= 8e-2, stats  # SPEC.md §2.6 tests
    tensors = input_specs(q, k, v, meta)
    tensors["o"] = poison([B, H, S_q, D], "bf16")
    config = {}
    if scale is not None:
        config["scale"] = scale
    if block_sparse_num is not None:
        config["block_sparse_num"] = block_sparse_num
    if empty_rows:
        config["allow_empty_block_nums"] = True
    if validate:
        config["validate_inputs"] = True
    case = {"name": name, "op": "bsa_fp8_fwd", "config": config, "seed": seed, "tensors": tensors,
            "compare": {"o": {"mode": "rel_l2", "tol": TOL["e4m3"]}},
            "golden": {"o": {"bits": out_bits("bf16", o64)}}}
    return case, stats


def fp8_cases(rng):
    cases = CaseList(rng, fp8_case, "bsa-fp8-fwd-golden/", 6000)
    add = cases.add

    add("fixed-kmax/sq64-skv128", S_q=64, S_kv=128, K_max=2)
    add("variable/empty/bsz1-short/sq70-skv150/validate", S_q=70, S_kv=150, K_max=3, counts="variable",
        empty_rows=True, rank=1, short=True, validate=True)
    add("b2/fixed2-of-3/bsz3/sq33-skv200/scale", B=2, H=1, S_q=33, S_kv=200, K_max=3, block_sparse_num=2, rank=3,
        scale=0.05)
    add("bsz2-short/std1/sq65-skv100", S_q=65, S_kv=100, K_max=2, rank=2, short=True, std=1.0)
    return cases


def main():
    return golden_main(__doc__, SEED, [
        ("bsa_fwd_golden.json", bsa_fwd_cases, lambda n_empty: f"{n_empty} empty rows"),
        ("bsa_fp8_fwd_golden.json", fp8_cases, lambda st: ", ".join(f"{k} {v:.3e}" for k, v in st.items()))])


if __name__ == "__main__":
    sys.exit(main())
