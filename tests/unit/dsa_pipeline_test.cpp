// The DeepSeek sparse-attention decode chain end to end: lightning_indexer (or fp8_lightning_indexer +
// topk_select) picks the keys, dsa_decode attends over them. Each stage's output is checked where the
// next stage depends on it (the top-k rule of SPEC.md §1.9), and the attention output against dense
// attention over exactly the selected keys, computed here in double from the same 16-bit inputs.
//
// How the index layouts differ, and the conversion written out below (docs/ops/dsa_decode.md, "From the
// indexer to dsa_decode", says the same for users):
// - lightning_indexer writes indices [B, T, topk], one list per query row shared by every head (its key
//   pool k [B, S, D] has no head axis); dsa_decode reads indices [B, S, H_kv, K], one list per KV head.
//   The converter repeats the row's list for every KV head (K = topk), or passes a view with stride 0 on
//   the H_kv axis (indices is class M, any strides).
// - The indexer numbers its query rows from position 0 (without offsets T rows, keys S = T // r); the
//   decode step holds the last S rows at positions q_start_index_s .. q_start_index_s + S - 1. The
//   converter takes indexer rows [q_start_index_s, q_start_index_s + S).
// - Key numbers are the same compressed positions on both sides when stride_kv = compress_ratio: the
//   indexer's candidate s summarises raw tokens [s r, s r + r), as does dsa_decode's kv row s. The
//   indexer's causal rule s < (t + 1) // r is dsa_decode's (x + 1) * stride_kv <= q_pos + 1.
// - -1 padding passes through unchanged; dsa_decode skips -1 (and any out-of-range or future entry) as
//   an invalid slot. The converter never filters: a key that is future for a causal dsa_decode (from a
//   non-causal indexer) reaches dsa_decode, which drops it.
// - Packed indexer calls (cu_seqlens, cu_seqlens_k, B = 1) write document-local key numbers and
//   document-local query positions: either one dsa_decode call per document on views (q rows
//   [cu_seqlens[d], cu_seqlens[d+1]), kv rows from cu_seqlens_k[d], q_start_index_s = 0, indices as
//   they are), or one call over the whole packed pool with global numbers x + cu_seqlens_k[d] and
//   is_causal = false (the indexer's causal selection already holds per document; dsa_decode's causal
//   rule would compare pool rows with packed token numbers, which mean nothing across documents).
// - fp8_lightning_indexer + topk_select need no conversion: topk_select's indexes [B, S, G, topk] are
//   absolute key positions with -1 padding, and G is dsa_decode's H_kv.
//
// With a CUDA device present the same chains also run with impl 'kernel'; a stage that has no GPU
// kernel yet (Unsupported "no GPU kernel is built yet") ends that part with a MESSAGE.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "attnjit/runtime.hpp"
#include "base/host_numeric.hpp"
#include "jit/cuda_driver.hpp"
#include "chain_util.hpp"
#include "test_util.hpp"

namespace {

namespace test = attnjit::test;
using attnjit::Config;
using attnjit::Device;
using attnjit::DeviceKind;
using attnjit::DType;
using attnjit::TensorArgs;
using attnjit::TensorRef;
namespace numeric = attnjit::numeric;
using namespace attnjit::test::chain;  // NOLINT: the chain harness


// Runs `body(gpu)` on the CPU, then, with a device, on the GPU; an Unsupported "no GPU kernel is built
// yet" from any stage ends the GPU part with a MESSAGE.
void on_each_impl(const std::function<void(bool)>& body) {
  {
    INFO("impl reference");
    body(false);
  }
  if (!gpu_present()) return;
  INFO("impl kernel");
  try {
    body(true);
  } catch (const attnjit::Unsupported& e) {
    const std::string m = e.what();
    if (!test::contains(m, "no GPU kernel is built yet")) throw;
    MESSAGE("kernel path stops at a stage without a GPU kernel: " << m);
  }
}

// ---- The conversion (what a user writes).

// lightning_indexer indices [B, T, topk] (no offsets) -> dsa_decode indices [B, S, H_kv, topk] for the
// query rows at positions q_start .. q_start + S - 1: the row's list repeated for every KV head, -1 and
// every other value unchanged.
std::vector<int32_t> indexer_to_dsa(const std::vector<int32_t>& li, int64_t B, int64_t T, int64_t topk,
                                    int64_t q_start, int64_t S, int64_t H_kv) {
  REQUIRE(q_start + S <= T);
  std::vector<int32_t> out(static_cast<size_t>(B * S * H_kv * topk));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t s = 0; s < S; ++s)
      for (int64_t r = 0; r < H_kv; ++r)
        for (int64_t u = 0; u < topk; ++u)
          out[((b * S + s) * H_kv + r) * topk + u] = li[(b * T + q_start + s) * topk + u];
  return out;
}

