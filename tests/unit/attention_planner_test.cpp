// The attention planners (gqa_fwd, gqa_varlen_fwd, gqa_paged_fwd, mha_decode_paged) without a GPU:
// the kernel each call selects (tiles per head dim, flags, KV mode and dtypes in describe()), the
// tuning override, and the backend rules. Kernel correctness is the GPU grid's job (tests/cases/gpu).
#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "ops/attention/attention_kernel.hpp"

#include "attnjit/runtime.hpp"
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

using test::fake_addr;
using test::options_in;

// test::options_in with the gqa_fwd tile override.
attnjit::RuntimeOptions options_in(const test::TempDir& dir, const std::string& tile) {
  attnjit::RuntimeOptions o = test::options_in(dir);
  o.tune = nlohmann::json{{"gqa_tile", tile}}.dump();
  return o;
}

TensorArgs dense_args(int64_t D, DType dt = DType::kBF16) {
  return TensorArgs{{"q", TensorRef::contiguous(fake_addr(0), dt, {2, 33, 8, D}, kGpu)},
                    {"k", TensorRef::contiguous(fake_addr(1), dt, {2, 70, 2, D}, kGpu)},
                    {"v", TensorRef::contiguous(fake_addr(2), dt, {2, 70, 2, D}, kGpu)},
                    {"o", TensorRef::contiguous(fake_addr(3), dt, {2, 33, 8, D}, kGpu)}};
}

std::vector<std::string> selected_all(attnjit::Runtime& rt, const char* op, const nlohmann::json& config,
                                      const TensorArgs& args) {
  std::vector<std::string> names;
  for (const auto& s : rt.impl().op(op, config)->kernels_for(args, "sm_90a")) names.push_back(s.describe());
  return names;
}

// The one kernel of a dense plan, or the first (prefill) kernel of a paged plan.
std::string selected(attnjit::Runtime& rt, const char* op, const nlohmann::json& config, const TensorArgs& args) {
  auto names = selected_all(rt, op, config, args);
  REQUIRE(!names.empty());
  if (std::string(op).find("paged") == std::string::npos) REQUIRE(names.size() == 1);
  return names[0];
}

// A kernel spec's key field `key` ("absent" when it has none).
std::string spec_field(const attnjit::jit::KernelSpec& s, const std::string& key) {
  for (const auto& [k, v] : s.fields)
    if (k == key) return v;
  return "absent";
}

}  // namespace

TEST_CASE("attention planner: tiles per head dim, and the flags in the kernel name") {
  test::TempDir dir("planner");
  attnjit::Runtime rt(options_in(dir));
  const nlohmann::json portable = {{"backend", "portable"}};
  CHECK(selected(rt, "gqa_fwd", portable, dense_args(64)) == "gqa_fwd.portable.bf16.d64.bm128.bn64.causal.sm_90a");
  CHECK(selected(rt, "gqa_fwd", {{"is_causal", false}, {"backend", "portable"}}, dense_args(128)) ==
        "gqa_fwd.portable.bf16.d128.bm128.bn64.sm_90a");
  CHECK(selected(rt, "gqa_fwd", {}, dense_args(96)) == "gqa_fwd.portable.bf16.d96.bm128.bn32.causal.sm_90a");
  // D = 256: 128-row tiles on 8 warps; with RoPE 64-row tiles on 4 (shared memory).
  CHECK(selected(rt, "gqa_fwd", portable, dense_args(256)) == "gqa_fwd.portable.bf16.d256.bm128.bn32.w8.causal.sm_90a");
  auto rope = dense_args(256);
  rope.set("rope_cos", TensorRef::contiguous(fake_addr(4), DType::kBF16, {70, 128}, kGpu));
  rope.set("rope_sin", TensorRef::contiguous(fake_addr(5), DType::kBF16, {70, 128}, kGpu));
  CHECK(selected(rt, "gqa_fwd", {{"pos_encoding_mode", "rope"}, {"window_size_left", 7}, {"softcap", 30.0}}, rope) ==
        "gqa_fwd.portable.bf16.d256.bm64.bn32.causal.window.softcap.rope-neox.sm_90a");
}

