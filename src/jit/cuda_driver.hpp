// The CUDA driver, loaded at run time: dlopen("libcuda.so.1"), then cuGetProcAddress for every entry
// point with the PFN_<name>_v<version> typedef of the version requested (GPU.md: in CUDA 13 some
// default versions changed signature). No driver is a normal condition: available() is false and
// compile-only work still runs.
#pragma once
#include <cuda.h>
#include <cudaTypedefs.h>

#include <string>

namespace attnjit::jit {

class CudaDriver {
 public:
  // The process-wide driver, loaded and cuInit'ed on first use.
  static const CudaDriver& get();

  bool available() const { return available_; }
  // Why the driver is absent ("libcuda.so.1 not found", "cuInit: CUDA_ERROR_NO_DEVICE", ...).
  const std::string& unavailable_reason() const { return reason_; }
  int driver_version() const { return driver_version_; }
  int device_count() const { return device_count_; }

  // Throws CudaError("<what>: <CUDA_ERROR_NAME>: <description>") when r != CUDA_SUCCESS.
  void check(CUresult r, const char* what) const;
  // Throws CudaError when no driver is loaded, naming what needed it.
  void require(const char* what) const;

  // Makes device `index`'s primary context current on this thread (cached per thread) and returns it.
  CUcontext bind_device(int index) const;
  // "sm_90a" for a 9.0 device (Hopper's arch-specific target), "sm_XY" otherwise.
  std::string device_arch(int index) const;

  PFN_cuGetErrorName_v6000 cuGetErrorName = nullptr;
  PFN_cuGetErrorString_v6000 cuGetErrorString = nullptr;
  PFN_cuInit_v2000 cuInit = nullptr;
  PFN_cuDriverGetVersion_v2020 cuDriverGetVersion = nullptr;
  PFN_cuDeviceGet_v2000 cuDeviceGet = nullptr;
  PFN_cuDeviceGetCount_v2000 cuDeviceGetCount = nullptr;
  PFN_cuDeviceGetName_v2000 cuDeviceGetName = nullptr;
  PFN_cuDeviceGetAttribute_v2000 cuDeviceGetAttribute = nullptr;
  PFN_cuDeviceTotalMem_v3020 cuDeviceTotalMem = nullptr;
  PFN_cuDevicePrimaryCtxRetain_v7000 cuDevicePrimaryCtxRetain = nullptr;
  PFN_cuCtxSetCurrent_v4000 cuCtxSetCurrent = nullptr;
  PFN_cuCtxGetCurrent_v4000 cuCtxGetCurrent = nullptr;
  PFN_cuModuleLoadData_v2000 cuModuleLoadData = nullptr;
  PFN_cuModuleUnload_v2000 cuModuleUnload = nullptr;
  PFN_cuModuleGetFunction_v2000 cuModuleGetFunction = nullptr;
  PFN_cuFuncGetAttribute_v2020 cuFuncGetAttribute = nullptr;
  PFN_cuFuncSetAttribute_v9000 cuFuncSetAttribute = nullptr;
  PFN_cuLaunchKernelEx_v11060 cuLaunchKernelEx = nullptr;
  PFN_cuMemAlloc_v3020 cuMemAlloc = nullptr;
  PFN_cuMemFree_v3020 cuMemFree = nullptr;
  PFN_cuMemcpyHtoD_v3020 cuMemcpyHtoD = nullptr;
  PFN_cuMemcpyDtoH_v3020 cuMemcpyDtoH = nullptr;
  PFN_cuMemcpyDtoDAsync_v3020 cuMemcpyDtoDAsync = nullptr;
  PFN_cuMemsetD8_v3020 cuMemsetD8 = nullptr;
  PFN_cuMemGetInfo_v3020 cuMemGetInfo = nullptr;
  PFN_cuStreamCreate_v2000 cuStreamCreate = nullptr;
  PFN_cuStreamDestroy_v4000 cuStreamDestroy = nullptr;
  PFN_cuStreamSynchronize_v2000 cuStreamSynchronize = nullptr;
  PFN_cuStreamIsCapturing_v10000 cuStreamIsCapturing = nullptr;
  PFN_cuEventCreate_v2000 cuEventCreate = nullptr;
  PFN_cuEventRecord_v2000 cuEventRecord = nullptr;
  PFN_cuEventSynchronize_v2000 cuEventSynchronize = nullptr;
  PFN_cuEventElapsedTime_v2000 cuEventElapsedTime = nullptr;
  PFN_cuEventDestroy_v4000 cuEventDestroy = nullptr;
  PFN_cuStreamWaitEvent_v3020 cuStreamWaitEvent = nullptr;
  PFN_cuMemsetD32Async_v3020 cuMemsetD32Async = nullptr;
  PFN_cuTensorMapEncodeTiled_v12000 cuTensorMapEncodeTiled = nullptr;

 private:
  CudaDriver();
  bool available_ = false;
  std::string reason_;
  int driver_version_ = 0;
  int device_count_ = 0;
};

}  // namespace attnjit::jit
