// The C ABI (include/attnjit/attnjit.h): a thin shell over the C++ API that turns exceptions into
// status codes and a thread-local message.
#include "attnjit/attnjit.h"

#include <fmt/format.h>

#include <mutex>
#include <new>
#include <string>
#include <string_view>
#include <unordered_set>

#include "attnjit/runtime.hpp"
#include "runtime/c_api_handles.hpp"
#include "runtime/runtime_impl.hpp"
#include "runtime/tensor_checks.hpp"

thread_local std::string attnjit::capi::g_last_error;

namespace {

using attnjit::capi::g_last_error;

// Every handle handed out and not yet destroyed: a second destroy of one (while its address has not
// been reused) is detected and ignored, and execute on a destroyed plan is an error, not a crash.
std::mutex g_handles_mutex;
std::unordered_set<const void*> g_handles;

void track(const void* h) {
  std::lock_guard<std::mutex> g(g_handles_mutex);
  g_handles.insert(h);
}
bool live(const void* h) {
  std::lock_guard<std::mutex> g(g_handles_mutex);
  return g_handles.count(h) != 0;
}
bool untrack(const void* h) {
  std::lock_guard<std::mutex> g(g_handles_mutex);
  return g_handles.erase(h) != 0;
}

// Errors of an op call carry SPEC.md's "<op>: " prefix, whichever layer raised them.
std::string with_op(std::string_view op, std::string message) {
  if (op.empty() || message.rfind("unknown op '", 0) == 0) return message;
  if (message.size() > op.size() + 1 && message.compare(0, op.size(), op) == 0 && message[op.size()] == ':')
    return message;
  return fmt::format("{}: {}", op, message);
}

template <typename F>
attnjit_status guarded(std::string_view op, F&& f) {
  try {
    f();
    g_last_error.clear();
    return ATTNJIT_OK;
  } catch (const attnjit::Error& e) {
    g_last_error = e.status() == attnjit::Status::kInvalidArgument || e.status() == attnjit::Status::kUnsupported
                       ? with_op(op, e.what())
                       : std::string(e.what());
    return static_cast<attnjit_status>(e.status());
  } catch (const std::bad_alloc&) {
    g_last_error = with_op(op, "shape: tensors: expected shapes whose working memory can be allocated, got an "
                               "allocation failure (std::bad_alloc)");
    return ATTNJIT_INVALID_ARGUMENT;
  } catch (const std::exception& e) {
    // NOTE: the caller's JSON is parsed without exceptions and checked by name, so a JSON exception
    // here is the library's own (e.g. a cache manifest), never the caller's config_json.
    g_last_error = fmt::format("internal error: {}", e.what());
    return ATTNJIT_INTERNAL;
  } catch (...) {
    g_last_error = "internal error: unknown exception";
    return ATTNJIT_INTERNAL;
  }
}

nlohmann::json parse_json(const char* text, const char* what) {
  if (!text || !*text) return nlohmann::json::object();
  const std::string_view view(text);
  attnjit::detail::check_json_text(view, fmt::format("param: {}", what));
  auto j = nlohmann::json::parse(view, nullptr, false);
  if (j.is_discarded()) {
    const std::string shown = view.size() > 200 ? std::string(view.substr(0, 200)) + "..." : std::string(view);
    throw attnjit::InvalidArgument(fmt::format("param: {}: expected valid JSON, got '{}'", what, shown));
  }
  return j;
}

// `storage` keeps the names alive for the TensorArgs (which holds views).
attnjit::TensorArgs to_args(std::string_view op, int n, const char* const* names, const DLTensor* tensors) {
  using attnjit::InvalidArgument;
  if (n < 0 || (n > 0 && (!names || !tensors)))
    throw InvalidArgument(fmt::format("{}: args: tensors: expected num_tensors >= 0 with non-NULL names and tensors, "
                                      "got num_tensors {}", op, n));
  if (n > attnjit::TensorArgs::kMaxArgs)
    throw InvalidArgument(fmt::format("{}: args: tensors: expected at most {} named tensors, got {}", op,
                                      attnjit::TensorArgs::kMaxArgs, n));
  attnjit::TensorArgs args;
  for (int i = 0; i < n; ++i) {
    if (!names[i]) throw InvalidArgument(fmt::format("{}: args: tensors: expected a name for tensor {}, got NULL", op, i));
    const std::string_view name(names[i]);
    if (args.find(name))
      throw InvalidArgument(fmt::format("{}: args: {}: expected each tensor name once, got it twice", op, name));
    args.set(name, attnjit::detail::checked_from_dlpack(tensors[i], op, name));
  }
  return args;
}

void require(const void* p, const char* what) {
  if (!p) throw attnjit::InvalidArgument(fmt::format("{}: expected a non-NULL pointer, got NULL", what));
}

}  // namespace