TEST_CASE("attention planner: packed and paged calls, KV dtypes and sinks") {
  test::TempDir dir("planner");
  attnjit::Runtime rt(options_in(dir));
  TensorArgs varlen{{"q", TensorRef::contiguous(fake_addr(0), DType::kF16, {40, 8, 128}, kGpu)},
                    {"k", TensorRef::contiguous(fake_addr(1), DType::kF16, {90, 2, 128}, kGpu)},
                    {"v", TensorRef::contiguous(fake_addr(2), DType::kF16, {90, 2, 128}, kGpu)},
                    {"o", TensorRef::contiguous(fake_addr(3), DType::kF16, {40, 8, 128}, kGpu)},
                    {"cu_seqlens_q", TensorRef::contiguous(fake_addr(4), DType::kI32, {4}, kGpu)},
                    {"cu_seqlens_kv", TensorRef::contiguous(fake_addr(5), DType::kI32, {4}, kGpu)},
                    {"sinks", TensorRef::contiguous(fake_addr(6), DType::kF32, {8}, kGpu)}};
  CHECK(selected(rt, "gqa_varlen_fwd", {{"backend", "portable"}}, varlen) ==
        "gqa_varlen_fwd.portable.fp16.d128.bm128.bn64.causal.sinks.sm_90a");
  CHECK(selected(rt, "gqa_varlen_fwd", {}, varlen) == "gqa_varlen_fwd.hopper.fp16.d128.bm128.bn128.causal.sinks.qtma.sm_90a");

  TensorArgs paged{{"q", TensorRef::contiguous(fake_addr(0), DType::kBF16, {40, 8, 64}, kGpu)},
                   {"k_pages", TensorRef::contiguous(fake_addr(1), DType::kE4M3, {9, 16, 2, 64}, kGpu)},
                   {"v_pages", TensorRef::contiguous(fake_addr(2), DType::kE4M3, {9, 16, 2, 64}, kGpu)},
                   {"page_table", TensorRef::contiguous(fake_addr(3), DType::kI32, {3, 5}, kGpu)},
                   {"cache_seqlens", TensorRef::contiguous(fake_addr(4), DType::kI32, {3}, kGpu)},
                   {"cu_seqlens_q", TensorRef::contiguous(fake_addr(5), DType::kI32, {4}, kGpu)},
                   {"k_scale", TensorRef::contiguous(fake_addr(6), DType::kF32, {3, 2}, kGpu)},
                   {"v_scale", TensorRef::contiguous(fake_addr(7), DType::kF32, {3, 2}, kGpu)},
                   {"o", TensorRef::contiguous(fake_addr(8), DType::kBF16, {40, 8, 64}, kGpu)}};
  const std::string d = selected(rt, "gqa_paged_fwd", {{"is_causal", false}}, paged);
  CHECK(d == "gqa_paged_fwd.portable.bf16.kv-e4m3.d64.bm128.bn64.sm_90a");
  // The KV mode is a key field: the paged kernel is not the packed one.
  auto spec = rt.impl().op("gqa_paged_fwd", {{"is_causal", false}})->kernels_for(paged, "sm_90a")[0];
  bool paged_field = false;
  for (const auto& [k, v] : spec.fields) paged_field = paged_field || (k == "kv_mode" && v == "paged");
  CHECK(paged_field);

  TensorArgs mha{{"q", TensorRef::contiguous(fake_addr(0), DType::kF16, {3, 1, 4, 128}, kGpu)},
                 {"k", TensorRef::contiguous(fake_addr(1), DType::kF16, {64, 4, 128}, kGpu)},
                 {"v", TensorRef::contiguous(fake_addr(2), DType::kF16, {64, 4, 128}, kGpu)},
                 {"real_seqlen_kv", TensorRef::contiguous(fake_addr(3), DType::kI32, {3}, kGpu)},
                 {"block_table", TensorRef::contiguous(fake_addr(4), DType::kI32, {3, 4}, kGpu)},
                 {"o", TensorRef::contiguous(fake_addr(5), DType::kF16, {3, 1, 4, 128}, kGpu)}};
  CHECK(selected(rt, "mha_decode_paged", {{"page_size", 16}}, mha) == "mha_decode_paged.portable.fp16.d128.bm128.bn32.sm_90a");
  // Paged plans also carry the split-KV decode tile (16 rows, one warp, no sinks: the combine adds
  // them) and the combine kernel, and on sm_90a the hopper decode kernel (batched queries).
  CHECK(selected_all(rt, "mha_decode_paged", {{"page_size", 16}}, mha) ==
        std::vector<std::string>{"mha_decode_paged.portable.fp16.d128.bm128.bn32.sm_90a",
                                 "mha_decode_paged.portable.fp16.d128.bm16.bn64.split.sm_90a",
                                 "mha_decode_paged.portable.combine.fp16.d128.sm_90a",
                                 "mha_decode_paged.hopper.decode.fp16.d128.batched.sm_90a"});
  CHECK(selected_all(rt, "gqa_varlen_fwd", {}, varlen).size() == 1);
  // N_kv = 64 is not a multiple of a page size of 24.
  CHECK_THROWS_WITH_AS(rt.impl().op("mha_decode_paged", {{"page_size", 24}})->kernels_for(mha, "sm_90a"),
                       doctest::Contains("mha_decode_paged: shape: k:"), attnjit::InvalidArgument);
  CHECK_THROWS_WITH_AS(rt.op("mha_decode_paged"),
                       doctest::Contains("mha_decode_paged: param: page_size:"), attnjit::InvalidArgument);
}

TEST_CASE("attention planner: the ATTNJIT_TUNE_GQA_TILE override and the backend rules") {
  test::TempDir dir("planner");
  attnjit::Runtime tuned(options_in(dir, "128x64x4"));
  CHECK(selected(tuned, "gqa_fwd", {{"backend", "portable"}}, dense_args(128)) ==
        "gqa_fwd.portable.bf16.d128.bm128.bn64.causal.sm_90a");
  // 32 rows per warp would not fit D = 256's accumulators: refused, naming the override.
  attnjit::Runtime bad(options_in(dir, "128x32x4"));
  CHECK_THROWS_WITH_AS(selected(bad, "gqa_fwd", {{"backend", "portable"}}, dense_args(256)),
                       doctest::Contains("ATTNJIT_TUNE_GQA_TILE"), attnjit::InvalidArgument);
  attnjit::Runtime junk(options_in(dir, "big"));
  CHECK_THROWS_AS(selected(junk, "gqa_fwd", {{"backend", "portable"}}, dense_args(64)), attnjit::InvalidArgument);

  attnjit::Runtime rt(options_in(dir));
  CHECK_THROWS_WITH_AS(rt.impl().op("gqa_fwd", {})->kernels_for(dense_args(128), "sm_75"),
                       doctest::Contains("sm_80"), attnjit::Unsupported);
}

