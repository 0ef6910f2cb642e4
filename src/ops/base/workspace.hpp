// Device scratch owned by a kernel plan (split-KV partials, quantised operands, score slabs, ...).
//
// Sizing happens at plan time only: Op::plan(tensors) calls PlanImpl::prepare(tensors) on the cached
// plan every time, and a plan that needs scratch calls reserve(bytes for these shapes) there. That is
// the only place device memory is allocated; a buffer grows (never shrinks) and the buffers it
// replaces are kept until the plan dies, because work already enqueued may still use them.
//
// Plan::execute() takes a Lease: it never allocates, and it raises InvalidArgument when the plan was
// prepared for smaller shapes ("call plan() with these tensors first"). One plan may be executed from
// several threads and streams: leases are serialised on the host, and a stream that takes the buffer
// from another stream first waits (cuStreamWaitEvent) for the other stream's work on it. Under stream
// capture no event is recorded or waited for: a captured plan must not also run on another stream
// while its graph may be in flight (give each such stream its own Op instance).
//
// A caller-provided buffer (Plan::set_workspace, Op::plan with a workspace) reaches a plan through a
// CallerWorkspaceScope on the calling thread: while one is open, reserve() records the size but never
// allocates (and refuses a buffer that is too small), and acquire() hands out the caller's buffer
// without events (ordering the caller's buffer across streams is the caller's job).
#pragma once
#include <cuda.h>

#include <cstddef>
#include <mutex>
#include <string>
#include <vector>

namespace attnjit::detail {

// Sequential 256-byte aligned sections of one workspace allocation: take(bytes) returns a section's
// offset from the base, total() the bytes to reserve.
class WorkspaceCursor {
 public:
  std::size_t take(std::size_t bytes) {
    const std::size_t here = at_;
    at_ += (bytes + 255) / 256 * 256;
    return here;
  }
  std::size_t total() const { return at_; }

 private:
  std::size_t at_ = 0;
};

class CallerWorkspaceScope {
 public:
  // ptr 0: plan without allocating (only the size is recorded).
  CallerWorkspaceScope(CUdeviceptr ptr, std::size_t bytes);
  ~CallerWorkspaceScope();
  CallerWorkspaceScope(const CallerWorkspaceScope&) = delete;
  CallerWorkspaceScope& operator=(const CallerWorkspaceScope&) = delete;
  static CallerWorkspaceScope* current();
  CUdeviceptr ptr() const { return ptr_; }
  std::size_t bytes() const { return bytes_; }
  // The largest reserve() seen in this scope (what the plans of this thread need).
  std::size_t needed() const { return needed_; }
  void need(std::size_t bytes) { needed_ = bytes > needed_ ? bytes : needed_; }

 private:
  CUdeviceptr ptr_;
  std::size_t bytes_;
  std::size_t needed_ = 0;
  CallerWorkspaceScope* prev_;
};

class PlanWorkspace {
 public:
  PlanWorkspace(std::string op, int device) : op_(std::move(op)), device_(device) {}
  ~PlanWorkspace();
  PlanWorkspace(const PlanWorkspace&) = delete;
  PlanWorkspace& operator=(const PlanWorkspace&) = delete;

  // Plan time: makes the buffer at least `bytes` long (rounded up to 256 bytes).
  void reserve(std::size_t bytes);
  std::size_t bytes() const;

  class Lease {
   public:
    CUdeviceptr ptr() const { return ptr_; }
    ~Lease();
    Lease(Lease&&) = delete;

   private:
    friend class PlanWorkspace;
    Lease(const PlanWorkspace& ws, std::unique_lock<std::mutex> lock, CUstream stream, bool capturing,
          CUdeviceptr ptr);
    const PlanWorkspace& ws_;
    std::unique_lock<std::mutex> lock_;
    CUstream stream_;
    bool capturing_;
    CUdeviceptr ptr_ = 0;
  };

  // Execute time: the buffer, ordered after the previous stream's use. Throws InvalidArgument
  // ("<op>: args: workspace: ...") if fewer than `bytes` were reserved.
  Lease acquire(std::size_t bytes, void* stream) const;

 private:
  std::string op_;
  int device_;
  mutable std::mutex mutex_;
  CUdeviceptr ptr_ = 0;
  std::size_t bytes_ = 0;
  std::size_t needed_ = 0;  // the largest reserve(), allocated or not
  std::vector<CUdeviceptr> retired_;
  mutable CUevent event_ = nullptr;  // recorded on the last user stream
  mutable CUstream last_stream_ = nullptr;
  mutable bool has_last_ = false;
};

}  // namespace attnjit::detail