// The hardened entry steps, shared with c_api_info.cpp (declared in c_api_handles.hpp).
namespace attnjit::capi {
void track_handle(const void* h) { track(h); }
bool live_handle(const void* h) { return live(h); }
nlohmann::json parse_config(const char* text, const char* what) { return parse_json(text, what); }
attnjit::TensorArgs tensor_args(std::string_view op, int n, const char* const* names, const DLTensor* tensors) {
  return to_args(op, n, names, tensors);
}
}  // namespace attnjit::capi

extern "C" {

attnjit_status attnjit_runtime_create(const char* options_json, attnjit_runtime** out) {
  return guarded({}, [&] {
    require(out, "out");
    *out = nullptr;
    auto options = attnjit::RuntimeOptions::from_json(parse_json(options_json, "options_json").dump());
    auto* rt = new attnjit_runtime(std::move(options));
    track(rt);
    *out = rt;
  });
}

void attnjit_runtime_destroy(attnjit_runtime* rt) {
  if (rt && untrack(rt)) delete rt;
}

attnjit_status attnjit_plan_create(attnjit_runtime* rt, const char* op, const char* config_json, int num_tensors,
                                   const char* const* names, const DLTensor* tensors, attnjit_plan** out) {
  return guarded(op ? op : "", [&] {
    require(rt, "runtime");
    require(op, "op");
    require(out, "out");
    *out = nullptr;
    if (!live(rt)) throw attnjit::InvalidArgument("runtime: expected a live runtime, got a destroyed or foreign handle");
    auto args = to_args(op, num_tensors, names, tensors);
    auto plan = attnjit::Op(rt->runtime.impl().op(op, parse_json(config_json, "config_json"))).plan(args);
    auto* p = new attnjit_plan{std::move(plan), op};
    track(p);
    *out = p;
  });
}

attnjit_status attnjit_plan_execute(attnjit_plan* plan, int num_tensors, const char* const* names,
                                    const DLTensor* tensors, void* stream) {
  const bool known = plan && live(plan);
  return guarded(known ? std::string_view(plan->op) : std::string_view(), [&] {
    require(plan, "plan");
    if (!known) throw attnjit::InvalidArgument("plan: expected a live plan, got a destroyed or foreign handle");
    plan->plan.execute(to_args(plan->op, num_tensors, names, tensors), stream);
  });
}

void attnjit_plan_destroy(attnjit_plan* plan) {
  if (plan && untrack(plan)) delete plan;
}

attnjit_status attnjit_run(attnjit_runtime* rt, const char* op, const char* config_json, int num_tensors,
                           const char* const* names, const DLTensor* tensors, void* stream) {
  return guarded(op ? op : "", [&] {
    require(rt, "runtime");
    require(op, "op");
    if (!live(rt)) throw attnjit::InvalidArgument("runtime: expected a live runtime, got a destroyed or foreign handle");
    auto args = to_args(op, num_tensors, names, tensors);
    attnjit::Op(rt->runtime.impl().op(op, parse_json(config_json, "config_json"))).run(args, stream);
  });
}

const char* attnjit_last_error(void) { return g_last_error.c_str(); }

}  // extern "C"