TEST_CASE("attention planner: the hopper backend of gqa_fwd and gqa_varlen_fwd, and what 'auto' picks") {
  test::TempDir dir("planner");
  attnjit::Runtime rt(options_in(dir));
  const nlohmann::json hopper = {{"backend", "hopper"}};
  CHECK(selected(rt, "gqa_fwd", hopper, dense_args(128)) == "gqa_fwd.hopper.bf16.d128.bm128.bn128.causal.qtma.sm_90a");
  CHECK(selected(rt, "gqa_fwd", {{"backend", "hopper"}, {"is_causal", false}, {"softcap", 20.0}, {"window_size_left", 9}},
                 dense_args(64, DType::kF16)) == "gqa_fwd.hopper.fp16.d64.bm192.bn128.window.softcap.qtma.sm_90a");
  CHECK(selected(rt, "gqa_fwd", hopper, dense_args(256)) == "gqa_fwd.hopper.bf16.d256.bm128.bn64.causal.qtma.sm_90a");
  // 'auto' on sm_90a: the hopper kernel where it serves the call, the portable one elsewhere.
  CHECK(selected(rt, "gqa_fwd", {}, dense_args(128)) == "gqa_fwd.hopper.bf16.d128.bm128.bn128.causal.qtma.sm_90a");
  CHECK(selected(rt, "gqa_fwd", {}, dense_args(96)) == "gqa_fwd.portable.bf16.d96.bm128.bn32.causal.sm_90a");
  CHECK(rt.impl().op("gqa_fwd", {})->kernels_for(dense_args(128), "sm_80")[0].describe() ==
        "gqa_fwd.portable.bf16.d128.bm128.bn64.causal.sm_80");
  // k broadcast over its KV heads (head stride 0), which TMA cannot address: 'auto' takes the portable
  // kernel; explicit 'hopper' refuses such a call when it runs (the plan's signature has no strides).
  TensorArgs odd = dense_args(128);
  TensorRef k = TensorRef::contiguous(fake_addr(1), DType::kBF16, {2, 70, 2, 128}, kGpu);
  k.strides = {70 * 128, 128, 0, 1};
  odd.set("k", k);
  CHECK(selected(rt, "gqa_fwd", {}, odd) == "gqa_fwd.portable.bf16.d128.bm128.bn64.causal.sm_90a");
  CHECK(attnjit::ops::hopper_kv_gap(*odd.find("k"), *odd.find("v"), false) ==
        "k: expected dim 2 stride to be a positive multiple of 16 bytes for TMA, got 0 elements");
  // An axis of extent 0 or 1 is never stepped along, so any stride does (an empty S_kv, one head).
  using attnjit::ops::tma_gap;
  CHECK(tma_gap("k", fake_addr(1), {{1, 0}, {0, 0}, {2, 128}}).empty());
  CHECK(tma_gap("k", fake_addr(1), {{2, 64}, {4, 12}}) ==
        "k: expected dim 1 stride to be a positive multiple of 16 bytes for TMA, got 12 elements");
  CHECK(tma_gap("v", static_cast<char*>(fake_addr(1)) + 8, {{2, 64}}) ==
        "v: expected a 16-byte aligned base address for TMA");
  // Explicit 'hopper' never falls back: unsupported static properties are refused, naming why.
  CHECK_THROWS_WITH_AS(rt.impl().op("gqa_fwd", hopper)->kernels_for(dense_args(96), "sm_90a"),
                       doctest::Contains("gqa_fwd: unsupported: backend 'hopper': it serves head dims 64, 128 and 256, got 96"),
                       attnjit::Unsupported);
  CHECK_THROWS_WITH_AS(rt.impl().op("gqa_fwd", hopper)->kernels_for(dense_args(128), "sm_80"),
                       doctest::Contains("it needs sm_90a"), attnjit::Unsupported);
  auto rope = dense_args(128);
  rope.set("rope_cos", TensorRef::contiguous(fake_addr(4), DType::kBF16, {70, 64}, kGpu));
  rope.set("rope_sin", TensorRef::contiguous(fake_addr(5), DType::kBF16, {70, 64}, kGpu));
  CHECK_THROWS_WITH_AS(rt.impl().op("gqa_fwd", {{"backend", "hopper"}, {"pos_encoding_mode", "rope"}})->kernels_for(rope, "sm_90a"),
                       doctest::Contains("RoPE"), attnjit::Unsupported);
}

