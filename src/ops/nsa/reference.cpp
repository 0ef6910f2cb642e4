#include "ops/nsa/reference.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <vector>

#include "base/host_numeric.hpp"

namespace attnjit::ops::reference {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

double load(const TensorRef& t, int64_t off) { return numeric::load_as_double(t.data, t.dtype, off); }

// Row (i, head) of a [rows, heads, D] tensor as D doubles.
void load_row(const TensorRef& t, int64_t i, int64_t head, std::vector<double>& out) {
  out.resize(static_cast<size_t>(t.shape[2]));
  const int64_t base = i * t.strides[0] + head * t.strides[1];
  for (int64_t d = 0; d < t.shape[2]; ++d) out[d] = load(t, base + d * t.strides[2]);
}

void store_row(const TensorRef& t, int64_t i, int64_t head, const std::vector<double>& row) {
  const int64_t base = i * t.strides[0] + head * t.strides[1];
  for (int64_t d = 0; d < t.shape[2]; ++d) numeric::store_from_double(t.data, t.dtype, base + d * t.strides[2], row[d]);
}

double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (size_t d = 0; d < a.size(); ++d) s += a[d] * b[d];
  return s;
}

// The row softmax of SPEC.md §1.6 without a sink over the multiset of (key row, value row) pairs the
// visitor yields: o = sum_j exp(l_j - M) v_j / Z, lse = M + ln Z; an empty set gives o = 0, lse = -inf.
template <typename Keys>
double softmax(const std::vector<double>& q, double scale, int64_t DV, Keys&& keys, std::vector<double>& o) {
  std::vector<double> logits;
  std::vector<std::vector<double>> values;
  keys([&](const std::vector<double>& k, const std::vector<double>& v) {
    logits.push_back(scale * dot(q, k));
    values.push_back(v);
  });
  o.assign(static_cast<size_t>(DV), 0.0);
  if (logits.empty()) return -kInf;
  const double M = *std::max_element(logits.begin(), logits.end());
  double Z = 0;
  for (size_t j = 0; j < logits.size(); ++j) {
    const double w = std::exp(logits[j] - M);
    Z += w;
    for (int64_t d = 0; d < DV; ++d) o[d] += w * values[j][d];
  }
  for (auto& x : o) x /= Z;
  return M + std::log(Z);
}

// A token's (request, position) and its request's first packed row / first chunk row, checked against
// the tensors' extents (false: treat the token as having no keys).
struct Token {
  int64_t n = 0, p = 0, row0 = 0, len = 0, chunk0 = 0;
};
bool token_of(const nsa::HostMeta& m, int64_t t, Token& tk) {
  const int64_t N = static_cast<int64_t>(m.offsets.size()) - 1;
  tk.n = m.token_indices[2 * t];
  tk.p = m.token_indices[2 * t + 1];
  if (tk.n < 0 || tk.n >= N || tk.p < 0) return false;
  tk.row0 = m.offsets[tk.n];
  tk.len = int64_t{m.offsets[tk.n + 1]} - m.offsets[tk.n];
  if (!m.chunk_offsets.empty()) tk.chunk0 = m.chunk_offsets[tk.n];
  return true;
}

}  // namespace

void nsa_compressed_fwd(const nsa::CompressedConfig& cfg, const nsa::CompressedCall& call) {
  const nsa::HostMeta m = nsa::read_meta(call.meta);
  const int64_t g = call.group();
  std::vector<double> q, k, v, o;
  for (int64_t t = 0; t < call.T; ++t) {
    Token tk;
    const bool ok = token_of(m, t, tk);
    const int64_t visible = ok ? (tk.p + 1) / cfg.bs : 0;  // complete chunks whose last token is <= p
    for (int64_t h = 0; h < call.H; ++h) {
      const int64_t r = h / g;
      load_row(*call.q, t, h, q);
      const double lse = softmax(q, cfg.scale, call.DV, [&](auto&& visit) {
        for (int64_t c = 0; c < visible; ++c) {
          const int64_t row = tk.chunk0 + c;
          if (row < 0 || row >= call.C) continue;
          load_row(*call.k_cmp, row, r, k);
          load_row(*call.v_cmp, row, r, v);
          visit(k, v);
        }
      }, o);
      store_row(*call.o, t, h, o);
      if (call.lse)
        numeric::store_from_double(call.lse->data, DType::kF32, t * call.lse->strides[0] + h * call.lse->strides[1], lse);
    }
  }
}

