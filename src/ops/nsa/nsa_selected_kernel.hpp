// The nsa_selected_fwd kernel (templates/nsa/nsa_selected_fwd.cuh, portable) as the op's planner sees it:
// the choice that selects an instantiation (dtype, D, row groups), its KernelSpec, the warm-up entries
// and the kernel plan. Backend 'hopper' has no kernel for this op yet and raises Unsupported.
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

struct SelectedKernelChoice {
  DType dtype = DType::kBF16;
  int D = 0;
  int warps = 0;  // row groups of 16: g / 16 when g <= 64, else 4 (tiles of 64 rows)
  int bn = 0, stages = 0;  // key slots per tile, ring depth
  int ksplit = 1;          // warps per row group, splitting each key tile
  std::string arch;
  int smem_bytes() const;
  int threads() const;
};

// The kernel for a call of `dtype`, head dim D and group size `group` on `arch` under `backend`
// ('hopper': Unsupported, not built yet; 'auto' and 'portable': the portable kernel, sm_80+).
// `tile_override`: "BNxSTAGES[xKSPLIT]" (ATTNJIT_TUNE_NSA_SELECTED_TILE), "" = the planner's tile.
SelectedKernelChoice choose_selected_kernel(const char* op, DType dtype, int64_t D, int64_t group,
                                            detail::Backend backend, const std::string& arch,
                                            const std::string& tile_override = "");
jit::KernelSpec selected_kernel_spec(const char* op, const SelectedKernelChoice& k);
// The warm-up entries of (dtype, D): the kernels of group sizes 16, 32 and >= 64.
std::vector<jit::KernelSpec> selected_warmup_specs(const char* op, DType dtype, int D, const std::string& arch);

// The kernel plan of a validated device call: execute() revalidates the call, checks the metadata and
// block_counts when `cfg.validate_inputs`, and launches the kernel.
std::shared_ptr<const detail::PlanImpl> make_selected_plan(OpContext& ctx, const char* op, const SelectedConfig& cfg,
                                                           const SelectedCall& call, detail::Backend backend);

}  // namespace attnjit::ops::nsa
