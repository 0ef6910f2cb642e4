"""Helpers shared by the test-case generators tests/gen/*_cases.py and tests/gen/*_golden.py.

Standard library only: the *_cases.py scripts must run without numpy. The numpy helpers of the golden
generators live in tests/gen/casegen_numeric.py.

The scripts import this module after putting their own directory on sys.path, so they run from any
working directory. Everything here feeds generated JSON files that are kept byte-identical: changing a
helper (a dict's key order, a rounding, the number of random draws) changes every file that uses it.
"""
import argparse
import bisect
import copy
import json
import os
import struct

# SPEC.md §1.12 rel_l2 tolerances of o per path (any e4m3 operand: the "e4m3" entry).
TOL = {"fp16": 5e-3, "bf16": 1e-2, "e4m3": 5e-2}
ELEM_BYTES = {"fp16": 2, "bf16": 2, "e4m3": 1}
POISON = {"kind": "poison"}
OUTB = {"kind": "bytes", "pattern": 165}  # outputs of error cases: a rejected call must leave this pattern


# ----------------------------------------------------------------------------------------------------
# Random draws (random.Random)


def weighted(rng, choices):
    """One value of [(value, weight), ...], drawn with one rng.uniform call."""
    total = sum(w for _, w in choices)
    r = rng.uniform(0, total)
    for v, w in choices:
        r -= w
        if r <= 0:
            return v
    return choices[-1][0]


def random_sinks(rng, kind, H):
    """H attention-sink values for a draw of kind "finite", "neginf" or "posinf": uniform in [-2, 6] rounded
    to 3 decimals; "neginf" / "posinf" make some of them "-inf" / "inf" (at least one)."""
    vals = []
    for h in range(H):
        v = round(rng.uniform(-2.0, 6.0), 3)
        if kind == "neginf" and rng.random() < 0.4:
            v = "-inf"
        if kind == "posinf" and rng.random() < 0.3:
            v = "inf"
        vals.append(v)
    if kind == "posinf" and "inf" not in vals:
        vals[rng.randrange(H)] = "inf"
    if kind == "neginf" and "-inf" not in vals:
        vals[rng.randrange(H)] = "-inf"
    return vals


def draw_heads(rng, groups, small, gqa_kv_small):
    """(H_kv, H) of a random MHA, GQA (group size groups[0] or groups[1]) or MQA configuration: one rng.choice
    of the kind, then one or two more. gqa_kv_small: the H_kv choices of a small GQA draw."""
    kind = rng.choice(["mha", "gqa0", "gqa1", "mqa"])
    if kind == "mha":
        H_kv = rng.choice([1, 2, 3] if not small else [1, 2])
        return H_kv, H_kv
    if kind == "mqa":
        return 1, rng.choice([2, 4, 8] if not small else [2, 3])
    H_kv = rng.choice([1, 2] if not small else gqa_kv_small)
    return H_kv, groups[int(kind[3])] * H_kv


def fewer_heads(d):
    """Halves a draw's head count d.H, keeping the group size d.H / d.H_kv while d.H_kv > 1 can shrink."""
    g = d.H // d.H_kv
    if d.H_kv > 1:
        d.H_kv //= 2
    else:
        g //= 2
    d.H = g * d.H_kv


def scatter_pages(rng, need, spare):
    """Scattered, non-monotonic physical pages: a shuffled range of sum(need) + spare page ids (one
    rng.shuffle), cut into need[b] pages for request b in order. Returns (total, pages)."""
    total = sum(need) + spare
    perm = list(range(total))
    rng.shuffle(perm)
    pages, at = [], 0
    for n in need:
        pages.append(perm[at: at + n])
        at += n
    return total, pages


# ----------------------------------------------------------------------------------------------------
# Shapes and strides (in elements)


def contiguous(shape):
    """Row-major strides of `shape`."""
    st, acc = [], 1
    for e in reversed(shape):
        st.append(acc)
        acc *= e
    return list(reversed(st))


def storage_size(shape, strides):
    """Elements a tensor's storage spans (0 when any extent is 0)."""
    if any(e == 0 for e in shape):
        return 0
    return 1 + sum((e - 1) * s for e, s in zip(shape, strides))