void nsa_topk(const nsa::TopkConfig& cfg, const nsa::TopkCall& call) {
  const nsa::HostMeta m = nsa::read_meta(call.meta);
  const int64_t g = call.group(), S = cfg.selected_block_num, D = call.D;
  const TensorRef& out = *call.block_indices;
  const float scale32 = static_cast<float>(cfg.scale);
  std::vector<double> qs(static_cast<size_t>(D)), kc;
  for (int64_t t = 0; t < call.T; ++t) {
    Token tk;
    const bool ok = token_of(m, t, tk);
    const int64_t cur = ok ? tk.p / cfg.bs : -1;
    const int64_t complete = ok ? (tk.p + 1) / cfg.bs : 0;
    for (int64_t r = 0; r < call.H_kv; ++r) {
      // Candidates [0, cur] whose chunk row exists.
      std::vector<int64_t> cand;
      for (int64_t c = 0; c <= cur; ++c)
        if (tk.chunk0 + c >= 0 && tk.chunk0 + c < call.C) cand.push_back(c);
      std::vector<double> imp(cand.size(), 0.0);
      std::vector<std::vector<double>> keys(cand.size());
      for (size_t i = 0; i < cand.size(); ++i) load_row(*call.k_cmp, tk.chunk0 + cand[i], r, keys[i]);
      for (int64_t h = r * g; h < (r + 1) * g && !cand.empty(); ++h) {
        // Step 1: q * scale in fp32, rounded to the input dtype.
        const int64_t base = t * call.q->strides[0] + h * call.q->strides[1];
        for (int64_t d = 0; d < D; ++d) {
          const float x = static_cast<float>(load(*call.q, base + d * call.q->strides[2])) * scale32;
          qs[d] = call.dtype == DType::kF16 ? numeric::fp16_to_float(numeric::float_to_fp16(x))
                                            : numeric::bf16_to_float(numeric::float_to_bf16(x));
        }
        // Step 2: lse over the complete chunks (0 when there are none).
        std::vector<double> dots(cand.size());
        double M = -kInf;
        for (size_t i = 0; i < cand.size(); ++i) {
          dots[i] = dot(qs, keys[i]);
          if (cand[i] < complete) M = std::max(M, dots[i]);
        }
        double lse = 0;
        if (M != -kInf) {
          double Z = 0;
          for (size_t i = 0; i < cand.size(); ++i)
            if (cand[i] < complete) Z += std::exp(dots[i] - M);
          lse = M + std::log(Z);
        }
        // Step 3: forced chunks weigh 1, the others their probability.
        for (size_t i = 0; i < cand.size(); ++i) {
          const int64_t c = cand[i];
          imp[i] += (c == 0 || c == cur - 1 || c == cur) ? 1.0 : std::exp(dots[i] - lse);
        }
      }
      // Step 4: descending importance, ties by ascending chunk id; then -1.
      std::vector<size_t> order(cand.size());
      std::iota(order.begin(), order.end(), size_t{0});
      std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return imp[a] > imp[b]; });
      const int64_t base = t * out.strides[0] + r * out.strides[1];
      for (int64_t u = 0; u < S; ++u) {
        const int32_t v = u < static_cast<int64_t>(order.size()) ? static_cast<int32_t>(cand[order[u]]) : -1;
        static_cast<int32_t*>(out.data)[base + u * out.strides[2]] = v;
      }
    }
  }
}

void nsa_selected_fwd(const nsa::SelectedConfig& cfg, const nsa::SelectedCall& call) {
  const nsa::HostMeta m = nsa::read_meta(call.meta);
  const int64_t g = call.group(), bs = cfg.block_size;
  const TensorRef &bi = *call.block_indices, &bc = *call.block_counts;
  const auto* idx = static_cast<const int32_t*>(bi.data);
  const auto* cnt = static_cast<const int32_t*>(bc.data);
  std::vector<double> q, k, v, o;
  for (int64_t t = 0; t < call.T; ++t) {
    Token tk;
    const bool ok = token_of(m, t, tk);
    const int64_t limit = !ok ? 0 : cfg.is_causal ? std::min(tk.p + 1, tk.len) : tk.len;
    for (int64_t h = 0; h < call.H; ++h) {
      const int64_t r = h / g;
      // Slots u < count only (the rest is never read), clamped to SEL.
      const int64_t count = std::clamp<int64_t>(cnt[t * bc.strides[0] + r * bc.strides[1]], 0, call.SEL);
      load_row(*call.q, t, h, q);
      softmax(q, cfg.scale, call.D, [&](auto&& visit) {
        for (int64_t u = 0; u < count; ++u) {
          const int64_t beta = idx[t * bi.strides[0] + r * bi.strides[1] + u * bi.strides[2]];
          if (beta < 0 || beta * bs >= limit) continue;
          for (int64_t x = beta * bs; x < std::min((beta + 1) * bs, limit); ++x) {
            const int64_t row = tk.row0 + x;
            if (row < 0 || row >= call.T) continue;
            load_row(*call.k, row, r, k);
            load_row(*call.v, row, r, v);
            visit(k, v);
          }
        }
      }, o);
      store_row(*call.o, t, h, o);
    }
  }
}

}  // namespace attnjit::ops::reference
