// The nsa_selected_fwd kernels (templates/nsa/nsa_selected_fwd.cuh, nsa_selected_fwd_hopper.cuh) without a
// GPU: every variant (fp16 and bf16, D 64 and 128, 16 to 64 rows or heads per CTA) compiles for sm_90a with
// no spills, and the portable kernel's shared memory fits every sm_80+ arch. Their numerics are checked on a
// GPU by the grids (tests/gen/nsa_selected_fwd_cases.py).
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <string>
#include <vector>

#include "jit/nvrtc_compiler.hpp"
#include "nsa/nsa_selected_fwd_params.cuh"
#include "ops/base/op.hpp"
#include "ops/nsa/nsa_selected_kernel.hpp"
#include "test_util.hpp"

namespace {

namespace test = attnjit::test;
using attnjit::DType;

constexpr const char* kOp = "nsa_selected_fwd";

}  // namespace

TEST_CASE("nsa_selected_fwd kernel: every variant compiles for sm_90a with no spills; shared memory per variant") {
  namespace nsa = attnjit::ops::nsa;
  attnjit::jit::NvrtcCompiler compiler;
  int n = 0;
  for (DType dt : {DType::kF16, DType::kBF16})
    for (int64_t D : {64, 128})
      for (int64_t group : {16, 32, 48, 64}) {
        const auto k = nsa::choose_selected_kernel(kOp, dt, D, group, attnjit::detail::Backend::kPortable, "sm_90a");
        CHECK(k.warps == group / 16);
        // The default tile: 32 slots, 2 stages, two warps a row group splitting each tile.
        CHECK(k.smem_bytes() == (group + 128) * D * 2 + 256);
        CHECK(k.threads() == 64 * k.warps);
        CHECK(k.smem_bytes() <= 99 * 1024);  // sm_86 / sm_89's per-block limit
        const auto spec = nsa::selected_kernel_spec(kOp, k);
        const auto r = compiler.compile(spec);
        INFO(spec.describe() << "\n" << r.log);
        CHECK(test::contains(r.log, "registers"));
        CHECK(test::contains(r.log, "0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads"));
        const size_t u = r.log.find("Used");
        MESSAGE(spec.describe() << ": " << r.log.substr(u, r.log.find('\n', u) - u) << ", " << k.smem_bytes()
                                << " bytes dynamic shared memory");
        ++n;
      }
  CHECK(n == 16);
  // Group sizes past 64 take tiles of 64 rows.
  CHECK(attnjit::kernels::nsa_selected_warps(128) == 4);
  CHECK(attnjit::kernels::nsa_selected_warps(80) == 4);
}