TEST_CASE("attention planner: the persistent hopper gqa_fwd kernel, its tuning knob, grid and work order") {
  using attnjit::ops::HopperAttentionChoice;
  test::TempDir dir("planner");
  attnjit::RuntimeOptions on_opts = test::options_in(dir);
  on_opts.tune = nlohmann::json{{"gqa_fwd_persistent", true}}.dump();
  attnjit::Runtime rt(on_opts), rt_off(options_in(dir));
  const nlohmann::json hopper = {{"backend", "hopper"}};
  // Off by default (0-7% over the one-tile grid on an H100); tune.gqa_fwd_persistent = true (ATTNJIT_TUNE_GQA_FWD_PERSISTENT=1)
  // takes the persistent grid. The template parameter is a key field, so the two are different cubins.
  const auto on = rt.impl().op("gqa_fwd", hopper)->kernels_for(dense_args(128), "sm_90a").at(0);
  const auto one = rt_off.impl().op("gqa_fwd", hopper)->kernels_for(dense_args(128), "sm_90a").at(0);
  CHECK(on.describe() == "gqa_fwd.hopper.bf16.d128.bm128.bn128.causal.persistent.sm_90a");
  CHECK(one.describe() == "gqa_fwd.hopper.bf16.d128.bm128.bn128.causal.qtma.sm_90a");
  CHECK(test::contains(on.entry, ", false, true, false>"));  // SINKS, PERSISTENT, Q_TMA
  CHECK(test::contains(one.entry, ", false, false, true>"));
  CHECK(spec_field(on, "persistent") == "1");
  CHECK(spec_field(one, "persistent") == "0");
  // The paged prefill path (a copying producer) keeps the one-tile grid whatever the knob says.
  TensorArgs paged{{"q", TensorRef::contiguous(fake_addr(0), DType::kBF16, {40, 8, 128}, kGpu)},
                   {"k_pages", TensorRef::contiguous(fake_addr(1), DType::kBF16, {9, 16, 2, 128}, kGpu)},
                   {"v_pages", TensorRef::contiguous(fake_addr(2), DType::kBF16, {9, 16, 2, 128}, kGpu)},
                   {"page_table", TensorRef::contiguous(fake_addr(3), DType::kI32, {3, 5}, kGpu)},
                   {"cache_seqlens", TensorRef::contiguous(fake_addr(4), DType::kI32, {3}, kGpu)},
                   {"cu_seqlens_q", TensorRef::contiguous(fake_addr(5), DType::kI32, {4}, kGpu)},
                   {"o", TensorRef::contiguous(fake_addr(8), DType::kBF16, {40, 8, 128}, kGpu)}};
  const auto paged_specs = rt.impl().op("gqa_paged_fwd", hopper)->kernels_for(paged, "sm_90a");
  int prefill = 0;
  for (const auto& s : paged_specs) {
    CAPTURE(s.describe());
    CHECK(!test::contains(s.name, "persistent"));
    prefill += test::contains(s.name, "gqa_paged_fwd.hopper.bf16.d128.bm128");
  }
  CHECK(prefill == 1);

  // The grid: min(work tiles, SMs); packed queries count an upper bound of the tiles.
  attnjit::ops::GqaConfig cfg;
  cfg.is_causal = true;
  const HopperAttentionChoice k = attnjit::ops::choose_hopper_attention(cfg, DType::kBF16, 128, false, "sm_90a", false, true);
  REQUIRE(k.persistent);
  CHECK(attnjit::ops::hopper_persistent_ctas(k, 1, 100, 8, 8, 132) == 8);            // fewer tiles than SMs
  CHECK(attnjit::ops::hopper_persistent_ctas(k, 4, 4096, 32, 8, 132) == 132);        // 1024 tiles
  CHECK(attnjit::ops::hopper_persistent_ctas(k, 1, 128 * 397, 1, 1, 132) == 132);    // 397 = 3 x 132 + 1
  HopperAttentionChoice kv = k;
  kv.varlen = true;
  CHECK(attnjit::ops::hopper_persistent_ctas(kv, 3, 300, 8, 2, 132) == (10 + 3) * 2);  // ceil(1200 / 128) + B per KV head
  CHECK(!attnjit::ops::choose_hopper_attention(cfg, DType::kBF16, 128, false, "sm_90a", true, true).persistent);
  CHECK(!attnjit::ops::choose_hopper_attention(cfg, DType::kBF16, 128, false, "sm_90a", false, false).persistent);
  // L2 sections of the causal dense order: 32 MiB of K and V, 2 MiB a pair at 4k keys of D 128.
  CHECK(attnjit::ops::hopper_section_pairs(k, 4096) == 16);
  CHECK(attnjit::ops::hopper_section_pairs(k, 1 << 24) == 1);
  CHECK(attnjit::ops::hopper_section_pairs(kv, 4096) == 0);
  HopperAttentionChoice full = k;
  full.causal = false;
  CHECK(attnjit::ops::hopper_section_pairs(full, 4096) == 0);

  // The dense work order (the kernel's own function): every (pair, query tile) once; under a causal mask
  // sections in order and, within one, the query tiles from the last (longest first).
  using attnjit::kernels::gqa_fwd_hopper_dense_tile;
  for (int tiles : {1, 3, 8, 33})
    for (int pairs : {1, 5, 32, 397})
      for (int section : {0, 1, 7, 16, 1000})
        for (bool causal : {false, true}) {
          CAPTURE(tiles);
          CAPTURE(pairs);
          CAPTURE(section);
          CAPTURE(causal);
          std::vector<int> seen(static_cast<size_t>(tiles) * pairs, 0);
          const int per = section > 0 && section < pairs ? section : pairs;
          int last_section = 0, last_tile = tiles;
          bool ordered = true, in_range = true;
          for (int index = 0; index < tiles * pairs; ++index) {
            const auto t = gqa_fwd_hopper_dense_tile(index, tiles, pairs, section, causal);
            if (t.pair < 0 || t.pair >= pairs || t.tile < 0 || t.tile >= tiles) {
              in_range = false;
              break;
            }
            ++seen[static_cast<size_t>(t.pair) * tiles + t.tile];
            if (causal) {
              const int sec = t.pair / per;
              if (sec < last_section || (sec == last_section && t.tile > last_tile)) ordered = false;
              if (sec != last_section) last_tile = tiles;
              last_section = sec;
              last_tile = t.tile;
            } else if (t.pair != index / tiles || t.tile != index % tiles) {
              ordered = false;  // the one-tile grid's order
            }
          }
          REQUIRE(in_range);
          CHECK(std::count(seen.begin(), seen.end(), 1) == tiles * pairs);
          CHECK(ordered);
        }
}

