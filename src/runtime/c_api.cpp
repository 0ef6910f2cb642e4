// The C ABI (include/attnjit/attnjit.h): a thin shell over the C++ API that turns exceptions into
// status codes and a thread-local message.
#include "attnjit/attnjit.h"

#include <fmt/format.h>

#include <string>

#include "attnjit/runtime.hpp"
#include "runtime/c_api_handles.hpp"
#include "runtime/runtime_impl.hpp"

thread_local std::string attnjit::capi::g_last_error;

namespace {

using attnjit::capi::g_last_error;

template <typename F>
attnjit_status guarded(F&& f) {
  try {
    f();
    g_last_error.clear();
    return ATTNJIT_OK;
  } catch (const attnjit::Error& e) {
    g_last_error = e.what();
    return static_cast<attnjit_status>(e.status());
  } catch (const nlohmann::json::exception& e) {
    g_last_error = fmt::format("config_json: expected valid JSON, got a parse error: {}", e.what());
    return ATTNJIT_INVALID_ARGUMENT;
  } catch (const std::exception& e) {
    g_last_error = fmt::format("internal error: {}", e.what());
    return ATTNJIT_INTERNAL;
  } catch (...) {
    g_last_error = "internal error: unknown exception";
    return ATTNJIT_INTERNAL;
  }
}

nlohmann::json parse_json(const char* text, const char* what) {
  if (!text || !*text) return nlohmann::json::object();
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded()) throw attnjit::InvalidArgument(fmt::format("{}: expected valid JSON, got '{}'", what, text));
  return j;
}

attnjit::TensorArgs to_args(int n, const char* const* names, const DLTensor* tensors) {
  if (n < 0 || (n > 0 && (!names || !tensors)))
    throw attnjit::InvalidArgument(fmt::format("tensors: expected num_tensors >= 0 with names and tensors, got {}", n));
  attnjit::TensorArgs args;
  for (int i = 0; i < n; ++i) {
    if (!names[i]) throw attnjit::InvalidArgument(fmt::format("tensors: expected a name for tensor {}, got NULL", i));
    args.set(names[i], attnjit::TensorRef::from_dlpack(tensors[i], names[i]));
  }
  return args;
}

void require(const void* p, const char* what) {
  if (!p) throw attnjit::InvalidArgument(fmt::format("{}: expected a non-NULL pointer, got NULL", what));
}

}  // namespace

extern "C" {

attnjit_status attnjit_runtime_create(const char* options_json, attnjit_runtime** out) {
  return guarded([&] {
    require(out, "out");
    *out = nullptr;
    auto options = attnjit::RuntimeOptions::from_json(parse_json(options_json, "options_json").dump());
    *out = new attnjit_runtime(std::move(options));
  });
}

void attnjit_runtime_destroy(attnjit_runtime* rt) { delete rt; }

attnjit_status attnjit_plan_create(attnjit_runtime* rt, const char* op, const char* config_json, int num_tensors,
                                   const char* const* names, const DLTensor* tensors, attnjit_plan** out) {
  return guarded([&] {
    require(rt, "runtime");
    require(op, "op");
    require(out, "out");
    *out = nullptr;
    auto args = to_args(num_tensors, names, tensors);
    auto plan = attnjit::Op(rt->runtime.impl().op(op, parse_json(config_json, "config_json"))).plan(args);
    *out = new attnjit_plan{std::move(plan)};
  });
}

attnjit_status attnjit_plan_execute(attnjit_plan* plan, int num_tensors, const char* const* names,
                                    const DLTensor* tensors, void* stream) {
  return guarded([&] {
    require(plan, "plan");
    plan->plan.execute(to_args(num_tensors, names, tensors), stream);
  });
}

void attnjit_plan_destroy(attnjit_plan* plan) { delete plan; }

attnjit_status attnjit_run(attnjit_runtime* rt, const char* op, const char* config_json, int num_tensors,
                           const char* const* names, const DLTensor* tensors, void* stream) {
  return guarded([&] {
    require(rt, "runtime");
    require(op, "op");
    auto args = to_args(num_tensors, names, tensors);
    attnjit::Op(rt->runtime.impl().op(op, parse_json(config_json, "config_json"))).run(args, stream);
  });
}

const char* attnjit_last_error(void) { return g_last_error.c_str(); }

}  // extern "C"
