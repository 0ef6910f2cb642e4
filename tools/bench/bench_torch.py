#!/usr/bin/env python3
"""Side-by-side benchmark of attnjit against PyTorch peers, in one process, on the same tensors.

Run on the GPU host (H200; PyTorch with CUDA, Triton, cuDNN):

    python3 tools/bench/bench_torch.py --lib build/libattnjit.so \
        [--suite gqa|gqa_bwd|paged_kv_write|lightning_indexer|mla_decode|dsa_decode|nsa_forward|...|all]
        [--json out.json] [--quick]

Suites
  gqa             gqa_fwd (bf16, BSHD, GQA) vs torch SDPA with the FLASH_ATTENTION backend (FlashAttention-2,
                  "FA2", the named peer) and the CUDNN_ATTENTION backend; sliding-window and softcap cases
                  vs flex_attention under torch.compile (the named peer there: SDPA has neither feature).
                  Every output is checked against an fp32 reference (rel L2 and max abs) and ours also
                  against the peer's output (rel L2 < 2e-2, else the row says WRONG), before timing.
  paged_kv_write  bf16 k/v [N, 8, 128] with k+v = 1 GiB into page pools (page size 16, shuffled page
                  order), bf16 and e4m3 caches; vs plain PyTorch (index_copy_, index_put_) and vs a
                  device-to-device copy moving the same number of bytes (the ceiling).
  lightning_indexer  bf16 B=1 H=64 D=128 topk=2048, T=S=8192/32768 causal and 8192 full, vs the PyTorch
                  composition (einsum scores, relu, weighted head sum, topk, in 256-row chunks); both checked
                  by SPEC.md §1.9 on sampled rows against fp32 scores; TFLOP/s of the score MMAs
                  (2 T S H D, halved for causal) and the fraction of the 801 TFLOP/s ceiling.
  fp8_lightning_indexer, topk_select
                  see tools/bench/bench_torch_fp8_indexer.py: the FP8 indexer logits (S=S_kv=8192, H=32, D=64, G=1,
                  bf16 and e4m3 inputs, TileOPs-style document-causal windows and a dense row) vs the torch bf16
                  einsum composition, GB/s of the logits write; topk_select (S=8192 rows, S_kv 8192 / 32768,
                  topk 2048) vs torch.topk on the same scores.
  gqa_bwd         gqa_bwd (bf16, BSHD, GQA; the gqa suite's shapes without windows or softcap: D 128 at
                  B x S = 16384 for S 1024 / 4096 / 16384, D 64 and D 256 at S 4096, causal and not) on
                  backend auto, portable, and auto with deterministic (two calls checked for identical
                  bytes, also after the timed calls), vs the SDPA FLASH_ATTENTION (FA2, the named peer) and
                  CUDNN_ATTENTION backward through autograd (BHSD transposed views, enable_gqa=True, K/V
                  repeated to H heads and dk/dv group-summed only if a backend refuses it; the forward run
                  once untimed, autograd.grad(retain_graph=True) timed alone); o and lse from gqa_fwd.
                  Ours checked against FA2's gradients (max rel L2 of dq, dk, dv < 2e-2, else WRONG);
                  ratio vs FA2, ratio_cudnn vs cuDNN. TFLOP/s = 2.5 x 4 B H D x visible pairs.
  bsa_bwd         bsa_bwd (bf16 BHSD MHA, B=1 H=32 S=16384 D=128; 16 of 128 key blocks of 128, 32 of 256 of
                  64 per query block) vs FlexAttention's backward (autograd through torch.compile'd
                  flex_attention on the same BlockMask of full blocks, timed alone); o and lse from bsa_fwd;
                  ours checked against flex's gradients (max rel L2 of dq, dk, dv). TFLOP/s = 2.5 x 4 B H D
                  x visible pairs.

  decode          gqa_paged_fwd decode (bf16, H=32, H_kv=8, D=128, one query token per request, shuffled
                  pages of 16 and 64; B=64 x 8192 and B=1 x 131072 cached keys; each also on the portable
                  backend; and mha_decode_paged with H=H_kv=32 at pages of 16) vs torch SDPA CUDNN_ATTENTION
                  (the named peer) and FLASH_ATTENTION on contiguous K/V [B, H_kv, ctx, D] gathered from the same
                  pools (enable_gqa=True; K/V repeated to H heads only if a backend refuses it). GB/s = K/V
                  bytes of the H_kv heads (2 B ctx H_kv D * 2) / time, also as a fraction of the 4443 GB/s the
                  issue quotes; outputs checked against an fp32 reference.
  prefill_append  gqa_prefill_paged_append (bf16, H=32, H_kv=8, D=128, page size 64, causal): one 4096-token
                  chunk appended to a cache of 0, 4096 and 12288 tokens, beside our gqa_fwd and torch SDPA
                  FLASH (FA2, the named peer; lower-right causal bias when old > 0) on the same dense problem;
                  TFLOP/s = 4 B H D x visible pairs; the appended pool rows are checked against k_new / v_new.
  mla_decode      mla_decode (bf16, H_kv 1, D 512, PE 64, one query token per request: B 64 / 128 x N_kv 4096 /
                  8192 at H 128, B 64 at H 16, B 1 x 65536, and a paged cache of page 64 in a shuffled block_table
                  at B 64 x 4096) on backends portable and hopper (each its own row; ATTNJIT_UNSUPPORTED gives a
                  row saying so), vs the PyTorch composition (the named peer: gather, q|q_pe and k|k_pe
                  concatenated, fp32 logits by torch.bmm, fp32 softmax, bf16 P @ k; all timed, prep_ms alone) and
                  SDPA (the first backend that takes E 576 / Ev 512). Ours checked against the peer (rel L2 < 2e-2,
                  else WRONG); all against an fp32 reference. TFLOP/s = (2 B H N_kv (D + PE) + 2 B H N_kv D) / time;
                  GB/s = the latent cache read once, B N_kv H_kv (D + PE) * 2 bytes, credited to every row.
  dsa_decode      dsa_decode (bf16, S 1, H 128, H_kv 1, D 512, dim_tail 64, topk 2048 distinct random valid
                  indices of S_kv 65536, causal with q_start_index_s = S_kv - 1; B 64 and 8) on portable and
                  hopper vs the PyTorch composition (torch.gather of the selected rows, masked fp32 softmax, P @ V
                  with V = kv[..., :D]). TFLOP/s over the valid selected slots: 2 B S H topk (D + tail) +
                  2 B S H topk D; GB/s = B S H_kv topk (D + tail) * 2 bytes of selected rows.
                  Both: tools/bench/bench_mla.py (--self-test checks its cases, counts and compositions on the CPU).
  nsa_compressed_fwd, nsa_topk, nsa_selected_fwd, nsa_forward
                  Native Sparse Attention (bf16, one request of T 65536 / 8192 / 16384 tokens, H 64, H_kv 4,
                  D 128, bs 64, S 16, window 512; --quick: T 8192): each op, and the whole forward (the
                  compressed, selected and sliding-window branches + the gates), vs a PyTorch composition of the
                  same math (queries in chunks); nsa_forward also beside the dense causal gqa_varlen_fwd on the
                  same tokens (speedup_vs_dense). An op without a GPU kernel gives a row "skipped". TFLOP/s =
                  4 D per visible (query head, key) pair (nsa_topk: 2 * 2 D per (query head, candidate chunk)).
                  tools/bench/bench_nsa.py (--self-test checks its cases and counts without torch; --list).

Timing (GPU.md "Measuring"): CUDA events after warm-up, the median of >= 20 repetitions
(triton.testing.do_bench with L2 flushed before every repetition, its rep time stretched so that
long kernels still get >= 20 repetitions; our own event loop, also flushing L2, when triton is absent).
--l2 stream times calls back to back instead (batches of >= 1 ms between an event pair, no flush): the
flush is a 256 MiB memset whose dirty lines the next kernel writes back, which costs a 0.15 ms decode
about 5%; a decode that streams 0.5-2 GB of K/V gets nothing from L2 either way.
No input fits in the 60 MB L2: the smallest GQA problem (D=64: q 64 MiB + k, v 16 MiB each + o 64 MiB)
and the paged_kv_write problem (1 GiB of k/v) exceed it, and L2 is flushed between repetitions anyway,
so inputs are not rotated. Inputs are torch.randn (never zeros).

FLOPs: 4 * B * H * D * (number of visible (query, key) pairs), counted exactly: S_q * S_kv without
a mask, S * (S + 1) / 2 per (batch, head) for causal with S_q == S_kv, and only the visible pairs for
sliding windows (SPEC.md §1.6 visibility, bottom-right aligned). GB/s = (bytes read + bytes written) / time.
Ceilings measured on the host: bf16 dense GEMM 801 TFLOP/s, device-to-device copy 4276 GB/s.

Modules (tools/bench/): bench_common.py (timing, checks, rows), one per family with its suites:
bench_dense.py (gqa, gqa_bwd), bench_paged.py (decode, prefill_append), bench_kv_cache.py (paged_kv_write),
bench_indexer.py (lightning_indexer), bench_torch_fp8_indexer.py (fp8_lightning_indexer, topk_select),
bench_bsa.py (bsa, bsa_bwd), bench_mla.py (mla_decode, dsa_decode), bench_nsa.py (nsa_compressed_fwd, nsa_topk,
nsa_selected_fwd, nsa_forward); attnjit_ctypes.py is the binding they call.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import attnjit_ctypes as aj  # noqa: E402
import bench_common  # noqa: E402
from bench_common import (COPY_CEILING_GBS, GEMM_CEILING_TFLOPS, ROWS, add_row, bench, print_table,  # noqa: E402
                          run_case, triton_do_bench)
from bench_bsa import bsa_cases, run_bsa_bwd_case, run_bsa_case  # noqa: E402
from bench_dense import (case_name, gqa_bwd_cases, gqa_bwd_name, gqa_cases, run_gqa_bwd_case,  # noqa: E402
                         run_gqa_case)
from bench_indexer import run_lightning_indexer  # noqa: E402
from bench_kv_cache import run_paged_kv_write  # noqa: E402
from bench_mla import dsa_cases, dsa_name, mla_cases, mla_name, run_dsa_case, run_mla_case  # noqa: E402
from bench_paged import (decode_cases, decode_name, prefill_append_cases, prefill_append_name,  # noqa: E402
                         run_decode_case, run_prefill_append_case)

import torch  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lib", default=None, help="libattnjit.so (default: $ATTNJIT_LIB, then <repo>/build)")
    ap.add_argument("--suite", choices=("gqa", "gqa_bwd", "paged_kv_write", "lightning_indexer", "bsa", "bsa_bwd",
                                        "decode", "prefill_append", "fp8_lightning_indexer", "topk_select",
                                        "mla_decode", "dsa_decode", "nsa_compressed_fwd", "nsa_topk",
                                        "nsa_selected_fwd", "nsa_forward", "all"),
                    default="all")
    ap.add_argument("--json", default=None, help="write every result (and the environment) here")
    ap.add_argument("--quick", action="store_true",
                    help="a reduced set: D=128 S=4096 causal/full/window/softcap (gqa_bwd: causal/full; "
                         "mla_decode: one case of each kind; dsa_decode: B 8; nsa suites: T 8192)")
    ap.add_argument("--options", default=None, help="attnjit RuntimeOptions as JSON, e.g. '{\"log_level\":\"warn\"}'")
    ap.add_argument("--min-reps", type=int, default=20, help="at least this many timed repetitions (default 20)")
    ap.add_argument("--l2", choices=("flush", "stream"), default="flush",
                    help="flush: L2 flushed before every repetition (default); stream: calls back to back, no flush")
    ap.add_argument("--no-ref", action="store_true", help="skip the fp32 reference (errors vs peer only)")
    ap.add_argument("--no-varlen", action="store_true", help="skip the gqa_varlen_fwd rows")
    ap.add_argument("--op-config", default=None, metavar="JSON",
                    help="NSA suites: extra config keys per stage, e.g. '{\"nsa_topk\": {\"backend\": \"hopper\"}}' "
                         "(stages: nsa_compressed_fwd, nsa_topk, nsa_selected_fwd, window, dense_causal)")
    ap.add_argument("--match", default=None, metavar="REGEX",
                    help="run only the cases whose label matches this regex, e.g. 'causal' or 'S1024 .*causal'")
    ap.add_argument("--ab-lib", action="append", default=[], metavar="NAME=PATH",
                    help="another libattnjit.so timed beside --lib on the same tensors (gqa, gqa_bwd, bsa, bsa_bwd, lightning_indexer); repeatable")
    ap.add_argument("--ab-tune", action="append", default=[], metavar="NAME=JSON",
                    help="another runtime of --lib with these tuning overrides (the options' \"tune\" object), timed "
                         "beside it as --ab-lib is, e.g. persistent='{\"gqa_fwd_persistent\": true}'; repeatable")
    args = ap.parse_args()
    bench_common.L2_MODE = args.l2  # read by bench_common.bench
    bench_common.MATCH = args.match  # read by bench_common.run_case

    if not torch.cuda.is_available():
        print("bench_torch.py needs a CUDA device", file=sys.stderr)
        return 2
    torch.cuda.init()
    dev_name = torch.cuda.get_device_name()
    meta = {
        "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "host": platform.node(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
        "device": dev_name,
        "argv": sys.argv,
        "timing": ("cuda events, back to back, no L2 flush" if args.l2 == "stream" else
                   "triton.testing.do_bench" if triton_do_bench else "cuda events"),
        "ceilings": {"bf16_gemm_tflops": GEMM_CEILING_TFLOPS, "d2d_copy_gbs": COPY_CEILING_GBS},
    }
    try:
        import triton
        meta["triton"] = triton.__version__
    except Exception:  # noqa: BLE001
        meta["triton"] = None

    rt = None
    args.rt_error = None
    try:
        rt = aj.Runtime(json.loads(args.options) if args.options else None, lib=args.lib)
        meta["lib"] = rt.library_path
    except Exception as e:  # noqa: BLE001
        args.rt_error = f"{type(e).__name__}: {e}"
        meta["lib_error"] = args.rt_error
    args.ab_rts = []
    for spec in args.ab_lib:
        ab_name, _, ab_path = spec.partition("=")
        args.ab_rts.append((ab_name, aj.Runtime(json.loads(args.options) if args.options else None, lib=ab_path)))
        meta.setdefault("ab_libs", {})[ab_name] = ab_path
    for spec in args.ab_tune:
        ab_name, _, tune = spec.partition("=")
        ab_opts = dict(json.loads(args.options)) if args.options else {}
        ab_opts["tune"] = json.loads(tune)
        args.ab_rts.append((ab_name, aj.Runtime(ab_opts, lib=args.lib)))
        meta.setdefault("ab_tunes", {})[ab_name] = ab_opts["tune"]
    print(f"device {dev_name}; torch {torch.__version__}; triton {meta['triton']}; cudnn {meta['cudnn']}; "
          f"attnjit {meta.get('lib', args.rt_error)}")

    try:
        if args.suite in ("gqa", "all"):
            for c in gqa_cases(args.quick):
                run_case("gqa", case_name(c), case_name(c), lambda: run_gqa_case(rt, c, args))
        if args.suite in ("gqa_bwd", "all"):
            for c in gqa_bwd_cases(args.quick):
                run_case("gqa_bwd", gqa_bwd_name(c), gqa_bwd_name(c), lambda: run_gqa_bwd_case(rt, c, args))
        if args.suite in ("paged_kv_write", "all"):
            for cache in ("bf16", "e4m3"):
                run_case("paged_kv_write", f"bf16 -> {cache}", f"paged_kv_write bf16->{cache}",
                         lambda: run_paged_kv_write(rt, cache, args))
        if args.suite in ("lightning_indexer", "all"):
            for T, causal in ((8192, True), (32768, True), (8192, False)):
                run_case("lightning_indexer", f"T={T} {'causal' if causal else 'full'}", f"indexer T{T}",
                         lambda: run_lightning_indexer(rt, T, causal, args))
        for suite in ("fp8_lightning_indexer", "topk_select"):
            if args.suite in (suite, "all"):
                import bench_torch_fp8_indexer as fp8b  # the suites live in their own module
                run_case(suite, None, suite, lambda: (
                    fp8b.run_fp8_indexer if suite == "fp8_lightning_indexer" else fp8b.run_topk_select)(
                        rt, args, bench, add_row))
        if args.suite in ("bsa", "all"):
            for c in bsa_cases(args.quick):
                run_case("bsa", c, f"bsa_fwd {c}", lambda: run_bsa_case(rt, c, args))
        if args.suite in ("bsa_bwd", "all"):
            for c in bsa_cases(args.quick):  # the bsa suite's shapes
                run_case("bsa_bwd", c, f"bsa_bwd {c}", lambda: run_bsa_bwd_case(rt, c, args))
        if args.suite in ("decode", "all"):
            for c in decode_cases(args.quick):
                run_case("decode", decode_name(c), decode_name(c), lambda: run_decode_case(rt, c, args))
        if args.suite in ("prefill_append", "all"):
            for c in prefill_append_cases(args.quick):
                run_case("prefill_append", prefill_append_name(c), prefill_append_name(c),
                         lambda: run_prefill_append_case(rt, c, args))
        if args.suite in ("mla_decode", "all"):
            for c in mla_cases(args.quick):
                run_case("mla_decode", mla_name(c), mla_name(c), lambda: run_mla_case(rt, c, args))
        if args.suite in ("dsa_decode", "all"):
            for c in dsa_cases(args.quick):
                run_case("dsa_decode", dsa_name(c), dsa_name(c), lambda: run_dsa_case(rt, c, args))
        for suite in ("nsa_compressed_fwd", "nsa_topk", "nsa_selected_fwd", "nsa_forward"):
            if args.suite in (suite, "all"):
                import bench_nsa  # the NSA suites live in their own module
                bench_nsa.STAGE_CONFIG = json.loads(args.op_config) if args.op_config else {}
                for c in bench_nsa.nsa_cases(args.quick):
                    run_case(suite, bench_nsa.nsa_name(c), bench_nsa.nsa_name(c),
                             lambda: bench_nsa.run_nsa_case(rt, suite, c, args))
    finally:
        print_table()
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"meta": meta, "results": ROWS}, f, indent=1, default=str)
            print(f"wrote {args.json}")
        if rt is not None:
            rt.close()
    wrong = [r for r in ROWS if r.get("check") == "WRONG"]
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
