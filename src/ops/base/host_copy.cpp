#include "ops/base/host_copy.hpp"

#include <fmt/format.h>

#include <cstring>

#include "attnjit/error.hpp"
#include "jit/cuda_driver.hpp"

namespace attnjit::detail {

void prepare_content_checks(const char* op, Device device, void* stream) {
  if (device.kind != DeviceKind::kCUDA) return;
  const auto& drv = jit::CudaDriver::get();
  auto s = static_cast<CUstream>(stream);
  CUstreamCaptureStatus status{};
  drv.check(drv.cuStreamIsCapturing(s, &status), "cuStreamIsCapturing");
  if (status != CU_STREAM_CAPTURE_STATUS_NONE)
    throw Unsupported(fmt::format("{}: unsupported: validate_inputs reads device memory and cannot run under stream "
                                  "capture", op));
  drv.check(drv.cuStreamSynchronize(s), "validate_inputs: cuStreamSynchronize");
}

HostView host_view(const TensorRef& t) {
  int64_t span = t.numel() == 0 ? 0 : 1;
  for (int d = 0; d < t.ndim && span; ++d) span += (t.shape[d] - 1) * t.strides[d];
  HostView v;
  v.bytes.resize(static_cast<size_t>(span * dtype_size(t.dtype)));
  if (!v.bytes.empty()) {
    if (t.device.kind == DeviceKind::kCUDA) {
      const auto& drv = jit::CudaDriver::get();
      drv.check(drv.cuMemcpyDtoH(v.bytes.data(), reinterpret_cast<CUdeviceptr>(t.data), v.bytes.size()),
                "validate_inputs: cuMemcpyDtoH");
    } else {
      std::memcpy(v.bytes.data(), t.data, v.bytes.size());
    }
  }
  v.ref = t;
  v.ref.data = v.bytes.data();
  v.ref.device = {};
  return v;
}

}  // namespace attnjit::detail
