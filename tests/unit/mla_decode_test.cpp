// mla_decode (SPEC.md §2.13, docs/ops/mla_decode.md) through the public C++ API, for what the JSON cases
// cannot say: the reference against a plain loop written here, the content checks of cache_seqlens and
// block_table (unwritten outputs), the paged and contiguous caches agreeing bit for bit, device
// placement and overlapping outputs (the kernel path: latent_decode_test.cpp).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "attnjit/runtime.hpp"
#include "base/host_numeric.hpp"
#include "ops/registry.hpp"
#include "runtime/runtime_impl.hpp"
#include "test_util.hpp"

namespace {

namespace test = attnjit::test;
using attnjit::Device;
using attnjit::DeviceKind;
using attnjit::DType;
using attnjit::TensorArgs;
using attnjit::TensorRef;
namespace numeric = attnjit::numeric;

constexpr Device kHost{DeviceKind::kCPU, 0};
constexpr Device kGpu{DeviceKind::kCUDA, 0};
constexpr uint16_t kPoison = 0xA5A5;
constexpr int64_t kPe = 64;

std::vector<uint16_t> pattern(size_t n, DType dt, int salt) {
  std::vector<uint16_t> x(n);
  for (size_t i = 0; i < n; ++i)
    numeric::store_from_double(x.data(), dt, static_cast<int64_t>(i), std::sin(0.37 * static_cast<double>(i) + salt) * 1.5);
  return x;
}

double val(const std::vector<uint16_t>& x, DType dt, int64_t i) { return numeric::load_as_double(x.data(), dt, i); }

// One call with a contiguous cache: q [B, S_q, H, D] (rank 4; rank 3 when rank3), k [B, N, H_kv, D].
struct Call {
  int64_t B, S_q, H, H_kv, D, N;
  DType dtype;
  bool rank3 = false;
  std::vector<uint16_t> q, q_pe, k, k_pe, o;
  std::vector<int32_t> lens;  // empty: no cache_seqlens

  Call(int64_t b, int64_t sq, int64_t h, int64_t hkv, int64_t d, int64_t n, DType dt = DType::kBF16)
      : B(b), S_q(sq), H(h), H_kv(hkv), D(d), N(n), dtype(dt) {
    q = pattern(static_cast<size_t>(B * S_q * H * D), dtype, 1);
    q_pe = pattern(static_cast<size_t>(B * S_q * H * kPe), dtype, 2);
    k = pattern(static_cast<size_t>(B * N * H_kv * D), dtype, 3);
    k_pe = pattern(static_cast<size_t>(B * N * H_kv * kPe), dtype, 4);
    o.assign(static_cast<size_t>(B * S_q * H * D), kPoison);
  }
  std::vector<int64_t> qshape(int64_t last) const {
    return rank3 ? std::vector<int64_t>{B, H, last} : std::vector<int64_t>{B, S_q, H, last};
  }

  TensorArgs args(Device dev = kHost) {
    TensorArgs a;
    a.set("q", TensorRef::contiguous(q.data(), dtype, qshape(D), dev));
    a.set("q_pe", TensorRef::contiguous(q_pe.data(), dtype, qshape(kPe), dev));
    a.set("k", TensorRef::contiguous(k.data(), dtype, {B, N, H_kv, D}, dev));
    a.set("k_pe", TensorRef::contiguous(k_pe.data(), dtype, {B, N, H_kv, kPe}, dev));
    if (!lens.empty()) a.set("cache_seqlens", TensorRef::contiguous(lens.data(), DType::kI32, {B}, dev));
    a.set("o", TensorRef::contiguous(o.data(), dtype, qshape(D), dev));
    return a;
  }

