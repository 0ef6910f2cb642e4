// The C ABI's handle types and its thread-local error message, shared by c_api.cpp and
// c_api_info.cpp.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "attnjit/attnjit.h"
#include "attnjit/runtime.hpp"

struct attnjit_runtime {
  attnjit::Runtime runtime;
  explicit attnjit_runtime(attnjit::RuntimeOptions o) : runtime(std::move(o)) {}
};

struct attnjit_plan {
  attnjit::Plan plan;  // a workspace bound with attnjit_plan_set_workspace lives in this Plan value
  std::string op;      // for the "<op>: " prefix of execute's errors
};

namespace attnjit::capi {
// What attnjit_last_error() returns on this thread.
extern thread_local std::string g_last_error;
// The C ABI's entry steps (c_api.cpp): handle registry, bounded JSON parsing, checked descriptors.
void track_handle(const void* h);
bool live_handle(const void* h);
nlohmann::json parse_config(const char* text, const char* what);
attnjit::TensorArgs tensor_args(std::string_view op, int n, const char* const* names, const DLTensor* tensors);
}  // namespace attnjit::capi