// Packed lightning_indexer indices [1, T, topk] (document-local) -> global pool rows for one dsa_decode
// call over the packed pool: x + cu_seqlens_k[d] for the rows of document d, -1 kept, rows past
// cu_seqlens[N] (all -1 already) kept.
std::vector<int32_t> packed_indexer_to_global(const std::vector<int32_t>& li, const std::vector<int32_t>& cu,
                                              const std::vector<int32_t>& cu_k, int64_t T, int64_t topk) {
  std::vector<int32_t> out = li;
  for (size_t d = 0; d + 1 < cu.size(); ++d)
    for (int64_t t = cu[d]; t < cu[d + 1]; ++t)
      for (int64_t u = 0; u < topk; ++u) {
        int32_t& x = out[t * topk + u];
        if (x != -1) x += cu_k[d];
      }
  (void)T;
  return out;
}

// ---- Independent checks.

// Dense attention over exactly the given key rows, in double: q [R, H, Dt], kv [R_kv, H_kv, Dt] (flat
// rows), keys[i][r] the kv rows of query row i and KV head r (a repeat counts twice). Returns
// ||o - ref|| / ||ref||; a row with no key must be exactly zero.
double attention_error(const Buf& q, const Buf& kv, const Buf& o, int64_t R, int64_t H, int64_t H_kv, int64_t D,
                       int64_t tail, const std::vector<std::vector<std::vector<int64_t>>>& keys, double scale,
                       int* empty_rows) {
  const int64_t Dt = D + tail, g = H / H_kv;
  double num = 0, den = 0;
  for (int64_t i = 0; i < R; ++i)
    for (int64_t h = 0; h < H; ++h) {
      const int64_t r = h / g;
      const auto& xs = keys[i][r];
      std::vector<double> ref(static_cast<size_t>(D), 0.0);
      if (xs.empty()) {
        ++*empty_rows;
      } else {
        std::vector<double> l;
        for (int64_t x : xs) {
          double dot = 0;
          for (int64_t c = 0; c < Dt; ++c) dot += q.at((i * H + h) * Dt + c) * kv.at((x * H_kv + r) * Dt + c);
          l.push_back(scale * dot);
        }
        const double m = *std::max_element(l.begin(), l.end());
        double z = 0;
        for (size_t j = 0; j < xs.size(); ++j) {
          const double w = std::exp(l[j] - m);
          z += w;
          for (int64_t c = 0; c < D; ++c) ref[c] += w * kv.at((xs[j] * H_kv + r) * Dt + c);
        }
        for (auto& v : ref) v /= z;
      }
      for (int64_t c = 0; c < D; ++c) {
        const double got = o.at((i * H + h) * D + c);
        if (xs.empty()) CHECK(got == 0.0);
        num += (got - ref[c]) * (got - ref[c]);
        den += ref[c] * ref[c];
      }
    }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

double tolerance(DType dt) { return dt == DType::kF16 ? 5e-3 : 1e-2; }

// SPEC.md §1.9 on one index row: count, trailing -1, distinct members of the candidate set, and the
// returned scores equal to the top scores within `tol`.
void check_topk_row(const int32_t* row, int64_t topk, const std::vector<int64_t>& cand,
                    const std::function<double(int64_t)>& score, double tol) {
  const int64_t n = std::min<int64_t>(topk, static_cast<int64_t>(cand.size()));
  const std::set<int64_t> cset(cand.begin(), cand.end());
  std::set<int64_t> seen;
  std::vector<double> got, all;
  for (int64_t u = 0; u < topk; ++u) {
    if (u < n) {
      CHECK(cset.count(row[u]) == 1);
      CHECK(seen.insert(row[u]).second);
      got.push_back(score(row[u]));
    } else {
      CHECK(row[u] == -1);
    }
  }
  for (int64_t c : cand) all.push_back(score(c));
  std::sort(got.rbegin(), got.rend());
  std::sort(all.rbegin(), all.rend());
  for (size_t j = 0; j < got.size(); ++j) CHECK(std::abs(got[j] - all[j]) <= tol);
}

// ---- lightning_indexer -> dsa_decode.

struct IndexerInputs {
  int64_t B, T, S_k, H_i, D_i;
  Buf q, k, w;
};

IndexerInputs indexer_inputs(std::mt19937& gen, DType dt, int64_t B, int64_t T, int64_t S_k, int64_t H_i,
                             int64_t D_i) {
  IndexerInputs in{B, T, S_k, H_i, D_i, random_buf(gen, dt, {B, T, H_i, D_i}), random_buf(gen, dt, {B, S_k, D_i}),
                   random_buf(gen, dt, {B, T, H_i})};
  return in;
}

// The indexer score of query row t against key row s (flat rows of q/w and of k), in double.
double indexer_score(const IndexerInputs& in, int64_t qrow, int64_t krow) {
  double sum = 0;
  for (int64_t h = 0; h < in.H_i; ++h) {
    double dot = 0;
    for (int64_t c = 0; c < in.D_i; ++c) dot += in.q.at((qrow * in.H_i + h) * in.D_i + c) * in.k.at(krow * in.D_i + c);
    sum += in.w.at(qrow * in.H_i + h) * std::max(dot, 0.0);
  }
  return sum / std::sqrt(static_cast<double>(in.H_i * in.D_i));
}

void check_indexer_rows(const IndexerInputs& in, const Buf& li, int64_t topk, bool causal, int64_t ratio) {
  for (int64_t b = 0; b < in.B; ++b)
    for (int64_t t = 0; t < in.T; ++t) {
      const int64_t n_cand = causal ? (t + 1) / ratio : in.S_k;
      std::vector<int64_t> cand;
      double mx = 0;
      for (int64_t s = 0; s < n_cand; ++s) {
        cand.push_back(s);
        mx = std::max(mx, std::abs(indexer_score(in, b * in.T + t, b * in.S_k + s)));
      }
      INFO("indexer row b " << b << " t " << t);
      check_topk_row(li.i32() + (b * in.T + t) * topk, topk, cand,
                     [&](int64_t s) { return indexer_score(in, b * in.T + t, b * in.S_k + s); }, 1e-4 * mx + 1e-6);
    }
}

struct ChainShape {
  int64_t B, T, ratio, topk, q_start;  // indexer: T query rows, keys T // ratio; dsa_decode rows [q_start, T)
  bool indexer_causal, dsa_causal;
  int64_t H, H_kv, D, tail;
  DType dt;
};

void run_indexer_chain(const ChainShape& c, bool gpu) {
  test::TempDir dir("dsapipe");
  attnjit::Runtime rt(test::options_in(dir));
  std::mt19937 gen(static_cast<uint32_t>(c.T * 131 + c.topk * 7 + c.q_start + c.H + (gpu ? 1000 : 0)));
  const int64_t S_k = c.T / c.ratio, S = c.T - c.q_start, S_kv = S_k, Dt = c.D + c.tail;
  const int64_t H_i = 4, D_i = 16;
  IndexerInputs in = indexer_inputs(gen, c.dt, c.B, c.T, S_k, H_i, D_i);
  Buf li(DType::kI32, {c.B, c.T, c.topk});
  std::fill(li.i32(), li.i32() + li.numel(), 0x7FFFFFFF);
  run_op(rt, "lightning_indexer", {{"topk", c.topk}, {"causal", c.indexer_causal}, {"compress_ratio", c.ratio}},
         {{"q", &in.q}, {"k", &in.k}, {"weights", &in.w}, {"indices", &li, true}}, gpu);
  check_indexer_rows(in, li, c.topk, c.indexer_causal, c.ratio);

  const std::vector<int32_t> li_vec(li.i32(), li.i32() + li.numel());
  Buf idx = i32_buf({c.B, S, c.H_kv, c.topk}, indexer_to_dsa(li_vec, c.B, c.T, c.topk, c.q_start, S, c.H_kv));
  Buf q = random_buf(gen, c.dt, {c.B, S, c.H, Dt}), kv = random_buf(gen, c.dt, {c.B, S_kv, c.H_kv, Dt});
  Buf o(c.dt, {c.B, S, c.H, c.D});
  std::fill(o.bytes.begin(), o.bytes.end(), 0xFF);  // NaN in fp16 and bf16
  const Config dcfg{{"dim_tail", c.tail}, {"stride_kv", c.ratio}, {"q_start_index_s", c.q_start},
                    {"is_causal", c.dsa_causal}};
  run_op(rt, "dsa_decode", dcfg, {{"q", &q}, {"kv", &kv}, {"indices", &idx}, {"o", &o, true}}, gpu);

  // The expected key set of each row straight from the indexer's output and the contract's rules.
  std::vector<std::vector<std::vector<int64_t>>> keys(static_cast<size_t>(c.B * S));
  int visible_lt_topk = 0;
  for (int64_t b = 0; b < c.B; ++b)
    for (int64_t s = 0; s < S; ++s) {
      const int64_t pos = c.q_start + s;
      std::vector<int64_t> xs;
      for (int64_t u = 0; u < c.topk; ++u) {
        const int64_t x = li_vec[(b * c.T + pos) * c.topk + u];
        if (x >= 0 && x < S_kv && (!c.dsa_causal || (x + 1) * c.ratio <= pos + 1)) xs.push_back(x + b * S_kv);
      }
      if (static_cast<int64_t>(xs.size()) < c.topk) ++visible_lt_topk;
      keys[b * S + s].assign(static_cast<size_t>(c.H_kv), xs);
    }
  CHECK(visible_lt_topk > 0);  // every shape here has rows with padding
  int empty_rows = 0;
  const double err = attention_error(q, kv, o, c.B * S, c.H, c.H_kv, c.D, c.tail, keys,
                                     1.0 / std::sqrt(static_cast<double>(Dt)), &empty_rows);
  CHECK(err <= tolerance(c.dt));

  // Zero-copy alternative: the indexer's rows viewed with stride 0 on the H_kv axis give the same output.
  if (!gpu) {
    Buf o2(c.dt, {c.B, S, c.H, c.D});
    run_op(rt, "dsa_decode", dcfg,
           {{"q", &q},
            {"kv", &kv},
            {"indices", &li, false, {c.T * c.topk, c.topk, 0, 1}, {c.B, S, c.H_kv, c.topk}, c.q_start * c.topk},
            {"o", &o2, true}},
           false);
    CHECK(o2.bytes == o.bytes);
  }
}

}  // namespace

