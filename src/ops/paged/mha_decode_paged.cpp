// mha_decode_paged (SPEC.md §2.11): decode attention over a paged KV cache (H_kv = H). Its config,
// signature, plans and warm-up list; the planner pieces it shares with gqa_paged_fwd are paged_core.*.
#include <fmt/format.h>

#include <cmath>
#include <string>
#include <vector>

#include "ops/base/op_helpers.hpp"
#include "ops/paged/paged_core.hpp"
#include "ops/paged/reference.hpp"
#include "ops/registry.hpp"

namespace attnjit::ops {

using detail::Placement;

namespace {

MhaDecodePagedConfig parse_mha_config(const detail::ConfigReader& r) {
  MhaDecodePagedConfig c;
  if (!r.has("page_size")) throw InvalidArgument(fmt::format("{}: param: page_size: expected an integer >= 1, got none", kMhaDecode));
  const double ps = r.get_number("page_size", 0);
  if (ps != std::floor(ps) || ps < 1 || ps > 1 << 30)
    throw InvalidArgument(fmt::format("{}: param: page_size: expected an integer >= 1, got {}", kMhaDecode, ps));
  c.page_size = static_cast<int64_t>(ps);
  c.is_causal = r.get_bool("is_causal", false);
  c.validate_inputs = r.get_bool("validate_inputs", false);
  return c;
}

class MhaDecodePagedOp final : public detail::OpInstance {
 public:
  MhaDecodePagedOp(OpContext& ctx, const nlohmann::json& config)
      : MhaDecodePagedOp(ctx, detail::ConfigReader(kMhaDecode, config, {"page_size", "is_causal", "validate_inputs"})) {}

  std::vector<jit::KernelSpec> kernels_for(const TensorArgs& tensors, const std::string& arch) const override {
    const PagedAttentionCall call = validate_mha_decode_paged_call(cfg_, tensors, Placement::kDevice);
    return paged_kernels_for(kMhaDecode, backend_, gqa_, call, arch, ctx_.tuning());
  }

 protected:
  Plan plan_for(const TensorArgs& tensors) override {
    const PagedAttentionCall call = validate_mha_decode_paged_call(cfg_, tensors, placement_for(impl_));
    if (impl_ == detail::Impl::kReference) {
      return cached("reference", tensors, [&] {
        return reference_plan(kMhaDecode, [cfg = cfg_](const TensorArgs& t, void* stream) {
          const PagedAttentionCall call = validate_mha_decode_paged_call(cfg, t, Placement::kHost);
          if (cfg.validate_inputs) check_contents(kMhaDecode, call, nullptr, stream);
          reference::mha_decode_paged(cfg, call);
        });
      });
    }
    return cached(fmt::format("{}.{}.{}", static_cast<int>(call.q_dtype), call.D, call.device.index), tensors, [&] {
      return paged_kernel_plan(
          ctx_, kMhaDecode, backend_, gqa_, cfg_.validate_inputs,
          [cfg = cfg_](const TensorArgs& t, Placement pl) { return validate_mha_decode_paged_call(cfg, t, pl); }, call);
    });
  }

 private:
  MhaDecodePagedOp(OpContext& ctx, const detail::ConfigReader& r)
      : OpInstance(ctx, kMhaDecode, r.impl(), r.backend()), cfg_(parse_mha_config(r)) {
    gqa_.is_causal = cfg_.is_causal;  // no window, softcap or rope; scale 1/sqrt(D)
  }
  MhaDecodePagedConfig cfg_;
  GqaConfig gqa_;
};

}  // namespace

}  // namespace attnjit::ops

namespace attnjit::detail {

OpDefinition mha_decode_paged_definition() {
  return ops::op_definition<ops::MhaDecodePagedOp>(ops::kMhaDecode, [](const std::string& arch) {
    return ops::paged_default_matrix(ops::kMhaDecode, true, arch);
  });
}

// Rank: the op's place in `attnjit info` and the warm-up (ops/registry.hpp).
const OpRegistrar kMhaDecodePagedRegistrar{50, &mha_decode_paged_definition};

}  // namespace attnjit::detail
