// bsa_bwd, hopper backend (sm_90a): the main kernel of the block-sparse attention backward on the
// shared hopper attention backward (templates/hopper/attention_bwd.cuh) with the routed schedule. The
// prep, route, scan and dq kernels are the portable backend's (templates/bsa/bsa_bwd.cuh).
#pragma once
#include "bsa/bsa_bwd.cuh"
#include "hopper/attention_bwd.cuh"

namespace attnjit::kernels {

template <typename T, int D, int BS>
__global__ void __launch_bounds__((BS / 64 + 1) * 128, BS == 64 ? 2 : 1)
    bsa_bwd_hopper(const __grid_constant__ AttnBwdHopperParams hp) {
  attn_bwd_hopper_body<T, D, BS>(hp, RoutedSlots<BS>(hp.p, blockIdx.x, blockIdx.y, blockIdx.z));
}

}  // namespace attnjit::kernels
