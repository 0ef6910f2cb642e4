// What attnjit's own tools (the CLI in tools/cli/, the fuzzers) need beyond the public API, in one narrow
// header: the compile targets, the kernels an op call or an op's warm-up selects, compiling and loading one
// kernel, the disk cache, the gqa_bwd absolute-value reference of the test runner, and (below this layer,
// re-exported) the JIT's kernel, cache, driver and NVRTC types. Tools include this and the public headers,
// never runtime/, ops/ or registry internals. Not installed; not part of the C++ or C ABI.
#pragma once
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "attnjit/runtime.hpp"
#include "attnjit/tensor.hpp"
#include "jit/cuda_driver.hpp"
#include "jit/disk_cache.hpp"
#include "jit/embedded_templates.hpp"
#include "jit/kernel_cache.hpp"
#include "jit/kernel_spec.hpp"
#include "jit/nvrtc_compiler.hpp"

namespace attnjit::tools {

// The compile target without a device: options.arch, else device 0's arch, else sm_90a.
std::string default_arch(Runtime& rt);
// The compile target for `device`: options.arch when set, else the device's own arch.
std::string arch_for_device(Runtime& rt, int device);

// Every op's name and the kernels its warm-up compiles for `arch`, in `attnjit info` order.
struct WarmupMatrix {
  std::string op;
  std::vector<jit::KernelSpec> kernels;
};
std::vector<WarmupMatrix> warmup_matrices(const std::string& arch);
// One op's warm-up kernels; an unknown op name throws InvalidArgument naming the known ones.
std::vector<jit::KernelSpec> warmup_matrix(std::string_view op, const std::string& arch);

// The kernels a kernel-impl plan of `op` with `config` would launch for `tensors` on `arch` (the call is
// validated as a device call; addresses are checked for alignment only). Throws what plan() would.
std::vector<jit::KernelSpec> kernels_for(Runtime& rt, std::string_view op, const nlohmann::json& config,
                                         const TensorArgs& tensors, const std::string& arch);

// One kernel through the runtime's caches (memory, disk, else NVRTC), and loaded on `device`.
std::shared_ptr<const jit::CompiledKernel> compile(Runtime& rt, const jit::KernelSpec& spec);
std::shared_ptr<const jit::LoadedKernel> load(Runtime& rt, const jit::KernelSpec& spec, int device);
// The runtime's disk cache; nullptr when it is disabled.
jit::DiskCache* disk_cache(Runtime& rt);

// gqa_bwd's reference on absolute values (|q|, |k|, |v|, |do|), written into the call's gradients: the
// scale the test runner's "grad" comparison measures errors against.
void gqa_bwd_reference_abs(const nlohmann::json& config, const TensorArgs& tensors);

}  // namespace attnjit::tools