def random_padded_strides(rng, shape, dtype, zero_dim=None):
    """Class F strides for shape (innermost stride 1): every outer stride padded by a random multiple of 16
    bytes (one rng.choice per outer dim, innermost first); zero_dim, if given, gets stride 0 (broadcast)."""
    unit = 16 // ELEM_BYTES[dtype]
    st = [1]
    acc = shape[-1]
    for d in range(len(shape) - 2, -1, -1):
        acc += unit * rng.choice([0, 1, 2, 5])
        st.insert(0, acc)
        acc *= shape[d]
    if zero_dim is not None:
        st[zero_dim] = 0
    return st


def class_f_ok(dtype, shape, strides, written):
    """Class F/W (SPEC.md §1.2): innermost stride 1, other strides multiples of 16 bytes (extent-1 axes
    exempt), zero strides only on read-only tensors."""
    eb = ELEM_BYTES[dtype]
    if shape[-1] > 1 and strides[-1] != 1:
        return False
    for e, s in zip(shape[:-1], strides[:-1]):
        if e == 1:
            continue
        if s == 0:
            if written:
                return False
            continue
        if (s * eb) % 16:
            return False
    return True


# ----------------------------------------------------------------------------------------------------
# Case pieces (the `attnjit test` format, tools/cli/test_case.hpp)


def tensor(shape, dtype, init, strides=None, output=False):
    t = {"shape": list(shape), "dtype": dtype}
    if strides is not None:
        t["strides"] = list(strides)
    t["init"] = init
    if output:
        t["output"] = True
    return t


def values(vals):
    """A "values" init: vals in order (numbers, or "inf" / "-inf" / "nan" strings)."""
    return {"kind": "values", "values": list(vals)}


def indexer_config(topk, causal, compress_ratio, deterministic):
    """A lightning_indexer config: topk, then causal / compress_ratio / deterministic only where they are
    not the defaults (false, 1, false)."""
    config = {"topk": topk}
    if causal:
        config["causal"] = True
    if compress_ratio != 1:
        config["compress_ratio"] = compress_ratio
    if deterministic:
        config["deterministic"] = True
    return config


def add_indexer_outputs(tensors, B, T, topk, cu, cuk):
    """Adds a lightning_indexer case's cu_seqlens / cu_seqlens_k (packed: cu given) and its poisoned
    indices output [B, T, topk] to tensors."""
    if cu is not None:
        tensors["cu_seqlens"] = tensor([len(cu)], "int32", {"kind": "values", "values": cu})
        tensors["cu_seqlens_k"] = tensor([len(cuk)], "int32", {"kind": "values", "values": cuk})
    tensors["indices"] = tensor([B, T, topk], "int32", POISON, output=True)


def indexer_compare(deterministic):
    """The compare spec of lightning_indexer's indices: a top-k set, in ascending order when deterministic."""
    cmp = {"mode": "topk"}
    if deterministic:
        cmp["ascending"] = True
    return cmp


class CaseList(list):
    """Cases built in order: add(name, **kw) appends build(rng, prefix + name, seed, **kw) with the seeds
    seed0 + 1, seed0 + 2, ... (a golden generator's cases(rng))."""

    def __init__(self, rng, build, prefix, seed0):
        super().__init__()
        self.rng, self.build, self.prefix, self.seed = rng, build, prefix, seed0

    def add(self, name, **kw):
        self.seed += 1
        self.append(self.build(self.rng, self.prefix + name, self.seed, **kw))


