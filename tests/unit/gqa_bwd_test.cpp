// gqa_bwd (SPEC.md §2.12) through the public C++ API, for what the JSON cases cannot say: non-finite
// sm_scale, device placement, overlapping outputs, the backend choice and its gap messages, the kernels'
// compilation (no spills) and the warm-up matrix; and the reference fed by gqa_fwd's reference o and lse at S = 1, where the gradients
// are known in closed form.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include <fmt/format.h>

#include <set>
#include <string>

#include "attnjit/runtime.hpp"
#include "base/host_numeric.hpp"
#include "jit/nvrtc_compiler.hpp"
#include "ops/dense/gqa_bwd_call.hpp"
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
  CHECK_NOTHROW(rt.op("gqa_bwd", {{"window_size_left", 3}, {"window_size_right", -1}}));
  for (double w : {-2.0, 1.5})
    CHECK_THROWS_AS(rt.op("gqa_bwd", {{"window_size_left", w}}), attnjit::InvalidArgument);
  CHECK_THROWS_AS(rt.op("gqa_bwd", {{"softcap", 30.0}}), attnjit::InvalidArgument);
}

TEST_CASE("gqa_bwd: the backend choice per call, and the gaps an explicit backend names") {
  test::TempDir dir("gqabwdkern");
  attnjit::Runtime rt(test::options_in(dir));
  auto main_of = [&](const nlohmann::json& cfg, const TensorArgs& t, const std::string& arch) {
    const auto specs = rt.impl().op("gqa_bwd", cfg)->kernels_for(t, arch);
    REQUIRE(specs.size() == 3);  // prep, main, dq
    return specs[1].name;
  };
  auto hopper_error = [&](attnjit::Runtime& r, const nlohmann::json& cfg, const TensorArgs& t) -> std::string {
    try {
      r.impl().op("gqa_bwd", cfg)->kernels_for(t, "sm_90a");
    } catch (const attnjit::Unsupported& e) {
      return e.what();
    }
    return "accepted";
  };
  for (int64_t D : {64, 96, 128, 256}) {
    Call c(1, 70, 8, 2, D);
    const TensorArgs dev = c.device_args();
    const bool hopper_d = D != 96;
    INFO("D " << D);
    CHECK(main_of(nlohmann::json::object(), dev, "sm_90a") ==
          fmt::format("gqa_bwd.{}.fp16.d{}.causal", hopper_d ? "hopper" : "portable", D));
    CHECK(main_of({{"backend", "portable"}, {"is_causal", false}, {"deterministic", true}}, dev, "sm_90a") ==
          fmt::format("gqa_bwd.portable.fp16.d{}.det", D));
    CHECK(main_of(nlohmann::json::object(), dev, "sm_80") == fmt::format("gqa_bwd.portable.fp16.d{}.causal", D));
    if (D == 96)
      CHECK(hopper_error(rt, {{"backend", "hopper"}}, dev) ==
            "gqa_bwd: unsupported: backend 'hopper': its kernel serves head dims 64, 128 and 256, got D = 96");
  }
  // D 256's hopper kernel (D split over the consumer warpgroups) serves where its switch is on (the default),
  // and never deterministic.
  {
    Call c(1, 70, 8, 2, 256);
    const TensorArgs dev = c.device_args();
    attnjit::RuntimeOptions off = test::options_in(dir);
    off.tune = R"({"gqa_bwd_hopper_d256": false})";
    attnjit::Runtime rt_off(off);
    CHECK(hopper_error(rt_off, {{"backend", "hopper"}}, dev) ==
          "gqa_bwd: unsupported: backend 'hopper': its D = 256 kernel is switched off: tune.gqa_bwd_hopper_d256 = false "
          "(ATTNJIT_TUNE_GQA_BWD_HOPPER_D256=0)");
    CHECK(rt_off.impl().op("gqa_bwd", nlohmann::json::object())->kernels_for(dev, "sm_90a")[1].name ==
          "gqa_bwd.portable.fp16.d256.causal");
    attnjit::Runtime& rt_on = rt;
    CHECK(rt_on.impl().op("gqa_bwd", nlohmann::json::object())->kernels_for(dev, "sm_90a")[1].name ==
          "gqa_bwd.hopper.fp16.d256.causal");
    CHECK(rt_on.impl().op("gqa_bwd", {{"backend", "hopper"}, {"is_causal", false}})->kernels_for(dev, "sm_90a")[1].name ==
          "gqa_bwd.hopper.fp16.d256");
    CHECK(rt_on.impl().op("gqa_bwd", {{"deterministic", true}})->kernels_for(dev, "sm_90a")[1].name ==
          "gqa_bwd.portable.fp16.d256.causal.det");
    CHECK(hopper_error(rt_on, {{"backend", "hopper"}, {"deterministic", true}}, dev) ==
          "gqa_bwd: unsupported: backend 'hopper': its D = 256 kernel adds dQ with atomics; deterministic: true at "
          "D = 256 is portable only");
    CHECK(rt_on.impl().op("gqa_bwd", nlohmann::json::object())->kernels_for(dev, "sm_80")[1].name ==
          "gqa_bwd.portable.fp16.d256.causal");
  }
  Call c(2, 70, 8, 2, 128);
  const TensorArgs dev = c.device_args();
  try {
    rt.impl().op("gqa_bwd", {{"backend", "hopper"}})->kernels_for(dev, "sm_80");
    FAIL("hopper accepted sm_80");
  } catch (const attnjit::Unsupported& e) {
    CHECK(test::starts_with(e.what(), "gqa_bwd: unsupported: backend 'hopper': it needs sm_90a"));
  }
  // A zero (broadcast) stride on a read-only input is class F but no TMA source: auto takes portable,
  // hopper names the tensor.
  TensorArgs bcast = dev;
  TensorRef k = *bcast.find("k");
  k.strides[0] = 0;
  bcast.set("k", k);
  CHECK(main_of(nlohmann::json::object(), bcast, "sm_90a") == "gqa_bwd.portable.fp16.d128.causal");
  CHECK_THROWS_AS(rt.impl().op("gqa_bwd", {{"backend", "hopper"}})->kernels_for(bcast, "sm_90a"), attnjit::Unsupported);
  // A bad call is the InvalidArgument of the checks, for every backend, before any kernel choice.
  TensorArgs bad = dev;
  TensorRef lse = *bad.find("lse");
  lse.dtype = DType::kF16;
  bad.set("lse", lse);
  CHECK(test::starts_with(run_error(rt.op("gqa_bwd"), bad), "gqa_bwd: dtype: lse: expected fp32"));
  for (const char* backend : {"auto", "portable", "hopper"})
    CHECK_THROWS_AS(rt.impl().op("gqa_bwd", {{"backend", backend}})->kernels_for(bad, "sm_90a"), attnjit::InvalidArgument);
  // Host tensors on the kernel impl: a device error, outputs untouched.
  CHECK(test::starts_with(run_error(rt.op("gqa_bwd"), c.args()), "gqa_bwd: device: q: expected a CUDA tensor"));
  CHECK(c.outputs_untouched());
  CHECK_THROWS_AS(rt.op("gqa_bwd", {{"deterministic", "yes"}}), attnjit::InvalidArgument);
}

