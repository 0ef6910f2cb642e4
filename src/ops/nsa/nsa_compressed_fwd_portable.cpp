// nsa_compressed_fwd on the portable backend (templates/dense/gqa_fwd.cuh in
// compressed-key mode): the plan and its launch.
#include <memory>

#include "ops/nsa/nsa_compressed_fwd_plans.hpp"

namespace attnjit::ops::nsa {

namespace {

class NsaCompressedPortablePlan final : public NsaCompressedPlanBase {
 public:
  NsaCompressedPortablePlan(const char* op, const CompressedConfig& cfg, const CompressedCall& call, AttentionKernelChoice k,
                         std::shared_ptr<const jit::LoadedKernel> kernel)
      : NsaCompressedPlanBase(op, cfg, call, std::move(kernel)), choice_(std::move(k)) {}

  void execute(const TensorArgs& tensors, void* stream) const override {
    const CompressedCall c = prepare(tensors, stream);
    if (c.T == 0) return;
    launch_attention(op_, *kernel_, choice_, compressed_params(cfg_, c), c.meta.N, c.T, c.H, c.H_kv, stream);
  }

 private:
  AttentionKernelChoice choice_;
};

}  // namespace

std::shared_ptr<const detail::PlanImpl> make_compressed_portable_plan(const char* op, const CompressedConfig& cfg,
                                                                      const CompressedCall& call, AttentionKernelChoice k,
                                                                      std::shared_ptr<const jit::LoadedKernel> kernel) {
  return std::make_shared<NsaCompressedPortablePlan>(op, cfg, call, std::move(k), std::move(kernel));
}

}  // namespace attnjit::ops::nsa
