// The latent-decode kernels of mla_decode and dsa_decode (templates/mla/latent_decode.cuh) as the planners
// see them without a GPU: which kernels a call selects per backend and kv_splits, the shared-memory stages
// per arch, that every variant compiles for sm_90a with its registers and spills as recorded, and the
// warm-up matrix. Their numerics are checked on a GPU by the grids (tests/gen/{mla,dsa}_decode_cases.py).
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include <set>
#include <string>
#include <vector>

#include "attnjit/error.hpp"
#include "attnjit/runtime.hpp"
#include "jit/nvrtc_compiler.hpp"
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

constexpr Device kGpu{DeviceKind::kCUDA, 0};

// Descriptors only (fake device addresses): contiguous tensors of `dt`.
struct Args {
  TensorArgs a;
  int next = 0;
  Args& add(const char* name, DType dt, std::vector<int64_t> shape) {
    TensorRef t = TensorRef::contiguous(test::fake_addr(next++), dt, shape, kGpu);
    a.set(name, t);
    return *this;
  }
};

TensorArgs mla_args(DType dt, int64_t D, bool paged, int64_t S_q = 1) {
  Args x;
  const int64_t B = 2, H = 128, N = 300;
  x.add("q", dt, {B, S_q, H, D}).add("q_pe", dt, {B, S_q, H, 64}).add("o", dt, {B, S_q, H, D});
  if (paged) {
    x.add("k", dt, {40, 64, 1, D}).add("k_pe", dt, {40, 64, 1, 64});
    x.add("block_table", DType::kI32, {B, 8}).add("cache_seqlens", DType::kI32, {B});
  } else {
    x.add("k", dt, {B, N, 1, D}).add("k_pe", dt, {B, N, 1, 64});
  }
  return x.a;
}

TensorArgs dsa_args(DType dt, int64_t D, int64_t tail) {
  Args x;
  x.add("q", dt, {1, 2, 64, D + tail}).add("kv", dt, {1, 500, 1, D + tail}).add("indices", DType::kI32, {1, 2, 1, 256});
  x.add("o", dt, {1, 2, 64, D});
  return x.a;
}

std::vector<std::string> names(const std::vector<attnjit::jit::KernelSpec>& specs) {
  std::vector<std::string> n;
  for (const auto& s : specs) n.push_back(s.name);
  return n;
}

}  // namespace

