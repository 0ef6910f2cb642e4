// bsa_fwd (SPEC.md §2.4): configuration, validation, kernel choice, split-KV workspace, launch
// geometry, and the kernel and reference plans.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <memory>

#include "bsa/bsa_fwd_params.cuh"
#include "jit/cuda_driver.hpp"
#include "ops/base/arch.hpp"
#include "ops/bsa/bsa_common.hpp"
#include "ops/bsa/bsa_fwd_kernel.hpp"
#include "ops/bsa/reference_fwd.hpp"
#include "ops/base/op_helpers.hpp"
#include "ops/base/op.hpp"
#include "ops/base/context.hpp"
#include "ops/base/workspace.hpp"
#include "ops/registry.hpp"
#include "ops/base/backend.hpp"

namespace attnjit::ops::bsa {

namespace {

using detail::ArgChecker;
using detail::Placement;

constexpr const char* kOp = "bsa_fwd";
constexpr int kAutoSplits = 0;  // kv_splits "auto"

struct BsaFwdConfig {
  BsaSharedConfig shared;
  bool allow_empty = false;
  int kv_splits = 1;  // 1..256, or kAutoSplits
  bool validate_inputs = false;
};

std::vector<std::string> config_keys() {
  std::vector<std::string> keys = bsa_shared_config_keys();
  for (const char* k : {"allow_empty_block_nums", "kv_splits", "validate_inputs"}) keys.push_back(k);
  return keys;
}

BsaFwdConfig parse_config(const detail::ConfigReader& r) {
  BsaFwdConfig c;
  c.shared = parse_bsa_shared_config(kOp, r);
  c.allow_empty = r.get_bool("allow_empty_block_nums", false);
  c.validate_inputs = r.get_bool("validate_inputs", false);
  c.kv_splits = read_kv_splits(kOp, r, 256, kAutoSplits, 1);
  return c;
}

struct FwdCall {
  BsaCall in;
  const TensorRef* o = nullptr;
  const TensorRef* lse = nullptr;
};

FwdCall validate(const BsaFwdConfig& cfg, const TensorArgs& args, Placement placement) {
  ArgChecker c(kOp, args, placement);
  c.only_known({"q", "k", "v", "q2k_block_index", "q2k_block_nums", "block_sizes", "o", "lse"});
  FwdCall call;
  call.in = check_bsa_inputs(c, cfg.shared, BsaInputRules{});
  const BsaCall& in = call.in;
  const TensorRef& o = c.required("o");
  call.o = &o;
  call.lse = c.optional("lse");
  c.dtype_is("o", o, in.dtype, "(q's dtype)");
  check_bsa_qshaped(c, "o", o, in, in.D_v);
  if (call.lse) {
    c.dtype_is("lse", *call.lse, DType::kF32);
    check_bsa_lse_shape(c, "lse", *call.lse, in);
  }
  c.output("o", o, {{"q", in.q}, {"k", in.k}, {"v", in.v}, {"q2k_block_index", in.index}, {"q2k_block_nums", in.nums},
                    {"block_sizes", in.block_sizes}, {"lse", call.lse}});
  if (call.lse)
    c.output("lse", *call.lse, {{"q", in.q}, {"k", in.k}, {"v", in.v}, {"q2k_block_index", in.index},
                                {"q2k_block_nums", in.nums}, {"block_sizes", in.block_sizes}});
  c.device("o", o);
  if (call.lse) c.device("lse", *call.lse);
  return call;
}

BsaFwdKernelChoice choose(const BsaCall& in, bool split, const std::string& arch) {
  return choose_bsa_fwd_kernel(in.dtype, static_cast<int>(in.D), static_cast<int>(in.D_v), static_cast<int>(in.bs),
                               in.nums != nullptr, in.block_sizes_rank, split, arch);
}

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

std::vector<jit::KernelSpec> specs_for(const BsaFwdConfig& cfg, const BsaCall& in, const std::string& arch) {
  std::vector<jit::KernelSpec> specs;
  if (cfg.kv_splits == 1 || cfg.kv_splits == kAutoSplits) specs.push_back(bsa_fwd_kernel_spec(choose(in, false, arch)));
  if (cfg.kv_splits != 1) {
    specs.push_back(bsa_fwd_kernel_spec(choose(in, true, arch)));
    specs.push_back(bsa_combine_kernel_spec(in.dtype, static_cast<int>(in.D_v), arch));
  }
  return specs;
}

class BsaFwdPortablePlan final : public detail::PlanImpl {
 public:
  BsaFwdPortablePlan(OpContext& ctx, const BsaFwdConfig& cfg, const FwdCall& call, const std::string& arch)
      : cfg_(cfg), sm_count_(ctx.sm_count(call.in.device.index)), ws_(kOp, call.in.device.index) {
    const BsaCall& in = call.in;
    sig_ = {in.dtype, in.D, in.D_v, in.nums != nullptr, in.block_sizes_rank, in.device.index};
    if (cfg.kv_splits == 1 || cfg.kv_splits == kAutoSplits) {
      single_ = choose(in, false, arch);
      single_kernel_ = load_bsa_fwd_kernel(ctx, single_, in.device.index);
    }
    if (cfg.kv_splits != 1) {
      split_ = choose(in, true, arch);
      split_kernel_ = load_bsa_fwd_kernel(ctx, split_, in.device.index);
      combine_kernel_ = ctx.kernels().loaded(bsa_combine_kernel_spec(in.dtype, static_cast<int>(in.D_v), arch),
                                            in.device.index);
    }
  }

