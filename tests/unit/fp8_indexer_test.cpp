// fp8_lightning_indexer and topk_select (SPEC.md §2.3, §2.2): the kernel choice of the planners (what
// selects a kernel, what stays a launch argument), the shared tile geometry, and the references on
// hand-checked inputs.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <set>
#include <vector>

#include "attnjit/runtime.hpp"
#include "indexer/fp8_lightning_indexer_params.cuh"
#include "ops/indexer/fp8_reference.hpp"
#include "base/host_numeric.hpp"
#include "runtime/runtime_impl.hpp"
#include "test_util.hpp"

namespace {

namespace test = attnjit::test;
using attnjit::Device;
using attnjit::DeviceKind;
using attnjit::DType;
using attnjit::TensorArgs;
using attnjit::TensorRef;

constexpr Device kHost{DeviceKind::kCPU, 0};
constexpr Device kGpu{DeviceKind::kCUDA, 0};

using test::fake_addr;
using test::options_in;

TensorArgs indexer_args(DType dt, int64_t B, int64_t S, int64_t S_kv, int64_t H, int64_t G, int64_t D, bool scale) {
  TensorArgs a;
  a.set("index_q", TensorRef::contiguous(fake_addr(0), dt, {B, S, H, D}, kGpu));
  a.set("index_k", TensorRef::contiguous(fake_addr(1), dt, {B, S_kv, G, D}, kGpu));
  a.set("weights", TensorRef::contiguous(fake_addr(2), DType::kF32, {S, H}, kGpu));
  a.set("cu_seqlen_ks", TensorRef::contiguous(fake_addr(3), DType::kI32, {S}, kGpu));
  a.set("cu_seqlen_ke", TensorRef::contiguous(fake_addr(4), DType::kI32, {S}, kGpu));
  if (scale) a.set("index_k_scale", TensorRef::contiguous(fake_addr(5), DType::kF32, {B, S_kv, G}, kGpu));
  a.set("logits", TensorRef::contiguous(fake_addr(6), DType::kF32, {B, S, S_kv, G}, kGpu));
  return a;
}

}  // namespace

TEST_CASE("fp8_lightning_indexer: tile geometry pads H/G to 1, 2, 4 or 8k and fits shared memory") {
  for (int D : {64, 128})
    for (int HG = 1; HG <= 128; ++HG) {
      const auto t = attnjit::kernels::fp8_indexer_tiles(D, HG);
      CHECK(t.HP >= HG);
      CHECK((t.HP == 1 || t.HP == 2 || t.HP == 4 || t.HP % 8 == 0));
      CHECK(t.NCOLS == t.BQ * t.HP);
      CHECK(t.NCOLS % 8 == 0);
      CHECK(t.BQ >= 1);
      CHECK(t.smem_bytes <= 100 * 1024);
    }
  CHECK(attnjit::kernels::fp8_indexer_tiles(64, 32).BQ == 8);
  CHECK(attnjit::kernels::fp8_indexer_tiles(128, 64).BQ == 2);
}

