// The op base classes: an OpDefinition per SPEC.md op (name, factory, warm-up matrix), an OpInstance per
// (op, config) holding a signature -> plan map, PlanImpl (what Plan wraps) and the ConfigReader.
// The list of ops is ops/registry.hpp.
#pragma once
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "attnjit/plan.hpp"
#include "attnjit/tensor.hpp"
#include "jit/kernel_spec.hpp"

namespace attnjit::ops {
class OpContext;
}

namespace attnjit::detail {

enum class Impl { kKernel, kReference };
enum class Backend { kAuto, kPortable, kHopper };
std::string_view backend_name(Backend b);

class PlanImpl {
 public:
  virtual ~PlanImpl() = default;
  virtual void execute(const TensorArgs& tensors, void* stream) const = 0;
  virtual std::string describe() const = 0;
  virtual std::size_t workspace_bytes() const { return 0; }
  // Called by Op::plan() with every call's tensors (already validated): a plan that needs device
  // scratch reserves it here for these shapes (runtime/workspace.hpp). Never called by execute().
  virtual void prepare(const TensorArgs& tensors) const { (void)tensors; }
};

// Reads an op's config JSON: rejects unknown keys (param) and wrong types, naming the key.
class ConfigReader {
 public:
  ConfigReader(std::string_view op, const nlohmann::json& config, std::vector<std::string> keys);
  bool get_bool(const std::string& key, bool fallback) const;
  double get_number(const std::string& key, double fallback) const;
  std::string get_string(const std::string& key, const std::string& fallback) const;
  bool has(const std::string& key) const { return config_.contains(key) && !config_[key].is_null(); }
  Impl impl() const { return impl_; }
  Backend backend() const { return backend_; }

 private:
  std::string op_;
  const nlohmann::json& config_;
  Impl impl_ = Impl::kKernel;
  Backend backend_ = Backend::kAuto;
};

class OpInstance {
 public:
  OpInstance(ops::OpContext& ctx, std::string name, Impl impl, Backend backend)
      : ctx_(ctx), name_(std::move(name)), impl_(impl), backend_(backend) {}
  virtual ~OpInstance() = default;

  const std::string& name() const { return name_; }
  Impl impl() const { return impl_; }
  Backend backend() const { return backend_; }

  // Checks the tensor list, then plan_for(): the cached plan of the call's static signature (built
  // once). Errors carry the op's name.
  Plan plan(const TensorArgs& tensors);
  // Compile-only: the kernels a kernel plan for this call would launch on `arch`. Validates the
  // call as a device call (addresses are only checked for alignment, never dereferenced).
  virtual std::vector<jit::KernelSpec> kernels_for(const TensorArgs& tensors, const std::string& arch) const = 0;

 protected:
  // Validates the call once (as host or device tensors, by impl) and returns
  // cached(signature, tensors, build), where `build` makes the plan from the validated call.
  virtual Plan plan_for(const TensorArgs& tensors) = 0;

  // The plan cached under `sig`; on a miss, `build()` (a callable returning
  // std::shared_ptr<const PlanImpl>) makes it. Either way the plan prepare()s for `tensors`.
  template <class Build>
  Plan cached(std::string sig, const TensorArgs& tensors, Build&& build) {
    {
      std::lock_guard<std::mutex> g(mutex_);
      auto it = plans_.find(sig);
      if (it != plans_.end()) {
        it->second->prepare(tensors);
        return Plan(it->second);
      }
    }
    // NOTE: built outside the lock (compilation can take a second); the kernel cache already makes
    // concurrent builds of one kernel share a single compile.
    std::shared_ptr<const PlanImpl> p = build();
    std::shared_ptr<const PlanImpl> kept;
    {
      std::lock_guard<std::mutex> g(mutex_);
      kept = plans_.emplace(std::move(sig), std::move(p)).first->second;
    }
    kept->prepare(tensors);
    return Plan(kept);
  }

  ops::OpContext& ctx_;
  std::string name_;
  Impl impl_;
  Backend backend_;

 private:
  std::mutex mutex_;
  std::unordered_map<std::string, std::shared_ptr<const PlanImpl>> plans_;
};

struct OpDefinition {
  std::string name;
  std::function<std::shared_ptr<OpInstance>(ops::OpContext& ctx, const nlohmann::json& config)> create;
  // Every kernel the op can select that the warm-up precompiles for `arch`.
  std::function<std::vector<jit::KernelSpec>(const std::string& arch)> default_matrix;
};

}  // namespace attnjit::detail
