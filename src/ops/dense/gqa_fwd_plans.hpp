// gqa_fwd and gqa_varlen_fwd inside the op: what gqa_fwd.cpp (the op) and the kernel plans of
// gqa_fwd_portable.cpp and gqa_fwd_hopper.cpp share. Not for other ops.
#pragma once
#include <memory>

#include "dense/gqa_fwd_params.cuh"
#include "jit/kernel_cache.hpp"
#include "ops/attention/attention_kernel.hpp"
#include "ops/attention/gqa_call.hpp"
#include "ops/base/op.hpp"

namespace attnjit::ops {

// validate_inputs: the caller contract of §2.7/§2.8 on host copies of the contract-bearing tensors.
void check_gqa_contents(const GqaConfig& cfg, const GqaCall& call, void* stream);
// The kernel parameters both backends share.
kernels::GqaFwdParams gqa_fwd_params(const GqaConfig& cfg, const GqaCall& call);

// The static signature a plan's kernel was built for; execute() rejects a call with another one.
struct GqaFwdSignature {
  DType in_dtype, compute_dtype;
  int D;
  bool sinks;
};
// execute()'s validation, shared by both backends' plans: the call against the contract, then against
// the plan's signature and device; on success the plan's device is bound.
GqaCall validate_gqa_execute(const GqaConfig& cfg, const TensorArgs& tensors, const GqaFwdSignature& sig,
                             const jit::LoadedKernel& kernel);

// The portable backend's plan over `kernel`, the instantiation of `choice`.
std::shared_ptr<const detail::PlanImpl> make_gqa_fwd_portable_plan(const GqaConfig& cfg, AttentionKernelChoice choice,
                                                                   std::shared_ptr<const jit::LoadedKernel> kernel);
// The hopper backend's plan over `kernel`, the instantiation of `choice`; sm_count caps the persistent
// kernel's grid (one CTA per SM).
std::shared_ptr<const detail::PlanImpl> make_gqa_fwd_hopper_plan(const GqaConfig& cfg, HopperAttentionChoice choice,
                                                                 std::shared_ptr<const jit::LoadedKernel> kernel,
                                                                 int sm_count);

}  // namespace attnjit::ops
