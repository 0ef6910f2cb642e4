// gqa_fwd and gqa_varlen_fwd (SPEC.md §2.7, §2.8): configuration, validation, the content checks and
// kernel parameters both backends share, backend and kernel choice, the reference plan and the warm-up
// matrix. The kernel plans: gqa_fwd_portable.cpp, gqa_fwd_hopper.cpp.
#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <sstream>

#include "dense/gqa_fwd_params.cuh"
#include "jit/cuda_driver.hpp"
#include "ops/base/arch.hpp"
#include "ops/base/op_helpers.hpp"
#include "ops/attention/attention_kernel.hpp"
#include "ops/attention/gqa_call.hpp"
#include "ops/dense/gqa_fwd_plans.hpp"
#include "ops/dense/reference.hpp"
#include "ops/base/host_copy.hpp"
#include "ops/base/op.hpp"
#include "ops/registry.hpp"
#include "ops/base/backend.hpp"
#include "ops/base/context.hpp"

namespace attnjit::ops {

namespace {

using detail::ArgChecker;
using detail::Placement;

[[noreturn]] void param_error(const GqaConfig& cfg, std::string_view name, const std::string& what) {
  throw InvalidArgument(fmt::format("{}: param: {}: {}", cfg.op_name(), name, what));
}

}  // namespace

GqaConfig parse_gqa_config(bool varlen, const detail::ConfigReader& r) {
  GqaConfig c;
  c.varlen = varlen;
  c.is_causal = r.get_bool("is_causal", true);
  for (auto [key, field] : {std::pair{"window_size_left", &c.window_left}, std::pair{"window_size_right", &c.window_right}}) {
    const double w = r.get_number(key, -1);
    if (w != std::floor(w) || w < -1) param_error(c, key, fmt::format("expected an integer >= -1, got {}", w));
    *field = static_cast<int64_t>(w);
  }
  if (r.has("sm_scale")) {
    const double s = r.get_number("sm_scale", 0);
    if (!std::isfinite(s) || s <= 0) param_error(c, "sm_scale", fmt::format("expected a finite value > 0, got {}", s));
    c.sm_scale = s;
  }
  c.softcap = r.get_number("softcap", 0);
  if (!std::isfinite(c.softcap) || c.softcap < 0)
    param_error(c, "softcap", fmt::format("expected a finite value >= 0, got {}", c.softcap));
  const std::string mode = r.get_string("pos_encoding_mode", "none");
  if (mode != "none" && mode != "rope")
    param_error(c, "pos_encoding_mode", fmt::format("expected \"none\" or \"rope\", got \"{}\"", mode));
  const std::string layout = r.get_string("rope_layout", "neox");
  if (layout != "neox" && layout != "interleaved")
    param_error(c, "rope_layout", fmt::format("expected \"neox\" or \"interleaved\", got \"{}\"", layout));
  if (mode == "rope") c.rope = layout == "neox" ? RopeLayout::kNeox : RopeLayout::kInterleaved;
  if (r.has("rotary_dim")) {
    const double rd = r.get_number("rotary_dim", 0);
    if (c.rope == RopeLayout::kNone) param_error(c, "rotary_dim", "expected no rotary_dim without pos_encoding_mode \"rope\", got one");
    if (rd != std::floor(rd) || rd < 2 || static_cast<int64_t>(rd) % 2 != 0)
      param_error(c, "rotary_dim", fmt::format("expected an even integer >= 2, got {}", rd));
    c.rotary_dim = static_cast<int64_t>(rd);
  }
  if (r.has("out_dtype")) {
    const std::string od = r.get_string("out_dtype", "");
    auto dt = parse_dtype(od);
    if (!dt || !is_float16(*dt)) param_error(c, "out_dtype", fmt::format("expected \"fp16\" or \"bf16\", got \"{}\"", od));
    c.out_dtype = *dt;
  }
  c.validate_inputs = r.get_bool("validate_inputs", false);
  return c;
}

const std::vector<std::string>& gqa_config_keys() {
  static const std::vector<std::string> keys = {"is_causal", "window_size_left", "window_size_right", "sm_scale",
                                                "softcap", "pos_encoding_mode", "rotary_dim", "rope_layout",
                                                "out_dtype", "validate_inputs"};
  return keys;
}

void check_kv_head_scale(ArgChecker& c, const char* name, const TensorRef& t, int64_t B, int64_t H_kv) {
  c.rank(name, t, 2, "[B, H_kv]");
  c.extent(name, t, 0, B, "B");
  c.extent(name, t, 1, H_kv, "H_kv");
  c.dtype_is(name, t, DType::kF32);
  c.metadata(name, t);
}

RopeTables check_rope_tables(ArgChecker& c, const GqaConfig& cfg, int64_t D, DType compute_dtype) {
  const bool rope = cfg.rope != RopeLayout::kNone;
  RopeTables r;
  r.cos = c.required_iff("rope_cos", rope, "with pos_encoding_mode \"rope\"");
  r.sin = c.required_iff("rope_sin", rope, "with pos_encoding_mode \"rope\"");
  if (!rope) return r;
  r.R = cfg.rotary_dim.value_or(D);
  if (r.R > D) c.fail("shape", "rotary_dim", "expected rotary_dim <= D = {}, got {}", D, r.R);
  for (auto [name, t] : {std::pair{"rope_cos", r.cos}, std::pair{"rope_sin", r.sin}}) {
    c.rank(name, *t, 2, "[P, R/2]");
    c.extent(name, *t, 1, r.R / 2, "R/2");
    c.dtype_is(name, *t, compute_dtype, "(the compute dtype)");
    c.metadata(name, *t);
  }
  r.P = r.cos->shape[0];
  c.extent("rope_sin", *r.sin, 0, r.P, "P, rope_cos' positions");
  return r;
}

const TensorRef* check_sinks(ArgChecker& c, int64_t H) {
  const TensorRef* s = c.optional("sinks");
  if (s) {
    c.rank("sinks", *s, 1, "[H]");
    c.extent("sinks", *s, 0, H, "H");
    c.dtype_is("sinks", *s, DType::kF32);
    c.metadata("sinks", *s);
  }
  return s;
}

GqaCall validate_gqa_call(const GqaConfig& cfg, const TensorArgs& args, Placement placement) {
  ArgChecker c(cfg.op_name(), args, placement);
  if (cfg.varlen)
    c.only_known({"q", "k", "v", "o", "lse", "q_scale", "k_scale", "v_scale", "rope_cos", "rope_sin", "sinks",
                  "cu_seqlens_q", "cu_seqlens_kv"});
  else
    c.only_known({"q", "k", "v", "o", "lse", "q_scale", "k_scale", "v_scale", "rope_cos", "rope_sin"});
  GqaCall call;
  const TensorRef& q = c.required("q");
  const TensorRef& k = c.required("k");
  const TensorRef& v = c.required("v");
  const TensorRef& o = c.required("o");
  call.q = &q;
  call.k = &k;
  call.v = &v;
  call.o = &o;
  call.lse = c.optional("lse");

  // dtypes
  c.dtype_in("q", q, {DType::kF16, DType::kBF16, DType::kE4M3});
  c.dtype_is("k", k, q.dtype, "(q's dtype)");
  c.dtype_is("v", v, q.dtype, "(q's dtype)");
  call.in_dtype = q.dtype;
  const bool fp8 = q.dtype == DType::kE4M3;
  if (fp8) {
    if (!cfg.out_dtype) c.fail("dtype", "out_dtype", "expected fp16 or bf16 for e4m3 input q, got none");
    call.compute_dtype = *cfg.out_dtype;
  } else {
    if (cfg.out_dtype && *cfg.out_dtype != q.dtype)
      c.fail("dtype", "out_dtype", "expected unset or the input dtype {} for a 16-bit call, got {}", dtype_name(q.dtype),
             dtype_name(*cfg.out_dtype));
    call.compute_dtype = q.dtype;
  }

  // shapes
  if (cfg.varlen) {
    c.rank("q", q, 3, "[T_q, H, D]");
    c.rank("k", k, 3, "[T_kv, H_kv, D]");
    c.rank("v", v, 3, "[T_kv, H_kv, D]");
    call.T_q = q.shape[0];
    call.H = q.shape[1];
    call.D = q.shape[2];
    call.T_kv = k.shape[0];
    call.H_kv = k.shape[1];
    const TensorRef& cq = c.required("cu_seqlens_q");
    const TensorRef& ck = c.required("cu_seqlens_kv");
    call.cu_seqlens_q = &cq;
    call.cu_seqlens_kv = &ck;
    c.rank("cu_seqlens_q", cq, 1, "[B + 1]");
    c.rank("cu_seqlens_kv", ck, 1, "[B + 1]");
    if (cq.shape[0] < 1) c.fail("shape", "cu_seqlens_q", "expected length B + 1 >= 1, got {}", cq.shape[0]);
    c.extent("cu_seqlens_kv", ck, 0, cq.shape[0], "B + 1, cu_seqlens_q's length");
    c.dtype_is("cu_seqlens_q", cq, DType::kI32);
    c.dtype_is("cu_seqlens_kv", ck, DType::kI32);
    call.B = cq.shape[0] - 1;
  } else {
    c.rank("q", q, 4, "[B, S_q, H, D]");
    c.rank("k", k, 4, "[B, S_kv, H_kv, D]");
    c.rank("v", v, 4, "[B, S_kv, H_kv, D]");
    call.B = q.shape[0];
    call.S_q = q.shape[1];
    call.H = q.shape[2];
    call.D = q.shape[3];
    call.S_kv = k.shape[1];
    call.H_kv = k.shape[2];
    c.extent("k", k, 0, call.B, "B, q's batch");
  }
  const int hd = cfg.varlen ? 2 : 3;  // the D axis
  const int hh = hd - 1;              // the head axis
  c.extent("k", k, hd, call.D, "D, q's head dim");
  for (int d = 0; d < k.ndim; ++d) c.extent("v", v, d, k.shape[d], "k's shape");
  if (call.H < 1) c.fail("shape", "q", "expected H >= 1, got {} (shape {})", call.H, q.shape_str());
  if (call.H_kv < 1) c.fail("shape", "k", "expected H_kv >= 1, got {} (shape {})", call.H_kv, k.shape_str());
  if (call.H % call.H_kv != 0)
    c.fail("shape", "k", "expected H_kv dividing q's H = {}, got H_kv = {}", call.H, call.H_kv);
  if (call.D != 64 && call.D != 96 && call.D != 128 && call.D != 256)
    c.fail("shape", "q", "expected head dim D in {{64, 96, 128, 256}}, got {}", call.D);
  if (!cfg.varlen && call.S_q > call.S_kv && (cfg.is_causal || cfg.rope != RopeLayout::kNone))
    c.fail("shape", "q", "expected S_q <= S_kv = {} for a causal or rope call, got S_q = {}", call.S_kv, call.S_q);
  (void)hh;

  // scales (e4m3 only, all three)
  const char* scale_names[3] = {"q_scale", "k_scale", "v_scale"};
  const TensorRef** scale_slots[3] = {&call.q_scale, &call.k_scale, &call.v_scale};
  for (int s = 0; s < 3; ++s) {
    const TensorRef* t = c.required_iff(scale_names[s], fp8, "for e4m3 input, all three scales");
    *scale_slots[s] = t;
    if (t) check_kv_head_scale(c, scale_names[s], *t, call.B, call.H_kv);
  }

  // rope tables
  const RopeTables rope = check_rope_tables(c, cfg, call.D, call.compute_dtype);
  call.rope_cos = rope.cos;
  call.rope_sin = rope.sin;
  call.R = rope.R;
  call.P = rope.P;
  if (rope.cos && !cfg.varlen && call.P < call.S_kv)
    c.fail("shape", "rope_cos", "expected P >= S_kv = {} table positions, got {}", call.S_kv, call.P);

  // sinks (varlen)
  if (cfg.varlen) call.sinks = check_sinks(c, call.H);

  // outputs
  c.rank("o", o, q.ndim, cfg.varlen ? "[T_q, H, D]" : "[B, S_q, H, D]");
  for (int d = 0; d < q.ndim; ++d) c.extent("o", o, d, q.shape[d], "q's shape");
  c.dtype_is("o", o, call.compute_dtype, "(the compute dtype)");
  if (call.lse) {
    if (cfg.varlen) {
      c.rank("lse", *call.lse, 2, "[T_q, H]");
      c.extent("lse", *call.lse, 0, call.T_q, "T_q");
      c.extent("lse", *call.lse, 1, call.H, "H");
    } else {
      c.rank("lse", *call.lse, 3, "[B, H, S_q]");
      c.extent("lse", *call.lse, 0, call.B, "B");
      c.extent("lse", *call.lse, 1, call.H, "H");
      c.extent("lse", *call.lse, 2, call.S_q, "S_q");
    }
    c.dtype_is("lse", *call.lse, DType::kF32);
  }

  // layouts and devices
  c.feature("q", q, true);
  c.feature("k", k, true);
  c.feature("v", v, true);
  if (cfg.varlen) {
    c.contiguous("cu_seqlens_q", *call.cu_seqlens_q, false);
    c.contiguous("cu_seqlens_kv", *call.cu_seqlens_kv, false);
  }
  c.output("o", o, {{"q", &q}, {"k", &k}, {"v", &v}, {"lse", call.lse}});
  if (call.lse) c.output("lse", *call.lse, {{"q", &q}, {"k", &k}, {"v", &v}});
  for (const auto& [name, t] :
       {std::pair{"q", call.q}, std::pair{"k", call.k}, std::pair{"v", call.v}, std::pair{"o", call.o},
        std::pair{"lse", call.lse}, std::pair{"q_scale", call.q_scale}, std::pair{"k_scale", call.k_scale},
        std::pair{"v_scale", call.v_scale}, std::pair{"rope_cos", call.rope_cos}, std::pair{"rope_sin", call.rope_sin},
        std::pair{"sinks", call.sinks}, std::pair{"cu_seqlens_q", call.cu_seqlens_q},
        std::pair{"cu_seqlens_kv", call.cu_seqlens_kv}}) {
    if (t) c.device(name, *t);
  }
  call.device = c.call_device();
  call.scale = static_cast<float>(cfg.sm_scale.value_or(1.0 / std::sqrt(static_cast<double>(call.D))));
  return call;
}

// validate_inputs: the caller contract of §2.7/§2.8 on host copies of the contract-bearing tensors.
void check_gqa_contents(const GqaConfig& cfg, const GqaCall& call, void* stream) {
  const char* op = cfg.op_name();
  detail::prepare_content_checks(op, call.device, stream);
  auto fail = [&](std::string_view arg, const std::string& what) {
    throw InvalidArgument(fmt::format("{}: content: {}: {}", op, arg, what));
  };
  for (auto [name, t] : {std::pair{"q_scale", call.q_scale}, std::pair{"k_scale", call.k_scale},
                         std::pair{"v_scale", call.v_scale}}) {
    if (!t) continue;
    auto h = detail::host_view(*t);
    for (int64_t b = 0; b < t->shape[0]; ++b)
      for (int64_t r = 0; r < t->shape[1]; ++r) {
        const float s = static_cast<const float*>(h.ref.data)[b * t->strides[0] + r * t->strides[1]];
        if (!(std::isfinite(s) && s > 0)) fail(name, fmt::format("expected finite scales > 0, got {} at [{}, {}]", s, b, r));
      }
  }
  if (!cfg.varlen) return;
  auto cq = detail::host_view(*call.cu_seqlens_q);
  auto ck = detail::host_view(*call.cu_seqlens_kv);
  const auto* q_off = static_cast<const int32_t*>(cq.ref.data);
  const auto* kv_off = static_cast<const int32_t*>(ck.ref.data);
  for (auto [name, off, total] : {std::tuple{"cu_seqlens_q", q_off, call.T_q}, std::tuple{"cu_seqlens_kv", kv_off, call.T_kv}}) {
    if (off[0] != 0) fail(name, fmt::format("expected element 0 to be 0, got {}", off[0]));
    for (int64_t b = 0; b < call.B; ++b)
      if (off[b + 1] < off[b])
        fail(name, fmt::format("expected non-decreasing offsets, got {} after {} at index {}", off[b + 1], off[b], b + 1));
    if (off[call.B] != total)
      fail(name, fmt::format("expected the last offset to equal the packed extent {}, got {} at index {}", total,
                             off[call.B], call.B));
  }
  for (int64_t b = 0; b < call.B; ++b) {
    const int64_t ql = q_off[b + 1] - q_off[b], kl = kv_off[b + 1] - kv_off[b];
    if ((cfg.is_causal || cfg.rope != RopeLayout::kNone) && ql > kl)
      fail("cu_seqlens_q", fmt::format("expected q_len <= kv_len for a causal or rope call, got q_len {} > kv_len {} in "
                                       "request {}", ql, kl, b));
    if (cfg.rope != RopeLayout::kNone && call.P < kl)
      fail("rope_cos", fmt::format("expected P >= kv_len (from cu_seqlens_kv) for every request, got P = {} < kv_len {} in "
                                   "request {}", call.P, kl, b));
  }
  if (call.sinks) {
    auto h = detail::host_view(*call.sinks);
    for (int64_t i = 0; i < call.H; ++i) {
      const float s = static_cast<const float*>(h.ref.data)[i * call.sinks->strides[0]];
      if (std::isnan(s)) fail("sinks", fmt::format("expected no NaN sink, got NaN at index {}", i));
    }
  }
}

GqaCall validate_gqa_execute(const GqaConfig& cfg, const TensorArgs& tensors, const GqaFwdSignature& sig,
                             const jit::LoadedKernel& kernel) {
  const GqaCall call = validate_gqa_call(cfg, tensors, Placement::kDevice);
  if (call.in_dtype != sig.in_dtype || call.compute_dtype != sig.compute_dtype || call.D != sig.D ||
      (call.sinks != nullptr) != sig.sinks || call.device.index != kernel.device)
    throw InvalidArgument(fmt::format("{}: args: tensors: expected this plan's static signature ({}), got dtype {}, D {}, "
                                      "sinks {}, {}; build a plan for the new signature", cfg.op_name(),
                                      kernel.compiled->spec.describe(), dtype_name(call.in_dtype), call.D,
                                      call.sinks != nullptr, device_name(call.device)));
  jit::CudaDriver::get().bind_device(call.device.index);
  return call;
}

// The kernel parameters both backends share.
kernels::GqaFwdParams gqa_fwd_params(const GqaConfig& cfg_, const GqaCall& call) {
  kernels::GqaFwdParams p{};
  fill_common_params(p, cfg_, *call.q, *call.o, cfg_.varlen, call.scale, call.H, call.H_kv);
  const int sd = cfg_.varlen ? 0 : 1;  // first token axis
  p.k = call.k->data;
  p.v = call.v->data;
  p.k_sb = cfg_.varlen ? 0 : call.k->strides[0];
  p.k_ss = call.k->strides[sd];
  p.k_sh = call.k->strides[sd + 1];
  p.v_sb = cfg_.varlen ? 0 : call.v->strides[0];
  p.v_ss = call.v->strides[sd];
  p.v_sh = call.v->strides[sd + 1];
  p.lse = call.lse ? static_cast<float*>(call.lse->data) : nullptr;
  if (call.lse) {
    if (cfg_.varlen) {
      p.lse_ss = call.lse->strides[0];
      p.lse_sh = call.lse->strides[1];
    } else {
      p.lse_sb = call.lse->strides[0];
      p.lse_sh = call.lse->strides[1];
      p.lse_ss = call.lse->strides[2];
    }
  }
  fill_optional_params(p, call.q_scale, call.k_scale, call.v_scale, call.rope_cos, call.rope_sin, call.R, call.sinks);
  if (cfg_.varlen) {
    p.cu_q = static_cast<const int*>(call.cu_seqlens_q->data);
    p.cu_kv = static_cast<const int*>(call.cu_seqlens_kv->data);
  }
  p.batch = static_cast<int>(call.B);
  p.s_q = static_cast<int>(call.S_q);
  p.s_kv = static_cast<int>(call.S_kv);
  return p;
}

namespace {

class GqaFwdOp final : public detail::OpInstance {
 public:
  GqaFwdOp(OpContext& ctx, bool varlen, const nlohmann::json& config)
      : GqaFwdOp(ctx, varlen, detail::ConfigReader(varlen ? "gqa_varlen_fwd" : "gqa_fwd", config, gqa_config_keys())) {}

