// gqa_bwd (SPEC.md §2.12): configuration, validation and the reference plan. No GPU kernel is built
// yet: a kernel-impl call validates like any other, then fails with Unsupported, and the op adds
// nothing to the warm-up matrix.
#include <fmt/format.h>

#include <cmath>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "attnjit/error.hpp"
#include "ops/base/context.hpp"
#include "ops/base/op.hpp"
#include "ops/base/op_helpers.hpp"
#include "ops/base/validation.hpp"
#include "ops/dense/gqa_bwd_call.hpp"
#include "ops/dense/reference_bwd.hpp"
#include "ops/registry.hpp"

namespace attnjit::ops {

namespace {

using detail::ArgChecker;
using detail::Placement;

constexpr const char* kOp = "gqa_bwd";

bool accepted_head_dim(int64_t D) { return D == 64 || D == 96 || D == 128 || D == 256; }

}  // namespace

GqaBwdConfig parse_gqa_bwd_config(const detail::ConfigReader& r) {
  GqaBwdConfig c;
  c.is_causal = r.get_bool("is_causal", true);
  if (r.has("sm_scale")) {
    const double s = r.get_number("sm_scale", 0);
    if (!std::isfinite(s) || s <= 0)
      throw InvalidArgument(fmt::format("{}: param: sm_scale: expected a finite value > 0, got {}", kOp, s));
    c.sm_scale = s;
  }
  return c;
}

const std::vector<std::string>& gqa_bwd_config_keys() {
  static const std::vector<std::string> keys = {"is_causal", "sm_scale"};
  return keys;
}

GqaBwdCall validate_gqa_bwd_call(const GqaBwdConfig& cfg, const TensorArgs& args, Placement placement) {
  ArgChecker c(kOp, args, placement);
  c.only_known({"q", "k", "v", "o", "do", "lse", "dq", "dk", "dv"});
  GqaBwdCall call;
  call.q = &c.required("q");
  call.k = &c.required("k");
  call.v = &c.required("v");
  call.o = &c.required("o");
  call.dout = &c.required("do");
  call.lse = &c.required("lse");
  call.dq = &c.required("dq");
  call.dk = &c.required("dk");
  call.dv = &c.required("dv");
  const TensorRef &q = *call.q, &k = *call.k, &lse = *call.lse;
  // The tensors shaped like q and like k, in the order their checks report.
  const std::pair<const char*, const TensorRef*> q_like[] = {{"o", call.o}, {"do", call.dout}, {"dq", call.dq}};
  const std::pair<const char*, const TensorRef*> k_like[] = {{"dk", call.dk}, {"dv", call.dv}};

  // dtypes: 16-bit, one dtype; lse fp32
  c.dtype_in("q", q, {DType::kF16, DType::kBF16});
  call.dtype = q.dtype;
  for (auto [name, t] : {std::pair{"k", call.k}, std::pair{"v", call.v}, std::pair{"o", call.o},
                         std::pair{"do", call.dout}})
    c.dtype_is(name, *t, call.dtype, "(q's dtype)");
  c.dtype_is("lse", lse, DType::kF32);
  for (auto [name, t] : {std::pair{"dq", call.dq}, std::pair{"dk", call.dk}, std::pair{"dv", call.dv}})
    c.dtype_is(name, *t, call.dtype, "(q's dtype)");

  // ranks
  c.rank("q", q, 4, "[B, S, H, D]");
  c.rank("k", k, 4, "[B, S, H_kv, D]");
  c.rank("v", *call.v, 4, "[B, S, H_kv, D]");
  c.rank("o", *call.o, 4, "[B, S, H, D]");
  c.rank("do", *call.dout, 4, "[B, S, H, D]");
  c.rank("lse", lse, 3, "[B, H, S]");
  c.rank("dq", *call.dq, 4, "[B, S, H, D]");
  c.rank("dk", *call.dk, 4, "[B, S, H_kv, D]");
  c.rank("dv", *call.dv, 4, "[B, S, H_kv, D]");

  // extents: k and v against q (square: one S), v's heads k's; o, do, dq q's shape; dk, dv k's; lse [B, H, S]
  call.B = q.shape[0];
  call.S = q.shape[1];
  call.H = q.shape[2];
  call.D = q.shape[3];
  for (auto [name, t] : {std::pair{"k", call.k}, std::pair{"v", call.v}}) {
    c.extent(name, *t, 0, call.B, "B");
    c.extent(name, *t, 1, call.S, "S, q's sequence length");
    if (t == call.v) c.extent(name, *t, 2, k.shape[2], "H_kv, k's heads");
    c.extent(name, *t, 3, call.D, "D");
  }
  call.H_kv = k.shape[2];
  static constexpr const char* kQDims[] = {"B", "S", "H", "D"};
  static constexpr const char* kKDims[] = {"B", "S", "H_kv", "D"};
  for (auto [name, t] : q_like)
    for (int d = 0; d < 4; ++d) c.extent(name, *t, d, q.shape[d], kQDims[d]);
  for (auto [name, t] : k_like)
    for (int d = 0; d < 4; ++d) c.extent(name, *t, d, k.shape[d], kKDims[d]);
  c.extent("lse", lse, 0, call.B, "B");
  c.extent("lse", lse, 1, call.H, "H");
  c.extent("lse", lse, 2, call.S, "S");

  // accepted head dims and head counts
  if (!accepted_head_dim(call.D))
    c.fail("shape", "q", "expected head dim D in {{64, 96, 128, 256}}, got {}", call.D);
  if (call.H < 1) c.fail("shape", "q", "expected H >= 1 query heads, got {}", call.H);
  if (call.H_kv < 1 || call.H % call.H_kv != 0)
    c.fail("shape", "k", "expected H_kv dividing H (H % H_kv == 0), got H = {}, H_kv = {}", call.H, call.H_kv);

  // layouts: inputs class F (read-only, so zero strides are allowed), lse class M, outputs class O
  c.feature("q", q, /*read_only=*/true);
  c.feature("k", k, true);
  c.feature("v", *call.v, true);
  c.feature("o", *call.o, true);
  c.feature("do", *call.dout, true);
  c.metadata("lse", lse);
  const std::initializer_list<std::pair<std::string_view, const TensorRef*>> inputs = {
      {"q", call.q}, {"k", call.k}, {"v", call.v}, {"o", call.o}, {"do", call.dout}, {"lse", call.lse}};
  c.output("dq", *call.dq, inputs);
  c.output("dk", *call.dk, inputs);
  c.output("dv", *call.dv, inputs);
  c.output("dq", *call.dq, {{"dk", call.dk}, {"dv", call.dv}});
  c.output("dk", *call.dk, {{"dv", call.dv}});

  // devices: one placement for all
  for (auto [name, t] : {std::pair{"q", call.q}, std::pair{"k", call.k}, std::pair{"v", call.v}, std::pair{"o", call.o},
                         std::pair{"do", call.dout}, std::pair{"lse", call.lse}, std::pair{"dq", call.dq},
                         std::pair{"dk", call.dk}, std::pair{"dv", call.dv}})
    c.device(name, *t);
  call.device = c.call_device();
  call.scale = cfg.sm_scale.value_or(1.0 / std::sqrt(static_cast<double>(call.D)));
  return call;
}

namespace {

// Why impl 'kernel' cannot serve any call in this build (every backend, every arch).
[[noreturn]] void no_kernel(detail::Backend backend) {
  throw Unsupported(fmt::format("{}: unsupported: impl 'kernel' (backend '{}'): no GPU kernel is built yet for this op; "
                                "use impl 'reference' (CPU)",
                                kOp, detail::backend_name(backend)));
}

class GqaBwdOp final : public detail::OpInstance {
 public:
  GqaBwdOp(OpContext& ctx, const nlohmann::json& config)
      : GqaBwdOp(ctx, detail::ConfigReader(kOp, config, gqa_bwd_config_keys())) {}