TEST_CASE("latent decode: the kernels a call selects per backend, kv_splits and arch; the gaps 'hopper' names") {
  test::TempDir dir("latentsel");
  attnjit::Runtime rt(test::options_in(dir));
  auto& impl = rt.impl();
  const TensorArgs mla = mla_args(DType::kBF16, 512, false);
  using V = std::vector<std::string>;
  // 'auto' takes the hopper kernel on sm_90a, the portable one elsewhere.
  CHECK(names(impl.op("mla_decode", {})->kernels_for(mla, "sm_90a")) ==
        V{"mla_decode.hopper.bf16.d512.t64.dense.seesaw", "mla_decode.hopper.bf16.d512.t64.dense.seesaw.split",
          "mla_decode.portable.combine.bf16.d512"});
  CHECK(names(impl.op("mla_decode", {{"backend", "portable"}})->kernels_for(mla, "sm_90a")) ==
        V{"mla_decode.portable.bf16.d512.t64.dense.s3", "mla_decode.portable.bf16.d512.t64.dense.s3.split",
          "mla_decode.portable.combine.bf16.d512"});
  CHECK(names(impl.op("mla_decode", {{"kv_splits", 1}})->kernels_for(mla, "sm_90")) ==
        V{"mla_decode.portable.bf16.d512.t64.dense.s3"});
  CHECK(names(impl.op("mla_decode", {{"kv_splits", 7}, {"backend", "hopper"}})->kernels_for(mla, "sm_90a")) ==
        V{"mla_decode.hopper.bf16.d512.t64.dense.seesaw.split", "mla_decode.portable.combine.bf16.d512"});
  // sm_80 allows 163 KB: two key stages at D + PE = 576; sm_86's 99 KB cannot hold them.
  CHECK(names(impl.op("mla_decode", {{"kv_splits", 1}})->kernels_for(mla_args(DType::kF16, 512, true), "sm_80")) ==
        V{"mla_decode.portable.fp16.d512.t64.paged.s2"});
  try {
    impl.op("mla_decode", {{"kv_splits", 1}})->kernels_for(mla, "sm_86");
    FAIL("D 512 was planned for sm_86");
  } catch (const attnjit::Unsupported& e) {
    CHECK(test::contains(e.what(), "mla_decode: unsupported: backend 'portable': D 512 + tail 64 needs"));
  }
  // dim_tail 16: the hopper kernels pad the depth 144 to 192 (three 64-column blocks); the seesaw kernel's two
  // 64-key tiles fit, and with tune.latent_tile 48 the 48-key kernel takes four stages.
  const TensorArgs dsa = dsa_args(DType::kF16, 128, 16);
  const nlohmann::json dcfg = {{"dim_tail", 16}, {"stride_kv", 1}, {"q_start_index_s", 0}, {"kv_splits", 1}};
  CHECK(names(impl.op("dsa_decode", dcfg)->kernels_for(dsa, "sm_90a")) ==
        V{"dsa_decode.hopper.fp16.d128.t16.indexed.seesaw"});
  {
    auto o48 = test::options_in(dir);
    o48.tune = R"({"latent_tile": 48})";
    attnjit::Runtime rt48(o48);
    CHECK(names(rt48.impl().op("dsa_decode", dcfg)->kernels_for(dsa, "sm_90a")) ==
          V{"dsa_decode.hopper.fp16.d128.t16.indexed.s4"});
  }
  CHECK(names(impl.op("dsa_decode", dcfg)->kernels_for(dsa, "sm_80")) == V{"dsa_decode.portable.fp16.d128.t16.indexed.s3"});
  // What backend 'hopper' cannot serve: another arch, D 64 (its value half would be 32 columns).
  auto hopper_gap = [&](const char* op, nlohmann::json cfg, const TensorArgs& args, const char* arch) {
    cfg["backend"] = "hopper";
    try {
      impl.op(op, cfg)->kernels_for(args, arch);
    } catch (const attnjit::Unsupported& e) {
      return std::string(e.what());
    }
    return std::string("(planned)");
  };
  CHECK(hopper_gap("mla_decode", nlohmann::json::object(), mla, "sm_90") ==
        "mla_decode: unsupported: backend 'hopper': it needs sm_90a (wgmma, TMA), the device is sm_90");
  const nlohmann::json d64 = {{"dim_tail", 0}, {"stride_kv", 1}, {"q_start_index_s", 0}};
  CHECK(hopper_gap("dsa_decode", d64, dsa_args(DType::kBF16, 64, 0), "sm_90a") ==
        "dsa_decode: unsupported: backend 'hopper': it serves D 128, 256 and 512, got D 64");
  CHECK(names(impl.op("dsa_decode", d64)->kernels_for(dsa_args(DType::kBF16, 64, 0), "sm_90a")).front() ==
        "dsa_decode.portable.bf16.d64.t0.indexed.s3");
  for (const auto& bad : {nlohmann::json(0), nlohmann::json(129), nlohmann::json(2.5), nlohmann::json("many")}) {
    try {
      impl.op("mla_decode", {{"kv_splits", bad}});
      FAIL("kv_splits " << bad.dump() << " accepted");
    } catch (const attnjit::InvalidArgument& e) {
      CHECK(test::starts_with(e.what(), "mla_decode: param: kv_splits: expected an integer in [1, 128] or \"auto\""));
    }
  }
}

