#include "ops/bsa/reference_bwd.hpp"

#include <cmath>
#include <cstdint>
#include <vector>

#include "ops/attention/attention_math.hpp"
#include "ops/attention/backward_math.hpp"
#include "base/host_numeric.hpp"

namespace attnjit::ops::reference {

namespace {

using math::load;

// Offset (elements) of row (b, head, s) of a q/k-like tensor laid out as the call says.
int64_t row_offset(const bsa::BsaCall& call, const TensorRef& t, int64_t b, int64_t head, int64_t s) {
  const bsa::BhsStrides st = call.strides_of(t);
  return b * st.b + head * st.h + s * st.s;
}

void load_row(const bsa::BsaCall& call, const TensorRef& t, int64_t b, int64_t head, int64_t s, double* out) {
  const int64_t off = row_offset(call, t, b, head, s);
  const int64_t D = t.shape[3];
  for (int64_t d = 0; d < D; ++d) out[d] = load(t, off + d * t.strides[3]);
}

void store_rows(const bsa::BsaCall& call, const TensorRef& t, int64_t heads, int64_t seq, const std::vector<double>& acc) {
  const int64_t D = t.shape[3];
  for (int64_t b = 0; b < call.B; ++b)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t s = 0; s < seq; ++s) {
        const int64_t off = row_offset(call, t, b, h, s);
        const double* src = acc.data() + ((b * heads + h) * seq + s) * D;
        for (int64_t d = 0; d < D; ++d) numeric::store_from_double(t.data, t.dtype, off + d * t.strides[3], src[d]);
      }
}

}  // namespace

void bsa_backward(const bsa::BsaCall& call, const bsa::BsaMetadataHost& md, const TensorRef& o, const TensorRef& dout,
                  const TensorRef& lse, const TensorRef& dq, const TensorRef& dk, const TensorRef& dv) {
  const int64_t B = call.B, H = call.H_q, H_kv = call.H_kv, S_q = call.S_q, S_kv = call.S_kv, D = call.D;
  const int64_t g = call.group(), bs = call.bs;
  const double scale = call.scale;
  std::vector<double> dq_acc(static_cast<size_t>(B * H * S_q * D), 0.0);
  std::vector<double> dk_acc(static_cast<size_t>(B * H_kv * S_kv * D), 0.0);
  std::vector<double> dv_acc(dk_acc.size(), 0.0);
  std::vector<double> qi(D), oi(D), doi(D), kj(D), vj(D);
  const auto* lse_p = static_cast<const float*>(lse.data);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h) {
      const int64_t r = h / g;
      for (int64_t m = 0; m < call.N_q; ++m) {
        const std::vector<bsa::KeyRange> ranges = md.visible_ranges(b, h, m);
        if (ranges.empty()) continue;
        for (int64_t i = m * bs; i < std::min(S_q, (m + 1) * bs); ++i) {
          const double l = lse_p[b * lse.strides[0] + h * lse.strides[1] + i * lse.strides[2]];
          if (l == -math::kInf) continue;  // P = 0: no contribution, dq_i = 0
          load_row(call, *call.q, b, h, i, qi.data());
          load_row(call, o, b, h, i, oi.data());
          load_row(call, dout, b, h, i, doi.data());
          double* dqi = dq_acc.data() + ((b * H + h) * S_q + i) * D;
          math::backward_row(qi.data(), oi.data(), doi.data(), l, scale, D, dqi, [&](auto&& visit) {
            for (const auto& kr : ranges)
              for (int64_t j = kr.begin; j < kr.end; ++j) {
                load_row(call, *call.k, b, r, j, kj.data());
                load_row(call, *call.v, b, r, j, vj.data());
                visit(kj.data(), vj.data(), dk_acc.data() + ((b * H_kv + r) * S_kv + j) * D,
                      dv_acc.data() + ((b * H_kv + r) * S_kv + j) * D);
              }
          });
        }
      }
    }
  store_rows(call, dq, H, S_q, dq_acc);
  store_rows(call, dk, H_kv, S_kv, dk_acc);
  store_rows(call, dv, H_kv, S_kv, dv_acc);
}

}  // namespace attnjit::ops::reference
