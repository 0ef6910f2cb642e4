#!/usr/bin/env python3
"""Host overhead per call of the attnjit Python package on CUDA tensors (a benchmark, not a test).

One decode step of gqa_paged_fwd (B 1, one query token, H 32, H_kv 8, D 128, fp16, pages of 16 slots,
a few pages), output preallocated, planned once. Rows, microseconds of host time per call:
  c_execute      attnjit_plan_execute of the C ABI in a C++ loop (attnjit._attnjit.bench_execute): the
                 library's validate + launch, the baseline
  execute        Plan.execute(*tensors, stream=h): DLPack export of the tensors and the C call
  plan_run       Plan.run(...): the op function's argument binding, then the C call
  op_stream      attnjit.gqa_paged_fwd(..., out=o, stream=s): config lookup, the runtime's op and plan-cache
                 lookup (a caller stream skips torch's dispatcher)
  op_call        attnjit.gqa_paged_fwd(..., out=o): torch's current stream (eager calls on plain tensors go
                 straight to the library)
  op_alloc       attnjit.gqa_paged_fwd(...): as op_call, plus torch.empty for the output
  op_dispatch    as op_call, forced through torch.ops.attnjit.gqa_paged_fwd (the custom op and torch's
                 dispatcher: the path torch.compile traces)
"async": the loop does not synchronise: CUDA launches are asynchronous, so this is the host time per
call (batches of --batch calls, a synchronisation between batches, outside the timing; the best and the
median batch). "sync": torch.cuda.synchronize() after every call (host + GPU + synchronisation latency).
"extra" = the row minus c_execute; the target is at most 5 us of extra host time per call (TARGET_US).

    PYTHONPATH=<build>/python python3 tools/bench/python_overhead_cuda.py [--batch 100] [--reps 50] [--json F]
"""
import argparse
import json
import statistics
import sys
import time

import torch

import attnjit

TARGET_US = 5.0