TEST_CASE("attention planner: split-KV decode sizing and the ATTNJIT_TUNE_DECODE_TILE override") {
  using attnjit::ops::choose_splits;
  // B = 1, H_kv = 8, a 128k context on 132 SMs of 3 CTAs: one full wave (392 of 396 slots).
  CHECK(choose_splits(8, 131072, 64, 132, 3, 0) == 49);
  // B = 64 x 8k: 512 CTAs are 1.3 waves; three splits make 3.9 waves of shorter CTAs.
  CHECK(choose_splits(512, 8192, 64, 132, 3, 64) == 3);
  // A short capacity limits the splits to one per two key tiles; never fewer than one.
  CHECK(choose_splits(8, 256, 64, 132, 3, 0) == 2);
  CHECK(choose_splits(8, 0, 64, 132, 3, 0) == 1);
  CHECK(choose_splits(1, 1 << 30, 64, 132, 3, 0) == 128);
  // A batched grid keeps B * n_splits within 65535.
  CHECK(choose_splits(1000, 1 << 30, 64, 100000, 1, 1000) == 65);

  test::TempDir dir("planner");
  attnjit::RuntimeOptions o = options_in(dir);
  o.tune = nlohmann::json{{"decode_tile", "128x2"}}.dump();
  attnjit::Runtime tuned(o);
  TensorArgs mha{{"q", TensorRef::contiguous(fake_addr(0), DType::kBF16, {3, 1, 4, 64}, kGpu)},
                 {"k", TensorRef::contiguous(fake_addr(1), DType::kBF16, {64, 4, 64}, kGpu)},
                 {"v", TensorRef::contiguous(fake_addr(2), DType::kBF16, {64, 4, 64}, kGpu)},
                 {"real_seqlen_kv", TensorRef::contiguous(fake_addr(3), DType::kI32, {3}, kGpu)},
                 {"block_table", TensorRef::contiguous(fake_addr(4), DType::kI32, {3, 4}, kGpu)},
                 {"o", TensorRef::contiguous(fake_addr(5), DType::kBF16, {3, 1, 4, 64}, kGpu)}};
  CHECK(selected_all(tuned, "mha_decode_paged", {{"page_size", 16}}, mha)[1] ==
        "mha_decode_paged.portable.bf16.d64.bm16.bn128.w2.split.sm_90a");
  o.tune = nlohmann::json{{"decode_tile", "48x1"}}.dump();
  attnjit::Runtime bad(o);
  CHECK_THROWS_WITH_AS(selected_all(bad, "mha_decode_paged", {{"page_size", 16}}, mha),
                       doctest::Contains("ATTNJIT_TUNE_DECODE_TILE"), attnjit::InvalidArgument);
}

TEST_CASE("attention planner: gqa_prefill_paged_append kernels and construction rules") {
  test::TempDir dir("planner");
  attnjit::Runtime rt(options_in(dir));
  auto args = [](DType cache) {
    return TensorArgs{{"q", TensorRef::contiguous(fake_addr(0), DType::kBF16, {40, 8, 128}, kGpu)},
                      {"k_new", TensorRef::contiguous(fake_addr(1), DType::kBF16, {40, 2, 128}, kGpu)},
                      {"v_new", TensorRef::contiguous(fake_addr(2), DType::kBF16, {40, 2, 128}, kGpu)},
                      {"k_pages", TensorRef::contiguous(fake_addr(3), cache, {256, 2, 128}, kGpu)},
                      {"v_pages", TensorRef::contiguous(fake_addr(4), cache, {256, 2, 128}, kGpu)},
                      {"k_scale", TensorRef::contiguous(fake_addr(5), DType::kF32, {1}, kGpu)},
                      {"v_scale", TensorRef::contiguous(fake_addr(6), DType::kF32, {1}, kGpu)},
                      {"cu_seqlens_q", TensorRef::contiguous(fake_addr(7), DType::kI32, {3}, kGpu)},
                      {"cache_seqlens", TensorRef::contiguous(fake_addr(8), DType::kI32, {2}, kGpu)},
                      {"block_table", TensorRef::contiguous(fake_addr(9), DType::kI32, {2, 8}, kGpu)},
                      {"o", TensorRef::contiguous(fake_addr(10), DType::kBF16, {40, 8, 128}, kGpu)}};
  };
  const nlohmann::json base = {{"page_size", 16}, {"max_seqlen_q", 64}};
  CHECK(selected_all(rt, "gqa_prefill_paged_append", base, args(DType::kBF16)) ==
        std::vector<std::string>{"gqa_prefill_paged_append.portable.append.bf16.cache-bf16.d128.sm_90a",
                                 "gqa_prefill_paged_append.portable.bf16.d128.bm128.bn32.causal.append.sm_90a"});
  nlohmann::json fp8 = base;
  fp8["cache_dtype"] = "e4m3";
  fp8["is_causal"] = false;
  CHECK(selected_all(rt, "gqa_prefill_paged_append", fp8, args(DType::kE4M3)) ==
        std::vector<std::string>{"gqa_prefill_paged_append.portable.append.bf16.cache-e4m3.d128.sm_90a",
                                 "gqa_prefill_paged_append.portable.bf16.kv-e4m3.d128.bm128.bn32.append.sm_90a"});
  nlohmann::json rope = base;
  rope["fuse_rope"] = true;
  rope["max_position"] = 4096;
  CHECK(selected_all(rt, "gqa_prefill_paged_append", rope, args(DType::kBF16))[0] ==
        "gqa_prefill_paged_append.portable.append.bf16.cache-bf16.d128.rope.sm_90a");
  // The pool's dtype must be the cache dtype.
  CHECK_THROWS_WITH_AS(selected_all(rt, "gqa_prefill_paged_append", base, args(DType::kE4M3)),
                       doctest::Contains("gqa_prefill_paged_append: dtype: k_pages:"), attnjit::InvalidArgument);
  // Construction rules.
  for (auto [config, needle] :
       {std::pair{nlohmann::json{{"page_size", 24}, {"max_seqlen_q", 8}}, "param: page_size"},
        std::pair{nlohmann::json{{"page_size", 16}}, "param: max_seqlen_q"},
        std::pair{nlohmann::json{{"page_size", 16}, {"max_seqlen_q", 8}, {"fuse_rope", true}}, "param: max_position"},
        std::pair{nlohmann::json{{"page_size", 16}, {"max_seqlen_q", 8}, {"fuse_rope", true}, {"max_position", 9},
                                 {"cache_dtype", "e4m3"}},
                  "param: fuse_rope"},
        std::pair{nlohmann::json{{"page_size", 16}, {"max_seqlen_q", 8}, {"rotary_dim", 64}}, "param: rotary_dim"}}) {
    CHECK_THROWS_WITH_AS(rt.op("gqa_prefill_paged_append", attnjit::Config::parse(config.dump())), doctest::Contains(needle), attnjit::InvalidArgument);
  }
}

