// Launch geometry of the gqa_bwd kernels (templates/dense/gqa_bwd.cuh, gqa_bwd_hopper.cuh), shared by
// the host planner (ops/dense/gqa_bwd.cpp) and the device code. The parameters are the shared attention
// backward's (templates/common/attention_bwd_params.cuh, hopper/attention_bwd_params.cuh).
#pragma once
#include "common/attention_bwd_params.cuh"

namespace attnjit::kernels {

// Portable main kernel: keys per CTA (64 at D 256, where K, V and double-buffered Q, dO of 128 keys
// would not fit in 227 KB of shared memory), 64-row query items, and the compute head dim (D 96 runs
// padded to 128: its 24-column warp tiles would not split into 16-column MMA steps).
ATTNJIT_ATTN_BWD_HD constexpr int gqa_bwd_block_n(int D) { return D == 256 ? 64 : 128; }
ATTNJIT_ATTN_BWD_HD constexpr int gqa_bwd_block_m() { return 64; }
ATTNJIT_ATTN_BWD_HD constexpr int gqa_bwd_compute_dim(int D) { return D == 96 ? 128 : D; }
ATTNJIT_ATTN_BWD_HD constexpr int gqa_bwd_smem_bytes(int D) {
  return attn_bwd_smem_bytes(gqa_bwd_compute_dim(D), gqa_bwd_block_n(D), gqa_bwd_block_m());
}
// Hopper main kernel: two consumer warpgroups over 128 keys per CTA at D 64 and 128 (64 keys each), over 64
// keys at D 256 (128 columns each: hopper/attention_bwd.cuh, attn_bwd_hopper_split_body).
ATTNJIT_ATTN_BWD_HD constexpr int gqa_bwd_hopper_block_n(int D) { return D == 256 ? 64 : 128; }
ATTNJIT_ATTN_BWD_HD constexpr bool gqa_bwd_hopper_head_dim(int D) { return D == 64 || D == 128 || D == 256; }

}  // namespace attnjit::kernels
