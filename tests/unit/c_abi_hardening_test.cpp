// The C ABI (include/attnjit/attnjit.h) under bad input: every call below used to crash, overflow or be
// accepted; each must be a clean error in SPEC.md §1.11's form "<op>: <category>: <argument>: ..." that
// writes nothing.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "attnjit/attnjit.h"
#include "runtime/runtime_impl.hpp"
#include "test_util.hpp"

namespace {

namespace test = attnjit::test;

// gqa_fwd on host tensors: q [B, S, Hq, D], k/v [B, S, Hkv, D], o like q, lse [B, Hq, S].
struct GqaCall {
  std::vector<uint16_t> q, k, v, o;
  std::vector<float> lse;
  int64_t sq[4] = {1, 4, 2, 64}, skv[4] = {1, 4, 1, 64}, slse[3] = {1, 2, 4};
  DLTensor t[5];
  const char* names[5] = {"q", "k", "v", "o", "lse"};

  GqaCall() : q(512, 0x3c00), k(256, 0x3c00), v(256, 0x3c00), o(512, 0xA5A5), lse(8, -7.0f) {
    t[0] = make(q.data(), kDLFloat, 16, 4, sq);
    t[1] = make(k.data(), kDLFloat, 16, 4, skv);
    t[2] = make(v.data(), kDLFloat, 16, 4, skv);
    t[3] = make(o.data(), kDLFloat, 16, 4, sq);
    t[4] = make(lse.data(), kDLFloat, 32, 3, slse);
  }
  static DLTensor make(void* data, DLDataTypeCode code, int bits, int ndim, int64_t* shape) {
    DLTensor d;
    std::memset(&d, 0, sizeof d);
    d.data = data;
    d.device = {kDLCPU, 0};
    d.ndim = ndim;
    d.dtype = {static_cast<uint8_t>(code), static_cast<uint8_t>(bits), 1};
    d.shape = shape;
    return d;
  }
  bool outputs_untouched() const {
    for (auto x : o)
      if (x != 0xA5A5) return false;
    for (auto x : lse)
      if (x != -7.0f) return false;
    return true;
  }
};

struct Rt {
  test::TempDir dir{"cabi-hard"};
  attnjit_runtime* rt = nullptr;
  Rt() {
    const std::string opts = R"({"cache_dir": ")" + (dir / "cache").string() + R"(", "log_level": "error"})";
    REQUIRE(attnjit_runtime_create(opts.c_str(), &rt) == ATTNJIT_OK);
  }
  ~Rt() { attnjit_runtime_destroy(rt); }
};

const char* kRef = R"({"impl": "reference"})";

// Runs gqa_fwd through attnjit_run and through plan_create; both must fail with `status` and a message
// starting with `prefix` and containing `part`, and write nothing.
void expect_rejected(Rt& r, GqaCall& c, const char* config, const std::string& prefix, const std::string& part,
                     attnjit_status status = ATTNJIT_INVALID_ARGUMENT, int n = 5) {
  const attnjit_status st = attnjit_run(r.rt, "gqa_fwd", config, n, c.names, c.t, nullptr);
  const std::string msg = attnjit_last_error();
  CAPTURE(msg);
  CHECK(st == status);
  CHECK(test::starts_with(msg, prefix));
  CHECK(test::contains(msg, part));
  CHECK(c.outputs_untouched());
  attnjit_plan* plan = reinterpret_cast<attnjit_plan*>(1);
  const attnjit_status st2 = attnjit_plan_create(r.rt, "gqa_fwd", config, n, c.names, c.t, &plan);
  const std::string msg2 = attnjit_last_error();
  CAPTURE(msg2);
  CHECK(st2 == status);
  CHECK(plan == nullptr);
  CHECK(test::starts_with(msg2, prefix));
  CHECK(c.outputs_untouched());
}

}  // namespace

