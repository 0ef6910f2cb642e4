// The attention planners (gqa_fwd, gqa_varlen_fwd, gqa_paged_fwd, mha_decode_paged) without a GPU:
// the kernel each call selects (tiles per head dim, flags, KV mode and dtypes in describe()), the
// tuning override, and the backend rules. Kernel correctness is the GPU grid's job (tests/cases/gpu).
#include <doctest/doctest.h>

#include <string>

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

// Descriptors only: distinct, 256-aligned fake device addresses (kernels_for never dereferences them).
void* addr(int i) { return reinterpret_cast<void*>(static_cast<uintptr_t>(i + 1) << 32); }

attnjit::RuntimeOptions options_in(const test::TempDir& dir, const std::string& tile = "") {
  attnjit::RuntimeOptions o;
  o.cache_dir = (dir / "cache").string();
  o.log_level = "error";
  o.gqa_tile = tile;
  return o;
}

TensorArgs dense_args(int64_t D, DType dt = DType::kBF16) {
  return TensorArgs{{"q", TensorRef::contiguous(addr(0), dt, {2, 33, 8, D}, kGpu)},
                    {"k", TensorRef::contiguous(addr(1), dt, {2, 70, 2, D}, kGpu)},
                    {"v", TensorRef::contiguous(addr(2), dt, {2, 70, 2, D}, kGpu)},
                    {"o", TensorRef::contiguous(addr(3), dt, {2, 33, 8, D}, kGpu)}};
}

std::string selected(attnjit::Runtime& rt, const char* op, const nlohmann::json& config, const TensorArgs& args) {
  auto specs = rt.impl().op(op, config)->kernels_for(args, "sm_90a");
  REQUIRE(specs.size() == 1);
  return specs[0].describe();
}

}  // namespace

TEST_CASE("attention planner: tiles per head dim, and the flags in the kernel name") {
  test::TempDir dir("planner");
  attnjit::Runtime rt(options_in(dir));
  CHECK(selected(rt, "gqa_fwd", {}, dense_args(64)) == "gqa_fwd.portable.bf16.d64.bm128.bn64.causal.sm_90a");
  CHECK(selected(rt, "gqa_fwd", {{"is_causal", false}}, dense_args(128)) == "gqa_fwd.portable.bf16.d128.bm128.bn32.sm_90a");
  CHECK(selected(rt, "gqa_fwd", {}, dense_args(96)) == "gqa_fwd.portable.bf16.d96.bm128.bn32.causal.sm_90a");
  // D = 256: 128-row tiles on 8 warps; with RoPE 64-row tiles on 4 (shared memory).
  CHECK(selected(rt, "gqa_fwd", {}, dense_args(256)) == "gqa_fwd.portable.bf16.d256.bm128.bn32.w8.causal.sm_90a");
  auto rope = dense_args(256);
  rope.set("rope_cos", TensorRef::contiguous(addr(4), DType::kBF16, {70, 128}, kGpu));
  rope.set("rope_sin", TensorRef::contiguous(addr(5), DType::kBF16, {70, 128}, kGpu));
  CHECK(selected(rt, "gqa_fwd", {{"pos_encoding_mode", "rope"}, {"window_size_left", 7}, {"softcap", 30.0}}, rope) ==
        "gqa_fwd.portable.bf16.d256.bm64.bn32.causal.window.softcap.rope-neox.sm_90a");
}

