// gqa_paged_fwd (SPEC.md §2.9): GQA attention over a paged KV cache, packed queries. Its config,
// signature, plans and warm-up list; the planner pieces it shares with mha_decode_paged are paged_core.*.
#include <fmt/format.h>

#include <string>
#include <vector>

#include "ops/base/op_helpers.hpp"
#include "ops/paged/paged_core.hpp"
#include "ops/paged/reference.hpp"
#include "ops/registry.hpp"

namespace attnjit::ops {

using detail::Placement;

namespace {

class GqaPagedFwdOp final : public detail::OpInstance {
 public:
  GqaPagedFwdOp(OpContext& ctx, const nlohmann::json& config)
      : GqaPagedFwdOp(ctx, detail::ConfigReader(kGqaPaged, config, gqa_config_keys())) {}

  std::vector<jit::KernelSpec> kernels_for(const TensorArgs& tensors, const std::string& arch) const override {
    const PagedAttentionCall call = validate_gqa_paged_call(cfg_, tensors, Placement::kDevice);
    return paged_kernels_for(kGqaPaged, backend_, cfg_, call, arch, ctx_.tuning());
  }

 protected:
  Plan plan_for(const TensorArgs& tensors) override;

 private:
  GqaPagedFwdOp(OpContext& ctx, const detail::ConfigReader& r)
      : OpInstance(ctx, kGqaPaged, r.impl(), r.backend()), cfg_(parse_gqa_config(true, r)) {}
  GqaConfig cfg_;
};

Plan GqaPagedFwdOp::plan_for(const TensorArgs& tensors) {
  const PagedAttentionCall call = validate_gqa_paged_call(cfg_, tensors, placement_for(impl_));
  if (impl_ == detail::Impl::kReference) {
    return cached("reference", tensors, [&] {
      return reference_plan(kGqaPaged, [cfg = cfg_](const TensorArgs& t, void* stream) {
        const PagedAttentionCall call = validate_gqa_paged_call(cfg, t, Placement::kHost);
        if (cfg.validate_inputs) check_contents(kGqaPaged, call, &cfg, stream);
        reference::gqa_paged_fwd(cfg, call);
      });
    });
  }
  return cached(fmt::format("{}.{}.{}.{}.{}.{}", static_cast<int>(call.q_dtype), static_cast<int>(call.kv_dtype),
                            static_cast<int>(call.compute_dtype), call.D, call.sinks != nullptr, call.device.index),
                tensors, [&] {
                  return paged_kernel_plan(
                      ctx_, kGqaPaged, backend_, cfg_, cfg_.validate_inputs,
                      [cfg = cfg_](const TensorArgs& t, Placement pl) { return validate_gqa_paged_call(cfg, t, pl); },
                      call);
                });
}

}  // namespace

}  // namespace attnjit::ops

namespace attnjit::detail {

OpDefinition gqa_paged_fwd_definition() {
  return ops::op_definition<ops::GqaPagedFwdOp>(ops::kGqaPaged, [](const std::string& arch) {
    return ops::paged_default_matrix(ops::kGqaPaged, false, arch);
  });
}

// Rank: the op's place in `attnjit info` and the warm-up (ops/registry.hpp).
const OpRegistrar kGqaPagedFwdRegistrar{40, &gqa_paged_fwd_definition};

}  // namespace attnjit::detail
