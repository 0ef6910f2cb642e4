// attnjit: an immutable, thread-safe executable plan for one op instance and one static signature.
#pragma once
#include <attnjit/export.hpp>
#include <attnjit/tensor.hpp>

#include <cstddef>
#include <memory>
#include <string>

namespace attnjit {

namespace detail {
class PlanImpl;
}

class ATTNJIT_API Plan {
 public:
  Plan() = default;
  explicit Plan(std::shared_ptr<const detail::PlanImpl> impl) : impl_(std::move(impl)) {}

  // Checks the call's tensors against the op's rules and this plan's static signature, then
  // launches on `stream` (a CUstream; nullptr is the legacy default stream). Never allocates,
  // synchronises or compiles, so it is safe inside CUDA graph capture. A rejected call writes
  // nothing. Reference plans (impl: reference) run on host tensors and ignore the stream.
  void execute(const TensorArgs& tensors, void* stream = nullptr) const;

  // Readable name of the plan: op, backend, and the kernels it launches.
  std::string describe() const;
  // Device scratch the plan needs (always allocated by the plan itself at plan time; 0 for most ops).
  std::size_t workspace_bytes() const;
  bool valid() const { return impl_ != nullptr; }

 private:
  std::shared_ptr<const detail::PlanImpl> impl_;
};

}  // namespace attnjit
