#!/usr/bin/env python3
"""Random GPU test grids for paged_kv_write (SPEC.md §2.19), in the `attnjit test` format
(tools/cli/test_case.hpp). Standard library only; deterministic (fixed seed).

Writes, under tests/cases/gpu/ (kept out of the CI glob tests/cases/*.json):
  paged_kv_write_grid.json   >= 300 random configurations. No golden: the runner compares the kernel
                             with the CPU reference on the same random inputs, bitwise on both pools.
  paged_kv_write_small.json  ~20 small cases (N <= 65, small pools) for compute-sanitizer runs.

Every case: k/v "normal" inits (large std on e4m3 caches so that x / scale saturates, small std for
subnormals, sometimes "specials" to inject +-inf / NaN), slot_mapping "slots" {capacity NP*PS, skip},
pools random "bytes" marked as outputs (so a bitwise compare of the whole storage also proves that
unwritten rows and stride gaps keep their bytes), optional padded strides on k/v (head and token
strides) and on the pools (head, slot and page strides), all within class F (innermost stride 1,
other strides multiples of 16 bytes). Each case's storage (k + v + both pools) stays under
MAX_CASE_ELEMENTS so the CPU reference stays fast.

Usage: python3 tests/gen/paged_kv_write_cases.py [--out-dir DIR] [--count N]
"""
import json
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from casegen_common import case_args, class_f_ok, contiguous, storage_size, tensor, weighted, write_cases_text  # noqa: E402

SEED = 0x9A6ED
MAX_CASE_ELEMENTS = 8 * 1024 * 1024

PAIRS = [("fp16", "fp16"), ("bf16", "bf16"), ("fp16", "e4m3"), ("bf16", "e4m3")]
D_CHOICES = [(16, 1), (64, 3), (128, 3), (256, 3), (576, 3)]
PS_CHOICES = [(1, 2), (2, 2), (4, 2), (8, 2), (16, 4), (32, 2), (64, 2), (128, 2), (256, 2), (3, 1), (5, 1), (24, 1)]
H_CHOICES = [1, 2, 4, 8, 16, 32, 64]
N_CHOICES = [0, 1, 2, 7, 31, 63, 64, 65, 100, 257, 1000, 4097]
SKIPS = [0, 0.1, 0.5]
SCALES = [0.25, 1.0, 2.5]


def kv_strides(rng, H, D, broadcast=False):
    """Padded head / token strides of a [N, H, D] 16-bit input (pads are multiples of 8 elements)."""
    if broadcast:
        return [0, D, 1] if rng.random() < 0.5 else [H * D, 0, 1]
    ph = rng.choice([8, 16, 64])
    pn = rng.choice([0, 8, 24])
    return [H * (D + ph) + pn, D + ph, 1]


def pool_strides(rng, PS, H, D):
    """Padded head / slot / page strides of a [NP, PS, H, D] pool (pads are multiples of 16 elements)."""
    ph = rng.choice([0, 16, 32])
    slot = H * (D + ph) + rng.choice([16, 48])
    page = PS * slot + rng.choice([0, 16, 64])
    return [page, slot, D + ph, 1]


def kv_init(rng, e4m3, specials_p):
    if e4m3:
        std = rng.choice([0.01, 1.0, 50.0, 300.0, 1000.0])
    else:
        std = rng.choice([0.5, 1.0, 4.0, 100.0])
    init = {"kind": "normal", "mean": 0.0, "std": std}
    if rng.random() < specials_p:
        init["specials"] = 0.01
    return init


