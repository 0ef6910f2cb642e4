// gqa_fwd and gqa_varlen_fwd on the hopper backend (wgmma and TMA, templates/dense/gqa_fwd_hopper.cuh): the
// plan and its launch.
#include <fmt/format.h>

#include <memory>

#include "ops/base/backend.hpp"
#include "ops/dense/gqa_fwd_plans.hpp"

namespace attnjit::ops {

namespace {

// The hopper backend's plan: the same parameters plus TMA maps of k and v, encoded per call.
class GqaFwdHopperPlan final : public detail::PlanImpl {
 public:
  GqaFwdHopperPlan(const GqaConfig& cfg, HopperAttentionChoice choice, std::shared_ptr<const jit::LoadedKernel> kernel,
                   int sm_count)
      : cfg_(cfg), choice_(std::move(choice)), kernel_(std::move(kernel)), sm_count_(sm_count) {}

  void execute(const TensorArgs& tensors, void* stream) const override {
    const GqaCall call = validate_gqa_execute(cfg_, tensors, {choice_.dtype, choice_.dtype, choice_.D, choice_.sinks}, *kernel_);
    if (const std::string gap = hopper_kv_gap(*call.k, *call.v, cfg_.varlen); !gap.empty())
      throw_hopper_gap(cfg_.op_name(), gap);
    if (cfg_.validate_inputs) check_gqa_contents(cfg_, call, stream);
    kernels::GqaFwdHopperParams hp{};
    hp.p = gqa_fwd_params(cfg_, call);
    encode_hopper_kv_maps(cfg_.op_name(), hp, choice_, *call.k, *call.v, cfg_.varlen);
    encode_hopper_q_map(cfg_.op_name(), hp, choice_, *call.q, cfg_.varlen, call.H, call.H_kv);
    hp.section_pairs = hopper_section_pairs(choice_, call.S_kv);
    // The persistent kernel: one CTA per SM (its shared memory and 384 or 512 threads at the launch
    // bound's registers fit one).
    launch_hopper_attention(cfg_.op_name(), *kernel_, choice_, hp, call.B, cfg_.varlen ? call.T_q : call.S_q, call.H,
                            call.H_kv, stream, sm_count_);
  }

  std::string describe() const override {
    return fmt::format("{} kernel plan: {}", cfg_.op_name(), kernel_->compiled->spec.describe());
  }

 private:
  GqaConfig cfg_;
  HopperAttentionChoice choice_;
  std::shared_ptr<const jit::LoadedKernel> kernel_;
  int sm_count_;
};

}  // namespace

std::shared_ptr<const detail::PlanImpl> make_gqa_fwd_hopper_plan(const GqaConfig& cfg, HopperAttentionChoice choice,
                                                                 std::shared_ptr<const jit::LoadedKernel> kernel,
                                                                 int sm_count) {
  return std::make_shared<GqaFwdHopperPlan>(cfg, std::move(choice), std::move(kernel), sm_count);
}

}  // namespace attnjit::ops