TEST_CASE("attention planner: the hopper backend of bsa_fwd, and what 'auto' picks") {
  test::TempDir dir("planner");
  attnjit::Runtime rt(options_in(dir));
  // BHSD, B 1, H 4, S 300 (3 query / key blocks of 128), D 128, fixed count 2.
  auto bsa_args = [](int64_t D, int64_t Dv) {
    return TensorArgs{{"q", TensorRef::contiguous(fake_addr(0), DType::kBF16, {1, 4, 300, D}, kGpu)},
                      {"k", TensorRef::contiguous(fake_addr(1), DType::kBF16, {1, 4, 300, D}, kGpu)},
                      {"v", TensorRef::contiguous(fake_addr(2), DType::kBF16, {1, 4, 300, Dv}, kGpu)},
                      {"q2k_block_index", TensorRef::contiguous(fake_addr(3), DType::kI32, {1, 4, 3, 2}, kGpu)},
                      {"o", TensorRef::contiguous(fake_addr(4), DType::kBF16, {1, 4, 300, Dv}, kGpu)}};
  };
  const nlohmann::json bs128 = {{"sparse_block_size", 128}};
  CHECK(selected_all(rt, "bsa_fwd", bs128, bsa_args(128, 128)) == std::vector<std::string>{"bsa_fwd.hopper.bf16.d128.bs128.sm_90a"});
  TensorArgs bs64 = bsa_args(64, 64);
  bs64.set("q2k_block_index", TensorRef::contiguous(fake_addr(3), DType::kI32, {1, 4, 5, 2}, kGpu));
  CHECK(selected(rt, "bsa_fwd", {{"sparse_block_size", 64}}, bs64) == "bsa_fwd.hopper.bf16.d64.bs64.sm_90a");
  // kv_splits "auto" keeps the hopper kernel (one CTA per query block); an explicit split count or
  // another block size or head dim takes the portable kernels.
  CHECK(selected(rt, "bsa_fwd", {{"sparse_block_size", 128}, {"kv_splits", "auto"}}, bsa_args(128, 128)) ==
        "bsa_fwd.hopper.bf16.d128.bs128.sm_90a");
  CHECK(selected_all(rt, "bsa_fwd", {{"sparse_block_size", 128}, {"kv_splits", 4}}, bsa_args(128, 128))[0].find(".portable.") !=
        std::string::npos);
  CHECK(selected_all(rt, "bsa_fwd", {{"sparse_block_size", 128}}, bsa_args(128, 64))[0].find(".portable.") != std::string::npos);
  CHECK(selected_all(rt, "bsa_fwd", {{"sparse_block_size", 128}, {"backend", "portable"}}, bsa_args(128, 128))[0].find(
            ".portable.") != std::string::npos);
  // Explicit 'hopper' refuses what it does not serve, naming why.
  CHECK_THROWS_WITH_AS(rt.impl().op("bsa_fwd", {{"sparse_block_size", 128}, {"backend", "hopper"}, {"kv_splits", 4}})
                           ->kernels_for(bsa_args(128, 128), "sm_90a"),
                       doctest::Contains("bsa_fwd: unsupported: backend 'hopper': kv_splits > 1"), attnjit::Unsupported);
  CHECK_THROWS_WITH_AS(rt.impl().op("bsa_fwd", {{"sparse_block_size", 128}, {"backend", "hopper"}})
                           ->kernels_for(bsa_args(128, 64), "sm_90a"),
                       doctest::Contains("D = D_v in {64, 128}"), attnjit::Unsupported);
  CHECK_THROWS_WITH_AS(rt.impl().op("bsa_fwd", {{"sparse_block_size", 128}, {"backend", "hopper"}})
                           ->kernels_for(bsa_args(128, 128), "sm_80"),
                       doctest::Contains("sm_90a"), attnjit::Unsupported);
}

TEST_CASE("attention planner: bsa_fp8_fwd's backends (pre-pass and attention kernels)") {
  test::TempDir dir("planner");
  attnjit::Runtime rt(options_in(dir));
  // BHSD, B 1, H 2, S 300 (5 blocks of 64), D 128, fixed count 2.
  const TensorArgs args{{"q", TensorRef::contiguous(fake_addr(0), DType::kBF16, {1, 2, 300, 128}, kGpu)},
                        {"k", TensorRef::contiguous(fake_addr(1), DType::kBF16, {1, 2, 300, 128}, kGpu)},
                        {"v", TensorRef::contiguous(fake_addr(2), DType::kBF16, {1, 2, 300, 128}, kGpu)},
                        {"q2k_block_index", TensorRef::contiguous(fake_addr(3), DType::kI32, {1, 2, 5, 2}, kGpu)},
                        {"o", TensorRef::contiguous(fake_addr(4), DType::kBF16, {1, 2, 300, 128}, kGpu)}};
  auto names = [&](const nlohmann::json& config, const char* arch) {
    std::vector<std::string> out;
    for (const auto& s : rt.impl().op("bsa_fp8_fwd", config)->kernels_for(args, arch)) out.push_back(s.describe());
    return out;
  };
  // 'auto' on sm_90a: the hopper attention kernel, with the pre-pass writing V as fp16 values.
  const auto hopper = names({{"block_sparse_num", 2}}, "sm_90a");
  REQUIRE(hopper.size() == 6);
  CHECK(hopper[4] == "bsa_fp8_fwd.portable.prepass.quant_v16.sm_90a");
  CHECK(hopper[5] == "bsa_fp8_fwd.hopper.attention.e4m3.d128.bs64.bn64.sm_90a");
  CHECK(names({{"block_sparse_num", 2}, {"backend", "hopper"}}, "sm_90a") == hopper);
  // 'portable' (and 'auto' elsewhere): the mma.sync kernel and the transposed e4m3 V.
  const auto portable = names({{"block_sparse_num", 2}, {"backend", "portable"}}, "sm_90a");
  REQUIRE(portable.size() == 6);
  CHECK(portable[4] == "bsa_fp8_fwd.portable.prepass.quant_v.sm_90a");
  CHECK(portable[5] == "bsa_fp8_fwd.portable.attention.e4m3.d128.bs64.bn32.sm_90a");
  CHECK(names({{"block_sparse_num", 2}}, "sm_89")[5] == "bsa_fp8_fwd.portable.attention.e4m3.d128.bs64.bn32.sm_89");
  // An explicit 'hopper' never falls back.
  CHECK_THROWS_WITH_AS(names({{"block_sparse_num", 2}, {"backend", "hopper"}}, "sm_89"),
                       doctest::Contains("bsa_fp8_fwd: unsupported: backend 'hopper': it needs sm_90a"),
                       attnjit::Unsupported);
}

