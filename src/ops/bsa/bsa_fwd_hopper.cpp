// bsa_fwd on the hopper backend (wgmma and TMA, templates/bsa/bsa_fwd_hopper.cuh): the plan and its launch.
#include <fmt/format.h>

#include <memory>

#include "jit/cuda_driver.hpp"
#include "ops/base/backend.hpp"
#include "ops/bsa/bsa_fwd_plans.hpp"

namespace attnjit::ops::bsa {

namespace {

using detail::Placement;

// The hopper backend's plan: one kernel, no split, K/V tensor maps encoded per call.
class BsaFwdHopperPlan final : public detail::PlanImpl {
 public:
  BsaFwdHopperPlan(OpContext& ctx, const BsaFwdConfig& cfg, const FwdCall& call, const std::string& arch)
      : cfg_(cfg), choice_(choose_bsa_hopper(call.in, arch)),
        kernel_(load_bsa_fwd_hopper_kernel(ctx, choice_, call.in.device.index)), device_(call.in.device.index) {}

  void execute(const TensorArgs& tensors, void* stream) const override {
    const FwdCall call = validate_fwd_call(cfg_, tensors, Placement::kDevice);
    const BsaCall& in = call.in;
    if (in.dtype != choice_.dtype || in.D != choice_.D || in.D_v != choice_.D || (in.nums != nullptr) != choice_.has_nums ||
        in.block_sizes_rank != choice_.bsz_rank || in.bs != choice_.bs || in.device.index != device_)
      throw InvalidArgument(fmt::format("{}: args: tensors: expected this plan's static signature ({}), got {} D {} D_v {} "
                                        "block size {} counts {} block_sizes rank {} cuda:{}; build a plan for the new "
                                        "signature", kOp, kernel_->compiled->spec.describe(), dtype_name(in.dtype), in.D,
                                        in.D_v, in.bs, in.nums ? "variable" : "fixed", in.block_sizes_rank, in.device.index));
    if (const std::string gap = bsa_hopper_tma_gap(in); !gap.empty())
      throw_hopper_gap(kOp, gap);
    const auto& drv = jit::CudaDriver::get();
    drv.bind_device(in.device.index);
    if (cfg_.validate_inputs) BsaMetadataHost::load(kOp, in, stream).check_contents(kOp, cfg_.allow_empty);
    launch_bsa_fwd_hopper(kOp, *kernel_, choice_, bsa_fwd_params(in, *call.o, call.lse), in, stream);
  }

  std::string describe() const override { return fmt::format("{} kernel plan: {}", kOp, kernel_->compiled->spec.describe()); }

 private:
  BsaFwdConfig cfg_;
  BsaHopperChoice choice_;
  std::shared_ptr<const jit::LoadedKernel> kernel_;
  int device_;
};

}  // namespace

std::shared_ptr<const detail::PlanImpl> make_fwd_hopper_plan(OpContext& ctx, const BsaFwdConfig& cfg,
                                                             const FwdCall& call, const std::string& arch) {
  return std::make_shared<BsaFwdHopperPlan>(ctx, cfg, call, arch);
}

}  // namespace attnjit::ops::bsa
