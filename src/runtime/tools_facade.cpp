#include "runtime/tools_facade.hpp"

#include "ops/dense/gqa_bwd_call.hpp"
#include "ops/registry.hpp"
#include "runtime/runtime_impl.hpp"

namespace attnjit::tools {

std::string default_arch(Runtime& rt) { return rt.impl().default_arch(); }

std::string arch_for_device(Runtime& rt, int device) { return rt.impl().arch_for_device(device); }

std::vector<WarmupMatrix> warmup_matrices(const std::string& arch) {
  std::vector<WarmupMatrix> out;
  for (const auto& def : detail::op_definitions()) out.push_back({def.name, def.default_matrix(arch)});
  return out;
}

std::vector<jit::KernelSpec> warmup_matrix(std::string_view op, const std::string& arch) {
  return detail::find_op(op).default_matrix(arch);
}

std::vector<jit::KernelSpec> kernels_for(Runtime& rt, std::string_view op, const nlohmann::json& config,
                                         const TensorArgs& tensors, const std::string& arch) {
  return rt.impl().op(op, config)->kernels_for(tensors, arch);
}

std::shared_ptr<const jit::CompiledKernel> compile(Runtime& rt, const jit::KernelSpec& spec) {
  return rt.impl().kernels().compiled(spec);
}

std::shared_ptr<const jit::LoadedKernel> load(Runtime& rt, const jit::KernelSpec& spec, int device) {
  return rt.impl().kernels().loaded(spec, device);
}

jit::DiskCache* disk_cache(Runtime& rt) { return rt.impl().kernels().disk(); }

void gqa_bwd_reference_abs(const nlohmann::json& config, const TensorArgs& tensors) {
  ops::gqa_bwd_reference_abs(config, tensors);
}

}  // namespace attnjit::tools
