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
  // Device scratch the plan needs for the shapes it was planned with (0 for most ops and every
  // reference plan). Op::plan(tensors) allocates it at plan time; Op::plan(tensors, workspace, bytes)
  // does not, and execute() then runs on the caller's buffer.
  std::size_t workspace_bytes() const;
  // Binds caller-owned device memory (e.g. from the framework's caching allocator) to this Plan
  // value: its execute() uses it instead of the plan's own scratch. Throws InvalidArgument when the
  // buffer is smaller than workspace_bytes() or not 256-byte aligned. The memory must outlive every
  // execute() that uses it, and ordering its reuse across streams is the caller's job. nullptr unbinds.
  void set_workspace(void* device_ptr, std::size_t bytes);
  void* workspace() const { return workspace_; }
  bool valid() const { return impl_ != nullptr; }

 private:
  friend class Op;
  std::shared_ptr<const detail::PlanImpl> impl_;
  void* workspace_ = nullptr;          // caller's device scratch, or nullptr: the plan's own
  std::size_t workspace_size_ = 0;
  std::size_t planned_bytes_ = 0;      // scratch needed by the planned shapes, when planned without allocating
  bool caller_workspace_ = false;      // planned by Op::plan(tensors, workspace, bytes)
};

}  // namespace attnjit
