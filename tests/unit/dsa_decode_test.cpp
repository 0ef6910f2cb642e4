// dsa_decode (SPEC.md §2.18) through the public C++ API, for what the JSON cases cannot say: the reference
// against a plain loop written here (the DeepSeek shape H = 128, H_kv = 1, D = 512, dim_tail = 64
// included), repeated indices counting twice, a non-finite sm_scale, device placement, overlapping
// outputs and the kernel path's validation (its kernels: latent_decode_test.cpp).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>
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

struct Call {
  int64_t B, S, H, H_kv, S_kv, K, D, tail;
  DType dtype;
  std::vector<uint16_t> q, kv, o;
  std::vector<int32_t> idx;

  Call(int64_t b, int64_t s, int64_t h, int64_t hkv, int64_t skv, int64_t k, int64_t d, int64_t t,
       DType dt = DType::kBF16)
      : B(b), S(s), H(h), H_kv(hkv), S_kv(skv), K(k), D(d), tail(t), dtype(dt) {
    auto fill = [&](std::vector<uint16_t>& x, size_t n, int salt) {
      x.resize(n);
      for (size_t i = 0; i < n; ++i)
        numeric::store_from_double(x.data(), dtype, static_cast<int64_t>(i), std::sin(0.61 * static_cast<double>(i) + salt));
    };
    fill(q, static_cast<size_t>(B * S * H * (D + tail)), 1);
    fill(kv, static_cast<size_t>(B * S_kv * H_kv * (D + tail)), 2);
    o.assign(static_cast<size_t>(B * S * H * D), kPoison);
    // A pseudo-random mix of valid, future, repeated, -1, S_kv and far out-of-range entries.
    idx.resize(static_cast<size_t>(B * S * H_kv * K));
    uint32_t st = 12345;
    for (auto& x : idx) {
      st = st * 1103515245u + 12345u;
      const uint32_t r = (st >> 8) % 100;
      x = r < 8 ? -1 : r < 12 ? static_cast<int32_t>(S_kv) : r < 14 ? std::numeric_limits<int32_t>::min()
                                                                    : static_cast<int32_t>((st >> 4) % std::max<int64_t>(S_kv, 1));
    }
  }
  double qv(int64_t b, int64_t s, int64_t h, int64_t d) const {
    return numeric::load_as_double(q.data(), dtype, ((b * S + s) * H + h) * (D + tail) + d);
  }
  double kvv(int64_t b, int64_t x, int64_t r, int64_t d) const {
    return numeric::load_as_double(kv.data(), dtype, ((b * S_kv + x) * H_kv + r) * (D + tail) + d);
  }
  TensorArgs args(Device dev = kHost) {
    TensorArgs a;
    a.set("q", TensorRef::contiguous(q.data(), dtype, {B, S, H, D + tail}, dev));
    a.set("kv", TensorRef::contiguous(kv.data(), dtype, {B, S_kv, H_kv, D + tail}, dev));
    a.set("indices", TensorRef::contiguous(idx.data(), DType::kI32, {B, S, H_kv, K}, dev));
    a.set("o", TensorRef::contiguous(o.data(), dtype, {B, S, H, D}, dev));
    return a;
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

  // ||o - definition|| / ||definition||; rows the definition makes zero must be exact zeros. Returns the
  // error and counts the zero rows.
  double check(int64_t stride_kv, int64_t q_start, bool causal, double scale, int* zero_rows) const {
    double num = 0, den = 0;
    const int64_t g = H / H_kv, Dqk = D + tail;
    for (int64_t b = 0; b < B; ++b)
      for (int64_t s = 0; s < S; ++s)
        for (int64_t h = 0; h < H; ++h) {
          const int64_t r = h / g, pos = q_start + s;
          std::vector<int64_t> xs;
          for (int64_t u = 0; u < K; ++u) {
            const int64_t x = idx[((b * S + s) * H_kv + r) * K + u];
            if (x >= 0 && x < S_kv && (!causal || (x + 1) * stride_kv <= pos + 1)) xs.push_back(x);
          }
          std::vector<double> e(static_cast<size_t>(D), 0.0);
          if (!xs.empty()) {
            std::vector<double> l;
            for (int64_t x : xs) {
              double dot = 0;
              for (int64_t d = 0; d < Dqk; ++d) dot += qv(b, s, h, d) * kvv(b, x, r, d);
              l.push_back(scale * dot);
            }
            const double m = *std::max_element(l.begin(), l.end());
            double z = 0;
            for (size_t j = 0; j < xs.size(); ++j) {
              const double w = std::exp(l[j] - m);
              z += w;
              for (int64_t d = 0; d < D; ++d) e[d] += w * kvv(b, xs[j], r, d);
            }
            for (auto& x : e) x /= z;
          } else {
            ++*zero_rows;
          }
          for (int64_t d = 0; d < D; ++d) {
            const double got = numeric::load_as_double(o.data(), dtype, ((b * S + s) * H + h) * D + d);
            if (xs.empty()) CHECK(got == 0.0);
            num += (got - e[d]) * (got - e[d]);
            den += e[d] * e[d];
          }
        }
    return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
  }
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

attnjit::Config config(int64_t tail, int64_t stride, int64_t start, bool causal = true) {
  return {{"impl", "reference"}, {"dim_tail", tail}, {"stride_kv", stride}, {"q_start_index_s", start},
          {"is_causal", causal}};
}

}  // namespace

TEST_CASE("dsa_decode reference: against the definition (stride_kv 1 / 4, q_start_index_s 0 / > 0, causal or not)") {
  test::TempDir dir("dsaref");
  attnjit::Runtime rt(test::options_in(dir));
  struct Shape { int64_t B, S, H, H_kv, S_kv, K, D, tail, stride, start; bool causal; };
  for (const Shape& sh : {Shape{2, 5, 4, 1, 12, 9, 64, 0, 1, 0, true}, Shape{1, 6, 2, 1, 9, 7, 128, 16, 4, 0, true},
                          Shape{1, 3, 32, 2, 20, 8, 64, 32, 4, 30, true}, Shape{1, 2, 16, 1, 7, 5, 256, 128, 2, 3, false},
                          Shape{1, 1, 128, 1, 16, 12, 512, 64, 1, 9, true}})
    for (DType dt : {DType::kF16, DType::kBF16}) {
      Call c(sh.B, sh.S, sh.H, sh.H_kv, sh.S_kv, sh.K, sh.D, sh.tail, dt);
      rt.op("dsa_decode", config(sh.tail, sh.stride, sh.start, sh.causal)).run(c.args());
      int zero_rows = 0;
      INFO("H " << sh.H << " D " << sh.D << " tail " << sh.tail << " stride " << sh.stride << " start " << sh.start);
      CHECK(c.check(sh.stride, sh.start, sh.causal, 1.0 / std::sqrt(static_cast<double>(sh.D + sh.tail)), &zero_rows) <=
            (dt == DType::kF16 ? 2e-3 : 8e-3));
      if (sh.stride == 4 && sh.start == 0) CHECK(zero_rows >= 3 * sh.H);  // rows 0..2 see no complete window
    }
}

TEST_CASE("dsa_decode reference: a repeated index counts twice; sm_scale applies; no valid slot gives zeros") {
  test::TempDir dir("dsarep");
  attnjit::Runtime rt(test::options_in(dir));
  Call c(1, 1, 2, 1, 3, 3, 64, 0, DType::kF16);
  c.idx = {0, 0, 1};  // key 0 twice, key 1 once
  attnjit::Config cfg = config(0, 1, 5);
  cfg.set("sm_scale", 0.3);
  rt.op("dsa_decode", cfg).run(c.args());
  int zero_rows = 0;
  CHECK(c.check(1, 5, true, 0.3, &zero_rows) <= 2e-3);
  CHECK(zero_rows == 0);
  // Differs from the deduplicated row {0, 1}.
  Call d = c;
  d.idx = {0, 1, -1};
  d.o.assign(d.o.size(), kPoison);
  rt.op("dsa_decode", cfg).run(d.args());
  CHECK(c.o != d.o);
  // Every slot invalid: -1, S_kv, a future key at q_start_index_s = 0 with stride 4.
  Call e(1, 1, 2, 1, 3, 3, 64, 0);
  e.idx = {-1, 3, 0};
  rt.op("dsa_decode", config(0, 4, 0)).run(e.args());
  for (size_t i = 0; i < e.o.size(); ++i) CHECK(numeric::load_as_double(e.o.data(), e.dtype, i) == 0.0);
}

TEST_CASE("dsa_decode: sm_scale must be finite and > 0, including the values JSON text cannot hold") {
  test::TempDir dir("dsacfg");
  attnjit::Runtime rt(test::options_in(dir));
  for (double s : {0.0, -1.0, std::numeric_limits<double>::infinity(), std::numeric_limits<double>::quiet_NaN()}) {
    try {
      attnjit::Config cfg = config(0, 1, 0);
      cfg.set("sm_scale", s);
      rt.op("dsa_decode", cfg);
      FAIL("sm_scale " << s << " accepted");
    } catch (const attnjit::InvalidArgument& e) {
      CHECK((test::starts_with(e.what(), "dsa_decode: param: sm_scale: expected") ||
             test::starts_with(e.what(), "config: param: sm_scale: expected a finite number")));
    }
  }
  CHECK_THROWS_AS(rt.op("dsa_decode", {{"dim_tail", 0}, {"stride_kv", 1}}), attnjit::InvalidArgument);
  CHECK_NOTHROW(rt.op("dsa_decode", {{"dim_tail", 64}, {"stride_kv", 4}, {"q_start_index_s", 0}}));
}

TEST_CASE("dsa_decode: the kernel path validates like the reference: shape and placement errors") {
  test::TempDir dir("dsakern");
  attnjit::Runtime rt(test::options_in(dir));
  Call c(1, 2, 128, 1, 16, 8, 512, 64);
  const TensorArgs dev = c.device_args();
  // dim_tail 0 makes D = 576: a shape error on the kernel path as on the reference.
  auto op0 = rt.op("dsa_decode", {{"dim_tail", 0}, {"stride_kv", 1}, {"q_start_index_s", 0}});
  CHECK(test::starts_with(run_error(op0, dev), "dsa_decode: shape: q: expected head dim D"));
  auto op = rt.op("dsa_decode", {{"dim_tail", 64}, {"stride_kv", 1}, {"q_start_index_s", 0}});
  CHECK(test::starts_with(run_error(op, c.args()), "dsa_decode: device: q: expected a CUDA tensor"));
  CHECK(c.untouched());
}

TEST_CASE("dsa_decode reference: device tensors, mixed placements and overlapping outputs are rejected, unwritten") {
  test::TempDir dir("dsaplace");
  attnjit::Runtime rt(test::options_in(dir));
  auto op = rt.op("dsa_decode", config(0, 1, 0));
  Call c(1, 2, 2, 1, 4, 3, 64, 0);
  CHECK(test::starts_with(run_error(op, c.device_args()), "dsa_decode: device: q: expected a host tensor"));
  TensorArgs mixed = c.args();
  TensorRef idx = *mixed.find("indices");
  idx.device = kGpu;
  mixed.set("indices", idx);
  CHECK(test::starts_with(run_error(op, mixed), "dsa_decode: device: indices: expected a host tensor"));
  TensorArgs a = c.args();
  a.set("o", TensorRef::contiguous(c.kv.data(), c.dtype, {1, 2, 2, 64}, kHost));
  CHECK(test::starts_with(run_error(op, a), "dsa_decode: layout: o: expected no overlap with kv"));
  a = c.args();
  a.set("o", TensorRef::contiguous(c.idx.data(), c.dtype, {1, 2, 2, 64}, kHost));
  CHECK(test::starts_with(run_error(op, a), "dsa_decode: layout: o: expected no overlap with indices"));
  CHECK(c.untouched());
}
