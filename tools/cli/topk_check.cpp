#include "topk_check.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <unordered_map>

#include "base/host_numeric.hpp"

namespace attnjit::cli {

namespace {

// The host tensor of `name` in the case, or nullptr.
const HostTensor* find_input(const TestCase& c, const std::vector<HostTensor>& inputs, const std::string& name) {
  for (size_t i = 0; i < c.tensors.size(); ++i)
    if (c.tensors[i].name == name) return &inputs[i];
  return nullptr;
}

const HostTensor& need_input(const TestCase& c, const std::vector<HostTensor>& inputs, const std::string& name) {
  const HostTensor* t = find_input(c, inputs, name);
  if (!t) throw std::runtime_error(fmt::format("topk scorer for {}: the case has no tensor '{}'", c.op, name));
  return *t;
}

// Logical element [i0, i1, ...] of a host tensor, as double.
double at(const HostTensor& t, std::initializer_list<int64_t> idx) {
  const auto strides = t.spec->resolved_strides();
  int64_t off = 0, d = 0;
  for (int64_t i : idx) off += i * strides[d++];
  return numeric::load_as_double(t.bytes.data(), t.spec->dtype, off);
}

// All logical elements of a host tensor, row-major, as doubles.
std::vector<double> dense(const HostTensor& t) {
  const auto& shape = t.spec->shape;
  const auto strides = t.spec->resolved_strides();
  int64_t n = 1;
  for (auto e : shape) n *= e;
  std::vector<double> out(static_cast<size_t>(std::max<int64_t>(n, 0)));
  std::vector<int64_t> idx(shape.size(), 0);
  for (int64_t i = 0; i < n; ++i) {
    int64_t off = 0;
    for (size_t d = 0; d < shape.size(); ++d) off += idx[d] * strides[d];
    out[i] = numeric::load_as_double(t.bytes.data(), t.spec->dtype, off);
    for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
      if (++idx[d] < shape[d]) break;
      idx[d] = 0;
    }
  }
  return out;
}

// lightning_indexer (SPEC.md §2.1): rows are (b, t) of indices [B, T, topk]; the candidate set is the
// document-local causal/compressed range, scored in double precision and rounded to fp32:
// sum_h w[b,t,h] * relu(<q[b,t,h,:], k_s>) / sqrt(H * D). Tolerance 1e-4 * max_C |score| + 1e-6.
class LightningIndexerScorer final : public TopkScorer {
 public:
  LightningIndexerScorer(const TestCase& c, const std::vector<HostTensor>& inputs, const std::string& output) {
    const HostTensor& q = need_input(c, inputs, "q");
    const HostTensor& k = need_input(c, inputs, "k");
    const HostTensor& w = need_input(c, inputs, "weights");
    const HostTensor& out = need_input(c, inputs, output);
    if (q.spec->shape.size() != 4 || k.spec->shape.size() != 3 || w.spec->shape.size() != 3 ||
        out.spec->shape.size() != 3)
      throw std::runtime_error("topk scorer for lightning_indexer: expected q [B,T,H,D], k [B,S,D], weights [B,T,H], "
                               "indices [B,T,topk]");
    B_ = q.spec->shape[0];
    T_ = q.spec->shape[1];
    H_ = q.spec->shape[2];
    D_ = q.spec->shape[3];
    S_ = k.spec->shape[1];
    width_ = out.spec->shape[2];
    const nlohmann::json& cfg = c.config.is_object() ? c.config : nlohmann::json::object();
    causal_ = cfg.value("causal", false);
    ratio_ = cfg.value("compress_ratio", 1);
    q_ = dense(q);
    k_ = dense(k);
    w_ = dense(w);
    const HostTensor* cu = find_input(c, inputs, "cu_seqlens");
    const HostTensor* cuk = find_input(c, inputs, "cu_seqlens_k");
    if ((cu == nullptr) != (cuk == nullptr))
      throw std::runtime_error("topk scorer for lightning_indexer: cu_seqlens and cu_seqlens_k come together");
    if (cu) {
      for (int64_t i = 0; i < cu->spec->shape[0]; ++i) cu_.push_back(static_cast<int64_t>(at(*cu, {i})));
      for (int64_t i = 0; i < cuk->spec->shape[0]; ++i) cuk_.push_back(static_cast<int64_t>(at(*cuk, {i})));
    }
  }

  int64_t rows() const override { return B_ * T_; }
  int64_t width() const override { return width_; }

