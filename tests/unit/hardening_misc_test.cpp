// Entry-point checks outside the C ABI: ATTNJIT_LOG_LEVEL values, the geometry rules of hand-built
// TensorRefs at Op::plan and Plan::execute, and the config number bound.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "attnjit/runtime.hpp"
#include "runtime/tensor_checks.hpp"
#include "test_util.hpp"

namespace {
namespace test = attnjit::test;
using attnjit::DeviceKind;
using attnjit::DType;
using attnjit::RuntimeOptions;
using attnjit::TensorRef;
}  // namespace

TEST_CASE("hardening: an unknown ATTNJIT_LOG_LEVEL is an error naming the variable and the accepted values") {
  test::EnvGuard env(test::attnjit_env_names());
  env.unset_all();
  for (const char* bad : {"WARN", "verbose", "warning ", "2"}) {
    CAPTURE(bad);
    env.set("ATTNJIT_LOG_LEVEL", bad);
    try {
      RuntimeOptions::from_env();
      FAIL("accepted");
    } catch (const attnjit::InvalidArgument& e) {
      CHECK(test::contains(e.what(), "ATTNJIT_LOG_LEVEL"));
      CHECK(test::contains(e.what(), "trace, debug, info, warn, error, critical, off"));
      CHECK(test::contains(e.what(), bad));
    }
  }
  for (const char* good : {"trace", "debug", "info", "warn", "error", "critical", "off"}) {
    env.set("ATTNJIT_LOG_LEVEL", good);
    CHECK(RuntimeOptions::from_env().log_level == good);
  }
  env.unset("ATTNJIT_LOG_LEVEL");
  CHECK_THROWS_AS(RuntimeOptions::from_json(R"({"log_level": "loud"})"), attnjit::InvalidArgument);
  RuntimeOptions o;
  o.log_level = "verbose";
  CHECK_THROWS_AS(attnjit::Runtime{o}, attnjit::InvalidArgument);
}

TEST_CASE("hardening: tensor_problem's rules") {
  alignas(16) static char buf[256];
  TensorRef t = TensorRef::contiguous(buf, DType::kF32, {4, 4}, {DeviceKind::kCPU, 0});
  CHECK(!attnjit::detail::tensor_problem(t));
  TensorRef n = t;
  n.data = nullptr;
  REQUIRE(attnjit::detail::tensor_problem(n));
  CHECK(attnjit::detail::tensor_problem(n)->category == "layout");
  n.shape[0] = 0;  // no elements: a NULL base is fine
  CHECK(!attnjit::detail::tensor_problem(n));
  TensorRef big = t;
  big.shape = {int64_t{1} << 40, int64_t{1} << 40};
  CHECK(attnjit::detail::tensor_problem(big)->category == "shape");
  big.shape = {int64_t{1} << 40, int64_t{1} << 40, 0};
  big.ndim = 3;
  CHECK(attnjit::detail::tensor_problem(big)->category == "shape");  // 0 * overflow: still rejected
  TensorRef wide = t;
  wide.strides = {int64_t{1} << 62, 1};
  CHECK(attnjit::detail::tensor_problem(wide)->category == "layout");
  TensorRef wrap = t;
  wrap.data = reinterpret_cast<void*>(std::numeric_limits<std::uintptr_t>::max() - 8);
  CHECK(attnjit::detail::tensor_problem(wrap)->category == "layout");
  TensorRef neg = t;
  neg.ndim = 9;
  CHECK(attnjit::detail::tensor_problem(neg)->category == "shape");
}

TEST_CASE("hardening: the C++ API checks hand-built tensors at plan and execute, and config numbers") {
  test::TempDir dir("hard-cpp");
  attnjit::Runtime rt(test::options_in(dir));
  std::vector<uint16_t> q(512), k(256), v(256), o(512);
  std::vector<float> lse(8);
  const attnjit::Device cpu{DeviceKind::kCPU, 0};
  attnjit::TensorArgs args{{"q", TensorRef::contiguous(q.data(), DType::kF16, {1, 4, 2, 64}, cpu)},
                           {"k", TensorRef::contiguous(k.data(), DType::kF16, {1, 4, 1, 64}, cpu)},
                           {"v", TensorRef::contiguous(v.data(), DType::kF16, {1, 4, 1, 64}, cpu)},
                           {"o", TensorRef::contiguous(o.data(), DType::kF16, {1, 4, 2, 64}, cpu)},
                           {"lse", TensorRef::contiguous(lse.data(), DType::kF32, {1, 2, 4}, cpu)}};
  auto op = rt.op("gqa_fwd", {{"impl", "reference"}});
  auto plan = op.plan(args);
  attnjit::TensorArgs bad = args;
  TensorRef nullq = *args.find("q");
  nullq.data = nullptr;
  bad.set("q", nullq);
  try {
    op.plan(bad);
    FAIL("plan accepted a NULL q");
  } catch (const attnjit::InvalidArgument& e) {
    CHECK(test::starts_with(e.what(), "gqa_fwd: layout: q: expected a non-NULL data pointer"));
  }
  try {
    plan.execute(bad);
    FAIL("execute accepted a NULL q");
  } catch (const attnjit::InvalidArgument& e) {
    CHECK(test::starts_with(e.what(), "gqa_fwd: layout: q: expected a non-NULL data pointer"));
  }
  for (double x : {1e300, -1e300, 1e17, std::numeric_limits<double>::infinity()}) {
    CAPTURE(x);
    try {
      rt.op("gqa_fwd", {{"impl", "reference"}, {"window_size_left", x}});
      FAIL("accepted");
    } catch (const attnjit::InvalidArgument& e) {
      CHECK((test::starts_with(e.what(), "gqa_fwd: param: window_size_left: expected a finite number of magnitude") ||
             (std::isinf(x) && test::starts_with(e.what(), "config: param: window_size_left: expected a finite number"))));
    }
  }
}
