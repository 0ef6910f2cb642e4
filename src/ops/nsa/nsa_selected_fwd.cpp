// nsa_selected_fwd (SPEC.md §2.17, metadata §2.14): configuration, validation, the kernel plan
// (ops/nsa/nsa_selected_kernel.hpp: the portable kernel; 'hopper' is not built yet) and the reference plan.
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
#include "ops/nsa/nsa_common.hpp"
#include "nsa/nsa_selected_fwd_params.cuh"
#include "ops/nsa/nsa_selected_kernel.hpp"
#include "ops/nsa/reference.hpp"
#include "ops/registry.hpp"

namespace attnjit::ops {

namespace nsa {

namespace {
constexpr const char* kOp = "nsa_selected_fwd";
}

SelectedCall validate_selected_call(const TensorArgs& args, detail::Placement placement) {
  detail::ArgChecker c(kOp, args, placement);
  c.only_known({"q", "k", "v", "block_indices", "block_counts", "offsets", "token_indices", "o"});
  SelectedCall call;
  call.q = &c.required("q");
  call.k = &c.required("k");
  call.v = &c.required("v");
  call.block_indices = &c.required("block_indices");
  call.block_counts = &c.required("block_counts");
  call.o = &c.required("o");
  const TensorRef &q = *call.q, &k = *call.k, &v = *call.v, &bi = *call.block_indices, &bc = *call.block_counts;

  // dtypes: 16-bit q, k, v of one dtype; o q's dtype; indices and counts int32
  c.dtype_in("q", q, {DType::kF16, DType::kBF16});
  call.dtype = q.dtype;
  c.dtype_is("k", k, call.dtype, "(q's dtype)");
  c.dtype_is("v", v, call.dtype, "(q's dtype)");
  c.dtype_is("o", *call.o, call.dtype, "(q's dtype)");
  c.dtype_is("block_indices", bi, DType::kI32);
  c.dtype_is("block_counts", bc, DType::kI32);

  // ranks and extents: one token count T across q, k, v, indices, counts and token_indices
  c.rank("q", q, 3, "[T, H, D]");
  c.rank("k", k, 3, "[T, H_kv, D]");
  c.rank("v", v, 3, "[T, H_kv, D]");
  c.rank("block_indices", bi, 3, "[T, H_kv, SEL]");
  c.rank("block_counts", bc, 2, "[T, H_kv]");
  c.rank("o", *call.o, 3, "[T, H, D]");
  call.T = q.shape[0];
  call.H = q.shape[1];
  call.D = q.shape[2];
  call.H_kv = k.shape[1];
  c.extent("k", k, 0, call.T, "T, q's tokens");
  c.extent("k", k, 2, call.D, "D, q's head dim");
  c.extent("v", v, 0, call.T, "T, q's tokens");
  c.extent("v", v, 1, call.H_kv, "H_kv, k's heads");
  c.extent("v", v, 2, call.D, "D, q's head dim");
  c.extent("block_indices", bi, 0, call.T, "T, q's tokens");
  c.extent("block_indices", bi, 1, call.H_kv, "H_kv, k's heads");
  call.SEL = bi.shape[2];
  if (call.SEL < 1) c.fail("shape", "block_indices", "expected SEL >= 1 slots (dim 2), got {}", call.SEL);
  c.extent("block_counts", bc, 0, call.T, "T, q's tokens");
  c.extent("block_counts", bc, 1, call.H_kv, "H_kv, k's heads");
  c.extent("o", *call.o, 0, call.T, "T");
  c.extent("o", *call.o, 1, call.H, "H");
  c.extent("o", *call.o, 2, call.D, "D");
  call.meta = check_meta(c, call.T, /*chunks=*/false);

  // accepted head dims and head counts
  check_head_dim(c, "q", "D", call.D);
  check_heads(c, "k", call.H, call.H_kv);

  // layouts: q, k, v class F (read-only), indices and counts class M, the output class O
  c.feature("q", q, /*read_only=*/true);
  c.feature("k", k, true);
  c.feature("v", v, true);
  c.metadata("block_indices", bi);
  c.metadata("block_counts", bc);
  c.output("o", *call.o,
           {{"q", call.q}, {"k", call.k}, {"v", call.v}, {"block_indices", call.block_indices},
            {"block_counts", call.block_counts}, {"offsets", call.meta.offsets},
            {"token_indices", call.meta.token_indices}});

  for (auto [name, t] : {std::pair{"q", call.q}, std::pair{"k", call.k}, std::pair{"v", call.v},
                         std::pair{"block_indices", call.block_indices}, std::pair{"block_counts", call.block_counts},
                         std::pair{"offsets", call.meta.offsets}, std::pair{"token_indices", call.meta.token_indices},
                         std::pair{"o", call.o}})
    c.device(name, *t);
  call.device = c.call_device();
  return call;
}

}  // namespace nsa

namespace {

using detail::Placement;
constexpr const char* kOp = "nsa_selected_fwd";

class NsaSelectedFwdOp final : public detail::OpInstance {
 public:
  NsaSelectedFwdOp(OpContext& ctx, const nlohmann::json& config)
      : NsaSelectedFwdOp(ctx, detail::ConfigReader(kOp, config, nsa::selected_config_keys())) {}

