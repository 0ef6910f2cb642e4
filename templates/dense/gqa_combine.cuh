// Split-KV combine (flash-decoding's second step) for the gqa_fwd kernel family: merges the n_splits
// normalised fp32 partial outputs and log2-domain LSEs of each row (gqa_fwd_params.cuh, SPLIT kernels)
// into the output, adding the row's sink to the denominator where the op has sinks (SPEC.md §1.6).
//
// One warp per row; lane l owns channels [l * D / 32, (l + 1) * D / 32). With M the largest partial
// LSE, o = sum_s 2^(lse_s - M) o_s / sum_s 2^(lse_s - M); an empty split (lse -inf) weighs nothing, and
// a row whose splits are all empty is zero (or, with a finite sink, zero as well: its only term is the
// sink).
#pragma once
#include "common/mma.cuh"
#include "common/numeric.cuh"
#include "dense/gqa_combine_params.cuh"

namespace attnjit::kernels {


template <typename T, int D>
__global__ void __launch_bounds__(128) gqa_split_combine(const __grid_constant__ GqaCombineParams p) {
  static_assert(D % 64 == 0, "gqa_split_combine: D is a multiple of 64");
  constexpr int kPer = D / 32;  // channels per lane (even)
  constexpr float kLn2 = 0.69314718055994530942f;
  constexpr float kLog2e = 1.44269504088896340736f;
  const int lane = threadIdx.x % 32;
  const long long row = static_cast<long long>(blockIdx.x) * 4 + threadIdx.x / 32;
  if (row >= p.rows) return;
  const long long tok = row / p.heads;
  const int h = static_cast<int>(row - tok * p.heads);

  float M = -kInf();
  for (int s = lane; s < p.n_splits; s += 32) M = fmaxf(M, p.lse_part[s * p.rows + row]);
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) M = fmaxf(M, __shfl_xor_sync(0xffffffffu, M, o));
  float sink2 = -kInf();
  bool zero_head = false;
  if (p.sinks) {
    const float sink = p.sinks[h * p.sinks_s];
    zero_head = sink == kInf();
    sink2 = sink * kLog2e;
  }
  const float Mt = fmaxf(M, sink2);
  float acc[kPer];
#pragma unroll
  for (int e = 0; e < kPer; ++e) acc[e] = 0.f;
  float z = 0.f;
  if (M != -kInf() && !zero_head) {
    for (int s = 0; s < p.n_splits; ++s) {
      const float ls = p.lse_part[s * p.rows + row];
      if (ls == -kInf()) continue;
      const float w = exp2f(ls - Mt);
      z += w;
      const float* src = p.o_part + (s * p.rows + row) * D + lane * kPer;
#pragma unroll
      for (int e = 0; e < kPer; e += 2) {
        const float2 v = *reinterpret_cast<const float2*>(src + e);
        acc[e] = fmaf(w, v.x, acc[e]);
        acc[e + 1] = fmaf(w, v.y, acc[e + 1]);
      }
    }
  }
  float lse;
  if (zero_head) {
    lse = kInf();
  } else if (Mt == -kInf()) {
    lse = -kInf();
  } else {
    if (sink2 != -kInf()) z += exp2f(sink2 - Mt);
    lse = (Mt + log2f(z)) * kLn2;
  }
  const float inv = z > 0.f && !zero_head ? 1.f / z : 0.f;
  long long b = 0, i = tok;
  if (p.s_q > 0) {
    b = tok / p.s_q;
    i = tok - b * p.s_q;
  }
  T* dst = static_cast<T*>(p.o) + b * p.o_sb + i * p.o_ss + h * p.o_sh + lane * kPer;
#pragma unroll
  for (int e = 0; e < kPer; e += 2)
    *reinterpret_cast<unsigned*>(dst + e) = MmaOp<T>::pack(acc[e] * inv, acc[e + 1] * inv);
  if (p.lse && lane == 0) p.lse[b * p.lse_sb + i * p.lse_ss + h * p.lse_sh] = lse;
}

}  // namespace attnjit::kernels
