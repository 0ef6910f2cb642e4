#!/usr/bin/env python3
"""Per-call overhead of the attnjit Python package on a plan-cache hit (a benchmark, not a test).

paged_kv_write through the CPU reference on tiny host arrays (1 token, 1 head, D 16), so the op's own
work is a 32-byte copy. Prints microseconds per call for:
  c_execute   attnjit_plan_execute of the C ABI in a C++ loop (the library's validate + execute)
  execute     Plan.execute(...) (tensors in the planned order: DLPack export and the C call only)
  plan_run    Plan.run(...) from Python (the op function's argument binding, then the C call)
  op_call     attnjit.paged_kv_write(...) (adds the config lookup and the runtime's op/plan lookup)
The Python overhead is each row minus c_execute.

    PYTHONPATH=build/python python3 tools/bench/python_plan_hit.py [--iters N]
"""
import argparse
import time

import numpy as np

import attnjit


def per_call_us(fn, iters):
    for _ in range(min(iters, 1000)):
        fn()
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(iters):
            fn()
        best = min(best, (time.perf_counter() - t0) / iters * 1e6)
    return best


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=20000)
    a = ap.parse_args()
    k = np.ones((1, 1, 16), np.float16)
    v = np.ones((1, 1, 16), np.float16)
    kp = np.zeros((1, 4, 1, 16), np.float16)
    vp = np.zeros((1, 4, 1, 16), np.float16)
    slots = np.array([2], np.int64)
    p = attnjit.plan(attnjit.paged_kv_write, k, v, kp, vp, slots)
    names = ("k", "v", "k_pages", "v_pages", "slot_mapping")
    c_us = attnjit._attnjit.bench_execute(p._p, names, (k, v, kp, vp, slots), a.iters)
    c_us = min(c_us, attnjit._attnjit.bench_execute(p._p, names, (k, v, kp, vp, slots), a.iters))
    run_us = per_call_us(lambda: p.run(k, v, kp, vp, slots), a.iters)
    raw_us = per_call_us(lambda: p.execute(k, v, kp, vp, slots), a.iters)
    op_us = per_call_us(lambda: attnjit.paged_kv_write(k, v, kp, vp, slots), a.iters)
    print(f"c_execute  {c_us:7.2f} us  (C ABI plan_execute in a C++ loop)")
    print(f"execute    {raw_us:7.2f} us  (attnjit.Plan.execute: DLPack export of 5 arrays + C call)  "
          f"overhead {raw_us - c_us:6.2f} us")
    print(f"plan_run   {run_us:7.2f} us  (attnjit.Plan.run)  overhead {run_us - c_us:6.2f} us")
    print(f"op_call    {op_us:7.2f} us  (attnjit.paged_kv_write)  overhead {op_us - c_us:6.2f} us")


if __name__ == "__main__":
    main()