  // The expected o of (b, t, h) in double, straight from the definition.
  std::vector<double> expected(int64_t b, int64_t t, int64_t h) const {
    const int64_t len = lens.empty() ? N : lens[b];
    const int64_t vis = std::max<int64_t>(0, std::min(len, len - S_q + 1 + t));
    const int64_t r = h / (H / H_kv);
    std::vector<double> l(static_cast<size_t>(vis)), out(static_cast<size_t>(D), 0.0);
    if (vis == 0) return out;
    for (int64_t n = 0; n < vis; ++n) {
      double s = 0;
      for (int64_t d = 0; d < D; ++d)
        s += val(q, dtype, ((b * S_q + t) * H + h) * D + d) * val(k, dtype, ((b * N + n) * H_kv + r) * D + d);
      for (int64_t d = 0; d < kPe; ++d)
        s += val(q_pe, dtype, ((b * S_q + t) * H + h) * kPe + d) *
             val(k_pe, dtype, ((b * N + n) * H_kv + r) * kPe + d);
      l[n] = s / std::sqrt(static_cast<double>(D + kPe));
    }
    const double m = *std::max_element(l.begin(), l.end());
    double z = 0;
    for (int64_t n = 0; n < vis; ++n) {
      const double w = std::exp(l[n] - m);
      z += w;
      for (int64_t d = 0; d < D; ++d) out[d] += w * val(k, dtype, ((b * N + n) * H_kv + r) * D + d);
    }
    for (auto& x : out) x /= z;
    return out;
  }

  // ||o - expected|| / ||expected|| over every row; rows that must be zero are checked exactly.
  double check_against_definition() const {
    double num = 0, den = 0;
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = 0; t < S_q; ++t)
        for (int64_t h = 0; h < H; ++h) {
          const auto e = expected(b, t, h);
          const bool zero = std::all_of(e.begin(), e.end(), [](double x) { return x == 0.0; });
          for (int64_t d = 0; d < D; ++d) {
            const double got = val(o, dtype, ((b * S_q + t) * H + h) * D + d);
            if (zero) CHECK(got == 0.0);
            num += (got - e[d]) * (got - e[d]);
            den += e[d] * e[d];
          }
        }
    return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
  }

  TensorArgs device_args() {
    TensorArgs a = args(kGpu);
    for (int i = 0; i < a.size(); ++i) {
      TensorRef t = *a.find(a.name(i));
      t.data = test::fake_addr(i);
      a.set(a.name(i), t);
    }
    return a;
  }
  bool untouched() const { return std::all_of(o.begin(), o.end(), [](uint16_t x) { return x == kPoison; }); }
};

std::string run_error(const attnjit::Op& op, const TensorArgs& args) {
  try {
    op.run(args);
  } catch (const attnjit::InvalidArgument& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("unexpected exception type: ") + e.what();
  }
  return "(no error)";
}

const attnjit::Config kReference = {{"impl", "reference"}};

// The cache of `c` laid out as page pools [NP, PS, H_kv, D / PE] with request b's logical page p at
// physical page table[b * W + p]; every other slot holds garbage.
struct Paged {
  int64_t NP, PS, W;
  std::vector<uint16_t> k, k_pe;
  std::vector<int32_t> table;
  Paged(const Call& c, int64_t ps) : PS(ps) {
    W = (c.N + PS - 1) / PS + 1;
    NP = c.B * W + 1;
    k.assign(static_cast<size_t>(NP * PS * c.H_kv * c.D), 0);
    k_pe.assign(static_cast<size_t>(NP * PS * c.H_kv * kPe), 0);
    for (size_t i = 0; i < k.size(); ++i) numeric::store_from_double(k.data(), c.dtype, i, 40.0);
    for (size_t i = 0; i < k_pe.size(); ++i) numeric::store_from_double(k_pe.data(), c.dtype, i, -40.0);
    for (int64_t b = 0; b < c.B; ++b)
      for (int64_t p = 0; p < W; ++p) table.push_back(static_cast<int32_t>((NP - 1) - (b * W + p)));  // reversed
    for (int64_t b = 0; b < c.B; ++b)
      for (int64_t n = 0; n < c.N; ++n) {
        const int64_t page = table[b * W + n / PS], slot = n % PS;
        for (int64_t r = 0; r < c.H_kv; ++r) {
          std::copy_n(&c.k[((b * c.N + n) * c.H_kv + r) * c.D], c.D, &k[((page * PS + slot) * c.H_kv + r) * c.D]);
          std::copy_n(&c.k_pe[((b * c.N + n) * c.H_kv + r) * kPe], kPe,
                      &k_pe[((page * PS + slot) * c.H_kv + r) * kPe]);
        }
      }
  }
  TensorArgs args(Call& c, std::vector<int32_t>& lens, std::vector<uint16_t>& o) {
    TensorArgs a;
    a.set("q", TensorRef::contiguous(c.q.data(), c.dtype, c.qshape(c.D), kHost));
    a.set("q_pe", TensorRef::contiguous(c.q_pe.data(), c.dtype, c.qshape(kPe), kHost));
    a.set("k", TensorRef::contiguous(k.data(), c.dtype, {NP, PS, c.H_kv, c.D}, kHost));
    a.set("k_pe", TensorRef::contiguous(k_pe.data(), c.dtype, {NP, PS, c.H_kv, kPe}, kHost));
    a.set("block_table", TensorRef::contiguous(table.data(), DType::kI32, {c.B, W}, kHost));
    a.set("cache_seqlens", TensorRef::contiguous(lens.data(), DType::kI32, {c.B}, kHost));
    a.set("o", TensorRef::contiguous(o.data(), c.dtype, c.qshape(c.D), kHost));
    return a;
  }
};

}  // namespace

