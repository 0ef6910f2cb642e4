// gqa_bwd, portable backend (mma.sync, sm_80+): the dense attention backward of SPEC.md §2.12 on the
// shared attention backward (templates/common/attention_bwd.cuh) with the dense schedule: each CTA
// keeps one key block of one KV head in shared memory and walks every query head of the group times
// every 64-row query slot that can see the block (from the block's diagonal when causal), so dK and dV
// are summed over the group inside one CTA.
//
// Launch sequence on one stream (ops/dense/gqa_bwd.cpp), all scratch in the plan workspace:
//   1. memset dq_sem = 0            (deterministic only)
//   2. gqa_bwd_prep<T, D>           lse2 = lse * log2(e), delta = rowsum(o * do), dq_acc = 0
//   3. gqa_bwd_main<T, D, C, DET>   grid (ceil(S / BN), H_kv, B), 256 threads
//   4. gqa_bwd_dq<T, D>             dq = rnd(scale * dq_acc)
#pragma once
#include "common/attention_bwd.cuh"
#include "dense/gqa_bwd_params.cuh"

namespace attnjit::kernels {

template <typename T, int D>
__global__ void __launch_bounds__(256) gqa_bwd_prep(const __grid_constant__ AttnBwdParams p) {
  attn_bwd_prep_rows<T, D, gqa_bwd_compute_dim(D)>(p);
}

template <typename T, int D>
__global__ void __launch_bounds__(256) gqa_bwd_dq(const __grid_constant__ AttnBwdParams p) {
  attn_bwd_dq_rows<T, D, gqa_bwd_compute_dim(D)>(p);
}

template <typename T, int D>
using GqaBwdTile = AttnBwdTile<T, D, gqa_bwd_compute_dim(D), gqa_bwd_block_n(D), gqa_bwd_block_m()>;

template <typename T, int D, bool CAUSAL, bool DET, bool WINDOW = false>
__global__ void __launch_bounds__(GqaBwdTile<T, D>::kThreads, 1) gqa_bwd_main(const __grid_constant__ AttnBwdParams p) {
  static_assert(D == 64 || D == 96 || D == 128 || D == 256, "gqa_bwd: D is 64, 96, 128 or 256");
  static_assert(GqaBwdTile<T, D>::kSmemBytes == gqa_bwd_smem_bytes(D), "gqa_bwd: host and device smem agree");
  const DenseSlots<gqa_bwd_block_n(D), CAUSAL, DET, WINDOW> sched(p, blockIdx.x, blockIdx.y, blockIdx.z);
  if (sched.idle()) return;
  attn_bwd_main_body<GqaBwdTile<T, D>>(p, sched);
}

}  // namespace attnjit::kernels