// Every code path of the kernels compiles for sm_90a without spilling: the causal diagonal, the
// deterministic turns, D 96's padded compute dim, D 256's 64-key tile with 16-query warp tiles, and the
// hopper kernel's causal and deterministic paths, D 256's split-D hopper kernel included.
// Registers and spills come from ptxas -v.
TEST_CASE("gqa_bwd: the kernels of every code path compile for sm_90a without spills") {
  test::TempDir dir("gqabwdnvrtc");
  attnjit::Runtime rt(test::options_in(dir));
  struct Path {
    const char* backend;
    int64_t D;
    bool causal, det;
    int64_t window_left = -1;
  };
  const Path paths[] = {{"portable", 64, true, false},  {"portable", 96, true, false}, {"portable", 128, true, false},
                        {"portable", 256, true, false}, {"portable", 64, false, true}, {"portable", 96, false, true},
                        {"portable", 128, false, true}, {"portable", 256, false, true}, {"hopper", 64, true, false},
                        {"hopper", 128, true, true},    {"hopper", 64, false, true},   {"hopper", 128, false, false},
                        {"portable", 128, true, false, 100}, {"portable", 256, false, true, 100},
                        {"hopper", 128, true, false, 100},   {"hopper", 64, false, true, 100},
                        {"hopper", 128, true, true, 100},    {"hopper", 128, false, true, 100},
                        {"hopper", 256, true, false},        {"hopper", 256, false, false},
                        {"hopper", 256, true, false, 100}};
  std::vector<attnjit::jit::KernelSpec> specs;
  std::set<std::string> seen;
  for (const Path& path : paths) {
    Call c(1, 70, 8, 2, path.D, DType::kBF16);
    for (auto& s : rt.impl()
                       .op("gqa_bwd", {{"backend", path.backend},
                                       {"is_causal", path.causal},
                                       {"deterministic", path.det},
                                       {"window_size_left", path.window_left}})
                       ->kernels_for(c.device_args(), "sm_90a"))
      if (seen.insert(s.describe()).second) specs.push_back(std::move(s));
  }
  CHECK(specs.size() == 21 + 8);  // 21 main kernels, prep and dq for 4 head dims
  attnjit::jit::NvrtcCompiler compiler;
  for (const auto& s : specs) {
    const auto r = compiler.compile(s);
    INFO(s.describe() << "\n" << r.log);
    CHECK(test::contains(r.log, "registers"));
    // NOTE: D 96's deterministic kernel (the D 128 tile with padding columns, 255 registers) keeps the
    // high word of one address in 4 bytes of local memory, stored once and reloaded once per 64-row
    // item, outside the MMA loops. Every other kernel spills nothing.
    if (test::contains(s.name, "portable.bf16.d96.det")) {
      CHECK(test::contains(r.log, "8 bytes stack frame, 4 bytes spill stores, 4 bytes spill loads"));
    } else {
      CHECK(test::contains(r.log, "0 bytes spill stores"));
      CHECK(test::contains(r.log, "0 bytes stack frame"));
    }
    MESSAGE(s.describe() << ": " << r.log.substr(r.log.find("Used"), r.log.find('\n', r.log.find("Used")) - r.log.find("Used")));
  }
}

