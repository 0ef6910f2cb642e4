// The paged attention core shared by gqa_paged_fwd and mha_decode_paged: both ops run one kernel family
// (the portable attention kernel over paged K/V, its split-KV decode path, and on sm_90a the hopper
// prefill and decode kernels), so the planner pieces and the kernel plan live here and each op file
// holds its config, argument checks, signature and registration.
#pragma once
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "jit/kernel_spec.hpp"
#include "ops/attention/attention_kernel.hpp"
#include "ops/base/context.hpp"
#include "ops/base/op.hpp"
#include "ops/paged/paged_call.hpp"
#include "ops/paged/paged_decode_hopper.hpp"

namespace attnjit::ops {

inline constexpr const char* kGqaPaged = "gqa_paged_fwd";
inline constexpr const char* kMhaDecode = "mha_decode_paged";

// Validates a call with the op's configuration (held by value: a plan may outlive its op).
using PagedValidate = std::function<PagedAttentionCall(const TensorArgs&, detail::Placement)>;

// validate_inputs: the caller contracts of §2.9 and §2.11 on host copies of the contract-bearing tensors
// (`gqa` null for mha_decode_paged).
void check_contents(const char* op, const PagedAttentionCall& call, const GqaConfig* gqa, void* stream);

// The kernels of a paged plan: the prefill tile, the split-KV decode tile and the combine.
std::vector<jit::KernelSpec> paged_specs(const char* op, const AttentionKernelChoice& main, const std::string& decode_tile);
AttentionKernelChoice choose_paged(const char* op, const GqaConfig& gqa, const PagedAttentionCall& call,
                                   const std::string& arch, const std::string& tile);
// The hopper prefill kernel of gqa_paged_fwd where it serves ('auto'), or the refusal of an explicit 'hopper'.
std::optional<HopperAttentionChoice> paged_hopper_choice(const char* op, detail::Backend backend, const GqaConfig& gqa,
                                                         const PagedAttentionCall& call, const std::string& arch);
// The hopper decode kernel where it serves the plan's static signature.
std::optional<HopperDecodeChoice> paged_hopper_decode_choice(const char* op, detail::Backend backend,
                                                             const GqaConfig& gqa, const PagedAttentionCall& call,
                                                             const std::string& arch);
// Every kernel choice a plan of either op makes for a call (and the backend refusals), in one place:
// the kernel plan loads what it returns and kernels_for lists it, so the two cannot drift.
struct PagedChoices {
  AttentionKernelChoice main;                       // the prefill tile (its decode variant follows)
  std::optional<HopperAttentionChoice> hopper;      // the hopper prefill kernel (gqa_paged_fwd)
  std::optional<HopperDecodeChoice> hopper_decode;  // the hopper decode kernel
};
PagedChoices paged_choices(const char* op, detail::Backend backend, const GqaConfig& gqa, const PagedAttentionCall& call,
                           const std::string& arch, const Tuning& tuning);
// The kernels a kernel plan for `call` launches: paged_specs of the choices, then the hopper kernels.
std::vector<jit::KernelSpec> paged_kernels_for(const char* op, detail::Backend backend, const GqaConfig& gqa,
                                               const PagedAttentionCall& call, const std::string& arch,
                                               const Tuning& tuning);
// A kernel plan for a validated device call of either op.
std::shared_ptr<const detail::PlanImpl> paged_kernel_plan(OpContext& ctx, const char* op, detail::Backend backend,
                                                          const GqaConfig& gqa, bool validate_inputs,
                                                          PagedValidate validate, const PagedAttentionCall& call);
// Every kernel 'auto' can select for either op on `arch` (the warm-up).
std::vector<jit::KernelSpec> paged_default_matrix(const char* op, bool mha, const std::string& arch);

}  // namespace attnjit::ops