  std::vector<jit::KernelSpec> kernels_for(const TensorArgs& tensors, const std::string& arch) const override {
    const GqaCall call = validate_gqa_call(cfg_, tensors, Placement::kDevice);
    if (use_hopper(call, arch)) return {hopper_attention_kernel_spec(cfg_.op_name(), choose_hopper(call, arch))};
    check_attention_backend(cfg_.op_name(), backend_, arch);
    return {attention_kernel_spec(cfg_.op_name(), choose(call, arch))};
  }

 protected:
  Plan plan_for(const TensorArgs& tensors) override {
    const GqaCall call = validate_gqa_call(cfg_, tensors, placement_for(impl_));
    if (impl_ == detail::Impl::kReference)
      return cached("reference", tensors, [&] {
        return reference_plan(cfg_.op_name(), [cfg = cfg_](const TensorArgs& t, void* stream) {
          const GqaCall call = validate_gqa_call(cfg, t, Placement::kHost);
          if (cfg.validate_inputs) check_gqa_contents(cfg, call, stream);
          reference::gqa_forward(cfg, call);
        });
      });
    BackendPick pick(ctx_, backend_, call.device.index,
                     [&](const std::string& arch) { return use_hopper(call, arch); });
    std::string sig =
        fmt::format("{}.{}.{}.{}.{}.{}", static_cast<int>(call.in_dtype), static_cast<int>(call.compute_dtype), call.D,
                    call.sinks != nullptr, call.device.index, pick.auto_hopper());
    return cached(std::move(sig), tensors, [&]() -> std::shared_ptr<const detail::PlanImpl> {
      const std::string& arch = pick.arch();
      if (pick.hopper()) {
        HopperAttentionChoice choice = choose_hopper(call, arch);
        auto kernel = load_hopper_attention_kernel(ctx_, cfg_.op_name(), choice, call.device.index);
        return make_gqa_fwd_hopper_plan(cfg_, std::move(choice), std::move(kernel), ctx_.sm_count(call.device.index));
      }
      check_attention_backend(cfg_.op_name(), backend_, arch);
      AttentionKernelChoice choice = choose(call, arch);
      auto kernel = load_attention_kernel(ctx_, cfg_.op_name(), choice, call.device.index);
      return make_gqa_fwd_portable_plan(cfg_, std::move(choice), std::move(kernel));
    });
  }