  void prepare(const TensorArgs& tensors) const override {
    const FwdCall call = validate(cfg_, tensors, Placement::kDevice);
    const size_t bytes = workspace_for(call.in, splits_for(cfg_, call.in, sm_count_));
    if (bytes) ws_.reserve(bytes);
  }
  std::size_t workspace_bytes() const override { return ws_.bytes(); }

  void execute(const TensorArgs& tensors, void* stream) const override {
    const FwdCall call = validate(cfg_, tensors, Placement::kDevice);
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
      if (k) s += " " + k->compiled->spec.describe();
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

// The hopper backend's plan: one kernel, no split, K/V tensor maps encoded per call.
class BsaFwdHopperPlan final : public detail::PlanImpl {
 public:
  BsaFwdHopperPlan(OpContext& ctx, const BsaFwdConfig& cfg, const FwdCall& call, const std::string& arch)
      : cfg_(cfg), choice_(choose_bsa_hopper(call.in, arch)),
        kernel_(load_bsa_fwd_hopper_kernel(ctx, choice_, call.in.device.index)), device_(call.in.device.index) {}

  void execute(const TensorArgs& tensors, void* stream) const override {
    const FwdCall call = validate(cfg_, tensors, Placement::kDevice);
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

class BsaFwdOp final : public detail::OpInstance {
 public:
  BsaFwdOp(OpContext& ctx, const nlohmann::json& config)
      : BsaFwdOp(ctx, detail::ConfigReader(kOp, config, config_keys())) {}

  std::vector<jit::KernelSpec> kernels_for(const TensorArgs& tensors, const std::string& arch) const override {
    const FwdCall call = validate(cfg_, tensors, Placement::kDevice);
    if (use_hopper(call.in, arch)) return {bsa_fwd_hopper_spec(choose_bsa_hopper(call.in, arch))};
    check_bsa_backend(kOp, backend_, arch);
    return specs_for(cfg_, call.in, arch);
  }

 protected:
  Plan plan_for(const TensorArgs& tensors) override {
    const FwdCall call = validate(cfg_, tensors, placement_for(impl_));
    if (impl_ == detail::Impl::kReference)
      return cached("reference", tensors, [&] {
        return reference_plan(kOp, [cfg = cfg_](const TensorArgs& t, void* stream) {
          const FwdCall call = validate(cfg, t, Placement::kHost);
          const BsaMetadataHost md = BsaMetadataHost::load(kOp, call.in, stream);
          if (cfg.validate_inputs) md.check_contents(kOp, cfg.allow_empty);
          reference::bsa_forward(call.in, md, *call.o, call.lse);
        });
      });
    const BsaCall& in = call.in;
    // 'auto' picks the backend per call (use_hopper), so the pick is part of the signature; an explicit
    // backend reads the arch and picks (which, for 'hopper', may throw) only when a plan is built.
    const bool auto_backend = backend_ == detail::Backend::kAuto;
    std::string arch = auto_backend ? ctx_.arch_for_device(in.device.index) : std::string();
    const bool auto_hopper = auto_backend && use_hopper(in, arch);
    std::string sig = fmt::format("{}.{}.{}.{}.{}.{}.{}.{}", static_cast<int>(in.dtype), in.D, in.D_v,
                                  in.nums != nullptr, in.block_sizes_rank, in.device.index, in.bs, auto_hopper);
    return cached(std::move(sig), tensors, [&]() -> std::shared_ptr<const detail::PlanImpl> {
      if (!auto_backend) arch = ctx_.arch_for_device(in.device.index);
      if (auto_backend ? auto_hopper : use_hopper(in, arch))
        return std::make_shared<BsaFwdHopperPlan>(ctx_, cfg_, call, arch);
      check_bsa_backend(kOp, backend_, arch);
      return std::make_shared<BsaFwdPortablePlan>(ctx_, cfg_, call, arch);
    });
  }

 private:
  BsaFwdOp(OpContext& ctx, const detail::ConfigReader& r)
      : OpInstance(ctx, kOp, r.impl(), r.backend()), cfg_(parse_config(r)) {}
  // backend 'hopper' takes the hopper kernel or fails naming why; 'auto' takes it wherever it serves the
  // call (kv_splits 1 or "auto", which then means one CTA per query block) and the portable kernel
  // elsewhere.
  bool use_hopper(const BsaCall& in, const std::string& arch) const {
    return pick_hopper(
        kOp, backend_, [&] { return bsa_hopper_gap(in, cfg_.kv_splits != 1 && cfg_.kv_splits != kAutoSplits, arch); },
        [&] { return bsa_hopper_tma_gap(in).empty(); });
  }
  BsaFwdConfig cfg_;
};

}  // namespace

}  // namespace attnjit::ops::bsa

namespace attnjit::detail {

OpDefinition bsa_fwd_definition() {
  return ops::op_definition<ops::bsa::BsaFwdOp>(ops::bsa::kOp, [](const std::string& arch) {
    using namespace ops::bsa;
    std::vector<jit::KernelSpec> specs;
    // The common cases: fp16/bf16, D = D_v in {64, 128}, both block sizes, fixed and variable counts.
    for (DType dt : {DType::kF16, DType::kBF16})
      for (int D : {64, 128})
        for (int bs : {64, 128})
          for (bool nums : {false, true}) specs.push_back(bsa_fwd_kernel_spec(choose_bsa_fwd_kernel(dt, D, D, bs, nums, 0, false, arch)));
    // D = 96, rank-1 block_sizes, and the split-KV path of the issue shapes (bf16, D = 128).
    for (int bs : {64, 128}) {
      specs.push_back(bsa_fwd_kernel_spec(choose_bsa_fwd_kernel(DType::kBF16, 96, 96, bs, false, 0, false, arch)));
      specs.push_back(bsa_fwd_kernel_spec(choose_bsa_fwd_kernel(DType::kBF16, 128, 128, bs, false, 1, false, arch)));
      specs.push_back(bsa_fwd_kernel_spec(choose_bsa_fwd_kernel(DType::kBF16, 128, 128, bs, false, 0, true, arch)));
    }
    specs.push_back(bsa_combine_kernel_spec(DType::kBF16, 128, arch));
    // The hopper kernels where the target has them: fp16/bf16, D 64 and 128, both block sizes, fixed and
    // variable counts.
    if (ops::has_hopper_kernels(arch))
      for (DType dt : {DType::kF16, DType::kBF16})
        for (int D : {64, 128})
          for (int bs : {64, 128})
            for (bool nums : {false, true}) {
              BsaHopperChoice k;
              k.dtype = dt;
              k.D = D;
              k.bs = bs;
              k.has_nums = nums;
              k.arch = arch;
              specs.push_back(bsa_fwd_hopper_spec(k));
            }
    return specs;
  });
}

// Rank: the op's place in `attnjit info` and the warm-up (ops/registry.hpp).
const OpRegistrar kBsaFwdRegistrar{110, &bsa_fwd_definition};

}  // namespace attnjit::detail
