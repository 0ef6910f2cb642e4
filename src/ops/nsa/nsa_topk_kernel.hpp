// The nsa_topk kernels (templates/nsa/nsa_topk.cuh: portable; nsa_topk_hopper.cuh: the same kernel with
// its Q K^T on wgmma, sm_90a) as the op's planner sees them: the choice that selects an instantiation
// (backend, dtype, D, tokens per CTA, tile), its KernelSpec, the warm-up entries and the kernel plan.
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
  int bn = 0;      // k_cmp chunks per tile
  int stages = 0;  // cp.async ring depth
  int window = 0;  // candidates a warp's importance slice holds
  bool hopper = false;
  std::string arch;
  int smem_bytes() const;
  int threads() const;
};

// The kernel for a call of `dtype`, head dim D and group size `group` on `arch` under `backend`
// ('hopper': the wgmma kernel, sm_90a, else Unsupported naming the gap; 'portable': the mma.sync kernel,
// sm_80+; 'auto': the hopper kernel on sm_90a, else the portable one; see choose_topk_kernel's note).
// `tile_override`: "BNxSTAGES[xWINDOW]" (ATTNJIT_TUNE_NSA_TOPK_TILE), "" = the planner's tile.
TopkKernelChoice choose_topk_kernel(const char* op, DType dtype, int64_t D, int64_t group, detail::Backend backend,
                                    const std::string& arch, const std::string& tile_override = "");
jit::KernelSpec topk_kernel_spec(const char* op, const TopkKernelChoice& k);
// The warm-up entries of (dtype, D): the kernels of group sizes 16, 32 and >= 48, portable and (sm_90a)
// hopper.
std::vector<jit::KernelSpec> topk_warmup_specs(const char* op, DType dtype, int D, const std::string& arch);

// The kernel plan of a validated device call: execute() revalidates the call, checks the metadata when
// `cfg.validate_inputs`, and launches the kernel.
std::shared_ptr<const detail::PlanImpl> make_topk_plan(OpContext& ctx, const char* op, const TopkConfig& cfg,
                                                       const TopkCall& call, detail::Backend backend);

}  // namespace attnjit::ops::nsa
