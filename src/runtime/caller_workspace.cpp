// Caller-provided plan workspace (include/attnjit/plan.hpp): planning without allocating, binding a
// buffer to a Plan value. The buffer reaches the op's PlanWorkspace through a CallerWorkspaceScope.
#include <fmt/format.h>

#include <cstdint>

#include "attnjit/runtime.hpp"
#include "ops/registry.hpp"
#include "ops/base/workspace.hpp"

namespace attnjit {

Plan Op::plan(const TensorArgs& tensors, void* workspace, std::size_t workspace_bytes) const {
  if (!impl_) throw InvalidArgument("op: expected an op from Runtime::op(), got an empty Op");
  detail::CallerWorkspaceScope scope(reinterpret_cast<CUdeviceptr>(workspace), workspace ? workspace_bytes : 0);
  Plan p = impl_->plan(tensors);
  p.caller_workspace_ = true;
  p.planned_bytes_ = (scope.needed() + 255) / 256 * 256;
  if (workspace) p.set_workspace(workspace, workspace_bytes);
  return p;
}

void Plan::set_workspace(void* device_ptr, std::size_t bytes) {
  if (!impl_) throw InvalidArgument("plan: expected a plan from Op::plan(), got an empty Plan");
  if (!device_ptr) {
    workspace_ = nullptr;
    workspace_size_ = 0;
    return;
  }
  const std::size_t need = workspace_bytes();
  if (bytes < need)
    throw InvalidArgument(fmt::format("plan: args: workspace: expected at least {} bytes ({}), got {} bytes", need,
                                      describe(), bytes));
  if (reinterpret_cast<std::uintptr_t>(device_ptr) % 256 != 0)
    throw InvalidArgument(fmt::format("plan: layout: workspace: expected a 256-byte aligned address, got {}",
                                      device_ptr));
  workspace_ = device_ptr;
  workspace_size_ = bytes;
}

}  // namespace attnjit
