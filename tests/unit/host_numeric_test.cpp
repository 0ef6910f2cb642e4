// Host numerics (src/runtime/host_numeric.hpp): e4m3 (SPEC.md §1.8: saturating, RNE, subnormals),
// bf16 and fp16 round to nearest even.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>

#include "base/host_numeric.hpp"

namespace {

namespace num = attnjit::numeric;

float bits_to_float(uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

// Brute force SATFINITE e4m3 of a non-NaN value: the nearest finite code (ties to the even mantissa).
uint8_t e4m3_brute_force(float x) {
  const uint8_t sign = std::signbit(x) ? 0x80 : 0x00;
  const double a = std::fabs(static_cast<double>(x));
  if (a > 448.0) return sign | 0x7E;
  int best = 0;
  double best_err = std::numeric_limits<double>::infinity();
  for (int c = 0; c <= 0x7E; ++c) {
    const double err = std::fabs(a - num::e4m3_to_float(static_cast<uint8_t>(c)));
    if (err < best_err || (err == best_err && (c & 1) == 0)) {
      best = c;
      best_err = err;
    }
  }
  return sign | static_cast<uint8_t>(best);
}

}  // namespace

TEST_CASE("e4m3: decoding is exact, monotonic, and every code but NaN round-trips") {
  CHECK(num::e4m3_to_float(0x00) == 0.0f);
  CHECK(std::signbit(num::e4m3_to_float(0x80)));
  CHECK(num::e4m3_to_float(0x01) == std::ldexp(1.0f, -9));   // smallest subnormal
  CHECK(num::e4m3_to_float(0x07) == 7 * std::ldexp(1.0f, -9));
  CHECK(num::e4m3_to_float(0x08) == std::ldexp(1.0f, -6));   // smallest normal
  CHECK(num::e4m3_to_float(0x38) == 1.0f);
  CHECK(num::e4m3_to_float(0x3A) == 1.25f);
  CHECK(num::e4m3_to_float(0x7E) == 448.0f);                  // largest finite
  CHECK(num::e4m3_to_float(0xFE) == -448.0f);
  CHECK(std::isnan(num::e4m3_to_float(0x7F)));
  CHECK(std::isnan(num::e4m3_to_float(0xFF)));
  int round_trips = 0;
  for (int c = 0; c < 256; ++c) {
    const uint8_t code = static_cast<uint8_t>(c);
    if ((code & 0x7F) == 0x7F) continue;
    CAPTURE(c);
    const float f = num::e4m3_to_float(code);
    CHECK(num::float_to_e4m3(f) == code);
    CHECK(num::e4m3_to_float(static_cast<uint8_t>(code ^ 0x80)) == -f);
    ++round_trips;
  }
  CHECK(round_trips == 254);
  // The NaN codes decode to NaN and encode back to a NaN code (CUDA's decoder, like this one, drops
  // the NaN's sign; the encoder keeps the sign of the float it is given).
  CHECK(num::float_to_e4m3(num::e4m3_to_float(0x7F)) == 0x7F);
  CHECK((num::float_to_e4m3(num::e4m3_to_float(0xFF)) & 0x7F) == 0x7F);
  for (int c = 1; c <= 0x7E; ++c)
    CHECK(num::e4m3_to_float(static_cast<uint8_t>(c)) > num::e4m3_to_float(static_cast<uint8_t>(c - 1)));
}

TEST_CASE("e4m3: NaN stays NaN; infinities and large values saturate to +-448") {
  const float qnan = std::numeric_limits<float>::quiet_NaN();
  CHECK(num::float_to_e4m3(qnan) == 0x7F);
  // NOTE: a negative NaN stays a NaN code; whether it keeps its sign is left to the header's contract
  // (today 0x7F, matching the H200's conversion after an fp32 division).
  CHECK((num::float_to_e4m3(std::copysign(qnan, -1.0f)) & 0x7F) == 0x7F);
  CHECK(num::float_to_e4m3(bits_to_float(0x7F800001u)) == 0x7F);  // a signalling NaN too
  CHECK(num::float_to_e4m3(std::numeric_limits<float>::infinity()) == 0x7E);
  CHECK(num::float_to_e4m3(-std::numeric_limits<float>::infinity()) == 0xFE);
  CHECK(num::float_to_e4m3(448.0f) == 0x7E);
  CHECK(num::float_to_e4m3(449.0f) == 0x7E);
  CHECK(num::float_to_e4m3(-449.0f) == 0xFE);
  CHECK(num::float_to_e4m3(464.0f) == 0x7E);  // would round up to 480 without saturation
  CHECK(num::float_to_e4m3(500.0f) == 0x7E);
  CHECK(num::float_to_e4m3(1e9f) == 0x7E);
  CHECK(num::float_to_e4m3(-1e9f) == 0xFE);
  CHECK(num::float_to_e4m3(std::numeric_limits<float>::max()) == 0x7E);
  // 432 is halfway between 416 (0x7D, odd) and 448 (0x7E, even).
  CHECK(num::float_to_e4m3(432.0f) == 0x7E);
  CHECK(num::float_to_e4m3(431.0f) == 0x7D);
}

TEST_CASE("e4m3: round to nearest, ties to even, in the normal range") {
  CHECK(num::float_to_e4m3(1.0f) == 0x38);
  CHECK(num::float_to_e4m3(1.0625f) == 0x38);   // halfway 1.0 (m=0) / 1.125 (m=1): even is 1.0
  CHECK(num::float_to_e4m3(1.0626f) == 0x39);   // just above the tie
  CHECK(num::float_to_e4m3(1.0624f) == 0x38);
  CHECK(num::float_to_e4m3(1.1875f) == 0x3A);   // halfway 1.125 (m=1) / 1.25 (m=2): even is 1.25
  CHECK(num::float_to_e4m3(1.3125f) == 0x3A);   // halfway 1.25 (m=2) / 1.375 (m=3): even is 1.25
  CHECK(num::float_to_e4m3(1.9375f) == 0x40);   // halfway 1.875 (m=7) / 2.0: carries into the exponent
  CHECK(num::float_to_e4m3(-1.0625f) == 0xB8);
  CHECK(num::float_to_e4m3(-1.1875f) == 0xBA);
  CHECK(num::float_to_e4m3(3.0f) == 0x44);
  CHECK(num::float_to_e4m3(0.015625f) == 0x08);  // 2^-6
  CHECK(num::float_to_e4m3(240.0f) == 0x77);
  CHECK(num::float_to_e4m3(248.0f) == 0x78);     // halfway 240 (0x77) / 256 (0x78): even is 256
}

TEST_CASE("e4m3: subnormals round on the 2^-9 grid, ties to even, small values to signed zero") {
  const float s = std::ldexp(1.0f, -9);
  CHECK(num::float_to_e4m3(s) == 0x01);
  CHECK(num::float_to_e4m3(std::ldexp(1.0f, -10)) == 0x00);  // halfway 0 / 2^-9: even is 0
  CHECK(num::float_to_e4m3(-std::ldexp(1.0f, -10)) == 0x80);
  CHECK(num::float_to_e4m3(1.5f * std::ldexp(1.0f, -10)) == 0x01);
  CHECK(num::float_to_e4m3(std::ldexp(1.0f, -11)) == 0x00);
  CHECK(num::float_to_e4m3(-std::ldexp(1.0f, -11)) == 0x80);
  CHECK(num::float_to_e4m3(1.5f * s) == 0x02);   // halfway 1 / 2: even is 2
  CHECK(num::float_to_e4m3(2.5f * s) == 0x02);   // halfway 2 / 3: even is 2
  CHECK(num::float_to_e4m3(3.5f * s) == 0x04);
  CHECK(num::float_to_e4m3(7.5f * s) == 0x08);   // halfway 7 / 8: lands on the smallest normal
  CHECK(num::float_to_e4m3(-7.5f * s) == 0x88);
  CHECK(num::float_to_e4m3(std::numeric_limits<float>::denorm_min()) == 0x00);
  CHECK(num::float_to_e4m3(-0.0f) == 0x80);
  CHECK(num::float_to_e4m3(0.0f) == 0x00);
}

TEST_CASE("e4m3: agrees with a brute-force nearest-even search at every midpoint and on random values") {
  int checked = 0;
  for (int c = 0; c < 0x7E; ++c) {
    const float lo = num::e4m3_to_float(static_cast<uint8_t>(c)), hi = num::e4m3_to_float(static_cast<uint8_t>(c + 1));
    const float mid = (lo + hi) / 2;  // exact in fp32
    for (float x : {lo, mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e9f), hi}) {
      for (float v : {x, -x}) {
        CAPTURE(v);
        CHECK(num::float_to_e4m3(v) == e4m3_brute_force(v));
        ++checked;
      }
    }
  }
  std::mt19937 rng(1234);
  std::uniform_real_distribution<float> expo(-14.0f, 10.0f);
  for (int i = 0; i < 20000; ++i) {
    const float v = std::exp2(expo(rng)) * ((rng() & 1) ? 1.0f : -1.0f);
    const uint8_t got = num::float_to_e4m3(v), want = e4m3_brute_force(v);
    if (got != want) {
      CAPTURE(v);
      CHECK(got == want);
    }
    ++checked;
  }
  CHECK(checked == 0x7E * 10 + 20000);
}

