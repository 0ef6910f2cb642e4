// nsa_compressed_fwd on the hopper backend (templates/dense/gqa_fwd_hopper.cuh
// in compressed-key mode): the plan and its launch.
#include <memory>

#include "ops/base/backend.hpp"
#include "ops/nsa/nsa_compressed_fwd_plans.hpp"

namespace attnjit::ops::nsa {

namespace {

class NsaCompressedHopperPlan final : public NsaCompressedPlanBase {
 public:
  NsaCompressedHopperPlan(const char* op, const CompressedConfig& cfg, const CompressedCall& call, HopperAttentionChoice k,
                       std::shared_ptr<const jit::LoadedKernel> kernel)
      : NsaCompressedPlanBase(op, cfg, call, std::move(kernel)), choice_(std::move(k)) {}

  void execute(const TensorArgs& tensors, void* stream) const override {
    const CompressedCall c = prepare(tensors, stream);
    if (const std::string gap = tma_inputs_gap(c); !gap.empty()) throw_hopper_gap(op_, gap);
    if (c.T == 0) return;
    kernels::GqaFwdHopperParams hp{};
    hp.p = compressed_params(cfg_, c);
    encode_hopper_kv_maps(op_, hp, choice_, *c.k_cmp, *c.v_cmp, /*packed=*/true);
    launch_hopper_attention(op_, *kernel_, choice_, hp, c.meta.N, c.T, c.H, c.H_kv, stream);
  }

 private:
  HopperAttentionChoice choice_;
};

}  // namespace

std::shared_ptr<const detail::PlanImpl> make_compressed_hopper_plan(const char* op, const CompressedConfig& cfg,
                                                                    const CompressedCall& call, HopperAttentionChoice k,
                                                                    std::shared_ptr<const jit::LoadedKernel> kernel) {
  return std::make_shared<NsaCompressedHopperPlan>(op, cfg, call, std::move(k), std::move(kernel));
}

}  // namespace attnjit::ops::nsa
