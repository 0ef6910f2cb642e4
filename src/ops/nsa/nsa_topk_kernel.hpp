// The nsa_topk kernel (templates/nsa/nsa_topk.cuh, portable) as the op's planner sees it: the choice that
// selects an instantiation (dtype, D, tokens per CTA), its KernelSpec, the warm-up entries and the kernel
// plan. Backend 'hopper' has no kernel for this op yet and raises Unsupported.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "attnjit/tensor.hpp"
#include "jit/kernel_spec.hpp"
#include "ops/base/context.hpp"
#include "ops/base/op.hpp"
#include "ops/nsa/nsa_common.hpp"

namespace attnjit::ops::nsa {

struct TopkKernelChoice {
  DType dtype = DType::kBF16;
  int D = 0;
  int tokens = 0;  // tokens per CTA: 64 / G for G 16 and 32, else 1
  std::string arch;
  int smem_bytes() const;
  int threads() const;
};

// The kernel for a call of `dtype`, head dim D and group size `group` on `arch` under `backend`
// ('hopper': Unsupported, not built yet; 'auto' and 'portable': the portable kernel, sm_80+).
TopkKernelChoice choose_topk_kernel(const char* op, DType dtype, int64_t D, int64_t group, detail::Backend backend,
                                    const std::string& arch);
jit::KernelSpec topk_kernel_spec(const char* op, const TopkKernelChoice& k);
// The warm-up entries of (dtype, D): the kernels of group sizes 16, 32 and >= 48.
std::vector<jit::KernelSpec> topk_warmup_specs(const char* op, DType dtype, int D, const std::string& arch);

// The kernel plan of a validated device call: execute() revalidates the call, checks the metadata when
// `cfg.validate_inputs`, and launches the kernel.
std::shared_ptr<const detail::PlanImpl> make_topk_plan(OpContext& ctx, const char* op, const TopkConfig& cfg,
                                                       const TopkCall& call, detail::Backend backend);

}  // namespace attnjit::ops::nsa
