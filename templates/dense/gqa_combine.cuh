// Split-KV combine (flash-decoding's second step) for the gqa_fwd kernel family: merges the n_splits
// normalised fp32 partial outputs and log2-domain LSEs of each row (gqa_fwd_params.cuh, SPLIT kernels)
// into the output, adding the row's sink to the denominator where the op has sinks (SPEC.md §1.6).
//
// A CTA of 16 warps; each row gets W = p.warps_per_row warps (1, 2, 4, 8 or 16: the planner takes more
// for more splits), so a CTA merges 16 / W rows. Warp `part` of a row takes splits part, part + W, ...,
// kUnroll at a time with their loads in flight together, and keeps its own running maximum Mw (one pass:
// no separate pass over the LSEs); lane l owns channels [l * D / 32, (l + 1) * D / 32). The warps' (Mw,
// z, acc) meet in shared memory, where the row's first warp rescales them to M = max(Mw, sink) and writes
// o = sum_s 2^(lse_s - M) o_s / (sum_s 2^(lse_s - M) + 2^(sink - M)). An empty split (lse -inf) weighs
// nothing and its partial is not read into the sum; a row whose splits are all empty is zero (or, with a
// finite sink, zero as well: its only term is the sink).
//
// On sm_90 the combine is launched as a programmatic dependent of the split kernel (which triggers its
// dependents as it starts): griddepcontrol.wait holds it until the split kernel's writes are visible.
#pragma once
#include "common/mma.cuh"
#include "common/numeric.cuh"
#include "dense/gqa_combine_params.cuh"

namespace attnjit::kernels {


template <typename T, int D>
__global__ void __launch_bounds__(512) gqa_split_combine(const __grid_constant__ GqaCombineParams p) {
  static_assert(D % 64 == 0, "gqa_split_combine: D is a multiple of 64");
  constexpr int kPer = D / 32;  // channels per lane (even)
  constexpr int kWarps = kGqaCombineWarps, kUnroll = kPer >= 8 ? 4 : 32 / kPer;  // <= 32 partial values in flight
  constexpr float kLn2 = 0.69314718055994530942f;
  constexpr float kLog2e = 1.44269504088896340736f;
  __shared__ float red_o[kWarps][D];
  __shared__ float red_mz[kWarps][2];
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int W = p.warps_per_row, part = warp % W;
  const long long row = static_cast<long long>(blockIdx.x) * (kWarps / W) + warp / W;
  const bool live = row < p.rows;  // every warp reaches the barrier below
  const long long tok = live ? row / p.heads : 0;
  const int h = live ? static_cast<int>(row - tok * p.heads) : 0;

  // This warp's splits, online: Mw its largest LSE so far, z and acc scaled to 2^-Mw.
  float Mw = -kInf(), z = 0.f;
  float acc[kPer];
#pragma unroll
  for (int e = 0; e < kPer; ++e) acc[e] = 0.f;
  if (live) {
#pragma unroll 1
    for (int s0 = part; s0 < p.n_splits; s0 += kUnroll * W) {
      float ls[kUnroll];
      float2 v[kUnroll][kPer / 2];
#pragma unroll
      for (int j = 0; j < kUnroll; ++j) {
        const int s = s0 + j * W;
        ls[j] = s < p.n_splits ? p.lse_part[s * p.rows + row] : -kInf();
        const float* src = p.o_part + (static_cast<long long>(min(s, p.n_splits - 1)) * p.rows + row) * D + lane * kPer;
#pragma unroll
        for (int e = 0; e < kPer / 2; ++e) v[j][e] = *reinterpret_cast<const float2*>(src + 2 * e);
      }
      float bm = -kInf();
#pragma unroll
      for (int j = 0; j < kUnroll; ++j) bm = fmaxf(bm, ls[j]);
      if (bm == -kInf()) continue;
      if (bm > Mw) {
        const float a = Mw == -kInf() ? 0.f : exp2f(Mw - bm);
        z *= a;
#pragma unroll
        for (int e = 0; e < kPer; ++e) acc[e] *= a;
        Mw = bm;
      }
#pragma unroll
      for (int j = 0; j < kUnroll; ++j) {
        if (ls[j] == -kInf()) continue;
        const float w = exp2f(ls[j] - Mw);
        z += w;
#pragma unroll
        for (int e = 0; e < kPer / 2; ++e) {
          acc[2 * e] = fmaf(w, v[j][e].x, acc[2 * e]);
          acc[2 * e + 1] = fmaf(w, v[j][e].y, acc[2 * e + 1]);
        }
      }
    }
  }
  if (W > 1) {
    if (part > 0) {
#pragma unroll
      for (int e = 0; e < kPer; ++e) red_o[warp][lane * kPer + e] = acc[e];
      if (lane == 0) {
        red_mz[warp][0] = Mw;
        red_mz[warp][1] = z;
      }
    }
    __syncthreads();
    if (part > 0) return;
    float M = Mw;
    for (int w2 = warp + 1; w2 < warp + W; ++w2) M = fmaxf(M, red_mz[w2][0]);
    if (M != -kInf()) {
      const float a = Mw == -kInf() ? 0.f : exp2f(Mw - M);
      z *= a;
#pragma unroll
      for (int e = 0; e < kPer; ++e) acc[e] *= a;
      for (int w2 = warp + 1; w2 < warp + W; ++w2) {
        const float m2 = red_mz[w2][0];
        if (m2 == -kInf()) continue;
        const float a2 = exp2f(m2 - M);
        z += a2 * red_mz[w2][1];
#pragma unroll
        for (int e = 0; e < kPer; ++e) acc[e] = fmaf(a2, red_o[w2][lane * kPer + e], acc[e]);
      }
    }
    Mw = M;
  }
  if (!live) return;
  // The sink joins the denominator: rescale to Mt = max(M, sink).
  const float M = Mw;
  float sink2 = -kInf();
  bool zero_head = false;
  if (p.sinks) {
    const float sink = p.sinks[h * p.sinks_s];
    zero_head = sink == kInf();
    sink2 = sink * kLog2e;
  }
  const float Mt = fmaxf(M, sink2);
  if (M != -kInf() && Mt != M) {
    const float a = exp2f(M - Mt);
    z *= a;
#pragma unroll
    for (int e = 0; e < kPer; ++e) acc[e] *= a;
  }
  if (M == -kInf() || zero_head) {
    z = 0.f;
#pragma unroll
    for (int e = 0; e < kPer; ++e) acc[e] = 0.f;
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
