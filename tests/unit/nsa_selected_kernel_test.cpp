// The nsa_selected_fwd kernel (templates/nsa/nsa_selected_fwd.cuh) without a GPU: every variant (fp16 and
// bf16, D 64 and 128, 16 to 64 rows per CTA) compiles for sm_90a with no spills, and its shared memory fits
// every sm_80+ arch. Its numerics are checked on a GPU by the grid (tests/gen/nsa_selected_fwd_cases.py).
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
        CHECK(k.smem_bytes() == (group + 192) * D * 2 + 384);
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
