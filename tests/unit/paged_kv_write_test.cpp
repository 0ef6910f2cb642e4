// paged_kv_write (SPEC.md §2.19) through the public C++ API: the reference writes exactly the rows
// the slots name; every rejection names its category and argument and writes nothing; the kernel
// path reaches the driver (absent here) and the backend rules hold.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "attnjit/runtime.hpp"
#include "jit/cuda_driver.hpp"
#include "base/host_numeric.hpp"
#include "runtime/runtime_impl.hpp"
#include "test_util.hpp"

namespace {

namespace test = attnjit::test;
using attnjit::Device;
using attnjit::DeviceKind;
using attnjit::DType;
using attnjit::TensorArgs;
using attnjit::TensorRef;

constexpr Device kHost{DeviceKind::kCPU, 0};
constexpr Device kGpu{DeviceKind::kCUDA, 0};
constexpr uint8_t kPoison = 0xAB;

using test::options_in;  // NOTE: not from_env: the tests pin every option

// Host buffers of one paged_kv_write call, pools poisoned.
struct Call {
  int64_t N, H, D, NP, PS;
  DType dtype, cache_dtype;
  std::vector<uint16_t> k, v;
  std::vector<uint8_t> k_pages, v_pages;
  std::vector<int64_t> slots;
  float k_scale = 1.0f, v_scale = 1.0f;

  Call(int64_t n, int64_t h, int64_t d, int64_t np, int64_t ps, DType dt, DType cache, std::vector<int64_t> s)
      : N(n), H(h), D(d), NP(np), PS(ps), dtype(dt), cache_dtype(cache), slots(std::move(s)) {
    k.resize(static_cast<size_t>(N * H * D));
    v.resize(k.size());
    for (size_t i = 0; i < k.size(); ++i) {
      k[i] = static_cast<uint16_t>(0x3C00 + i);  // distinct bit patterns per element
      v[i] = static_cast<uint16_t>(0x5000 + 3 * i);
    }
    const size_t pool = static_cast<size_t>(NP * PS * H * D * attnjit::dtype_size(cache));
    k_pages.assign(pool, kPoison);
    v_pages.assign(pool, kPoison);
  }

  bool fp8() const { return cache_dtype == DType::kE4M3; }