TEST_CASE("bf16: round to nearest even, NaN quiet with sign, exhaustive round trip") {
  CHECK(num::float_to_bf16(1.0f) == 0x3F80);
  CHECK(num::float_to_bf16(1.0f + std::ldexp(1.0f, -8)) == 0x3F80);        // tie: even (0x3F80)
  CHECK(num::float_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8)) == 0x3F82);    // tie: even (0x3F82)
  CHECK(num::float_to_bf16(1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -20)) == 0x3F81);  // above the tie
  CHECK(num::float_to_bf16(1.0f + std::ldexp(1.0f, -9)) == 0x3F80);        // below the tie
  CHECK(num::float_to_bf16(-2.0f) == 0xC000);
  CHECK(num::float_to_bf16(std::numeric_limits<float>::infinity()) == 0x7F80);
  CHECK(num::float_to_bf16(-std::numeric_limits<float>::infinity()) == 0xFF80);
  CHECK(num::float_to_bf16(std::numeric_limits<float>::max()) == 0x7F80);  // rounds up to inf
  const uint16_t qn = num::float_to_bf16(std::numeric_limits<float>::quiet_NaN());
  CHECK((qn & 0x7F80) == 0x7F80);
  CHECK((qn & 0x007F) != 0);
  CHECK((qn & 0x8000) == 0);
  // A NaN whose payload sits only in the low bits must not become infinity.
  const uint16_t low_nan = num::float_to_bf16(bits_to_float(0xFF800001u));
  CHECK(std::isnan(num::bf16_to_float(low_nan)));
  CHECK((low_nan & 0x8000) != 0);
  int round_trips = 0;
  for (uint32_t b = 0; b < 0x10000; ++b) {
    const float f = num::bf16_to_float(static_cast<uint16_t>(b));
    if (std::isnan(f)) continue;
    if (num::float_to_bf16(f) != b) {
      CAPTURE(b);
      CHECK(num::float_to_bf16(f) == b);
    }
    ++round_trips;
  }
  CHECK(round_trips == 65536 - 2 * 127);  // all but the NaN codes
}