TEST_CASE("dsa pipeline: lightning_indexer -> indices [B, S, H_kv, K] -> dsa_decode against dense attention over the selected keys") {
  const ChainShape shapes[] = {
      // B  T  r topk q0  idx-causal dsa-causal  H  H_kv  D  tail dtype
      {2, 9, 1, 6, 3, true, true, 4, 1, 64, 0, DType::kF16},        // topk above the visible count
      {1, 12, 1, 13, 11, true, true, 8, 1, 128, 64, DType::kBF16},  // decode: one query row
      {1, 16, 4, 3, 5, true, true, 32, 2, 64, 16, DType::kBF16},    // compress_ratio = stride_kv 4, H_kv 2
      {1, 6, 2, 2, 0, true, true, 16, 1, 64, 32, DType::kF16},      // q_start 0: row 0 sees no window
      {1, 7, 1, 8, 0, false, true, 16, 1, 512, 64, DType::kBF16},   // non-causal indexer, futures dropped
      {2, 7, 1, 9, 2, false, false, 2, 1, 256, 0, DType::kF16},     // both non-causal
  };
  for (const ChainShape& c : shapes) {
    INFO("B " << c.B << " T " << c.T << " r " << c.ratio << " topk " << c.topk << " q_start " << c.q_start
              << " H " << c.H << " H_kv " << c.H_kv << " D " << c.D << " tail " << c.tail);
    on_each_impl([&](bool gpu) { run_indexer_chain(c, gpu); });
  }
}

