// The nsa_topk kernel (templates/nsa/nsa_topk.cuh) without a GPU: every variant (fp16 and bf16, D 64 and
// 128, 4 / 2 / 1 tokens a CTA, the default 64x2 tile) compiles for sm_90a with no spills, and its shared
// memory, bounded for any sequence length by the candidate windows, fits every sm_80+ arch; the tiles
// ATTNJIT_TUNE_NSA_TOPK_TILE may pick compile too. Its numerics are checked on a GPU by
// the grid (tests/gen/nsa_topk_cases.py).
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <string>

#include "jit/nvrtc_compiler.hpp"
#include "nsa/nsa_topk_params.cuh"
#include "ops/base/op.hpp"
#include "ops/nsa/nsa_topk_kernel.hpp"
#include "test_util.hpp"

namespace {

namespace test = attnjit::test;
using attnjit::DType;

constexpr const char* kOp = "nsa_topk";

// Compiles the choice's kernel, checks ptxas reported no stack and no spills, and prints its registers.
void compiles_without_spills(attnjit::jit::NvrtcCompiler& compiler, const attnjit::ops::nsa::TopkKernelChoice& k) {
  const auto spec = attnjit::ops::nsa::topk_kernel_spec(kOp, k);
  const auto r = compiler.compile(spec);
  INFO(spec.describe() << "\n" << r.log);
  CHECK(test::contains(r.log, "0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads"));
  const size_t u = r.log.find("Used");
  REQUIRE(u != std::string::npos);
  MESSAGE(spec.describe() << ": " << r.log.substr(u, r.log.find('\n', u) - u) << ", " << k.smem_bytes()
                          << " bytes dynamic shared memory");
}

}  // namespace

TEST_CASE("nsa_topk kernel: every variant compiles for sm_90a with no spills; shared memory per variant") {
  namespace nsa = attnjit::ops::nsa;
  namespace kernels = attnjit::kernels;
  attnjit::jit::NvrtcCompiler compiler;
  int n = 0;
  for (DType dt : {DType::kF16, DType::kBF16})
    for (int64_t D : {64, 128})
      for (int64_t group : {16, 32, 64}) {
        const auto k = nsa::choose_topk_kernel(kOp, dt, D, group, attnjit::detail::Backend::kPortable, "sm_90a");
        CHECK(k.tokens == (group == 16 ? 4 : group == 32 ? 2 : 1));
        CHECK(k.threads() == 128);
        CHECK(k.bn == 32);
        CHECK(k.stages == 2);
        CHECK(k.window == 1024);
        // Q (64 rows) and two k_cmp tiles of 32 rows; 4 warp slices of 1024 candidates, the running and
        // staging sets of 128 keys and ids a token, 4 histograms of 256 bins.
        CHECK(k.smem_bytes() == 128 * D * 2 + (4096 + 4 * 128 * k.tokens + 1024) * 4 + 256);
        CHECK(k.smem_bytes() <= 99 * 1024);  // sm_86 / sm_89's per-block limit
        compiles_without_spills(compiler, k);
        ++n;
      }
  CHECK(n == 12);
  // Group sizes past 32 take one token a CTA (tiles of 64 heads past 64); the window holds every
  // candidate of a 64k-token request at bs 64 for G 16 (1024 chunks), more for fewer tokens a CTA.
  CHECK(kernels::nsa_topk_tokens(48) == 1);
  CHECK(kernels::nsa_topk_tokens(128) == 1);
  CHECK(kernels::kNsaTopkWindow == 1024);
}

TEST_CASE("nsa_topk hopper kernel: the wgmma variants compile for sm_90a with no spills") {
  namespace nsa = attnjit::ops::nsa;
  attnjit::jit::NvrtcCompiler compiler;
  struct V {
    DType dt;
    int64_t D, group;
  } vs[] = {{DType::kBF16, 128, 16}, {DType::kF16, 128, 16}, {DType::kBF16, 64, 16}, {DType::kBF16, 128, 32},
            {DType::kF16, 128, 64}};
  for (const auto& v : vs) {
    const auto k = nsa::choose_topk_kernel(kOp, v.dt, v.D, v.group, attnjit::detail::Backend::kHopper, "sm_90a");
    CHECK(k.hopper);
    CHECK(k.window == attnjit::kernels::kNsaTopkHopperWindow);
    CHECK(k.smem_bytes() == attnjit::kernels::nsa_topk_smem_bytes(static_cast<int>(v.D), k.tokens, 32, 2, 512) + 1024);
    const auto spec = nsa::topk_kernel_spec(kOp, k);
    CHECK(test::contains(spec.name, "nsa_topk.hopper."));
    CHECK(spec.template_file == "nsa/nsa_topk_hopper.cuh");
    compiles_without_spills(compiler, k);
  }
}

TEST_CASE("nsa_topk kernel: the tuning tiles compile with no spills; malformed tiles are refused") {
  namespace nsa = attnjit::ops::nsa;
  attnjit::jit::NvrtcCompiler compiler;
  for (const char* tile : {"64x2", "32x3", "32x3x512", "64x3", "128x2"}) {
    const auto k = nsa::choose_topk_kernel(kOp, DType::kBF16, 128, 16, attnjit::detail::Backend::kPortable, "sm_90a",
                                           tile);
    const std::string want_tile = std::string(tile).size() > 5 ? tile : std::string(tile) + "x1024";
    CHECK(std::to_string(k.bn) + "x" + std::to_string(k.stages) + "x" + std::to_string(k.window) == want_tile);
    CHECK(test::contains(nsa::topk_kernel_spec(kOp, k).name, fmt::format(".bn{}s{}w{}", k.bn, k.stages, k.window)));
    compiles_without_spills(compiler, k);
  }
  for (const char* bad : {"48x2", "64x1", "64x5", "64", "64x2x2", "x2", "32x2x100", "64x2x4096", "64x2x192"})
    CHECK_THROWS_WITH_AS(nsa::choose_topk_kernel(kOp, DType::kBF16, 128, 16, attnjit::detail::Backend::kPortable,
                                                 "sm_90a", bad),
                         doctest::Contains("ATTNJIT_TUNE_NSA_TOPK_TILE: expected"), attnjit::InvalidArgument);
  // 128-chunk tiles with 3 stages need more than sm_86's 99 KB: a named unsupported there, not a failed launch.
  CHECK_THROWS_WITH_AS(nsa::choose_topk_kernel(kOp, DType::kBF16, 128, 16, attnjit::detail::Backend::kPortable,
                                               "sm_86", "128x3"),
                       doctest::Contains("bytes of shared memory, sm_86 allows"), attnjit::Unsupported);
}
