// SPEC.md §1.12: zero-element tensors are valid whatever their strides (PyTorch gives strides as if each
// zero extent were 1, e.g. [1000, 1, 1] for [1, 1000, 0]). The ops whose contract accepts such shapes
// must accept them with those strides, on the reference and through the kernel path's descriptor checks.
#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <vector>

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

// PyTorch's strides for `shape`: row-major with each zero extent taken as 1.
TensorRef torch_like(void* data, DType dt, std::vector<int64_t> shape, Device dev = {DeviceKind::kCPU, 0}) {
  TensorRef t = TensorRef::contiguous(data, dt, shape, dev);
  int64_t stride = 1;
  for (int d = t.ndim - 1; d >= 0; --d) {
    t.strides[d] = stride;
    stride *= shape[d] == 0 ? 1 : shape[d];
  }
  return t;
}

// Runs the call on the reference (host buffers) and through kernels_for (fake device addresses).
void accepts(const char* op, const nlohmann::json& config, const std::vector<std::pair<const char*, TensorRef>>& ts) {
  test::TempDir dir("zero-el");
  attnjit::Runtime rt(test::options_in(dir));
  TensorArgs host, dev;
  int i = 0;
  for (const auto& [name, t] : ts) {
    host.set(name, t);
    TensorRef d = t;
    d.device = {DeviceKind::kCUDA, 0};
    d.data = test::fake_addr(i++);
    dev.set(name, d);
  }
  nlohmann::json ref = config, ker = config;
  ref["impl"] = "reference";
  ker["impl"] = "kernel";
  CHECK_NOTHROW(rt.run(op, attnjit::Config::parse(ref.dump()), host));
  CHECK_NOTHROW(rt.impl().op(op, ker)->kernels_for(dev, "sm_90a"));
}

}  // namespace

TEST_CASE("zero-element: is_contiguous holds for any strides once an extent is 0") {
  alignas(16) static char buf[64];
  TensorRef t = TensorRef::contiguous(buf, DType::kI32, {1, 1000, 0}, {DeviceKind::kCPU, 0});
  t.strides = {1000, 1, 1};
  CHECK(t.is_contiguous());
  t.strides = {7, 13, 3};
  CHECK(t.is_contiguous());
}

TEST_CASE("zero-element: lightning_indexer with topk = 0 and a [B, T, 0] output of PyTorch strides") {
  std::vector<uint16_t> q(1 * 4 * 2 * 64, 0x3c00), k(1 * 4 * 64, 0x3c00), w(1 * 4 * 2, 0x3c00);
  alignas(16) static int32_t idx[4];
  accepts("lightning_indexer", {{"topk", 0}},
          {{"q", torch_like(q.data(), DType::kF16, {1, 4, 2, 64})},
           {"k", torch_like(k.data(), DType::kF16, {1, 4, 64})},
           {"weights", torch_like(w.data(), DType::kF16, {1, 4, 2})},
           {"indices", torch_like(idx, DType::kI32, {1, 4, 0})}});
}

TEST_CASE("zero-element: fp8_lightning_indexer with S_kv = 0") {
  std::vector<uint16_t> q(1 * 4 * 8 * 64, 0x3c00);
  alignas(16) static uint16_t k[64];
  std::vector<float> w(4 * 8, 1.0f);
  std::vector<int32_t> ks(4, 0), ke(4, 0);
  alignas(16) static float logits[4];
  accepts("fp8_lightning_indexer", nlohmann::json::object(),
          {{"index_q", torch_like(q.data(), DType::kBF16, {1, 4, 8, 64})},
           {"index_k", torch_like(k, DType::kBF16, {1, 0, 1, 64})},
           {"weights", torch_like(w.data(), DType::kF32, {4, 8})},
           {"cu_seqlen_ks", torch_like(ks.data(), DType::kI32, {4})},
           {"cu_seqlen_ke", torch_like(ke.data(), DType::kI32, {4})},
           {"logits", torch_like(logits, DType::kF32, {1, 4, 0, 1})}});
}

TEST_CASE("zero-element: topk_select with S_kv = 0 gives all -1") {
  alignas(16) static float scores[4];
  std::vector<int32_t> out(1 * 4 * 1 * 2, 12345);
  accepts("topk_select", {{"topk", 2}},
          {{"index_score", torch_like(scores, DType::kF32, {1, 4, 0, 1})},
           {"indexes", torch_like(out.data(), DType::kI32, {1, 4, 1, 2})}});
  for (auto v : out) CHECK(v == -1);
}