// Every variant's registers and spills from ptxas -v. At D 512 a thread holds 128 fp32 accumulators (its
// half's 256 value columns of 16 rows, both backends); the kernels use up to 255 registers. NOTE: the paged split
// kernels keep one 32-bit value in local memory, stored once before the key loop and reloaded once after
// it (SASS: STL before the loop's first BAR.SYNC, LDL after its back branch); nothing spills in a loop.
TEST_CASE("latent decode: every variant compiles for sm_90a; no spills except the recorded 4 bytes outside the loop") {
  test::TempDir dir("latentnvrtc");
  attnjit::Runtime rt(test::options_in(dir));
  auto& impl = rt.impl();
  std::vector<attnjit::jit::KernelSpec> specs;
  std::set<std::string> seen;
  auto take = [&](std::vector<attnjit::jit::KernelSpec> v) {
    for (auto& s : v)
      if (seen.insert(s.describe()).second) specs.push_back(std::move(s));
  };
  for (const char* backend : {"portable", "hopper"}) {
    for (bool paged : {false, true})
      for (int64_t D : {128, 512})
        take(impl.op("mla_decode", {{"backend", backend}})->kernels_for(mla_args(DType::kBF16, D, paged), "sm_90a"));
    for (auto [D, tail] : {std::pair<int64_t, int64_t>{64, 0}, {128, 16}, {256, 128}, {512, 64}, {512, 128}}) {
      if (D == 64 && backend == std::string("hopper")) continue;
      take(impl.op("dsa_decode", {{"dim_tail", tail}, {"stride_kv", 1}, {"q_start_index_s", 0}, {"backend", backend}})
               ->kernels_for(dsa_args(DType::kBF16, D, tail), "sm_90a"));
    }
  }
  // The default is the seesaw kernel wherever it fits (all but dsa D 512 + tail 128). The same variants again
  // as the 48-key kernels (tune.latent_tile 48).
  {
    auto tuned_opts = test::options_in(dir);
    tuned_opts.tune = R"({"latent_tile": 48})";
    attnjit::Runtime tuned(tuned_opts);
    for (bool paged : {false, true})
      for (int64_t D : {128, 512})
        take(tuned.impl().op("mla_decode", {{"backend", "hopper"}})->kernels_for(mla_args(DType::kBF16, D, paged), "sm_90a"));
    for (auto [D, tail] : {std::pair<int64_t, int64_t>{128, 16}, {256, 128}, {512, 64}})
      take(tuned.impl()
               .op("dsa_decode", {{"dim_tail", tail}, {"stride_kv", 1}, {"q_start_index_s", 0}, {"backend", "hopper"}})
               ->kernels_for(dsa_args(DType::kBF16, D, tail), "sm_90a"));
  }
  // single + split per variant and backend (the 48-key kernels: 4 mla and 3 dsa variants); combines: mla D 128,
  // 512; dsa D 64 .. 512
  CHECK(specs.size() == (4 * 2 + 5 * 2) + (4 * 2 + 4 * 2) + (4 * 2 + 3 * 2) + 6);
  attnjit::jit::NvrtcCompiler compiler;
  for (const auto& s : specs) {
    const auto r = compiler.compile(s);
    INFO(s.describe() << "\n" << r.log);
    CHECK(test::contains(r.log, "registers"));
    if (test::contains(s.name, ".portable.") && test::contains(s.name, ".paged.") && test::contains(s.name, ".split") &&
        test::contains(s.name, ".d512."))
      CHECK(test::contains(r.log, "8 bytes stack frame, 4 bytes spill stores, 4 bytes spill loads"));
    else
      CHECK(test::contains(r.log, "0 bytes stack frame, 0 bytes spill stores"));
    // ptxas C7520: it serialised the wgmmas (a compiler-inserted warpgroup fence on a divergent path, as a
    // wait between the seesaw kernel's block-wise Q K^T issues had without its own fence).
    CHECK_FALSE(test::contains(r.log, "C7520"));
    const size_t u = r.log.find("Used");
    MESSAGE(s.describe() << ": " << r.log.substr(u, r.log.find('\n', u) - u));
  }
}

