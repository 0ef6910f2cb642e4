#!/usr/bin/python3
"""Golden test cases for bsa_bwd (SPEC.md §2.5, metadata of §2.4), computed independently of the C++
project (numpy, float64, nothing imported from the repository's C++ side).

Writes tests/cases/bsa_bwd_golden.json in the `attnjit test` format (tools/cli/test_case.hpp).

Per case: random q, k, v, do (exact bit patterns of their dtype, whole storage incl. stride gaps),
metadata (q2k_block_index with a garbage suffix past each row's count, which must never be read;
q2k_block_nums with zero counts; block_sizes of rank 1, 2 or 3 with short blocks). The forward runs
here in float64 (SPEC.md §2.4: visible set K_i = union of the active blocks [kb*bs, kb*bs + len(kb)),
len(kb) = min(bsz(kb), S_kv - kb*bs), a block listed twice counted once; row softmax of §1.6), giving
o (rounded once to the input dtype: float64 -> fp32 -> fp16/bf16, RNE) and lse (fp32, natural log,
-inf for empty rows): both become exact inputs of the case. The backward then runs in float64 from
those exact inputs:
  P_ij = exp(scale <q_i, k_j> - lse_i) for j in K_i (0 when lse_i = -inf), Delta_i = <o_i, do_i>,
  dP_ij = <do_i, v_j>, dS_ij = P_ij (dP_ij - Delta_i), dq_i = scale sum_j dS_ij k_j,
  dk_j = scale sum dS_ij q_i and dv_j = sum P_ij do_i over every query head of the KV head's group.
Expected outputs: the bits of dq, dk, dv rounded once to the dtype; compared with rel_l2 at 2e-2
(SPEC.md §2.5), and rows the contract makes zero (empty query rows in dq, unselected keys in dk and
dv) must be exact zeros. Outputs are poisoned.

Usage: /usr/bin/python3 tests/gen/bsa_bwd_golden.py [--out-dir DIR]
"""
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from casegen_common import CaseList  # noqa: E402
from casegen_numeric import (RandomTensor, bits_spec, from_bits, golden_main, out_bits, poison,  # noqa: E402
                             softmax_rows, values_spec)

SEED = 20261201
GRAD_TOL = 2e-2


class Tensor(RandomTensor):
    """A float input in bhsd or bshd storage: random bits, and the logical values as [B, H, S, D] (bhsd)."""

    def __init__(self, rng, dtype, layout, B, H, S, D, strides=None, values=None):
        super().__init__(rng, dtype, [B, H, S, D] if layout == "bhsd" else [B, S, H, D], strides, values=values)
        self.bhsd = self.val if layout == "bhsd" else self.val.transpose(0, 2, 1, 3)


def from_logical(dtype, layout, x64):
    """Bits (contiguous storage of the layout) of a logical [B, H, S, D] float64 array rounded once."""
    return out_bits(dtype, x64 if layout == "bhsd" else x64.transpose(0, 2, 1, 3))


def visible(md, b, h, m, bs, S_kv):
    """Sorted unique visible keys of query block m of (b, h)."""
    n = md["nums"][b, h, m] if md["nums"] is not None else md["fixed"]
    keys, seen = [], set()
    for u in range(n):
        kb = int(md["index"][b, h, m, u])
        if kb in seen:
            continue
        seen.add(kb)
        bsz = bs
        if md["sizes"] is not None:
            s = md["sizes"]
            bsz = int(s[kb] if s.ndim == 1 else s[b, kb] if s.ndim == 2 else s[b, h, kb])
        ln = min(bsz, S_kv - kb * bs)
        keys.extend(range(kb * bs, kb * bs + max(ln, 0)))
    return np.array(sorted(keys), dtype=np.int64)


