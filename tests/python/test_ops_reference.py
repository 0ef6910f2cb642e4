"""Every op through the CPU reference on numpy host tensors: outputs allocated with the contract's
shapes and dtypes, values checked against small numpy computations."""
import numpy as np
import pytest

import attnjit
from conftest import attention, from_bf16_bits, to_bf16_bits


def f16(rng, *shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float16)


def i32(x):
    return np.asarray(x, np.int32)


def close(a, b, tol):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return np.linalg.norm(a - b) <= tol * max(np.linalg.norm(b), 1e-12)


def test_paged_kv_write(rng):
    k, v = f16(rng, 3, 2, 16), f16(rng, 3, 2, 16)
    kp = np.full((2, 4, 2, 16), 7, np.float16)
    vp = np.full((2, 4, 2, 16), 7, np.float16)
    assert attnjit.paged_kv_write(k, v, kp, vp, np.array([5, -1, 0], np.int64)) is None
    flat_k, flat_v = kp.reshape(8, 2, 16), vp.reshape(8, 2, 16)
    assert np.array_equal(flat_k[5], k[0]) and np.array_equal(flat_k[0], k[2])
    assert np.array_equal(flat_v[5], v[0]) and np.array_equal(flat_v[0], v[2])
    assert all((flat_k[s] == 7).all() for s in (1, 2, 3, 4, 6, 7))


