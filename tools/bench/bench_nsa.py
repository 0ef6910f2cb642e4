"""The Native Sparse Attention suites of tools/bench/bench_torch.py: nsa_compressed_fwd, nsa_topk,
nsa_selected_fwd and nsa_forward (the whole forward: the three branches and the gates), each beside a
PyTorch composition of the same math in the same process, on the same tensors.

Cases: one request (offsets [0, T], chunk_offsets [0, C], C = ceil(T / bs)) of T = 65536, 8192 and 16384
tokens (--quick: 8192), H 64, H_kv 4 (group 16), D 128, bs 64, S 16, window W 512, bf16, scale 1/sqrt(D).
k_cmp / v_cmp are random inputs (the compression MLP is the model's), the gates sigmoid(randn) in fp32.

Rows per case: `attnjit` (the op through a plan with the default backend; an op without a GPU kernel
raises ATTNJIT_UNSUPPORTED at plan time and its row says "skipped" instead of a time) and `torch` (the
composition below, all timed). nsa_forward adds `attnjit gqa_varlen_fwd dense causal` on the same q, k, v:
the full causal attention NSA replaces; `speedup_vs_dense` = its time / the attnjit NSA chain's time.
nsa_forward also times each stage of the same chain alone, in the same run, on the chain's bound calls and
tensors: `attnjit stage nsa_compressed_fwd`, `... nsa_topk`, `... nsa_selected_fwd`, `attnjit stage window`
(gqa_varlen_fwd) with their own FLOP counts, and `gate` (the gated sum, GB/s); each with
`share_of_chain` = its time / the whole chain's. When the chain does not plan, every stage row is 'skipped'.
nsa_selected_fwd reads the block indices of the torch nsa_topk composition (computed untimed), so it runs
whether or not nsa_topk has a kernel. Ours is checked against the composition: rel L2 of the output
(< 2e-2, else WRONG); for nsa_topk the fraction of (token, KV head) rows whose chosen set differs (near-ties
may break either way; WRONG above 1%).

The compositions (one request; queries in chunks so that 64k tokens fit; bf16 matmuls with fp32 logits,
fp32 softmax, bf16 probabilities @ V):
  nsa_compressed_fwd  logits against k_cmp[:t1 // bs], chunks c < (p + 1) // bs visible.
  nsa_topk            q * scale rounded to bf16; lse over the complete chunks; importance summed over the
                      group, 1 for the forced chunks 0, cur - 1, cur; torch.topk over c <= cur; -1 padding.
  nsa_selected_fwd    the selected blocks' key rows gathered per (token, KV head), keys <= p visible.
  window              keys [max(0, t0 - W + 1), t1) per chunk, band p - W < j <= p.
  nsa_forward         the four above and the gated sum g_cmp * o_cmp + g_sel * o_sel + g_win * o_win: `gate`,
                      on a GPU with triton one fused kernel (tools/bench/nsa_gate_triton.py: fp32 arithmetic,
                      one rounding, each operand read once), else three in-place bf16 torch ops (each computes
                      in fp32 and rounds once to bf16, the fp32 gates cast to bf16 first); the attnjit chain
                      calls the same function (attnjit has no elementwise op), timed with the chain.

FLOPs (per call, counted exactly for one request of L tokens; docs/performance.md):
  fwd ops     4 D per visible (query head, key) pair: nsa_compressed_fwd H sum_p floor((p + 1) / bs) chunk pairs,
              nsa_selected_fwd H sum_p (keys of the selected blocks <= p) (counted from the indices the call
              reads; the analytic count assumes the current block is among them, as nsa_topk forces),
              window H sum_p min(p + 1, W), dense causal H L (L + 1) / 2.
  nsa_topk    2 * 2 D per (query head, candidate chunk) pair, candidates c <= p // bs: two QK passes (the lse,
              then the importances).
  nsa_forward the sum of the four.
  gate        no FLOPs counted; GB/s over the bytes it moves (gate_bytes): fused, three branch reads, one write
              and the fp32 gates (`bytes_fused` in its row); torch ops, the branches read once, out written
              three times and read twice, the gates' casts and reads (`bytes`).

`python3 tools/bench/bench_nsa.py --self-test [--lib PATH]` checks the case list and the counts (closed forms
against brute-force loops and hand-worked figures) without torch or a GPU; where torch is importable (a CPU
build will do) it also checks the compositions against attnjit's CPU reference on a tiny case and runs the
suites' row logic end to end on the CPU, including the 'skipped' rows. `--list` prints the cases and counts.
"""
from __future__ import annotations

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_rows import per_second, result_row  # noqa: E402

try:
    import torch
    import bench_common
    from bench_common import COPY_CEILING_GBS, CHECK_TOL, add_row, output_fields, rel_l2, tflops_rate
    from bench_mla import bmm_fp32
except ImportError as _e:  # the cases, the counts and their self-test need no torch
    torch = bench_common = None
    _TORCH_ERROR = _e

SUITES = ("nsa_compressed_fwd", "nsa_topk", "nsa_selected_fwd", "nsa_forward")
TOPK_SET_TOL = 0.01  # fraction of rows whose selected set may differ from the composition's
# The device the suites allocate on, and keys merged into every attnjit config; the self-test points them at
# the CPU and the reference implementation to run the row logic without a GPU.
DEVICE = "cuda"
EXTRA_CONFIG = {}
STAGE_CONFIG = {}  # per stage key of _configs (bench_torch.py --op-config), over EXTRA_CONFIG


# ----------------------------------------------------------------------------------------------------
# Cases and counts (no torch)

def nsa_cases(quick):
    base = {"H": 64, "H_kv": 4, "D": 128, "bs": 64, "S": 16, "W": 512}
    return [dict(base, T=T) for T in ((8192,) if quick else (65536, 8192, 16384))]


def nsa_name(c):
    return f"T={c['T']} H={c['H']}/{c['H_kv']} D={c['D']} bs={c['bs']} S={c['S']} W={c['W']}"