class Errors:
    """Collects the rejection cases of an op: err(name, config, tensors, category, contains, gpu_only, op) adds
    {"name": prefix + name, "op" (default: the Errors' op), "config", "seed": seed0 + its index (no seed when
    seed0 is None), "tensors", "expect_error"} (and "gpu_only": true for a rule only a device call has); a
    "{op}" in prefix stands for the case's op. The other argument orders of the generators:
    err_op(name, op, config, ...) and rule(name, tensors, category, contains, config, gpu_only), whose
    config defaults to the Errors' config."""

    def __init__(self, op, prefix, seed0, config=None):
        self.op, self.prefix, self.seed0, self.config, self.cases = op, prefix, seed0, config, []

    def err(self, name, config, tensors, category, contains, gpu_only=False, op=None):
        op = op or self.op
        c = {"name": self.prefix.format(op=op) + name, "op": op, "config": config}
        if self.seed0 is not None:
            c["seed"] = self.seed0 + len(self.cases)
        c["tensors"] = tensors
        c["expect_error"] = {"category": category, "contains": contains}
        if gpu_only:
            c["gpu_only"] = True
        self.cases.append(c)

    def err_op(self, name, op, config, tensors, category, contains, gpu_only=False):
        self.err(name, config, tensors, category, contains, gpu_only, op=op)

    def rule(self, name, tensors, category, contains, config=None, gpu_only=False):
        self.err(name, dict(self.config) if config is None else config, tensors, category, contains, gpu_only)

    # The rules every op with 16-bit inputs shares, one case per tensor; base(**kw) returns a valid call's
    # tensors (q among them).

    def all_dtypes(self, config, base, names):
        """dtype/all-<dt>: the tensors `names` all fp32, then all e4m3."""
        for dt in ("fp32", "e4m3"):
            t = base()
            for n in names:
                t[n]["dtype"] = dt
            self.err(f"dtype/all-{dt}", config, t, "dtype", "q: expected fp16 or bf16, got " + dt)

    def dtype_mismatches(self, config, base, triples):
        """dtype/<n>-<dt>-for-<want>: for (n, dt, want), q and the others `want`, tensor n dt."""
        for n, dt, want in triples:
            self.err(f"dtype/{n}-{dt}-for-{want}", config, edited(base, lambda t: t[n].update(dtype=dt), dtype=want),
                     "dtype", f"{n}: expected {want} (q's dtype), got {dt}")

    def int64_metadata(self, config, base, names):
        """dtype/<n>-int64: each int32 tensor of `names` int64 instead."""
        for n in names:
            self.err(f"dtype/{n}-int64", config, edited(base, lambda t: t[n].update(dtype="int64")), "dtype",
                     f"{n}: expected int32, got int64")

    def missing(self, config, base, names):
        """args/<n>-missing: each required tensor of `names` left out."""
        for n in names:
            self.err(f"args/{n}-missing", config, edited(base, lambda t: t.pop(n)), "args",
                     f"{n}: expected a tensor, got none")

    def innermost_strides(self, config, base, pairs):
        """layout/<n>-innermost-stride2: for (n, strides), tensor n with those strides (innermost 2)."""
        for n, strides in pairs:
            self.err(f"layout/{n}-innermost-stride2", config, edited(base, lambda t: t[n].update(strides=strides)),
                     "layout", f"{n}: expected innermost stride 1")

    def not_contiguous(self, config, base, pairs):
        """layout/<n>-strides-<strides>: for (n, strides), tensor n (one that must be row-major) with those
        strides."""
        for n, strides in pairs:
            self.err(f"layout/{n.replace('_', '-')}-strides-" + "-".join(map(str, strides)), config,
                     edited(base, lambda t: t[n].update(strides=strides)), "layout",
                     f"{n}: expected a contiguous (row-major) tensor")


def edited(base, f, **kw):
    """A copy of base(**kw) (a valid call's tensors) passed through f, which edits it in place."""
    t = copy.deepcopy(base(**kw))
    f(t)
    return t


def config_with(config, **kw):
    """A copy of `config` with the keys of kw set; a key given None is left out."""
    c = dict(config)
    c.update(kw)
    return {k: v for k, v in c.items() if v is not None}


def attention_name_parts(d):
    """The parts of a gqa-style case name for a draw's options off their defaults: wl<N>, wr<N>, cap<x>,
    sm<x>, rope-<layout>-r<R>, sinks-<kind>."""
    parts = []
    if d.wl != -1:
        parts.append(f"wl{d.wl}")
    if d.wr != -1:
        parts.append(f"wr{d.wr}")
    if d.softcap:
        parts.append(f"cap{d.softcap:g}")
    if d.sm_scale is not None:
        parts.append(f"sm{d.sm_scale:g}")
    if d.rope:
        parts.append(f"rope-{d.rope}-r{d.R}")
    if d.sinks:
        parts.append(f"sinks-{d.sinks}")
    return parts


def normal(std=1.0):
    return {"kind": "normal", "mean": 0.0, "std": std}


def attention_config(causal, wl=-1, wr=-1, sm_scale=None, softcap=0.0, rope=None, R=None, rotary_dim=True,
                     out_dtype=None, validate=False):
    """`config` of a gqa_fwd / gqa_varlen_fwd / gqa_paged_fwd case; options at their defaults are left out.
    With rope, rotary_dim says whether R is stated explicitly. The key order is fixed (it is in the files)."""
    config = {"is_causal": causal}
    if wl != -1:
        config["window_size_left"] = wl
    if wr != -1:
        config["window_size_right"] = wr
    if sm_scale is not None:
        config["sm_scale"] = sm_scale
    if softcap:
        config["softcap"] = softcap
    if rope:
        config["pos_encoding_mode"] = "rope"
        config["rope_layout"] = rope
        if rotary_dim:
            config["rotary_dim"] = R
    if out_dtype:
        config["out_dtype"] = out_dtype
    if validate:
        config["validate_inputs"] = True
    return config


