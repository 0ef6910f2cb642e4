// gqa_fwd and gqa_varlen_fwd (SPEC.md §2.7, §2.8): configuration, validation, kernel choice, launch
// geometry, and the kernel and reference plans.
#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <sstream>

#include "dense/gqa_fwd_params.cuh"
#include "jit/cuda_driver.hpp"
#include "ops/arch.hpp"
#include "ops/dense/gqa_call.hpp"
#include "ops/dense/reference.hpp"
#include "runtime/host_copy.hpp"
#include "runtime/op_registry.hpp"
#include "runtime/runtime_impl.hpp"

namespace attnjit::ops {

namespace {

using detail::ArgChecker;
using detail::Placement;

[[noreturn]] void param_error(const GqaConfig& cfg, std::string_view name, const std::string& what) {
  throw InvalidArgument(fmt::format("{}: param: {}: {}", cfg.op_name(), name, what));
}

GqaConfig parse_config(bool varlen, const detail::ConfigReader& r) {
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

const std::vector<std::string>& config_keys() {
  static const std::vector<std::string> keys = {"is_causal", "window_size_left", "window_size_right", "sm_scale",
                                                "softcap", "pos_encoding_mode", "rotary_dim", "rope_layout",
                                                "out_dtype", "validate_inputs"};
  return keys;
}

}  // namespace

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
    if (!t) continue;
    c.rank(scale_names[s], *t, 2, "[B, H_kv]");
    c.extent(scale_names[s], *t, 0, call.B, "B");
    c.extent(scale_names[s], *t, 1, call.H_kv, "H_kv");
    c.dtype_is(scale_names[s], *t, DType::kF32);
    c.metadata(scale_names[s], *t);
  }

  // rope tables
  const bool rope = cfg.rope != RopeLayout::kNone;
  call.rope_cos = c.required_iff("rope_cos", rope, "with pos_encoding_mode \"rope\"");
  call.rope_sin = c.required_iff("rope_sin", rope, "with pos_encoding_mode \"rope\"");
  if (rope) {
    call.R = cfg.rotary_dim.value_or(call.D);
    if (call.R > call.D) c.fail("shape", "rotary_dim", "expected rotary_dim <= D = {}, got {}", call.D, call.R);
    for (auto [name, t] : {std::pair{"rope_cos", call.rope_cos}, std::pair{"rope_sin", call.rope_sin}}) {
      c.rank(name, *t, 2, "[P, R/2]");
      c.extent(name, *t, 1, call.R / 2, "R/2");
      c.dtype_is(name, *t, call.compute_dtype, "(the compute dtype)");
      c.metadata(name, *t);
    }
    call.P = call.rope_cos->shape[0];
    c.extent("rope_sin", *call.rope_sin, 0, call.P, "P, rope_cos' positions");
    if (!cfg.varlen && call.P < call.S_kv)
      c.fail("shape", "rope_cos", "expected P >= S_kv = {} table positions, got {}", call.S_kv, call.P);
  }