def make_case(rng, idx, prefix, pair, D, PS, H, N, skip, *, strided_kv, strided_pool, broadcast=False,
              validate=False, specials_p=0.0, np_extra=None):
    kdt, cdt = pair
    e4m3 = cdt == "e4m3"
    np_min = max(1, -(-N // PS))
    if np_extra is None:
        r = rng.random()
        np_extra = 0 if r < 0.4 else (rng.randint(1, 3) if r < 0.8 else np_min)  # tight, loose or 2x capacity
    NP = np_min + np_extra
    tags = []
    k_shape, p_shape = [N, H, D], [NP, PS, H, D]
    k_st = v_st = None
    if broadcast:
        k_st = kv_strides(rng, H, D, broadcast=True)
        tags.append("bcast-k")
    elif strided_kv:
        k_st = kv_strides(rng, H, D)
        v_st = kv_strides(rng, H, D) if rng.random() < 0.5 else None
        tags.append("strided-kv")
    kp_st = vp_st = None
    if strided_pool:
        kp_st = pool_strides(rng, PS, H, D)
        vp_st = pool_strides(rng, PS, H, D) if rng.random() < 0.5 else kp_st
        tags.append("strided-pool")
    for dt, shape, st, w in ((kdt, k_shape, k_st, False), (kdt, k_shape, v_st, False),
                             (cdt, p_shape, kp_st, True), (cdt, p_shape, vp_st, True)):
        assert class_f_ok(dt, shape, st or contiguous(shape), w), (shape, st)

    tensors = {
        "k": tensor(k_shape, kdt, kv_init(rng, e4m3, specials_p), k_st),
        "v": tensor(k_shape, kdt, kv_init(rng, e4m3, specials_p), v_st),
        "k_pages": tensor(p_shape, cdt, {"kind": "bytes"}, kp_st, True),
        "v_pages": tensor(p_shape, cdt, {"kind": "bytes"}, vp_st, True),
        "slot_mapping": tensor([N], "int64", {"kind": "slots", "capacity": NP * PS, "skip": skip}),
    }
    if e4m3:
        ks, vs = rng.choice(SCALES), rng.choice(SCALES)
        tensors["k_scale"] = tensor([1], "fp32", {"kind": "values", "values": [ks]})
        tensors["v_scale"] = tensor([1], "fp32", {"kind": "values", "values": [vs]})
        tags.append(f"s{ks:g},{vs:g}")
    if any("specials" in tensors[n]["init"] for n in ("k", "v")):
        tags.append("specials")
    if validate:
        tags.append("validate")
    elements = sum(storage_size(x["shape"], x.get("strides") or contiguous(x["shape"]))
                   for n, x in tensors.items() if n in ("k", "v", "k_pages", "v_pages"))
    assert elements <= MAX_CASE_ELEMENTS, elements
    name = f"{prefix}/{kdt}-{cdt}/d{D}/ps{PS}/h{H}/n{N}/skip{skip:g}" + "".join("/" + x for x in tags) + f"/#{idx}"
    case = {
        "name": name,
        "op": "paged_kv_write",
        "config": {"validate_inputs": True} if validate else {},
        "seed": 7000 + idx if prefix == "pkw" else 9000 + idx,
        "tensors": tensors,
        "compare": {"k_pages": {"mode": "bitwise"}, "v_pages": {"mode": "bitwise"}},
        "gpu_only": True,
    }
    return case, elements


def case_elements(N, H, D, PS, strided_kv, strided_pool, np_extra_max):
    """Upper bound of a case's storage for the budget check (pads at their largest)."""
    row_kv = D + 64 if strided_kv else D
    kv = 2 * (N * (H * row_kv + 24))
    NP = max(1, -(-N // PS))
    NP += max(np_extra_max, NP)  # the "2x capacity" draw at most doubles it
    row_p = (H * (D + 32) + 48) if strided_pool else H * D
    pools = 2 * NP * (PS * row_p + 64)
    return kv + pools


def grid(count):
    rng = random.Random(SEED)
    cases, sizes = [], []
    # Make sure every dtype pair meets every D, and the big N values appear, before random draws.
    forced = [(p, d) for p in PAIRS for d, _ in D_CHOICES]
    i = 0
    while len(cases) < count:
        if i < len(forced):
            pair, D = forced[i]
        else:
            pair, D = rng.choice(PAIRS), weighted(rng, D_CHOICES)
        PS = weighted(rng, PS_CHOICES)
        N = N_CHOICES[i % len(N_CHOICES)] if i < 3 * len(N_CHOICES) else rng.choice(N_CHOICES)
        skip = rng.choice(SKIPS)
        strided_kv = rng.random() < 0.25
        strided_pool = rng.random() < 0.25
        broadcast = not strided_kv and rng.random() < 0.03
        # largest H that fits the budget (H drawn among those that fit); redraw N when none does
        fits = [h for h in H_CHOICES if case_elements(N, h, D, PS, strided_kv, strided_pool, 3) <= MAX_CASE_ELEMENTS]
        i += 1
        if not fits:
            continue
        H = rng.choice(fits)
        e4m3 = pair[1] == "e4m3"
        case, el = make_case(rng, len(cases), "pkw", pair, D, PS, H, N, skip, strided_kv=strided_kv,
                             strided_pool=strided_pool, broadcast=broadcast, validate=rng.random() < 0.1,
                             specials_p=0.35 if e4m3 else 0.1)
        cases.append(case)
        sizes.append(el)
    return cases, sizes


def small():
    rng = random.Random(SEED + 1)
    specs = [
        # pair, D, PS, H, N, skip, strided_kv, strided_pool, broadcast, specials_p
        (PAIRS[0], 16, 1, 1, 0, 0, False, False, False, 0),
        (PAIRS[0], 64, 16, 2, 7, 0.1, False, False, False, 0),
        (PAIRS[1], 128, 3, 1, 31, 0.5, True, False, False, 0),
        (PAIRS[1], 16, 5, 4, 65, 0, False, True, False, 1),
        (PAIRS[2], 64, 4, 1, 1, 0, False, False, False, 1),
        (PAIRS[2], 576, 2, 1, 7, 0.1, False, False, False, 1),
        (PAIRS[2], 16, 24, 2, 64, 0.5, True, True, False, 1),
        (PAIRS[3], 128, 8, 2, 63, 0, False, False, False, 1),
        (PAIRS[3], 256, 1, 1, 2, 0, True, False, False, 1),
        (PAIRS[3], 16, 3, 4, 65, 0.1, False, True, False, 1),
        (PAIRS[0], 576, 16, 1, 2, 0, True, True, False, 0),
        (PAIRS[1], 64, 32, 2, 31, 0.1, False, False, True, 0),
        (PAIRS[2], 128, 64, 1, 7, 0, False, True, False, 1),
        (PAIRS[3], 64, 2, 4, 33, 0.5, True, False, False, 1),
        (PAIRS[0], 256, 4, 2, 17, 0.1, False, False, False, 1),
        (PAIRS[1], 16, 256, 1, 65, 0, False, False, False, 1),
        (PAIRS[2], 16, 1, 4, 64, 0.1, False, False, True, 1),
        (PAIRS[3], 576, 3, 1, 5, 0.5, False, True, False, 1),
        (PAIRS[2], 64, 5, 2, 0, 0, True, True, False, 0),
        (PAIRS[3], 16, 8, 1, 65, 0, False, False, False, 1),
    ]
    cases, sizes = [], []
    for j, (pair, D, PS, H, N, skip, skv, spool, bc, sp) in enumerate(specs):
        case, el = make_case(rng, j, "pkw-small", pair, D, PS, H, N, skip, strided_kv=skv, strided_pool=spool,
                             broadcast=bc, validate=(j % 5 == 3), specials_p=sp, np_extra=1 + j % 3)
        cases.append(case)
        sizes.append(el)
    return cases, sizes


def dumps(obj, indent=0):
    pad, pad1 = " " * indent, " " * (indent + 1)
    if isinstance(obj, dict):
        if indent >= 2 or not obj:
            return json.dumps(obj, separators=(", ", ": "))
        items = [f"{pad1}{json.dumps(k)}: {dumps(v, indent + 1)}" for k, v in obj.items()]
        return "{\n" + ",\n".join(items) + "\n" + pad + "}"
    if isinstance(obj, list) and any(isinstance(x, (dict, list)) for x in obj):
        return "[\n" + ",\n".join(pad1 + dumps(x, indent + 1) for x in obj) + "\n" + pad + "]"
    return json.dumps(obj, separators=(", ", ": "))


def write(path, cases):
    write_cases_text(path, cases, dumps({"cases": cases}) + "\n", announce=False)


def summary(cases):
    from collections import Counter
    c = Counter()
    for x in cases:
        t = x["tensors"]
        c["pair " + t["k"]["dtype"] + "-" + t["k_pages"]["dtype"]] += 1
        c["D " + str(t["k"]["shape"][2])] += 1
        c["N " + str(t["k"]["shape"][0])] += 1
        c["PS " + str(t["k_pages"]["shape"][1])] += 1
        c["H " + str(t["k"]["shape"][1])] += 1
        c["skip " + str(t["slot_mapping"]["init"]["skip"])] += 1
        c["strided k/v"] += "strides" in t["k"]
        c["strided pools"] += "strides" in t["k_pages"]
        c["specials"] += "specials" in t["k"]["init"] or "specials" in t["v"]["init"]
        c["validate_inputs"] += bool(x["config"])
    return c


def main():
    args = case_args(__doc__, count=320).parse_args()
    gpu = os.path.join(args.out_dir, "gpu")
    os.makedirs(gpu, exist_ok=True)
    g, gt = grid(args.count)
    s, st = small()
    gp = os.path.join(gpu, "paged_kv_write_grid.json")
    sp = os.path.join(gpu, "paged_kv_write_small.json")
    write(gp, g)
    write(sp, s)
    print(f"wrote {os.path.normpath(gp)}: {len(g)} cases, {sum(gt) / 1e6:.1f}M storage elements in all "
          f"(k + v + pools; largest case {max(gt) / 1e6:.2f}M, mean {sum(gt) / len(g) / 1e6:.2f}M)")
    print(f"wrote {os.path.normpath(sp)}: {len(s)} cases, {sum(st) / 1e3:.1f}K storage elements in all "
          f"(largest case {max(st) / 1e3:.1f}K)")
    c = summary(g)
    for k in sorted(c, key=lambda k: (k.split(" ")[0], len(k), k)):
        print(f"  {k}: {c[k]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
