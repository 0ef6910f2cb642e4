// What an op instance and its plans see of the runtime: the kernel cache, the compile target and SM
// count of a device, and the tuning overrides. runtime/ implements it; ops never see the runtime itself.
#pragma once
#include <string>

#include "jit/kernel_cache.hpp"
#include "ops/base/tuning.hpp"

namespace attnjit::ops {

class OpContext {
 public:
  virtual ~OpContext() = default;
  virtual jit::KernelCache& kernels() = 0;
  // The compile target for a device: the runtime's arch option when set, else the device's own arch.
  virtual std::string arch_for_device(int device) = 0;
  virtual int sm_count(int device) = 0;
  virtual const Tuning& tuning() const = 0;
};

}  // namespace attnjit::ops