TEST_CASE("mla_decode reference: the contract's shapes against the definition (H_kv 1 and 2, D 128/256/512)") {
  test::TempDir dir("mlaref");
  attnjit::Runtime rt(test::options_in(dir));
  auto op = rt.op("mla_decode", kReference);
  for (DType dt : {DType::kF16, DType::kBF16})
    for (const auto& shape : {std::tuple{16, 1, 512, 7}, std::tuple{4, 2, 128, 33}, std::tuple{2, 2, 256, 1}}) {
      // NOTE: plain variables, not a structured binding: INFO's lambda captures them, which clang 14 refuses.
      const int H = std::get<0>(shape), H_kv = std::get<1>(shape), D = std::get<2>(shape), N = std::get<3>(shape);
      Call c(2, 1, H, H_kv, D, N, dt);
      c.rank3 = true;
      op.run(c.args());
      INFO("H " << H << " H_kv " << H_kv << " D " << D << " N " << N);
      CHECK(c.check_against_definition() <= (dt == DType::kF16 ? 2e-3 : 8e-3));
    }
  // N_kv = 0: zeros.
  Call z(2, 1, 4, 1, 128, 0);
  z.rank3 = true;
  op.run(z.args());
  for (size_t i = 0; i < z.o.size(); ++i) CHECK(val(z.o, z.dtype, i) == 0.0);
}

TEST_CASE("mla_decode reference: cache_seqlens, S_q > 1 (causal to the end of the cache) against the definition") {
  test::TempDir dir("mlaext");
  attnjit::Runtime rt(test::options_in(dir));
  auto op = rt.op("mla_decode", kReference);
  Call c(3, 3, 4, 2, 128, 9, DType::kF16);
  c.lens = {9, 0, 2};  // request 2: token 0 sees nothing, token 1 position 0, token 2 positions 0 and 1
  op.run(c.args());
  CHECK(c.check_against_definition() <= 2e-3);
  // cache_seqlens = N_kv everywhere is the same call as no cache_seqlens, bit for bit.
  Call a(2, 2, 4, 1, 256, 5), b2(2, 2, 4, 1, 256, 5);
  b2.lens = {5, 5};
  op.run(a.args());
  op.run(b2.args());
  CHECK(a.o == b2.o);
  // Rank-3 q equals rank-4 q with S_q = 1.
  Call r3(2, 1, 2, 1, 128, 6), r4(2, 1, 2, 1, 128, 6);
  r3.rank3 = true;
  op.run(r3.args());
  op.run(r4.args());
  CHECK(r3.o == r4.o);
}

