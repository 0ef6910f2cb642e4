"""The DeepSeek sparse-attention decode chain through the package on the CPU reference: lightning_indexer
(or fp8_lightning_indexer + topk_select) selects keys, dsa_decode attends over them; the output is
checked against softmax attention over exactly the selected keys in float64. The index conversion is the
one docs/ops/dsa_decode.md ("From the indexer to dsa_decode") describes."""
import numpy as np
import pytest

import attnjit
from conftest import from_bf16_bits, to_bf16_bits


def _expected(q, kv, keys, D, scale):
    """q [H, Dt], kv [S_kv, Dt] of one KV head, keys: the selected rows (repeats count twice)."""
    if not keys:
        return np.zeros((q.shape[0], D))
    k = kv[keys].astype(np.float64)
    lg = q.astype(np.float64) @ k.T * scale
    p = np.exp(lg - lg.max(-1, keepdims=True))
    return (p / p.sum(-1, keepdims=True)) @ k[:, :D]


def _rel(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-12)


@pytest.mark.parametrize("T,S,topk,ratio,indexer_causal", [(9, 6, 6, 1, True), (16, 13, 3, 4, True),
                                                           (7, 7, 8, 1, False)])
def test_lightning_indexer_to_dsa_decode(rng, T, S, topk, ratio, indexer_causal):
    B, H_i, D_i, H, H_kv, D, tail = 2, 4, 16, 32, 2, 64, 16
    S_k, q0, Dt = T // ratio, T - S, D + tail
    f16 = lambda *sh: rng.standard_normal(sh).astype(np.float16)  # noqa: E731
    li = attnjit.lightning_indexer(f16(B, T, H_i, D_i), f16(B, S_k, D_i), f16(B, T, H_i), topk=topk,
                                   causal=indexer_causal, compress_ratio=ratio)
    assert li.shape == (B, T, topk) and li.dtype == np.int32
    # The conversion: rows from q_start_index_s, the list repeated for every KV head, values unchanged.
    idx = np.ascontiguousarray(np.broadcast_to(li[:, q0:, None, :], (B, S, H_kv, topk)))
    assert (idx == -1).any()  # topk above some row's visible count
    q, kv = f16(B, S, H, Dt), f16(B, S_k, H_kv, Dt)
    o = attnjit.dsa_decode(q, kv, idx, dim_tail=tail, stride_kv=ratio, q_start_index_s=q0)
    assert o.shape == (B, S, H, D) and o.dtype == np.float16
    g, scale = H // H_kv, 1 / np.sqrt(Dt)
    for b in range(B):
        for s in range(S):
            pos = q0 + s
            keys = [int(x) for x in li[b, pos] if 0 <= x < S_k and (x + 1) * ratio <= pos + 1]
            for r in range(H_kv):
                ref = _expected(q[b, s, r * g:(r + 1) * g], kv[b, :, r], keys, D, scale)
                if not keys:
                    assert (o[b, s, r * g:(r + 1) * g] == 0).all()
                else:
                    assert _rel(o[b, s, r * g:(r + 1) * g], ref) <= 5e-3


def test_fp8_indexer_topk_select_to_dsa_decode(rng):
    B, S, q0, stride, G, H, topk, D, tail = 2, 5, 4, 2, 2, 32, 3, 64, 64
    S_kv, H_i, Dt = (q0 + S) // stride, 4 * G, D + tail
    bf = lambda *sh: attnjit.bf16(to_bf16_bits(rng.standard_normal(sh)))  # noqa: E731
    ks = np.zeros(S, np.int32)
    ke = np.array([(q0 + s + 1) // stride for s in range(S)], np.int32)
    logits = attnjit.fp8_lightning_indexer(bf(B, S, H_i, 64), bf(B, S_kv, G, 64),
                                           rng.standard_normal((S, H_i)).astype(np.float32), ks, ke)
    sel = attnjit.topk_select(logits, np.tile(ks, (B, 1)), np.tile(ke, (B, 1)), topk=topk)
    assert sel.shape == (B, S, G, topk) and (sel == -1).any()
    # No conversion: G is dsa_decode's H_kv and the positions are absolute.
    qb, kvb = to_bf16_bits(rng.standard_normal((B, S, H, Dt))), to_bf16_bits(rng.standard_normal((B, S_kv, G, Dt)))
    o = attnjit.dsa_decode(attnjit.bf16(qb), attnjit.bf16(kvb), sel, dim_tail=tail, stride_kv=stride,
                           q_start_index_s=q0)
    o = from_bf16_bits(o.array)
    q, kv = from_bf16_bits(qb), from_bf16_bits(kvb)
    g = H // G
    for b in range(B):
        for s in range(S):
            for r in range(G):
                keys = [int(x) for x in sel[b, s, r] if x != -1]
                assert all(ks[s] <= x < ke[s] for x in keys)
                assert len(keys) == min(topk, ke[s] - ks[s])
                ref = _expected(q[b, s, r * g:(r + 1) * g], kv[b, :, r], keys, D, 1 / np.sqrt(Dt))
                assert _rel(o[b, s, r * g:(r + 1) * g], ref) <= 1e-2
