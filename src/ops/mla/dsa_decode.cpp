// dsa_decode (SPEC.md §2.18): configuration, validation, the kernel plan (ops/mla/latent_kernel.hpp:
// the latent-decode kernel shared with mla_decode, gathering the indexed rows) and the reference plan.
#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "attnjit/error.hpp"
#include "ops/base/context.hpp"
#include "ops/base/op.hpp"
#include "ops/base/op_helpers.hpp"
#include "ops/base/validation.hpp"
#include "ops/mla/latent_kernel.hpp"
#include "ops/mla/mla_call.hpp"
#include "ops/mla/reference.hpp"
#include "ops/registry.hpp"

namespace attnjit::ops {

namespace {

using detail::ArgChecker;
using detail::Placement;

constexpr const char* kOp = "dsa_decode";

bool accepted_head_dim(int64_t D) { return D == 64 || D == 128 || D == 256 || D == 512; }
bool power_of_two(int64_t x) { return x > 0 && (x & (x - 1)) == 0; }

[[noreturn]] void param_error(const char* key, const std::string& what) {
  throw InvalidArgument(fmt::format("{}: param: {}: {}", kOp, key, what));
}

// A required integer parameter, at least `lo` (and at most INT32_MAX: positions and strides are int32).
int64_t required_int(const detail::ConfigReader& r, const char* key, int64_t lo, const char* rule) {
  if (!r.has(key)) param_error(key, fmt::format("expected {}, got none ({} is required)", rule, key));
  const double v = r.get_number(key, 0);
  if (v != std::floor(v) || v < static_cast<double>(lo) || v > std::numeric_limits<int32_t>::max())
    param_error(key, fmt::format("expected {}, got {}", rule, v));
  return static_cast<int64_t>(v);
}

}  // namespace

DsaDecodeConfig parse_dsa_decode_config(const detail::ConfigReader& r) {
  DsaDecodeConfig c;
  constexpr const char* kTailRule = "0 or a power of two in [16, 128]";
  c.dim_tail = required_int(r, "dim_tail", 0, kTailRule);
  if (c.dim_tail != 0 && !(power_of_two(c.dim_tail) && c.dim_tail >= 16 && c.dim_tail <= 128))
    param_error("dim_tail", fmt::format("expected {}, got {}", kTailRule, c.dim_tail));
  c.stride_kv = required_int(r, "stride_kv", 1, "an integer >= 1");
  c.q_start_index_s = required_int(r, "q_start_index_s", 0, "an integer >= 0");
  if (r.has("sm_scale")) {
    const double s = r.get_number("sm_scale", 0);
    if (!std::isfinite(s) || s <= 0) param_error("sm_scale", fmt::format("expected a finite value > 0, got {}", s));
    c.sm_scale = s;
  }
  c.is_causal = r.get_bool("is_causal", true);
  c.kv_splits = parse_latent_kv_splits(kOp, r);
  return c;
}

const std::vector<std::string>& dsa_decode_config_keys() {
  static const std::vector<std::string> keys = {"dim_tail", "stride_kv", "q_start_index_s", "sm_scale", "is_causal",
                                                "kv_splits"};
  return keys;
}

DsaDecodeCall validate_dsa_decode_call(const DsaDecodeConfig& cfg, const TensorArgs& args, Placement placement) {
  ArgChecker c(kOp, args, placement);
  c.only_known({"q", "kv", "indices", "o"});
  DsaDecodeCall call;
  call.q = &c.required("q");
  call.kv = &c.required("kv");
  call.indices = &c.required("indices");
  call.o = &c.required("o");
  const TensorRef &q = *call.q, &kv = *call.kv, &idx = *call.indices, &o = *call.o;

  // dtypes: q 16-bit, kv and o q's dtype, indices int32
  c.dtype_in("q", q, {DType::kF16, DType::kBF16});
  call.dtype = q.dtype;
  c.dtype_is("kv", kv, call.dtype, "(q's dtype)");
  c.dtype_is("indices", idx, DType::kI32);
  c.dtype_is("o", o, call.dtype, "(q's dtype)");

  // ranks
  c.rank("q", q, 4, "[B, S, H, D + dim_tail]");
  c.rank("kv", kv, 4, "[B, S_kv, H_kv, D + dim_tail]");
  c.rank("indices", idx, 4, "[B, S, H_kv, K]");
  c.rank("o", o, 4, "[B, S, H, D]");

  // extents
  call.B = q.shape[0];
  call.S = q.shape[1];
  call.H = q.shape[2];
  call.D_qk = q.shape[3];
  call.D = call.D_qk - cfg.dim_tail;
  c.extent("kv", kv, 0, call.B, "B");
  c.extent("kv", kv, 3, call.D_qk, "D + dim_tail, q's last dim");
  call.S_kv = kv.shape[1];
  call.H_kv = kv.shape[2];
  c.extent("indices", idx, 0, call.B, "B");
  c.extent("indices", idx, 1, call.S, "S, q's sequence length");
  c.extent("indices", idx, 2, call.H_kv, "H_kv, kv's heads");
  call.K = idx.shape[3];
  if (call.K < 1) c.fail("shape", "indices", "expected K >= 1 index slots, got {} (shape {})", call.K, idx.shape_str());
  c.extent("o", o, 0, call.B, "B");
  c.extent("o", o, 1, call.S, "S");
  c.extent("o", o, 2, call.H, "H");

  // accepted head dims and head counts (group-size rules as in TileOPs)
  if (!accepted_head_dim(call.D))
    c.fail("shape", "q", "expected head dim D = q.shape[-1] - dim_tail in {{64, 128, 256, 512}}, got {} - {} = {}",
           call.D_qk, cfg.dim_tail, call.D);
  c.extent("o", o, 3, call.D, "D = q.shape[-1] - dim_tail");
  if (call.H < 1) c.fail("shape", "q", "expected H >= 1 query heads, got {}", call.H);
  if (call.H_kv < 1 || call.H % call.H_kv != 0)
    c.fail("shape", "kv", "expected H_kv dividing H (H % H_kv == 0), got H = {}, H_kv = {}", call.H, call.H_kv);
  const int64_t g = call.group();
  if (!(g <= 64 || g % 64 == 0))
    c.fail("shape", "q", "expected group size g = H / H_kv <= 64 or a multiple of 64, got {} (H = {}, H_kv = {})", g,
           call.H, call.H_kv);
  if (call.H_kv > 1 && !(power_of_two(g) && g >= 16))
    c.fail("shape", "q", "expected group size g = H / H_kv a power of two >= 16 when H_kv > 1, got {} (H = {}, H_kv = {})",
           g, call.H, call.H_kv);

  // layouts: q, kv class F (read-only), indices class M, o class O
  c.feature("q", q, /*read_only=*/true);
  c.feature("kv", kv, true);
  c.metadata("indices", idx);
  c.output("o", o, {{"q", call.q}, {"kv", call.kv}, {"indices", call.indices}});

  // devices: one placement for all
  for (auto [name, t] : {std::pair{"q", call.q}, std::pair{"kv", call.kv}, std::pair{"indices", call.indices},
                         std::pair{"o", call.o}})
    c.device(name, *t);
  call.device = c.call_device();
  call.scale = cfg.sm_scale.value_or(1.0 / std::sqrt(static_cast<double>(call.D_qk)));
  return call;
}

namespace {

constexpr float kLog2e = 1.44269504088896340736f;

// The latent kernel's parameters and shape of a validated call: the main parts are q[..., :D] and
// kv[..., :D] (kv's is also the value row), the tails q[..., D:] and kv[..., D:].
LatentShape latent_params(const DsaDecodeConfig& cfg, const DsaDecodeCall& c, kernels::LatentDecodeParams& p) {
  const TensorRef &q = *c.q, &kv = *c.kv, &idx = *c.indices, &o = *c.o;
  p.q = q.data;
  p.q_sb = q.strides[0], p.q_ss = q.strides[1], p.q_sh = q.strides[2];
  p.q_tail = static_cast<const uint16_t*>(q.data) + c.D;
  p.qt_sb = p.q_sb, p.qt_ss = p.q_ss, p.qt_sh = p.q_sh;
  p.k = kv.data;
  p.k_sb = kv.strides[0], p.k_ss = kv.strides[1], p.k_sh = kv.strides[2];
  p.k_tail = static_cast<const uint16_t*>(kv.data) + c.D;
  p.kt_sb = p.k_sb, p.kt_ss = p.k_ss, p.kt_sh = p.k_sh;
  p.indices = static_cast<const int*>(idx.data);
  p.idx_sb = idx.strides[0], p.idx_ss = idx.strides[1], p.idx_sh = idx.strides[2], p.idx_su = idx.strides[3];
  p.o = o.data;
  p.o_sb = o.strides[0], p.o_ss = o.strides[1], p.o_sh = o.strides[2];
  p.batch = static_cast<int>(c.B);
  p.s_q = static_cast<int>(c.S);
  p.h = static_cast<int>(c.H);
  p.h_kv = static_cast<int>(c.H_kv);
  p.group = static_cast<int>(c.group());
  p.n_kv = static_cast<int>(c.S_kv);
  p.n_slots = static_cast<int>(c.K);
  p.n_splits = 1;
  p.causal = cfg.is_causal ? 1 : 0;
  p.stride_kv = static_cast<int>(cfg.stride_kv);
  p.q_start = static_cast<int>(cfg.q_start_index_s);
  p.scale_log2 = static_cast<float>(c.scale) * kLog2e;
  LatentShape s;
  s.dtype = c.dtype;
  s.D = static_cast<int>(c.D);
  s.tail = static_cast<int>(c.D_qk - c.D);
  s.mode = kernels::kLatentIndexed;
  s.B = c.B;
  s.tokens = c.S;
  s.H = c.H;
  s.H_kv = c.H_kv;
  s.rows = c.group();
  s.grid_y = c.S * c.H_kv;
  s.max_keys = c.K;
  s.device = c.device.index;
  return s;
}

// Extents the kernel indexes with 32-bit integers.
void check_int32_extents(const DsaDecodeCall& c) {
  constexpr int64_t kMax = int64_t{1} << 30;
  if (c.S_kv > kMax || c.K > kMax || c.S * c.H > kMax)
    throw Unsupported(fmt::format("{}: unsupported: S_kv, K and S * H beyond 2^30 are not served (S_kv {}, K {}, "
                                  "S * H {})",
                                  kOp, c.S_kv, c.K, c.S * c.H));
}

class DsaDecodeOp final : public detail::OpInstance {
 public:
  DsaDecodeOp(OpContext& ctx, const nlohmann::json& config)
      : DsaDecodeOp(ctx, detail::ConfigReader(kOp, config, dsa_decode_config_keys())) {}

