// nsa_compressed_fwd (SPEC.md §2.15, metadata §2.14): configuration, validation, the reference plan and
// the kernel plans (ops/nsa/nsa_compressed_kernel.hpp: the shared attention kernels in compressed-key mode).
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
#include "ops/nsa/nsa_compressed_kernel.hpp"
#include "ops/nsa/reference.hpp"
#include "ops/registry.hpp"

namespace attnjit::ops {

namespace nsa {

namespace {
constexpr const char* kOp = "nsa_compressed_fwd";
}

CompressedCall validate_compressed_call(const TensorArgs& args, detail::Placement placement) {
  detail::ArgChecker c(kOp, args, placement);
  c.only_known({"q", "k_cmp", "v_cmp", "offsets", "chunk_offsets", "token_indices", "o", "lse"});
  CompressedCall call;
  call.q = &c.required("q");
  call.k_cmp = &c.required("k_cmp");
  call.v_cmp = &c.required("v_cmp");
  call.o = &c.required("o");
  call.lse = c.optional("lse");
  const TensorRef &q = *call.q, &k = *call.k_cmp, &v = *call.v_cmp, &o = *call.o;

  // dtypes: 16-bit q, k_cmp, v_cmp of one dtype; o q's dtype; lse fp32
  c.dtype_in("q", q, {DType::kF16, DType::kBF16});
  call.dtype = q.dtype;
  c.dtype_is("k_cmp", k, call.dtype, "(q's dtype)");
  c.dtype_is("v_cmp", v, call.dtype, "(q's dtype)");
  c.dtype_is("o", o, call.dtype, "(q's dtype)");
  if (call.lse) c.dtype_is("lse", *call.lse, DType::kF32);

  // ranks and extents
  c.rank("q", q, 3, "[T, H, DK]");
  c.rank("k_cmp", k, 3, "[C, H_kv, DK]");
  c.rank("v_cmp", v, 3, "[C, H_kv, DV]");
  c.rank("o", o, 3, "[T, H, DV]");
  if (call.lse) c.rank("lse", *call.lse, 2, "[T, H]");
  call.T = q.shape[0];
  call.H = q.shape[1];
  call.DK = q.shape[2];
  call.C = k.shape[0];
  call.H_kv = k.shape[1];
  c.extent("k_cmp", k, 2, call.DK, "DK, q's head dim");
  c.extent("v_cmp", v, 0, call.C, "C, k_cmp's rows");
  c.extent("v_cmp", v, 1, call.H_kv, "H_kv, k_cmp's heads");
  call.DV = v.shape[2];
  c.extent("o", o, 0, call.T, "T");
  c.extent("o", o, 1, call.H, "H");
  c.extent("o", o, 2, call.DV, "DV, v_cmp's head dim");
  if (call.lse) {
    c.extent("lse", *call.lse, 0, call.T, "T");
    c.extent("lse", *call.lse, 1, call.H, "H");
  }
  call.meta = check_meta(c, call.T, /*chunks=*/true);

  // accepted head dims and head counts
  check_head_dim(c, "q", "DK", call.DK);
  check_head_dim(c, "v_cmp", "DV", call.DV);
  check_heads(c, "k_cmp", call.H, call.H_kv);

  // layouts: inputs class F (read-only), outputs class O
  c.feature("q", q, /*read_only=*/true);
  c.feature("k_cmp", k, true);
  c.feature("v_cmp", v, true);
  const std::initializer_list<std::pair<std::string_view, const TensorRef*>> inputs = {
      {"q", call.q}, {"k_cmp", call.k_cmp}, {"v_cmp", call.v_cmp}, {"offsets", call.meta.offsets},
      {"chunk_offsets", call.meta.chunk_offsets}, {"token_indices", call.meta.token_indices}};
  c.output("o", o, inputs);
  if (call.lse) {
    c.output("lse", *call.lse, inputs);
    c.output("lse", *call.lse, {{"o", call.o}});
  }

  // devices: one placement for all
  for (auto [name, t] : {std::pair{"q", call.q}, std::pair{"k_cmp", call.k_cmp}, std::pair{"v_cmp", call.v_cmp},
                         std::pair{"offsets", call.meta.offsets}, std::pair{"chunk_offsets", call.meta.chunk_offsets},
                         std::pair{"token_indices", call.meta.token_indices}, std::pair{"o", call.o},
                         std::pair{"lse", call.lse}})
    if (t) c.device(name, *t);
  call.device = c.call_device();
  return call;
}

}  // namespace nsa

namespace {

using detail::Placement;
constexpr const char* kOp = "nsa_compressed_fwd";

class NsaCompressedFwdOp final : public detail::OpInstance {
 public:
  NsaCompressedFwdOp(OpContext& ctx, const nlohmann::json& config)
      : NsaCompressedFwdOp(ctx, detail::ConfigReader(kOp, config, nsa::compressed_config_keys())) {}

  std::vector<jit::KernelSpec> kernels_for(const TensorArgs& tensors, const std::string& arch) const override {
    const nsa::CompressedCall call = nsa::validate_compressed_call(tensors, Placement::kDevice);
    return nsa::compressed_kernels_for(kOp, cfg_, call, backend_, arch);
  }

 protected:
  Plan plan_for(const TensorArgs& tensors) override {
    const nsa::CompressedCall call = nsa::validate_compressed_call(tensors, placement_for(impl_));
    if (impl_ == detail::Impl::kReference)
      return cached("reference", tensors, [&] {
        return reference_plan(kOp, [cfg = cfg_](const TensorArgs& t, void* stream) {
          const nsa::CompressedCall call = nsa::validate_compressed_call(t, Placement::kHost);
          if (cfg.validate_inputs) nsa::check_meta_contents(kOp, call.meta, call.T, cfg.bs, call.C, call.device, stream);
          reference::nsa_compressed_fwd(cfg, call);
        });
      });
    // 'auto' picks the backend per call (k_cmp / v_cmp strides decide whether TMA can read them), so the
    // choice is part of the signature, beside what selects the instantiation; the plan takes that choice.
    const std::string arch = ctx_.arch_for_device(call.device.index);
    const bool hopper = nsa::compressed_uses_hopper(kOp, backend_, call, arch);
    return cached(fmt::format("{}.{}.{}.{}", static_cast<int>(call.dtype), call.DK, call.device.index, hopper), tensors,
                  [&] { return nsa::make_compressed_plan(ctx_, kOp, cfg_, call, arch, hopper); });
  }

 private:
  NsaCompressedFwdOp(OpContext& ctx, const detail::ConfigReader& r)
      : OpInstance(ctx, kOp, r.impl(), r.backend()), cfg_(nsa::parse_compressed_config(r)) {}
  nsa::CompressedConfig cfg_;
};

}  // namespace

}  // namespace attnjit::ops

namespace attnjit::detail {

OpDefinition nsa_compressed_fwd_definition() {
  return ops::op_definition<ops::NsaCompressedFwdOp>(
      ops::kOp, [](const std::string& arch) { return ops::nsa::compressed_warmup_specs(ops::kOp, arch); });
}

// Rank: the op's place in `attnjit info` and the warm-up (ops/registry.hpp), after the existing ops.
const OpRegistrar kNsaCompressedFwdRegistrar{130, &nsa_compressed_fwd_definition};

}  // namespace attnjit::detail
