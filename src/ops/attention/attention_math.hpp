// Internal helpers of the attention CPU references (dense: ops/dense/reference.cpp, paged:
// ops/paged/reference.cpp): element loads through strides, RoPE (SPEC.md §1.7) and the row softmax of
// SPEC.md §1.6, all in double. Not part of any interface.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "attnjit/tensor.hpp"
#include "ops/attention/gqa_call.hpp"
#include "base/host_numeric.hpp"

namespace attnjit::ops::reference::math {

inline constexpr double kInf = std::numeric_limits<double>::infinity();

// Element `off` (in elements, from the tensor's base) of a host tensor, as double.
inline double load(const TensorRef& t, int64_t off) { return numeric::load_as_double(t.data, t.dtype, off); }

// One row of D channels (channel stride `chan`), dequantised (times `scale`, 1 for 16-bit input), as double.
inline void load_row(const TensorRef& t, int64_t off, int64_t chan, int64_t D, double scale, double* out) {
  for (int64_t d = 0; d < D; ++d) out[d] = load(t, off + d * chan) * scale;
}

inline double dot(const double* a, const double* b, int64_t D) {
  double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  int64_t d = 0;
  for (; d + 4 <= D; d += 4) {
    s0 += a[d] * b[d];
    s1 += a[d + 1] * b[d + 1];
    s2 += a[d + 2] * b[d + 2];
    s3 += a[d + 3] * b[d + 3];
  }
  for (; d < D; ++d) s0 += a[d] * b[d];
  return (s0 + s1) + (s2 + s3);
}

// Rotates the first R channels of x (double) at table row `pos` of cos/sin [P, R/2] (SPEC.md §1.7):
// neox pairs (c, c + R/2), interleaved pairs (2c, 2c + 1).
inline void rotate(RopeLayout layout, const TensorRef& cs, const TensorRef& sn, int64_t R, int64_t pos, double* x) {
  const int64_t half = R / 2;
  for (int64_t c = 0; c < half; ++c) {
    const int64_t a = layout == RopeLayout::kNeox ? c : 2 * c;
    const int64_t b = layout == RopeLayout::kNeox ? c + half : 2 * c + 1;
    const double co = load(cs, pos * cs.strides[0] + c * cs.strides[1]);
    const double si = load(sn, pos * sn.strides[0] + c * sn.strides[1]);
    const double xa = x[a], xb = x[b];
    x[a] = xa * co - xb * si;
    x[b] = xb * co + xa * si;
  }
}

// The row softmax of SPEC.md §1.6 for one query row whose visible keys are the contiguous range
// [lo, hi] (empty when lo > hi) of K and V (row-major, D doubles per key), with sink logit `sink`
// (-inf: none). `q_row()` returns the row's (dequantised, rotated) query; it is called only when some
// key is visible and the sink is not +inf. Logits are scale * <q, k_j>, capped by c * tanh(z / c) when
// cap > 0. Writes o (D doubles; zeros for an empty row or a +inf sink) and returns the lse.
// `logit` is scratch of at least hi + 1 entries.
template <typename QRow>
double softmax_row(QRow&& q_row, const double* K, const double* V, int64_t lo, int64_t hi, int64_t D, double scale,
                   double cap, double sink, std::vector<double>& logit, double* o) {
  std::fill(o, o + D, 0.0);
  if (sink == kInf) return kInf;  // the sink takes all the mass: o = 0
  double M = sink, Z = 0;
  if (lo <= hi) {
    const double* q = q_row();
    for (int64_t j = lo; j <= hi; ++j) {
      const double z = scale * dot(q, &K[j * D], D);
      const double l = cap > 0 ? cap * std::tanh(z / cap) : z;
      logit[j] = l;
      M = std::max(M, l);
    }
  }
  if (M == -kInf) return -kInf;  // nothing visible and no active sink: o = 0
  for (int64_t j = lo; j <= hi; ++j) {
    const double w = std::exp(logit[j] - M);
    Z += w;
    const double* vj = &V[j * D];
    for (int64_t d = 0; d < D; ++d) o[d] += w * vj[d];
  }
  Z += std::exp(sink - M);  // exp(-inf) = 0 without a sink
  for (int64_t d = 0; d < D; ++d) o[d] /= Z;
  return M + std::log(Z);
}

}  // namespace attnjit::ops::reference::math
