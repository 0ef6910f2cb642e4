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
#pragma once
#include <cuda.h>

#include <cstddef>
#include <mutex>
#include <string>
#include <vector>

namespace attnjit::detail {

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
    Lease(const PlanWorkspace& ws, std::unique_lock<std::mutex> lock, CUstream stream, bool capturing);
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
  std::vector<CUdeviceptr> retired_;
  mutable CUevent event_ = nullptr;  // recorded on the last user stream
  mutable CUstream last_stream_ = nullptr;
  mutable bool has_last_ = false;
};

}  // namespace attnjit::detail
