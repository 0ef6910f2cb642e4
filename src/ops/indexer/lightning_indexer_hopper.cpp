// lightning_indexer on the hopper backend (wgmma scores, TMA K ring;
// templates/indexer/lightning_indexer_hopper.cuh): the plan and its launch.
#include <fmt/format.h>

#include <memory>

#include "jit/cuda_driver.hpp"
#include "ops/attention/attention_kernel.hpp"  // encode_tma_rows
#include "ops/base/backend.hpp"
#include "ops/base/launch.hpp"
#include "ops/indexer/lightning_indexer_plans.hpp"

namespace attnjit::ops::lightning {

namespace {

using detail::Placement;

// The hopper backend's fused kernel: the portable kernel's parameters plus the TMA map of k, encoded per call.
class LightningIndexerHopperPlan final : public detail::PlanImpl {
 public:
  LightningIndexerHopperPlan(const IndexerConfig& cfg, KernelChoice choice, std::shared_ptr<const jit::LoadedKernel> kernel)
      : cfg_(cfg), choice_(std::move(choice)), kernel_(std::move(kernel)) {}

  void execute(const TensorArgs& tensors, void* stream) const override {
    const IndexerCall call = validate(cfg_, tensors, Placement::kDevice);
    check_signature(call, choice_, *kernel_);
    if (const std::string gap = hopper_k_gap(call); !gap.empty())
      throw_hopper_gap(kOp, gap);
    const auto& drv = jit::CudaDriver::get();
    drv.bind_device(call.device.index);
    if (cfg_.validate_inputs) check_contents(cfg_, call, stream);
    if (call.B == 0) return;
    kernels::LightningIndexerHopperParams hp{};
    fill_call_params(hp.p, cfg_, call);
    // NOTE: with no candidates (S = 0) no CTA loads a tile, and k may have no address to encode.
    if (call.S > 0)
      encode_tma_rows(kOp, "k", hp.k_map, call.dtype, call.k->data, call.D, 1, call.S, call.B, 0, call.k->strides[1],
                      call.B > 1 ? call.k->strides[0] : call.k->strides[1] * call.S, kernels::kLiHopperBN);
    Launch lc;
    lc.grid_x = static_cast<unsigned>((call.T + choice_.hgeo.R - 1) / choice_.hgeo.R);
    lc.grid_y = static_cast<unsigned>(call.B);
    lc.grid_z = 1;
    lc.threads = kernels::kLiHopperThreads;
    lc.smem_bytes = static_cast<unsigned>(choice_.hgeo.smem_bytes);
    lc.stream = stream;
    void* args[] = {&hp};
    launch_kernel(kernel_->function, lc, args, "lightning_indexer: cuLaunchKernelEx (hopper)");
  }

  std::string describe() const override {
    return fmt::format("{} kernel plan: {} (R {}, COLS {}, BN {}, CAP {}, {} B shared memory)", kOp,
                       kernel_->compiled->spec.describe(), choice_.hgeo.R, choice_.hgeo.COLS, kernels::kLiHopperBN,
                       choice_.hgeo.CAP, choice_.hgeo.smem_bytes);
  }

 private:
  IndexerConfig cfg_;
  KernelChoice choice_;
  std::shared_ptr<const jit::LoadedKernel> kernel_;
};

}  // namespace

std::shared_ptr<const detail::PlanImpl> make_hopper_plan(const IndexerConfig& cfg, KernelChoice choice,
                                                         std::shared_ptr<const jit::LoadedKernel> kernel) {
  return std::make_shared<LightningIndexerHopperPlan>(cfg, std::move(choice), std::move(kernel));
}

}  // namespace attnjit::ops::lightning