TEST_CASE("dsa pipeline: the converter keeps -1 and future entries; dsa_decode skips them") {
  // Indexer rows of T = 4 positions, topk 3; the decode step holds rows 1..3 (q_start 1), H_kv 2.
  const std::vector<int32_t> li = {0, -1, -1,   // t 0 (not taken)
                                   3, 0, -1,    // t 1: key 3 is future for q_pos 1
                                   -1, -1, -1,  // t 2: padding only
                                   2, 1, 0};    // t 3
  const auto idx = indexer_to_dsa(li, 1, 4, 3, 1, 3, 2);
  REQUIRE(idx.size() == 3u * 2u * 3u);
  for (int64_t s = 0; s < 3; ++s)
    for (int64_t r = 0; r < 2; ++r)
      for (int64_t u = 0; u < 3; ++u) CHECK(idx[(s * 2 + r) * 3 + u] == li[(1 + s) * 3 + u]);
  CHECK(idx[0] == 3);   // the future key is not filtered by the converter
  CHECK(idx[12] == 2);  // row t 3 kept whole
  for (int u = 0; u < 6; ++u) CHECK(idx[6 + u] == -1);

  const std::vector<int32_t> cu = {0, 2, 2, 3}, cu_k = {0, 2, 2, 3};
  const auto glob = packed_indexer_to_global({1, -1, 0, -1, 0, -1, -1, -1, -1, -1}, cu, cu_k, 5, 2);
  CHECK(glob == std::vector<int32_t>{1, -1, 0, -1, 2, -1, -1, -1, -1, -1});

  test::TempDir dir("dsapipeedge");
  attnjit::Runtime rt(test::options_in(dir));
  std::mt19937 gen(7);
  const int64_t H = 32, H_kv = 2, D = 64, S_kv = 4;
  Buf q = random_buf(gen, DType::kF16, {1, 3, H, D}), kv = random_buf(gen, DType::kF16, {1, S_kv, H_kv, D});
  const Config cfg{{"dim_tail", 0}, {"stride_kv", 1}, {"q_start_index_s", 1}};
  auto run = [&](const std::vector<int32_t>& v) {
    Buf ib = i32_buf({1, 3, H_kv, 3}, v);
    Buf o(DType::kF16, {1, 3, H, D});
    run_op(rt, "dsa_decode", cfg, {{"q", &q}, {"kv", &kv}, {"indices", &ib}, {"o", &o, true}}, false);
    return o;
  };
  const Buf with_future = run(idx);
  std::vector<int32_t> filtered = idx;
  filtered[0] = 0, filtered[1] = -1, filtered[3] = 0, filtered[4] = -1;
  const Buf without = run(filtered);
  CHECK(with_future.bytes == without.bytes);
  // Row s 1 (t 2) has only padding: zeros.
  for (int64_t i = H * D; i < 2 * H * D; ++i) CHECK(with_future.at(i) == 0.0);
  // Row s 0 attends to key 0 alone: its output is key 0's value row (for each KV head).
  for (int64_t h = 0; h < H; ++h)
    for (int64_t c = 0; c < D; ++c) CHECK(with_future.at(h * D + c) == kv.at((h / 16) * D + c));
}

