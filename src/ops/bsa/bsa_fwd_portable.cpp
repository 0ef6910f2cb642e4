// bsa_fwd on the portable backend (mma.sync, templates/bsa/bsa_fwd.cuh): the plan, its split-KV count and
// workspace, and its launches.
#include <fmt/format.h>

#include <algorithm>
#include <memory>

#include "jit/cuda_driver.hpp"
#include "ops/base/workspace.hpp"
#include "ops/bsa/bsa_fwd_plans.hpp"

namespace attnjit::ops::bsa {

namespace {

using detail::Placement;

// The split count a call runs with: the explicit kv_splits, or "auto": enough CTAs to fill every SM
// twice over when the grid alone does not, at most the row capacity (block_sparse_num or K_max: a
// shape fact, never a count value), 256, and 1 GiB of partials.
int splits_for(const BsaFwdConfig& cfg, const BsaCall& in, int sm_count) {
  if (cfg.kv_splits != kAutoSplits) return cfg.kv_splits;
  const int64_t ctas = in.B * in.H_q * in.N_q;
  const int64_t slots = static_cast<int64_t>(sm_count) * (in.bs == 128 ? 2 : 4) * 2;
  if (ctas >= slots / 2) return 1;
  int64_t s = (slots + ctas - 1) / ctas;
  const int64_t capacity = in.nums ? in.K_max : in.fixed_count;
  s = std::min<int64_t>({s, capacity, 256});
  const int64_t row_bytes = in.B * in.H_q * in.S_q * (in.D_v + 1) * 4;
  while (s > 1 && s * row_bytes > (int64_t{1} << 30)) --s;
  return static_cast<int>(std::max<int64_t>(s, 1));
}

size_t workspace_for(const BsaCall& in, int splits) {
  if (splits <= 1) return 0;
  const size_t rows = static_cast<size_t>(in.B * in.H_q * in.S_q);
  return static_cast<size_t>(splits) * rows * static_cast<size_t>(in.D_v + 1) * sizeof(float);
}

class BsaFwdPortablePlan final : public detail::PlanImpl {
 public:
  BsaFwdPortablePlan(OpContext& ctx, const BsaFwdConfig& cfg, const FwdCall& call, const std::string& arch)
      : cfg_(cfg), sm_count_(ctx.sm_count(call.in.device.index)), ws_(kOp, call.in.device.index) {
    const BsaCall& in = call.in;
    sig_ = {in.dtype, in.D, in.D_v, in.nums != nullptr, in.block_sizes_rank, in.device.index};
    if (cfg.kv_splits == 1 || cfg.kv_splits == kAutoSplits) {
      single_ = choose_fwd_kernel(in, false, arch);
      single_kernel_ = load_bsa_fwd_kernel(ctx, single_, in.device.index);
    }
    if (cfg.kv_splits != 1) {
      split_ = choose_fwd_kernel(in, true, arch);
      split_kernel_ = load_bsa_fwd_kernel(ctx, split_, in.device.index);
      combine_kernel_ = ctx.kernels().loaded(bsa_combine_kernel_spec(in.dtype, static_cast<int>(in.D_v), arch),
                                            in.device.index);
    }
  }

  void prepare(const TensorArgs& tensors) const override {
    const FwdCall call = validate_fwd_call(cfg_, tensors, Placement::kDevice);
    const size_t bytes = workspace_for(call.in, splits_for(cfg_, call.in, sm_count_));
    if (bytes) ws_.reserve(bytes);
  }
  std::size_t workspace_bytes() const override { return ws_.bytes(); }

  void execute(const TensorArgs& tensors, void* stream) const override {
    const FwdCall call = validate_fwd_call(cfg_, tensors, Placement::kDevice);
    const BsaCall& in = call.in;
    const Signature got{in.dtype, in.D, in.D_v, in.nums != nullptr, in.block_sizes_rank, in.device.index};
    if (!(got == sig_))
      throw InvalidArgument(fmt::format("{}: args: tensors: expected this plan's static signature ({} D {} D_v {} counts "
                                        "{} block_sizes rank {} cuda:{}), got {} D {} D_v {} counts {} block_sizes rank "
                                        "{} cuda:{}; build a plan for the new signature", kOp, dtype_name(sig_.dt),
                                        sig_.D, sig_.Dv, sig_.nums ? "variable" : "fixed", sig_.rank, sig_.device,
                                        dtype_name(got.dt), got.D, got.Dv, got.nums ? "variable" : "fixed", got.rank,
                                        got.device));
    const auto& drv = jit::CudaDriver::get();
    drv.bind_device(in.device.index);
    if (cfg_.validate_inputs) BsaMetadataHost::load(kOp, in, stream).check_contents(kOp, cfg_.allow_empty);
    const int splits = splits_for(cfg_, in, sm_count_);
    kernels::BsaFwdParams p = bsa_fwd_params(in, *call.o, call.lse);
    if (splits <= 1) {
      launch_bsa_fwd(kOp, *single_kernel_, single_, p, in, 1, stream);
      return;
    }
    auto lease = ws_.acquire(workspace_for(in, splits), stream);
    const size_t rows = static_cast<size_t>(in.B * in.H_q * in.S_q);
    // NOTE: the partial outputs first: the combine reads them as float4 (16-byte aligned rows).
    p.part_o = reinterpret_cast<float*>(lease.ptr());
    p.part_lse = p.part_o + static_cast<size_t>(splits) * rows * in.D_v;
    p.splits = splits;
    launch_bsa_fwd(kOp, *split_kernel_, split_, p, in, splits, stream);
    launch_bsa_combine(kOp, *combine_kernel_, p, rows, stream);
  }

  std::string describe() const override {
    std::string s = fmt::format("{} kernel plan (kv_splits {}):", kOp,
                                cfg_.kv_splits == kAutoSplits ? std::string("auto") : std::to_string(cfg_.kv_splits));
    for (const auto* k : {single_kernel_.get(), split_kernel_.get(), combine_kernel_.get()})
      if (k) s += fmt::format(" {}", k->compiled->spec.describe());
    return s;
  }

 private:
  struct Signature {
    DType dt;
    int64_t D, Dv;
    bool nums;
    int rank;
    int device;
    bool operator==(const Signature&) const = default;
  };
  BsaFwdConfig cfg_;
  int sm_count_;
  Signature sig_{};
  BsaFwdKernelChoice single_, split_;
  std::shared_ptr<const jit::LoadedKernel> single_kernel_, split_kernel_, combine_kernel_;
  mutable detail::PlanWorkspace ws_;
};

}  // namespace

std::shared_ptr<const detail::PlanImpl> make_fwd_portable_plan(OpContext& ctx, const BsaFwdConfig& cfg,
                                                               const FwdCall& call, const std::string& arch) {
  return std::make_shared<BsaFwdPortablePlan>(ctx, cfg, call, arch);
}

}  // namespace attnjit::ops::bsa
