// The nsa_topk kernel (templates/nsa/nsa_topk.cuh) without a GPU: every variant (fp16 and bf16, D 64 and
// 128, 4 / 2 / 1 tokens a CTA) compiles for sm_90a with no spills, and its shared memory, bounded for any
// sequence length by the candidate windows, fits every sm_80+ arch. Its numerics are checked on a GPU by
// the grid (tests/gen/nsa_topk_cases.py).
#include <doctest/doctest.h>

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
        // Q (64 rows) and two k_cmp tiles of 32 rows; 4096 window keys and the running sets of 128.
        CHECK(k.smem_bytes() == 128 * D * 2 + (4096 + 4 * 128 * k.tokens) * 4 + 512 + 256);
        CHECK(k.smem_bytes() <= 99 * 1024);  // sm_86 / sm_89's per-block limit
        const auto spec = nsa::topk_kernel_spec(kOp, k);
        const auto r = compiler.compile(spec);
        INFO(spec.describe() << "\n" << r.log);
        CHECK(test::contains(r.log, "registers"));
        CHECK(test::contains(r.log, "0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads"));
        const size_t u = r.log.find("Used");
        MESSAGE(spec.describe() << ": " << r.log.substr(u, r.log.find('\n', u) - u) << ", " << k.smem_bytes()
                                << " bytes dynamic shared memory");
        ++n;
      }
  CHECK(n == 12);
  // Group sizes past 32 take one token a CTA (tiles of 64 heads past 64); the window holds every
  // candidate of a 64k-token request at bs 64 for G 16 (1024 chunks), more for fewer tokens a CTA.
  CHECK(kernels::nsa_topk_tokens(48) == 1);
  CHECK(kernels::nsa_topk_tokens(128) == 1);
  CHECK(kernels::nsa_topk_window(4) == 1024);
  CHECK(kernels::nsa_topk_window(1) == 4096);
}