  void row(int64_t r, TopkRow& row) const override {
    const int64_t b = r / T_, t = r % T_;
    int64_t u = t, kbase = 0, n = S_;  // local position, pool offset, candidate count (non-causal)
    bool empty = false;
    if (!cu_.empty()) {
      const int64_t N = static_cast<int64_t>(cu_.size()) - 1;
      empty = t >= cu_[N];
      if (!empty) {
        int64_t d = 0;
        while (!(cu_[d] <= t && t < cu_[d + 1])) ++d;
        u = t - cu_[d];
        kbase = cuk_[d];
        n = cuk_[d + 1] - cuk_[d];
      }
    }
    if (causal_) n = (u + 1) / ratio_;
    if (empty) n = 0;
    row.candidates.resize(static_cast<size_t>(n));
    row.scores.resize(static_cast<size_t>(n));
    const double inv = 1.0 / std::sqrt(static_cast<double>(H_ * D_));
    double max_abs = 0;
    for (int64_t s = 0; s < n; ++s) {
      const double* key = &k_[static_cast<size_t>(((cu_.empty() ? b : 0) * S_ + kbase + s) * D_)];
      double acc = 0;
      for (int64_t h = 0; h < H_; ++h) {
        const double* qv = &q_[static_cast<size_t>(((b * T_ + t) * H_ + h) * D_)];
        double dot = 0;
        for (int64_t d = 0; d < D_; ++d) dot += qv[d] * key[d];
        acc += w_[static_cast<size_t>((b * T_ + t) * H_ + h)] * std::max(dot, 0.0);
      }
      const float score = static_cast<float>(acc * inv);
      row.candidates[s] = s;
      row.scores[s] = score;
      if (std::isfinite(score)) max_abs = std::max(max_abs, std::fabs(static_cast<double>(score)));
    }
    row.expected_count = std::min(width_, n);
    row.tol = 1e-4 * max_abs + 1e-6;
  }

 private:
  int64_t B_ = 0, T_ = 0, H_ = 0, D_ = 0, S_ = 0, width_ = 0, ratio_ = 1;
  bool causal_ = false;
  std::vector<double> q_, k_, w_;
  std::vector<int64_t> cu_, cuk_;
};

// topk_select (SPEC.md §2.2): rows are (b, s, g) of indexes [B, S, G, topk]; the candidates are the
// clamped window [max(starts[b, s], 0), min(ends[b, s], S_kv)) (all of [0, S_kv) without starts/ends),
// scored by the input index_score[b, s, j, g] itself, so (c) compares exactly (tolerance 0).
class TopkSelectScorer final : public TopkScorer {
 public:
  TopkSelectScorer(const TestCase& c, const std::vector<HostTensor>& inputs, const std::string& output)
      : score_(need_input(c, inputs, "index_score")),
        starts_(find_input(c, inputs, "starts")),
        ends_(find_input(c, inputs, "ends")) {
    const HostTensor& out = need_input(c, inputs, output);
    if (score_.spec->shape.size() != 4 || out.spec->shape.size() != 4 || (starts_ == nullptr) != (ends_ == nullptr))
      throw std::runtime_error("topk scorer for topk_select: expected index_score [B,S,S_kv,G], indexes [B,S,G,topk] "
                               "and starts/ends together");
    B_ = score_.spec->shape[0];
    S_ = score_.spec->shape[1];
    S_kv_ = score_.spec->shape[2];
    G_ = score_.spec->shape[3];
    width_ = out.spec->shape[3];
  }

  int64_t rows() const override { return B_ * S_ * G_; }
  int64_t width() const override { return width_; }

  void row(int64_t r, TopkRow& row) const override {
    const int64_t g = r % G_, bs = r / G_, s = bs % S_, b = bs / S_;
    int64_t lo = 0, hi = S_kv_;
    if (starts_) {
      lo = std::max<int64_t>(static_cast<int64_t>(at(*starts_, {b, s})), 0);
      hi = std::min<int64_t>(static_cast<int64_t>(at(*ends_, {b, s})), S_kv_);
    }
    const int64_t n = std::max<int64_t>(hi - lo, 0);
    row.candidates.resize(static_cast<size_t>(n));
    row.scores.resize(static_cast<size_t>(n));
    for (int64_t j = 0; j < n; ++j) {
      row.candidates[j] = lo + j;
      row.scores[j] = static_cast<float>(at(score_, {b, s, lo + j, g}));
    }
    row.expected_count = std::min(width_, n);
    row.tol = 0;
  }

