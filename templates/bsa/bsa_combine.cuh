// bsa_fwd with kv_splits > 1: merges the per-split fp32 partials of bsa_fwd.cuh (SPLIT) into O and LSE.
// One warp per (b, h, i) row; lane l owns channels [4l, 4l + 4) of D_v. With partial LSEs l_s (natural
// log, -inf for an empty split) and normalised partial outputs o_s: L = ln(sum_s exp(l_s)),
// o = sum_s exp(l_s - L) o_s. A row whose every split is empty gets O = 0 and LSE = -inf.
#pragma once
#include "bsa/bsa_fwd_params.cuh"
#include "common/mma.cuh"
#include "common/numeric.cuh"

namespace attnjit::kernels {

template <typename T, int DV>
__global__ void __launch_bounds__(128) bsa_combine(const __grid_constant__ BsaFwdParams p) {
  static_assert(DV % 4 == 0 && DV <= 128, "bsa_combine: D_v is a multiple of 4, at most 128");
  const long long rows = static_cast<long long>(p.batch) * p.h_q * p.s_q;
  const long long row = static_cast<long long>(blockIdx.x) * 4 + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= rows) return;
  const int i = static_cast<int>(row % p.s_q);
  const int h = static_cast<int>((row / p.s_q) % p.h_q);
  const int b = static_cast<int>(row / (static_cast<long long>(p.s_q) * p.h_q));
  // Max and sum of the partial LSEs: each lane takes every 32nd split.
  float mx = -kInf();
  for (int s = lane; s < p.splits; s += 32) mx = fmaxf(mx, p.part_lse[s * rows + row]);
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
  float lse = -kInf();
  float acc[4] = {0.f, 0.f, 0.f, 0.f};
  if (mx != -kInf()) {
    float sum = 0.f;
    for (int s = lane; s < p.splits; s += 32) sum += expf(p.part_lse[s * rows + row] - mx);
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
    lse = mx + logf(sum);
    if (lane * 4 < DV) {
      for (int s = 0; s < p.splits; ++s) {
        const float ls = p.part_lse[s * rows + row];
        if (ls == -kInf()) continue;
        const float w = expf(ls - lse);
        const float4 v = *reinterpret_cast<const float4*>(p.part_o + (s * rows + row) * DV + lane * 4);
        acc[0] = fmaf(w, v.x, acc[0]);
        acc[1] = fmaf(w, v.y, acc[1]);
        acc[2] = fmaf(w, v.z, acc[2]);
        acc[3] = fmaf(w, v.w, acc[3]);
      }
    }
  }
  if (lane * 4 < DV) {
    T* orow = static_cast<T*>(p.o) + b * p.o_sb + h * p.o_sh + static_cast<long long>(i) * p.o_ss + lane * 4;
    const uint2 packed = make_uint2(MmaOp<T>::pack(acc[0], acc[1]), MmaOp<T>::pack(acc[2], acc[3]));
    *reinterpret_cast<uint2*>(orow) = packed;
  }
  if (p.lse && lane == 0) p.lse[b * p.lse_sb + h * p.lse_sh + static_cast<long long>(i) * p.lse_ss] = lse;
}

}  // namespace attnjit::kernels
