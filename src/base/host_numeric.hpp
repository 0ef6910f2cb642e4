// Host-side conversions between fp32 and the 16- and 8-bit formats, bit-exact with the device
// (round-to-nearest-even; e4m3 saturating as SPEC.md §1.8 says). Used by CPU references and tests.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>

#include "attnjit/tensor.hpp"

namespace attnjit::numeric {

inline float bf16_to_float(uint16_t b) {
  uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

inline uint16_t float_to_bf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if (std::isnan(f)) return static_cast<uint16_t>((bits >> 16) | 0x40);  // quiet NaN, sign kept
  bits += 0x7FFF + ((bits >> 16) & 1);
  return static_cast<uint16_t>(bits >> 16);
}

inline float fp16_to_float(uint16_t h) {
#ifdef __FLT16_MANT_DIG__
  _Float16 v;
  std::memcpy(&v, &h, 2);
  return static_cast<float>(v);
#else
  // NOTE: compilers without _Float16 on this target (clang < 15 on x86-64, used by tests/fuzz): the
  // same conversion in integer arithmetic.
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  const uint32_t exp = (h >> 10) & 0x1F, man = h & 0x3FF;
  if (exp == 0) {
    const float v = std::ldexp(static_cast<float>(man), -24);
    return sign ? -v : v;
  }
  if (exp == 0x1F) {  // inf, or NaN (quietened, as the hardware conversion does)
    const uint32_t bits = sign | 0x7F800000u | (man << 13) | (man ? 0x00400000u : 0u);
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
  }
  const uint32_t bits = sign | ((exp + 112) << 23) | (man << 13);
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
#endif
}

inline uint16_t float_to_fp16(float f) {
#ifdef __FLT16_MANT_DIG__
  _Float16 v = static_cast<_Float16>(f);  // IEEE RNE (GCC's _Float16 on x86-64)
  uint16_t h;
  std::memcpy(&h, &v, 2);
  return h;
#else
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000);
  const uint32_t x = bits & 0x7FFFFFFF;
  if (x > 0x7F800000) return sign | 0x7E00 | ((x >> 13) & 0x3FF);  // NaN: quiet, payload truncated
  if (x >= 0x477FF000) return sign | 0x7C00;                       // >= 65520 rounds to inf
  if (x < 0x38800000) {                                            // below 2^-14: the 2^-24 grid
    const int m = static_cast<int>(std::nearbyint(std::fabs(f) * 16777216.0f));
    return static_cast<uint16_t>(sign | m);
  }
  uint32_t h = (((x >> 23) - 112) << 10) | ((x >> 13) & 0x3FF);
  const uint32_t rem = x & 0x1FFF;
  if (rem > 0x1000 || (rem == 0x1000 && (h & 1))) ++h;  // RNE; a carry into the exponent is right
  return static_cast<uint16_t>(sign | h);
#endif
}

inline float e4m3_to_float(uint8_t x) {
  const float sign = (x & 0x80) ? -1.0f : 1.0f;
  const int exp = (x >> 3) & 0xF;
  const int man = x & 0x7;
  if (exp == 0xF && man == 0x7) return std::numeric_limits<float>::quiet_NaN();
  if (exp == 0) return sign * std::ldexp(static_cast<float>(man), -9);
  return sign * std::ldexp(1.0f + man / 8.0f, exp - 7);
}

// Saturating RNE: NaN stays NaN (0x7F, whatever its sign: the hardware conversion, and the fp32
// division before it, give the canonical NaN), |x| > 448 and inf become +-448, magnitudes <= 2^-10
// become signed zero. Equals __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3) on the H200.
inline uint8_t float_to_e4m3(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, 4);
  const uint8_t sign = static_cast<uint8_t>((bits >> 24) & 0x80);
  if (std::isnan(x)) return 0x7F;
  const float a = std::fabs(x);
  if (a >= 448.0f) return sign | 0x7E;
  if (a < 0.015625f) {  // below 2^-6: subnormal grid of 2^-9 (a * 512 is exact)
    const int m = static_cast<int>(std::nearbyint(a * 512.0f));  // 8 lands on the smallest normal, 0x08
    return sign | static_cast<uint8_t>(m);
  }
  int e = 0;
  std::frexp(a, &e);  // a = f * 2^e, f in [0.5, 1)
  int E = e - 1;      // a = 1.m * 2^E, E in [-6, 8]
  int m = static_cast<int>(std::nearbyint((std::ldexp(a, -E) - 1.0f) * 8.0f));
  if (m == 8) {
    m = 0;
    ++E;
  }
  int code = ((E + 7) << 3) | m;
  if (code > 0x7E) code = 0x7E;
  return sign | static_cast<uint8_t>(code);
}

// Element `i` (flat storage index) of a buffer of dtype `dt`, as double.
inline double load_as_double(const void* base, DType dt, int64_t i) {
  switch (dt) {
    case DType::kF16: return fp16_to_float(static_cast<const uint16_t*>(base)[i]);
    case DType::kBF16: return bf16_to_float(static_cast<const uint16_t*>(base)[i]);
    case DType::kE4M3: return e4m3_to_float(static_cast<const uint8_t*>(base)[i]);
    case DType::kF32: return static_cast<const float*>(base)[i];
    case DType::kI32: return static_cast<const int32_t*>(base)[i];
    case DType::kI64: return static_cast<double>(static_cast<const int64_t*>(base)[i]);
  }
  return 0;
}

// Stores `v` rounded once (RNE; e4m3 saturating) into element `i` of a buffer of dtype `dt`.
inline void store_from_double(void* base, DType dt, int64_t i, double v) {
  switch (dt) {
    case DType::kF16: static_cast<uint16_t*>(base)[i] = float_to_fp16(static_cast<float>(v)); break;
    case DType::kBF16: static_cast<uint16_t*>(base)[i] = float_to_bf16(static_cast<float>(v)); break;
    case DType::kE4M3: static_cast<uint8_t*>(base)[i] = float_to_e4m3(static_cast<float>(v)); break;
    case DType::kF32: static_cast<float*>(base)[i] = static_cast<float>(v); break;
    case DType::kI32: static_cast<int32_t*>(base)[i] = static_cast<int32_t>(v); break;
    case DType::kI64: static_cast<int64_t*>(base)[i] = static_cast<int64_t>(v); break;
  }
}

}  // namespace attnjit::numeric
