// Launch parameters of the hopper gqa_fwd / gqa_varlen_fwd kernel: the portable kernel's parameters plus
// the TMA maps of K and V (4-d: D, KV head, key row, batch; 64-column boxes of BN rows, 128-byte swizzle).
#pragma once
#include "dense/gqa_fwd_params.cuh"

namespace attnjit::kernels {

struct alignas(64) GqaFwdHopperParams {
  unsigned long long k_map[16];  // CUtensorMap bytes
  unsigned long long v_map[16];
  GqaFwdParams p;
};

}  // namespace attnjit::kernels