  TensorArgs args() {
    TensorArgs a;
    a.set("k", TensorRef::contiguous(k.data(), dtype, {N, H, D}, kHost));
    a.set("v", TensorRef::contiguous(v.data(), dtype, {N, H, D}, kHost));
    a.set("k_pages", TensorRef::contiguous(k_pages.data(), cache_dtype, {NP, PS, H, D}, kHost));
    a.set("v_pages", TensorRef::contiguous(v_pages.data(), cache_dtype, {NP, PS, H, D}, kHost));
    a.set("slot_mapping", TensorRef::contiguous(slots.data(), DType::kI64, {N}, kHost));
    if (fp8()) {
      a.set("k_scale", TensorRef::contiguous(&k_scale, DType::kF32, {1}, kHost));
      a.set("v_scale", TensorRef::contiguous(&v_scale, DType::kF32, {1}, kHost));
    }
    return a;
  }
};

std::string run_error(const attnjit::Op& op, const TensorArgs& args) {
  try {
    op.run(args);
  } catch (const attnjit::InvalidArgument& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("unexpected exception type: ") + e.what();
  }
  return "(no error)";
}

// The call is rejected with "paged_kv_write: <category>: <arg>:" and the pools keep every byte.
void expect_rejected(const attnjit::Op& op, const TensorArgs& args, Call& call, const std::string& category,
                     const std::string& arg) {
  const auto kp = call.k_pages, vp = call.v_pages;
  const std::string m = run_error(op, args);
  const std::string prefix = "paged_kv_write: " + category + ": " + arg + ":";
  INFO("message: " << m);
  CHECK(test::starts_with(m, prefix));
  CHECK(test::contains(m, "expected"));
  CHECK(call.k_pages == kp);
  CHECK(call.v_pages == vp);
}

std::string op_error(attnjit::Runtime& rt, const nlohmann::json& config) {
  try {
    rt.op("paged_kv_write", attnjit::Config::parse(config.dump()));
  } catch (const attnjit::InvalidArgument& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("paged_kv_write reference: a 16-bit cache receives exactly the slotted rows, bitwise") {
  test::TempDir dir("pkw");
  attnjit::Runtime rt(options_in(dir));
  // N=3, H=2, D=16, NP=2, PS=4; token 0 -> slot 5 (page 1, offset 1), token 1 skipped, token 2 -> slot 0.
  Call c(3, 2, 16, 2, 4, DType::kF16, DType::kF16, {5, -1, 0});
  auto op = rt.op("paged_kv_write", {{"impl", "reference"}});
  CHECK(op.name() == "paged_kv_write");
  const auto plan = op.plan(c.args());
  CHECK(plan.valid());
  CHECK(test::contains(plan.describe(), "reference"));
  CHECK(plan.workspace_bytes() == 0);
  op.run(c.args());

  // Expected pools, by hand: poison everywhere, then row (page 1, off 1) = token 0, row (0, 0) = token 2.
  std::vector<uint8_t> ek(c.k_pages.size(), kPoison), ev(c.v_pages.size(), kPoison);
  const int64_t row = c.H * c.D;  // elements per (page, offset) row
  auto put = [&](std::vector<uint8_t>& pool, const std::vector<uint16_t>& src, int64_t n, int64_t page, int64_t off) {
    std::memcpy(pool.data() + (page * c.PS + off) * row * 2, src.data() + n * row, static_cast<size_t>(row * 2));
  };
  put(ek, c.k, 0, 1, 1);
  put(ev, c.v, 0, 1, 1);
  put(ek, c.k, 2, 0, 0);
  put(ev, c.v, 2, 0, 0);
  CHECK(c.k_pages == ek);
  CHECK(c.v_pages == ev);
  // Spot checks of single elements: k[0][1][3] went to k_pages[1][1][1][3].
  uint16_t got;
  std::memcpy(&got, c.k_pages.data() + (((1 * 4 + 1) * 2 + 1) * 16 + 3) * 2, 2);
  CHECK(got == c.k[(0 * 2 + 1) * 16 + 3]);
  std::memcpy(&got, c.v_pages.data() + (((0 * 4 + 0) * 2 + 0) * 16 + 15) * 2, 2);
  CHECK(got == c.v[(2 * 2 + 0) * 16 + 15]);
  // Token 1's rows appear nowhere; exactly two rows per pool were written.
  int token1_words = 0;
  for (size_t i = 0; i + 1 < c.k_pages.size(); i += 2) {
    uint16_t w;
    std::memcpy(&w, c.k_pages.data() + i, 2);
    token1_words += w == c.k[static_cast<size_t>(1 * row)];
  }
  CHECK(token1_words == 0);
  CHECK(std::count(c.k_pages.begin(), c.k_pages.end(), kPoison) ==
        static_cast<long>(c.k_pages.size() - 2 * row * 2));

  // bf16 into a bf16 cache, with a strided slot_mapping and a padded k: also a bitwise copy.
  Call b(2, 1, 32, 1, 2, DType::kBF16, DType::kBF16, {1, 99, 0, 99});
  auto args = b.args();
  TensorRef sm = TensorRef::contiguous(b.slots.data(), DType::kI64, {2}, kHost);
  sm.strides[0] = 2;  // slots 1 and 0; the 99s are never read
  args.set("slot_mapping", sm);
  std::vector<uint16_t> padded(2 * 48);
  for (size_t i = 0; i < padded.size(); ++i) padded[i] = static_cast<uint16_t>(0x4100 + i);
  TensorRef kt = TensorRef::contiguous(padded.data(), DType::kBF16, {2, 1, 32}, kHost);
  kt.strides[0] = 48;
  args.set("k", kt);
  rt.op("paged_kv_write", {{"impl", "reference"}}).run(args);
  CHECK(std::memcmp(b.k_pages.data() + 1 * 32 * 2, padded.data(), 64) == 0);       // token 0 -> slot 1
  CHECK(std::memcmp(b.k_pages.data(), padded.data() + 48, 64) == 0);               // token 1 -> slot 0
  CHECK(std::memcmp(b.v_pages.data() + 1 * 32 * 2, b.v.data(), 64) == 0);
  CHECK(std::memcmp(b.v_pages.data(), b.v.data() + 32, 64) == 0);
}

TEST_CASE("paged_kv_write reference: an e4m3 cache stores saturating e4m3(x / scale)") {
  test::TempDir dir("pkw8");
  attnjit::Runtime rt(options_in(dir));
  // bf16 inputs and their e4m3 codes after dividing by k_scale = 0.5, computed by hand.
  const uint16_t in[16] = {0x3F80, 0xBF80, 0x4396, 0x7F80, 0xFF80, 0x7FC0, 0x0000, 0x8000,
                           0x3F88, 0x3F98, 0x43E0, 0x4350, 0x3B00, 0x3A80, 0x3A00, 0x4000};
  const uint8_t want_k[16] = {
      0x40,  // 1.0 / 0.5 = 2
      0xC0,  // -2
      0x7E,  // 300 / 0.5 = 600: saturates to 448
      0x7E,  // +inf: saturates
      0xFE,  // -inf: saturates
      0x7F,  // NaN stays NaN
      0x00,  // +0
      0x80,  // -0
      0x40,  // 1.0625 / 0.5 = 2.125: tie 2 / 2.25, even is 2
      0x42,  // 1.1875 / 0.5 = 2.375: tie 2.25 / 2.5, even is 2.5
      0x7E,  // 448 / 0.5 = 896: saturates
      0x7D,  // 208 / 0.5 = 416
      0x02,  // 2^-9 / 0.5 = 2^-8: subnormal 2 * 2^-9
      0x01,  // 2^-10 / 0.5 = 2^-9
      0x00,  // 2^-11 / 0.5 = 2^-10: tie 0 / 2^-9, even is 0
      0x48,  // 2 / 0.5 = 4
  };
  Call c(3, 1, 16, 1, 4, DType::kBF16, DType::kE4M3, {2, -1, 0});
  for (int d = 0; d < 16; ++d) {
    c.k[d] = in[d];
    c.v[d] = in[d];
    c.k[32 + d] = in[15 - d];
    c.v[32 + d] = in[15 - d];
  }
  c.k_scale = 0.5f;
  c.v_scale = 2.0f;
  rt.op("paged_kv_write", {{"impl", "reference"}}).run(c.args());
  for (int d = 0; d < 16; ++d) {
    CAPTURE(d);
    CHECK(c.k_pages[2 * 16 + d] == want_k[d]);        // token 0 -> slot 2
    CHECK(c.k_pages[0 * 16 + d] == want_k[15 - d]);   // token 2 -> slot 0
    const uint8_t want_v = attnjit::numeric::float_to_e4m3(attnjit::numeric::bf16_to_float(in[d]) / 2.0f);
    CHECK(c.v_pages[2 * 16 + d] == want_v);
  }
  // v_scale = 2, by hand: 300 / 2 = 150 lies between 144 (0x71) and 160 (0x72), nearer 144.
  CHECK(c.v_pages[2 * 16 + 2] == 0x71);
  CHECK(c.v_pages[2 * 16 + 0] == 0x30);  // 1 / 2 = 0.5
  for (int d = 0; d < 16; ++d) {
    CHECK(c.k_pages[1 * 16 + d] == kPoison);  // slot 1 and 3 untouched
    CHECK(c.k_pages[3 * 16 + d] == kPoison);
    CHECK(c.v_pages[1 * 16 + d] == kPoison);
    CHECK(c.v_pages[3 * 16 + d] == kPoison);
  }
}

TEST_CASE("paged_kv_write reference: N = 0 and all-skipped calls write nothing") {
  test::TempDir dir("pkw0");
  attnjit::Runtime rt(options_in(dir));
  auto op = rt.op("paged_kv_write", {{"impl", "reference"}});
  Call empty(0, 2, 16, 2, 4, DType::kF16, DType::kF16, {});
  CHECK_NOTHROW(op.run(empty.args()));
  CHECK(empty.k_pages == std::vector<uint8_t>(empty.k_pages.size(), kPoison));
  Call skipped(2, 2, 16, 2, 4, DType::kF16, DType::kF16, {-1, -7});  // any negative slot is a skip
  CHECK_NOTHROW(op.run(skipped.args()));
  CHECK(skipped.k_pages == std::vector<uint8_t>(skipped.k_pages.size(), kPoison));
  CHECK(skipped.v_pages == std::vector<uint8_t>(skipped.v_pages.size(), kPoison));
}

TEST_CASE("paged_kv_write: every rejected call names category and argument and writes nothing") {
  test::TempDir dir("pkwrej");
  attnjit::Runtime rt(options_in(dir));
  const auto op = rt.op("paged_kv_write", {{"impl", "reference"}});
  Call c(3, 2, 16, 2, 4, DType::kF16, DType::kF16, {5, -1, 0});
  Call f8(3, 2, 16, 2, 4, DType::kBF16, DType::kE4M3, {5, -1, 0});
  std::vector<float> f32(1024, 1.0f);
  std::vector<int32_t> i32(64, 0);
  std::vector<uint16_t> u16(4096, 0x3C00);
  std::vector<uint8_t> u8(4096, 0);

  // The valid calls pass (and the rejections below differ from them in one thing each).
  {
    Call ok(3, 2, 16, 2, 4, DType::kF16, DType::kF16, {5, -1, 0});
    CHECK_NOTHROW(op.run(ok.args()));
    Call ok8(3, 2, 16, 2, 4, DType::kBF16, DType::kE4M3, {5, -1, 0});
    CHECK_NOTHROW(op.run(ok8.args()));
  }

  SUBCASE("dtype: k not 16-bit") {
    auto a = c.args();
    a.set("k", TensorRef::contiguous(f32.data(), DType::kF32, {3, 2, 16}, kHost));
    expect_rejected(op, a, c, "dtype", "k");
  }
  SUBCASE("dtype: v differs from k") {
    auto a = c.args();
    a.set("v", TensorRef::contiguous(u16.data(), DType::kBF16, {3, 2, 16}, kHost));
    expect_rejected(op, a, c, "dtype", "v");
  }
  SUBCASE("dtype: pool neither k's dtype nor e4m3") {
    auto a = c.args();
    a.set("k_pages", TensorRef::contiguous(u16.data(), DType::kBF16, {2, 4, 2, 16}, kHost));
    expect_rejected(op, a, c, "dtype", "k_pages");
    auto b = c.args();
    b.set("k_pages", TensorRef::contiguous(f32.data(), DType::kF32, {2, 4, 2, 16}, kHost));
    b.set("v_pages", TensorRef::contiguous(f32.data(), DType::kF32, {2, 4, 2, 16}, kHost));
    expect_rejected(op, b, c, "dtype", "k_pages");
  }
  SUBCASE("dtype: v_pages differs from k_pages") {
    auto a = c.args();
    a.set("v_pages", TensorRef::contiguous(u8.data(), DType::kE4M3, {2, 4, 2, 16}, kHost));
    expect_rejected(op, a, c, "dtype", "v_pages");
  }
  SUBCASE("dtype: slot_mapping not int64") {
    auto a = c.args();
    a.set("slot_mapping", TensorRef::contiguous(i32.data(), DType::kI32, {3}, kHost));
    expect_rejected(op, a, c, "dtype", "slot_mapping");
  }
  SUBCASE("dtype: scales not fp32") {
    auto a = f8.args();
    a.set("k_scale", TensorRef::contiguous(i32.data(), DType::kI32, {1}, kHost));
    expect_rejected(op, a, f8, "dtype", "k_scale");
    auto b = f8.args();
    b.set("v_scale", TensorRef::contiguous(u16.data(), DType::kF16, {1}, kHost));
    expect_rejected(op, b, f8, "dtype", "v_scale");
  }
  SUBCASE("args: scales missing for an e4m3 cache") {
    auto a = c.args();
    a.set("k_pages", TensorRef::contiguous(f8.k_pages.data(), DType::kE4M3, {2, 4, 2, 16}, kHost));
    a.set("v_pages", TensorRef::contiguous(f8.v_pages.data(), DType::kE4M3, {2, 4, 2, 16}, kHost));
    expect_rejected(op, a, f8, "args", "k_scale");
    a.set("k_scale", TensorRef::contiguous(&f8.k_scale, DType::kF32, {1}, kHost));
    expect_rejected(op, a, f8, "args", "v_scale");
  }
  SUBCASE("args: scales present for a 16-bit cache") {
    auto a = c.args();
    a.set("k_scale", TensorRef::contiguous(f32.data(), DType::kF32, {1}, kHost));
    a.set("v_scale", TensorRef::contiguous(f32.data(), DType::kF32, {1}, kHost));
    expect_rejected(op, a, c, "args", "k_scale");
    auto b = c.args();
    b.set("v_scale", TensorRef::contiguous(f32.data(), DType::kF32, {1}, kHost));
    expect_rejected(op, b, c, "args", "v_scale");
  }
  SUBCASE("args: unknown tensor name, missing tensor") {
    auto a = c.args();
    a.set("q", TensorRef::contiguous(u16.data(), DType::kF16, {3, 2, 16}, kHost));
    expect_rejected(op, a, c, "args", "q");
    TensorArgs b;
    for (int i = 0; i < c.args().size(); ++i)
      if (c.args().name(i) != "v") b.set(c.args().name(i), c.args().tensor(i));
    expect_rejected(op, b, c, "args", "v");
  }
  SUBCASE("shape: wrong ranks") {
    auto a = c.args();
    a.set("k", TensorRef::contiguous(c.k.data(), DType::kF16, {6, 16}, kHost));
    expect_rejected(op, a, c, "shape", "k");
    auto b = c.args();
    b.set("k_pages", TensorRef::contiguous(c.k_pages.data(), DType::kF16, {8, 2, 16}, kHost));
    expect_rejected(op, b, c, "shape", "k_pages");
    auto d = c.args();
    d.set("slot_mapping", TensorRef::contiguous(c.slots.data(), DType::kI64, {3, 1}, kHost));
    expect_rejected(op, d, c, "shape", "slot_mapping");
    auto s = f8.args();
    s.set("k_scale", TensorRef::contiguous(f32.data(), DType::kF32, {1, 1}, kHost));
    expect_rejected(op, s, f8, "shape", "k_scale");
  }
  SUBCASE("shape: mismatched extents") {
    auto a = c.args();
    a.set("v", TensorRef::contiguous(u16.data(), DType::kF16, {3, 1, 16}, kHost));
    expect_rejected(op, a, c, "shape", "v");
    auto b = c.args();
    b.set("k_pages", TensorRef::contiguous(u16.data(), DType::kF16, {2, 4, 1, 16}, kHost));
    expect_rejected(op, b, c, "shape", "k_pages");
    auto d = c.args();
    d.set("v_pages", TensorRef::contiguous(u16.data(), DType::kF16, {1, 4, 2, 16}, kHost));
    expect_rejected(op, d, c, "shape", "v_pages");
    auto e = c.args();
    e.set("slot_mapping", TensorRef::contiguous(c.slots.data(), DType::kI64, {2}, kHost));
    expect_rejected(op, e, c, "shape", "slot_mapping");
    auto s = f8.args();
    s.set("v_scale", TensorRef::contiguous(f32.data(), DType::kF32, {2}, kHost));
    expect_rejected(op, s, f8, "shape", "v_scale");
  }
  SUBCASE("shape: D not a multiple of 16") {
    Call d8(3, 2, 8, 2, 4, DType::kF16, DType::kF16, {5, -1, 0});
    expect_rejected(op, d8.args(), d8, "shape", "k");
    Call d24(3, 2, 24, 2, 4, DType::kF16, DType::kF16, {5, -1, 0});
    expect_rejected(op, d24.args(), d24, "shape", "k");
  }
  SUBCASE("layout: non-unit innermost stride, broadcast pool") {
    auto a = c.args();
    TensorRef k = TensorRef::contiguous(u16.data(), DType::kF16, {3, 2, 16}, kHost);
    k.strides[2] = 2;
    a.set("k", k);
    expect_rejected(op, a, c, "layout", "k");
    auto b = c.args();
    TensorRef kp = *b.find("k_pages");
    kp.strides[3] = 2;
    b.set("k_pages", kp);
    expect_rejected(op, b, c, "layout", "k_pages");
    auto d = c.args();
    TensorRef vp = *d.find("v_pages");
    vp.strides[0] = 0;  // two pages on one address: a written tensor may not broadcast
    d.set("v_pages", vp);
    expect_rejected(op, d, c, "layout", "v_pages");
    auto e = c.args();
    TensorRef sm = *e.find("slot_mapping");
    sm.data = reinterpret_cast<char*>(c.slots.data()) + 4;  // misaligned int64 base
    e.set("slot_mapping", sm);
    expect_rejected(op, e, c, "layout", "slot_mapping");
  }
  SUBCASE("device: a CUDA tensor passed to the reference") {
    auto a = c.args();
    a.set("k", TensorRef::contiguous(c.k.data(), DType::kF16, {3, 2, 16}, kGpu));
    expect_rejected(op, a, c, "device", "k");
    auto b = c.args();
    b.set("v_pages", TensorRef::contiguous(c.v_pages.data(), DType::kF16, {2, 4, 2, 16}, kGpu));
    expect_rejected(op, b, c, "device", "v_pages");
  }
}

TEST_CASE("paged_kv_write: construction parameters are checked when the op is created") {
  test::TempDir dir("pkwparam");
  attnjit::Runtime rt(options_in(dir));
  std::string m = op_error(rt, {{"impl", "reference"}, {"bogus_key", 1}});
  CHECK(test::starts_with(m, "paged_kv_write: param: bogus_key:"));
  CHECK(test::contains(m, "validate_inputs"));  // lists the known keys
  CHECK(test::starts_with(op_error(rt, {{"impl", "bogus"}}), "paged_kv_write: param: impl:"));
  CHECK(test::starts_with(op_error(rt, {{"backend", "bogus"}}), "paged_kv_write: param: backend:"));
  CHECK(test::starts_with(op_error(rt, {{"validate_inputs", "yes"}}), "paged_kv_write: param: validate_inputs:"));
  CHECK(test::starts_with(op_error(rt, {{"impl", 3}}), "paged_kv_write: param: impl:"));
  CHECK(test::starts_with(op_error(rt, nlohmann::json::array()), "paged_kv_write: param:"));
  CHECK(op_error(rt, {{"impl", "reference"}, {"backend", "portable"}, {"validate_inputs", true}}) == "(no error)");
  // Instances are cached by (name, config).
  auto a = rt.impl().op("paged_kv_write", {{"impl", "reference"}});
  auto b = rt.impl().op("paged_kv_write", {{"impl", "reference"}});
  auto k = rt.impl().op("paged_kv_write", nlohmann::json::object());
  CHECK(a.get() == b.get());
  CHECK(a.get() != k.get());
  CHECK(a->impl() == attnjit::detail::Impl::kReference);
  CHECK(k->impl() == attnjit::detail::Impl::kKernel);
}

TEST_CASE("paged_kv_write: validate_inputs checks slots and scales (content) and writes nothing") {
  test::TempDir dir("pkwcontent");
  attnjit::Runtime rt(options_in(dir));
  const auto op = rt.op("paged_kv_write", {{"impl", "reference"}, {"validate_inputs", true}});
  SUBCASE("a valid call passes") {
    Call c(3, 2, 16, 2, 4, DType::kF16, DType::kF16, {7, -1, 0});
    CHECK_NOTHROW(op.run(c.args()));
    CHECK(c.k_pages[7 * 32 * 2] != kPoison);
  }
  SUBCASE("duplicate slot") {
    Call c(3, 2, 16, 2, 4, DType::kF16, DType::kF16, {3, -1, 3});
    expect_rejected(op, c.args(), c, "content", "slot_mapping");
  }
  SUBCASE("slot >= NP * PS") {
    Call c(3, 2, 16, 2, 4, DType::kF16, DType::kF16, {1, 8, 0});
    expect_rejected(op, c.args(), c, "content", "slot_mapping");
  }
  SUBCASE("slot < -1") {
    Call c(3, 2, 16, 2, 4, DType::kF16, DType::kF16, {1, -2, 0});
    expect_rejected(op, c.args(), c, "content", "slot_mapping");
  }
  SUBCASE("e4m3 scales must be finite and > 0") {
    for (float bad : {0.0f, -1.0f, std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()}) {
      CAPTURE(bad);
      Call c(3, 2, 16, 2, 4, DType::kBF16, DType::kE4M3, {5, -1, 0});
      c.k_scale = bad;
      expect_rejected(op, c.args(), c, "content", "k_scale");
      Call d(3, 2, 16, 2, 4, DType::kBF16, DType::kE4M3, {5, -1, 0});
      d.v_scale = bad;
      expect_rejected(op, d.args(), d, "content", "v_scale");
    }
  }
  SUBCASE("without validate_inputs the same contents are not inspected") {
    Call c(3, 2, 16, 2, 4, DType::kBF16, DType::kE4M3, {5, -1, 0});
    c.k_scale = -1.0f;
    CHECK_NOTHROW(rt.op("paged_kv_write", {{"impl", "reference"}}).run(c.args()));
  }
}

namespace {

// CUDA tensors at fake 256-aligned addresses: fine for validation and kernel selection, never
// dereferenced by them.
TensorArgs fake_device_args(DType dt, DType cache, int64_t D) {
  auto addr = [](uintptr_t a) { return reinterpret_cast<void*>(a); };
  TensorArgs a;
  a.set("k", TensorRef::contiguous(addr(0x100000), dt, {4, 2, D}, kGpu));
  a.set("v", TensorRef::contiguous(addr(0x200000), dt, {4, 2, D}, kGpu));
  a.set("k_pages", TensorRef::contiguous(addr(0x300000), cache, {3, 16, 2, D}, kGpu));
  a.set("v_pages", TensorRef::contiguous(addr(0x400000), cache, {3, 16, 2, D}, kGpu));
  a.set("slot_mapping", TensorRef::contiguous(addr(0x500000), DType::kI64, {4}, kGpu));
  if (cache == DType::kE4M3) {
    a.set("k_scale", TensorRef::contiguous(addr(0x600000), DType::kF32, {1}, kGpu));
    a.set("v_scale", TensorRef::contiguous(addr(0x600100), DType::kF32, {1}, kGpu));
  }
  return a;
}

}  // namespace

TEST_CASE("paged_kv_write kernel path: without a driver the call raises CudaError") {
  if (attnjit::jit::CudaDriver::get().available()) {
    MESSAGE("a CUDA driver is present; the no-driver test does not apply (fake addresses would be launched)");
    CHECK(attnjit::jit::CudaDriver::get().device_count() >= 0);
    return;
  }
  CHECK(!attnjit::jit::CudaDriver::get().unavailable_reason().empty());
  test::TempDir dir("pkwgpu");
  attnjit::Runtime rt(options_in(dir));
  const auto args = fake_device_args(DType::kF16, DType::kF16, 128);
  try {
    rt.op("paged_kv_write").run(args);
    FAIL("the kernel path ran without a driver");
  } catch (const attnjit::CudaError& e) {
    CHECK(e.status() == attnjit::Status::kCudaError);
    CHECK(std::string(e.what()).size() > 0);
  }
  // With the arch pinned, the kernel is compiled first (compile-only work needs no driver), and the
  // load then fails the same way.
  auto o = options_in(dir);
  o.arch = "sm_90a";
  attnjit::Runtime pinned(o);
  CHECK_THROWS_AS(pinned.op("paged_kv_write").run(args), attnjit::CudaError);
  CHECK(pinned.impl().kernels().disk()->list(true).size() == 1);
  // Host tensors are rejected by the kernel path as a device error, before any driver call.
  Call c(3, 2, 16, 2, 4, DType::kF16, DType::kF16, {5, -1, 0});
  expect_rejected(rt.op("paged_kv_write"), c.args(), c, "device", "k");
  // An unaligned device base is a layout error for the kernel path.
  auto bad = args;
  TensorRef k = *bad.find("k");
  k.data = reinterpret_cast<void*>(0x100008);
  bad.set("k", k);
  const std::string m = run_error(rt.op("paged_kv_write"), bad);
  CHECK(test::starts_with(m, "paged_kv_write: layout: k:"));
}

TEST_CASE("paged_kv_write kernels_for: backend rules and the selected kernel") {
  test::TempDir dir("pkwspec");
  attnjit::Runtime rt(options_in(dir));
  const auto args = fake_device_args(DType::kBF16, DType::kE4M3, 128);

  auto autop = rt.impl().op("paged_kv_write", nlohmann::json::object());
  auto specs = autop->kernels_for(args, "sm_90a");
  REQUIRE(specs.size() == 1);
  CHECK(specs[0].describe() == "paged_kv_write.portable.bf16.e4m3.d128.sm_90a");
  CHECK(specs[0].entry == "attnjit::kernels::paged_kv_write<__nv_bfloat16, __nv_fp8_e4m3, 128>");
  // The warm-up matrix covers it.
  bool in_matrix = false;
  for (const auto& s : attnjit::detail::find_op("paged_kv_write").default_matrix("sm_90a"))
    in_matrix = in_matrix || (s.describe() == specs[0].describe() && s.entry == specs[0].entry);
  CHECK(in_matrix);

  auto portable = rt.impl().op("paged_kv_write", {{"backend", "portable"}});
  REQUIRE(portable->kernels_for(args, "sm_80").size() == 1);
  CHECK(portable->kernels_for(args, "sm_80")[0].describe() == "paged_kv_write.portable.bf16.e4m3.d128.sm_80");

  auto hopper = rt.impl().op("paged_kv_write", {{"backend", "hopper"}});
  try {
    hopper->kernels_for(args, "sm_90a");
    FAIL("backend hopper selected a kernel");
  } catch (const attnjit::Unsupported& e) {
    CHECK(test::contains(e.what(), "'portable'"));
    CHECK(test::contains(e.what(), "hopper"));
  }
  try {
    autop->kernels_for(args, "sm_75");
    FAIL("an sm_75 target was accepted");
  } catch (const attnjit::Unsupported& e) {
    CHECK(test::contains(e.what(), "sm_80"));
    CHECK(test::contains(e.what(), "sm_75"));
  }
  // kernels_for validates as a device call.
  Call c(3, 2, 16, 2, 4, DType::kF16, DType::kF16, {5, -1, 0});
  CHECK_THROWS_AS(autop->kernels_for(c.args(), "sm_90a"), attnjit::InvalidArgument);
  // Each (dtype, cache dtype, D) selects a different kernel.
  const auto f16 = fake_device_args(DType::kF16, DType::kF16, 64);
  CHECK(autop->kernels_for(f16, "sm_90a")[0].describe() == "paged_kv_write.portable.fp16.fp16.d64.sm_90a");
}

TEST_CASE("runtime: an unknown op is an InvalidArgument that lists the known ops") {
  test::TempDir dir("unknown");
  attnjit::Runtime rt(options_in(dir));
  try {
    rt.op("nope");
    FAIL("unknown op accepted");
  } catch (const attnjit::InvalidArgument& e) {
    const std::string m = e.what();
    CHECK(test::starts_with(m, "unknown op 'nope'"));
    CHECK(test::contains(m, "paged_kv_write"));
    CHECK(e.status() == attnjit::Status::kInvalidArgument);
  }
  const auto names = attnjit::Runtime::op_names();
  CHECK(std::find(names.begin(), names.end(), "paged_kv_write") != names.end());
  CHECK(std::string(attnjit::version()).size() > 0);
  // Empty handles fail cleanly.
  CHECK_THROWS_AS(attnjit::Op().plan(TensorArgs{}), attnjit::InvalidArgument);
  CHECK_THROWS_AS(attnjit::Plan().execute(TensorArgs{}), attnjit::InvalidArgument);
  CHECK(!attnjit::Plan().valid());
}
