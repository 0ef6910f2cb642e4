#!/usr/bin/env python3
"""Test cases for bsa_bwd (SPEC.md §2.5; metadata of §2.4) in the `attnjit test` format
(tools/cli/test_case.hpp). Standard library only; deterministic (fixed seeds).

Writes:
  tests/cases/gpu/bsa_bwd_grid.json   >= 120 random configurations compared kernel vs CPU reference on the
                                      same random inputs (no golden): layout bhsd / bshd, sparse block 64 /
                                      128, fp16 / bf16, D 64 / 128, MHA / GQA (g 2, 4) / MQA, fixed counts
                                      (block_sparse_num set or K_max) or per-block counts with zeros, block_sizes
                                      absent or of rank 1 / 2 / 3 with short blocks, ragged S_q / S_kv (partial
                                      query and key blocks), K_max past N_kv with a garbage suffix past each row's
                                      count (never read), padded (class F) input strides, batch 1..2,
                                      validate_inputs on some. o and lse are the forward's: each case's "setup"
                                      runs the bsa_fwd CPU reference on the case's q, k, v and metadata (o rounded
                                      to the input dtype, lse fp32 natural log), as SPEC.md §2.5's tests say.
                                      dq, dk, dv: rel_l2 <= 2e-2; rows the contract makes zero (empty query rows
                                      in dq, unselected keys in dk / dv) must be exactly zero; outputs poisoned.
  tests/cases/gpu/bsa_bwd_small.json  ~14 small cases (every feature) for compute-sanitizer.
  tests/cases/bsa_bwd_errors.json     one case per rejection rule of SPEC.md §2.5 (and §2.4's, which it
                                      inherits) and per validate_inputs caller-contract item; outputs filled
                                      with a byte pattern so the runner proves a rejected call wrote nothing.

Every non-empty row sees at least 2 keys (block sizes >= 2, no key block of a single key): a row whose only
visible key is one key has dS = 0 exactly in the reference (o = v_j) but rounding noise in the kernel,
which the exact-zero rule would reject.

Usage: python3 tests/gen/bsa_bwd_cases.py [--out-dir tests/cases]
"""
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from casegen_common import (Errors, OUTB, POISON, case_args, draw_heads, normal, random_padded_strides,  # noqa: E402
                            tensor, write_cases)

SEED = 0xB5AB
GRAD_TOL = 2e-2
MAX_CASE_COST = 4e8     # B * H * S_q * (visible keys per row, upper bound) * D per case
Q_LENGTHS = [1, 2, 37, 63, 64, 65, 100, 127, 128, 129, 200, 256, 300, 511]
KV_LENGTHS = [2, 3, 40, 63, 64, 66, 100, 127, 128, 130, 200, 255, 256, 300, 514, 700]


def qshape(layout, B, H, S, D):
    return [B, H, S, D] if layout == "bhsd" else [B, S, H, D]


def ints(values):
    return {"kind": "values", "values": [int(x) for x in values]}


def metadata(rng, B, H, N_q, N_kv, K_max, counts, fixed, bs, sizes_rank, zero_frac=0.15):
    """q2k_block_index (unique active indices, garbage suffix), q2k_block_nums or None, block_sizes or None."""
    index, nums = [], []
    for _ in range(B * H * N_q):
        if counts == "variable":
            n = 0 if rng.random() < zero_frac else rng.randint(1, min(K_max, N_kv))
            nums.append(n)
        else:
            n = fixed
        row = rng.sample(range(N_kv), n)
        row += [rng.choice([-3, -1, N_kv, N_kv + 7, 1 << 30]) for _ in range(K_max - n)]
        index.extend(row)
    sizes = None
    if sizes_rank:
        shape = [N_kv] if sizes_rank == 1 else [B, N_kv] if sizes_rank == 2 else [B, H, N_kv]
        n = 1
        for e in shape:
            n *= e
        sizes = (shape, [bs if rng.random() < 0.4 else rng.randint(2, bs) for _ in range(n)])
    return index, (nums if counts == "variable" else None), sizes