  // The descriptor checks of a device call run (so a compile-only caller sees the same rejections as
  // a run), and there is nothing to compile: a kernel plan for the call fails in build_plan.
  std::vector<jit::KernelSpec> kernels_for(const TensorArgs& tensors, const std::string& arch) const override {
    (void)arch;
    validate_gqa_bwd_call(cfg_, tensors, Placement::kDevice);
    return {};
  }

 protected:
  std::string signature(const TensorArgs& tensors) const override {
    validate_gqa_bwd_call(cfg_, tensors, placement_for(impl_));
    return impl_ == detail::Impl::kReference ? "reference" : "kernel";
  }

  std::shared_ptr<const detail::PlanImpl> build_plan(const TensorArgs& tensors) override {
    (void)tensors;
    if (impl_ != detail::Impl::kReference) no_kernel(backend_);
    return reference_plan(kOp, [cfg = cfg_](const TensorArgs& t, void*) {
      reference::gqa_backward(cfg, validate_gqa_bwd_call(cfg, t, Placement::kHost));
    });
  }

 private:
  GqaBwdOp(OpContext& ctx, const detail::ConfigReader& r)
      : OpInstance(ctx, kOp, r.impl(), r.backend()), cfg_(parse_gqa_bwd_config(r)) {}
  GqaBwdConfig cfg_;
};

}  // namespace

}  // namespace attnjit::ops

namespace attnjit::detail {

OpDefinition gqa_bwd_definition() {
  // No kernels yet: the warm-up compiles nothing for this op.
  return ops::op_definition<ops::GqaBwdOp>(ops::kOp, [](const std::string&) { return std::vector<jit::KernelSpec>{}; });
}

// Rank: the op's place in `attnjit info` and the warm-up (ops/registry.hpp), after the dense forwards.
const OpRegistrar kGqaBwdRegistrar{35, &gqa_bwd_definition};

}  // namespace attnjit::detail
