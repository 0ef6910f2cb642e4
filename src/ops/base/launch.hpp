// Launching a JIT kernel: one parameter struct by value, a grid, a block of `threads` threads, dynamic
// shared memory, and optionally as a programmatic dependent of the kernel launched before it on the stream.
#pragma once
#include <string>

#include "jit/cuda_driver.hpp"

namespace attnjit::ops {

struct Launch {
  unsigned grid_x = 1, grid_y = 1, grid_z = 1;
  unsigned threads = 0;
  unsigned smem_bytes = 0;
  void* stream = nullptr;  // a CUstream
  bool dependent = false;  // CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION (sm_90+)
};

// cuLaunchKernelEx of `fn` with the kernel argument array `args` (one pointer per kernel parameter);
// `what` names the launch in a driver error.
inline void launch_kernel(CUfunction fn, const Launch& l, void** args, const char* what) {
  CUlaunchConfig lc{};
  lc.gridDimX = l.grid_x;
  lc.gridDimY = l.grid_y;
  lc.gridDimZ = l.grid_z;
  lc.blockDimX = l.threads;
  lc.blockDimY = lc.blockDimZ = 1;
  lc.sharedMemBytes = l.smem_bytes;
  lc.hStream = static_cast<CUstream>(l.stream);
  CUlaunchAttribute attr{};
  if (l.dependent) {
    attr.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    attr.value.programmaticStreamSerializationAllowed = 1;
    lc.attrs = &attr;
    lc.numAttrs = 1;
  }
  const auto& drv = jit::CudaDriver::get();
  drv.check(drv.cuLaunchKernelEx(&lc, fn, args, nullptr), what);
}
inline void launch_kernel(CUfunction fn, const Launch& l, void** args, const std::string& what) {
  launch_kernel(fn, l, args, what.c_str());
}

}  // namespace attnjit::ops
