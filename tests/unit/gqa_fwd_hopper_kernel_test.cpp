// The hopper attention forward kernel without a GPU: every warm-up instantiation of gqa_fwd,
// gqa_varlen_fwd and gqa_paged_fwd's prefill path compiles for sm_90a with no spills, with the consumer
// warpgroups the planner chose (three at D 64 on dense and packed keys: 512 threads, 128 registers at
// launch; two elsewhere: 384 threads, 168). Their numerics are checked on a GPU by the hopper grids
// (tests/gen/gqa_hopper_cases.py, tests/gen/paged_cases.py).
#include <doctest/doctest.h>

#include <string>

#include "jit/nvrtc_compiler.hpp"
#include "ops/registry.hpp"
#include "test_util.hpp"

namespace test = attnjit::test;

TEST_CASE("gqa_fwd hopper kernels: every warm-up instantiation compiles for sm_90a with no spills") {
  attnjit::jit::NvrtcCompiler compiler;
  int three = 0, two = 0;
  for (const char* op : {"gqa_fwd", "gqa_varlen_fwd", "gqa_paged_fwd"}) {
    for (const auto& spec : attnjit::detail::find_op(op).default_matrix("sm_90a")) {
      if (!test::contains(spec.name, ".hopper.") || !test::contains(spec.name, ".bm")) continue;  // not the decode kernel
      const auto r = compiler.compile(spec);
      INFO(spec.describe() << "\n" << r.log);
      CHECK(test::contains(r.log, "0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads"));
      const bool bm192 = test::contains(spec.name, ".bm192.");
      // Three consumer warpgroups exactly at D 64 with dense or packed keys.
      CHECK(bm192 == (test::contains(spec.name, ".d64.") && !test::contains(spec.name, ".paged")));
      CHECK(test::contains(r.log, bm192 ? "Used 128 registers" : "Used 168 registers"));
      (bm192 ? three : two) += 1;
    }
  }
  CHECK(three == 8);  // fp16/bf16 x causal or not x gqa_fwd/gqa_varlen_fwd
  CHECK(two > 0);
}
