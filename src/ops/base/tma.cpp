#include "ops/base/tma.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>

#include "jit/cuda_driver.hpp"

namespace attnjit::ops {

std::string tma_gap(const char* name, const void* data, std::initializer_list<std::pair<int64_t, int64_t>> dims) {
  if (reinterpret_cast<uintptr_t>(data) % 16 != 0)
    return fmt::format("{}: expected a 16-byte aligned base address for TMA", name);
  int a = 0;
  for (auto [extent, st] : dims) {
    // An axis of extent 0 or 1 is never stepped along: any stride does.
    if (extent > 1 && (st <= 0 || (st * 2) % 16 != 0))
      return fmt::format("{}: expected dim {} stride to be a positive multiple of 16 bytes for TMA, got {} elements", name,
                         a, st);
    ++a;
  }
  return "";
}

void encode_tma_rows(const char* op, const char* name, unsigned long long (&map)[16], DType dtype, const void* data,
                     int64_t D, int64_t heads, int64_t rows, int64_t batch, int64_t s_head, int64_t s_row,
                     int64_t s_batch, int box_rows, int box_heads) {
  static_assert(sizeof(CUtensorMap) == sizeof(map), "CUtensorMap is 128 bytes");
  const auto& drv = jit::CudaDriver::get();
  const CUtensorMapDataType dt = dtype == DType::kBF16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
  cuuint64_t dims[4] = {static_cast<cuuint64_t>(D), static_cast<cuuint64_t>(std::max<int64_t>(1, heads)),
                        static_cast<cuuint64_t>(std::max<int64_t>(1, rows)), static_cast<cuuint64_t>(std::max<int64_t>(1, batch))};
  // Axes of extent <= 1 (the only ones tma_gap lets have a zero stride) get any valid stride.
  auto stride = [&](int64_t s) { return static_cast<cuuint64_t>(s > 0 ? s * 2 : D * 2); };
  cuuint64_t strides[3] = {stride(s_head), stride(s_row), stride(s_batch)};
  cuuint32_t box[4] = {64, static_cast<cuuint32_t>(box_heads), static_cast<cuuint32_t>(box_rows), 1};
  cuuint32_t elem[4] = {1, 1, 1, 1};
  drv.check(drv.cuTensorMapEncodeTiled(reinterpret_cast<CUtensorMap*>(map), dt, 4, const_cast<void*>(data), dims, strides,
                                       box, elem, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                       CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
            fmt::format("{}: cuTensorMapEncodeTiled ({})", op, name).c_str());
}

}  // namespace attnjit::ops
