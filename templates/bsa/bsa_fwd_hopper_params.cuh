// Launch parameters of the hopper bsa_fwd kernel: the portable kernel's parameters plus the TMA maps of
// K and V (4-d: D, KV head, key row, batch; 64-column boxes of BN rows, 128-byte swizzle).
#pragma once
#include "bsa/bsa_fwd_params.cuh"
#include "hopper/ring_params.cuh"

namespace attnjit::kernels {

// A CTA: one consumer warpgroup per 64 rows of the bs-row query block and the producer warpgroup, on
// HopperRing<D, bs, bs / 64>.
ATTNJIT_HD constexpr int bsa_fwd_hopper_threads(int bs) { return hopper_ring_threads(bs / 64); }
ATTNJIT_HD constexpr int bsa_fwd_hopper_smem_bytes(int D, int bs) { return hopper_ring_smem_bytes(D, bs, bs / 64); }

struct alignas(64) BsaFwdHopperParams {
  unsigned long long k_map[16];  // CUtensorMap bytes
  unsigned long long v_map[16];
  BsaFwdParams p;
};

}  // namespace attnjit::kernels
