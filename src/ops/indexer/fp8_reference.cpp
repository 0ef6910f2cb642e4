#include "ops/indexer/fp8_reference.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <vector>

#include "base/host_numeric.hpp"

namespace attnjit::ops::reference {

namespace {

int64_t offset(const TensorRef& t, std::initializer_list<int64_t> idx) {
  int64_t off = 0;
  int d = 0;
  for (int64_t i : idx) off += i * t.strides[d++];
  return off;
}

float load_f32(const TensorRef& t, std::initializer_list<int64_t> idx) {
  return static_cast<const float*>(t.data)[offset(t, idx)];
}

int32_t load_i32(const TensorRef& t, std::initializer_list<int64_t> idx) {
  return static_cast<const int32_t*>(t.data)[offset(t, idx)];
}

}  // namespace

float quantise_key_row(const float* k, int64_t D, uint8_t* k8) {
  float amax = 0.0f;
  for (int64_t d = 0; d < D; ++d) amax = std::max(amax, std::fabs(k[d]));
  const float sigma = std::max(amax, 1e-4f) / 448.0f;  // fp32 division, correctly rounded
  for (int64_t d = 0; d < D; ++d) k8[d] = numeric::float_to_e4m3(k[d] / sigma);
  return sigma;
}

void fp8_lightning_indexer(const TensorRef& index_q, const TensorRef& index_k, const TensorRef& weights,
                           const TensorRef& cu_seqlen_ks, const TensorRef& cu_seqlen_ke,
                           const TensorRef* index_k_scale, const TensorRef& logits, bool clean_logits) {
  const int64_t B = index_q.shape[0], S = index_q.shape[1], H = index_q.shape[2], D = index_q.shape[3];
  const int64_t S_kv = index_k.shape[1], G = index_k.shape[2];
  const int64_t HG = H / G;
  const bool bf16 = index_q.dtype == DType::kBF16;
  if (B == 0 || S == 0 || S_kv == 0) return;

  // Step 1: decoded operands q8 [B, S, H, D], k8 [B, S_kv, G, D] and kappa [B, S_kv, G].
  std::vector<float> q8(static_cast<size_t>(B * S * H * D));
  std::vector<float> k8(static_cast<size_t>(B * S_kv * G * D));
  std::vector<float> kappa(static_cast<size_t>(B * S_kv * G), 1.0f);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t s = 0; s < S; ++s)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t d = 0; d < D; ++d) {
          const float x = static_cast<float>(numeric::load_as_double(index_q.data, index_q.dtype,
                                                                     offset(index_q, {b, s, h, d})));
          q8[((b * S + s) * H + h) * D + d] = bf16 ? numeric::e4m3_to_float(numeric::float_to_e4m3(x)) : x;
        }
  std::vector<float> row(static_cast<size_t>(D));
  std::vector<uint8_t> codes(static_cast<size_t>(D));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < S_kv; ++t)
      for (int64_t g = 0; g < G; ++g) {
        for (int64_t d = 0; d < D; ++d)
          row[d] = static_cast<float>(numeric::load_as_double(index_k.data, index_k.dtype, offset(index_k, {b, t, g, d})));
        float* dst = &k8[((b * S_kv + t) * G + g) * D];
        float& kap = kappa[(b * S_kv + t) * G + g];
        if (bf16) {
          kap = quantise_key_row(row.data(), D, codes.data());
          for (int64_t d = 0; d < D; ++d) dst[d] = numeric::e4m3_to_float(codes[d]);
        } else {
          std::copy(row.begin(), row.end(), dst);
          if (index_k_scale) kap = load_f32(*index_k_scale, {b, t, g});
        }
      }

  // Steps 2-4.
  float* out = static_cast<float*>(logits.data);
  const float neg_inf = -std::numeric_limits<float>::infinity();
  for (int64_t s = 0; s < S; ++s) {
    const int64_t lo = std::clamp<int64_t>(load_i32(cu_seqlen_ks, {s}), 0, S_kv);
    const int64_t hi = std::clamp<int64_t>(load_i32(cu_seqlen_ke, {s}), lo, S_kv);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = 0; t < S_kv; ++t)
        for (int64_t g = 0; g < G; ++g) {
          float* o = out + ((b * S + s) * S_kv + t) * G + g;
          if (t < lo || t >= hi) {
            if (clean_logits) *o = neg_inf;
            continue;
          }
          const float* kr = &k8[((b * S_kv + t) * G + g) * D];
          double sum = 0;
          for (int64_t h = g * HG; h < (g + 1) * HG; ++h) {
            const float* qr = &q8[((b * S + s) * H + h) * D];
            double dot = 0;
            for (int64_t d = 0; d < D; ++d) dot += static_cast<double>(qr[d]) * kr[d];
            sum += static_cast<double>(load_f32(weights, {s, h})) * std::max(dot, 0.0);
          }
          *o = static_cast<float>(kappa[(b * S_kv + t) * G + g] * sum);
        }
  }
}

void topk_select(const TensorRef& index_score, const TensorRef* starts, const TensorRef* ends,
                 const TensorRef& indexes, int64_t topk) {
  const int64_t B = index_score.shape[0], S = index_score.shape[1], S_kv = index_score.shape[2],
                G = index_score.shape[3];
  int32_t* out = static_cast<int32_t*>(indexes.data);
  std::vector<int64_t> cand;
  std::vector<uint32_t> key(static_cast<size_t>(S_kv));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t s = 0; s < S; ++s) {
      int64_t lo = 0, hi = S_kv;
      if (starts) {
        lo = std::max<int64_t>(load_i32(*starts, {b, s}), 0);
        hi = std::min<int64_t>(load_i32(*ends, {b, s}), S_kv);
      }
      const int64_t width = hi > lo ? hi - lo : 0;
      const int64_t n = std::min(topk, width);
      for (int64_t g = 0; g < G; ++g) {
        cand.resize(static_cast<size_t>(width));
        std::iota(cand.begin(), cand.end(), lo);
        for (int64_t j = lo; j < lo + width; ++j) {
          uint32_t bits;
          const float v = load_f32(index_score, {b, s, j, g});
          std::memcpy(&bits, &v, 4);
          key[j] = ordered_key(bits);
        }
        std::partial_sort(cand.begin(), cand.begin() + n, cand.end(), [&](int64_t x, int64_t y) {
          return key[x] != key[y] ? key[x] > key[y] : x < y;
        });
        int32_t* row = out + ((b * S + s) * G + g) * topk;
        for (int64_t i = 0; i < topk; ++i) row[i] = i < n ? static_cast<int32_t>(cand[i]) : -1;
      }
    }
}

}  // namespace attnjit::ops::reference
