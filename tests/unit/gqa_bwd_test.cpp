// gqa_bwd (SPEC.md §2.12) through the public C++ API, for what the JSON cases cannot say: non-finite
// sm_scale, device placement, overlapping outputs, the kernel impl's Unsupported error and the empty
// warm-up matrix; and the reference fed by gqa_fwd's reference o and lse at S = 1, where the gradients
// are known in closed form.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>
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

// Host buffers of one gqa_bwd call (16-bit inputs from a fixed pattern, outputs poisoned).
struct Call {
  int64_t B, S, H, H_kv, D;
  DType dtype;
  std::vector<uint16_t> q, k, v, o, dout, dq, dk, dv;
  std::vector<float> lse;

  Call(int64_t b, int64_t s, int64_t h, int64_t hkv, int64_t d, DType dt = DType::kF16)
      : B(b), S(s), H(h), H_kv(hkv), D(d), dtype(dt) {
    const size_t nq = static_cast<size_t>(B * S * H * D), nk = static_cast<size_t>(B * S * H_kv * D);
    auto fill = [&](std::vector<uint16_t>& x, size_t n, int salt) {
      x.resize(n);
      for (size_t i = 0; i < n; ++i)
        numeric::store_from_double(x.data(), dtype, static_cast<int64_t>(i),
                                   std::sin(0.37 * static_cast<double>(i) + salt) * 1.5);
    };
    fill(q, nq, 1);
    fill(k, nk, 2);
    fill(v, nk, 3);
    fill(o, nq, 4);
    fill(dout, nq, 5);
    lse.assign(static_cast<size_t>(B * H * S), 1.0f);
    dq.assign(nq, kPoison);
    dk.assign(nk, kPoison);
    dv.assign(nk, kPoison);
  }

  TensorArgs args(Device dev = kHost) {
    TensorArgs a;
    a.set("q", TensorRef::contiguous(q.data(), dtype, {B, S, H, D}, dev));
    a.set("k", TensorRef::contiguous(k.data(), dtype, {B, S, H_kv, D}, dev));
    a.set("v", TensorRef::contiguous(v.data(), dtype, {B, S, H_kv, D}, dev));
    a.set("o", TensorRef::contiguous(o.data(), dtype, {B, S, H, D}, dev));
    a.set("do", TensorRef::contiguous(dout.data(), dtype, {B, S, H, D}, dev));
    a.set("lse", TensorRef::contiguous(lse.data(), DType::kF32, {B, H, S}, dev));
    a.set("dq", TensorRef::contiguous(dq.data(), dtype, {B, S, H, D}, dev));
    a.set("dk", TensorRef::contiguous(dk.data(), dtype, {B, S, H_kv, D}, dev));
    a.set("dv", TensorRef::contiguous(dv.data(), dtype, {B, S, H_kv, D}, dev));
    return a;
  }

  // Descriptors at distinct, 256-aligned fake device addresses (never dereferenced).
  TensorArgs device_args() {
    TensorArgs a = args(kGpu);
    for (int i = 0; i < a.size(); ++i) {
      TensorRef t = *a.find(a.name(i));
      t.data = test::fake_addr(i);
      a.set(a.name(i), t);
    }
    return a;
  }

  bool outputs_untouched() const {
    auto poisoned = [](const std::vector<uint16_t>& x) {
      return std::all_of(x.begin(), x.end(), [](uint16_t b) { return b == kPoison; });
    };
    return poisoned(dq) && poisoned(dk) && poisoned(dv);
  }
};

// The message of the InvalidArgument a run raises ("(no error)" when none).
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

}  // namespace

