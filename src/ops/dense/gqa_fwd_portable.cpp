// gqa_fwd and gqa_varlen_fwd on the portable backend (mma.sync, templates/dense/gqa_fwd.cuh): the plan and its launch.
#include <fmt/format.h>

#include <memory>

#include "ops/dense/gqa_fwd_plans.hpp"

namespace attnjit::ops {

namespace {

class GqaFwdPortablePlan final : public detail::PlanImpl {
 public:
  GqaFwdPortablePlan(const GqaConfig& cfg, AttentionKernelChoice choice, std::shared_ptr<const jit::LoadedKernel> kernel)
      : cfg_(cfg), choice_(std::move(choice)), kernel_(std::move(kernel)) {}

  void execute(const TensorArgs& tensors, void* stream) const override {
    const GqaCall call =
        validate_gqa_execute(cfg_, tensors, {choice_.q_dtype, choice_.compute_dtype, choice_.D, choice_.sinks}, *kernel_);
    if (cfg_.validate_inputs) check_gqa_contents(cfg_, call, stream);
    kernels::GqaFwdParams p = gqa_fwd_params(cfg_, call);
    launch_attention(cfg_.op_name(), *kernel_, choice_, p, call.B, cfg_.varlen ? call.T_q : call.S_q, call.H, call.H_kv,
                     stream);
  }

  std::string describe() const override {
    return fmt::format("{} kernel plan: {}", cfg_.op_name(), kernel_->compiled->spec.describe());
  }

 private:
  GqaConfig cfg_;
  AttentionKernelChoice choice_;
  std::shared_ptr<const jit::LoadedKernel> kernel_;
};

}  // namespace

std::shared_ptr<const detail::PlanImpl> make_gqa_fwd_portable_plan(const GqaConfig& cfg, AttentionKernelChoice choice,
                                                                std::shared_ptr<const jit::LoadedKernel> kernel) {
  return std::make_shared<GqaFwdPortablePlan>(cfg, std::move(choice), std::move(kernel));
}

}  // namespace attnjit::ops