 private:
  const HostTensor& score_;
  const HostTensor *starts_, *ends_;
  int64_t B_ = 0, S_ = 0, S_kv_ = 0, G_ = 0, width_ = 0;
};

// nsa_topk (SPEC.md §2.16): rows are (t, r) of block_indices [T, H_kv, S]; the candidates are the
// chunks [0, cur] of token t's request (cur = p // bs, (n, p) = token_indices[t]), scored by the group
// importance recomputed here: qs_h = rnd_dtype(fp32(q[t, h]) * fp32(scale)); lse_h over the complete
// chunks c < (p + 1) // bs (0 when none); imp_c = sum over the group of 1 for c in {0, cur - 1, cur},
// else exp(<qs_h, k_cmp[chunk_offsets[n] + c, r]> - lse_h). Tolerance 1e-4 * max_c |imp_c| + 1e-5.
class NsaTopkScorer final : public TopkScorer {
 public:
  NsaTopkScorer(const TestCase& c, const std::vector<HostTensor>& inputs, const std::string& output) {
    const HostTensor& q = need_input(c, inputs, "q");
    const HostTensor& k = need_input(c, inputs, "k_cmp");
    const HostTensor& tok = need_input(c, inputs, "token_indices");
    const HostTensor& co = need_input(c, inputs, "chunk_offsets");
    const HostTensor& out = need_input(c, inputs, output);
    if (q.spec->shape.size() != 3 || k.spec->shape.size() != 3 || out.spec->shape.size() != 3 ||
        tok.spec->shape.size() != 2 || co.spec->shape.size() != 1)
      throw std::runtime_error("topk scorer for nsa_topk: expected q [T,H,D], k_cmp [C,H_kv,D], token_indices [T,2], "
                               "chunk_offsets [N+1], block_indices [T,H_kv,S]");
    T_ = q.spec->shape[0];
    H_ = q.spec->shape[1];
    D_ = q.spec->shape[2];
    C_ = k.spec->shape[0];
    H_kv_ = k.spec->shape[1];
    width_ = out.spec->shape[2];
    const nlohmann::json& cfg = c.config.is_object() ? c.config : nlohmann::json::object();
    bs_ = cfg.value("bs", 1);
    const float scale = cfg.value("scale", 1.0f);
    if (bs_ < 1 || H_kv_ < 1 || H_ % H_kv_ != 0) throw std::runtime_error("topk scorer for nsa_topk: bad bs or heads");
    qs_ = dense(q);
    for (auto& x : qs_) {  // step 1: q * scale in fp32, rounded to the input dtype
      const float y = static_cast<float>(x) * scale;
      x = q.spec->dtype == DType::kF16 ? numeric::fp16_to_float(numeric::float_to_fp16(y))
                                       : numeric::bf16_to_float(numeric::float_to_bf16(y));
    }
    k_ = dense(k);
    for (int64_t t = 0; t < T_; ++t) {
      tok_.push_back(static_cast<int64_t>(at(tok, {t, 0})));
      tok_.push_back(static_cast<int64_t>(at(tok, {t, 1})));
    }
    for (int64_t i = 0; i < co.spec->shape[0]; ++i) co_.push_back(static_cast<int64_t>(at(co, {i})));
  }

  int64_t rows() const override { return T_ * H_kv_; }
  int64_t width() const override { return width_; }