  std::vector<jit::KernelSpec> kernels_for(const TensorArgs& tensors, const std::string& arch) const override {
    const DsaDecodeCall call = validate_dsa_decode_call(cfg_, tensors, Placement::kDevice);
    kernels::LatentDecodeParams p{};
    return latent_plan_specs(kOp, latent_params(cfg_, call, p), cfg_.kv_splits, backend_, arch, hopper_bn(ctx_));
  }

 protected:
  Plan plan_for(const TensorArgs& tensors) override {
    const DsaDecodeCall call = validate_dsa_decode_call(cfg_, tensors, placement_for(impl_));
    if (impl_ != detail::Impl::kReference)
      return cached(fmt::format("kernel.{}.{}.{}.{}", static_cast<int>(call.dtype), call.D, call.D_qk,
                                call.device.index),
                    tensors, [&] {
                      kernels::LatentDecodeParams p0{};
                      return make_latent_plan(
                          ctx_, kOp, latent_params(cfg_, call, p0), cfg_.kv_splits, backend_,
                          [cfg = cfg_](const TensorArgs& t, void*, bool, kernels::LatentDecodeParams& p) {
                            const DsaDecodeCall c = validate_dsa_decode_call(cfg, t, Placement::kDevice);
                            check_int32_extents(c);
                            return latent_params(cfg, c, p);
                          });
                    });
    return cached("reference", tensors, [&] {
      return reference_plan(kOp, [cfg = cfg_](const TensorArgs& t, void*) {
        reference::dsa_decode(cfg, validate_dsa_decode_call(cfg, t, Placement::kHost));
      });
    });
  }

 private:
  DsaDecodeOp(OpContext& ctx, const detail::ConfigReader& r)
      : OpInstance(ctx, kOp, r.impl(), r.backend()), cfg_(parse_dsa_decode_config(r)) {}
  DsaDecodeConfig cfg_;
};

}  // namespace

}  // namespace attnjit::ops

namespace attnjit::detail {

OpDefinition dsa_decode_definition() {
  // The DeepSeek-V3.2 shape: D 512, dim_tail 64, fp16 and bf16, with and without splits.
  return ops::op_definition<ops::DsaDecodeOp>(ops::kOp, [](const std::string& arch) {
    std::vector<jit::KernelSpec> specs;
    for (DType dt : {DType::kF16, DType::kBF16})
      for (auto& s : ops::latent_warmup_specs(ops::kOp, dt, 512, 64, kernels::kLatentIndexed, true, arch))
        specs.push_back(std::move(s));
    return specs;
  });
}

// Rank: the op's place in `attnjit info` and the warm-up (ops/registry.hpp), after mla_decode.
const OpRegistrar kDsaDecodeRegistrar{64, &dsa_decode_definition};

}  // namespace attnjit::detail
