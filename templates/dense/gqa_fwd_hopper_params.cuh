// Launch parameters of the hopper gqa_fwd / gqa_varlen_fwd kernel: the portable kernel's parameters plus
// the TMA maps of K and V (4-d: D, KV head, key row, batch; 64-column boxes of BN rows, 128-byte swizzle).
#pragma once
#include "dense/gqa_fwd_params.cuh"
#include "hopper/ring_params.cuh"

namespace attnjit::kernels {

// A CTA: two consumer warpgroups of 64 query rows and the producer warpgroup, on HopperRing<D, BN>.
ATTNJIT_HD constexpr int gqa_fwd_hopper_threads() { return hopper_ring_threads(2); }
ATTNJIT_HD constexpr int gqa_fwd_hopper_smem_bytes(int D, int BN) { return hopper_ring_smem_bytes(D, BN, 2); }

struct alignas(64) GqaFwdHopperParams {
  unsigned long long k_map[16];  // CUtensorMap bytes
  unsigned long long v_map[16];
  GqaFwdParams p;
};

}  // namespace attnjit::kernels