def build_case(name, seed, *, dtype, layout, bs, B, H, H_kv, S_q, S_kv, D, K_max, counts, fixed=None,
               fixed_in_config=False, sizes_rank=0, scale=None, validate=False, rng=None, padded=False,
               backend="portable"):
    N_q, N_kv = -(-S_q // bs), -(-S_kv // bs)
    index, nums, sizes = metadata(rng, B, H, N_q, N_kv, K_max, counts, fixed, bs, sizes_rank)
    qs, ks = qshape(layout, B, H, S_q, D), qshape(layout, B, H_kv, S_kv, D)
    tensors = {}
    for n, shp in (("do", qs), ("q", qs), ("k", ks), ("v", ks)):
        st = random_padded_strides(rng, shp, dtype) if padded and n in ("q", "k", "do") else None
        tensors[n] = tensor(shp, dtype, normal(), strides=st)
    tensors["o"] = tensor(qs, dtype, POISON)
    tensors["lse"] = tensor([B, H, S_q], "fp32", POISON)
    tensors["q2k_block_index"] = tensor([B, H, N_q, K_max], "int32", ints(index))
    if nums is not None:
        tensors["q2k_block_nums"] = tensor([B, H, N_q], "int32", ints(nums))
    if sizes is not None:
        tensors["block_sizes"] = tensor(sizes[0], "int32", ints(sizes[1]))
    tensors["dq"] = tensor(qs, dtype, POISON, output=True)
    tensors["dk"] = tensor(ks, dtype, POISON, output=True)
    tensors["dv"] = tensor(ks, dtype, POISON, output=True)
    config = {"layout": layout, "sparse_block_size": bs}
    if fixed_in_config:
        config["block_sparse_num"] = fixed
    if scale is not None:
        config["scale"] = scale
    fwd_config = dict(config)
    if counts == "variable":
        fwd_config["allow_empty_block_nums"] = True
    if validate:
        config["validate_inputs"] = True
    config["backend"] = backend
    fwd_tensors = {n: n for n in ("q", "k", "v", "q2k_block_index", "o", "lse")}
    if nums is not None:
        fwd_tensors["q2k_block_nums"] = "q2k_block_nums"
    if sizes is not None:
        fwd_tensors["block_sizes"] = "block_sizes"
    return {"name": name, "op": "bsa_bwd", "config": config, "seed": seed, "tensors": tensors,
            "setup": [{"op": "bsa_fwd", "config": fwd_config, "tensors": fwd_tensors}],
            "compare": {n: {"mode": "rel_l2", "tol": GRAD_TOL} for n in ("dq", "dk", "dv")},
            "gpu_only": True}


def draw(rng, small=False):
    d = {}
    d["dtype"] = rng.choice(["fp16", "bf16"])
    d["layout"] = rng.choice(["bhsd", "bshd"])
    d["bs"] = rng.choice([64, 128])
    d["D"] = rng.choice([64, 128])
    d["H_kv"], d["H"] = draw_heads(rng, (2, 4), small, gqa_kv_small=[1, 2])
    d["B"] = rng.choice([1, 1, 2])
    qlens = [x for x in Q_LENGTHS if not small or x <= 130]
    kvlens = [x for x in KV_LENGTHS if (x % d["bs"] != 1) and (not small or x <= 200)]
    d["S_q"], d["S_kv"] = rng.choice(qlens), rng.choice(kvlens)
    N_kv = -(-d["S_kv"] // d["bs"])
    d["K_max"] = rng.randint(1, min(N_kv, 6)) + rng.choice([0, 0, 0, 2])
    d["counts"] = rng.choice(["fixed", "variable"])
    d["fixed"] = rng.randint(1, min(d["K_max"], N_kv))
    d["fixed_in_config"] = d["counts"] == "fixed" and (d["fixed"] != d["K_max"] or rng.random() < 0.3)
    if d["counts"] == "fixed" and not d["fixed_in_config"]:
        d["fixed"] = d["K_max"]
        if d["K_max"] > N_kv:  # unset block_sparse_num means K_max active (unique) indices
            d["fixed_in_config"], d["fixed"] = True, rng.randint(1, N_kv)
    d["sizes_rank"] = rng.choice([0, 0, 1, 2, 3])
    d["scale"] = rng.choice([None, None, None, 0.05, 0.3])
    d["validate"] = rng.random() < 0.15
    d["padded"] = rng.random() < 0.25
    return d


def cost(d):
    return d["B"] * d["H"] * d["S_q"] * min(d["K_max"], -(-d["S_kv"] // d["bs"])) * d["bs"] * d["D"]


def describe(d):
    g = d["H"] // d["H_kv"]
    att = "mha" if g == 1 else ("mqa" if d["H_kv"] == 1 else f"gqa{g}")
    parts = [d["dtype"], d["layout"], f"bs{d['bs']}", f"d{d['D']}", f"b{d['B']}h{d['H']}kv{d['H_kv']}-{att}",
             f"sq{d['S_q']}-skv{d['S_kv']}", f"kmax{d['K_max']}",
             f"fixed{d['fixed']}" + ("-cfg" if d["fixed_in_config"] else "") if d["counts"] == "fixed" else "var",
             f"sizes-r{d['sizes_rank']}" if d["sizes_rank"] else "nosizes"]
    if d["scale"] is not None:
        parts.append(f"scale{d['scale']}")
    if d["padded"]:
        parts.append("padded")
    if d["validate"]:
        parts.append("validate")
    return "/".join(parts)


def build_set(prefix, count, seed0, small):
    rng = random.Random(SEED + (1 if small else 0))
    cases, names = [], set()
    while len(cases) < count:
        d = draw(rng, small)
        if cost(d) > (2e7 if small else MAX_CASE_COST):
            continue
        name = f"{prefix}/{len(cases):03d}/" + describe(d)
        assert name not in names
        names.add(name)
        cases.append(build_case(name, seed0 + len(cases), rng=rng, **{k: d[k] for k in (
            "dtype", "layout", "bs", "B", "H", "H_kv", "S_q", "S_kv", "D", "K_max", "counts", "fixed",
            "fixed_in_config", "sizes_rank", "scale", "validate", "padded")}))
    return cases


# ----------------------------------------------------------------------------------------------------
# Rejections


def base(dtype="fp16", layout="bhsd", bs=64, B=1, H=2, H_kv=1, S_q=70, S_kv=130, D=64, K_max=2, nums=False,
         sizes_rank=0):
    N_q, N_kv = -(-S_q // bs), -(-S_kv // bs)
    qs, ks = qshape(layout, B, H, S_q, D), qshape(layout, B, H_kv, S_kv, D)
    t = {"do": tensor(qs, dtype, normal()), "q": tensor(qs, dtype, normal()), "k": tensor(ks, dtype, normal()),
         "v": tensor(ks, dtype, normal()), "o": tensor(qs, dtype, normal()),
         "lse": tensor([B, H, S_q], "fp32", normal()),
         "q2k_block_index": tensor([B, H, N_q, K_max], "int32",
                                   ints([(u + m) % max(N_kv, 1) for _ in range(B * H) for m in range(N_q) for u in range(K_max)]))}
    if nums:
        t["q2k_block_nums"] = tensor([B, H, N_q], "int32", ints([1] * (B * H * N_q)))
    if sizes_rank:
        shape = [N_kv] if sizes_rank == 1 else [B, N_kv] if sizes_rank == 2 else [B, H, N_kv]
        n = 1
        for e in shape:
            n *= e
        t["block_sizes"] = tensor(shape, "int32", ints([bs] * n))
    t["dq"] = tensor(qs, dtype, OUTB, output=True)
    t["dk"] = tensor(ks, dtype, OUTB, output=True)
    t["dv"] = tensor(ks, dtype, OUTB, output=True)
    return t


def build_errors():
    e = Errors("bsa_bwd", "bsa-bwd-errors/", 1, config={})
    err = e.rule

    def with_(t, **changes):
        for k, v in changes.items():
            if v is None:
                del t[k]
            else:
                t[k] = v
        return t

    # param
    err("param/layout", base(), "param", "layout: expected \"bhsd\" or \"bshd\"", {"layout": "bsdh"})
    err("param/sparse-block-size", base(), "param", "sparse_block_size: expected 64 or 128", {"sparse_block_size": 96})
    err("param/scale-zero", base(), "param", "scale: expected a finite value > 0", {"scale": 0})
    err("param/scale-negative", base(), "param", "scale: expected a finite value > 0", {"scale": -0.5})
    err("param/block-sparse-num-zero", base(), "param", "block_sparse_num: expected an integer >= 1",
        {"block_sparse_num": 0})
    err("param/block-sparse-num-above-kmax", base(), "param", "block_sparse_num: expected a value in [1, K_max = 2]",
        {"block_sparse_num": 3})
    err("param/bucket-size-blocks-zero", base(), "param", "bucket_size_blocks: expected an integer >= 1",
        {"bucket_size_blocks": 0})
    err("param/unknown", base(), "param", "allow_empty_block_nums: expected one of", {"allow_empty_block_nums": True})
    err("param/kv-splits-is-forward-only", base(), "param", "kv_splits: expected one of", {"kv_splits": 2})
    # args
    err("args/missing-do", with_(base(), do=None), "args", "do: expected a tensor")
    err("args/missing-lse", with_(base(), lse=None), "args", "lse: expected a tensor")
    err("args/missing-dk", with_(base(), dk=None), "args", "dk: expected a tensor")
    err("args/unknown-tensor", with_(base(), sinks=tensor([2], "fp32", normal())), "args", "sinks: expected one of")
    # dtype
    err("dtype/q-fp32", with_(base(), q=tensor([1, 2, 70, 64], "fp32", normal())), "dtype", "q: expected fp16 or bf16")
    err("dtype/k-differs", with_(base(), k=tensor([1, 1, 130, 64], "bf16", normal())), "dtype", "k: expected fp16")
    err("dtype/v-differs", with_(base(), v=tensor([1, 1, 130, 64], "bf16", normal())), "dtype", "v: expected fp16")
    err("dtype/o-differs", with_(base(), o=tensor([1, 2, 70, 64], "bf16", normal())), "dtype", "o: expected fp16")
    err("dtype/do-differs", with_(base(), do=tensor([1, 2, 70, 64], "bf16", normal())), "dtype", "do: expected fp16")
    err("dtype/lse-bf16", with_(base(), lse=tensor([1, 2, 70], "bf16", normal())), "dtype", "lse: expected fp32")
    err("dtype/index-int64", with_(base(), q2k_block_index=tensor([1, 2, 2, 2], "int64", ints([0] * 8))), "dtype",
        "q2k_block_index: expected int32")
    err("dtype/nums-int64", with_(base(), q2k_block_nums=tensor([1, 2, 2], "int64", ints([1] * 4))), "dtype",
        "q2k_block_nums: expected int32")
    err("dtype/block-sizes-int64", with_(base(), block_sizes=tensor([3], "int64", ints([64] * 3))), "dtype",
        "block_sizes: expected int32")
    err("dtype/dq-bf16", with_(base(), dq=tensor([1, 2, 70, 64], "bf16", OUTB, output=True)), "dtype", "dq: expected fp16")
    err("dtype/dk-bf16", with_(base(), dk=tensor([1, 1, 130, 64], "bf16", OUTB, output=True)), "dtype", "dk: expected fp16")
    err("dtype/dv-bf16", with_(base(), dv=tensor([1, 1, 130, 64], "bf16", OUTB, output=True)), "dtype", "dv: expected fp16")
    # shape
    err("shape/q-rank3", with_(base(), q=tensor([2, 70, 64], "fp16", normal())), "shape", "q: expected 4 dims")
    err("shape/k-batch", with_(base(), k=tensor([2, 1, 130, 64], "fp16", normal())), "shape", "k: expected dim 0 (B")
    err("shape/v-heads", with_(base(), v=tensor([1, 2, 130, 64], "fp16", normal())), "shape", "v: expected dim 1 (H_kv")
    err("shape/v-length", with_(base(), v=tensor([1, 1, 129, 64], "fp16", normal())), "shape", "v: expected dim 2 (S_kv")
    err("shape/k-head-dim", with_(base(), k=tensor([1, 1, 130, 128], "fp16", normal())), "shape", "k: expected dim 3 (D")
    err("shape/heads-not-divisible", with_(base(H=3, H_kv=2)), "shape", "expected H_kv dividing q's H_q = 3")
    err("shape/d96", base(D=96), "shape", "q: expected head dim D in {64, 128}, got 96")
    err("shape/d256", base(D=256), "shape", "q: expected head dim D in {64, 128}, got 256")
    err("shape/dv-differs", with_(base(D=128), v=tensor([1, 1, 130, 64], "fp16", normal())), "shape",
        "v: expected D_v = D = 128, got D_v = 64")
    err("shape/sq-zero", base(S_q=0), "shape", "q: expected S_q >= 1")
    err("shape/skv-zero", base(S_kv=0), "shape", "k: expected S_kv >= 1")
    err("shape/index-nq", with_(base(), q2k_block_index=tensor([1, 2, 3, 2], "int32", ints([0] * 12))), "shape",
        "q2k_block_index: expected dim 2 (N_q")
    err("shape/index-kmax-zero", with_(base(), q2k_block_index=tensor([1, 2, 2, 0], "int32", ints([]))), "shape",
        "q2k_block_index: expected K_max >= 1")
    err("shape/nums-shape", with_(base(), q2k_block_nums=tensor([1, 2, 3], "int32", ints([1] * 6))), "shape",
        "q2k_block_nums: expected dim 2 (N_q")
    err("shape/block-sizes-rank4", with_(base(), block_sizes=tensor([1, 1, 1, 3], "int32", ints([64] * 3))), "shape",
        "block_sizes: expected rank 1, 2 or 3")
    err("shape/block-sizes-nkv", with_(base(), block_sizes=tensor([4], "int32", ints([64] * 4))), "shape",
        "block_sizes: expected dim 0 (N_kv")
    err("shape/block-sizes-rank3-heads", with_(base(), block_sizes=tensor([1, 1, 3], "int32", ints([64] * 3))),
        "shape", "block_sizes: expected dim 1 (H_q")
    err("shape/o", with_(base(), o=tensor([1, 2, 69, 64], "fp16", normal())), "shape", "o: expected dim 2 (S_q")
    err("shape/do", with_(base(), do=tensor([1, 1, 70, 64], "fp16", normal())), "shape", "do: expected dim 1 (H_q")
    err("shape/lse", with_(base(), lse=tensor([1, 70, 2], "fp32", normal())), "shape", "lse: expected dim 1 (H_q")
    err("shape/lse-rank", with_(base(), lse=tensor([2, 70], "fp32", normal())), "shape", "lse: expected 3 dims")
    err("shape/dq", with_(base(), dq=tensor([1, 2, 70, 128], "fp16", OUTB, output=True)), "shape", "dq: expected dim 3")
    err("shape/dk", with_(base(), dk=tensor([1, 2, 130, 64], "fp16", OUTB, output=True)), "shape", "dk: expected dim 1")
    err("shape/dv", with_(base(), dv=tensor([1, 1, 131, 64], "fp16", OUTB, output=True)), "shape", "dv: expected dim 2")
    err("shape/bshd-index", with_(base(layout="bshd"), q2k_block_index=tensor([1, 2, 70, 2], "int32", ints([0] * 280))),
        "shape", "q2k_block_index: expected dim 2 (N_q", {"layout": "bshd"})
    # layout
    err("layout/q-innermost-stride", with_(base(), q=tensor([1, 2, 70, 64], "fp16", normal(), strides=[1, 70, 2, 140])),
        "layout", "q: expected innermost stride 1")
    err("layout/k-row-stride", with_(base(), k=tensor([1, 1, 130, 64], "fp16", normal(), strides=[130 * 68, 130 * 68, 68, 1])),
        "layout", "k: expected dim 2 stride to be a multiple of 16 bytes", gpu_only=True)
    err("layout/do-row-stride", with_(base(), do=tensor([1, 2, 70, 64], "fp16", normal(), strides=[2 * 70 * 65, 70 * 65, 65, 1])),
        "layout", "do: expected dim", gpu_only=True)
    err("layout/dq-not-contiguous", with_(base(), dq=tensor([1, 2, 70, 64], "fp16", OUTB, strides=[2 * 70 * 72, 70 * 72, 72, 1],
                                                           output=True)), "layout", "dq: expected a contiguous")
    err("layout/dv-not-contiguous", with_(base(), dv=tensor([1, 1, 130, 64], "fp16", OUTB, strides=[130 * 128, 130 * 128, 128, 1],
                                                           output=True)), "layout", "dv: expected a contiguous")
    # content (validate_inputs)
    v = {"validate_inputs": True}
    t = base(nums=True)
    t["q2k_block_nums"] = tensor([1, 2, 2], "int32", ints([1, 3, 0, 1]))
    err("content/nums-above-kmax", t, "content", "q2k_block_nums: expected counts in [0, K_max = 2], got 3 at [0, 0, 1]", v)
    t = base(nums=True)
    t["q2k_block_nums"] = tensor([1, 2, 2], "int32", ints([1, 1, -1, 1]))
    err("content/nums-negative", t, "content", "q2k_block_nums: expected counts in [0, K_max = 2], got -1 at [0, 1, 0]", v)
    t = base()
    t["q2k_block_index"] = tensor([1, 2, 2, 2], "int32", ints([0, 1, 1, 3, 0, 1, 1, 2]))
    err("content/index-out-of-range", t, "content", "q2k_block_index: expected active indices in [0, N_kv = 3), got 3 at "
        "[0, 0, 1, 1]", v)
    t = base()
    t["q2k_block_index"] = tensor([1, 2, 2, 2], "int32", ints([0, 1, 1, 2, 2, 2, 1, 2]))
    err("content/index-duplicate", t, "content", "q2k_block_index: expected unique active indices per row, got 2 again "
        "at [0, 1, 0, 1]", v)
    t = base(nums=True)
    t["q2k_block_index"] = tensor([1, 2, 2, 2], "int32", ints([0, 9, 1, 2, 2, 2, 1, 2]))
    t["q2k_block_nums"] = tensor([1, 2, 2], "int32", ints([1, 2, 2, 2]))
    err("content/suffix-not-read-then-duplicate", t, "content", "got 2 again at [0, 1, 0, 1]", v)
    t = base(sizes_rank=1)
    t["block_sizes"] = tensor([3], "int32", ints([64, 0, 64]))
    err("content/block-size-zero", t, "content", "block_sizes: expected referenced block sizes in [1, sparse_block_size = "
        "64], got 0 at [1]", v)
    t = base(sizes_rank=3)
    t["block_sizes"] = tensor([1, 2, 3], "int32", ints([64, 64, 64, 64, 65, 64]))
    err("content/block-size-above-bs-rank3", t, "content", "got 65 at [0, 1, 1]", v)
    return e.cases


def main():
    args = case_args(__doc__, count=128).parse_args()
    grid = build_set("bsa-bwd-grid", args.count, 70000, small=False)
    write_cases(os.path.join(args.out_dir, "gpu", "bsa_bwd_grid.json"), grid)
    write_cases(os.path.join(args.out_dir, "gpu", "bsa_bwd_small.json"),
                build_set("bsa-bwd-small", 14, 80000, small=True))
    write_cases(os.path.join(args.out_dir, "bsa_bwd_errors.json"), build_errors())
    return 0


if __name__ == "__main__":
    sys.exit(main())