TEST_CASE("fp16: round to nearest even and exhaustive round trip") {
  CHECK(num::float_to_fp16(1.0f) == 0x3C00);
  CHECK(num::float_to_fp16(1.0f + std::ldexp(1.0f, -11)) == 0x3C00);      // tie: even
  CHECK(num::float_to_fp16(1.0f + 3 * std::ldexp(1.0f, -11)) == 0x3C02);  // tie: even
  CHECK(num::float_to_fp16(65504.0f) == 0x7BFF);
  CHECK(num::float_to_fp16(65520.0f) == 0x7C00);                          // tie to even overflows to inf
  CHECK(num::float_to_fp16(65519.0f) == 0x7BFF);
  CHECK(num::float_to_fp16(std::ldexp(1.0f, -24)) == 0x0001);             // smallest subnormal
  CHECK(num::float_to_fp16(std::ldexp(1.0f, -25)) == 0x0000);             // tie: even (zero)
  CHECK(num::float_to_fp16(-0.0f) == 0x8000);
  CHECK(num::fp16_to_float(0xC000) == -2.0f);
  CHECK(std::isnan(num::fp16_to_float(0x7E00)));
  int round_trips = 0;
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = num::fp16_to_float(static_cast<uint16_t>(h));
    if (std::isnan(f)) continue;
    if (num::float_to_fp16(f) != h) {
      CAPTURE(h);
      CHECK(num::float_to_fp16(f) == h);
    }
    ++round_trips;
  }
  CHECK(round_trips == 65536 - 2 * 1023);
}

TEST_CASE("host numerics: load_as_double / store_from_double round once per dtype") {
  uint16_t h[1], b[1];
  uint8_t e[1];
  float f[1];
  int32_t i32[1];
  int64_t i64[1];
  num::store_from_double(h, attnjit::DType::kF16, 0, 1.0 + std::ldexp(1.0, -11));
  CHECK(h[0] == 0x3C00);
  num::store_from_double(b, attnjit::DType::kBF16, 0, 3.0);
  CHECK(b[0] == 0x4040);
  num::store_from_double(e, attnjit::DType::kE4M3, 0, 1000.0);
  CHECK(e[0] == 0x7E);
  num::store_from_double(f, attnjit::DType::kF32, 0, 0.5);
  CHECK(f[0] == 0.5f);
  num::store_from_double(i32, attnjit::DType::kI32, 0, -7.0);
  CHECK(i32[0] == -7);
  num::store_from_double(i64, attnjit::DType::kI64, 0, 1e12);
  CHECK(i64[0] == 1000000000000LL);
  CHECK(num::load_as_double(h, attnjit::DType::kF16, 0) == 1.0);
  CHECK(num::load_as_double(b, attnjit::DType::kBF16, 0) == 3.0);
  CHECK(num::load_as_double(e, attnjit::DType::kE4M3, 0) == 448.0);
  CHECK(num::load_as_double(f, attnjit::DType::kF32, 0) == 0.5);
  CHECK(num::load_as_double(i32, attnjit::DType::kI32, 0) == -7.0);
  CHECK(num::load_as_double(i64, attnjit::DType::kI64, 0) == 1e12);
}
