// The online-softmax step of the mma.sync attention kernels (log2 domain, lazy rescaling), on m16n8
// accumulator fragments. A thread holds two rows of each m16 row tile, hf = 0 (row lane / 4) and hf = 1
// (row lane / 4 + 8): scores s[nt][2 hf + e] (key nt * 8 + 2 (lane % 4) + e) and O accumulators
// o[dt][2 hf + e]. A row's state is its reference maximum m (score units: the log2-domain logit of a
// score x is x * scale, scale per row) and its partial sum l (this thread's keys only; the quad sums at
// the end).
//
// Lazy rescaling: m moves only when a tile's maximum exceeds it by more than 2^8 in the log2 domain
// (probabilities up to 256 are exact enough in fp32 sums and 16-bit P), and O and l are rescaled only
// when some row of the warp moved.
//
// Free functions over the kernels' own arrays (not a state object with member functions): inlined
// into the kernels' unrolled loops, they compile to the same machine code as the loops written out.
#pragma once
#include "common/mma.cuh"
#include "common/numeric.cuh"

namespace attnjit::kernels {

// The largest of this thread's scores of row hf (before the quad reduction).
template <int NT>
__device__ __forceinline__ float softmax_thread_max(const float (&s)[NT][4], int hf) {
  float mx = -kInf();
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) mx = fmaxf(mx, fmaxf(s[nt][2 * hf], s[nt][2 * hf + 1]));
  return mx;
}

// The row maximum over the quad of threads that share the row.
__device__ __forceinline__ float softmax_quad_max(float mx) {
  mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
  mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
  return mx;
}

// Whether a row's tile maximum moves its reference maximum m (by more than 2^8).
__device__ __forceinline__ bool softmax_moves(float tile_max, float m, float scale) {
  return tile_max * scale > m * scale + 8.f;
}

// Moves row hf's reference maximum to include tile_max and rescales its l and O.
template <int DT>
__device__ __forceinline__ void softmax_rescale(float& m, float& l, float (&o)[DT][4], int hf, float tile_max, float scale) {
  const float m_new = fmaxf(m, tile_max);
  const float alpha = m_new == -kInf() ? 1.f : fast_exp2((m - m_new) * scale);
  m = m_new;
  l *= alpha;
#pragma unroll
  for (int dt = 0; dt < DT; ++dt) {
    o[dt][2 * hf] *= alpha;
    o[dt][2 * hf + 1] *= alpha;
  }
}

// Row hf's scores to probabilities 2^(x * coef(nt) - m * scale), in place, added to sum pair by pair.
// coef(nt) is the log2-domain factor of n8 tile nt's scores (the row's scale, or with per-key-group
// dequantisation scales folded in).
template <int NT, typename Coef>
__device__ __forceinline__ void softmax_exp(float (&s)[NT][4], int hf, float m, float scale, Coef coef, float& sum) {
  const float m_scaled = m == -kInf() ? 0.f : m * scale;
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) {
    const float c = coef(nt);
    const float p0 = fast_exp2(fmaf(s[nt][2 * hf], c, -m_scaled));
    const float p1 = fast_exp2(fmaf(s[nt][2 * hf + 1], c, -m_scaled));
    s[nt][2 * hf] = p0;
    s[nt][2 * hf + 1] = p1;
    sum += p0 + p1;
  }
}

// The step after a tile's scores are masked, for MT row tiles: given the rows' tile maxima and whether
// any of this thread's rows moved, rescales (when some row of the warp moved) and turns the scores
// into probabilities, adding their row sums to l. scale(mt, hf): the row's log2-domain factor;
// coef(mt, hf, nt): the factor of the row's n8 tile nt.
template <int MT, int NT, int DT, typename RowScale, typename Coef>
__device__ __forceinline__ void online_softmax_step(float (&s)[MT][NT][4], const float (&tile_max)[MT][2], bool moved,
                                                    float (&m)[MT][2], float (&l)[MT][2], float (&o)[MT][DT][4],
                                                    RowScale scale, Coef coef) {
  if (__any_sync(0xffffffffu, moved)) {
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int hf = 0; hf < 2; ++hf) softmax_rescale(m[mt][hf], l[mt][hf], o[mt], hf, tile_max[mt][hf], scale(mt, hf));
  }
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
      float rs = 0.f;
      softmax_exp(s[mt], hf, m[mt][hf], scale(mt, hf), [&](int nt) { return coef(mt, hf, nt); }, rs);
      l[mt][hf] += rs;
    }
}

}  // namespace attnjit::kernels
