// Device numeric helpers: 16-byte vectors of 16-bit values, conversion to fp32 and saturating e4m3
// stores (SPEC.md §1.8: RNE, NaN kept, +-inf and |x| > 448 become +-448).
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

namespace attnjit::kernels {

template <typename T>
struct Float16Traits;
template <>
struct Float16Traits<__half> {
  static __device__ __forceinline__ float2 to_float2(unsigned int bits) {
    __half2 h = *reinterpret_cast<__half2*>(&bits);
    return __half22float2(h);
  }
};
template <>
struct Float16Traits<__nv_bfloat16> {
  static __device__ __forceinline__ float2 to_float2(unsigned int bits) {
    __nv_bfloat162 h = *reinterpret_cast<__nv_bfloat162*>(&bits);
    return __bfloat1622float2(h);
  }
};

// Two fp32 values to two saturating e4m3 bytes (low byte = x).
__device__ __forceinline__ unsigned short float2_to_e4m3x2(float2 v) {
  return static_cast<unsigned short>(__nv_cvt_float2_to_fp8x2(v, __NV_SATFINITE, __NV_E4M3));
}

// Eight 16-bit values (one uint4) divided by `scale` (IEEE division) to eight e4m3 bytes (one uint2).
template <typename T>
__device__ __forceinline__ uint2 to_e4m3x8(uint4 in, float scale) {
  const unsigned int w[4] = {in.x, in.y, in.z, in.w};
  unsigned short out[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    float2 f = Float16Traits<T>::to_float2(w[i]);
    f.x = __fdiv_rn(f.x, scale);
    f.y = __fdiv_rn(f.y, scale);
    out[i] = float2_to_e4m3x2(f);
  }
  return make_uint2(out[0] | (static_cast<unsigned int>(out[1]) << 16),
                    out[2] | (static_cast<unsigned int>(out[3]) << 16));
}

}  // namespace attnjit::kernels

namespace attnjit::kernels {

__device__ __forceinline__ float to_float(__half x) { return __half2float(x); }
__device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }

template <typename T>
__device__ __forceinline__ T from_float(float x);
template <>
__device__ __forceinline__ __half from_float<__half>(float x) { return __float2half_rn(x); }
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }

// Two e4m3 bytes (low byte first) to fp32 (exact).
__device__ __forceinline__ float2 e4m3x2_to_float2(unsigned short v) {
  __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(v), __NV_E4M3);
  return __half22float2(*reinterpret_cast<__half2*>(&h));
}

}  // namespace attnjit::kernels