def cmp_pairs(L, bs):
    """sum_{p < L} floor((p + 1) / bs): the complete chunks each token sees (per query head)."""
    q, r = divmod(L, bs)
    return bs * q * (q - 1) // 2 + q * (r + 1)


def topk_candidates(L, bs):
    """sum_{p < L} (p // bs + 1): the candidate chunks 0 .. cur of each token (per query head)."""
    q, r = divmod(L, bs)
    return L + bs * q * (q - 1) // 2 + q * r


def sel_pairs(L, bs, S):
    """sum_{p < L} of the keys <= p in min(S, cur + 1) distinct selected blocks that include the current one:
    (m - 1) bs full blocks and p % bs + 1 keys of block cur (per query head)."""
    return sum((min(S, p // bs + 1) - 1) * bs + p % bs + 1 for p in range(L))


def win_pairs(L, W):
    """sum_{p < L} min(p + 1, W): the causal window of W keys, the token itself included."""
    if L <= W:
        return L * (L + 1) // 2
    return W * (W + 1) // 2 + (L - W) * W


def dense_pairs(L):
    return L * (L + 1) // 2


def nsa_flops(c):
    """FLOPs per call of each op on the case (the selected count analytic; see the module docstring)."""
    L, H, D, bs = c["T"], c["H"], c["D"], c["bs"]
    f = {"nsa_compressed_fwd": 4 * D * H * cmp_pairs(L, bs),
         "nsa_topk": 2 * 2 * D * H * topk_candidates(L, bs),
         "nsa_selected_fwd": 4 * D * H * sel_pairs(L, bs, c["S"]),
         "window": 4 * D * H * win_pairs(L, c["W"]),
         "dense_causal": 4 * D * H * dense_pairs(L)}
    f["nsa_forward"] = f["nsa_compressed_fwd"] + f["nsa_topk"] + f["nsa_selected_fwd"] + f["window"]
    return f


def gate_bytes(c):
    """Bytes the gate's three bf16 ops move on the case, and the minimum a fused kernel would: (moved, fused).
    moved: o_cmp, o_sel, o_win read once, out written three times and read twice (8 [T, H, D] bf16 tensors),
    the fp32 gates read and cast to bf16, the bf16 gates read. fused: 3 reads + 1 write, the fp32 gates."""
    big, th = 2 * c["T"] * c["H"] * c["D"], c["T"] * c["H"]
    return 8 * big + 3 * th * (4 + 2 + 2), 4 * big + 3 * th * 4


def _brute(L, bs, S, W):
    cmp = cand = sel = win = 0
    for p in range(L):
        cur = p // bs
        cmp += sum(1 for c in range(cur + 1) if (c + 1) * bs <= p + 1)
        cand += cur + 1
        blocks = [cur] + list(range(min(S, cur + 1) - 1))  # any distinct set holding cur
        sel += sum(len([x for x in range(b * bs, (b + 1) * bs) if x <= p]) for b in blocks)
        win += sum(1 for j in range(p + 1) if j > p - W)
    return cmp, cand, sel, win


def self_test(lib=None):
    cases, quick = nsa_cases(False), nsa_cases(True)
    assert [c["T"] for c in cases] == [65536, 8192, 16384] and [c["T"] for c in quick] == [8192]
    assert all((c["H"], c["H_kv"], c["D"], c["bs"], c["S"], c["W"]) == (64, 4, 128, 64, 16, 512) for c in cases)
    assert len({nsa_name(c) for c in cases}) == 3
    for L, bs, S, W in ((1, 4, 3, 2), (3, 4, 3, 5), (13, 4, 3, 5), (64, 8, 2, 7), (100, 7, 5, 30), (37, 1, 4, 40)):
        got = (cmp_pairs(L, bs), topk_candidates(L, bs), sel_pairs(L, bs, S), win_pairs(L, W))
        assert got == _brute(L, bs, S, W), (L, bs, S, W, got, _brute(L, bs, S, W))
    assert dense_pairs(5) == 15
    # Hand-worked, T 65536, bs 64 (q = 1024 chunks, r = 0), S 16, W 512, H 64, D 128 (4 D H = 32768):
    #   cmp: 64 * 1024 * 1023 / 2 + 1024 = 33522688
    #   candidates: 65536 + 64 * 1024 * 1023 / 2 = 33587200
    #   selected: tokens p < 960 (cur + 1 <= S) see all p + 1 keys: 960 * 961 / 2 = 461280; the other 64576
    #             tokens see 15 full blocks and p % 64 + 1 keys of their own (1009 periods of 64):
    #             64576 * 961 + 1009 * 2016 = 64091680; together 64552960
    #   window: 512 * 513 / 2 + 65024 * 512 = 33423616; dense: 65536 * 65537 / 2 = 2147516416
    L = 65536
    assert cmp_pairs(L, 64) == 33522688 and topk_candidates(L, 64) == 33587200
    assert sel_pairs(L, 64, 16) == 461280 + 64576 * 961 + 1009 * 2016 == 64552960
    assert win_pairs(L, 512) == 33423616 and dense_pairs(L) == 2147516416
    f = nsa_flops(cases[0])
    assert f["nsa_compressed_fwd"] == 32768 * 33522688 and f["nsa_topk"] == 32768 * 33587200
    assert f["nsa_selected_fwd"] == 32768 * 64552960 and f["window"] == 32768 * 33423616
    assert f["nsa_forward"] == 32768 * (33522688 + 33587200 + 64552960 + 33423616)
    assert f["dense_causal"] == 32768 * 2147516416
    # The chain does 7.7% of the dense causal work at 64k (165086464 / 2147516416 pairs).
    assert abs(f["nsa_forward"] / f["dense_causal"] - 0.07687) < 1e-4
    # The gate at 64k: one [T, H, D] bf16 tensor is 65536 * 64 * 128 * 2 = 1073741824 bytes, one [T, H] gate
    # 4194304 elements; moved 8 tensors + 3 gates at 4 + 2 + 2 bytes, fused 4 tensors + 3 fp32 gates.
    assert gate_bytes(cases[0]) == (8 * 1073741824 + 3 * 4194304 * 8, 4 * 1073741824 + 3 * 4194304 * 4)
    assert gate_bytes(cases[0]) == (8690597888, 4345298944)
    print("counts: ok (3 + 1 NSA cases; closed forms match brute force on 6 small shapes)")
    if torch is None:
        print(f"compositions: not checked (no torch: {_TORCH_ERROR}); they run on the GPU host")
        return 0
    if lib is None:
        try:
            import attnjit_ctypes as aj
            lib = aj.find_library(None)
        except Exception as e:  # noqa: BLE001
            print(f"compositions: not checked against attnjit ({type(e).__name__}: {e})")
            return 0
    _check_compositions(lib)
    _check_rows(lib)
    return 0


def _tiny():
    return {"T": 150, "H": 32, "H_kv": 2, "D": 64, "bs": 8, "S": 4, "W": 20}


def _check_compositions(lib):
    """The compositions on the CPU against attnjit's reference on a tiny case (one request of 150 tokens):
    each branch by rel L2, the selection set by set, the whole forward."""
    import attnjit_ctypes as aj
    c = _tiny()
    t = nsa_inputs(c, "cpu")
    scale = c["D"] ** -0.5
    cfgs = {k: dict(v, impl="reference") for k, v in _configs(c, scale).items()}
    rt = aj.Runtime(None, lib=lib)
    try:
        def ours(op, cfg_key, out, blocks=None):
            rt.run("gqa_varlen_fwd" if cfg_key in ("window", "dense_causal") else op, cfgs[cfg_key],
                   _tensors(t, cfg_key, out, blocks))
            return out
        T, H_kv, S = c["T"], c["H_kv"], c["S"]
        blocks = ours("nsa_topk", "nsa_topk", torch.empty(T, H_kv, S, dtype=torch.int32))
        peer_blocks = torch_topk(t["q"], t["k_cmp"], c["bs"], S, scale, chunk=64)
        same = (torch.sort(blocks, -1).values == torch.sort(peer_blocks, -1).values).all(-1)
        assert bool(same.all()), f"nsa_topk composition: {int((~same).sum())} rows differ"
        assert bool((peer_blocks == -1).any()) and bool((peer_blocks[-1] >= 0).all())
        pairs = [("nsa_compressed_fwd", torch_compressed(t["q"], t["k_cmp"], t["v_cmp"], c["bs"], scale, chunk=64),
                  ours("nsa_compressed_fwd", "nsa_compressed_fwd", torch.empty_like(t["q"]))),
                 ("nsa_selected_fwd", torch_selected(t["q"], t["k"], t["v"], blocks, c["bs"], scale, chunk=32),
                  ours("nsa_selected_fwd", "nsa_selected_fwd", torch.empty_like(t["q"]), blocks)),
                 ("window", torch_window(t["q"], t["k"], t["v"], c["W"], scale, chunk=64),
                  ours("window", "window", torch.empty_like(t["q"])))]
        for name, got, ref in pairs:
            err = rel_l2(got, ref)
            assert err < 1e-2, (name, err)
        o_cmp, o_sel, o_win = (ref for _, _, ref in pairs)
        o = gate(t, o_cmp, o_sel, o_win)
        err = rel_l2(torch_forward(t, c, scale), o)
        assert err < 1e-2, ("nsa_forward", err)
        # The gate's three bf16 roundings against one fp32 sum of the same bf16 branches and fp32 gates; into
        # a preallocated output and in place into o_cmp, the same bytes; o_sel and o_win refused as out.
        exact = sum(t[g].float()[..., None] * x.float() for g, x in zip(("g_cmp", "g_sel", "g_win"), (o_cmp, o_sel, o_win)))
        assert o.dtype == torch.bfloat16 and rel_l2(o, exact) < 5e-3, rel_l2(o, exact)
        into = torch.full_like(o, float("nan"))
        assert gate(t, o_cmp, o_sel, o_win, out=into) is into and torch.equal(into, o)
        for bad in (o_sel, o_win):
            try:
                gate(t, o_cmp, o_sel, o_win, out=bad)
                raise AssertionError("gate accepted o_sel / o_win as out")
            except ValueError:
                pass
        in_place = o_cmp.clone()
        assert gate(t, in_place, o_sel, o_win, out=in_place) is in_place and torch.equal(in_place, o)
        assert selected_pairs_of(blocks, c["bs"], c["H"]) == c["H"] * sel_pairs(c["T"], c["bs"], S)
    finally:
        rt.close()
    print("compositions: ok (torch on the CPU against attnjit's reference: 3 branches, the selection, the forward)")


def _check_rows(lib):
    """The suites' row logic end to end on the tiny case: the reference impl as ours, CPU timers; then once
    more with nsa_topk refusing to plan (ATTNJIT_UNSUPPORTED), which must give 'skipped' rows."""
    global DEVICE, EXTRA_CONFIG
    import types
    import attnjit_ctypes as aj

    def cpu_bench(fn, min_reps=3, **_):
        t0 = time.perf_counter()
        for _ in range(min_reps):
            fn()
        return {"ms": (time.perf_counter() - t0) * 1e3 / min_reps, "min_ms": None, "reps": min_reps,
                "method": "cpu timer (self-test)"}

    class NoTopk:
        def __init__(self, rt):
            self.rt = rt

        def plan(self, op, cfg, tensors):
            if op == "nsa_topk":
                raise aj.AttnjitError("attnjit_plan_create", 2, "nsa_topk: unsupported: impl 'kernel' (backend "
                                      "'auto'): no GPU kernel is built yet for this op")
            return self.rt.plan(op, cfg, tensors)

    saved = (DEVICE, EXTRA_CONFIG, bench_common.bench, list(bench_common.ROWS))
    rt = aj.Runtime(None, lib=lib)
    try:
        DEVICE, EXTRA_CONFIG, bench_common.bench = "cpu", {"impl": "reference"}, cpu_bench
        bench_common.ROWS.clear()
        args = types.SimpleNamespace(min_reps=2, rt_error=None)
        for suite in SUITES:
            run_nsa_case(rt, suite, _tiny(), args)
        rows = list(bench_common.ROWS)
        bench_common.ROWS.clear()
        for suite in ("nsa_topk", "nsa_forward"):
            run_nsa_case(NoTopk(rt), suite, _tiny(), args)
        skipped = list(bench_common.ROWS)
    finally:
        DEVICE, EXTRA_CONFIG, bench_common.bench = saved[0], saved[1], saved[2]
        bench_common.ROWS[:] = saved[3]
        rt.close()
    stage_impls = ["attnjit stage nsa_compressed_fwd", "attnjit stage nsa_topk", "attnjit stage nsa_selected_fwd",
                   "attnjit stage window", "gate"]
    assert [(r["suite"], r["impl"]) for r in rows] == [
        ("nsa_compressed_fwd", "attnjit"), ("nsa_compressed_fwd", "torch"), ("nsa_topk", "attnjit"),
        ("nsa_topk", "torch"), ("nsa_selected_fwd", "attnjit"), ("nsa_selected_fwd", "torch"),
        ("nsa_forward", "attnjit")] + [("nsa_forward", impl) for impl in stage_impls] + [
        ("nsa_forward", "attnjit gqa_varlen_fwd dense causal"), ("nsa_forward", "torch")]
    assert all(not r.get("error") and r["ms"] > 0 for r in rows), [r.get("error") for r in rows]
    assert all(r["tflops"] > 0 for r in rows if r["impl"] != "gate")
    assert all(r["check"] == "ok" and r["ratio"] > 0 for r in rows if r["impl"] == "attnjit"), rows
    fwd = next(r for r in rows if r["suite"] == "nsa_forward" and r["impl"] == "attnjit")
    assert fwd["speedup_vs_dense"] > 0 and fwd["err_peer"] < 1e-2
    f = nsa_flops(_tiny())
    stages = {r["impl"]: r for r in rows if r["impl"] in stage_impls}
    for key in ("nsa_compressed_fwd", "nsa_topk", "nsa_selected_fwd", "window"):
        r = stages["attnjit stage " + key]
        # the row's TFLOP/s is its own op's count over its own time
        assert abs(r["tflops"] - f[key] / (r["ms"] * 1e-3) / 1e12) <= 1e-9 * r["tflops"], (key, r)
    g = stages["gate"]
    assert "tflops" not in g and g["gbs"] > 0 and (g["bytes"], g["bytes_fused"]) == gate_bytes(_tiny())
    assert all(r["share_of_chain"] > 0 and "ratio" not in r and "speedup_vs_dense" not in r for r in stages.values())
    assert all("share_of_chain" not in r for r in rows if r["impl"] not in stage_impls)
    assert [(r["suite"], r["impl"], r.get("check")) for r in skipped] == [
        ("nsa_topk", "attnjit", "skipped"), ("nsa_topk", "torch", None), ("nsa_forward", "attnjit", "skipped")] + [
        ("nsa_forward", impl, "skipped") for impl in stage_impls] + [
        ("nsa_forward", "attnjit gqa_varlen_fwd dense causal", None), ("nsa_forward", "torch", None)]
    assert all("skipped: nsa_topk has no GPU kernel yet" in r["error"] and r["skipped_op"] == "nsa_topk"
               and "ms" not in r for r in skipped if r.get("check") == "skipped")
    print("rows: ok (4 suites end to end on the CPU reference, nsa_forward with its 5 stage rows; an op without a "
          "kernel gives 'skipped' rows, the stage rows too)")


def list_cases(quick=False):
    for c in nsa_cases(quick):
        f = nsa_flops(c)
        moved, fused = gate_bytes(c)
        print(nsa_name(c) + ": " + ", ".join(f"{k} {v / 1e12:.3f} TFLOP" for k, v in f.items())
              + f"; gate {moved / 1e9:.2f} GB moved ({fused / 1e9:.2f} fused)")


# ----------------------------------------------------------------------------------------------------
# Inputs and the PyTorch compositions (one request: token t is at position t)

def nsa_inputs(c, device, seed=4242):
    g = torch.Generator(device=device).manual_seed(seed)
    T, H, H_kv, D, bs = c["T"], c["H"], c["H_kv"], c["D"], c["bs"]
    C = -(-T // bs)

    def randn(*shape):
        return torch.randn(*shape, generator=g, device=device).to(torch.bfloat16)

    def i32(x):
        return torch.tensor(x, dtype=torch.int32, device=device)

    t = {"q": randn(T, H, D), "k": randn(T, H_kv, D), "v": randn(T, H_kv, D), "k_cmp": randn(C, H_kv, D),
         "v_cmp": randn(C, H_kv, D), "offsets": i32([0, T]), "chunk_offsets": i32([0, C])}
    pos = torch.arange(T, dtype=torch.int32, device=device)
    t["token_indices"] = torch.stack([torch.zeros_like(pos), pos], dim=1).contiguous()
    t["block_counts"] = torch.full((T, H_kv), c["S"], dtype=torch.int32, device=device)
    for name in ("g_cmp", "g_sel", "g_win"):
        t[name] = torch.sigmoid(torch.randn(T, H, generator=g, device=device))
    return t


def _heads_major(x, H_kv):
    """[Q, H, D] -> [H_kv, Q * G, D]: the rows of one KV head's group together."""
    Q, H, D = x.shape
    return x.view(Q, H_kv, H // H_kv, D).permute(1, 0, 2, 3).reshape(H_kv, Q * (H // H_kv), D)


def _tokens_major(x, Q, H):
    """[H_kv, Q * G, D] -> [Q, H, D]."""
    H_kv, _, D = x.shape
    return x.view(H_kv, Q, H // H_kv, D).permute(1, 0, 2, 3).reshape(Q, H, D)


def _softmax_pv(s, vis, v, dtype):
    """Masked fp32 softmax (rows without a visible key: zeros), bf16 probabilities @ v."""
    s.masked_fill_(~vis, float("-inf"))
    p = torch.softmax(s, dim=-1).nan_to_num_(0.0).to(dtype)
    return torch.bmm(p.view(v.shape[0], -1, v.shape[1]), v)


def torch_compressed(q, k_cmp, v_cmp, bs, scale, chunk=2048):
    T, H, D = q.shape
    H_kv = k_cmp.shape[1]
    o = torch.empty_like(q)
    for t0 in range(0, T, chunk):
        t1 = min(T, t0 + chunk)
        Q, nc = t1 - t0, t1 // bs
        if nc == 0:
            o[t0:t1].zero_()
            continue
        s = bmm_fp32(_heads_major(q[t0:t1], H_kv), k_cmp[:nc].permute(1, 2, 0)).mul_(scale)
        s = s.view(H_kv, Q, H // H_kv, nc)
        p = torch.arange(t0, t1, device=q.device)
        vis = torch.arange(nc, device=q.device)[None, :] < ((p + 1) // bs)[:, None]
        out = _softmax_pv(s, vis[None, :, None, :], v_cmp[:nc].permute(1, 0, 2), q.dtype)
        o[t0:t1] = _tokens_major(out, Q, H)
    return o


def torch_topk(q, k_cmp, bs, S, scale, chunk=1024):
    T, H, D = q.shape
    H_kv = k_cmp.shape[1]
    G = H // H_kv
    out = torch.full((T, H_kv, S), -1, dtype=torch.int32, device=q.device)
    for t0 in range(0, T, chunk):
        t1 = min(T, t0 + chunk)
        Q, nc = t1 - t0, (t1 - 1) // bs + 1
        qs = (q[t0:t1].float() * scale).to(q.dtype)  # step 1: q * scale rounded to the input dtype
        s = bmm_fp32(_heads_major(qs, H_kv), k_cmp[:nc].permute(1, 2, 0)).view(H_kv, Q, G, nc)
        p = torch.arange(t0, t1, device=q.device)[:, None]
        cidx = torch.arange(nc, device=q.device)[None, :]
        cur = p // bs
        complete = cidx < (p + 1) // bs
        lse = torch.logsumexp(s.masked_fill(~complete[None, :, None, :], float("-inf")), dim=-1, keepdim=True)
        lse = torch.where(torch.isinf(lse), torch.zeros_like(lse), lse)  # no complete chunk: 0
        forced = (cidx == 0) | (cidx == cur - 1) | (cidx == cur)
        w = torch.where(forced[None, :, None, :], torch.ones_like(s), torch.exp(s - lse))
        imp = w.sum(dim=2).masked_fill_(~(cidx <= cur)[None], float("-inf"))  # [H_kv, Q, nc]
        kk = min(S, nc)
        val, idx = imp.topk(kk, dim=-1)
        idx = torch.where(torch.isneginf(val), torch.full_like(idx, -1), idx)
        out[t0:t1, :, :kk] = idx.permute(1, 0, 2).to(torch.int32)
    return out


def torch_selected(q, k, v, block_indices, bs, scale, chunk=256):
    T, H, D = q.shape
    H_kv, S = k.shape[1], block_indices.shape[2]
    G, K = H // H_kv, S * bs
    kh, vh = k.permute(1, 0, 2), v.permute(1, 0, 2)  # [H_kv, T, D]
    r_idx = torch.arange(H_kv, device=q.device)[None, :, None]
    o = torch.empty_like(q)
    for t0 in range(0, T, chunk):
        t1 = min(T, t0 + chunk)
        Q = t1 - t0
        bi = block_indices[t0:t1].long()  # [Q, H_kv, S]
        tok = (bi[..., None] * bs + torch.arange(bs, device=q.device)).reshape(Q, H_kv, K)
        p = torch.arange(t0, t1, device=q.device)[:, None, None]
        valid = (bi[..., None] >= 0).expand(Q, H_kv, S, bs).reshape(Q, H_kv, K) & (tok <= p)
        tok = tok.clamp_(0, T - 1)
        ks, vs = kh[r_idx, tok], vh[r_idx, tok]  # [Q, H_kv, K, D]
        qc = q[t0:t1].view(Q * H_kv, G, D)
        s = bmm_fp32(qc, ks.view(Q * H_kv, K, D).transpose(1, 2)).mul_(scale)  # [Q H_kv, G, K]
        out = _softmax_pv(s, valid.view(Q * H_kv, 1, K), vs.view(Q * H_kv, K, D), q.dtype)
        o[t0:t1] = out.view(Q, H, D)
    return o


def torch_window(q, k, v, W, scale, chunk=1024):
    T, H, D = q.shape
    H_kv = k.shape[1]
    o = torch.empty_like(q)
    for t0 in range(0, T, chunk):
        t1 = min(T, t0 + chunk)
        Q, j0 = t1 - t0, max(0, t0 - W + 1)
        L = t1 - j0
        s = bmm_fp32(_heads_major(q[t0:t1], H_kv), k[j0:t1].permute(1, 2, 0)).mul_(scale)
        s = s.view(H_kv, Q, H // H_kv, L)
        p = torch.arange(t0, t1, device=q.device)[:, None]
        j = torch.arange(j0, t1, device=q.device)[None, :]
        vis = (j <= p) & (j > p - W)
        out = _softmax_pv(s, vis[None, :, None, :], v[j0:t1].permute(1, 0, 2), q.dtype)
        o[t0:t1] = _tokens_major(out, Q, H)
    return o


def _fused_gate(on_cuda=None):
    """nsa_gate_triton.fused_gate for CUDA tensors where triton is there, else None (the CPU self-test)."""
    if not (DEVICE == "cuda" if on_cuda is None else on_cuda):
        return None
    try:
        from nsa_gate_triton import fused_gate
    except Exception:  # noqa: BLE001
        return None
    return fused_gate


def gate_impl():
    """How gate() computes on this host: 'triton' (one fused kernel) or 'torch' (three bf16 ops)."""
    return "triton" if _fused_gate() is not None else "torch"


def gate(t, o_cmp, o_sel, o_win, out=None):
    """The gated sum g_cmp * o_cmp + g_sel * o_sel + g_win * o_win of the branch outputs [T, H, D], gates
    t["g_*"] [T, H], written into `out` (a preallocated [T, H, D] tensor of the branches' dtype; None: a new
    one; o_cmp itself is allowed, o_sel and o_win are not, being read after the first op) and returned.

    On a GPU with triton: one fused kernel (tools/bench/nsa_gate_triton.py), fp32 arithmetic, one rounding,
    every operand read once. Elsewhere three elementwise torch ops in the branches' dtype, no full-size
    temporary: out = g_cmp * o_cmp (mul), out += g_sel * o_sel, out += g_win * o_win (addcmul_), the gates
    cast to the branches' dtype first ([T, H]: 3 small casts; the only rounding of the gates); torch's bf16
    elementwise ops compute in fp32 and round once per op, so that sum is rounded three times. The torch
    composition and the attnjit chain both call this."""
    if out is None:
        out = torch.empty_like(o_cmp)
    if out.data_ptr() in (o_sel.data_ptr(), o_win.data_ptr()):
        raise ValueError("gate: out may alias o_cmp only")
    fused = _fused_gate(o_cmp.is_cuda)
    if fused is not None:
        return fused(o_cmp, o_sel, o_win, t["g_cmp"], t["g_sel"], t["g_win"], out)
    g_cmp, g_sel, g_win = (t[n].to(o_cmp.dtype)[..., None] for n in ("g_cmp", "g_sel", "g_win"))
    torch.mul(o_cmp, g_cmp, out=out)
    return out.addcmul_(o_sel, g_sel).addcmul_(o_win, g_win)


def torch_forward(t, c, scale):
    o_cmp = torch_compressed(t["q"], t["k_cmp"], t["v_cmp"], c["bs"], scale)
    blocks = torch_topk(t["q"], t["k_cmp"], c["bs"], c["S"], scale)
    o_sel = torch_selected(t["q"], t["k"], t["v"], blocks, c["bs"], scale)
    o_win = torch_window(t["q"], t["k"], t["v"], c["W"], scale)
    return gate(t, o_cmp, o_sel, o_win, out=o_cmp)  # o_cmp is this call's own: gate in place


def selected_pairs_of(block_indices, bs, H):
    """Visible (query head, key) pairs of nsa_selected_fwd over these indices (one request, causal, all S
    slots read): per slot max(0, min((beta + 1) bs, p + 1) - beta bs) for beta >= 0, times the group."""
    T, H_kv, S = block_indices.shape
    p = torch.arange(T, device=block_indices.device)[:, None, None]
    b = block_indices.long()
    keys = (torch.minimum((b + 1) * bs, p + 1) - b * bs).clamp_(min=0)
    keys = torch.where(b >= 0, keys, torch.zeros_like(keys))
    return int(keys.sum().item()) * (H // H_kv)


# ----------------------------------------------------------------------------------------------------
# Rows

def _sync():
    if DEVICE == "cuda":
        torch.cuda.synchronize()


def _is_unsupported(e):
    return getattr(e, "status_name", None) == "ATTNJIT_UNSUPPORTED"


def _configs(c, scale):
    cfgs = {"nsa_compressed_fwd": {"scale": scale, "bs": c["bs"]},
            "nsa_topk": {"scale": scale, "selected_block_num": c["S"], "bs": c["bs"]},
            "nsa_selected_fwd": {"is_causal": True, "scale": scale, "block_size": c["bs"]},
            "window": {"is_causal": True, "window_size_left": c["W"] - 1, "sm_scale": scale},
            "dense_causal": {"is_causal": True, "sm_scale": scale}}
    unknown = set(STAGE_CONFIG) - set(cfgs)
    if unknown:
        raise ValueError(f"--op-config: unknown stages {sorted(unknown)}; expected some of {sorted(cfgs)}")
    return {k: {**v, **EXTRA_CONFIG, **STAGE_CONFIG.get(k, {})} for k, v in cfgs.items()}


def _tensors(t, op, out, blocks=None):
    meta = {n: t[n] for n in ("offsets", "chunk_offsets", "token_indices")}
    if op == "nsa_compressed_fwd":
        return dict(q=t["q"], k_cmp=t["k_cmp"], v_cmp=t["v_cmp"], o=out, **meta)
    if op == "nsa_topk":
        return dict(q=t["q"], k_cmp=t["k_cmp"], block_indices=out, **meta)
    if op == "nsa_selected_fwd":
        return dict(q=t["q"], k=t["k"], v=t["v"], block_indices=blocks, block_counts=t["block_counts"], o=out,
                    offsets=t["offsets"], token_indices=t["token_indices"])
    # window, dense_causal: gqa_varlen_fwd with the packed offsets as cu_seqlens
    return dict(q=t["q"], k=t["k"], v=t["v"], cu_seqlens_q=t["offsets"], cu_seqlens_kv=t["offsets"], o=out)


class _Chain:
    """Plans for a list of (op name, attnjit op, config, tensors); bound calls; closed together. A plan
    failing with ATTNJIT_UNSUPPORTED is recorded in `skipped` (op, message) and no call is bound."""

    def __init__(self, rt, stages):
        self.plans, self.calls, self.skipped, self.plan_s = [], [], None, 0.0
        for label, op, cfg, tensors in stages:
            try:
                t0 = time.perf_counter()
                plan = rt.plan(op, cfg, tensors)
                self.plan_s += time.perf_counter() - t0
            except Exception as e:  # noqa: BLE001
                if not _is_unsupported(e):
                    self.close()
                    raise
                self.skipped = (label, getattr(e, "message", str(e)))
                self.close()
                return
            self.plans.append(plan)
            self.calls.append(plan.bind(tensors))

    def __call__(self):
        for call in self.calls:
            call()

    def close(self):
        for p in self.plans:
            p.close()
        self.plans, self.calls = [], []


def run_nsa_case(rt, suite, c, args):
    """One case of one NSA suite: the torch composition, then attnjit (and for nsa_forward the dense row)."""
    t = nsa_inputs(c, DEVICE)
    scale = c["D"] ** -0.5
    name, cfgs, flops = nsa_name(c), _configs(c, scale), nsa_flops(c)
    params = dict(c, dtype="bf16", scale=scale, flops={k: v for k, v in flops.items()})
    peer = "torch"
    rows = []

    def row(impl, tm=None, out=None, note="", error=None, extra=None, fl=None, rate=None):
        if rate is None:
            rate = tflops_rate(fl if fl is not None else flops[suite])
        r = result_row(suite, name, impl, params, peer, tm, note, error, extra, rate=rate,
                       out_fields=output_fields(out, None))
        rows.append(r)
        return r

    q, k_cmp = t["q"], t["k_cmp"]
    # The block indices nsa_selected_fwd reads (and the nsa_topk peer's output): the torch composition's.
    peer_blocks = torch_topk(q, k_cmp, c["bs"], c["S"], scale) if suite in ("nsa_topk", "nsa_selected_fwd") else None
    if suite == "nsa_selected_fwd":
        flops = dict(flops, nsa_selected_fwd=4 * c["D"] * selected_pairs_of(peer_blocks, c["bs"], c["H"]))
        params["flops"]["nsa_selected_fwd_counted"] = flops["nsa_selected_fwd"]
    peer_fn = {
        "nsa_compressed_fwd": lambda: torch_compressed(q, k_cmp, t["v_cmp"], c["bs"], scale),
        "nsa_topk": lambda: torch_topk(q, k_cmp, c["bs"], c["S"], scale),
        "nsa_selected_fwd": lambda: torch_selected(q, t["k"], t["v"], peer_blocks, c["bs"], scale),
        "nsa_forward": lambda: torch_forward(t, c, scale),
    }[suite]
    peer_out = None
    try:
        peer_out = peer_fn() if suite != "nsa_topk" else peer_blocks
        _sync()
        tm = bench_common.bench(peer_fn, args.min_reps)
        row(peer, tm, None if suite == "nsa_topk" else peer_out,
            f"torch composition, queries in chunks; {c['T']} tokens")
    except Exception as e:  # noqa: BLE001
        row(peer, error=f"{type(e).__name__}: {e}")

    # attnjit
    stage_keys = ("nsa_compressed_fwd", "nsa_topk", "nsa_selected_fwd", "window")

    def stage_rows_failed(error, extra=None):  # the stage rows of a chain that did not run
        for key in stage_keys:
            row(f"attnjit stage {key}", error=error, extra=extra, fl=flops[key])
        row("gate", error=error, extra=extra, rate=gate_rate)

    moved, fused = gate_bytes(c)

    def gate_rate(r, tm):
        r["gbs"] = per_second(fused if gate_impl() == "triton" else moved, tm, 1e9)
        r["frac_of_copy_ceiling"] = r["gbs"] / COPY_CEILING_GBS

    def time_stages(stage_fns, chain_ms):
        """Each stage of the timed chain alone: its bound calls on the chain's tensors (a stage reads what
        the chain left, so selected reads the chain's indices), then the gate into the same output."""
        for key, fn in stage_fns:
            impl = "gate" if key == "gate" else f"attnjit stage {key}"
            kw = {"rate": gate_rate} if key == "gate" else {"fl": flops[key]}
            try:
                tm = bench_common.bench(fn, args.min_reps)
                extra = {"share_of_chain": tm["ms"] / chain_ms}
                if key == "gate":
                    extra.update(bytes=moved, bytes_fused=fused)
                what = {"window": f"gqa_varlen_fwd, W {c['W']}",
                        "gate": "one fused triton kernel" if gate_impl() == "triton" else "3 in-place bf16 torch ops"}.get(key)
                row(impl, tm, note=f"{100 * extra['share_of_chain']:.0f}% of the chain" + (
                    f"; {what}" if what else ""), extra=extra, **kw)
            except Exception as e:  # noqa: BLE001
                row(impl, error=f"{type(e).__name__}: {e}", **kw)

    if rt is None:
        row("attnjit", error=args.rt_error)
        if suite == "nsa_forward":
            stage_rows_failed(args.rt_error)
    else:
        T, H_kv, S = c["T"], c["H_kv"], c["S"]
        if suite == "nsa_topk":
            out = torch.empty(T, H_kv, S, dtype=torch.int32, device=DEVICE)
            stages = [("nsa_topk", "nsa_topk", cfgs["nsa_topk"], _tensors(t, "nsa_topk", out))]
            finish = None
            poisoned = []
        elif suite != "nsa_forward":
            out = torch.empty_like(q)
            stages = [(suite, suite, cfgs[suite], _tensors(t, suite, out, peer_blocks))]
            finish = None
            poisoned = [out]
        else:
            out = torch.empty_like(q)  # the gated sum
            o_cmp, o_sel, o_win = torch.empty_like(q), torch.empty_like(q), torch.empty_like(q)
            blocks = torch.empty(T, H_kv, S, dtype=torch.int32, device=DEVICE)
            stages = [("nsa_compressed_fwd", "nsa_compressed_fwd", cfgs["nsa_compressed_fwd"],
                       _tensors(t, "nsa_compressed_fwd", o_cmp)),
                      ("nsa_topk", "nsa_topk", cfgs["nsa_topk"], _tensors(t, "nsa_topk", blocks)),
                      ("nsa_selected_fwd", "nsa_selected_fwd", cfgs["nsa_selected_fwd"],
                       _tensors(t, "nsa_selected_fwd", o_sel, blocks)),
                      ("window (gqa_varlen_fwd)", "gqa_varlen_fwd", cfgs["window"], _tensors(t, "window", o_win))]
            poisoned = [out, o_cmp, o_sel, o_win]

            def finish():
                gate(t, o_cmp, o_sel, o_win, out=out)
        chain = None
        try:
            chain = _Chain(rt, stages)
            if chain.skipped is not None:
                op, msg = chain.skipped
                skip = (f"skipped: {op} has no GPU kernel yet (ATTNJIT_UNSUPPORTED: {msg})",
                        {"check": "skipped", "skipped_op": op})
                row("attnjit", error=skip[0], extra=skip[1])
                if suite == "nsa_forward":
                    stage_rows_failed(*skip)
            else:
                def ours():
                    chain()
                    if finish is not None:
                        finish()
                for o_ in poisoned:
                    o_.fill_(float("nan"))  # poison: an unwritten element shows as NaN
                if suite == "nsa_topk":
                    out.fill_(-2)
                ours()
                _sync()
                got = out.clone()
                extra = {"plan_create_s": chain.plan_s}
                if suite == "nsa_topk":
                    differ = None
                    if peer_out is not None:
                        a, b = torch.sort(got, dim=-1).values, torch.sort(peer_out, dim=-1).values
                        differ = (a != b).any(dim=-1).float().mean().item()
                        extra["rows_differ"] = differ
                        extra["check"] = "ok" if differ <= TOPK_SET_TOL and not (got == -2).any() else "WRONG"
                    note = f"rows whose set differs from torch's: {differ}"
                    got_out = None
                else:
                    if peer_out is not None:
                        extra["err_peer"] = rel_l2(got, peer_out)
                        nan = int(torch.isnan(got).sum().item())
                        extra["check"] = "ok" if extra["err_peer"] < CHECK_TOL and not nan else "WRONG"
                    note = (f"chain + gate ({gate_impl()}), all timed" if suite == "nsa_forward" else "")
                    got_out = got
                tm = bench_common.bench(ours, args.min_reps)
                row("attnjit", tm, got_out, (note + "; " if note else "") + f"plan_create {chain.plan_s * 1e3:.0f} ms (incl. JIT)",
                    extra=extra)
                if suite == "nsa_forward":
                    time_stages(list(zip(stage_keys, chain.calls)) + [("gate", finish)], tm["ms"])
        except Exception as e:  # noqa: BLE001
            row("attnjit", error=f"{type(e).__name__}: {e}")
            if suite == "nsa_forward" and not any(r["impl"].startswith("attnjit stage") for r in rows):
                stage_rows_failed(f"the chain failed: {type(e).__name__}: {e}")
        finally:
            if chain is not None:
                chain.close()

        if suite == "nsa_forward":  # the dense causal attention over the same tokens
            dense = None
            try:
                o_d = torch.empty_like(q)
                dense = _Chain(rt, [("dense", "gqa_varlen_fwd", cfgs["dense_causal"], _tensors(t, "dense", o_d))])
                if dense.skipped is not None:
                    row("attnjit gqa_varlen_fwd dense causal", error=f"skipped: {dense.skipped[1]}",
                        fl=flops["dense_causal"])
                else:
                    dense()
                    _sync()
                    tm = bench_common.bench(dense, args.min_reps)
                    row("attnjit gqa_varlen_fwd dense causal", tm, o_d.clone(),
                        "full causal attention on the same q, k, v (what NSA replaces)", fl=flops["dense_causal"])
            except Exception as e:  # noqa: BLE001
                row("attnjit gqa_varlen_fwd dense causal", error=f"{type(e).__name__}: {e}", fl=flops["dense_causal"])
            finally:
                if dense is not None:
                    dense.close()

    # Ratios: torch time / row time for the attnjit rows; the NSA chain against the dense row.
    def timed(impl):
        return next((r for r in rows if r["impl"] == impl and r.get("ms") and not r.get("error")), None)
    peer_row, ours_row = timed(peer), timed("attnjit")
    dense_row = timed("attnjit gqa_varlen_fwd dense causal")
    for r in rows:
        if r["impl"] == "attnjit" and peer_row is not None and r.get("ms") and not r.get("error"):
            r["ratio"] = peer_row["ms"] / r["ms"]
    if ours_row is not None and dense_row is not None:
        ours_row["speedup_vs_dense"] = dense_row["ms"] / ours_row["ms"]
        ours_row["note"] = f"{ours_row['speedup_vs_dense']:.2f}x vs dense causal; " + ours_row["note"]
    if peer_row is not None and dense_row is not None:
        peer_row["speedup_vs_dense"] = dense_row["ms"] / peer_row["ms"]
    rows.sort(key=lambda r: 1 if r["impl"] == peer else 0)  # the stage rows' gate beside ours
    for r in rows:
        add_row(r)


if __name__ == "__main__":
    import argparse
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--self-test", action="store_true", help="check the cases and counts (no torch, no GPU)")
    ap.add_argument("--list", action="store_true", help="print the cases and their FLOP counts")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--lib", default=None, help="libattnjit.so for the composition checks (with torch)")
    a = ap.parse_args()
    if a.list:
        list_cases(a.quick)
        sys.exit(0)
    if not a.self_test:
        ap.print_help()
        print("\nrun the suites through tools/bench/bench_torch.py --suite " + "|".join(SUITES))
        sys.exit(0)
    sys.exit(self_test(a.lib))
