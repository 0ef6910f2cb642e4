// The C ABI's handle types and its thread-local error message, shared by c_api.cpp and
// c_api_info.cpp.
#pragma once
#include <string>

#include "attnjit/attnjit.h"
#include "attnjit/runtime.hpp"

struct attnjit_runtime {
  attnjit::Runtime runtime;
  explicit attnjit_runtime(attnjit::RuntimeOptions o) : runtime(std::move(o)) {}
};

struct attnjit_plan {
  attnjit::Plan plan;  // a workspace bound with attnjit_plan_set_workspace lives in this Plan value
};

namespace attnjit::capi {
// What attnjit_last_error() returns on this thread.
extern thread_local std::string g_last_error;
}  // namespace attnjit::capi