 private:
  GqaFwdOp(OpContext& ctx, bool varlen, const detail::ConfigReader& r)
      : OpInstance(ctx, varlen ? "gqa_varlen_fwd" : "gqa_fwd", r.impl(), r.backend()), cfg_(parse_gqa_config(varlen, r)) {}
  // backend 'hopper' takes the hopper kernel or fails naming why; 'portable' takes the portable one;
  // 'auto' takes the hopper kernel wherever it serves the call (sm_90a, its dtypes and head dims, k/v
  // addressable by TMA) and the portable one otherwise.
  // NOTE: H200, 2026-11-30, B4 S4096 H32/8 D128 bf16: hopper 497 / 538 TFLOP/s causal / full against
  // the portable kernel's 318 / 337.
  bool use_hopper(const GqaCall& call, const std::string& arch) const {
    return pick_hopper(
        cfg_.op_name(), backend_,
        [&] { return hopper_attention_gap(cfg_, call.in_dtype, call.compute_dtype, call.D, arch); },
        [&] { return hopper_kv_gap(*call.k, *call.v, cfg_.varlen).empty(); });
  }
  HopperAttentionChoice choose_hopper(const GqaCall& call, const std::string& arch) const {
    return choose_hopper_attention(cfg_, call.in_dtype, call.D, call.sinks != nullptr, arch, /*paged=*/false,
                                   ctx_.tuning().gqa_fwd_persistent, ctx_.tuning().gqa_fwd_q_tma);
  }
  AttentionKernelChoice choose(const GqaCall& call, const std::string& arch) const {
    return choose_attention_kernel(cfg_.op_name(), cfg_, call.in_dtype, call.in_dtype, call.compute_dtype, call.D,
                                   cfg_.varlen, cfg_.varlen ? KvMode::kPacked : KvMode::kDense, call.sinks != nullptr,
                                   arch, ctx_.tuning().gqa_tile);
  }
  GqaConfig cfg_;
};

std::vector<jit::KernelSpec> default_matrix(bool varlen, const std::string& arch) {
  GqaConfig cfg;
  cfg.varlen = varlen;
  std::vector<jit::KernelSpec> specs;
  for (DType dt : {DType::kF16, DType::kBF16})
    for (int D : {64, 96, 128, 256})
      for (bool causal : {false, true}) {
        cfg.is_causal = causal;
        specs.push_back(attention_kernel_spec(
            cfg.op_name(), choose_attention_kernel(cfg.op_name(), cfg, dt, dt, dt, D, varlen,
                                                   varlen ? KvMode::kPacked : KvMode::kDense, false, arch, "")));
      }
  // The hopper backend's kernels where the target has them (sm_90a).
  if (hopper_attention_gap(cfg, DType::kBF16, DType::kBF16, 128, arch).empty())
    for (DType dt : {DType::kF16, DType::kBF16})
      for (int D : {64, 128, 256})
        for (bool causal : {false, true}) {
          cfg.is_causal = causal;
          specs.push_back(hopper_attention_kernel_spec(
              cfg.op_name(), choose_hopper_attention(cfg, dt, D, false, arch, /*paged=*/false, Tuning{}.gqa_fwd_persistent)));
        }
  return specs;
}

}  // namespace

}  // namespace attnjit::ops

namespace attnjit::detail {

OpDefinition gqa_fwd_definition() {
  return ops::op_definition<ops::GqaFwdOp>(
      "gqa_fwd", [](const std::string& arch) { return ops::default_matrix(false, arch); }, false);
}

OpDefinition gqa_varlen_fwd_definition() {
  return ops::op_definition<ops::GqaFwdOp>(
      "gqa_varlen_fwd", [](const std::string& arch) { return ops::default_matrix(true, arch); }, true);
}

// Rank: the op's place in `attnjit info` and the warm-up (ops/registry.hpp).
const OpRegistrar kGqaFwdRegistrar{20, &gqa_fwd_definition};
const OpRegistrar kGqaVarlenFwdRegistrar{30, &gqa_varlen_fwd_definition};

}  // namespace attnjit::detail