TEST_CASE("dsa pipeline: packed lightning_indexer -> dsa_decode per document, or once with global indices") {
  struct Packed { std::vector<int32_t> cu, cu_k; int64_t T, S_pool, ratio, topk; DType dt; };
  for (const Packed& p : {Packed{{0, 5, 5, 12}, {0, 5, 5, 12}, 14, 14, 1, 4, DType::kF16},
                          Packed{{0, 6, 11}, {0, 3, 5}, 12, 7, 2, 2, DType::kBF16}}) {
    INFO("T " << p.T << " ratio " << p.ratio << " topk " << p.topk);
    on_each_impl([&](bool gpu) {
      test::TempDir dir("dsapipepk");
      attnjit::Runtime rt(test::options_in(dir));
      std::mt19937 gen(static_cast<uint32_t>(p.T + (gpu ? 99 : 0)));
      const int64_t N = static_cast<int64_t>(p.cu.size()) - 1, H = 16, H_kv = 1, D = 64, tail = 16, Dt = D + tail;
      IndexerInputs in = indexer_inputs(gen, p.dt, 1, p.T, p.S_pool, 4, 16);
      Buf cu = i32_buf({N + 1}, p.cu), cu_k = i32_buf({N + 1}, p.cu_k);
      Buf li(DType::kI32, {1, p.T, p.topk});
      std::fill(li.i32(), li.i32() + li.numel(), 0x7FFFFFFF);
      run_op(rt, "lightning_indexer", {{"topk", p.topk}, {"causal", true}, {"compress_ratio", p.ratio}},
             {{"q", &in.q}, {"k", &in.k}, {"weights", &in.w}, {"cu_seqlens", &cu}, {"cu_seqlens_k", &cu_k},
              {"indices", &li, true}},
             gpu);
      // The indexer's rows: document-local candidates, tail rows all -1.
      std::vector<std::vector<std::vector<int64_t>>> keys(static_cast<size_t>(p.T));
      for (int64_t t = 0; t < p.T; ++t) {
        int64_t d = -1;
        for (int64_t j = 0; j < N; ++j)
          if (p.cu[j] <= t && t < p.cu[j + 1]) d = j;
        std::vector<int64_t> cand;
        double mx = 0;
        if (d >= 0)
          for (int64_t s = 0; s < (t - p.cu[d] + 1) / p.ratio; ++s) {
            cand.push_back(s);
            mx = std::max(mx, std::abs(indexer_score(in, t, p.cu_k[d] + s)));
          }
        INFO("packed indexer row " << t);
        check_topk_row(li.i32() + t * p.topk, p.topk, cand,
                       [&](int64_t s) { return indexer_score(in, t, p.cu_k[d] + s); }, 1e-4 * mx + 1e-6);
        std::vector<int64_t> xs;
        for (int64_t u = 0; u < p.topk; ++u)
          if (li.i32()[t * p.topk + u] >= 0) xs.push_back(p.cu_k[d] + li.i32()[t * p.topk + u]);
        keys[t].assign(1, xs);
      }

      Buf q = random_buf(gen, p.dt, {1, p.T, H, Dt}), kv = random_buf(gen, p.dt, {1, p.S_pool, H_kv, Dt});
      const double scale = 1.0 / std::sqrt(static_cast<double>(Dt));
      // (a) One call per document on views: q rows from cu_seqlens[d], kv rows from cu_seqlens_k[d],
      // indices as the indexer wrote them (a stride-0 H_kv axis), q_start_index_s 0. Tail rows are not
      // part of any document and stay as they were (zeros here).
      Buf o(p.dt, {1, p.T, H, D});
      for (int64_t d = 0; d < N; ++d) {
        const int64_t len = p.cu[d + 1] - p.cu[d], n_k = p.cu_k[d + 1] - p.cu_k[d];
        run_op(rt, "dsa_decode", {{"dim_tail", tail}, {"stride_kv", p.ratio}, {"q_start_index_s", 0}},
               {{"q", &q, false, {}, {1, len, H, Dt}, p.cu[d] * H * Dt},
                {"kv", &kv, false, {}, {1, n_k, H_kv, Dt}, p.cu_k[d] * H_kv * Dt},
                {"indices", &li, false, {len * p.topk, p.topk, 0, 1}, {1, len, H_kv, p.topk}, p.cu[d] * p.topk},
                {"o", &o, true, {}, {1, len, H, D}, p.cu[d] * H * D}},
               gpu);
      }
      int empty_rows = 0;
      CHECK(attention_error(q, kv, o, p.T, H, H_kv, D, tail, keys, scale, &empty_rows) <= tolerance(p.dt));
      CHECK(empty_rows >= (p.T - p.cu[N]) * H);
      // (b) One call over the packed pool: global indices, is_causal false.
      const std::vector<int32_t> li_vec(li.i32(), li.i32() + li.numel());
      Buf g = i32_buf({1, p.T, H_kv, p.topk}, packed_indexer_to_global(li_vec, p.cu, p.cu_k, p.T, p.topk));
      Buf o2(p.dt, {1, p.T, H, D});
      std::fill(o2.bytes.begin(), o2.bytes.end(), 0xFF);
      run_op(rt, "dsa_decode", {{"dim_tail", tail}, {"stride_kv", p.ratio}, {"q_start_index_s", 0}, {"is_causal", false}},
             {{"q", &q}, {"kv", &kv}, {"indices", &g}, {"o", &o2, true}}, gpu);
      empty_rows = 0;
      CHECK(attention_error(q, kv, o2, p.T, H, H_kv, D, tail, keys, scale, &empty_rows) <= tolerance(p.dt));
    });
  }
}

