// The nsa_selected_fwd kernels as the op's planner sees them: portable (templates/nsa/nsa_selected_fwd.cuh,
// mma.sync) and hopper (nsa_selected_fwd_hopper.cuh, wgmma on the transposed products); the choice that
// selects an instantiation (backend, dtype, D, rows a CTA, tile), its KernelSpec, the warm-up entries and
// the kernel plan.
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
  bool hopper = false;
  DType dtype = DType::kBF16;
  int D = 0;
  int warps = 0;  // row groups of 16: g / 16 when g <= 64, else 4 (tiles of 64 rows); hopper: heads / 16
  int bn = 0, stages = 0;  // key slots per tile (hopper: 64), ring depth
  int ksplit = 1;          // warps per row group, splitting each key tile (hopper: 1)
  int heads() const { return 16 * warps; }  // query heads a CTA
  int m_tiles(int64_t group) const { return static_cast<int>((group + heads() - 1) / heads()); }
  std::string arch;
  int smem_bytes() const;
  int threads() const;
};

// The kernel for a call of `dtype`, head dim D and group size `group` on `arch` under `backend`
// ('hopper': sm_90a; 'portable': sm_80+; 'auto': see the choice's NOTE in the .cpp).
// `tile_override`: "BNxSTAGES[xKSPLIT]" (ATTNJIT_TUNE_NSA_SELECTED_TILE; hopper: "64xSTAGES"), "" = the
// planner's tile.
SelectedKernelChoice choose_selected_kernel(const char* op, DType dtype, int64_t D, int64_t group,
                                            detail::Backend backend, const std::string& arch,
                                            const std::string& tile_override = "");
jit::KernelSpec selected_kernel_spec(const char* op, const SelectedKernelChoice& k);
// The warm-up entries of (dtype, D): the kernels of group sizes 16, 32 and >= 64, both backends on sm_90a.
std::vector<jit::KernelSpec> selected_warmup_specs(const char* op, DType dtype, int D, const std::string& arch);

// The kernel plan of a validated device call: execute() revalidates the call, checks the metadata and
// block_counts when `cfg.validate_inputs`, and launches the kernel.
std::shared_ptr<const detail::PlanImpl> make_selected_plan(OpContext& ctx, const char* op, const SelectedConfig& cfg,
                                                           const SelectedCall& call, detail::Backend backend);

}  // namespace attnjit::ops::nsa
