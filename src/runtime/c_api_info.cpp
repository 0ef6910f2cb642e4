// The C ABI's version, introspection, warm-up, caller-workspace and logging entry points
// (the end of include/attnjit/attnjit.h).
#include <fmt/format.h>
#include <spdlog/sinks/base_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>

#include "attnjit/attnjit.h"
#include "runtime/c_api_handles.hpp"
#include "base/logging.hpp"
#include "ops/registry.hpp"
#include "runtime/op_signatures.hpp"
#include "runtime/runtime_impl.hpp"

using attnjit::capi::g_last_error;

namespace {

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

void require(const void* p, const char* what) {
  if (!p) throw attnjit::InvalidArgument(fmt::format("{}: expected a non-NULL pointer, got NULL", what));
}

char* dup_string(const std::string& s) {
  char* out = static_cast<char*>(std::malloc(s.size() + 1));
  if (!out) throw std::bad_alloc();
  std::memcpy(out, s.c_str(), s.size() + 1);
  return out;
}

std::vector<std::string> split_ops(const char* ops) {
  std::vector<std::string> out;
  if (!ops) return out;
  std::string cur;
  for (const char* p = ops;; ++p) {
    if (*p == ',' || *p == '\0') {
      cur.erase(0, cur.find_first_not_of(' '));
      cur.erase(cur.find_last_not_of(' ') + 1);
      if (!cur.empty()) out.push_back(cur);
      cur.clear();
      if (!*p) break;
    } else {
      cur += *p;
    }
  }
  return out;
}

// Forwards each record to the C callback: level, the formatted message, the caller's pointer.
class CallbackSink final : public spdlog::sinks::base_sink<std::mutex> {
 public:
  CallbackSink(attnjit_log_callback fn, void* user) : fn_(fn), user_(user) {}

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    const std::string text(msg.payload.data(), msg.payload.size());
    fn_(static_cast<int>(msg.level), text.c_str(), user_);
  }
  void flush_() override {}

 private:
  attnjit_log_callback fn_;
  void* user_;
};

}  // namespace