  void row(int64_t rr, TopkRow& row) const override {
    const int64_t t = rr / H_kv_, r = rr % H_kv_, g = H_ / H_kv_;
    const int64_t n = tok_[2 * t], p = tok_[2 * t + 1];
    const int64_t N = static_cast<int64_t>(co_.size()) - 1;
    const bool ok = n >= 0 && n < N && p >= 0;
    const int64_t cur = ok ? p / bs_ : -1, complete = ok ? (p + 1) / bs_ : 0, c0 = ok ? co_[n] : 0;
    row.candidates.clear();
    for (int64_t c = 0; c <= cur; ++c)
      if (c0 + c >= 0 && c0 + c < C_) row.candidates.push_back(c);
    const size_t m = row.candidates.size();
    std::vector<double> imp(m, 0.0), dots(m);
    for (int64_t h = r * g; h < (r + 1) * g && m; ++h) {
      const double* qv = &qs_[static_cast<size_t>((t * H_ + h) * D_)];
      double M = -std::numeric_limits<double>::infinity();
      for (size_t i = 0; i < m; ++i) {
        const double* kv = &k_[static_cast<size_t>(((c0 + row.candidates[i]) * H_kv_ + r) * D_)];
        double s = 0;
        for (int64_t d = 0; d < D_; ++d) s += qv[d] * kv[d];
        dots[i] = s;
        if (row.candidates[i] < complete) M = std::max(M, s);
      }
      double lse = 0;
      if (M != -std::numeric_limits<double>::infinity()) {
        double Z = 0;
        for (size_t i = 0; i < m; ++i)
          if (row.candidates[i] < complete) Z += std::exp(dots[i] - M);
        lse = M + std::log(Z);
      }
      for (size_t i = 0; i < m; ++i) {
        const int64_t c = row.candidates[i];
        imp[i] += (c == 0 || c == cur - 1 || c == cur) ? 1.0 : std::exp(dots[i] - lse);
      }
    }
    row.scores.resize(m);
    double max_abs = 0;
    for (size_t i = 0; i < m; ++i) {
      row.scores[i] = static_cast<float>(imp[i]);
      max_abs = std::max(max_abs, std::fabs(imp[i]));
    }
    row.expected_count = std::min<int64_t>(width_, static_cast<int64_t>(m));
    row.tol = 1e-4 * max_abs + 1e-5;
  }

 private:
  int64_t T_ = 0, H_ = 0, D_ = 0, C_ = 0, H_kv_ = 0, width_ = 0, bs_ = 1;
  std::vector<double> qs_, k_;
  std::vector<int64_t> tok_, co_;
};

using ScorerFactory = std::function<std::unique_ptr<TopkScorer>(const TestCase&, const std::vector<HostTensor>&,
                                                                const std::string&)>;

// The ops whose index outputs have a scorer: one line per op.
const std::map<std::string, ScorerFactory>& topk_scorers() {
  static const std::map<std::string, ScorerFactory> table = {
      {"lightning_indexer",
       [](const TestCase& c, const std::vector<HostTensor>& in, const std::string& out) -> std::unique_ptr<TopkScorer> {
         return std::make_unique<LightningIndexerScorer>(c, in, out);
       }},
      {"topk_select",
       [](const TestCase& c, const std::vector<HostTensor>& in, const std::string& out) -> std::unique_ptr<TopkScorer> {
         return std::make_unique<TopkSelectScorer>(c, in, out);
       }},
      {"nsa_topk",
       [](const TestCase& c, const std::vector<HostTensor>& in, const std::string& out) -> std::unique_ptr<TopkScorer> {
         return std::make_unique<NsaTopkScorer>(c, in, out);
       }},
  };
  return table;
}

}  // namespace

std::unique_ptr<TopkScorer> make_topk_scorer(const TestCase& c, const std::vector<HostTensor>& inputs,
                                             const std::string& output) {
  const auto& table = topk_scorers();
  auto it = table.find(c.op);
  if (it == table.end())
    throw std::runtime_error(fmt::format("compare mode \"topk\": op {} has no top-k scorer (tools/cli/topk_check.cpp)", c.op));
  return it->second(c, inputs, output);
}

