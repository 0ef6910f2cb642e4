"""The memory ceiling of nsa_selected_fwd's traffic: a triton kernel that does nothing but read, per
(token, KV head), the same 16 selected K and V blocks that nsa_selected_fwd reads (64 x 128 bf16 each,
16 KB), and sums them. Its time is what the gather alone costs on this GPU at that access pattern, with no
MMA and no softmax; the NSA kernel cannot beat it without sharing blocks between (token, KV head) pairs.

    python3 tools/bench/nsa_gather_probe.py [--T 65536] [--json OUT]

Reports, per case: ms, the bytes read (K and V of every selected block, counted once per pair, whole
blocks), GB/s, and the TFLOP/s nsa_selected_fwd would reach at that time on the same indices (4 D per
visible (query head, key) pair, group 16). Block indices: the forced blocks 0, cur - 1, cur and the rest
drawn uniformly from [0, cur] without repeats, as nsa_topk's output on random inputs looks. Needs torch and
triton with a GPU (not run in CI).
"""
from __future__ import annotations

import argparse
import json
import sys

import torch
import triton
import triton.language as tl
from triton.testing import do_bench


@triton.jit
def _gather_sum(k_ptr, v_ptr, idx_ptr, out_ptr, H_kv, stride_t, S: tl.constexpr, BS: tl.constexpr,
                D: tl.constexpr):
    pid = tl.program_id(0)
    r = pid % H_kv
    rows = tl.arange(0, BS)
    cols = tl.arange(0, D)
    acc = tl.zeros([BS, D], dtype=tl.float32)
    for s in range(S):
        b = tl.load(idx_ptr + pid * S + s)
        offs = (b * BS + rows)[:, None] * stride_t + r * D + cols[None, :]
        acc += tl.load(k_ptr + offs).to(tl.float32) + tl.load(v_ptr + offs).to(tl.float32)
    tl.store(out_ptr + pid, tl.sum(acc))


def block_indices(T, H_kv, S, bs, gen):
    """[T, H_kv, S] int32: forced 0, cur - 1, cur, then distinct uniform blocks of [0, cur] (cur >= S - 1
    for every token of the benchmarked region; earlier tokens repeat blocks, which only reads them twice)."""
    cur = torch.arange(T, device="cuda") // bs
    rnd = torch.rand(T, H_kv, S, device="cuda", generator=gen)
    idx = (rnd * (cur[:, None, None] + 1).float()).long().clamp_max(cur[:, None, None])
    idx[:, :, 0] = 0
    idx[:, :, 1] = (cur - 1).clamp_min(0)[:, None]
    idx[:, :, 2] = cur[:, None]
    return idx.int().contiguous()


def run(T, H_kv=4, G=16, D=128, bs=64, S=16):
    gen = torch.Generator(device="cuda").manual_seed(7)
    k = torch.randn(T, H_kv, D, device="cuda", dtype=torch.bfloat16, generator=gen)
    v = torch.randn(T, H_kv, D, device="cuda", dtype=torch.bfloat16, generator=gen)
    idx = block_indices(T, H_kv, S, bs, gen)
    out = torch.empty(T * H_kv, device="cuda", dtype=torch.float32)
    fn = lambda: _gather_sum[(T * H_kv,)](k, v, idx, out, H_kv, H_kv * D, S=S, BS=bs, D=D)  # noqa: E731
    fn()
    torch.cuda.synchronize()
    ms = do_bench(fn, warmup=100, rep=500)
    nbytes = T * H_kv * S * bs * D * 2 * 2
    # Visible pairs as nsa_selected_fwd counts them (causal; the current block truncated at the token).
    p = torch.arange(T, device="cuda")[:, None, None]
    b = idx.long()
    keys = (torch.minimum((b + 1) * bs, p + 1) - b * bs).clamp_(min=0)
    flops = 4 * D * int(keys.sum().item()) * G
    return {"T": T, "H_kv": H_kv, "G": G, "D": D, "bs": bs, "S": S, "ms": ms, "bytes": nbytes,
            "gbs": nbytes / ms / 1e6, "selected_tflops_at_this_time": flops / ms / 1e9}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--T", type=int, nargs="*", default=[8192, 16384, 65536])
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    rows = [run(T) for T in a.T]
    print(f"{'T':>6} {'ms':>8} {'GB/s':>8} {'selected TFLOP/s at this time':>30}")
    for r in rows:
        print(f"{r['T']:>6} {r['ms']:8.3f} {r['gbs']:8.0f} {r['selected_tflops_at_this_time']:30.1f}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