TEST_CASE("fp8_lightning_indexer: kernel choice (dtype, D, H/G, scale, clean_logits) and launch arguments") {
  test::TempDir dir;
  attnjit::Runtime rt(options_in(dir));
  auto op = rt.impl().op("fp8_lightning_indexer", nlohmann::json::object());
  // bf16: the key pre-pass, then the main kernel with kappa.
  auto specs = op->kernels_for(indexer_args(DType::kBF16, 1, 100, 300, 32, 1, 64, false), "sm_90a");
  REQUIRE(specs.size() == 2);
  CHECK(specs[0].describe() == "fp8_lightning_indexer.portable.quantise-keys.bf16.d64.sm_90a");
  CHECK(specs[1].describe() == "fp8_lightning_indexer.portable.bf16.d64.hg32.clean.sm_90a");
  // Lengths, batch and G (with H/G fixed) are launch arguments.
  auto again = op->kernels_for(indexer_args(DType::kBF16, 3, 7, 5000, 64, 2, 64, false), "sm_90a");
  CHECK(again.back().describe() == specs.back().describe());
  // e4m3: scales select a kernel; no pre-pass.
  auto e = op->kernels_for(indexer_args(DType::kE4M3, 1, 4, 9, 8, 4, 128, true), "sm_90a");
  REQUIRE(e.size() == 1);
  CHECK(e[0].describe() == "fp8_lightning_indexer.portable.e4m3.d128.hg2.scale.clean.sm_90a");
  auto noclean = rt.impl().op("fp8_lightning_indexer", {{"clean_logits", false}});
  CHECK(noclean->kernels_for(indexer_args(DType::kE4M3, 1, 4, 9, 8, 4, 128, false), "sm_90a")[0].describe() ==
        "fp8_lightning_indexer.portable.e4m3.d128.hg2.sm_90a");
  // FP8 mma.sync needs sm_89+; no hopper kernel.
  CHECK_THROWS_AS(op->kernels_for(indexer_args(DType::kE4M3, 1, 4, 9, 8, 4, 64, false), "sm_80"), attnjit::Unsupported);
  auto hopper = rt.impl().op("fp8_lightning_indexer", {{"backend", "hopper"}});
  CHECK_THROWS_AS(hopper->kernels_for(indexer_args(DType::kE4M3, 1, 4, 9, 8, 4, 64, false), "sm_90a"),
                  attnjit::Unsupported);
}

TEST_CASE("topk_select: one kernel per window presence; topk is a launch argument") {
  test::TempDir dir;
  attnjit::Runtime rt(options_in(dir));
  std::set<std::string> names;
  for (int topk : {1, 64, 2048, 100000}) {
    auto op = rt.impl().op("topk_select", {{"topk", topk}});
    for (bool window : {false, true}) {
      TensorArgs a;
      a.set("index_score", TensorRef::contiguous(fake_addr(0), DType::kF32, {2, 3, 40000, 2}, kGpu));
      if (window) {
        a.set("starts", TensorRef::contiguous(fake_addr(1), DType::kI32, {2, 3}, kGpu));
        a.set("ends", TensorRef::contiguous(fake_addr(2), DType::kI32, {2, 3}, kGpu));
      }
      a.set("indexes", TensorRef::contiguous(fake_addr(3), DType::kI32, {2, 3, 2, topk}, kGpu));
      for (const auto& s : op->kernels_for(a, "sm_90a")) names.insert(s.describe());
    }
  }
  CHECK(names == std::set<std::string>{"topk_select.portable.sm_90a", "topk_select.portable.window.sm_90a"});
}

