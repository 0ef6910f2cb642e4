// The nsa_compressed_fwd kernels as the op's planner sees them. Both backends are the shared attention
// kernels (templates/dense/gqa_fwd.cuh, gqa_fwd_hopper.cuh) in KV mode 'compressed': packed queries with
// `offsets` as their request boundaries, packed compressed keys with `chunk_offsets`, and the causal band
// with query position p at key position (p + 1) / bs - 1, so a row sees exactly the complete chunks
// c < (p + 1) / bs. Rows are (token, head of the group), so the group's heads share every chunk tile.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "jit/kernel_spec.hpp"
#include "ops/base/context.hpp"
#include "ops/base/op.hpp"
#include "ops/nsa/nsa_common.hpp"

namespace attnjit::ops::nsa {

// Why the kernels cannot serve a call with these static properties ("" when they can): DK must equal DV
// (the attention kernels keep one head dim for Q, K and V).
std::string compressed_kernel_gap(int64_t DK, int64_t DV);

// The warm-up entries on `arch`: both dtypes at D 64 and 128, portable, and hopper where `arch` has it.
std::vector<jit::KernelSpec> compressed_warmup_specs(const char* op, const std::string& arch);

// Whether a validated device call takes the hopper kernel under `backend` (Unsupported where no kernel
// serves it: DK != DV, too many rows, 'hopper' with a gap). Cheap: the per-call plan-cache signature.
bool compressed_uses_hopper(const char* op, detail::Backend backend, const CompressedCall& call, const std::string& arch);

// The kernels `kernels_for` reports for a validated device call (the one plan() would load).
std::vector<jit::KernelSpec> compressed_kernels_for(const char* op, const CompressedConfig& cfg, const CompressedCall& call,
                                                    detail::Backend backend, const std::string& arch);

// The kernel plan of a validated device call on its device's `arch`: the hopper kernel when `hopper`, else
// the portable one, as compressed_uses_hopper decided (which also made the static checks) for this call,
// backend and arch. execute() revalidates the call and checks the metadata when `cfg.validate_inputs`.
std::shared_ptr<const detail::PlanImpl> make_compressed_plan(OpContext& ctx, const char* op, const CompressedConfig& cfg,
                                                             const CompressedCall& call, const std::string& arch,
                                                             bool hopper);

}  // namespace attnjit::ops::nsa