  // sinks (varlen)
  if (cfg.varlen) {
    call.sinks = c.optional("sinks");
    if (call.sinks) {
      c.rank("sinks", *call.sinks, 1, "[H]");
      c.extent("sinks", *call.sinks, 0, call.H, "H");
      c.dtype_is("sinks", *call.sinks, DType::kF32);
      c.metadata("sinks", *call.sinks);
    }
  }

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

namespace {

// validate_inputs: the caller contract of §2.7/§2.8 on host copies of the contract-bearing tensors.
void check_contents(const GqaConfig& cfg, const GqaCall& call, void* stream) {
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

// The kernel's static configuration: everything that selects a template instantiation.
struct GqaKernelChoice {
  DType in_dtype, compute_dtype;
  int D, BM, BN, warps;
  bool causal, window, softcap, varlen, sinks;
  RopeLayout rope;
  std::string arch;

  // Must equal GqaFwdConfig::kSmemBytes: Q, double-buffered K and V, plus with RoPE the low parts of the
  // rotated Q and (double-buffered) K.
  int smem_bytes() const { return (BM + 4 * BN + (rope != RopeLayout::kNone ? BM + 2 * BN : 0)) * (D + 8) * 2; }
};

std::string_view device_type(DType dt) {
  switch (dt) {
    case DType::kF16: return "__half";
    case DType::kBF16: return "__nv_bfloat16";
    case DType::kE4M3: return "__nv_fp8_e4m3";
    default: return "?";
  }
}

// The tile override of RuntimeOptions::gqa_tile ("BMxBNxWARPS"), checked against what the kernel
// template accepts for head dim D.
struct TileOverride {
  int BM = 0, BN = 0, warps = 0;
};
TileOverride parse_tile(const GqaConfig& cfg, const std::string& text, int64_t D) {
  TileOverride t;
  if (text.empty()) return t;
  char x1 = 0, x2 = 0;
  std::istringstream in(text);
  in >> t.BM >> x1 >> t.BN >> x2 >> t.warps;
  const int rows_per_warp = t.warps > 0 ? t.BM / t.warps : 0;
  const bool ok = in && in.peek() == EOF && x1 == 'x' && x2 == 'x' && (t.warps == 4 || t.warps == 8) &&
                  (t.BN == 16 || t.BN == 32 || t.BN == 64) && t.BM % (16 * t.warps) == 0 &&
                  (rows_per_warp == 16 || (rows_per_warp == 32 && D <= 128));
  if (!ok)
    throw InvalidArgument(fmt::format("{}: param: ATTNJIT_GQA_TILE: expected \"BMxBNxWARPS\" with WARPS 4 or 8, BN 16, "
                                      "32 or 64, and 16 rows per warp (or 32 for D <= 128), got \"{}\"",
                                      cfg.op_name(), text));
  return t;
}

GqaKernelChoice choose_kernel(const GqaConfig& cfg, DType in_dtype, DType compute_dtype, int64_t D, bool sinks,
                              const std::string& arch, const std::string& tile_override = "") {
  GqaKernelChoice k;
  k.in_dtype = in_dtype;
  k.compute_dtype = compute_dtype;
  k.D = static_cast<int>(D);
  // NOTE: 32 rows per warp (two m16 tiles) halves the shared-memory traffic per MMA; D = 256 keeps one
  // m16 tile per warp so the O accumulator (128 registers) fits, with 8 warps so that a CTA still covers
  // 128 rows: half the K/V traffic of BM = 64 (H200, 2026-11-30: 271/291 vs 246/244 TFLOP/s causal/full). BN = 32 for D >= 96 leaves the compiler
  // registers to pipeline ldmatrix and keeps the double-buffered tiles at two CTAs per SM (H200,
  // 2026-11-30, single-buffered: D = 128 causal 313 vs 297 TFLOP/s for BN 64, window 288 vs 261).
  k.BM = 128;
  k.BN = D == 64 ? 64 : 32;
  k.warps = D == 256 ? 8 : 4;
  if (D == 256 && cfg.rope != RopeLayout::kNone) {
    // RoPE's low-part tiles would take the 128-row D = 256 tile past the 227 KB of shared memory.
    k.BM = 64;
    k.warps = 4;
  }
  if (const TileOverride t = parse_tile(cfg, tile_override, D); t.BM) {
    k.BM = t.BM;
    k.BN = t.BN;
    k.warps = t.warps;
  }
  k.causal = cfg.is_causal;
  k.window = cfg.has_window();
  k.softcap = cfg.softcap > 0;
  k.varlen = cfg.varlen;
  k.sinks = sinks;
  k.rope = cfg.rope;
  k.arch = arch;
  return k;
}

jit::KernelSpec kernel_spec(const GqaConfig& cfg, const GqaKernelChoice& k) {
  const int rope = k.rope == RopeLayout::kNone ? 0 : k.rope == RopeLayout::kNeox ? 1 : 2;
  jit::KernelSpec s;
  s.op = cfg.op_name();
  s.template_file = "dense/gqa_fwd.cuh";
  s.entry = fmt::format("attnjit::kernels::gqa_fwd<{}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}>",
                        device_type(k.compute_dtype), device_type(k.in_dtype), k.D, k.BM, k.BN, k.warps, k.causal,
                        k.window, k.softcap, rope, k.varlen, k.sinks);
  const char* rope_name = rope == 0 ? "none" : rope == 1 ? "neox" : "interleaved";
  s.fields = {{"backend", "portable"},
              {"dtype", std::string(dtype_name(k.in_dtype))},
              {"out_dtype", std::string(dtype_name(k.compute_dtype))},
              {"head_dim", std::to_string(k.D)},
              {"block_m", std::to_string(k.BM)},
              {"block_n", std::to_string(k.BN)},
              {"warps", std::to_string(k.warps)},
              {"causal", k.causal ? "1" : "0"},
              {"window", k.window ? "1" : "0"},
              {"softcap", k.softcap ? "1" : "0"},
              {"rope", rope_name},
              {"varlen", k.varlen ? "1" : "0"},
              {"sinks", k.sinks ? "1" : "0"}};
  s.arch = k.arch;
  std::string name = fmt::format("{}.portable.{}", cfg.op_name(), dtype_name(k.in_dtype));
  if (k.in_dtype != k.compute_dtype) name += fmt::format(".out-{}", dtype_name(k.compute_dtype));
  name += fmt::format(".d{}.bm{}.bn{}", k.D, k.BM, k.BN);
  if (k.causal) name += ".causal";
  if (k.window) name += ".window";
  if (k.softcap) name += ".softcap";
  if (rope) name += fmt::format(".rope-{}", rope_name);
  if (k.sinks) name += ".sinks";
  s.name = name;
  return s;
}

void check_backend(const GqaConfig& cfg, detail::Backend backend, const std::string& arch) {
  if (backend == detail::Backend::kHopper)
    throw Unsupported(fmt::format("{}: backend 'hopper' (wgmma/TMA) is not built yet for this op; use backend 'auto' or "
                                  "'portable'", cfg.op_name()));
  if (arch_number(arch) < 80)
    throw Unsupported(fmt::format("{}: backend 'portable' needs sm_80 or newer, got {}", cfg.op_name(), arch));
}

class KernelPlan final : public detail::PlanImpl {
 public:
  KernelPlan(const GqaConfig& cfg, GqaKernelChoice choice, std::shared_ptr<const jit::LoadedKernel> kernel)
      : cfg_(cfg), choice_(std::move(choice)), kernel_(std::move(kernel)) {}

  void execute(const TensorArgs& tensors, void* stream) const override {
    const GqaCall call = validate_gqa_call(cfg_, tensors, Placement::kDevice);
    if (call.in_dtype != choice_.in_dtype || call.compute_dtype != choice_.compute_dtype || call.D != choice_.D ||
        (call.sinks != nullptr) != choice_.sinks || call.device.index != kernel_->device)
      throw InvalidArgument(fmt::format("{}: args: tensors: expected this plan's static signature ({}), got dtype {}, D {}, "
                                        "sinks {}, {}; build a plan for the new signature", cfg_.op_name(),
                                        kernel_->compiled->spec.describe(), dtype_name(call.in_dtype), call.D,
                                        call.sinks != nullptr, device_name(call.device)));
    const auto& drv = jit::CudaDriver::get();
    drv.bind_device(call.device.index);
    if (cfg_.validate_inputs) check_contents(cfg_, call, stream);
    const int64_t g = call.H / call.H_kv;
    CUlaunchConfig lc{};
    if (cfg_.varlen) {
      if (call.B == 0) return;
      lc.gridDimX = static_cast<unsigned>((call.T_q * g + choice_.BM - 1) / choice_.BM + call.B);
      lc.gridDimZ = 1;
    } else {
      if (call.B == 0 || call.S_q == 0) return;
      if (call.B > 65535) throw Unsupported(fmt::format("{}: batch {} exceeds the 65535 this kernel's grid takes", cfg_.op_name(), call.B));
      lc.gridDimX = static_cast<unsigned>((call.S_q * g + choice_.BM - 1) / choice_.BM);
      lc.gridDimZ = static_cast<unsigned>(call.B);
    }
    lc.gridDimY = static_cast<unsigned>(call.H_kv);
    lc.blockDimX = choice_.warps * 32;
    lc.blockDimY = lc.blockDimZ = 1;
    lc.sharedMemBytes = static_cast<unsigned>(choice_.smem_bytes());
    lc.hStream = static_cast<CUstream>(stream);
    kernels::GqaFwdParams p = params(call, g);
    void* args[] = {&p};
    drv.check(drv.cuLaunchKernelEx(&lc, kernel_->function, args, nullptr),
              fmt::format("{}: cuLaunchKernelEx", cfg_.op_name()).c_str());
  }

  std::string describe() const override {
    return fmt::format("{} kernel plan: {}", cfg_.op_name(), kernel_->compiled->spec.describe());
  }

 private:
  kernels::GqaFwdParams params(const GqaCall& call, int64_t g) const {
    kernels::GqaFwdParams p{};
    const int sd = cfg_.varlen ? 0 : 1;  // first token axis
    p.q = call.q->data;
    p.k = call.k->data;
    p.v = call.v->data;
    p.o = call.o->data;
    p.lse = call.lse ? static_cast<float*>(call.lse->data) : nullptr;
    auto strides3 = [&](const TensorRef& t, long long& sb, long long& ss, long long& sh) {
      sb = cfg_.varlen ? 0 : t.strides[0];
      ss = t.strides[sd];
      sh = t.strides[sd + 1];
    };
    strides3(*call.q, p.q_sb, p.q_ss, p.q_sh);
    strides3(*call.k, p.k_sb, p.k_ss, p.k_sh);
    strides3(*call.v, p.v_sb, p.v_ss, p.v_sh);
    strides3(*call.o, p.o_sb, p.o_ss, p.o_sh);
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
    if (call.q_scale) {
      p.q_scale = static_cast<const float*>(call.q_scale->data);
      p.k_scale = static_cast<const float*>(call.k_scale->data);
      p.v_scale = static_cast<const float*>(call.v_scale->data);
      p.qsc_sb = call.q_scale->strides[0];
      p.qsc_sr = call.q_scale->strides[1];
      p.ksc_sb = call.k_scale->strides[0];
      p.ksc_sr = call.k_scale->strides[1];
      p.vsc_sb = call.v_scale->strides[0];
      p.vsc_sr = call.v_scale->strides[1];
    }
    if (call.rope_cos) {
      p.rope_cos = call.rope_cos->data;
      p.rope_sin = call.rope_sin->data;
      p.cos_sp = call.rope_cos->strides[0];
      p.cos_sc = call.rope_cos->strides[1];
      p.sin_sp = call.rope_sin->strides[0];
      p.sin_sc = call.rope_sin->strides[1];
      p.rotary_dim = static_cast<int>(call.R);
    }
    if (call.sinks) {
      p.sinks = static_cast<const float*>(call.sinks->data);
      p.sinks_s = call.sinks->strides[0];
    }
    if (cfg_.varlen) {
      p.cu_q = static_cast<const int*>(call.cu_seqlens_q->data);
      p.cu_kv = static_cast<const int*>(call.cu_seqlens_kv->data);
    }
    p.batch = static_cast<int>(call.B);
    p.s_q = static_cast<int>(call.S_q);
    p.s_kv = static_cast<int>(call.S_kv);
    p.h_kv = static_cast<int>(call.H_kv);
    p.group = static_cast<int>(g);
    p.window_left = static_cast<int>(std::min<int64_t>(cfg_.window_left, std::numeric_limits<int>::max()));
    p.window_right = static_cast<int>(std::min<int64_t>(cfg_.window_right, std::numeric_limits<int>::max()));
    constexpr double kLog2e = 1.4426950408889634;
    p.scale_log2 = static_cast<float>(call.scale * kLog2e);
    p.softcap = static_cast<float>(cfg_.softcap);
    if (cfg_.softcap > 0) {
      p.softcap_inv_scale = static_cast<float>(call.scale / cfg_.softcap);
      p.softcap_log2 = static_cast<float>(cfg_.softcap * kLog2e);
    }
    return p;
  }

  GqaConfig cfg_;
  GqaKernelChoice choice_;
  std::shared_ptr<const jit::LoadedKernel> kernel_;
};

class ReferencePlan final : public detail::PlanImpl {
 public:
  explicit ReferencePlan(const GqaConfig& cfg) : cfg_(cfg) {}
  void execute(const TensorArgs& tensors, void* stream) const override {
    const GqaCall call = validate_gqa_call(cfg_, tensors, Placement::kHost);
    if (cfg_.validate_inputs) check_contents(cfg_, call, stream);
    reference::gqa_forward(cfg_, call);
  }
  std::string describe() const override { return fmt::format("{} reference plan (CPU)", cfg_.op_name()); }

 private:
  GqaConfig cfg_;
};

class GqaFwdOp final : public detail::OpInstance {
 public:
  GqaFwdOp(detail::RuntimeImpl& rt, bool varlen, const nlohmann::json& config)
      : GqaFwdOp(rt, varlen, detail::ConfigReader(varlen ? "gqa_varlen_fwd" : "gqa_fwd", config, config_keys())) {}

  std::vector<jit::KernelSpec> kernels_for(const TensorArgs& tensors, const std::string& arch) const override {
    const GqaCall call = validate_gqa_call(cfg_, tensors, Placement::kDevice);
    check_backend(cfg_, backend_, arch);
    return {kernel_spec(cfg_, choose_kernel(cfg_, call.in_dtype, call.compute_dtype, call.D, call.sinks != nullptr, arch,
                                            rt_.options().gqa_tile))};
  }

 protected:
  std::string signature(const TensorArgs& tensors) const override {
    const bool ref = impl_ == detail::Impl::kReference;
    const GqaCall call = validate_gqa_call(cfg_, tensors, ref ? Placement::kHost : Placement::kDevice);
    if (ref) return "reference";
    return fmt::format("{}.{}.{}.{}.{}", static_cast<int>(call.in_dtype), static_cast<int>(call.compute_dtype), call.D,
                       call.sinks != nullptr, call.device.index);
  }

  std::shared_ptr<const detail::PlanImpl> build_plan(const TensorArgs& tensors) override {
    if (impl_ == detail::Impl::kReference) return std::make_shared<ReferencePlan>(cfg_);
    const GqaCall call = validate_gqa_call(cfg_, tensors, Placement::kDevice);
    const std::string arch = rt_.arch_for_device(call.device.index);
    check_backend(cfg_, backend_, arch);
    auto choice = choose_kernel(cfg_, call.in_dtype, call.compute_dtype, call.D, call.sinks != nullptr, arch,
                                rt_.options().gqa_tile);
    auto kernel = rt_.kernels().loaded(kernel_spec(cfg_, choice), call.device.index);
    if (choice.smem_bytes() > kernel->max_dynamic_smem_bytes)
      throw Unsupported(fmt::format("{}: kernel {} needs {} bytes of shared memory, the device allows {}", cfg_.op_name(),
                                    kernel->compiled->spec.describe(), choice.smem_bytes(), kernel->max_dynamic_smem_bytes));
    const auto& drv = jit::CudaDriver::get();
    drv.check(drv.cuFuncSetAttribute(kernel->function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, choice.smem_bytes()),
              "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)");
    return std::make_shared<KernelPlan>(cfg_, std::move(choice), std::move(kernel));
  }

 private:
  GqaFwdOp(detail::RuntimeImpl& rt, bool varlen, const detail::ConfigReader& r)
      : OpInstance(rt, varlen ? "gqa_varlen_fwd" : "gqa_fwd", r.impl(), r.backend()), cfg_(parse_config(varlen, r)) {}
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
        specs.push_back(kernel_spec(cfg, choose_kernel(cfg, dt, dt, D, false, arch)));
      }
  return specs;
}

}  // namespace

}  // namespace attnjit::ops

namespace attnjit::detail {

OpDefinition gqa_fwd_definition() {
  OpDefinition d;
  d.name = "gqa_fwd";
  d.create = [](RuntimeImpl& rt, const nlohmann::json& config) -> std::shared_ptr<OpInstance> {
    return std::make_shared<ops::GqaFwdOp>(rt, false, config);
  };
  d.default_matrix = [](const std::string& arch) { return ops::default_matrix(false, arch); };
  return d;
}

OpDefinition gqa_varlen_fwd_definition() {
  OpDefinition d;
  d.name = "gqa_varlen_fwd";
  d.create = [](RuntimeImpl& rt, const nlohmann::json& config) -> std::shared_ptr<OpInstance> {
    return std::make_shared<ops::GqaFwdOp>(rt, true, config);
  };
  d.default_matrix = [](const std::string& arch) { return ops::default_matrix(true, arch); };
  return d;
}

}  // namespace attnjit::detail
