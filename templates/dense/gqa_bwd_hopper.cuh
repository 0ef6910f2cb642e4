// gqa_bwd, hopper backend (sm_90a): the main kernel of the dense attention backward on the shared
// hopper attention backward (templates/hopper/attention_bwd.cuh) with the dense schedule: 128 keys per
// CTA at D 64 and 128; at D 256 64 keys per CTA with D split over the two consumer warpgroups (not
// deterministic). The prep and dq kernels are the portable backend's (templates/dense/gqa_bwd.cuh).
#pragma once
#include "dense/gqa_bwd.cuh"
#include "hopper/attention_bwd.cuh"

namespace attnjit::kernels {

template <typename T, int D, bool CAUSAL, bool DET, bool WINDOW = false>
__global__ void __launch_bounds__(3 * 128, 1) gqa_bwd_hopper(const __grid_constant__ AttnBwdHopperParams hp) {
  static_assert(gqa_bwd_hopper_head_dim(D), "gqa_bwd_hopper: D is 64, 128 or 256");
  constexpr int BN = gqa_bwd_hopper_block_n(D);
  const DenseSlots<BN, CAUSAL, DET, WINDOW> sched(hp.p, blockIdx.x, blockIdx.y, blockIdx.z);
  if (sched.idle()) return;
  if constexpr (AttnBwdHopperLayout{D, BN}.split_d())
    attn_bwd_hopper_split_body<T, D>(hp, sched);
  else
    attn_bwd_hopper_body<T, D, BN>(hp, sched);
}

}  // namespace attnjit::kernels
