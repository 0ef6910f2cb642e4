// The hopper attention forward kernel without a GPU: every warm-up instantiation of gqa_fwd,
// gqa_varlen_fwd and gqa_paged_fwd's prefill path compiles for sm_90a with no spills, with the consumer
// warpgroups the planner chose (three at D 64 on dense and packed keys: 512 threads, 128 registers at
// launch; two elsewhere: 384 threads, 168), one CTA per work tile (the persistent kernel is off by default);
// so do the persistent kernels (ATTNJIT_TUNE_GQA_FWD_PERSISTENT=1), with every feature flag. Their numerics are checked on a GPU by the hopper grids (tests/gen/gqa_hopper_cases.py,
// tests/gen/paged_cases.py).
#include <doctest/doctest.h>

#include <string>

#include "jit/nvrtc_compiler.hpp"
#include "ops/attention/attention_kernel.hpp"
#include "ops/registry.hpp"
#include "test_util.hpp"

namespace test = attnjit::test;

namespace {

// No spills, no wgmma serialisation, and the launch bound's registers of NWG consumer warpgroups.
void check_compiled(attnjit::jit::NvrtcCompiler& compiler, const attnjit::jit::KernelSpec& spec) {
  const auto r = compiler.compile(spec);
  INFO(spec.describe() << "\n" << r.log);
  CHECK(test::contains(r.log, "0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads"));
  CHECK(!test::contains(r.log, "C7514"));
  CHECK(!test::contains(r.log, "C7513"));
  CHECK(test::contains(r.log, test::contains(spec.name, ".bm192.") ? "Used 128 registers" : "Used 168 registers"));
}

}  // namespace

TEST_CASE("gqa_fwd hopper kernels: every warm-up instantiation compiles for sm_90a with no spills") {
  attnjit::jit::NvrtcCompiler compiler;
  int three = 0, two = 0;
  for (const char* op : {"gqa_fwd", "gqa_varlen_fwd", "gqa_paged_fwd"}) {
    for (const auto& spec : attnjit::detail::find_op(op).default_matrix("sm_90a")) {
      if (!test::contains(spec.name, ".hopper.") || !test::contains(spec.name, ".bm")) continue;  // not the decode kernel
      INFO(spec.describe());
      check_compiled(compiler, spec);
      const bool bm192 = test::contains(spec.name, ".bm192.");
      // Three consumer warpgroups exactly at D 64 with dense or packed keys.
      CHECK(bm192 == (test::contains(spec.name, ".d64.") && !test::contains(spec.name, ".paged")));
      // The warm-up holds what runs by default: one CTA per work tile.
      CHECK(!test::contains(spec.name, ".persistent"));
      CHECK(test::contains(spec.entry, ", false>"));
      (bm192 ? three : two) += 1;
    }
  }
  CHECK(three == 8);  // fp16/bf16 x causal or not x gqa_fwd/gqa_varlen_fwd
  CHECK(two > 0);
}

TEST_CASE("gqa_fwd hopper kernels: the persistent kernels (dense and packed, every feature flag) compile with no "
          "spills") {
  using attnjit::DType;
  using attnjit::ops::choose_hopper_attention;
  using attnjit::ops::hopper_attention_kernel_spec;
  attnjit::jit::NvrtcCompiler compiler;
  for (int D : {64, 128, 256}) {
    CAPTURE(D);
    // The persistent kernel the knob selects (causal, dense keys; the warm-up has the one-tile one).
    attnjit::ops::GqaConfig cfg;
    cfg.is_causal = true;
    auto pers = choose_hopper_attention(cfg, DType::kBF16, D, false, "sm_90a", false, true);
    REQUIRE(pers.persistent);
    const auto dense = hopper_attention_kernel_spec("gqa_fwd", pers);
    CHECK(test::contains(dense.entry, ", true>"));
    check_compiled(compiler, dense);
    // Persistent with packed queries, a window, softcap and sinks: the longest epilogue and mask.
    cfg.varlen = true;
    cfg.window_left = 100;
    cfg.softcap = 30.0;
    auto all = choose_hopper_attention(cfg, DType::kF16, D, true, "sm_90a", false, true);
    REQUIRE(all.persistent);
    const auto spec = hopper_attention_kernel_spec("gqa_varlen_fwd", all);
    CHECK(test::contains(spec.name, ".window.softcap.sinks.persistent"));
    check_compiled(compiler, spec);
  }
}
