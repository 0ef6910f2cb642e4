#include "ops/bsa/reference_fwd.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "base/host_numeric.hpp"

namespace attnjit::ops::bsa::reference {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

double load(const TensorRef& t, int64_t off) { return numeric::load_as_double(t.data, t.dtype, off); }

int64_t off_of(const BhsStrides& s, int64_t b, int64_t h, int64_t i) { return b * s.b + h * s.h + i * s.s; }

// The row softmax of §1.6 (no sink) over the keys in `ranges`: logit(j) gives l_j, V(j) the value row
// (D_v doubles). Writes o (D_v doubles) and returns the lse.
template <typename Logit, typename ValueRow>
double softmax_row(const std::vector<KeyRange>& ranges, Logit&& logit, ValueRow&& value_row, int64_t Dv,
                   std::vector<double>& l, double* o) {
  std::fill(o, o + Dv, 0.0);
  l.clear();
  double M = -kInf;
  for (const auto& rg : ranges)
    for (int64_t j = rg.begin; j < rg.end; ++j) {
      l.push_back(logit(j));
      M = std::max(M, l.back());
    }
  if (l.empty() || M == -kInf) return -kInf;
  double Z = 0;
  size_t n = 0;
  for (const auto& rg : ranges)
    for (int64_t j = rg.begin; j < rg.end; ++j) {
      const double w = std::exp(l[n++] - M);
      Z += w;
      const double* v = value_row(j);
      for (int64_t d = 0; d < Dv; ++d) o[d] += w * v[d];
    }
  for (int64_t d = 0; d < Dv; ++d) o[d] /= Z;
  return M + std::log(Z);
}

}  // namespace

void bsa_forward(const BsaCall& call, const BsaMetadataHost& md, const TensorRef& o, const TensorRef* lse) {
  const int64_t D = call.D, Dv = call.D_v, g = call.group();
  const BhsStrides o_st = call.strides_of(o);
  std::vector<double> K(static_cast<size_t>(call.S_kv * D)), V(static_cast<size_t>(call.S_kv * Dv));
  std::vector<double> q(static_cast<size_t>(D)), out(static_cast<size_t>(Dv)), logits;
  for (int64_t b = 0; b < call.B; ++b)
    for (int64_t h = 0; h < call.H_q; ++h) {
      const int64_t r = h / g;
      for (int64_t j = 0; j < call.S_kv; ++j) {
        for (int64_t d = 0; d < D; ++d) K[j * D + d] = load(*call.k, off_of(call.k_st, b, r, j) + d);
        for (int64_t d = 0; d < Dv; ++d) V[j * Dv + d] = load(*call.v, off_of(call.v_st, b, r, j) + d);
      }
      for (int64_t m = 0; m < call.N_q; ++m) {
        const std::vector<KeyRange> ranges = md.visible_ranges(b, h, m);
        for (int64_t i = m * call.bs; i < std::min(call.S_q, (m + 1) * call.bs); ++i) {
          for (int64_t d = 0; d < D; ++d) q[d] = load(*call.q, off_of(call.q_st, b, h, i) + d);
          auto logit = [&](int64_t j) {
            double s = 0;
            for (int64_t d = 0; d < D; ++d) s += q[d] * K[j * D + d];
            return static_cast<double>(call.scale) * s;
          };
          const double l = softmax_row(ranges, logit, [&](int64_t j) { return &V[j * Dv]; }, Dv, logits, out.data());
          for (int64_t d = 0; d < Dv; ++d) numeric::store_from_double(o.data, o.dtype, off_of(o_st, b, h, i) + d, out[d]);
          if (lse)
            static_cast<float*>(lse->data)[b * lse->strides[0] + h * lse->strides[1] + i * lse->strides[2]] =
                static_cast<float>(l);
        }
      }
    }
}