TEST_CASE("attention planner: gqa_paged_fwd's prefill path on the hopper backend") {
  test::TempDir dir("planner");
  attnjit::Runtime rt(options_in(dir));
  auto paged = [](DType kv) {
    TensorArgs t{{"q", TensorRef::contiguous(fake_addr(0), DType::kBF16, {40, 8, 128}, kGpu)},
                 {"k_pages", TensorRef::contiguous(fake_addr(1), kv, {9, 16, 2, 128}, kGpu)},
                 {"v_pages", TensorRef::contiguous(fake_addr(2), kv, {9, 16, 2, 128}, kGpu)},
                 {"page_table", TensorRef::contiguous(fake_addr(3), DType::kI32, {3, 5}, kGpu)},
                 {"cache_seqlens", TensorRef::contiguous(fake_addr(4), DType::kI32, {3}, kGpu)},
                 {"cu_seqlens_q", TensorRef::contiguous(fake_addr(5), DType::kI32, {4}, kGpu)},
                 {"o", TensorRef::contiguous(fake_addr(8), DType::kBF16, {40, 8, 128}, kGpu)}};
    if (kv == DType::kE4M3) {
      t.set("k_scale", TensorRef::contiguous(fake_addr(6), DType::kF32, {3, 2}, kGpu));
      t.set("v_scale", TensorRef::contiguous(fake_addr(7), DType::kF32, {3, 2}, kGpu));
    }
    return t;
  };
  // 'auto' on sm_90a: the portable prefill tile and split-KV decode path, plus the hopper prefill and
  // decode kernels.
  const auto names = selected_all(rt, "gqa_paged_fwd", {}, paged(DType::kBF16));
  REQUIRE(names.size() >= 2);
  CHECK(names[names.size() - 2] == "gqa_paged_fwd.hopper.bf16.d128.bm128.bn128.causal.paged.sm_90a");
  CHECK(names.back() == "gqa_paged_fwd.hopper.decode.bf16.d128.causal.sm_90a");
  // e4m3 pools stay portable under 'auto' and are refused by an explicit 'hopper'.
  for (const auto& n : selected_all(rt, "gqa_paged_fwd", {}, paged(DType::kE4M3)))
    CHECK(n.find(".hopper.") == std::string::npos);
  CHECK_THROWS_WITH_AS(selected_all(rt, "gqa_paged_fwd", {{"backend", "hopper"}}, paged(DType::kE4M3)),
                       doctest::Contains("backend 'hopper': it reads 16-bit pools in q's dtype"), attnjit::Unsupported);
}

TEST_CASE("attention planner: the paged split-KV decode path on the hopper backend") {
  test::TempDir dir("planner");
  attnjit::Runtime rt(options_in(dir));
  // Three requests of one query token, 8 query heads over 2 KV heads: 4 rows per request (decode-like).
  auto decode = [](int64_t page_size, int64_t D) {
    const int64_t pages = 9, width = (64 + page_size - 1) / page_size;
    return TensorArgs{{"q", TensorRef::contiguous(fake_addr(0), DType::kBF16, {3, 8, D}, kGpu)},
                      {"k_pages", TensorRef::contiguous(fake_addr(1), DType::kBF16, {pages, page_size, 2, D}, kGpu)},
                      {"v_pages", TensorRef::contiguous(fake_addr(2), DType::kBF16, {pages, page_size, 2, D}, kGpu)},
                      {"page_table", TensorRef::contiguous(fake_addr(3), DType::kI32, {3, width}, kGpu)},
                      {"cache_seqlens", TensorRef::contiguous(fake_addr(4), DType::kI32, {3}, kGpu)},
                      {"cu_seqlens_q", TensorRef::contiguous(fake_addr(5), DType::kI32, {4}, kGpu)},
                      {"o", TensorRef::contiguous(fake_addr(8), DType::kBF16, {3, 8, D}, kGpu)}};
  };
  auto has = [](const std::vector<std::string>& names, const std::string& what) {
    for (const auto& n : names)
      if (n.find(what) != std::string::npos) return true;
    return false;
  };
  // Pages of 16: both 'auto' and 'hopper' plans carry the hopper decode kernel (and the portable tile).
  for (const char* backend : {"auto", "hopper"}) {
    const auto names = selected_all(rt, "gqa_paged_fwd", {{"backend", backend}}, decode(16, 128));
    CHECK(has(names, ".hopper.decode.bf16.d128."));
    CHECK(has(names, ".portable."));
  }
  CHECK(!has(selected_all(rt, "gqa_paged_fwd", {{"backend", "portable"}}, decode(16, 128)), ".hopper."));
  // Pages of 8 and D = 256: an explicit 'hopper' refuses the decode-like call, saying why; 'auto' plans the
  // portable split-KV tile.
  CHECK_THROWS_WITH_AS(selected_all(rt, "gqa_paged_fwd", {{"backend", "hopper"}}, decode(8, 128)),
                       doctest::Contains("take the split-KV decode path, and its hopper kernel cannot serve this one: "
                                         "it reads pages in 16-slot boxes: page size a multiple of 16, got 8"),
                       attnjit::Unsupported);
  CHECK_THROWS_WITH_AS(selected_all(rt, "gqa_paged_fwd", {{"backend", "hopper"}}, decode(16, 256)),
                       doctest::Contains("it serves head dims 64 and 128, got 256"), attnjit::Unsupported);
  for (int64_t ps : {8, 16}) {
    bool split = false;
    for (const auto& n : selected_all(rt, "gqa_paged_fwd", {}, decode(ps, 256)))
      split = split || (n.find(".portable.") != std::string::npos && n.find(".split.") != std::string::npos);
    CHECK(split);
  }
}