TEST_CASE("fp8_lightning_indexer reference: key quantisation, windows, -inf and the head sum") {
  // sigma = max(amax, 1e-4) / 448 in fp32; k8 = e4m3(k / sigma).
  std::vector<float> k = {3.0f, -7.0f, 0.5f, 1e-3f};
  std::vector<uint8_t> k8(4);
  const float sigma = attnjit::ops::reference::quantise_key_row(k.data(), 4, k8.data());
  CHECK(sigma == 7.0f / 448.0f);
  CHECK(attnjit::numeric::e4m3_to_float(k8[1]) == -448.0f);
  CHECK(attnjit::numeric::e4m3_to_float(k8[0]) == 192.0f);  // 3 / (7/448) = 192, exact
  std::vector<float> zero(4, 0.0f);
  CHECK(attnjit::ops::reference::quantise_key_row(zero.data(), 4, k8.data()) == 1e-4f / 448.0f);

  // e4m3, B = 1, S = 2, S_kv = 3, H = 2, G = 1, D = 64: q rows and key rows constant per row.
  const int64_t S = 2, S_kv = 3, H = 2, D = 64;
  std::vector<uint8_t> q(S * H * D), kk(S_kv * D);
  const float qv[2][2] = {{1.0f, -1.0f}, {0.5f, 2.0f}};
  for (int s = 0; s < S; ++s)
    for (int h = 0; h < H; ++h)
      for (int d = 0; d < D; ++d) q[(s * H + h) * D + d] = attnjit::numeric::float_to_e4m3(qv[s][h]);
  const float kv[3] = {1.0f, 0.25f, -2.0f};
  for (int t = 0; t < S_kv; ++t)
    for (int d = 0; d < D; ++d) kk[t * D + d] = attnjit::numeric::float_to_e4m3(kv[t]);
  std::vector<float> w = {2.0f, -3.0f, 1.0f, 0.5f};
  std::vector<int32_t> ks = {-4, 1}, ke = {2, 9};
  std::vector<float> scale = {1.0f, 2.0f, 4.0f};
  std::vector<float> out(S * S_kv, std::numeric_limits<float>::quiet_NaN());
  TensorRef tq = TensorRef::contiguous(q.data(), DType::kE4M3, {1, S, H, D}, kHost);
  TensorRef tk = TensorRef::contiguous(kk.data(), DType::kE4M3, {1, S_kv, 1, D}, kHost);
  TensorRef tw = TensorRef::contiguous(w.data(), DType::kF32, {S, H}, kHost);
  TensorRef tks = TensorRef::contiguous(ks.data(), DType::kI32, {S}, kHost);
  TensorRef tke = TensorRef::contiguous(ke.data(), DType::kI32, {S}, kHost);
  TensorRef tsc = TensorRef::contiguous(scale.data(), DType::kF32, {1, S_kv, 1}, kHost);
  TensorRef to = TensorRef::contiguous(out.data(), DType::kF32, {1, S, S_kv, 1}, kHost);
  attnjit::ops::reference::fp8_lightning_indexer(tq, tk, tw, tks, tke, &tsc, to, true);
  const float ninf = -std::numeric_limits<float>::infinity();
  // s = 0, window [0, 2): t = 0: 1 * (2 * relu(64) - 3 * relu(-64)) = 128; t = 1: 2 * (2 * 16) = 64.
  CHECK(out[0] == 128.0f);
  CHECK(out[1] == 64.0f);
  CHECK(out[2] == ninf);
  // s = 1, window [1, 3): t = 1: 2 * (1 * relu(8) + 0.5 * relu(32)) = 48; t = 2: 4 * (0 + 0) = 0.
  CHECK(out[3] == ninf);
  CHECK(out[4] == 48.0f);
  CHECK(out[5] == 0.0f);
}

TEST_CASE("topk_select reference: clamped windows, -inf candidates, ties by position, -1 padding") {
  const float ninf = -std::numeric_limits<float>::infinity();
  std::vector<float> score = {0.5f, ninf, 2.0f, 2.0f, -1.0f, ninf};  // [1, 1, 6, 1]
  std::vector<int32_t> st = {-3}, en = {100};
  std::vector<int32_t> out(8, 0x7FFFFFFF);
  TensorRef ts = TensorRef::contiguous(score.data(), DType::kF32, {1, 1, 6, 1}, kHost);
  TensorRef tst = TensorRef::contiguous(st.data(), DType::kI32, {1, 1}, kHost);
  TensorRef ten = TensorRef::contiguous(en.data(), DType::kI32, {1, 1}, kHost);
  TensorRef to = TensorRef::contiguous(out.data(), DType::kI32, {1, 1, 1, 8}, kHost);
  attnjit::ops::reference::topk_select(ts, &tst, &ten, to, 8);
  CHECK(out == std::vector<int32_t>{2, 3, 0, 4, 1, 5, -1, -1});
  st = {4};
  en = {2};  // ends < starts: empty
  attnjit::ops::reference::topk_select(ts, &tst, &ten, to, 8);
  CHECK(out == std::vector<int32_t>(8, -1));
}