Fp8Operands quantize_fp8(const BsaCall& call) {
  constexpr int64_t D = 128;
  const int64_t B = call.B, H = call.H_q, Sq = call.S_q, Skv = call.S_kv, G = (Skv + 15) / 16;
  const float kFloor = 1e-3f;
  Fp8Operands f;
  f.q8.resize(static_cast<size_t>(B * H * Sq * D));
  f.k8.resize(static_cast<size_t>(B * H * Skv * D));
  f.v8.resize(static_cast<size_t>(B * H * Skv * D));
  f.sq.resize(static_cast<size_t>(B * H * Sq));
  f.sk.resize(static_cast<size_t>(B * H * G));
  f.sv.resize(static_cast<size_t>(H * D));
  f.mu.resize(static_cast<size_t>(B * H * D));
  auto val = [](const TensorRef& t, const BhsStrides& s, int64_t b, int64_t h, int64_t i, int64_t d) {
    return static_cast<float>(load(t, b * s.b + h * s.h + i * s.s + d));
  };
  // 1. Q per row.
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < Sq; ++i) {
        float mx = 0;
        for (int64_t d = 0; d < D; ++d) mx = std::max(mx, std::fabs(val(*call.q, call.q_st, b, h, i, d)));
        const float s = std::max(mx, kFloor) / 448.0f;
        const int64_t row = (b * H + h) * Sq + i;
        f.sq[row] = s;
        for (int64_t d = 0; d < D; ++d) f.q8[row * D + d] = numeric::float_to_e4m3(val(*call.q, call.q_st, b, h, i, d) / s);
      }
  // 2. K: per-(b, h) channel mean (fp32, from an exact double sum), then per 16-key group.
  std::vector<float> kc(static_cast<size_t>(Skv * D));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h) {
      float* mu = &f.mu[(b * H + h) * D];
      for (int64_t d = 0; d < D; ++d) {
        double sum = 0;
        for (int64_t j = 0; j < Skv; ++j) sum += val(*call.k, call.k_st, b, h, j, d);
        mu[d] = static_cast<float>(sum / static_cast<double>(Skv));
      }
      for (int64_t j = 0; j < Skv; ++j)
        for (int64_t d = 0; d < D; ++d) kc[j * D + d] = val(*call.k, call.k_st, b, h, j, d) - mu[d];
      for (int64_t gi = 0; gi < G; ++gi) {
        const int64_t j1 = std::min(Skv, (gi + 1) * 16);
        float mx = 0;
        for (int64_t j = gi * 16; j < j1; ++j)
          for (int64_t d = 0; d < D; ++d) mx = std::max(mx, std::fabs(kc[j * D + d]));
        const float s = std::max(mx, kFloor) / 448.0f;
        f.sk[(b * H + h) * G + gi] = s;
        for (int64_t j = gi * 16; j < j1; ++j)
          for (int64_t d = 0; d < D; ++d) f.k8[((b * H + h) * Skv + j) * D + d] = numeric::float_to_e4m3(kc[j * D + d] / s);
      }
    }
  // 3. V per (h, d) over b and j.
  for (int64_t h = 0; h < H; ++h)
    for (int64_t d = 0; d < D; ++d) {
      float mx = 0;
      for (int64_t b = 0; b < B; ++b)
        for (int64_t j = 0; j < Skv; ++j) mx = std::max(mx, std::fabs(val(*call.v, call.v_st, b, h, j, d)));
      const float s = std::max(mx, kFloor) / 448.0f;
      f.sv[h * D + d] = s;
      for (int64_t b = 0; b < B; ++b)
        for (int64_t j = 0; j < Skv; ++j)
          f.v8[((b * H + h) * Skv + j) * D + d] = numeric::float_to_e4m3(val(*call.v, call.v_st, b, h, j, d) / s);
    }
  return f;
}

void bsa_fp8_forward(const BsaCall& call, const BsaMetadataHost& md, const TensorRef& o) {
  constexpr int64_t D = 128;
  const int64_t H = call.H_q, Sq = call.S_q, Skv = call.S_kv, G = (Skv + 15) / 16;
  const Fp8Operands f = quantize_fp8(call);
  const BhsStrides o_st = call.strides_of(o);
  std::vector<double> K(static_cast<size_t>(Skv * D)), V(static_cast<size_t>(Skv * D));
  std::vector<double> q(D), out(D), logits;
  for (int64_t b = 0; b < call.B; ++b)
    for (int64_t h = 0; h < H; ++h) {
      const int64_t bh = b * H + h;
      for (int64_t j = 0; j < Skv; ++j)
        for (int64_t d = 0; d < D; ++d) {
          K[j * D + d] = numeric::e4m3_to_float(f.k8[(bh * Skv + j) * D + d]) * static_cast<double>(f.sk[bh * G + j / 16]);
          V[j * D + d] = numeric::e4m3_to_float(f.v8[(bh * Skv + j) * D + d]) * static_cast<double>(f.sv[h * D + d]);
        }
      for (int64_t m = 0; m < call.N_q; ++m) {
        const std::vector<KeyRange> ranges = md.visible_ranges(b, h, m);
        for (int64_t i = m * call.bs; i < std::min(Sq, (m + 1) * call.bs); ++i) {
          const double s_q = f.sq[bh * Sq + i];
          for (int64_t d = 0; d < D; ++d) q[d] = numeric::e4m3_to_float(f.q8[(bh * Sq + i) * D + d]) * s_q;
          auto logit = [&](int64_t j) {
            double s = 0;
            for (int64_t d = 0; d < D; ++d) s += q[d] * K[j * D + d];
            return static_cast<double>(call.scale) * s;
          };
          softmax_row(ranges, logit, [&](int64_t j) { return &V[j * D]; }, D, logits, out.data());
          for (int64_t d = 0; d < D; ++d) numeric::store_from_double(o.data, o.dtype, off_of(o_st, b, h, i) + d, out[d]);
        }
      }
    }
}

}  // namespace attnjit::ops::bsa::reference
