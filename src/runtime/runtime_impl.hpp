// The runtime's internals: options, the kernel cache, device facts and the op instance cache; the
// OpContext the ops see.
#pragma once
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "attnjit/runtime.hpp"
#include "jit/kernel_cache.hpp"
#include "ops/base/context.hpp"
#include "ops/registry.hpp"

namespace attnjit::detail {

class RuntimeImpl final : public ops::OpContext {
 public:
  explicit RuntimeImpl(RuntimeOptions options);

  const RuntimeOptions& options() const { return options_; }
  jit::KernelCache& kernels() override { return *kernels_; }
  const ops::Tuning& tuning() const override { return tuning_; }

  // The compile target for a device: options.arch when set, else the device's own arch.
  std::string arch_for_device(int device) override;
  // The compile target without a device: options.arch, else device 0's arch, else sm_90a.
  std::string default_arch();
  int sm_count(int device) override;

  std::shared_ptr<OpInstance> op(std::string_view name, const nlohmann::json& config);

 private:
  RuntimeOptions options_;
  ops::Tuning tuning_;
  std::unique_ptr<jit::KernelCache> kernels_;
  std::mutex mutex_;
  std::map<std::string, std::shared_ptr<OpInstance>, std::less<>> ops_;
  std::map<int, std::pair<std::string, int>> device_facts_;  // device -> (arch, SM count)
};

}  // namespace attnjit::detail