TEST_CASE("c abi hardening: the well-formed call runs (the baseline of the cases below)") {
  Rt r;
  GqaCall c;
  CHECK(attnjit_run(r.rt, "gqa_fwd", kRef, 5, c.names, c.t, nullptr) == ATTNJIT_OK);
  CHECK(!c.outputs_untouched());
}

TEST_CASE("c abi hardening: a NULL data pointer with a non-empty shape, on inputs and outputs") {
  Rt r;
  for (int i = 0; i < 5; ++i) {
    GqaCall c;
    CAPTURE(i);
    c.t[i].data = nullptr;
    expect_rejected(r, c, kRef, std::string("gqa_fwd: layout: ") + c.names[i] + ": ", "non-NULL data pointer");
  }
}

TEST_CASE("c abi hardening: a NULL shape with ndim > 0, and ndim beyond the bound") {
  Rt r;
  {
    GqaCall c;
    c.t[1].shape = nullptr;
    expect_rejected(r, c, kRef, "gqa_fwd: shape: k: ", "expected a shape array for 4 dims, got NULL");
  }
  for (int ndim : {9, 1000, -1}) {
    GqaCall c;
    CAPTURE(ndim);
    int64_t big[1000];
    for (auto& e : big) e = 1;
    c.t[0].shape = big;
    c.t[0].ndim = ndim;
    expect_rejected(r, c, kRef, "gqa_fwd: shape: q: ", fmt::format("expected at most 8 dims, got {}", ndim));
  }
}

TEST_CASE("c abi hardening: byte_offset, strides and shapes whose products overflow int64") {
  Rt r;
  {
    GqaCall c;
    c.t[0].byte_offset = uint64_t{1} << 63;
    expect_rejected(r, c, kRef, "gqa_fwd: layout: q: ", "byte_offset that fits int64, got 9223372036854775808");
  }
  {
    GqaCall c;
    c.t[3].byte_offset = UINT64_MAX - 8;
    expect_rejected(r, c, kRef, "gqa_fwd: layout: o: ", "byte_offset");
  }
  {
    GqaCall c;
    int64_t strides[4] = {int64_t{1} << 62, int64_t{1} << 62, 64, 1};
    c.t[0].strides = strides;
    expect_rejected(r, c, kRef, "gqa_fwd: layout: q: ", "span fits int64");
  }
  {
    // 2^40 x 2^40, consistent across the tensors.
    GqaCall c;
    const int64_t e = int64_t{1} << 40;
    int64_t sq[4] = {1, e, e, 64}, skv[4] = {1, e, e, 64}, slse[3] = {1, e, e};
    c.t[0].shape = sq, c.t[1].shape = skv, c.t[2].shape = skv, c.t[3].shape = sq, c.t[4].shape = slse;
    expect_rejected(r, c, kRef, "gqa_fwd: shape: q: ", "element count that fits int64");
  }
  {
    // A span that fits int64 in elements but not in bytes.
    GqaCall c;
    int64_t strides[4] = {int64_t{1} << 61, 128, 64, 1};
    int64_t sq[4] = {3, 4, 2, 64};
    c.t[0].shape = sq;
    c.t[0].strides = strides;
    expect_rejected(r, c, kRef, "gqa_fwd: layout: q: ", "fits int64");
  }
}

TEST_CASE("c abi hardening: a foreign DLDeviceType value") {
  Rt r;
  GqaCall c;
  const int32_t foreign = 1234;
  std::memcpy(&c.t[2].device.device_type, &foreign, sizeof foreign);
  expect_rejected(r, c, kRef, "gqa_fwd: device: v: ", "got DLPack device type 1234");
}

TEST_CASE("c abi hardening: float config values beyond the integer range") {
  Rt r;
  for (const char* cfg : {R"({"impl": "reference", "window_size_left": 1e300})",
                          R"({"impl": "reference", "window_size_right": -1e300, "is_causal": false})",
                          R"({"impl": "reference", "pos_encoding_mode": "rope", "rotary_dim": 1e300})"}) {
    GqaCall c;
    CAPTURE(cfg);
    expect_rejected(r, c, cfg, "gqa_fwd: param: ", "e+300");
  }
}

