#include "ops/indexer/reference.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <thread>
#include <vector>

#include "base/host_numeric.hpp"

namespace attnjit::ops::reference {

namespace {

// Logical elements of a host tensor as fp32 (exact for fp16/bf16/fp32), row-major.
std::vector<float> to_floats(const TensorRef& t) {
  std::vector<float> out(static_cast<size_t>(t.numel()));
  std::vector<int64_t> idx(t.ndim, 0);
  for (size_t i = 0; i < out.size(); ++i) {
    int64_t off = 0;
    for (int d = 0; d < t.ndim; ++d) off += idx[d] * t.strides[d];
    out[i] = static_cast<float>(numeric::load_as_double(t.data, t.dtype, off));
    for (int d = t.ndim - 1; d >= 0; --d) {
      if (++idx[d] < t.shape[d]) break;
      idx[d] = 0;
    }
  }
  return out;
}

std::vector<int64_t> offsets(const TensorRef* t) {
  std::vector<int64_t> v;
  if (!t) return v;
  for (int64_t i = 0; i < t->shape[0]; ++i)
    v.push_back(static_cast<const int32_t*>(t->data)[i * t->strides[0]]);
  return v;
}

}  // namespace

void lightning_indexer(const TensorRef& q, const TensorRef& k, const TensorRef& weights, const TensorRef* cu_seqlens,
                       const TensorRef* cu_seqlens_k, const TensorRef& indices, int64_t topk, bool causal,
                       int64_t compress_ratio) {
  const int64_t B = q.shape[0], T = q.shape[1], H = q.shape[2], D = q.shape[3], S = k.shape[1];
  if (topk == 0 || B == 0) return;
  const std::vector<float> qf = to_floats(q), kf = to_floats(k), wf = to_floats(weights);
  const std::vector<int64_t> cu = offsets(cu_seqlens), cuk = offsets(cu_seqlens_k);
  const bool packed = cu_seqlens != nullptr;
  const double inv = 1.0 / std::sqrt(static_cast<double>(H * D));
  auto* out = static_cast<int32_t*>(indices.data);

  // One row (b, t): its candidate range in the pool, scores, selection, output.
  auto do_row = [&](int64_t row, std::vector<std::pair<uint32_t, int64_t>>& cand) {
    const int64_t b = row / T, t = row % T;
    int64_t u = t, kbase = b * S, n = S;
    if (packed) {
      const int64_t N = static_cast<int64_t>(cu.size()) - 1;
      bool found = false;
      for (int64_t d = 0; d < N && !found; ++d) {
        if (cu[d] <= t && t < cu[d + 1]) {
          found = true;
          u = t - cu[d];
          kbase = cuk[d];
          n = cuk[d + 1] - cuk[d];
        }
      }
      if (!found) {  // past the last document: no candidates
        u = -1;
        n = 0;
      }
    }
    if (causal) n = u < 0 ? 0 : (u + 1) / compress_ratio;
    cand.clear();
    for (int64_t s = 0; s < n; ++s) {
      const float* key = &kf[static_cast<size_t>((kbase + s) * D)];
      double acc = 0;
      for (int64_t h = 0; h < H; ++h) {
        const float* qv = &qf[static_cast<size_t>(((b * T + t) * H + h) * D)];
        double dot = 0;
        for (int64_t d = 0; d < D; ++d) dot += static_cast<double>(qv[d]) * key[d];
        acc += static_cast<double>(wf[static_cast<size_t>((b * T + t) * H + h)]) * (dot > 0 ? dot : 0.0);
      }
      float score = static_cast<float>(acc * inv);
      if (score == 0.0f) score = 0.0f;  // -0 -> +0
      cand.emplace_back(ordered_score_key(score), s);
    }
    const int64_t take = std::min(topk, n);
    // The first `take` under (score desc, index asc), written in ascending index order.
    std::partial_sort(cand.begin(), cand.begin() + take, cand.end(), [](const auto& x, const auto& y) {
      return x.first != y.first ? x.first > y.first : x.second < y.second;
    });
    std::vector<int64_t> chosen;
    for (int64_t i = 0; i < take; ++i) chosen.push_back(cand[i].second);
    std::sort(chosen.begin(), chosen.end());
    int32_t* o = out + row * topk;
    for (int64_t j = 0; j < topk; ++j) o[j] = j < take ? static_cast<int32_t>(chosen[j]) : -1;
  };

  const int64_t rows = B * T;
  std::atomic<int64_t> next{0};
  auto worker = [&] {
    std::vector<std::pair<uint32_t, int64_t>> cand;
    for (int64_t r = next.fetch_add(64); r < rows; r = next.fetch_add(64))
      for (int64_t i = r; i < std::min(rows, r + 64); ++i) do_row(i, cand);
  };
  const unsigned threads = std::max(1u, std::min<unsigned>(std::thread::hardware_concurrency(),
                                                           static_cast<unsigned>((rows + 63) / 64)));
  std::vector<std::thread> pool;
  for (unsigned i = 1; i < threads; ++i) pool.emplace_back(worker);
  worker();
  for (auto& th : pool) th.join();
}

}  // namespace attnjit::ops::reference