TEST_CASE("latent decode: the warm-up matrices hold the DeepSeek shapes' kernels") {
  std::set<std::string> mla, dsa;
  for (const auto& s : attnjit::detail::find_op("mla_decode").default_matrix("sm_90a")) mla.insert(s.name);
  for (const auto& s : attnjit::detail::find_op("dsa_decode").default_matrix("sm_90a")) dsa.insert(s.name);
  CHECK(mla.size() == 18);
  CHECK(dsa.size() == 10);
  for (const char* dt : {"bf16", "fp16"}) {
    for (const char* backend : {"portable", "hopper"})
      for (const char* split : {"", ".split"}) {
        const char* stages = backend == std::string("hopper") ? "seesaw" : "s3";
        for (const char* mode : {"dense", "paged"})
          CHECK(mla.count(fmt::format("mla_decode.{}.{}.d512.t64.{}.{}{}", backend, dt, mode, stages, split)) == 1);
        CHECK(dsa.count(fmt::format("dsa_decode.{}.{}.d512.t64.indexed.{}{}", backend, dt, stages, split)) == 1);
      }
    CHECK(mla.count(fmt::format("mla_decode.portable.combine.{}.d512", dt)) == 1);
    CHECK(dsa.count(fmt::format("dsa_decode.portable.combine.{}.d512", dt)) == 1);
  }
  // Other archs: the portable kernels only.
  for (const auto& s : attnjit::detail::find_op("mla_decode").default_matrix("sm_80"))
    CHECK(test::contains(s.name, ".portable."));
}

TEST_CASE("latent decode: tune.latent_tile picks the hopper kernel's key tile (64: seesaw, 48 or 32)") {
  test::TempDir dir("latenttile");
  auto opts = test::options_in(dir);
  const TensorArgs mla = mla_args(DType::kBF16, 512, false);
  auto hopper_names = [&](const char* tune, const TensorArgs& args) {
    opts.tune = tune;
    attnjit::Runtime rt(opts);
    return names(rt.impl().op("mla_decode", {{"kv_splits", 1}})->kernels_for(args, "sm_90a"));
  };
  // Unset or 64: the seesaw kernel (Q, two 64-key tiles and the P tiles: 219 KB); 48: two stages of 48 keys (227 KB
  // at D + PE = 576); 32: three stages.
  CHECK(hopper_names("{}", mla) == std::vector<std::string>{"mla_decode.hopper.bf16.d512.t64.dense.seesaw"});
  CHECK(hopper_names(R"({"latent_tile": 48})", mla) == std::vector<std::string>{"mla_decode.hopper.bf16.d512.t64.dense.s2"});
  CHECK(hopper_names(R"({"latent_tile": 64})", mla) ==
        std::vector<std::string>{"mla_decode.hopper.bf16.d512.t64.dense.seesaw"});
  CHECK(hopper_names(R"({"latent_tile": 32})", mla) ==
        std::vector<std::string>{"mla_decode.hopper.bf16.d512.t64.dense.s3.bn32"});
  opts.tune = R"({"latent_tile": 40})";
  attnjit::Runtime bad(opts);
  try {
    bad.impl().op("mla_decode", {{"kv_splits", 1}})->kernels_for(mla, "sm_90a");
    FAIL("latent_tile 40 accepted");
  } catch (const attnjit::InvalidArgument& e) {
    CHECK(std::string(e.what()) == "mla_decode: param: tune.latent_tile: expected 32, 48 or 64 key slots, got 40");
  }
  // dsa_decode D 512 + tail 128: 64-key tiles would need 272 KB, so 64 is refused and unset takes the 48-key kernel.
  const nlohmann::json dcfg = {{"dim_tail", 128}, {"stride_kv", 1}, {"q_start_index_s", 0}, {"kv_splits", 1}};
  const TensorArgs dsa = dsa_args(DType::kBF16, 512, 128);
  {
    opts.tune = "{}";
    attnjit::Runtime rt(opts);
    CHECK(names(rt.impl().op("dsa_decode", dcfg)->kernels_for(dsa, "sm_90a")) ==
          std::vector<std::string>{"dsa_decode.hopper.bf16.d512.t128.indexed.s2"});
  }
  opts.tune = R"({"latent_tile": 64})";
  attnjit::Runtime wide(opts);
  try {
    wide.impl().op("dsa_decode", dcfg)->kernels_for(dsa, "sm_90a");
    FAIL("64-key tiles planned at D 512 + tail 128");
  } catch (const attnjit::Unsupported& e) {
    CHECK(test::starts_with(e.what(), "dsa_decode: unsupported: tune.latent_tile: 64-key tiles at D 512 + tail 128 need "));
  }
}