TEST_CASE("gqa_bwd: the deterministic causal grid's band gives a group about four CTAs in flight") {
  using attnjit::ops::gqa_bwd_det_causal_band;
  // (groups = B * H_kv, key blocks of 128, SMs)
  CHECK(gqa_bwd_det_causal_band(128, 8, 132) == 4);   // B16 S1k H_kv 8: one CTA a group in the first wave
  CHECK(gqa_bwd_det_causal_band(64, 16, 132) == 2);   // two a group
  CHECK(gqa_bwd_det_causal_band(32, 32, 132) == 1);   // B4 S4k: four a group already
  CHECK(gqa_bwd_det_causal_band(8, 128, 132) == 1);   // B1 S16k
  CHECK(gqa_bwd_det_causal_band(1000, 2, 132) == 2);  // never more than the key blocks
  CHECK(gqa_bwd_det_causal_band(1000, 0, 132) == 1);
  CHECK(gqa_bwd_det_causal_band(0, 5, 0) == 4);       // degenerate counts stay in range
  CHECK(gqa_bwd_det_causal_band(128, 8, 132, 3) == 3);  // forced (ATTNJIT_TUNE_GQA_BWD_BAND)
  CHECK(gqa_bwd_det_causal_band(128, 2, 132, 8) == 2);  // forced, still at most the key blocks
  for (int groups : {1, 7, 66, 132, 133, 500, 100000})
    for (int n_kv : {1, 2, 3, 8, 33, 512}) {
      const int band = gqa_bwd_det_causal_band(groups, n_kv, 132);
      CHECK(band >= 1);
      CHECK(band <= n_kv);
    }
}

TEST_CASE("gqa_bwd: the warm-up matrix holds D 128's kernels; the op is registered") {
  auto names_of = [](const std::vector<attnjit::jit::KernelSpec>& specs) {
    std::set<std::string> n;
    for (const auto& s : specs) n.insert(s.name);
    return n;
  };
  const auto hopper = names_of(attnjit::detail::find_op("gqa_bwd").default_matrix("sm_90a"));
  const auto portable = names_of(attnjit::detail::find_op("gqa_bwd").default_matrix("sm_80"));
  CHECK(hopper.size() == 12);
  CHECK(portable.size() == 8);
  for (const char* dt : {"bf16", "fp16"})
    for (const char* c : {"", ".causal"}) {
      CHECK(hopper.count(fmt::format("gqa_bwd.hopper.{}.d128{}", dt, c)) == 1);
      CHECK(hopper.count(fmt::format("gqa_bwd.portable.{}.d128{}", dt, c)) == 1);
      CHECK(portable.count(fmt::format("gqa_bwd.portable.{}.d128{}", dt, c)) == 1);
    }
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
