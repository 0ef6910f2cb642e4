// nsa_topk (SPEC.md §2.16, metadata §2.14): configuration, validation, the kernel plan
// (ops/nsa/nsa_topk_kernel.hpp: the portable and hopper kernels) and the reference plan.
#include <fmt/format.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "attnjit/error.hpp"
#include "ops/base/context.hpp"
#include "ops/base/op.hpp"
#include "ops/base/op_helpers.hpp"
#include "ops/base/validation.hpp"
#include "nsa/nsa_topk_params.cuh"
#include "ops/nsa/nsa_common.hpp"
#include "ops/nsa/nsa_topk_kernel.hpp"
#include "ops/nsa/reference.hpp"
#include "ops/registry.hpp"

namespace attnjit::ops {

namespace nsa {

namespace {
constexpr const char* kOp = "nsa_topk";
}

TopkCall validate_topk_call(const TopkConfig& cfg, const TensorArgs& args, detail::Placement placement) {
  detail::ArgChecker c(kOp, args, placement);
  c.only_known({"q", "k_cmp", "offsets", "chunk_offsets", "token_indices", "block_indices"});
  TopkCall call;
  call.q = &c.required("q");
  call.k_cmp = &c.required("k_cmp");
  call.block_indices = &c.required("block_indices");
  const TensorRef &q = *call.q, &k = *call.k_cmp, &out = *call.block_indices;

  // dtypes: 16-bit q and k_cmp of one dtype; block_indices int32
  c.dtype_in("q", q, {DType::kF16, DType::kBF16});
  call.dtype = q.dtype;
  c.dtype_is("k_cmp", k, call.dtype, "(q's dtype)");
  c.dtype_is("block_indices", out, DType::kI32);

  // ranks and extents
  c.rank("q", q, 3, "[T, H, D]");
  c.rank("k_cmp", k, 3, "[C, H_kv, D]");
  c.rank("block_indices", out, 3, "[T, H_kv, S]");
  call.T = q.shape[0];
  call.H = q.shape[1];
  call.D = q.shape[2];
  call.C = k.shape[0];
  call.H_kv = k.shape[1];
  c.extent("k_cmp", k, 2, call.D, "D, q's head dim");
  c.extent("block_indices", out, 0, call.T, "T");
  c.extent("block_indices", out, 1, call.H_kv, "H_kv");
  c.extent("block_indices", out, 2, cfg.selected_block_num, "S, selected_block_num");
  call.meta = check_meta(c, call.T, /*chunks=*/true);

  // accepted head dims and head counts
  check_head_dim(c, "q", "D", call.D);
  check_heads(c, "k_cmp", call.H, call.H_kv);

  // layouts: inputs class F (read-only), the output class O
  c.feature("q", q, /*read_only=*/true);
  c.feature("k_cmp", k, true);
  c.output("block_indices", out,
           {{"q", call.q}, {"k_cmp", call.k_cmp}, {"offsets", call.meta.offsets},
            {"chunk_offsets", call.meta.chunk_offsets}, {"token_indices", call.meta.token_indices}});

  for (auto [name, t] : {std::pair{"q", call.q}, std::pair{"k_cmp", call.k_cmp}, std::pair{"offsets", call.meta.offsets},
                         std::pair{"chunk_offsets", call.meta.chunk_offsets},
                         std::pair{"token_indices", call.meta.token_indices},
                         std::pair{"block_indices", call.block_indices}})
    c.device(name, *t);
  call.device = c.call_device();
  return call;
}

}  // namespace nsa

namespace {

using detail::Placement;
constexpr const char* kOp = "nsa_topk";

class NsaTopkOp final : public detail::OpInstance {
 public:
  NsaTopkOp(OpContext& ctx, const nlohmann::json& config)
      : NsaTopkOp(ctx, detail::ConfigReader(kOp, config, nsa::topk_config_keys())) {}

  std::vector<jit::KernelSpec> kernels_for(const TensorArgs& tensors, const std::string& arch) const override {
    const nsa::TopkCall call = nsa::validate_topk_call(cfg_, tensors, Placement::kDevice);
    return {nsa::topk_kernel_spec(kOp, nsa::choose_topk_kernel(kOp, call.dtype, call.D, call.group(), backend_, arch,
                                                               ctx_.tuning().nsa_topk_tile))};
  }

 protected:
  // A kernel plan is static in the dtype, D, the tokens per CTA (from the group size) and the device.
  Plan plan_for(const TensorArgs& tensors) override {
    const nsa::TopkCall call = nsa::validate_topk_call(cfg_, tensors, placement_for(impl_));
    if (impl_ == detail::Impl::kReference)
      return cached("reference", tensors, [&] {
        return reference_plan(kOp, [cfg = cfg_](const TensorArgs& t, void* stream) {
          const nsa::TopkCall call = nsa::validate_topk_call(cfg, t, Placement::kHost);
          if (cfg.validate_inputs) nsa::check_meta_contents(kOp, call.meta, call.T, cfg.bs, call.C, call.device, stream);
          reference::nsa_topk(cfg, call);
        });
      });
    return cached(fmt::format("kernel.{}.{}.{}.{}", static_cast<int>(call.dtype), call.D,
                              kernels::nsa_topk_tokens(call.group()), call.device.index),
                  tensors, [&] { return nsa::make_topk_plan(ctx_, kOp, cfg_, call, backend_); });
  }

 private:
  NsaTopkOp(OpContext& ctx, const detail::ConfigReader& r)
      : OpInstance(ctx, kOp, r.impl(), r.backend()), cfg_(nsa::parse_topk_config(r)) {}
  nsa::TopkConfig cfg_;
};

}  // namespace

}  // namespace attnjit::ops

namespace attnjit::detail {

OpDefinition nsa_topk_definition() {
  // D 128, fp16 and bf16, group sizes 16, 32 and >= 48 (D 64 compiles on first use).
  return ops::op_definition<ops::NsaTopkOp>(ops::kOp, [](const std::string& arch) {
    std::vector<jit::KernelSpec> specs;
    for (DType dt : {DType::kF16, DType::kBF16})
      for (auto& s : ops::nsa::topk_warmup_specs(ops::kOp, dt, 128, arch)) specs.push_back(std::move(s));
    return specs;
  });
}

// Rank: the op's place in `attnjit info` and the warm-up (ops/registry.hpp), after nsa_compressed_fwd.
const OpRegistrar kNsaTopkRegistrar{140, &nsa_topk_definition};

}  // namespace attnjit::detail