TEST_CASE("attention planner: packed and paged calls, KV dtypes and sinks") {
  test::TempDir dir("planner");
  attnjit::Runtime rt(options_in(dir));
  TensorArgs varlen{{"q", TensorRef::contiguous(addr(0), DType::kF16, {40, 8, 128}, kGpu)},
                    {"k", TensorRef::contiguous(addr(1), DType::kF16, {90, 2, 128}, kGpu)},
                    {"v", TensorRef::contiguous(addr(2), DType::kF16, {90, 2, 128}, kGpu)},
                    {"o", TensorRef::contiguous(addr(3), DType::kF16, {40, 8, 128}, kGpu)},
                    {"cu_seqlens_q", TensorRef::contiguous(addr(4), DType::kI32, {4}, kGpu)},
                    {"cu_seqlens_kv", TensorRef::contiguous(addr(5), DType::kI32, {4}, kGpu)},
                    {"sinks", TensorRef::contiguous(addr(6), DType::kF32, {8}, kGpu)}};
  CHECK(selected(rt, "gqa_varlen_fwd", {}, varlen) == "gqa_varlen_fwd.portable.fp16.d128.bm128.bn32.causal.sinks.sm_90a");

  TensorArgs paged{{"q", TensorRef::contiguous(addr(0), DType::kBF16, {40, 8, 64}, kGpu)},
                   {"k_pages", TensorRef::contiguous(addr(1), DType::kE4M3, {9, 16, 2, 64}, kGpu)},
                   {"v_pages", TensorRef::contiguous(addr(2), DType::kE4M3, {9, 16, 2, 64}, kGpu)},
                   {"page_table", TensorRef::contiguous(addr(3), DType::kI32, {3, 5}, kGpu)},
                   {"cache_seqlens", TensorRef::contiguous(addr(4), DType::kI32, {3}, kGpu)},
                   {"cu_seqlens_q", TensorRef::contiguous(addr(5), DType::kI32, {4}, kGpu)},
                   {"k_scale", TensorRef::contiguous(addr(6), DType::kF32, {3, 2}, kGpu)},
                   {"v_scale", TensorRef::contiguous(addr(7), DType::kF32, {3, 2}, kGpu)},
                   {"o", TensorRef::contiguous(addr(8), DType::kBF16, {40, 8, 64}, kGpu)}};
  const std::string d = selected(rt, "gqa_paged_fwd", {{"is_causal", false}}, paged);
  CHECK(d == "gqa_paged_fwd.portable.bf16.kv-e4m3.d64.bm128.bn64.sm_90a");
  // The KV mode is a key field: the paged kernel is not the packed one.
  auto spec = rt.impl().op("gqa_paged_fwd", {{"is_causal", false}})->kernels_for(paged, "sm_90a")[0];
  bool paged_field = false;
  for (const auto& [k, v] : spec.fields) paged_field = paged_field || (k == "kv_mode" && v == "paged");
  CHECK(paged_field);

  TensorArgs mha{{"q", TensorRef::contiguous(addr(0), DType::kF16, {3, 1, 4, 128}, kGpu)},
                 {"k", TensorRef::contiguous(addr(1), DType::kF16, {64, 4, 128}, kGpu)},
                 {"v", TensorRef::contiguous(addr(2), DType::kF16, {64, 4, 128}, kGpu)},
                 {"real_seqlen_kv", TensorRef::contiguous(addr(3), DType::kI32, {3}, kGpu)},
                 {"block_table", TensorRef::contiguous(addr(4), DType::kI32, {3, 4}, kGpu)},
                 {"o", TensorRef::contiguous(addr(5), DType::kF16, {3, 1, 4, 128}, kGpu)}};
  CHECK(selected(rt, "mha_decode_paged", {{"page_size", 16}}, mha) == "mha_decode_paged.portable.fp16.d128.bm128.bn32.sm_90a");
  // N_kv = 64 is not a multiple of a page size of 24.
  CHECK_THROWS_WITH_AS(rt.impl().op("mha_decode_paged", {{"page_size", 24}})->kernels_for(mha, "sm_90a"),
                       doctest::Contains("mha_decode_paged: shape: k:"), attnjit::InvalidArgument);
  CHECK_THROWS_WITH_AS(rt.op("mha_decode_paged", nlohmann::json::object()),
                       doctest::Contains("mha_decode_paged: param: page_size:"), attnjit::InvalidArgument);
}

TEST_CASE("attention planner: the ATTNJIT_GQA_TILE override and the backend rules") {
  test::TempDir dir("planner");
  attnjit::Runtime tuned(options_in(dir, "128x64x4"));
  CHECK(selected(tuned, "gqa_fwd", {}, dense_args(128)) == "gqa_fwd.portable.bf16.d128.bm128.bn64.causal.sm_90a");
  // 32 rows per warp would not fit D = 256's accumulators: refused, naming the override.
  attnjit::Runtime bad(options_in(dir, "128x32x4"));
  CHECK_THROWS_WITH_AS(selected(bad, "gqa_fwd", {}, dense_args(256)), doctest::Contains("ATTNJIT_GQA_TILE"),
                       attnjit::InvalidArgument);
  attnjit::Runtime junk(options_in(dir, "big"));
  CHECK_THROWS_AS(selected(junk, "gqa_fwd", {}, dense_args(64)), attnjit::InvalidArgument);

  attnjit::Runtime rt(options_in(dir));
  CHECK_THROWS_WITH_AS(rt.impl().op("gqa_fwd", {{"backend", "hopper"}})->kernels_for(dense_args(128), "sm_90a"),
                       doctest::Contains("'portable'"), attnjit::Unsupported);
  CHECK_THROWS_WITH_AS(rt.impl().op("gqa_fwd", {})->kernels_for(dense_args(128), "sm_75"),
                       doctest::Contains("sm_80"), attnjit::Unsupported);
}
