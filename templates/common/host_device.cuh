// ATTNJIT_HD marks the constexpr geometry of the *_params.cuh headers __host__ __device__ under a CUDA
// compiler (NVRTC or nvcc), so that the host planner and the kernel call the same function; the host C++
// compiler sees plain constexpr functions.
#pragma once

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define ATTNJIT_HD __host__ __device__
#else
#define ATTNJIT_HD
#endif