# ----------------------------------------------------------------------------------------------------
# Scalar float encoder (stdlib; close to, but not always equal to, casegen_numeric.to_bits: see encode_bits)


def _e4m3_positive_values():
    out = []
    for c in range(0x7F):
        e, m = (c >> 3) & 0xF, c & 0x7
        out.append(m * 2.0 ** -9 if e == 0 else (1.0 + m / 8.0) * 2.0 ** (e - 7))
    return out


# Exact values of the e4m3 (float8_e4m3fn, SPEC.md §1.8) codes 0x00..0x7E: 0 .. 448, increasing.
E4M3_POS_VALUES = _e4m3_positive_values()


def encode_bits(dtype, x):
    """Storage bits of one finite float `x` (a Python float) as an INPUT value (paged_attention_cases' garbage
    pools). fp16: float64 -> fp16 in ONE round to nearest even (struct; |x| beyond fp16 raises), whereas
    casegen_numeric.to_bits goes float64 -> fp32 -> fp16 and can differ by one ulp on a double-rounding
    tie. bf16: float64 -> fp32 -> bf16, both RNE (as casegen_numeric). e4m3: the nearest finite code,
    saturating at 448, ties to the LOWER magnitude (as casegen_numeric.e4m3_bits_nearest; not the store
    conversion of SPEC.md §1.8, casegen_numeric.e4m3_bits_satfinite)."""
    if dtype == "fp16":
        return struct.unpack("<H", struct.pack("<e", x))[0]  # RNE
    if dtype == "bf16":
        b = struct.unpack("<I", struct.pack("<f", x))[0]
        return ((b + 0x7FFF + ((b >> 16) & 1)) >> 16) & 0xFFFF
    a = min(abs(x), 448.0)
    hi = min(bisect.bisect_left(E4M3_POS_VALUES, a), 0x7E)
    lo = max(hi - 1, 0)
    c = hi if abs(E4M3_POS_VALUES[hi] - a) < abs(a - E4M3_POS_VALUES[lo]) else lo
    return c | (0x80 if x < 0 else 0)


# ----------------------------------------------------------------------------------------------------
# JSON output


def dumps_indented(obj, indent=0):
    """Structure indented by one space a level, lists of numbers / strings on one line (golden files)."""
    pad, pad1 = " " * indent, " " * (indent + 1)
    if isinstance(obj, dict):
        if not obj:
            return "{}"
        items = [f"{pad1}{json.dumps(k)}: {dumps_indented(v, indent + 1)}" for k, v in obj.items()]
        return "{\n" + ",\n".join(items) + "\n" + pad + "}"
    if isinstance(obj, list):
        if all(not isinstance(x, (dict, list)) for x in obj):
            return json.dumps(obj, separators=(",", ":"), allow_nan=False)
        items = [f"{pad1}{dumps_indented(x, indent + 1)}" for x in obj]
        return "[\n" + ",\n".join(items) + "\n" + pad + "]"
    return json.dumps(obj, allow_nan=False)


def dumps_one_case_per_line(cases):
    """{"cases": [...]} with each case on one line (the GPU grids and error files)."""
    lines = ",\n".join("  " + json.dumps(c, separators=(", ", ": "), allow_nan=False) for c in cases)
    return "{\n \"cases\": [\n" + lines + "\n ]\n}\n"


def write_cases_text(path, cases, text, extra="", announce=True):
    """Writes `text` (the JSON of `cases`) to path after checking that case names are unique and that the
    text parses; creates the directory. announce: print "wrote PATH: N cases, B bytes" + extra."""
    names = [c["name"] for c in cases]
    assert len(set(names)) == len(names), "duplicate case names"
    json.loads(text)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)
    if announce:
        print(f"wrote {os.path.normpath(path)}: {len(cases)} cases, {len(text)} bytes{extra}")


def write_cases(path, cases, extra=""):
    """write_cases_text of `cases` one case per line (dumps_one_case_per_line)."""
    write_cases_text(path, cases, dumps_one_case_per_line(cases), extra)


