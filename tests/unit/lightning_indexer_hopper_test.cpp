// lightning_indexer's hopper backend without a GPU: the tile geometry of the hopper kernel, the kernel each
// backend selects ('hopper', 'portable', and 'auto', which takes the hopper kernel wherever it serves the
// call), and the calls backend 'hopper' refuses, naming why. Kernel correctness is the GPU grid's job
// (tests/cases/gpu/lightning_indexer_hopper_*.json).
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "attnjit/runtime.hpp"
#include "indexer/lightning_indexer_hopper_params.cuh"
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

TensorArgs li_args(DType dt, int64_t B, int64_t T, int64_t H, int64_t D, int64_t topk) {
  TensorArgs a;
  a.set("q", TensorRef::contiguous(fake_addr(0), dt, {B, T, H, D}, kGpu));
  a.set("k", TensorRef::contiguous(fake_addr(1), dt, {B, T, D}, kGpu));
  a.set("weights", TensorRef::contiguous(fake_addr(2), dt, {B, T, H}, kGpu));
  a.set("indices", TensorRef::contiguous(fake_addr(3), DType::kI32, {B, T, topk}, kGpu));
  return a;
}

std::vector<std::string> selected(attnjit::Runtime& rt, const nlohmann::json& config, const TensorArgs& args,
                                  const char* arch = "sm_90a") {
  std::vector<std::string> names;
  for (const auto& s : rt.impl().op("lightning_indexer", config)->kernels_for(args, arch)) names.push_back(s.describe());
  return names;
}

}  // namespace

TEST_CASE("lightning_indexer hopper: tile geometry (token blocks of 64, 128 or 256 columns, 227 KB)") {
  using attnjit::kernels::lightning_indexer_hopper_geometry;
  // The shape: 4 tokens of 64 heads, CAP 2688 entries per row.
  const auto g = lightning_indexer_hopper_geometry(128, 64, 2048);
  CHECK(g.R == 4);
  CHECK(g.COLS == 256);
  CHECK(g.CAP == 2688);
  CHECK(g.smem_bytes <= 227 * 1024);
  for (int D : {64, 128})
    for (int HP : {8, 16, 32, 64, 128, 256})
      for (int topk : {1, 7, 64, 300, 1000, 2048, 3000, 6000, 9000, 12000, 20000}) {
        const auto t = lightning_indexer_hopper_geometry(D, HP, topk);
        if (t.R == 0) continue;
        CHECK((t.COLS == 64 || t.COLS == 128 || t.COLS == 256));
        CHECK(t.COLS == t.R * HP);
        CHECK(t.CAP >= topk + 2 * attnjit::kernels::kLiHopperBN);
        CHECK(t.CAP % 32 == 0);
        CHECK(t.smem_bytes <= 227 * 1024);
      }
  CHECK(lightning_indexer_hopper_geometry(96, 64, 64).R == 0);   // D 64 or 128 only
  CHECK(lightning_indexer_hopper_geometry(128, 192, 64).R == 0);  // no 192-column token block
  CHECK(lightning_indexer_hopper_geometry(128, 64, 40000).R == 0);
}

TEST_CASE("lightning_indexer hopper: backend choice, and what backend 'hopper' refuses") {
  test::TempDir dir("li_hopper");
  attnjit::Runtime rt(test::options_in(dir));
  const nlohmann::json hopper = {{"topk", 2048}, {"causal", true}, {"backend", "hopper"}};
  CHECK(selected(rt, hopper, li_args(DType::kBF16, 1, 4096, 64, 128, 2048)) ==
        std::vector<std::string>{"lightning_indexer.hopper.bf16.d128.h64.k2048.causal.sm_90a"});
  CHECK(selected(rt, {{"topk", 7}, {"backend", "hopper"}}, li_args(DType::kF16, 2, 300, 9, 64, 7)) ==
        std::vector<std::string>{"lightning_indexer.hopper.fp16.d64.h16.k7.sm_90a"});
  // 'auto' takes the hopper kernel where it serves the call, the portable one elsewhere (another arch, a
  // head dim it does not serve); 'portable' always the portable one.
  CHECK(selected(rt, {{"topk", 2048}, {"causal", true}}, li_args(DType::kBF16, 1, 4096, 64, 128, 2048)) ==
        std::vector<std::string>{"lightning_indexer.hopper.bf16.d128.h64.k2048.causal.sm_90a"});
  CHECK(selected(rt, {{"topk", 2048}, {"causal", true}}, li_args(DType::kBF16, 1, 4096, 64, 128, 2048), "sm_80") ==
        std::vector<std::string>{"lightning_indexer.portable.bf16.d128.h64.k2048.causal.sm_80"});
  CHECK(selected(rt, {{"topk", 2}}, li_args(DType::kBF16, 1, 8, 2, 16, 2)) ==
        std::vector<std::string>{"lightning_indexer.portable.bf16.d16.h8.k2.sm_90a"});
  CHECK(selected(rt, {{"topk", 2048}, {"causal", true}, {"backend", "portable"}},
                 li_args(DType::kBF16, 1, 4096, 64, 128, 2048)) ==
        std::vector<std::string>{"lightning_indexer.portable.bf16.d128.h64.k2048.causal.sm_90a"});
  // topk = 0 launches nothing on either backend.
  CHECK(selected(rt, {{"topk", 0}, {"backend", "hopper"}}, li_args(DType::kBF16, 1, 10, 4, 64, 0)).empty());
  // Explicit 'hopper' never falls back: unserved static properties are refused, naming why.
  auto refused = [&](const nlohmann::json& config, const TensorArgs& args, const char* why, const char* arch = "sm_90a") {
    CHECK_THROWS_WITH_AS(selected(rt, config, args, arch),
                         doctest::Contains((std::string("lightning_indexer: unsupported: backend 'hopper': ") + why).c_str()),
                         attnjit::Unsupported);
  };
  refused({{"topk", 2}, {"backend", "hopper"}}, li_args(DType::kBF16, 1, 8, 2, 16, 2), "it serves head dims 64 and 128, got 16");
  refused({{"topk", 2}, {"backend", "hopper"}}, li_args(DType::kBF16, 1, 8, 150, 64, 2), "it serves H up to 128 or from 193");
  refused({{"topk", 40000}, {"backend", "hopper"}}, li_args(DType::kBF16, 1, 8, 64, 128, 40000),
          "topk 40000 exceeds its shared-memory candidate buffers");
  refused(hopper, li_args(DType::kBF16, 1, 4096, 64, 128, 2048), "it needs sm_90a", "sm_80");
}