extern "C" {

const char* attnjit_version(void) { return attnjit::version(); }

void attnjit_free_string(char* s) { std::free(s); }

attnjit_status attnjit_list_ops(char** out_json) {
  return guarded([&] {
    require(out_json, "out_json");
    *out_json = nullptr;
    nlohmann::json names = nlohmann::json::array();
    for (const auto& n : attnjit::Runtime::op_names()) names.push_back(n);
    *out_json = dup_string(names.dump());
  });
}

attnjit_status attnjit_op_info(const char* op, char** out_json) {
  return guarded([&] {
    require(out_json, "out_json");
    *out_json = nullptr;
    require(op, "op");
    *out_json = dup_string(attnjit::detail::op_signature(op).dump());
  });
}

attnjit_status attnjit_warmup(attnjit_runtime* rt, const char* ops, const char* arch, int jobs,
                              attnjit_warmup_result* out) {
  attnjit_warmup_result result{0, 0, 0, 0};
  if (out) *out = result;
  attnjit_status first_status = ATTNJIT_OK;
  std::string first_message;
  attnjit_status st = guarded([&] {
    require(rt, "runtime");
    auto& impl = rt->runtime.impl();
    const std::vector<std::string> wanted = split_ops(ops);
    for (const auto& name : wanted) attnjit::detail::find_op(name);  // unknown names are an error
    const std::string target = arch && *arch ? std::string(arch) : impl.default_arch();
    std::vector<attnjit::jit::KernelSpec> specs;
    for (const auto& def : attnjit::detail::op_definitions()) {
      if (!wanted.empty() && std::find(wanted.begin(), wanted.end(), def.name) == wanted.end()) continue;
      for (auto& s : def.default_matrix(target)) specs.push_back(std::move(s));
    }
    const int n_jobs = jobs > 0 ? jobs : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    std::atomic<size_t> next{0};
    std::atomic<int> compiled{0}, hits{0}, failed{0};
    std::mutex first_mutex;
    auto worker = [&] {
      for (size_t i = next++; i < specs.size(); i = next++) {
        try {
          auto k = impl.kernels().compiled(specs[i]);
          (k->from_disk ? hits : compiled)++;
        } catch (const std::exception& e) {
          failed++;
          std::lock_guard<std::mutex> g(first_mutex);
          if (first_message.empty()) {
            first_message = e.what();
            auto* ae = dynamic_cast<const attnjit::Error*>(&e);
            first_status = ae ? static_cast<attnjit_status>(ae->status()) : ATTNJIT_INTERNAL;
          }
        }
      }
    };
    std::vector<std::thread> threads;
    for (int j = 0; j < std::min<int>(n_jobs, static_cast<int>(std::max<size_t>(specs.size(), 1))); ++j)
      threads.emplace_back(worker);
    for (auto& t : threads) t.join();
    result = {static_cast<int>(specs.size()), compiled.load(), hits.load(), failed.load()};
  });
  if (out) *out = result;
  if (st != ATTNJIT_OK) return st;
  if (result.failed) {
    g_last_error = fmt::format("warmup: {} of {} kernels failed; the first: {}", result.failed, result.kernels,
                               first_message);
    return first_status;
  }
  return ATTNJIT_OK;
}

attnjit_status attnjit_plan_workspace_size(const attnjit_plan* plan, size_t* bytes) {
  return guarded([&] {
    require(plan, "plan");
    require(bytes, "bytes");
    *bytes = plan->plan.workspace_bytes();
  });
}

attnjit_status attnjit_plan_create_with_workspace(attnjit_runtime* rt, const char* op, const char* config_json,
                                                  int num_tensors, const char* const* names,
                                                  const DLTensor* tensors, void* workspace, size_t workspace_bytes,
                                                  attnjit_plan** out) {
  return guarded([&] {
    require(rt, "runtime");
    require(op, "op");
    require(out, "out");
    *out = nullptr;
    if (!attnjit::capi::live_handle(rt))
      throw attnjit::InvalidArgument("runtime: expected a live runtime, got a destroyed or foreign handle");
    auto args = attnjit::capi::tensor_args(op, num_tensors, names, tensors);
    auto plan = rt->runtime.impl().op(op, attnjit::capi::parse_config(config_json, "config_json"));
    auto* p = new attnjit_plan{attnjit::Op(plan).plan(args, workspace, workspace_bytes), op};
    attnjit::capi::track_handle(p);
    *out = p;
  });
}

attnjit_status attnjit_plan_set_workspace(attnjit_plan* plan, void* workspace, size_t bytes) {
  return guarded([&] {
    require(plan, "plan");
    plan->plan.set_workspace(workspace, bytes);
  });
}

attnjit_status attnjit_set_log_callback(attnjit_log_callback callback, void* user_data) {
  return guarded([&] {
    auto& l = attnjit::logger();
    std::shared_ptr<spdlog::sinks::sink> sink;
    if (callback) {
      sink = std::make_shared<CallbackSink>(callback, user_data);
    } else {
      sink = std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
      sink->set_pattern("[attnjit %L] %v");
    }
    l.sinks().clear();
    l.sinks().push_back(std::move(sink));
  });
}

attnjit_status attnjit_set_log_level(const char* level) {
  return guarded([&] {
    require(level, "level");
    static const char* const kNames[] = {"trace", "debug", "info", "warn", "error", "critical", "off"};
    for (const char* n : kNames) {
      if (std::strcmp(level, n) == 0) {
        attnjit::set_log_level(level);
        return;
      }
    }
    throw attnjit::InvalidArgument(fmt::format(
        "log level: expected one of trace, debug, info, warn, error, critical, off, got \"{}\"", level));
  });
}

}  // extern "C"
