// nsa_compressed_fwd's kernel plans inside the op: what nsa_compressed_kernel.cpp (kernel choice and plan
// building) and the plans of nsa_compressed_fwd_portable.cpp and nsa_compressed_fwd_hopper.cpp share. Not
// for other ops.
#pragma once
#include <fmt/format.h>

#include <memory>
#include <string>

#include "dense/gqa_fwd_params.cuh"
#include "jit/cuda_driver.hpp"
#include "jit/kernel_cache.hpp"
#include "ops/attention/attention_kernel.hpp"
#include "ops/base/op.hpp"
#include "ops/nsa/nsa_common.hpp"

namespace attnjit::ops::nsa {

// Why k_cmp and v_cmp cannot be TMA sources ("" when they can).
std::string tma_inputs_gap(const CompressedCall& c);
// Refuses what no kernel serves: DK != DV, more packed rows than 32-bit indices reach.
void check_static(const char* op, const CompressedCall& c);
// The attention kernels' parameters for a validated device call (both backends).
kernels::GqaFwdParams compressed_params(const CompressedConfig& cfg, const CompressedCall& c);

class NsaCompressedPlanBase : public detail::PlanImpl {
 public:
  NsaCompressedPlanBase(const char* op, const CompressedConfig& cfg, const CompressedCall& call,
                     std::shared_ptr<const jit::LoadedKernel> kernel)
      : op_(op), cfg_(cfg), sig_(signature_of(call)), kernel_(std::move(kernel)) {}

  std::string describe() const override {
    return fmt::format("{} kernel plan: {}", op_, kernel_->compiled->spec.describe());
  }

 protected:
  // What a plan was built for; execute() refuses calls with another static signature.
  struct Signature {
    DType dtype = DType::kBF16;
    int64_t D = 0;
    int device = 0;
    bool operator==(const Signature&) const = default;
  };
  static Signature signature_of(const CompressedCall& c) { return {c.dtype, c.DK, c.device.index}; }

  // Revalidates, checks the signature and (validate_inputs) the metadata; binds the device.
  CompressedCall prepare(const TensorArgs& tensors, void* stream) const {
    const CompressedCall c = validate_compressed_call(tensors, detail::Placement::kDevice);
    if (!(signature_of(c) == sig_))
      throw InvalidArgument(fmt::format("{}: args: tensors: expected this plan's static signature ({} D {} cuda:{}), got "
                                        "{} D {} cuda:{}; build a plan for the new signature",
                                        op_, dtype_name(sig_.dtype), sig_.D, sig_.device, dtype_name(c.dtype), c.DK,
                                        c.device.index));
    check_static(op_, c);
    jit::CudaDriver::get().bind_device(sig_.device);
    if (cfg_.validate_inputs) check_meta_contents(op_, c.meta, c.T, cfg_.bs, c.C, c.device, stream);
    return c;
  }

  const char* op_;
  CompressedConfig cfg_;
  Signature sig_;
  std::shared_ptr<const jit::LoadedKernel> kernel_;
};

std::shared_ptr<const detail::PlanImpl> make_compressed_portable_plan(const char* op, const CompressedConfig& cfg,
                                                                      const CompressedCall& call, AttentionKernelChoice k,
                                                                      std::shared_ptr<const jit::LoadedKernel> kernel);
std::shared_ptr<const detail::PlanImpl> make_compressed_hopper_plan(const char* op, const CompressedConfig& cfg,
                                                                    const CompressedCall& call, HopperAttentionChoice k,
                                                                    std::shared_ptr<const jit::LoadedKernel> kernel);

}  // namespace attnjit::ops::nsa