@pytest.mark.parametrize("is_causal", [True, False])
def test_gqa_fwd(rng, is_causal):
    B, S_q, S_kv, H, H_kv, D = 2, 3, 5, 4, 2, 64
    q, k, v = f16(rng, B, S_q, H, D), f16(rng, B, S_kv, H_kv, D), f16(rng, B, S_kv, H_kv, D)
    o, lse = attnjit.gqa_fwd(q, k, v, is_causal=is_causal, return_lse=True)
    assert o.shape == (B, S_q, H, D) and o.dtype == np.float16
    assert lse.shape == (B, H, S_q) and lse.dtype == np.float32
    for b in range(B):
        for h in range(H):
            ref_o, ref_lse = attention(q[b, :, h], k[b, :, h // 2], v[b, :, h // 2], causal=is_causal)
            assert close(o[b, :, h], ref_o, 2e-3)
            assert np.allclose(lse[b, h], ref_lse, atol=1e-3)
    # the default is the contract's: causal
    assert np.array_equal(attnjit.gqa_fwd(q, k, v), attnjit.gqa_fwd(q, k, v, is_causal=True))


def test_gqa_fwd_out_and_aliases(rng):
    q, k, v = f16(rng, 1, 2, 2, 64), f16(rng, 1, 4, 2, 64), f16(rng, 1, 4, 2, 64)
    o = np.empty_like(q)
    lse = np.empty((1, 2, 2), np.float32)
    r = attnjit.gqa_fwd(q, k, v, is_causal=False, return_lse=True, out=(o, lse))
    assert r[0] is o and r[1] is lse
    a = attnjit.gqa_fwd(q, k, v, is_causal=False, window_size=(1, 0), softmax_scale=0.5)
    b = attnjit.gqa_fwd(q, k, v, is_causal=False, window_size_left=1, window_size_right=0, sm_scale=0.5)
    assert np.array_equal(a, b)


def test_gqa_varlen_fwd(rng):
    H, H_kv, D = 2, 1, 64
    q_lens, kv_lens = [2, 3], [4, 3]
    q, k, v = f16(rng, 5, H, D), f16(rng, 7, H_kv, D), f16(rng, 7, H_kv, D)
    cu_q, cu_kv = i32([0, 2, 5]), i32([0, 4, 7])
    o, lse = attnjit.gqa_varlen_fwd(q, k, v, cu_q, cu_kv, return_lse=True)
    assert o.shape == (5, H, D) and lse.shape == (5, H)
    for r in range(2):
        qs, ks = slice(cu_q[r], cu_q[r + 1]), slice(cu_kv[r], cu_kv[r + 1])
        for h in range(H):
            ref, ref_lse = attention(q[qs, h], k[ks, 0], v[ks, 0], causal=True)
            assert close(o[qs, h], ref, 2e-3)
            assert np.allclose(lse[qs, h], ref_lse, atol=1e-3)


def test_gqa_paged_fwd(rng):
    H, H_kv, D, PS = 2, 2, 64, 4
    kp, vp = f16(rng, 3, PS, H_kv, D), f16(rng, 3, PS, H_kv, D)
    q = f16(rng, 2, H, D)
    page_table = i32([[2, 0]])
    o = attnjit.gqa_paged_fwd(q, kp, vp, page_table, i32([6]), i32([0, 2]))
    assert o.shape == (2, H, D) and o.dtype == np.float16
    keys = np.concatenate([kp[2], kp[0]])[:6]
    vals = np.concatenate([vp[2], vp[0]])[:6]
    for h in range(H):
        ref, _ = attention(q[:, h], keys[:, h], vals[:, h], causal=True)
        assert close(o[:, h], ref, 2e-3)


def test_mha_decode_paged(rng):
    H, D = 2, 64
    q = f16(rng, 1, 1, H, D)
    k, v = f16(rng, 8, H, D), f16(rng, 8, H, D)
    o = attnjit.mha_decode_paged(q, k, v, i32([6]), i32([[1, 0]]), page_size=4)
    assert o.shape == q.shape
    rows = [4, 5, 6, 7, 0, 1]
    for h in range(H):
        ref, _ = attention(q[0, :, h], k[rows, h], v[rows, h])
        assert close(o[0, :, h], ref, 2e-3)


def test_gqa_prefill_paged_append(rng):
    H, H_kv, D = 2, 1, 64
    q, k_new, v_new = f16(rng, 2, H, D), f16(rng, 2, H_kv, D), f16(rng, 2, H_kv, D)
    kp, vp = f16(rng, 8, H_kv, D), f16(rng, 8, H_kv, D)
    old_k, old_v = kp[[4, 5, 6]].copy(), vp[[4, 5, 6]].copy()
    ones = np.ones(1, np.float32)
    o = attnjit.gqa_prefill_paged_append(q, k_new, v_new, kp, vp, ones, ones, i32([0, 2]), i32([3]),
                                         i32([[1, 0]]), page_size=4, max_seqlen_q=2)
    assert o.shape == q.shape
    assert np.array_equal(kp[7], k_new[0]) and np.array_equal(kp[0], k_new[1])
    assert np.array_equal(vp[7], v_new[0]) and np.array_equal(vp[0], v_new[1])
    keys = np.concatenate([old_k, k_new])
    vals = np.concatenate([old_v, v_new])
    for h in range(H):
        ref, _ = attention(q[:, h], keys[:, 0], vals[:, 0], causal=True)
        assert close(o[:, h], ref, 2e-3)


def test_fp8_lightning_indexer(rng):
    q = attnjit.bf16(to_bf16_bits(rng.standard_normal((1, 2, 4, 64))))
    k = attnjit.bf16(to_bf16_bits(rng.standard_normal((1, 5, 1, 64))))
    weights = rng.standard_normal((2, 4)).astype(np.float32)
    logits = attnjit.fp8_lightning_indexer(q, k, weights, i32([0, 1]), i32([3, 5]))
    assert logits.shape == (1, 2, 5, 1) and logits.dtype == np.float32
    assert np.isneginf(logits[0, 0, 3:, 0]).all() and np.isfinite(logits[0, 0, :3, 0]).all()
    assert np.isneginf(logits[0, 1, 0, 0]) and np.isfinite(logits[0, 1, 1:, 0]).all()


def test_topk_select(rng):
    score = rng.standard_normal((1, 2, 6, 1)).astype(np.float32)
    idx = attnjit.topk_select(score, topk=3)
    assert idx.shape == (1, 2, 1, 3) and idx.dtype == np.int32
    for s in range(2):
        assert set(idx[0, s, 0]) == set(np.argsort(-score[0, s, :, 0])[:3])
    starts, ends = i32([[2, 0]]), i32([[4, 1]])
    idx = attnjit.topk_select(score, starts, ends, topk=3)
    assert set(idx[0, 0, 0]) == {2, 3, -1} and list(idx[0, 0, 0]).count(-1) == 1
    assert sorted(idx[0, 1, 0]) == [-1, -1, 0]


def test_lightning_indexer(rng):
    T, H, D = 4, 2, 16
    q, k = f16(rng, 1, T, H, D), f16(rng, 1, T, D)
    w = f16(rng, 1, T, H)
    idx = attnjit.lightning_indexer(q, k, w, topk=2, deterministic=True)
    assert idx.shape == (1, T, 2) and idx.dtype == np.int32
    qf, kf, wf = (a.astype(np.float64) for a in (q, k, w))
    for t in range(T):
        score = (wf[0, t][:, None] * np.maximum(qf[0, t] @ kf[0].T, 0)).sum(0) / np.sqrt(H * D)
        assert sorted(idx[0, t]) == sorted(np.argsort(-score, kind="stable")[:2])
    assert attnjit.lightning_indexer(q, k, w, topk=0).shape == (1, T, 0)


def _bsa_inputs(rng, D=64, S_q=70, S_kv=130, dtype="fp16"):
    B, H = 1, 2
    if dtype == "fp16":
        q, k, v = f16(rng, B, H, S_q, D), f16(rng, B, H, S_kv, D), f16(rng, B, H, S_kv, D)
    n_q, n_kv = -(-S_q // 64), -(-S_kv // 64)
    index = np.tile(np.arange(n_kv, dtype=np.int32), (B, H, n_q, 1))
    return q, k, v, index


def test_bsa_fwd_dense_pattern(rng):
    q, k, v, index = _bsa_inputs(rng)
    o, lse = attnjit.bsa_fwd(q, k, v, index, return_lse=True)
    assert o.shape == q.shape and o.dtype == np.float16 and lse.shape == (1, 2, 70) and lse.dtype == np.float32
    for h in range(2):
        ref, ref_lse = attention(q[0, h], k[0, h], v[0, h])
        assert close(o[0, h], ref, 2e-3)
        assert np.allclose(lse[0, h], ref_lse, atol=1e-3)
    o2 = attnjit.bsa_fwd(q, k, v, index, kv_splits=2)
    assert close(o2, o, 2e-3)


def test_bsa_bwd_dense_pattern(rng):
    q, k, v, index = _bsa_inputs(rng, S_q=64, S_kv=64)
    o, lse = attnjit.bsa_fwd(q, k, v, index, return_lse=True)
    do = f16(rng, *q.shape)
    dq, dk, dv = attnjit.bsa_bwd(do, q, k, v, o, lse, index)
    assert dq.shape == q.shape and dk.shape == k.shape and dv.shape == v.shape and dq.dtype == np.float16
    scale = 1 / np.sqrt(64)
    for h in range(2):
        qh, kh, vh, oh, doh = (a[0, h].astype(np.float64) for a in (q, k, v, o, do))
        p = np.exp(qh @ kh.T * scale - lse[0, h][:, None])
        dp = doh @ vh.T
        ds = p * (dp - (oh * doh).sum(-1, keepdims=True))
        assert close(dv[0, h], p.T @ doh, 2e-2)
        assert close(dq[0, h], scale * ds @ kh, 2e-2)
        assert close(dk[0, h], scale * ds.T @ qh, 2e-2)


def test_bsa_fp8_fwd(rng):
    qf, kf, vf = (0.5 * rng.standard_normal((1, 1, 64, 128)) for _ in range(3))
    q, k, v = (attnjit.bf16(to_bf16_bits(a)) for a in (qf, kf, vf))
    o = attnjit.bsa_fp8_fwd(q, k, v, np.zeros((1, 1, 1, 1), np.int32))
    assert isinstance(o, attnjit.HostView) and o.dtype == "bf16" and o.shape == (1, 1, 64, 128)
    ref, _ = attention(from_bf16_bits(q.array)[0, 0], from_bf16_bits(k.array)[0, 0], from_bf16_bits(v.array)[0, 0],
                       scale=1 / np.sqrt(128))
    assert close(from_bf16_bits(o.array)[0, 0], ref, 8e-2)


def test_gqa_bwd(rng):
    B, S, H, H_kv, D = 1, 5, 4, 2, 64
    q, k, v = f16(rng, B, S, H, D), f16(rng, B, S, H_kv, D), f16(rng, B, S, H_kv, D)
    o, lse = attnjit.gqa_fwd(q, k, v, return_lse=True)
    do = f16(rng, B, S, H, D)
    dq, dk, dv = attnjit.gqa_bwd(q, k, v, o, do, lse)
    assert dq.shape == q.shape and dk.shape == k.shape and dv.shape == v.shape and dq.dtype == np.float16
    scale = 1 / np.sqrt(D)
    mask = np.tril(np.ones((S, S), bool))  # the default is causal
    ref_dk, ref_dv = np.zeros((S, H_kv, D)), np.zeros((S, H_kv, D))
    for h in range(H):
        qh, kh, vh, oh, doh = (a[0, :, i].astype(np.float64) for a, i in
                               ((q, h), (k, h // 2), (v, h // 2), (o, h), (do, h)))
        p = np.where(mask, np.exp(qh @ kh.T * scale - lse[0, h][:, None]), 0.0)
        ds = p * (doh @ vh.T - (oh * doh).sum(-1, keepdims=True))
        assert close(dq[0, :, h], scale * ds @ kh, 2e-2)
        ref_dk[:, h // 2] += scale * ds.T @ qh
        ref_dv[:, h // 2] += p.T @ doh
    assert close(dk[0], ref_dk, 2e-2) and close(dv[0], ref_dv, 2e-2)


def _softmax_rows(logits, values):
    w = np.exp(logits - logits.max())
    return (w @ values) / w.sum()


def test_mla_decode(rng):
    B, H, H_kv, D, N = 2, 4, 2, 128, 5
    q, q_pe = f16(rng, B, H, D), f16(rng, B, H, 64)
    k, k_pe = f16(rng, B, N, H_kv, D), f16(rng, B, N, H_kv, 64)
    o = attnjit.mla_decode(q, q_pe, k, k_pe)
    assert o.shape == (B, H, D) and o.dtype == np.float16
    scale = 1 / np.sqrt(D + 64)
    for b in range(B):
        for h in range(H):
            r = h // (H // H_kv)
            kb, kpb = k[b, :, r].astype(np.float64), k_pe[b, :, r].astype(np.float64)
            lg = (kb @ q[b, h].astype(np.float64) + kpb @ q_pe[b, h].astype(np.float64)) * scale
            assert close(o[b, h], _softmax_rows(lg, kb), 5e-3)
    # Extensions: per-request lengths, S_q = 2 query tokens (causal to the end of the cache), a paged cache.
    q4, qpe4 = f16(rng, B, 2, H, D), f16(rng, B, 2, H, 64)
    lens = i32([5, 1])
    o4 = attnjit.mla_decode(q4, qpe4, k, k_pe, lens)
    assert o4.shape == (B, 2, H, D)
    assert (o4[1, 0] == 0).all()  # request 1 holds one position: its first token sees nothing
    pages = np.zeros((4, 16, H_kv, D), np.float16)
    pages_pe = np.zeros((4, 16, H_kv, 64), np.float16)
    pages[2, :N], pages_pe[2, :N] = k[0], k_pe[0]
    pages[0, :N], pages_pe[0, :N] = k[1], k_pe[1]
    op = attnjit.mla_decode(q4, qpe4, pages, pages_pe, lens, i32([[2], [0]]))
    assert np.array_equal(op, o4)


@pytest.mark.parametrize("is_causal", [True, False])
def test_dsa_decode(rng, is_causal):
    B, S, H, H_kv, S_kv, K, D, tail = 1, 3, 4, 1, 6, 4, 64, 16
    q, kv = f16(rng, B, S, H, D + tail), f16(rng, B, S_kv, H_kv, D + tail)
    idx = i32([[[[0, 5, -1, 2]], [[1, 1, 6, 3]], [[4, 0, 2, -1]]]])
    o = attnjit.dsa_decode(q, kv, idx, dim_tail=tail, stride_kv=2, q_start_index_s=1, is_causal=is_causal)
    assert o.shape == (B, S, H, D) and o.dtype == np.float16
    for s in range(S):
        xs = [x for x in idx[0, s, 0] if 0 <= x < S_kv and (not is_causal or (x + 1) * 2 <= 1 + s + 1)]
        for h in range(H):
            if not xs:
                assert (o[0, s, h] == 0).all()
                continue
            keys = kv[0, xs, 0].astype(np.float64)
            lg = keys @ q[0, s, h].astype(np.float64) / np.sqrt(D + tail)
            assert close(o[0, s, h], _softmax_rows(lg, keys[:, :D]), 5e-3)


def _nsa_meta(lens, bs=None):
    off = np.concatenate([[0], np.cumsum(lens)]).astype(np.int32)
    tok = i32([(n, p) for n, ln in enumerate(lens) for p in range(ln)]).reshape(-1, 2)
    co = None
    if bs is not None:
        co = np.concatenate([[0], np.cumsum([(ln + bs - 1) // bs for ln in lens])]).astype(np.int32)
    return off, tok, co


def test_nsa_compressed_fwd(rng):
    lens, bs, H, H_kv, D = [5, 0, 3], 2, 16, 1, 64
    off, tok, co = _nsa_meta(lens, bs)
    T, C = int(off[-1]), int(co[-1])
    q, kc, vc = f16(rng, T, H, D), f16(rng, C, H_kv, D), f16(rng, C, H_kv, D)
    o, lse = attnjit.nsa_compressed_fwd(q, kc, vc, off, co, tok, scale=0.125, bs=bs, return_lse=True)
    assert o.shape == (T, H, D) and o.dtype == np.float16 and lse.shape == (T, H) and lse.dtype == np.float32
    for t in range(T):
        n, p = tok[t]
        nc = (p + 1) // bs
        for h in range(H):
            if nc == 0:  # no complete chunk: o = 0, lse = -inf
                assert (o[t, h] == 0).all() and lse[t, h] == -np.inf
                continue
            rows = co[n] + np.arange(nc)
            z = 0.125 * (kc[rows, 0].astype(np.float64) @ q[t, h].astype(np.float64))
            w = np.exp(z - z.max())
            assert close(o[t, h], (w @ vc[rows, 0].astype(np.float64)) / w.sum(), 2e-3)
            assert np.isclose(lse[t, h], z.max() + np.log(w.sum()), atol=1e-3)


def test_nsa_topk(rng):
    lens, bs, H, H_kv, D, S = [6, 2], 1, 16, 1, 64, 4
    off, tok, co = _nsa_meta(lens, bs)
    T, C = int(off[-1]), int(co[-1])
    q, kc = f16(rng, T, H, D), f16(rng, C, H_kv, D)
    idx = attnjit.nsa_topk(q, kc, off, co, tok, scale=0.125, selected_block_num=S, bs=bs)
    assert idx.shape == (T, H_kv, S) and idx.dtype == np.int32
    for t in range(T):
        n, p = tok[t]
        cur = p // bs
        m = min(S, cur + 1)
        row = idx[t, 0]
        assert (row[m:] == -1).all() and len(set(row[:m].tolist())) == m
        assert all(0 <= c <= cur for c in row[:m])
        assert {0, cur} <= set(row[:m].tolist())  # forced chunks (m >= 2 once cur >= 1)


def test_nsa_selected_fwd(rng):
    lens, bs, H, H_kv, D, SEL = [7, 3], 2, 16, 1, 64, 3
    off, tok, _ = _nsa_meta(lens)
    T = int(off[-1])
    q, k, v = f16(rng, T, H, D), f16(rng, T, H_kv, D), f16(rng, T, H_kv, D)
    bi = np.tile(i32([0, -1, 3]), (T, H_kv, 1))
    bc = np.full((T, H_kv), 3, np.int32)
    bc[0] = 1
    o = attnjit.nsa_selected_fwd(q, k, v, bi, bc, off, tok, is_causal=True, scale=0.125, block_size=bs)
    assert o.shape == (T, H, D) and o.dtype == np.float16
    for t in range(T):
        n, p = tok[t]
        keys = [x for u in range(bc[t, 0]) if bi[t, 0, u] >= 0 and bi[t, 0, u] * bs <= p
                for x in range(bi[t, 0, u] * bs, min((bi[t, 0, u] + 1) * bs, p + 1))]
        rows = off[n] + np.asarray(keys)
        for h in range(H):
            z = 0.125 * (k[rows, 0].astype(np.float64) @ q[t, h].astype(np.float64))
            w = np.exp(z - z.max())
            assert close(o[t, h], (w @ v[rows, 0].astype(np.float64)) / w.sum(), 2e-3)


def test_every_op_is_covered():
    tested = {n[5:] for n in globals() if n.startswith("test_")}
    for op in attnjit.list_ops():
        assert any(t.startswith(op) for t in tested), f"no reference test for {op}"