  std::vector<jit::KernelSpec> kernels_for(const TensorArgs& tensors, const std::string& arch) const override {
    const nsa::SelectedCall call = nsa::validate_selected_call(tensors, Placement::kDevice);
    return {nsa::selected_kernel_spec(kOp, nsa::choose_selected_kernel(kOp, call.dtype, call.D, call.group(), backend_,
                                                                       arch))};
  }

 protected:
  // A kernel plan is static in the dtype, D, the row-group count (from the group size) and the device.
  Plan plan_for(const TensorArgs& tensors) override {
    const nsa::SelectedCall call = nsa::validate_selected_call(tensors, placement_for(impl_));
    if (impl_ == detail::Impl::kReference)
      return cached("reference", tensors, [&] {
        return reference_plan(kOp, [cfg = cfg_](const TensorArgs& t, void* stream) {
          const nsa::SelectedCall call = nsa::validate_selected_call(t, Placement::kHost);
          if (cfg.validate_inputs) {
            nsa::check_meta_contents(kOp, call.meta, call.T, /*bs=*/0, 0, call.device, stream);
            nsa::check_block_counts(kOp, call);
          }
          reference::nsa_selected_fwd(cfg, call);
        });
      });
    return cached(fmt::format("kernel.{}.{}.{}.{}", static_cast<int>(call.dtype), call.D,
                              kernels::nsa_selected_warps(call.group()), call.device.index),
                  tensors, [&] { return nsa::make_selected_plan(ctx_, kOp, cfg_, call, backend_); });
  }

 private:
  NsaSelectedFwdOp(OpContext& ctx, const detail::ConfigReader& r)
      : OpInstance(ctx, kOp, r.impl(), r.backend()), cfg_(nsa::parse_selected_config(r)) {}
  nsa::SelectedConfig cfg_;
};

}  // namespace

}  // namespace attnjit::ops

namespace attnjit::detail {

OpDefinition nsa_selected_fwd_definition() {
  // D 128, fp16 and bf16, group sizes 16, 32 and >= 64 (48 and D 64 compile on first use).
  return ops::op_definition<ops::NsaSelectedFwdOp>(ops::kOp, [](const std::string& arch) {
    std::vector<jit::KernelSpec> specs;
    for (DType dt : {DType::kF16, DType::kBF16})
      for (auto& s : ops::nsa::selected_warmup_specs(ops::kOp, dt, 128, arch)) specs.push_back(std::move(s));
    return specs;
  });
}

// Rank: the op's place in `attnjit info` and the warm-up (ops/registry.hpp), after nsa_topk.
const OpRegistrar kNsaSelectedFwdRegistrar{150, &nsa_selected_fwd_definition};

}  // namespace attnjit::detail