def timed_batches(fn, batch, reps, sync_each):
    """Per-call microseconds of `reps` batches of `batch` calls: (best, median)."""
    for _ in range(min(batch, 50)):
        fn()
    torch.cuda.synchronize()
    per = []
    for _ in range(reps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        if sync_each:
            for _ in range(batch):
                fn()
                torch.cuda.synchronize()
        else:
            for _ in range(batch):
                fn()
        per.append((time.perf_counter() - t0) / batch * 1e6)
    torch.cuda.synchronize()
    return min(per), statistics.median(per)


def c_execute_us(p, names, tensors, batch, reps):
    """The C++ loop of bench_execute (stream 0 = the legacy default stream, torch's default), in
    batches with a synchronisation between them: (best, median) microseconds per call."""
    attnjit._attnjit.bench_execute(p._p, names, tensors, batch)
    per = []
    for _ in range(reps):
        torch.cuda.synchronize()
        per.append(attnjit._attnjit.bench_execute(p._p, names, tensors, batch))
    torch.cuda.synchronize()
    return min(per), statistics.median(per)


def gpu_us(fn, n=200):
    """GPU time per call (CUDA events around n back-to-back calls)."""
    fn()
    torch.cuda.synchronize()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    for _ in range(n):
        fn()
    b.record()
    torch.cuda.synchronize()
    return a.elapsed_time(b) * 1e3 / n


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=100, help="calls per timed batch (keep the launch queue short)")
    ap.add_argument("--reps", type=int, default=50, help="timed batches per row")
    ap.add_argument("--pages", type=int, default=4, help="pages of 16 slots in the request's table")
    ap.add_argument("--json", help="also write the rows to this file")
    a = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("python_overhead_cuda: no CUDA device")

    torch.manual_seed(0)
    H, H_kv, D, PS, W = 32, 8, 128, 16, a.pages
    dev = "cuda"
    q = torch.randn(1, H, D, device=dev, dtype=torch.float16)
    kp = torch.randn(W + 1, PS, H_kv, D, device=dev, dtype=torch.float16)
    vp = torch.randn(W + 1, PS, H_kv, D, device=dev, dtype=torch.float16)
    table = torch.arange(1, W + 1, dtype=torch.int32, device=dev).view(1, W)
    lens = torch.tensor([W * PS - 5], dtype=torch.int32, device=dev)
    cu = torch.tensor([0, 1], dtype=torch.int32, device=dev)
    o = torch.empty_like(q)
    args = (q, kp, vp, table, lens, cu)

    p = attnjit.plan(attnjit.gqa_paged_fwd, *args, out=o)
    named = {"q": q, "k_pages": kp, "v_pages": vp, "page_table": table, "cache_seqlens": lens, "cu_seqlens_q": cu,
             "o": o}
    tensors = tuple(named[n] for n in p.names)
    stream = torch.cuda.current_stream()
    handle = stream.cuda_stream
    ref = attnjit.gqa_paged_fwd(*(t.cpu() for t in args), impl="reference")
    p.run(*args, out=o)
    torch.cuda.synchronize()
    err = float(torch.linalg.norm(o.cpu().double() - ref.double()) / torch.linalg.norm(ref.double()))

    paths = {
        "execute": lambda: p.execute(*tensors, stream=handle),
        "plan_run": lambda: p.run(*args, out=o),
        "op_stream": lambda: attnjit.gqa_paged_fwd(*args, out=o, stream=stream),
        "op_call": lambda: attnjit.gqa_paged_fwd(*args, out=o),
        "op_alloc": lambda: attnjit.gqa_paged_fwd(*args),
        "op_dispatch": lambda: attnjit.gqa_paged_fwd(*args, out=o),  # through torch.ops.attnjit (below)
    }
    rows = []
    c_best, c_med = c_execute_us(p, p.names, tensors, a.batch, a.reps)
    rows.append({"path": "c_execute", "async_best": c_best, "async_median": c_med})
    direct = attnjit._core._torch_eager_direct
    for name, fn in paths.items():
        # op_dispatch: the op call as torch.compile traces it, through the custom op and torch's dispatcher
        # (eager calls on plain tensors skip it).
        attnjit._core._torch_eager_direct = (lambda values: False) if name == "op_dispatch" else direct
        best, med = timed_batches(fn, a.batch, a.reps, sync_each=False)
        sbest, smed = timed_batches(fn, a.batch, max(a.reps // 5, 3), sync_each=True)
        attnjit._core._torch_eager_direct = direct
        rows.append({"path": name, "async_best": best, "async_median": med, "sync_best": sbest, "sync_median": smed})
    g = gpu_us(paths["execute"])

    print(f"attnjit {attnjit.__version__}, torch {torch.__version__}, {torch.cuda.get_device_name()}")
    print(f"gqa_paged_fwd decode: T_q 1, H {H}, H_kv {H_kv}, D {D}, fp16, {W} pages of {PS} (cache length "
          f"{W * PS - 5}), plan workspace {p.workspace_size} B; kernel vs reference rel L2 {err:.2e}; "
          f"GPU time per call {g:.2f} us")
    print(f"{'path':<10} {'async best':>10} {'median':>8} {'extra':>7} {'<=5us':>6} {'sync best':>10} {'median':>8}")
    for r in rows:
        extra = r["async_best"] - c_best
        r["extra_us"] = extra
        ok = "-" if r["path"] == "c_execute" else ("yes" if extra <= TARGET_US else "NO")
        sync = f"{r['sync_best']:10.2f} {r['sync_median']:8.2f}" if "sync_best" in r else f"{'-':>10} {'-':>8}"
        print(f"{r['path']:<10} {r['async_best']:10.2f} {r['async_median']:8.2f} {extra:7.2f} {ok:>6} {sync}")
    print("(us per call; extra = async best minus c_execute's; sync: torch.cuda.synchronize() after each call)")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"rows": rows, "gpu_us": g, "rel_l2": err, "device": torch.cuda.get_device_name(),
                       "torch": torch.__version__, "attnjit": attnjit.__version__}, f, indent=1)
    if not err <= 5e-3:
        sys.exit(f"python_overhead_cuda: the decode output is off the reference (rel L2 {err:.3g})")


if __name__ == "__main__":
    main()