// The tiles ATTNJIT_TUNE_NSA_SELECTED_TILE may pick for NSA's shape (group 16, D 128): key slots per tile,
// ring depth and key splits; each compiles without spills, and a malformed override is a param error.
TEST_CASE("nsa_selected_fwd kernel: tuned tiles (BNxSTAGES[xKSPLIT]) compile without spills; bad overrides rejected") {
  namespace nsa = attnjit::ops::nsa;
  attnjit::jit::NvrtcCompiler compiler;
  struct Want {
    const char* tile;
    int bn, stages, ksplit;
  } wants[] = {{"16x2", 16, 2, 1}, {"32x2", 32, 2, 1}, {"16x4", 16, 4, 1}, {"32x2x2", 32, 2, 2}, {"64x2x4", 64, 2, 4},
               {"64x3x4", 64, 3, 4}, {"64x2x2", 64, 2, 2}};
  for (const auto& w : wants) {
    const auto k = nsa::choose_selected_kernel(kOp, DType::kBF16, 128, 16, attnjit::detail::Backend::kAuto, "sm_90a", w.tile);
    CHECK(k.bn == w.bn);
    CHECK(k.stages == w.stages);
    CHECK(k.ksplit == w.ksplit);
    CHECK(k.threads() == 32 * w.ksplit);
    CHECK(k.smem_bytes() == (16 + 2 * w.stages * w.bn) * 128 * 2 + w.stages * w.bn * 4);
    const auto spec = nsa::selected_kernel_spec(kOp, k);
    const auto r = compiler.compile(spec);
    INFO(spec.describe() << "\n" << r.log);
    CHECK(test::contains(r.log, "0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads"));
    const size_t u = r.log.find("Used");
    MESSAGE(spec.name << ": " << r.log.substr(u, r.log.find('\n', u) - u) << ", " << k.smem_bytes() << " bytes");
  }
  for (const char* bad : {"16", "8x2", "32x1", "32x5", "16x2x2", "32x2x3", "64x2x8", "32x2x", "32x2y"})
    CHECK_THROWS_WITH_AS(nsa::choose_selected_kernel(kOp, DType::kBF16, 128, 16, attnjit::detail::Backend::kAuto, "sm_90a", bad),
                         doctest::Contains("ATTNJIT_TUNE_NSA_SELECTED_TILE: expected"), attnjit::InvalidArgument);
  // Group 64 has four row groups: two key splits reach the 8-warp limit, four exceed it.
  CHECK(nsa::choose_selected_kernel(kOp, DType::kBF16, 128, 64, attnjit::detail::Backend::kAuto, "sm_90a", "32x2x2").threads() == 256);
  CHECK_THROWS_AS(nsa::choose_selected_kernel(kOp, DType::kBF16, 128, 64, attnjit::detail::Backend::kAuto, "sm_90a", "64x2x4"),
                  attnjit::InvalidArgument);
}

// The hopper kernel: one warpgroup over 16 to 64 heads, 64-slot tiles; every variant and ring depth compiles
// for sm_90a with no spills; a tile override other than "64xSTAGES" is a param error.
TEST_CASE("nsa_selected_fwd hopper kernel: every variant and ring depth compiles for sm_90a with no spills") {
  namespace nsa = attnjit::ops::nsa;
  attnjit::jit::NvrtcCompiler compiler;
  int n = 0;
  auto compile = [&](const nsa::SelectedKernelChoice& k) {
    const auto spec = nsa::selected_kernel_spec(kOp, k);
    const auto r = compiler.compile(spec);
    INFO(spec.describe() << "\n" << r.log);
    CHECK(test::contains(r.log, "0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads"));
    const size_t u = r.log.find("Used");
    REQUIRE(u != std::string::npos);
    MESSAGE(spec.name << ": " << r.log.substr(u, r.log.find('\n', u) - u) << ", " << k.smem_bytes() << " bytes");
    ++n;
  };
  for (DType dt : {DType::kF16, DType::kBF16})
    for (int64_t D : {64, 128})
      for (int64_t group : {16, 32, 48, 64, 128}) {
        const auto k = nsa::choose_selected_kernel(kOp, dt, D, group, attnjit::detail::Backend::kHopper, "sm_90a");
        CHECK(k.hopper);
        CHECK(k.heads() == (group >= 64 ? 64 : group));
        CHECK(k.m_tiles(group) == (group + 63) / 64);
        CHECK(k.threads() == 128);
        CHECK(k.smem_bytes() == 1024 + (2 * 2 * 64 * D + k.heads() * D + k.heads() * 64) * 2 + (2 * 64 + 4 * k.heads() + 128) * 4);
        if (group != 128) compile(k);  // 128 is the 64-head kernel in two tiles
      }
  for (const char* tile : {"64x3", "64x4"}) {
    const auto k = nsa::choose_selected_kernel(kOp, DType::kBF16, 128, 16, attnjit::detail::Backend::kHopper, "sm_90a", tile);
    CHECK(k.stages == tile[3] - '0');
    compile(k);
  }
  CHECK(n == 18);
  for (const char* bad : {"32x2", "64x2x2", "64x1", "64x5", "64", "64x2y"})
    CHECK_THROWS_WITH_AS(nsa::choose_selected_kernel(kOp, DType::kBF16, 128, 16, attnjit::detail::Backend::kHopper, "sm_90a", bad),
                         doctest::Contains("the hopper kernel expects \"64xSTAGES\""), attnjit::InvalidArgument);
}