TEST_CASE("dsa pipeline: fp8_lightning_indexer -> topk_select -> dsa_decode (no conversion: G is H_kv)") {
  struct Fp8Shape { int64_t B, S, q_start, stride, G, H, topk; bool causal_window; };
  for (const Fp8Shape& c : {Fp8Shape{2, 5, 4, 2, 2, 32, 3, true}, Fp8Shape{1, 4, 3, 1, 1, 8, 8, false}}) {
    INFO("B " << c.B << " S " << c.S << " q_start " << c.q_start << " stride " << c.stride << " G " << c.G
              << " causal window " << c.causal_window);
    on_each_impl([&](bool gpu) {
      test::TempDir dir("dsapipefp8");
      attnjit::Runtime rt(test::options_in(dir));
      std::mt19937 gen(static_cast<uint32_t>(c.S * 17 + c.G + (gpu ? 5 : 0)));
      const int64_t S_kv = (c.q_start + c.S) / c.stride, H_i = 4 * c.G, D_i = 64, D = 64, tail = 64, Dt = D + tail;
      Buf iq = random_buf(gen, DType::kBF16, {c.B, c.S, H_i, D_i}), ik = random_buf(gen, DType::kBF16, {c.B, S_kv, c.G, D_i});
      Buf w = random_buf(gen, DType::kF32, {c.S, H_i}, 0.5);
      // Windows: causal ends (q_pos + 1) // stride_kv; or every key (the futures then reach dsa_decode).
      std::vector<int32_t> ke(static_cast<size_t>(c.S)), ks(static_cast<size_t>(c.S), 0);
      for (int64_t s = 0; s < c.S; ++s)
        ke[s] = static_cast<int32_t>(c.causal_window ? (c.q_start + s + 1) / c.stride : S_kv);
      Buf ksb = i32_buf({c.S}, ks), keb = i32_buf({c.S}, ke);
      Buf logits(DType::kF32, {c.B, c.S, S_kv, c.G});
      run_op(rt, "fp8_lightning_indexer", {},
             {{"index_q", &iq}, {"index_k", &ik}, {"weights", &w}, {"cu_seqlen_ks", &ksb}, {"cu_seqlen_ke", &keb},
              {"logits", &logits, true}},
             gpu);
      Buf sel(DType::kI32, {c.B, c.S, c.G, c.topk});
      std::fill(sel.i32(), sel.i32() + sel.numel(), 0x7FFFFFFF);
      // The same windows as topk_select's starts/ends, broadcast over B with stride 0.
      run_op(rt, "topk_select", {{"topk", c.topk}},
             {{"index_score", &logits},
              {"starts", &ksb, false, {0, 1}, {c.B, c.S}},
              {"ends", &keb, false, {0, 1}, {c.B, c.S}},
              {"indexes", &sel, true}},
             gpu);
      std::vector<std::vector<std::vector<int64_t>>> keys(static_cast<size_t>(c.B * c.S));
      int padded = 0, dropped = 0;
      for (int64_t b = 0; b < c.B; ++b)
        for (int64_t s = 0; s < c.S; ++s) {
          const int64_t pos = c.q_start + s;
          keys[b * c.S + s].resize(static_cast<size_t>(c.G));
          for (int64_t g = 0; g < c.G; ++g) {
            std::vector<int64_t> cand;
            for (int64_t j = ks[s]; j < ke[s]; ++j) cand.push_back(j);
            const int32_t* row = sel.i32() + ((b * c.S + s) * c.G + g) * c.topk;
            INFO("topk_select row b " << b << " s " << s << " g " << g);
            check_topk_row(row, c.topk, cand, [&](int64_t j) { return logits.at(((b * c.S + s) * S_kv + j) * c.G + g); },
                           0.0);
            for (int64_t u = 0; u < c.topk; ++u) {
              if (row[u] == -1) {
                ++padded;
                continue;
              }
              if ((row[u] + 1) * c.stride <= pos + 1) keys[b * c.S + s][g].push_back(b * S_kv + row[u]);
              else ++dropped;
            }
          }
        }
      CHECK(padded > 0);
      if (!c.causal_window) CHECK(dropped > 0);
      Buf q = random_buf(gen, DType::kBF16, {c.B, c.S, c.H, Dt}), kv = random_buf(gen, DType::kBF16, {c.B, S_kv, c.G, Dt});
      Buf o(DType::kBF16, {c.B, c.S, c.H, D});
      std::fill(o.bytes.begin(), o.bytes.end(), 0xFF);
      run_op(rt, "dsa_decode", {{"dim_tail", tail}, {"stride_kv", c.stride}, {"q_start_index_s", c.q_start}},
             {{"q", &q}, {"kv", &kv}, {"indices", &sel}, {"o", &o, true}}, gpu);
      int empty_rows = 0;
      CHECK(attention_error(q, kv, o, c.B * c.S, c.H, c.G, D, tail, keys, 1.0 / std::sqrt(static_cast<double>(Dt)),
                            &empty_rows) <= tolerance(DType::kBF16));
    });
  }
}