TEST_CASE("gqa_bwd: sm_scale must be finite and > 0, including the values JSON text cannot hold") {
  test::TempDir dir("gqabwdcfg");
  attnjit::Runtime rt(test::options_in(dir));
  for (double s : {0.0, -1.0, std::numeric_limits<double>::infinity(), std::numeric_limits<double>::quiet_NaN()}) {
    try {
      rt.op("gqa_bwd", {{"sm_scale", s}});
      FAIL("sm_scale " << s << " accepted");
    } catch (const attnjit::InvalidArgument& e) {
      // JSON text cannot carry inf / NaN: attnjit::Config refuses them before the op sees them.
      CHECK((test::starts_with(e.what(), "gqa_bwd: param: sm_scale: expected") ||
             test::starts_with(e.what(), "config: param: sm_scale: expected a finite number")));
    }
  }
  CHECK_NOTHROW(rt.op("gqa_bwd", {{"sm_scale", 0.125}, {"is_causal", false}}));
  CHECK_THROWS_AS(rt.op("gqa_bwd", {{"window_size_left", 3}}), attnjit::InvalidArgument);
}

TEST_CASE("gqa_bwd: the kernel impl validates the call, then fails with Unsupported: no GPU kernel yet") {
  test::TempDir dir("gqabwdkern");
  attnjit::Runtime rt(test::options_in(dir));
  Call c(1, 5, 4, 2, 64);
  const TensorArgs dev = c.device_args();
  for (const char* backend : {"auto", "portable", "hopper"}) {
    auto op = rt.op("gqa_bwd", {{"backend", backend}});
    try {
      op.plan(dev);
      FAIL("a kernel plan was built for backend " << backend);
    } catch (const attnjit::Unsupported& e) {
      const std::string m = e.what();
      INFO(m);
      CHECK(test::starts_with(m, "gqa_bwd: unsupported: impl 'kernel'"));
      CHECK(test::contains(m, "no GPU kernel is built yet"));
      CHECK(test::contains(m, backend));
    }
    // Compile-only: the same descriptor checks, and nothing to compile.
    CHECK(rt.impl().op("gqa_bwd", {{"backend", backend}})->kernels_for(dev, "sm_90a").empty());
  }
  // A bad call is still the InvalidArgument it would be with kernels: the checks come first.
  TensorArgs bad = dev;
  TensorRef lse = *bad.find("lse");
  lse.dtype = DType::kF16;
  bad.set("lse", lse);
  CHECK(test::starts_with(run_error(rt.op("gqa_bwd"), bad), "gqa_bwd: dtype: lse: expected fp32"));
  CHECK_THROWS_AS(rt.impl().op("gqa_bwd", nlohmann::json::object())->kernels_for(bad, "sm_90a"),
                  attnjit::InvalidArgument);
  // Host tensors on the kernel impl: a device error, outputs untouched.
  CHECK(test::starts_with(run_error(rt.op("gqa_bwd"), c.args()), "gqa_bwd: device: q: expected a CUDA tensor"));
  CHECK(c.outputs_untouched());
}

TEST_CASE("gqa_bwd: no kernels in the warm-up matrix; the op is registered") {
  CHECK(attnjit::detail::find_op("gqa_bwd").default_matrix("sm_90a").empty());
  CHECK(attnjit::detail::find_op("gqa_bwd").default_matrix("sm_80").empty());
  const auto names = attnjit::Runtime::op_names();
  CHECK(std::find(names.begin(), names.end(), "gqa_bwd") != names.end());
}

