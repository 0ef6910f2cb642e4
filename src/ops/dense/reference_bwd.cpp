#include "ops/dense/reference_bwd.hpp"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "base/host_numeric.hpp"
#include "ops/attention/attention_math.hpp"
#include "ops/attention/backward_math.hpp"

namespace attnjit::ops::reference {

namespace {

// Element offset of row (b, s, head) of a BSHD tensor.
int64_t row_offset(const TensorRef& t, int64_t b, int64_t s, int64_t head) {
  return b * t.strides[0] + s * t.strides[1] + head * t.strides[2];
}

void load_row(const TensorRef& t, int64_t b, int64_t s, int64_t head, double* out) {
  math::load_row(t, row_offset(t, b, s, head), t.strides[3], t.shape[3], 1.0, out);
}

void store_row(const TensorRef& t, int64_t b, int64_t s, int64_t head, const double* row) {
  const int64_t off = row_offset(t, b, s, head);
  for (int64_t d = 0; d < t.shape[3]; ++d) numeric::store_from_double(t.data, t.dtype, off + d * t.strides[3], row[d]);
}

template <bool kAbs>
void backward(const GqaBwdConfig& cfg, const GqaBwdCall& call) {
  const int64_t S = call.S, D = call.D, g = call.group();
  const TensorRef& lse = *call.lse;
  // Keys, values and their gradient accumulators of one (b, r), S rows of D doubles.
  std::vector<double> K(static_cast<size_t>(S * D)), V(K.size()), dK(K.size()), dV(K.size());
  std::vector<double> q(D), o(D), dout(D), dq(D);
  for (int64_t b = 0; b < call.B; ++b)
    for (int64_t r = 0; r < call.H_kv; ++r) {
      for (int64_t j = 0; j < S; ++j) {
        load_row(*call.k, b, j, r, &K[j * D]);
        load_row(*call.v, b, j, r, &V[j * D]);
      }
      std::fill(dK.begin(), dK.end(), 0.0);
      std::fill(dV.begin(), dV.end(), 0.0);
      for (int64_t h = r * g; h < (r + 1) * g; ++h)
        for (int64_t i = 0; i < S; ++i) {
          load_row(*call.q, b, i, h, q.data());
          load_row(*call.o, b, i, h, o.data());
          load_row(*call.dout, b, i, h, dout.data());
          const double l = math::load(lse, b * lse.strides[0] + h * lse.strides[1] + i * lse.strides[2]);
          // Visible keys: [first, last].
          int64_t last = cfg.is_causal ? i : S - 1;
          if (cfg.window_right >= 0) last = std::min(last, i + cfg.window_right);
          const int64_t first = cfg.window_left >= 0 ? std::max<int64_t>(0, i - cfg.window_left) : 0;
          std::fill(dq.begin(), dq.end(), 0.0);
          math::backward_row<kAbs>(q.data(), o.data(), dout.data(), l, call.scale, D, dq.data(), [&](auto&& visit) {
            for (int64_t j = first; j <= last; ++j) visit(&K[j * D], &V[j * D], &dK[j * D], &dV[j * D]);
          });
          store_row(*call.dq, b, i, h, dq.data());
        }
      for (int64_t j = 0; j < S; ++j) {
        store_row(*call.dk, b, j, r, &dK[j * D]);
        store_row(*call.dv, b, j, r, &dV[j * D]);
      }
    }
}

}  // namespace

void gqa_backward(const GqaBwdConfig& cfg, const GqaBwdCall& call) { backward<false>(cfg, call); }
void gqa_backward_abs(const GqaBwdConfig& cfg, const GqaBwdCall& call) { backward<true>(cfg, call); }

}  // namespace attnjit::ops::reference
