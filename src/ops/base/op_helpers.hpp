// Plumbing every op family repeats: the CPU reference plan, the placement a call is validated for, and
// the OpDefinition factory.
#pragma once
#include <fmt/format.h>

#include <cmath>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>

#include "attnjit/error.hpp"
#include "jit/cuda_driver.hpp"
#include "jit/kernel_cache.hpp"
#include "ops/base/context.hpp"
#include "ops/base/op.hpp"
#include "ops/base/validation.hpp"

namespace attnjit::ops {

// A reference plan (CPU): execute() runs `run` (which validates the call as host tensors, checks
// contents when asked, and runs the reference); describe() is "<op> reference plan (CPU)".
class ReferencePlan final : public detail::PlanImpl {
 public:
  using Run = std::function<void(const TensorArgs& tensors, void* stream)>;
  ReferencePlan(const char* op, Run run) : op_(op), run_(std::move(run)) {}
  void execute(const TensorArgs& tensors, void* stream) const override { run_(tensors, stream); }
  std::string describe() const override { return fmt::format("{} reference plan (CPU)", op_); }

 private:
  const char* op_;  // a string literal
  Run run_;
};

inline std::shared_ptr<const detail::PlanImpl> reference_plan(const char* op, ReferencePlan::Run run) {
  return std::make_shared<ReferencePlan>(op, std::move(run));
}

// Reference plans take host tensors, kernel plans device ones.
inline detail::Placement placement_for(detail::Impl impl) {
  return impl == detail::Impl::kReference ? detail::Placement::kHost : detail::Placement::kDevice;
}

// Lets `kernel` opt into `bytes` of dynamic shared memory (cuFuncSetAttribute).
inline void set_max_dynamic_smem(const jit::LoadedKernel& kernel, int bytes) {
  const auto& drv = jit::CudaDriver::get();
  drv.check(drv.cuFuncSetAttribute(kernel.function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, bytes),
            "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)");
}

// Throws Unsupported "<op>: kernel <spec> needs <bytes> bytes of shared memory, the device allows <max>"
// when the device cannot give `kernel` (compiled from `spec`) that much, else set_max_dynamic_smem.
inline void require_dynamic_smem(const char* op, const jit::LoadedKernel& kernel, const jit::KernelSpec& spec,
                                 int bytes) {
  if (bytes > kernel.max_dynamic_smem_bytes)
    throw Unsupported(fmt::format("{}: kernel {} needs {} bytes of shared memory, the device allows {}", op,
                                  spec.describe(), bytes, kernel.max_dynamic_smem_bytes));
  set_max_dynamic_smem(kernel, bytes);
}

// The `kv_splits` key of a split-KV op: absent gives `absent`, "auto" `auto_value`, else an integer in
// [1, max]. Raises "<op>: param: kv_splits: expected an integer in [1, max] or "auto", got ...".
inline int read_kv_splits(const char* op, const detail::ConfigReader& r, int max, int auto_value, int absent) {
  if (!r.has("kv_splits")) return absent;
  auto bad = [&](const std::string& got) {
    return InvalidArgument(
        fmt::format("{}: param: kv_splits: expected an integer in [1, {}] or \"auto\", got {}", op, max, got));
  };
  double n = 0;
  try {
    n = r.get_number("kv_splits", 1);
  } catch (const InvalidArgument&) {
    std::string s;
    try {
      s = r.get_string("kv_splits", "");
    } catch (const InvalidArgument&) {
      throw bad("a value that is neither");
    }
    if (s != "auto") throw bad(fmt::format("\"{}\"", s));
    return auto_value;
  }
  if (n != std::floor(n) || n < 1 || n > max) throw bad(fmt::format("{}", n));
  return static_cast<int>(n);
}

// The OpDefinition of `name`: create() makes an `Op(ctx, extra..., config)`.
template <class Op, class Matrix, class... Extra>
detail::OpDefinition op_definition(const char* name, Matrix default_matrix, Extra... extra) {
  detail::OpDefinition d;
  d.name = name;
  d.create = [extra...](OpContext& ctx, const nlohmann::json& config) -> std::shared_ptr<detail::OpInstance> {
    return std::make_shared<Op>(ctx, extra..., config);
  };
  d.default_matrix = default_matrix;
  return d;
}

}  // namespace attnjit::ops
