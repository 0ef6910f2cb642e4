#include "jit/cuda_driver.hpp"

#include <dlfcn.h>
#include <fmt/format.h>

#include "attnjit/error.hpp"
#include "base/logging.hpp"

namespace attnjit::jit {

namespace {
// The version every entry point is requested at: the toolkit we build against (CUDA 12.0 API
// semantics for the PFN typedefs named in the header).
constexpr int kRequestVersion = 12000;
}  // namespace

const CudaDriver& CudaDriver::get() {
  static const CudaDriver instance;
  return instance;
}

CudaDriver::CudaDriver() {
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
  if (!lib) {
    reason_ = "libcuda.so.1 not found (no CUDA driver on this machine)";
    return;
  }
  using GetProc = CUresult (*)(const char*, void**, int, cuuint64_t, CUdriverProcAddressQueryResult*);
  auto get_proc = reinterpret_cast<GetProc>(dlsym(lib, "cuGetProcAddress_v2"));
  if (!get_proc) {
    reason_ = "libcuda.so.1 has no cuGetProcAddress_v2 (driver older than CUDA 12)";
    return;
  }
  bool ok = true;
  auto load = [&](const char* name, auto& fn, int version) {
    void* p = nullptr;
    CUdriverProcAddressQueryResult status{};
    if (get_proc(name, &p, version, CU_GET_PROC_ADDRESS_DEFAULT, &status) != CUDA_SUCCESS || !p) {
      if (ok) reason_ = fmt::format("driver entry point {} (version {}) not found", name, version);
      ok = false;
      return;
    }
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(p);
  };
#define ATTNJIT_LOAD(name, ver) load(#name, name, ver)
  ATTNJIT_LOAD(cuGetErrorName, 6000);
  ATTNJIT_LOAD(cuGetErrorString, 6000);
  ATTNJIT_LOAD(cuInit, 2000);
  ATTNJIT_LOAD(cuDriverGetVersion, 2020);
  ATTNJIT_LOAD(cuDeviceGet, 2000);
  ATTNJIT_LOAD(cuDeviceGetCount, 2000);
  ATTNJIT_LOAD(cuDeviceGetName, 2000);
  ATTNJIT_LOAD(cuDeviceGetAttribute, 2000);
  ATTNJIT_LOAD(cuDeviceTotalMem, 3020);
  ATTNJIT_LOAD(cuDevicePrimaryCtxRetain, 7000);
  ATTNJIT_LOAD(cuCtxSetCurrent, 4000);
  ATTNJIT_LOAD(cuCtxGetCurrent, 4000);
  ATTNJIT_LOAD(cuModuleLoadData, 2000);
  ATTNJIT_LOAD(cuModuleUnload, 2000);
  ATTNJIT_LOAD(cuModuleGetFunction, 2000);
  ATTNJIT_LOAD(cuFuncGetAttribute, 2020);
  ATTNJIT_LOAD(cuFuncSetAttribute, 9000);
  ATTNJIT_LOAD(cuLaunchKernelEx, 11060);
  ATTNJIT_LOAD(cuMemAlloc, 3020);
  ATTNJIT_LOAD(cuMemFree, 3020);
  ATTNJIT_LOAD(cuMemcpyHtoD, 3020);
  ATTNJIT_LOAD(cuMemcpyDtoH, 3020);
  ATTNJIT_LOAD(cuMemcpyDtoDAsync, 3020);
  ATTNJIT_LOAD(cuMemsetD8, 3020);
  ATTNJIT_LOAD(cuMemGetInfo, 3020);
  ATTNJIT_LOAD(cuStreamCreate, 2000);
  ATTNJIT_LOAD(cuStreamDestroy, 4000);
  ATTNJIT_LOAD(cuStreamSynchronize, 2000);
  ATTNJIT_LOAD(cuStreamIsCapturing, 10000);
  ATTNJIT_LOAD(cuEventCreate, 2000);
  ATTNJIT_LOAD(cuEventRecord, 2000);
  ATTNJIT_LOAD(cuEventSynchronize, 2000);
  ATTNJIT_LOAD(cuEventElapsedTime, 2000);
  ATTNJIT_LOAD(cuEventDestroy, 4000);
  ATTNJIT_LOAD(cuStreamWaitEvent, 3020);
  ATTNJIT_LOAD(cuMemsetD32Async, 3020);
  ATTNJIT_LOAD(cuTensorMapEncodeTiled, 12000);
#undef ATTNJIT_LOAD
  (void)kRequestVersion;
  if (!ok) return;
  CUresult r = cuInit(0);
  if (r != CUDA_SUCCESS) {
    const char* name = nullptr;
    cuGetErrorName(r, &name);
    reason_ = fmt::format("cuInit failed: {}", name ? name : "unknown error");
    return;
  }
  cuDriverGetVersion(&driver_version_);
  cuDeviceGetCount(&device_count_);
  available_ = true;
  logger().debug("CUDA driver {} loaded, {} device(s)", driver_version_, device_count_);
}

void CudaDriver::check(CUresult r, const char* what) const {
  if (r == CUDA_SUCCESS) return;
  const char* name = nullptr;
  const char* desc = nullptr;
  if (cuGetErrorName) cuGetErrorName(r, &name);
  if (cuGetErrorString) cuGetErrorString(r, &desc);
  throw CudaError(fmt::format("{}: {}: {}", what, name ? name : "CUDA_ERROR_UNKNOWN", desc ? desc : ""),
                  static_cast<int>(r));
}

void CudaDriver::require(const char* what) const {
  if (!available_) throw CudaError(fmt::format("{}: no CUDA driver: {}", what, reason_), 0);
}

CUcontext CudaDriver::bind_device(int index) const {
  require("bind device");
  struct Bound {
    int device = -1;
    CUcontext ctx = nullptr;
  };
  thread_local Bound bound;
  CUcontext current = nullptr;
  cuCtxGetCurrent(&current);
  if (bound.device == index && current == bound.ctx && current) return current;
  if (index < 0 || index >= device_count_)
    throw CudaError(fmt::format("device {} does not exist ({} device(s))", index, device_count_), 101);
  CUdevice dev{};
  check(cuDeviceGet(&dev, index), "cuDeviceGet");
  CUcontext ctx = nullptr;
  // NOTE: the primary context is retained once per thread binding and never released: it lives as
  // long as the process, shared with the CUDA runtime, PyTorch and every other library.
  check(cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain");
  check(cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
  bound = {index, ctx};
  return ctx;
}

std::string CudaDriver::device_arch(int index) const {
  require("device arch");
  CUdevice dev{};
  check(cuDeviceGet(&dev, index), "cuDeviceGet");
  int major = 0, minor = 0;
  check(cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev), "cuDeviceGetAttribute");
  check(cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev), "cuDeviceGetAttribute");
  std::string arch = fmt::format("sm_{}{}", major, minor);
  if (major == 9 && minor == 0) arch += "a";
  return arch;
}

}  // namespace attnjit::jit