TEST_CASE("mla_decode reference: a paged cache gives the contiguous cache's output bit for bit, garbage unread") {
  test::TempDir dir("mlapaged");
  attnjit::Runtime rt(test::options_in(dir));
  auto op = rt.op("mla_decode", kReference);
  for (int64_t PS : {16, 64, 48}) {
    Call c(2, 2, 4, 2, 128, 37, DType::kBF16);
    c.lens = {37, 20};
    op.run(c.args());
    Paged p(c, PS);
    std::vector<int32_t> lens = c.lens;
    std::vector<uint16_t> o(c.o.size(), kPoison);
    // Unused table entries (past each request's pages) are never read: make them out of range.
    p.table[1 * p.W + p.W - 1] = 1 << 30;
    op.run(p.args(c, lens, o));
    INFO("PS " << PS);
    CHECK(o == c.o);
  }
}

TEST_CASE("mla_decode reference: cache_seqlens and block_table values out of range are content errors, unwritten") {
  test::TempDir dir("mlacontent");
  attnjit::Runtime rt(test::options_in(dir));
  for (bool validate : {false, true}) {
    auto op = rt.op("mla_decode", {{"impl", "reference"}, {"validate_inputs", validate}});
    Call c(2, 1, 2, 1, 128, 5);
    c.lens = {5, 6};
    CHECK(test::starts_with(run_error(op, c.args()),
                            "mla_decode: content: cache_seqlens: expected 0 <= cache_seqlens[b] <= 5 (N_kv), got 6 at [1]"));
    c.lens = {-1, 2};
    CHECK(test::starts_with(run_error(op, c.args()), "mla_decode: content: cache_seqlens: expected 0 <= cache_seqlens[b]"));
    CHECK(c.untouched());

    Call base(2, 1, 2, 1, 128, 20);
    Paged p(base, 16);  // W = 3 pages of 16
    std::vector<int32_t> lens = {20, 49};
    std::vector<uint16_t> o(base.o.size(), kPoison);
    CHECK(test::starts_with(run_error(op, p.args(base, lens, o)),
                            "mla_decode: content: cache_seqlens: expected 0 <= cache_seqlens[b] <= 48 (W * PS = 3 * 16), "
                            "got 49 at [1]"));
    lens = {20, 17};
    p.table[1 * p.W + 1] = static_cast<int32_t>(p.NP);  // request 1's second (used) page
    CHECK(test::starts_with(run_error(op, p.args(base, lens, o)),
                            "mla_decode: content: block_table: expected pages in [0, NP = 7) for the used entries"));
    p.table[1 * p.W + 1] = -1;
    CHECK(test::contains(run_error(op, p.args(base, lens, o)), "got -1 at [1, 1]"));
    CHECK(std::all_of(o.begin(), o.end(), [](uint16_t x) { return x == kPoison; }));
    lens = {20, 16};  // the bad entry is no longer used
    CHECK(run_error(op, p.args(base, lens, o)) == "(no error)");
  }
}

TEST_CASE("mla_decode reference: device tensors, mixed placements and overlapping outputs are rejected, unwritten") {
  test::TempDir dir("mlaplace");
  attnjit::Runtime rt(test::options_in(dir));
  auto op = rt.op("mla_decode", kReference);
  Call c(1, 1, 2, 1, 128, 3);
  CHECK(test::starts_with(run_error(op, c.device_args()), "mla_decode: device: q: expected a host tensor"));
  TensorArgs mixed = c.args();
  TensorRef kpe = *mixed.find("k_pe");
  kpe.device = kGpu;
  mixed.set("k_pe", kpe);
  CHECK(test::starts_with(run_error(op, mixed), "mla_decode: device: k_pe: expected a host tensor"));
  TensorArgs a = c.args();
  a.set("o", TensorRef::contiguous(c.k.data(), c.dtype, {1, 1, 2, 128}, kHost));
  CHECK(test::starts_with(run_error(op, a), "mla_decode: layout: o: expected no overlap with k"));
  a = c.args();
  a.set("o", TensorRef::contiguous(c.q.data(), c.dtype, {1, 1, 2, 128}, kHost));
  CHECK(test::starts_with(run_error(op, a), "mla_decode: layout: o: expected no overlap with q"));
  CHECK(c.untouched());
}
