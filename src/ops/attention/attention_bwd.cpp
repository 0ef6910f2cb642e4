#include "ops/attention/attention_bwd.hpp"

#include <fmt/format.h>

#include "ops/base/launch.hpp"

namespace attnjit::ops {

void encode_dq_acc_map(const char* op, unsigned long long (&map)[16], const float* dq_acc, int64_t D, int64_t rows) {
  static_assert(sizeof(CUtensorMap) == sizeof(map), "CUtensorMap is 128 bytes");
  const auto& drv = jit::CudaDriver::get();
  cuuint64_t dims[2] = {static_cast<cuuint64_t>(D), static_cast<cuuint64_t>(rows)};
  cuuint64_t strides[1] = {static_cast<cuuint64_t>(D * 4)};
  cuuint32_t box[2] = {32, 64};
  cuuint32_t elem[2] = {1, 1};
  drv.check(drv.cuTensorMapEncodeTiled(reinterpret_cast<CUtensorMap*>(map), CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2,
                                       const_cast<float*>(dq_acc), dims, strides, box, elem, CU_TENSOR_MAP_INTERLEAVE_NONE,
                                       CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                                       CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
            fmt::format("{}: cuTensorMapEncodeTiled (dq_acc)", op).c_str());
}

void launch_bwd_kernel(const char* op, const jit::LoadedKernel& k, unsigned gx, unsigned gy, unsigned gz,
                       unsigned threads, int smem, CUstream stream, void** args) {
  Launch lc;
  lc.grid_x = gx;
  lc.grid_y = gy;
  lc.grid_z = gz;
  lc.threads = threads;
  lc.smem_bytes = static_cast<unsigned>(smem);
  lc.stream = stream;
  launch_kernel(k.function, lc, args, fmt::format("{}: cuLaunchKernelEx({})", op, k.compiled->spec.name));
}

}  // namespace attnjit::ops