TEST_CASE("attention planner: bsa_bwd's main kernel per backend") {
  test::TempDir dir("planner");
  attnjit::Runtime rt(options_in(dir));
  // BHSD, B 1, H 2 over H_kv 1, S_q 200, S_kv 300, D 128, sparse blocks of 128 (N_q 2, N_kv 3), K_max 2.
  auto bhsd = [](int64_t h, int64_t s) { return std::vector<int64_t>{1, h, s, 128}; };
  TensorArgs t;
  int slot = 0;
  for (const char* n : {"do", "q", "o", "dq"}) t.set(n, TensorRef::contiguous(fake_addr(slot++), DType::kBF16, bhsd(2, 200), kGpu));
  for (const char* n : {"k", "v", "dk", "dv"}) t.set(n, TensorRef::contiguous(fake_addr(slot++), DType::kBF16, bhsd(1, 300), kGpu));
  t.set("lse", TensorRef::contiguous(fake_addr(slot++), DType::kF32, {1, 2, 200}, kGpu));
  t.set("q2k_block_index", TensorRef::contiguous(fake_addr(slot++), DType::kI32, {1, 2, 2, 2}, kGpu));
  const nlohmann::json cfg = {{"sparse_block_size", 128}};
  auto main_of = [&](const nlohmann::json& config) {
    for (const auto& n : selected_all(rt, "bsa_bwd", config, t))
      if (n.find(".prep.") == std::string::npos && n.find(".route.") == std::string::npos &&
          n.find(".scan.") == std::string::npos && n.find(".dq.") == std::string::npos)
        return n;
    return std::string();
  };
  CHECK(main_of(cfg) == "bsa_bwd.hopper.bf16.d128.bs128.sm_90a");
  CHECK(main_of(nlohmann::json{{"sparse_block_size", 128}, {"backend", "hopper"}}) == "bsa_bwd.hopper.bf16.d128.bs128.sm_90a");
  CHECK(main_of(nlohmann::json{{"sparse_block_size", 128}, {"backend", "portable"}}) ==
        "bsa_bwd.portable.bf16.d128.bs128.bm64.sm_90a");
  // Other archs: 'auto' takes the portable kernel; an explicit 'hopper' is refused, naming why.
  CHECK(rt.impl().op("bsa_bwd", cfg)->kernels_for(t, "sm_80").size() == 5);
  CHECK_THROWS_WITH_AS(rt.impl().op("bsa_bwd", {{"sparse_block_size", 128}, {"backend", "hopper"}})->kernels_for(t, "sm_80"),
                       doctest::Contains("bsa_bwd: unsupported: backend 'hopper': it needs sm_90a"), attnjit::Unsupported);
}

TEST_CASE("attention planner: the Q-by-TMA hopper gqa_fwd kernel (the default) and its tuning knob") {
  test::TempDir dir("planner");
  attnjit::RuntimeOptions off_opts = test::options_in(dir);
  off_opts.tune = nlohmann::json{{"gqa_fwd_q_tma", false}}.dump();
  attnjit::Runtime rt(options_in(dir)), rt_off(off_opts);
  const nlohmann::json hopper = {{"backend", "hopper"}};
  // On by default (validated on an H100, 2026-12-08); tune.gqa_fwd_q_tma = false takes the kernel whose
  // consumers copy Q, a different cubin (key field q_tma).
  const auto on = rt.impl().op("gqa_fwd", hopper)->kernels_for(dense_args(128), "sm_90a").at(0);
  const auto off = rt_off.impl().op("gqa_fwd", hopper)->kernels_for(dense_args(128), "sm_90a").at(0);
  CHECK(on.describe() == "gqa_fwd.hopper.bf16.d128.bm128.bn128.causal.qtma.sm_90a");
  CHECK(off.describe() == "gqa_fwd.hopper.bf16.d128.bm128.bn128.causal.sm_90a");
  CHECK(test::contains(on.entry, ", false, false, true>"));
  CHECK(spec_field(on, "q_tma") == "1");
  CHECK(spec_field(off, "q_tma") == "0");
  // The persistent kernel takes precedence (it copies each work tile's Q itself).
  attnjit::RuntimeOptions both_opts = test::options_in(dir);
  both_opts.tune = nlohmann::json{{"gqa_fwd_q_tma", true}, {"gqa_fwd_persistent", true}}.dump();
  attnjit::Runtime rt_both(both_opts);
  const auto both = rt_both.impl().op("gqa_fwd", hopper)->kernels_for(dense_args(128), "sm_90a").at(0);
  CHECK(both.describe() == "gqa_fwd.hopper.bf16.d128.bm128.bn128.causal.persistent.sm_90a");
  // Paged keys never take it.
  attnjit::ops::GqaConfig cfg;
  cfg.varlen = true;
  CHECK(!attnjit::ops::choose_hopper_attention(cfg, DType::kBF16, 128, false, "sm_90a", true, false, true).q_tma);
  CHECK(attnjit::ops::choose_hopper_attention(cfg, DType::kBF16, 128, false, "sm_90a", false, false, true).q_tma);
}
