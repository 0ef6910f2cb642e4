#include "ops/base/workspace.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "attnjit/error.hpp"
#include "jit/cuda_driver.hpp"

namespace attnjit::detail {

namespace {
thread_local CallerWorkspaceScope* g_caller_scope = nullptr;
}

CallerWorkspaceScope::CallerWorkspaceScope(CUdeviceptr ptr, std::size_t bytes)
    : ptr_(ptr), bytes_(bytes), prev_(g_caller_scope) {
  g_caller_scope = this;
}
CallerWorkspaceScope::~CallerWorkspaceScope() { g_caller_scope = prev_; }
CallerWorkspaceScope* CallerWorkspaceScope::current() { return g_caller_scope; }

PlanWorkspace::~PlanWorkspace() {
  const auto& drv = jit::CudaDriver::get();
  if (!drv.available()) return;
  try {
    drv.bind_device(device_);
  } catch (...) {
    return;
  }
  // NOTE: work enqueued with this buffer must finish before the memory is reused.
  if (event_) {
    drv.cuEventSynchronize(event_);
    drv.cuEventDestroy(event_);
  }
  if (ptr_) drv.cuMemFree(ptr_);
  for (CUdeviceptr p : retired_) drv.cuMemFree(p);
}

void PlanWorkspace::reserve(std::size_t bytes) {
  bytes = (bytes + 255) / 256 * 256;
  std::lock_guard<std::mutex> g(mutex_);
  needed_ = std::max(needed_, bytes);
  if (auto* caller = CallerWorkspaceScope::current()) {
    caller->need(bytes);
    if (caller->ptr() && caller->bytes() < bytes)
      throw InvalidArgument(fmt::format("{}: args: workspace: expected at least {} bytes for these shapes, got a "
                                        "caller workspace of {} bytes", op_, bytes, caller->bytes()));
    return;
  }
  if (bytes <= bytes_) return;
  const auto& drv = jit::CudaDriver::get();
  drv.require("plan workspace");
  drv.bind_device(device_);
  CUdeviceptr p = 0;
  drv.check(drv.cuMemAlloc(&p, bytes), fmt::format("{}: allocating a {}-byte plan workspace", op_, bytes).c_str());
  if (!event_) drv.check(drv.cuEventCreate(&event_, CU_EVENT_DISABLE_TIMING), "plan workspace event");
  if (ptr_) retired_.push_back(ptr_);
  ptr_ = p;
  bytes_ = bytes;
}

std::size_t PlanWorkspace::bytes() const {
  std::lock_guard<std::mutex> g(mutex_);
  return std::max(bytes_, needed_);
}

PlanWorkspace::Lease PlanWorkspace::acquire(std::size_t bytes, void* stream) const {
  std::unique_lock<std::mutex> lock(mutex_);
  if (auto* caller = CallerWorkspaceScope::current(); caller && caller->ptr()) {
    if (bytes > caller->bytes())
      throw InvalidArgument(fmt::format("{}: args: workspace: expected at least {} bytes for these shapes, got a "
                                        "caller workspace of {} bytes", op_, bytes, caller->bytes()));
    return Lease(*this, std::move(lock), static_cast<CUstream>(stream), /*capturing=*/true, caller->ptr());
  }
  if (bytes > bytes_ && bytes <= needed_)
    throw InvalidArgument(fmt::format("{}: args: workspace: expected a caller workspace of at least {} bytes (this "
                                      "plan was made without allocating one; bind one with set_workspace), got none",
                                      op_, bytes));
  if (bytes > bytes_)
    throw InvalidArgument(fmt::format(
        "{}: args: workspace: expected a plan prepared for these shapes ({} bytes of scratch; call plan() with "
        "these tensors before execute()), got a plan holding {} bytes",
        op_, bytes, bytes_));
  const auto& drv = jit::CudaDriver::get();
  auto s = static_cast<CUstream>(stream);
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  drv.check(drv.cuStreamIsCapturing(s, &status), "plan workspace: cuStreamIsCapturing");
  const bool capturing = status != CU_STREAM_CAPTURE_STATUS_NONE;
  if (!capturing && has_last_ && last_stream_ != s)
    drv.check(drv.cuStreamWaitEvent(s, event_, 0), "plan workspace: cuStreamWaitEvent");
  return Lease(*this, std::move(lock), s, capturing, ptr_);
}

PlanWorkspace::Lease::Lease(const PlanWorkspace& ws, std::unique_lock<std::mutex> lock, CUstream stream,
                            bool capturing, CUdeviceptr ptr)
    : ws_(ws), lock_(std::move(lock)), stream_(stream), capturing_(capturing), ptr_(ptr) {}

PlanWorkspace::Lease::~Lease() {
  if (capturing_) return;
  const auto& drv = jit::CudaDriver::get();
  // NOTE: a failed record only loses cross-stream ordering; it must not throw from a destructor.
  if (drv.cuEventRecord(ws_.event_, stream_) == CUDA_SUCCESS) {
    ws_.last_stream_ = stream_;
    ws_.has_last_ = true;
  }
}

}  // namespace attnjit::detail