def build_case(rng, name, seed, *, dtype, layout, bs, B, H, H_kv, S_q, S_kv, D, K_max, counts="fixed",
               fixed=None, sizes_rank=0, scale=None, validate=False, q_strides=None, k_strides=None, extra_config=None):
    g = H // H_kv
    N_q, N_kv = -(-S_q // bs), -(-S_kv // bs)
    alpha = scale if scale is not None else 1.0 / math.sqrt(D)
    q = Tensor(rng, dtype, layout, B, H, S_q, D, strides=q_strides)
    k = Tensor(rng, dtype, layout, B, H_kv, S_kv, D, strides=k_strides)
    v = Tensor(rng, dtype, layout, B, H_kv, S_kv, D)
    do = Tensor(rng, dtype, layout, B, H, S_q, D)
    # metadata: distinct indices per row, then a garbage suffix past the row's count
    index = np.zeros((B, H, N_q, K_max), dtype=np.int64)
    nums = None
    if counts == "variable":
        nums = rng.integers(0, K_max + 1, size=(B, H, N_q))
        nums.reshape(-1)[0] = 0  # at least one empty row block
        nums.reshape(-1)[-1] = K_max
    n_of = (lambda b, h, m: int(nums[b, h, m])) if nums is not None else (lambda b, h, m: fixed or K_max)
    for b in range(B):
        for h in range(H):
            for m in range(N_q):
                n = n_of(b, h, m)
                sel = rng.permutation(N_kv)[:n]
                index[b, h, m, :n] = sel
                index[b, h, m, n:] = rng.choice([-5, N_kv + 3, 2 ** 30], size=K_max - n)
    sizes = None
    if sizes_rank:
        shape = [N_kv] if sizes_rank == 1 else [B, N_kv] if sizes_rank == 2 else [B, H, N_kv]
        # NOTE: >= 2 keys per block: a row whose only visible key is one key has dS = 0 exactly in the
        # reference (o = v_j) but rounding noise in a kernel, which the exact-zero rule would reject.
        sizes = rng.integers(2, bs + 1, size=shape)
        full = rng.random(size=shape) < 0.4
        sizes = np.where(full, bs, sizes)
    md = {"index": index, "nums": nums, "fixed": fixed or K_max, "sizes": sizes}

    Q, K, V, dO = q.bhsd, k.bhsd, v.bhsd, do.bhsd
    o64 = np.zeros((B, H, S_q, D))
    lse64 = np.full((B, H, S_q), -math.inf)
    vis = {}
    for b in range(B):
        for h in range(H):
            r = h // g
            for m in range(N_q):
                keys = visible(md, b, h, m, bs, S_kv)
                vis[(b, h, m)] = keys
                if keys.size == 0:
                    continue
                rows = np.arange(m * bs, min(S_q, (m + 1) * bs))
                o64[b, h, rows], lse64[b, h, rows] = softmax_rows(alpha * (Q[b, h, rows] @ K[b, r, keys].T),
                                                                  V[b, r, keys])
    o_bits = from_logical(dtype, layout, o64)
    o_val = from_bits(dtype, np.array(o_bits, dtype=np.uint16)).reshape(o64.shape if layout == "bhsd" else
                                                                          (B, S_q, H, D))
    O = o_val if layout == "bhsd" else o_val.transpose(0, 2, 1, 3)
    lse32 = lse64.astype(np.float32)
    L = lse32.astype(np.float64)

    dq = np.zeros((B, H, S_q, D))
    dk = np.zeros((B, H_kv, S_kv, D))
    dv = np.zeros((B, H_kv, S_kv, D))
    for b in range(B):
        for h in range(H):
            r = h // g
            for m in range(N_q):
                keys = vis[(b, h, m)]
                if keys.size == 0:
                    continue
                rows = np.arange(m * bs, min(S_q, (m + 1) * bs))
                lr = L[b, h, rows][:, None]
                p = np.where(np.isneginf(lr), 0.0, np.exp(alpha * (Q[b, h, rows] @ K[b, r, keys].T) - lr))
                delta = np.sum(O[b, h, rows] * dO[b, h, rows], axis=1, keepdims=True)
                dp = dO[b, h, rows] @ V[b, r, keys].T
                ds = p * (dp - delta)
                dq[b, h, rows] += alpha * (ds @ K[b, r, keys])
                dk[b, r, keys] += alpha * (ds.T @ Q[b, h, rows])
                dv[b, r, keys] += p.T @ dO[b, h, rows]

    q_shape = q.shape
    kv_shape = k.shape
    tensors = {"do": do.spec(), "q": q.spec(), "k": k.spec(), "v": v.spec(),
               "o": bits_spec(dtype, q_shape, o_bits),
               "lse": values_spec("fp32", [B, H, S_q], lse32.reshape(-1)),
               "q2k_block_index": values_spec("int32", [B, H, N_q, K_max], index.reshape(-1))}
    if nums is not None:
        tensors["q2k_block_nums"] = values_spec("int32", [B, H, N_q], nums.reshape(-1))
    if sizes is not None:
        tensors["block_sizes"] = values_spec("int32", sizes.shape, sizes.reshape(-1))
    tensors["dq"] = poison(q_shape, dtype)
    tensors["dk"] = poison(kv_shape, dtype)
    tensors["dv"] = poison(kv_shape, dtype)
    config = {"layout": layout, "sparse_block_size": bs}
    if fixed is not None and counts == "fixed":
        config["block_sparse_num"] = fixed
    if scale is not None:
        config["scale"] = scale
    if validate:
        config["validate_inputs"] = True
    config.update(extra_config or {})
    golden = {"dq": {"bits": from_logical(dtype, layout, dq)},
              "dk": {"bits": from_logical(dtype, layout, dk)},
              "dv": {"bits": from_logical(dtype, layout, dv)}}
    compare = {n: {"mode": "rel_l2", "tol": GRAD_TOL} for n in ("dq", "dk", "dv")}
    n_empty = sum(1 for key in vis.values() if key.size == 0)
    unselected = int(np.sum(np.all(dk == 0, axis=3)))
    case = {"name": name, "op": "bsa_bwd", "config": config, "seed": seed, "tensors": tensors,
            "compare": compare, "golden": golden}
    return case, f"{n_empty} empty row blocks, {unselected} unselected key rows"


def cases(rng):
    out = CaseList(rng, build_case, "bsa-bwd-golden/", 5000)
    add = out.add

    add("bf16/bhsd/bs64/d64/h2kv2/sq70-skv150/fixed2/bucket4", dtype="bf16", layout="bhsd", bs=64, B=1, H=2, H_kv=2,
        S_q=70, S_kv=150, D=64, K_max=2, extra_config={"bucket_size_blocks": 4})
    add("fp16/bshd/bs64/d64/h4kv2/sq100-skv190/var-k3", dtype="fp16", layout="bshd", bs=64, B=1, H=4, H_kv=2,
        S_q=100, S_kv=190, D=64, K_max=3, counts="variable", validate=True)
    add("bf16/bhsd/bs128/d128/h2kv1-mqa/sq130-skv200/var-k2/sizes-rank3", dtype="bf16", layout="bhsd", bs=128, B=1,
        H=2, H_kv=1, S_q=130, S_kv=200, D=128, K_max=2, counts="variable", sizes_rank=3)
    add("fp16/bhsd/bs64/d128/h2kv1/sq64-skv150/fixed2-of-k3/sizes-rank1", dtype="fp16", layout="bhsd", bs=64, B=1,
        H=2, H_kv=1, S_q=64, S_kv=150, D=128, K_max=3, fixed=2, sizes_rank=1)
    add("bf16/bshd/bs128/d64/b2/h2kv1/sq129-skv200/var-k2/sizes-rank2/scale0.2", dtype="bf16", layout="bshd", bs=128,
        B=2, H=2, H_kv=1, S_q=129, S_kv=200, D=64, K_max=2, counts="variable", sizes_rank=2, scale=0.2)
    add("fp16/bhsd/bs64/d64/h1kv1/sq1-skv3", dtype="fp16", layout="bhsd", bs=64, B=1, H=1, H_kv=1, S_q=1, S_kv=3,
        D=64, K_max=1)
    add("bf16/bhsd/bs64/d64/h2kv1/sq40-skv200/fixed3/q-k-strided", dtype="bf16", layout="bhsd", bs=64, B=1, H=2,
        H_kv=1, S_q=40, S_kv=200, D=64, K_max=3, q_strides=[2 * 48 * 80 + 16, 48 * 80, 80, 1],
        k_strides=[200 * 72 + 8, 200 * 72, 72, 1])
    return out


def main():
    return golden_main(__doc__, SEED, [("bsa_bwd_golden.json", cases)])


if __name__ == "__main__":
    sys.exit(main())