namespace {

// Checks rows [first, last) in order; returns the first failure (row, message) or (-1, "").
std::pair<int64_t, std::string> check_rows(const TopkScorer& scorer, const HostTensor& got, const TopkCheckOptions& opts,
                                           int64_t first, int64_t last, double& worst_gap) {
  const auto strides = got.spec->resolved_strides();
  const auto& shape = got.spec->shape;
  const int nd = static_cast<int>(shape.size());
  const int64_t width = scorer.width();
  const auto* data = reinterpret_cast<const int32_t*>(got.bytes.data());
  TopkRow row;
  std::unordered_map<int64_t, size_t> where;
  std::vector<int64_t> entries;
  std::vector<float> top, picked;
  auto desc = [](float a, float b) {  // NaN first, then descending
    if (std::isnan(a)) return !std::isnan(b);
    if (std::isnan(b)) return false;
    return a > b;
  };
  for (int64_t r = first; r < last; ++r) {
    int64_t off = 0, rem = r;  // storage offset of the row (row-major over the outer axes)
    for (int d = nd - 2; d >= 0; --d) {
      off += (rem % shape[d]) * strides[d];
      rem /= shape[d];
    }
    entries.clear();
    bool padding = false;
    for (int64_t j = 0; j < width; ++j) {
      const int32_t v = data[off + j * strides[nd - 1]];
      if (v == -1) {
        padding = true;
        continue;
      }
      if (padding) return {r, fmt::format("entry {} = {} follows -1 padding (padding must trail)", j, v)};
      entries.push_back(v);
    }
    scorer.row(r, row);
    if (static_cast<int64_t>(entries.size()) != row.expected_count)
      return {r, fmt::format("expected {} valid entries (then -1), got {}", row.expected_count, entries.size())};
    where.clear();
    for (size_t i = 0; i < row.candidates.size(); ++i) where.emplace(row.candidates[i], i);
    picked.clear();
    for (size_t j = 0; j < entries.size(); ++j) {
      auto it = where.find(entries[j]);
      if (it == where.end())
        return {r, fmt::format("entry {} = {} is not a candidate of the row ({} candidates)", j, entries[j],
                               row.candidates.size())};
      if (it->second == static_cast<size_t>(-1)) return {r, fmt::format("entry {} = {} repeats", j, entries[j])};
      picked.push_back(row.scores[it->second]);
      it->second = static_cast<size_t>(-1);  // used
    }
    if (opts.ascending)
      for (size_t j = 1; j < entries.size(); ++j)
        if (!(entries[j - 1] < entries[j]))
          return {r, fmt::format("expected valid entries in ascending order, got {} then {} at entry {}", entries[j - 1],
                                 entries[j], j)};
    // (c) sorted scores against the row's best expected_count scores.
    top = row.scores;
    const size_t n = static_cast<size_t>(row.expected_count);
    std::partial_sort(top.begin(), top.begin() + static_cast<std::ptrdiff_t>(n), top.end(), desc);
    std::sort(picked.begin(), picked.end(), desc);
    for (size_t j = 0; j < n; ++j) {
      const float a = picked[j], b = top[j];
      if (std::isnan(a) && std::isnan(b)) continue;
      const double gap = std::fabs(static_cast<double>(a) - static_cast<double>(b));
      if (!(gap <= row.tol) && !(a == b))
        return {r, fmt::format("sorted score {} of the returned entries is {}, the reference's top scores have {} "
                               "(|diff| {:.3e} > tol {:.3e})", j, a, b, gap, row.tol)};
      if (row.tol > 0 && std::isfinite(gap)) worst_gap = std::max(worst_gap, gap / row.tol);
    }
  }
  return {-1, {}};
}

}  // namespace

TopkCheckResult check_topk(const TopkScorer& scorer, const HostTensor& got, const TopkCheckOptions& opts) {
  TopkCheckResult res;
  if (got.spec->dtype != DType::kI32) {
    res.ok = false;
    res.detail = fmt::format("{}: expected an int32 index output, got {}", got.spec->name, dtype_name(got.spec->dtype));
    return res;
  }
  const auto& shape = got.spec->shape;
  if (shape.empty() || shape.back() != scorer.width()) {
    res.ok = false;
    res.detail = fmt::format("{}: expected innermost extent {} (the scorer's width)", got.spec->name, scorer.width());
    return res;
  }
  // Rows in chunks over the host's cores (scoring a row costs |C| * H * D); the first failing row wins.
  const int64_t rows = scorer.rows();
  constexpr int64_t kChunk = 32;
  const int64_t chunks = (rows + kChunk - 1) / kChunk;
  std::atomic<int64_t> next{0};
  std::mutex mu;
  std::pair<int64_t, std::string> first_fail{-1, {}};
  double worst = 0;
  auto worker = [&] {
    double local_worst = 0;
    for (int64_t c = next++; c < chunks; c = next++) {
      auto f = check_rows(scorer, got, opts, c * kChunk, std::min(rows, (c + 1) * kChunk), local_worst);
      if (f.first >= 0) {
        std::lock_guard<std::mutex> g(mu);
        if (first_fail.first < 0 || f.first < first_fail.first) first_fail = std::move(f);
      }
    }
    std::lock_guard<std::mutex> g(mu);
    worst = std::max(worst, local_worst);
  };
  const unsigned threads = static_cast<unsigned>(std::max<int64_t>(
      1, std::min<int64_t>(chunks, std::max(1u, std::thread::hardware_concurrency()))));
  std::vector<std::thread> pool;
  for (unsigned i = 1; i < threads; ++i) pool.emplace_back(worker);
  worker();
  for (auto& t : pool) t.join();
  res.rows = rows;
  res.worst_gap = worst;
  if (first_fail.first >= 0) {
    res.ok = false;
    res.detail = fmt::format("{} row {}: {}", got.spec->name, first_fail.first, first_fail.second);
  }
  return res;
}

}  // namespace attnjit::cli