TEST_CASE("c abi hardening: the same tensor name twice is rejected, naming it") {
  Rt r;
  GqaCall c;
  c.names[4] = "o";
  expect_rejected(r, c, kRef, "gqa_fwd: args: o: ", "expected each tensor name once");
}

TEST_CASE("c abi hardening: JSON nested 100,000 deep or larger than the limit") {
  Rt r;
  GqaCall c;
  std::string deep = R"({"impl": "reference", "x": )" + std::string(100000, '[') + std::string(100000, ']') + "}";
  expect_rejected(r, c, deep.c_str(), "gqa_fwd: param: config_json: ", "nested at most 64 deep");
  std::string huge = R"({"impl": "reference", "x": ")" + std::string(2u << 20, 'a') + "\"}";
  expect_rejected(r, c, huge.c_str(), "gqa_fwd: param: config_json: ", "bytes of JSON");
  // Brackets inside strings are not nesting.
  std::string in_string = R"({"impl": "reference", "is_causal": true, "pos_encoding_mode": ")" + std::string(1000, '[') + "\"}";
  expect_rejected(r, c, in_string.c_str(), "gqa_fwd: param: pos_encoding_mode: ", "expected");

  attnjit_runtime* rt2 = reinterpret_cast<attnjit_runtime*>(1);
  std::string deep_opts = std::string(100000, '{');
  CHECK(attnjit_runtime_create(deep_opts.c_str(), &rt2) == ATTNJIT_INVALID_ARGUMENT);
  CHECK(rt2 == nullptr);
  CHECK(test::contains(attnjit_last_error(), "options_json"));

  // The C++ API walks a built value without recursion before dump().
  attnjit::Runtime cpp(test::options_in(r.dir));
  nlohmann::json v = nlohmann::json::array();
  for (int i = 0; i < 100000; ++i) v = nlohmann::json::array({std::move(v)});
  // NOTE: the value moves into the config (copying it would recurse 100,000 deep: fine on an 8 MB
  // stack, a stack overflow under AddressSanitizer's larger frames).
  nlohmann::json cfg = {{"impl", "reference"}};
  cfg["x"] = std::move(v);
  try {
    cpp.impl().op("gqa_fwd", cfg);
    FAIL("accepted");
  } catch (const attnjit::InvalidArgument& e) {
    CHECK(test::starts_with(e.what(), "gqa_fwd: param: config: expected JSON nested at most 64 deep"));
  }
  // NOTE: nlohmann's destructor of a deep value is iterative; unwind it explicitly anyway.
  nlohmann::json x = std::move(cfg["x"]);
  while (x.is_array() && !x.empty()) {
    nlohmann::json inner = std::move(x[0]);
    x = std::move(inner);
  }
}

TEST_CASE("c abi hardening: destroy(NULL) is a no-op, a second destroy is ignored, execute after destroy fails") {
  Rt r;
  GqaCall c;
  attnjit_plan_destroy(nullptr);
  attnjit_runtime_destroy(nullptr);
  attnjit_plan* plan = nullptr;
  REQUIRE(attnjit_plan_create(r.rt, "gqa_fwd", kRef, 5, c.names, c.t, &plan) == ATTNJIT_OK);
  REQUIRE(plan);
  CHECK(attnjit_plan_execute(plan, 5, c.names, c.t, nullptr) == ATTNJIT_OK);
  attnjit_plan_destroy(plan);
  attnjit_plan_destroy(plan);  // detected (the address was not reused in between)
  CHECK(attnjit_plan_execute(plan, 5, c.names, c.t, nullptr) == ATTNJIT_INVALID_ARGUMENT);
  CHECK(test::contains(attnjit_last_error(), "plan: expected a live plan"));
}

