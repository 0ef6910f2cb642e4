// bsa_fwd (SPEC.md §2.4): configuration, validation, backend and kernel choice, the reference plan and
// the warm-up matrix. The kernel plans: bsa_fwd_portable.cpp (with the split-KV workspace), bsa_fwd_hopper.cpp.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <memory>

#include "bsa/bsa_fwd_params.cuh"
#include "jit/cuda_driver.hpp"
#include "ops/base/arch.hpp"
#include "ops/bsa/bsa_common.hpp"
#include "ops/bsa/bsa_fwd_kernel.hpp"
#include "ops/bsa/bsa_fwd_plans.hpp"
#include "ops/bsa/reference_fwd.hpp"
#include "ops/base/op_helpers.hpp"
#include "ops/base/op.hpp"
#include "ops/base/context.hpp"
#include "ops/base/workspace.hpp"
#include "ops/registry.hpp"
#include "ops/base/backend.hpp"

namespace attnjit::ops::bsa {

using detail::ArgChecker;
using detail::Placement;

namespace {

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

}  // namespace

FwdCall validate_fwd_call(const BsaFwdConfig& cfg, const TensorArgs& args, Placement placement) {
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

BsaFwdKernelChoice choose_fwd_kernel(const BsaCall& in, bool split, const std::string& arch) {
  return choose_bsa_fwd_kernel(in.dtype, static_cast<int>(in.D), static_cast<int>(in.D_v), static_cast<int>(in.bs),
                               in.nums != nullptr, in.block_sizes_rank, split, arch);
}

namespace {

std::vector<jit::KernelSpec> specs_for(const BsaFwdConfig& cfg, const BsaCall& in, const std::string& arch) {
  std::vector<jit::KernelSpec> specs;
  if (cfg.kv_splits == 1 || cfg.kv_splits == kAutoSplits)
    specs.push_back(bsa_fwd_kernel_spec(choose_fwd_kernel(in, false, arch)));
  if (cfg.kv_splits != 1) {
    specs.push_back(bsa_fwd_kernel_spec(choose_fwd_kernel(in, true, arch)));
    specs.push_back(bsa_combine_kernel_spec(in.dtype, static_cast<int>(in.D_v), arch));
  }
  return specs;
}

class BsaFwdOp final : public detail::OpInstance {
 public:
  BsaFwdOp(OpContext& ctx, const nlohmann::json& config)
      : BsaFwdOp(ctx, detail::ConfigReader(kOp, config, config_keys())) {}

  std::vector<jit::KernelSpec> kernels_for(const TensorArgs& tensors, const std::string& arch) const override {
    const FwdCall call = validate_fwd_call(cfg_, tensors, Placement::kDevice);
    if (use_hopper(call.in, arch)) return {bsa_fwd_hopper_spec(choose_bsa_hopper(call.in, arch))};
    check_bsa_backend(kOp, backend_, arch);
    return specs_for(cfg_, call.in, arch);
  }

 protected:
  Plan plan_for(const TensorArgs& tensors) override {
    const FwdCall call = validate_fwd_call(cfg_, tensors, placement_for(impl_));
    if (impl_ == detail::Impl::kReference)
      return cached("reference", tensors, [&] {
        return reference_plan(kOp, [cfg = cfg_](const TensorArgs& t, void* stream) {
          const FwdCall call = validate_fwd_call(cfg, t, Placement::kHost);
          const BsaMetadataHost md = BsaMetadataHost::load(kOp, call.in, stream);
          if (cfg.validate_inputs) md.check_contents(kOp, cfg.allow_empty);
          reference::bsa_forward(call.in, md, *call.o, call.lse);
        });
      });
    const BsaCall& in = call.in;
    BackendPick pick(ctx_, backend_, in.device.index, [&](const std::string& arch) { return use_hopper(in, arch); });
    std::string sig = fmt::format("{}.{}.{}.{}.{}.{}.{}.{}", static_cast<int>(in.dtype), in.D, in.D_v,
                                  in.nums != nullptr, in.block_sizes_rank, in.device.index, in.bs, pick.auto_hopper());
    return cached(std::move(sig), tensors, [&]() -> std::shared_ptr<const detail::PlanImpl> {
      const std::string& arch = pick.arch();
      if (pick.hopper())
        return make_fwd_hopper_plan(ctx_, cfg_, call, arch);
      check_bsa_backend(kOp, backend_, arch);
      return make_fwd_portable_plan(ctx_, cfg_, call, arch);
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
