"""The whole Native Sparse Attention forward through the package on the CPU reference: nsa_compressed_fwd,
nsa_topk -> nsa_selected_fwd (block_size = bs) and the sliding window (gqa_varlen_fwd, causal,
window_size_left = W - 1), mixed by per-(token, head) gates; each branch, the block selection and the gated
sum checked against a direct float64 NSA written here. docs/ops/nsa_forward.md describes the chain."""
import numpy as np
import pytest

import attnjit
from conftest import from_bf16_bits, to_bf16_bits


def _pack(lens, bs):
    offsets = np.concatenate([[0], np.cumsum(lens)]).astype(np.int32)
    chunk_offsets = np.concatenate([[0], np.cumsum([-(-n // bs) for n in lens])]).astype(np.int32)
    tok = np.array([(n, p) for n, L in enumerate(lens) for p in range(L)], np.int32).reshape(-1, 2)
    return offsets, chunk_offsets, tok


def _attend(q, k, v, scale):
    """q [G, D], k, v [K, D] -> [G, D] in float64; zeros without keys."""
    if k.shape[0] == 0:
        return np.zeros_like(q, dtype=np.float64)
    s = q.astype(np.float64) @ k.astype(np.float64).T * scale
    p = np.exp(s - s.max(-1, keepdims=True))
    return (p / p.sum(-1, keepdims=True)) @ v.astype(np.float64)


def _top_s(qs, k_rows, p, bs, S):
    """nsa_topk's selection for one (token, KV head) from qs = q * scale rounded to the input dtype [G, D]:
    importance over chunks 0 .. p // bs, descending, ties by ascending id."""
    cur, complete = p // bs, (p + 1) // bs
    dots = qs.astype(np.float64) @ k_rows[:cur + 1].astype(np.float64).T  # [G, cur + 1]
    if complete:
        m = dots[:, :complete].max(-1, keepdims=True)
        lse = m + np.log(np.exp(dots[:, :complete] - m).sum(-1, keepdims=True))
    else:
        lse = np.zeros((dots.shape[0], 1))
    w = np.exp(dots - lse)
    c = np.arange(cur + 1)
    w[:, (c == 0) | (c == cur - 1) | (c == cur)] = 1.0
    imp = w.sum(0)
    order = sorted(range(cur + 1), key=lambda j: (-imp[j], j))
    return set(order[:min(S, cur + 1)])


@pytest.mark.parametrize("lens,H,H_kv,D,bs,S,W,dtype", [
    ([13, 3, 22], 16, 1, 64, 4, 3, 5, "fp16"),
    ([9, 0, 17, 2], 64, 2, 128, 4, 2, 7, "bf16"),  # G 32; S 2 below the three forced chunks
    ([30, 7], 32, 2, 128, 5, 4, 6, "fp16"),
])
def test_nsa_forward_chain(rng, lens, H, H_kv, D, bs, S, W, dtype):
    offsets, chunk_offsets, tok = _pack(lens, bs)
    T, C, G, scale = int(offsets[-1]), int(chunk_offsets[-1]), H // H_kv, 1 / np.sqrt(D)
    if dtype == "fp16":
        mk = lambda *sh: rng.standard_normal(sh).astype(np.float16)  # noqa: E731
        wrap, vals = (lambda a: a), (lambda a: a.astype(np.float64))
    else:
        mk = lambda *sh: to_bf16_bits(rng.standard_normal(sh))  # noqa: E731
        wrap, vals = attnjit.bf16, (lambda a: from_bf16_bits(a).astype(np.float64))
    q, k, v, k_cmp, v_cmp = mk(T, H, D), mk(T, H_kv, D), mk(T, H_kv, D), mk(C, H_kv, D), mk(C, H_kv, D)
    g_cmp, g_sel, g_win = (rng.uniform(0, 1, (T, H)) for _ in range(3))

    o_cmp = attnjit.nsa_compressed_fwd(wrap(q), wrap(k_cmp), wrap(v_cmp), offsets, chunk_offsets, tok, scale=scale,
                                       bs=bs)
    blocks = attnjit.nsa_topk(wrap(q), wrap(k_cmp), offsets, chunk_offsets, tok, scale=scale, selected_block_num=S,
                              bs=bs)
    assert blocks.shape == (T, H_kv, S) and blocks.dtype == np.int32
    counts = np.full((T, H_kv), S, np.int32)
    o_sel = attnjit.nsa_selected_fwd(wrap(q), wrap(k), wrap(v), blocks, counts, offsets, tok, is_causal=True,
                                     scale=scale, block_size=bs)
    o_win = attnjit.gqa_varlen_fwd(wrap(q), wrap(k), wrap(v), offsets, offsets, is_causal=True,
                                   window_size_left=W - 1, sm_scale=scale)
    branches = [vals(getattr(o, "array", o)) for o in (o_cmp, o_sel, o_win)]
    o = g_cmp[..., None] * branches[0] + g_sel[..., None] * branches[1] + g_win[..., None] * branches[2]

    qf, kf, vf, kcf, vcf = (vals(a) for a in (q, k, v, k_cmp, v_cmp))
    prod = qf.astype(np.float32) * np.float32(scale)  # nsa_topk step 1: fp32 product rounded to the dtype
    qs = prod.astype(np.float16) if dtype == "fp16" else from_bf16_bits(to_bf16_bits(prod))
    exp = [np.zeros((T, H, D)) for _ in range(3)]
    padded = 0
    for t in range(T):
        n, p = tok[t]
        base, c0, cur = offsets[n], chunk_offsets[n], p // bs
        for r in range(H_kv):
            heads = slice(r * G, (r + 1) * G)
            row = blocks[t, r]
            m = min(S, cur + 1)
            assert (row[m:] == -1).all()
            padded += m < S
            want = _top_s(qs[t, heads], kcf[c0:, r], p, bs, S)
            assert set(row[:m].tolist()) == want, (t, r)
            chunks = kcf[c0:c0 + (p + 1) // bs, r], vcf[c0:c0 + (p + 1) // bs, r]
            sel = [base + x for b in sorted(want) for x in range(b * bs, min((b + 1) * bs, p + 1))]
            win = list(range(base + max(0, p - W + 1), base + p + 1))
            exp[0][t, heads] = _attend(qf[t, heads], *chunks, scale)
            exp[1][t, heads] = _attend(qf[t, heads], kf[sel, r], vf[sel, r], scale)
            exp[2][t, heads] = _attend(qf[t, heads], kf[win, r], vf[win, r], scale)
        if (p + 1) // bs == 0:
            assert (branches[0][t] == 0).all()  # no complete chunk yet
    assert padded > 0
    tol = 5e-3 if dtype == "fp16" else 1e-2
    rel = lambda a, b: np.linalg.norm(a - b) / np.linalg.norm(b)  # noqa: E731
    for got, want in zip(branches, exp):
        assert rel(got, want) <= tol
    assert rel(o, g_cmp[..., None] * exp[0] + g_sel[..., None] * exp[1] + g_win[..., None] * exp[2]) <= tol