TEST_CASE("gqa_bwd reference: device tensors, mixed placements and overlapping outputs are rejected, unwritten") {
  test::TempDir dir("gqabwdref");
  attnjit::Runtime rt(test::options_in(dir));
  auto op = rt.op("gqa_bwd", kReference);
  Call c(1, 3, 2, 1, 64);
  CHECK(test::starts_with(run_error(op, c.device_args()), "gqa_bwd: device: q: expected a host tensor"));
  TensorArgs mixed = c.args();
  TensorRef v = *mixed.find("v");
  v.device = kGpu;
  mixed.set("v", v);
  CHECK(test::starts_with(run_error(op, mixed), "gqa_bwd: device: v: expected a host tensor"));
  CHECK(c.outputs_untouched());

  // dk and dv sharing memory; dq on top of do; dv inside q's storage.
  TensorArgs a = c.args();
  a.set("dv", TensorRef::contiguous(c.dk.data(), c.dtype, {1, 3, 1, 64}, kHost));
  CHECK(test::starts_with(run_error(op, a), "gqa_bwd: layout: dk: expected no overlap with dv"));
  a = c.args();
  a.set("dq", TensorRef::contiguous(c.dout.data(), c.dtype, {1, 3, 2, 64}, kHost));
  CHECK(test::starts_with(run_error(op, a), "gqa_bwd: layout: dq: expected no overlap with do"));
  a = c.args();
  a.set("dv", TensorRef::contiguous(c.q.data() + 64, c.dtype, {1, 3, 1, 64}, kHost));
  CHECK(test::starts_with(run_error(op, a), "gqa_bwd: layout: dv: expected no overlap with q"));
  CHECK(c.outputs_untouched());
  // H = 0 query heads is a shape error even though 0 % H_kv == 0.
  Call z(1, 3, 0, 1, 64);
  CHECK(test::starts_with(run_error(op, z.args()), "gqa_bwd: shape: q: expected H >= 1"));
}

TEST_CASE("gqa_bwd reference: fed by gqa_fwd's reference at S = 1, dq = dk = 0 exactly and dv = the group's sum of do") {
  test::TempDir dir("gqabwdfwd");
  attnjit::Runtime rt(test::options_in(dir));
  for (DType dt : {DType::kF16, DType::kBF16})
    for (bool causal : {true, false}) {
      Call c(2, 1, 8, 2, 128, dt);
      // o and lse from the forward's reference (the contract: its lse feeds the backward unchanged).
      TensorArgs fwd;
      fwd.set("q", TensorRef::contiguous(c.q.data(), dt, {2, 1, 8, 128}, kHost));
      fwd.set("k", TensorRef::contiguous(c.k.data(), dt, {2, 1, 2, 128}, kHost));
      fwd.set("v", TensorRef::contiguous(c.v.data(), dt, {2, 1, 2, 128}, kHost));
      fwd.set("o", TensorRef::contiguous(c.o.data(), dt, {2, 1, 8, 128}, kHost));
      fwd.set("lse", TensorRef::contiguous(c.lse.data(), DType::kF32, {2, 8, 1}, kHost));
      rt.op("gqa_fwd", {{"impl", "reference"}, {"is_causal", causal}}).run(fwd);
      // One key per row: o is that key's v, exactly (the premise of the exact zeros below).
      for (int64_t b = 0; b < 2; ++b)
        for (int64_t h = 0; h < 8; ++h)
          for (int64_t d = 0; d < 128; ++d)
            REQUIRE(c.o[(b * 8 + h) * 128 + d] == c.v[(b * 2 + h / 4) * 128 + d]);
      rt.op("gqa_bwd", {{"impl", "reference"}, {"is_causal", causal}}).run(c.args());
      for (size_t i = 0; i < c.dq.size(); ++i) CHECK(numeric::load_as_double(c.dq.data(), dt, i) == 0.0);
      for (size_t i = 0; i < c.dk.size(); ++i) CHECK(numeric::load_as_double(c.dk.data(), dt, i) == 0.0);
      // dv[b, 0, r, d] = sum over the 4 query heads h of group r of P_h do[b, 0, h, d] with P_h = 1 up to
      // lse's fp32 rounding: within one rounding of the output dtype of the plain sum.
      const double tol = dt == DType::kF16 ? 1e-3 : 8e-3;
      for (int64_t b = 0; b < 2; ++b)
        for (int64_t r = 0; r < 2; ++r)
          for (int64_t d = 0; d < 128; ++d) {
            double want = 0;
            for (int64_t h = 4 * r; h < 4 * r + 4; ++h)
              want += numeric::load_as_double(c.dout.data(), dt, (b * 8 + h) * 128 + d);
            const double got = numeric::load_as_double(c.dv.data(), dt, (b * 2 + r) * 128 + d);
            CHECK(std::fabs(got - want) <= tol * std::max(1.0, std::fabs(want)));
          }
    }
}