def write_errors_per_op(out_dir, errors, ops):
    """OUT_DIR/<op>_errors.json for each op of ops: the cases of `errors` whose "op" is that op, in order."""
    for op in ops:
        write_cases(os.path.join(out_dir, f"{op}_errors.json"), [c for c in errors if c["op"] == op])


def write_golden(path, cases):
    """write_cases_text of the plain cases of [(case, ...), ...] as an indented golden file (dumps_indented)."""
    plain = [c for c, _ in cases]
    write_cases_text(path, plain, dumps_indented({"cases": plain}) + "\n")


# ----------------------------------------------------------------------------------------------------
# Command line


CASES_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "cases")


class _CaseParser(argparse.ArgumentParser):
    """An ArgumentParser whose --out defaults to OUT_DIR/<out_file> (so every generator takes --out-dir)."""
    out_file = None

    def parse_args(self, *args, **kwargs):
        ns = super().parse_args(*args, **kwargs)
        if self.out_file and ns.out is None:
            ns.out = os.path.join(ns.out_dir, self.out_file)
        return ns


def case_args(doc, count=None, out_dir=True, out_file=None):
    """The generators' parser: description = doc's first line; --out-dir (default tests/cases; the GPU files
    go to OUT_DIR/gpu); --out (default OUT_DIR/<out_file>) when out_file; --count (default count) when count
    is given. Every generator takes --out-dir, so that one loop can run them all into a folder (out_dir is
    kept for the callers' readability: False where --out names the one file). Returns the parser (callers
    may add arguments before parse_args())."""
    ap = _CaseParser(description=doc.split("\n")[0])
    ap.add_argument("--out-dir", default=CASES_DIR)
    if out_file:
        ap.out_file = out_file
        ap.add_argument("--out", default=None, help=f"default: OUT_DIR/{out_file}")
    if count is not None:
        ap.add_argument("--count", type=int, default=count)
    return ap


def errors_then_gpu_main(doc, op, build_errors, gpu_cases, count, gpu_default=False):
    """The main() of a generator: writes OUT_DIR/<op>_errors.json from build_errors(), and with --gpu (always
    when gpu_default: the op's kernels exist) OUT_DIR/gpu/<op>_grid.json and <op>_small.json from
    gpu_cases(--count) (a (grid, small) pair, or (grid, small, hopper grid, hopper small) written as
    <op>_hopper_grid.json and <op>_hopper_small.json too; --count defaults to count)."""
    ap = case_args(doc, count=count)
    ap.add_argument("--gpu", action="store_true", help="also write the GPU grid and sanitizer set")
    args = ap.parse_args()
    write_cases(os.path.join(args.out_dir, f"{op}_errors.json"), build_errors())
    if args.gpu or gpu_default:
        sets = gpu_cases(args.count)
        grid, small = sets[:2]
        write_cases(os.path.join(args.out_dir, "gpu", f"{op}_grid.json"), grid)
        write_cases(os.path.join(args.out_dir, "gpu", f"{op}_small.json"), small)
        if len(sets) == 4:  # and the hopper backend's copies
            write_cases(os.path.join(args.out_dir, "gpu", f"{op}_hopper_grid.json"), sets[2])
            write_cases(os.path.join(args.out_dir, "gpu", f"{op}_hopper_small.json"), sets[3])
    return 0


def pinned_to(case, backend="hopper", prefix="hopper/", suffix="", drop=()):
    """A copy of a generated case run on another backend: config["backend"] set (the portable grids say
    "portable"), the config keys in drop removed, the name prefixed and suffixed."""
    c = copy.deepcopy(case)
    c["config"]["backend"] = backend
    for k in drop:
        c["config"].pop(k, None)
    c["name"] = prefix + c["name"] + suffix
    return c


def derive_cases(gpu_dir, pairs, eligible, transform, extra=lambda name: []):
    """Writes case files derived from other generated ones: for each (source, destination) file name under
    gpu_dir, the source cases for which eligible(case) holds, through transform(case), plus extra(dst)."""
    for src, dst in pairs:
        with open(os.path.join(gpu_dir, src)) as f:
            cases = json.load(f)["cases"]
        out = [transform(c) for c in cases if eligible(c)] + extra(dst)
        with open(os.path.join(gpu_dir, dst), "w") as f:
            json.dump({"cases": out}, f, indent=1)
            f.write("\n")
        print(f"{dst}: {len(out)} cases")
