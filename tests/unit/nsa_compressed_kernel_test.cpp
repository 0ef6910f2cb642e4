// The nsa_compressed_fwd kernels without a GPU: the shared attention kernels in compressed-key mode (KV
// mode 4) compile for sm_90a, both backends, both dtypes, D 64 and 128, with no spills. Their numerics are
// checked on a GPU by the grid (tests/gen/nsa_compressed_fwd_cases.py).
#include <doctest/doctest.h>

#include <string>

#include "jit/nvrtc_compiler.hpp"
#include "ops/registry.hpp"
#include "test_util.hpp"

namespace test = attnjit::test;

TEST_CASE("nsa_compressed_fwd kernels: every warm-up kernel compiles for sm_90a with no spills") {
  attnjit::jit::NvrtcCompiler compiler;
  int portable = 0, hopper = 0;
  for (const auto& spec : attnjit::detail::find_op("nsa_compressed_fwd").default_matrix("sm_90a")) {
    const auto r = compiler.compile(spec);
    INFO(spec.describe() << "\n" << r.log);
    CHECK(test::contains(spec.entry, ", 4, false")); // KV mode 4 (compressed), no sinks
    CHECK(test::contains(r.log, "0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads"));
    const size_t u = r.log.find("Used");
    REQUIRE(u != std::string::npos);
    MESSAGE(spec.name << ": " << r.log.substr(u, r.log.find('\n', u) - u));
    (test::contains(spec.name, ".hopper.") ? hopper : portable) += 1;
  }
  CHECK(portable == 4);
  CHECK(hopper == 4);
}
