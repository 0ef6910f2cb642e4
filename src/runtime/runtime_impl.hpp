// The runtime's internals: options, the kernel cache, device facts and the op instance cache.
#pragma once
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "attnjit/runtime.hpp"
#include "jit/kernel_cache.hpp"
#include "runtime/op_registry.hpp"

namespace attnjit::detail {

class RuntimeImpl {
 public:
  explicit RuntimeImpl(RuntimeOptions options);

  const RuntimeOptions& options() const { return options_; }
  jit::KernelCache& kernels() { return *kernels_; }

  // The compile target for a device: options.arch when set, else the device's own arch.
  std::string arch_for_device(int device);
  // The compile target without a device: options.arch, else device 0's arch, else sm_90a.
  std::string default_arch();
  int sm_count(int device);

  std::shared_ptr<OpInstance> op(std::string_view name, const nlohmann::json& config);

 private:
  RuntimeOptions options_;
  std::unique_ptr<jit::KernelCache> kernels_;
  std::mutex mutex_;
  std::map<std::string, std::shared_ptr<OpInstance>, std::less<>> ops_;
  std::map<int, std::pair<std::string, int>> device_facts_;  // device -> (arch, SM count)
};

}  // namespace attnjit::detail