TEST_CASE("c abi hardening: errors of an op call carry the '<op>: ' prefix") {
  Rt r;
  GqaCall c;
  CHECK(attnjit_run(r.rt, "gqa_fwd", "{not json", 5, c.names, c.t, nullptr) == ATTNJIT_INVALID_ARGUMENT);
  CHECK(test::starts_with(attnjit_last_error(), "gqa_fwd: param: config_json: expected valid JSON"));
  CHECK(attnjit_run(r.rt, "gqa_fwd", kRef, 25, c.names, c.t, nullptr) == ATTNJIT_INVALID_ARGUMENT);
  CHECK(test::starts_with(attnjit_last_error(), "gqa_fwd: args: tensors: expected at most 24"));
  const char* null_name[5] = {"q", nullptr, "v", "o", "lse"};
  CHECK(attnjit_run(r.rt, "gqa_fwd", kRef, 5, null_name, c.t, nullptr) == ATTNJIT_INVALID_ARGUMENT);
  CHECK(test::starts_with(attnjit_last_error(), "gqa_fwd: args: tensors: expected a name for tensor 1"));
  c.t[0].dtype.lanes = 4;
  CHECK(attnjit_run(r.rt, "gqa_fwd", kRef, 5, c.names, c.t, nullptr) == ATTNJIT_INVALID_ARGUMENT);
  CHECK(test::starts_with(attnjit_last_error(), "gqa_fwd: dtype: q: expected lanes 1, got 4"));
  c.t[0].dtype.lanes = 1;
  CHECK(attnjit_run(r.rt, "no_such_op", kRef, 5, c.names, c.t, nullptr) == ATTNJIT_INVALID_ARGUMENT);
  CHECK(test::starts_with(attnjit_last_error(), "unknown op 'no_such_op'"));
  CHECK(c.outputs_untouched());
}

TEST_CASE("c abi hardening: shapes too large to allocate for are InvalidArgument naming the shape") {
  Rt r;
  // Fake host addresses far apart (the spans do not overlap): the reference must fail on its own
  // scratch allocation before it reads through them.
  const int64_t s = int64_t{1} << 40;
  GqaCall c;
  int64_t sq[4] = {1, s, 1, 64}, slse[3] = {1, 1, s};
  for (int i = 0; i < 5; ++i) c.t[i].data = reinterpret_cast<void*>(static_cast<uintptr_t>(i + 1) << 52);
  c.t[0].shape = c.t[1].shape = c.t[2].shape = c.t[3].shape = sq;
  c.t[4].shape = slse;
  CHECK(attnjit_run(r.rt, "gqa_fwd", kRef, 5, c.names, c.t, nullptr) == ATTNJIT_INVALID_ARGUMENT);
  const std::string msg = attnjit_last_error();
  CAPTURE(msg);
  CHECK(test::starts_with(msg, "gqa_fwd: shape: tensors: expected shapes whose working memory can be allocated, got "
                               "q [1, 1099511627776, 1, 64]"));

  // bsa_fwd: q, k, v [B, H, S, D] (layout bhsd), q2k_block_index [B, H, S / 64, k], o, lse [B, H, S].
  int64_t bq[4] = {1, 1, s, 64}, bidx[4] = {1, 1, s / 64, 2}, blse[3] = {1, 1, s};
  DLTensor t[6];
  const char* names[6] = {"q", "k", "v", "q2k_block_index", "o", "lse"};
  for (int i = 0; i < 6; ++i) {
    t[i] = GqaCall::make(reinterpret_cast<void*>(static_cast<uintptr_t>(i + 1) << 52), kDLBfloat, 16, 4, bq);
  }
  t[3].dtype = {kDLInt, 32, 1};
  t[3].shape = bidx;
  t[5].dtype = {kDLFloat, 32, 1};
  t[5].ndim = 3;
  t[5].shape = blse;
  CHECK(attnjit_run(r.rt, "bsa_fwd", kRef, 6, names, t, nullptr) == ATTNJIT_INVALID_ARGUMENT);
  const std::string bmsg = attnjit_last_error();
  CAPTURE(bmsg);
  CHECK(test::starts_with(bmsg, "bsa_fwd: shape: tensors: expected shapes whose working memory can be allocated"));
}
