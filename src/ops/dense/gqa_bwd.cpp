// gqa_bwd (SPEC.md §2.12): configuration, validation, the kernel plans (workspace layout and the launch
// sequence of templates/dense/gqa_bwd.cuh, the hopper main kernel of templates/dense/gqa_bwd_hopper.cuh)
// and the reference plan.
#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <tuple>

#include <cmath>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "attnjit/error.hpp"
#include "dense/gqa_bwd_params.cuh"
#include "hopper/attention_bwd_params.cuh"
#include "jit/cuda_driver.hpp"
#include "jit/spec_builder.hpp"
#include "ops/attention/attention_bwd.hpp"
#include "ops/attention/attention_kernel.hpp"  // device_type_name
#include "ops/base/arch.hpp"
#include "ops/base/backend.hpp"
#include "ops/base/context.hpp"
#include "ops/base/tma.hpp"
#include "ops/base/workspace.hpp"
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
  c.deterministic = r.get_bool("deterministic", false);
  for (auto [key, field] : {std::pair{"window_size_left", &c.window_left}, std::pair{"window_size_right", &c.window_right}}) {
    const double w = r.get_number(key, -1);
    if (w != std::floor(w) || w < -1 || w > 2147483647.0)
      throw InvalidArgument(fmt::format("{}: param: {}: expected an integer >= -1, got {}", kOp, key, w));
    *field = static_cast<int64_t>(w);
  }
  if (r.has("sm_scale")) {
    const double s = r.get_number("sm_scale", 0);
    if (!std::isfinite(s) || s <= 0)
      throw InvalidArgument(fmt::format("{}: param: sm_scale: expected a finite value > 0, got {}", kOp, s));
    c.sm_scale = s;
  }
  return c;
}

const std::vector<std::string>& gqa_bwd_config_keys() {
  static const std::vector<std::string> keys = {"is_causal", "sm_scale", "deterministic", "window_size_left",
                                                  "window_size_right"};
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

void gqa_bwd_reference_abs(const nlohmann::json& config, const TensorArgs& args) {
  const GqaBwdConfig cfg = parse_gqa_bwd_config(detail::ConfigReader(kOp, config, gqa_bwd_config_keys()));
  reference::gqa_backward_abs(cfg, validate_gqa_bwd_call(cfg, args, Placement::kHost));
}

namespace {

// The kernels of one static configuration: prep and dq are the portable ones for either main kernel.
struct BwdKernels {
  jit::KernelSpec prep, main, dq;
};

BwdKernels kernel_specs(DType dt, int64_t D, bool causal, bool det, const std::string& arch, bool hopper,
                        bool window = false) {
  // The fields every kernel of the backward has after "backend" and "kernel".
  auto typed = [&](jit::SpecBuilder& b) {
    b.field("dtype", dtype_name(dt)).arg(device_type_name(dt)).name("{}");
    b.field("head_dim", D).arg().name("d{}");
  };
  // The portable prep and dq kernels: their names put the kernel before the backend.
  auto helper = [&](const std::string& what) {
    jit::SpecBuilder b(kOp, "dense/gqa_bwd.cuh", "attnjit::kernels::gqa_bwd_" + what, arch);
    b.field("backend", "portable").name("{}");
    b.field("kernel", what).name("{}").before("backend");
    typed(b);
    return b.build();
  };
  BwdKernels k;
  k.prep = helper("prep");
  k.dq = helper("dq");
  jit::SpecBuilder b(kOp, hopper ? "dense/gqa_bwd_hopper.cuh" : "dense/gqa_bwd.cuh",
                     hopper ? "attnjit::kernels::gqa_bwd_hopper" : "attnjit::kernels::gqa_bwd_main", arch);
  b.field("backend", hopper ? "hopper" : "portable").name("{}");
  b.field("kernel", "main");
  typed(b);
  b.field("causal", causal).arg().name_if(causal, "causal");
  b.field("deterministic", det).arg().name_if(det, "det");
  // The window flag is the templates' last parameter (default false), a field only when set; its name
  // segment comes before ".det".
  if (window) b.field("window", true).arg().name("window").before("deterministic");
  k.main = b.build();
  return k;
}

// (extent, stride) of a [B, S, heads, D] tensor's head, row and batch axes.
std::tuple<int64_t, int64_t, int64_t> bsh_strides(const TensorRef& t) { return {t.strides[2], t.strides[1], t.strides[0]}; }

// Why q, do, k and v cannot be the hopper kernel's TMA sources ("" when they can).
std::string tma_sources_gap(const GqaBwdCall& c) {
  for (auto [name, t, heads] : {std::tuple{"q", c.q, c.H}, std::tuple{"do", c.dout, c.H}, std::tuple{"k", c.k, c.H_kv},
                                std::tuple{"v", c.v, c.H_kv}}) {
    const auto [sh, ss, sb] = bsh_strides(*t);
    const std::string gap = tma_gap(name, t->data, {{heads, sh}, {c.S, ss}, {c.B, sb}});
    if (!gap.empty()) return gap;
  }
  return "";
}

// Why the hopper main kernel cannot serve a call's static properties ("" when it can).
// The D 256 kernel (D split over the consumer warpgroups) adds dQ with atomics, so it has no deterministic
// form; tune.gqa_bwd_hopper_d256 = false switches it off (D 256 then runs on the portable kernel).
std::string hopper_static_gap(const GqaBwdCall& c, const std::string& arch, bool det, const Tuning& tuning) {
  if (std::string gap = hopper_arch_gap(arch); !gap.empty()) return gap;
  if (!kernels::gqa_bwd_hopper_head_dim(static_cast<int>(c.D)))
    return fmt::format("its kernel serves head dims 64, 128 and 256, got D = {}", c.D);
  if (c.D == 256 && !tuning.gqa_bwd_hopper_d256)
    return "its D = 256 kernel is switched off: tune.gqa_bwd_hopper_d256 = false (ATTNJIT_TUNE_GQA_BWD_HOPPER_D256=0)";
  if (c.D == 256 && det) return "its D = 256 kernel adds dQ with atomics; deterministic: true at D = 256 is portable only";
  return "";
}

// backend 'hopper' takes the hopper main kernel or fails naming why; 'auto' takes it wherever it serves
// the call (TMA-able q, do, k, v included), the portable kernel elsewhere.
bool use_hopper(detail::Backend backend, const GqaBwdCall& c, const std::string& arch, bool det, const Tuning& tuning) {
  const bool hopper = pick_hopper(kOp, backend, [&] { return hopper_static_gap(c, arch, det, tuning); },
                                  [&] { return tma_sources_gap(c).empty(); });
  if (hopper && backend == detail::Backend::kHopper)
    if (const std::string gap = tma_sources_gap(c); !gap.empty()) throw_hopper_gap(kOp, gap);
  return hopper;
}

// Workspace sections (bytes from the base, each 256-aligned) for a call's shapes.
struct WorkspaceLayout {
  size_t lse2 = 0, delta = 0, dq_acc = 0, sem = 0, total = 0;
  int64_t n_q = 0, s_pad = 0;
};

WorkspaceLayout workspace_layout(const GqaBwdCall& c, bool det) {
  WorkspaceLayout w;
  w.n_q = (c.S + 63) / 64;
  w.s_pad = w.n_q * 64;
  const size_t rows = static_cast<size_t>(c.B * c.H * w.s_pad);
  detail::WorkspaceCursor cur;
  w.lse2 = cur.take(rows * 4);
  w.delta = cur.take(rows * 4);
  w.dq_acc = cur.take(rows * static_cast<size_t>(kernels::gqa_bwd_compute_dim(static_cast<int>(c.D))) * 4);
  w.sem = det ? cur.take(static_cast<size_t>(c.B * c.H * w.n_q) * 4) : cur.total();
  w.total = cur.total();
  return w;
}

}  // namespace

// Band 1 (the key block slowest) starts the heaviest causal blocks first and balances best, but when
// there are about as many groups as SMs each group then runs one CTA at a time, and every CTA streams its
// group's Q and dO from DRAM. A band gives a group about four CTAs in flight, which share those reads in
// L2.
int gqa_bwd_det_causal_band(int groups, int n_kv, int sm_count, int forced) {
  const int in_flight = std::max(1, sm_count / std::max(1, groups));  // CTAs per group in the first wave
  return std::clamp(forced > 0 ? forced : (4 + in_flight - 1) / in_flight, 1, std::max(1, n_kv));
}

namespace {

class GqaBwdPlan final : public detail::PlanImpl {
 public:
  struct Loaded {
    std::shared_ptr<const jit::LoadedKernel> prep, main, dq;
  };
  GqaBwdPlan(const GqaBwdConfig& cfg, DType dtype, int64_t D, Device device, Loaded k, bool hopper, int sm_count,
             int band)
      : cfg_(cfg), dtype_(dtype), D_(D), device_(device), k_(std::move(k)), hopper_(hopper), sm_count_(sm_count),
        band_(band),
        workspace_(std::make_unique<detail::PlanWorkspace>(kOp, device.index)) {}

  void prepare(const TensorArgs& tensors) const override {
    const GqaBwdCall call = validate_gqa_bwd_call(cfg_, tensors, Placement::kDevice);
    workspace_->reserve(workspace_layout(call, cfg_.deterministic).total);
  }
  std::size_t workspace_bytes() const override { return workspace_->bytes(); }

  void execute(const TensorArgs& tensors, void* stream) const override {
    const GqaBwdCall c = validate_gqa_bwd_call(cfg_, tensors, Placement::kDevice);
    if (c.dtype != dtype_ || c.D != D_ || !(c.device == device_))
      throw InvalidArgument(fmt::format("{}: args: tensors: expected this plan's static signature ({} D {} {}), got {} D "
                                        "{} {}; build a plan for the new signature", kOp, dtype_name(dtype_), D_,
                                        device_name(device_), dtype_name(c.dtype), c.D, device_name(c.device)));
    if (c.H_kv > 65535 || c.B > 65535)
      throw Unsupported(fmt::format("{}: B = {} and H_kv = {} must be at most 65535 for this kernel's grid", kOp, c.B, c.H_kv));
    if (cfg_.is_causal && cfg_.deterministic && (c.S + 63) / 64 > 65535)
      throw Unsupported(fmt::format("{}: deterministic causal: S = {} must be at most 65535 * 64 for this kernel's grid",
                                    kOp, c.S));
    if (c.B * c.H * (c.S + 63) / 64 > std::numeric_limits<int32_t>::max())
      throw Unsupported(fmt::format("{}: B * H * ceil(S / 64) must stay below 2^31, got B = {}, H = {}, S = {}", kOp, c.B,
                                    c.H, c.S));
    if (hopper_)
      if (const std::string gap = tma_sources_gap(c); !gap.empty()) throw_hopper_gap(kOp, gap);
    if (c.B == 0 || c.S == 0) return;  // nothing to compute, nothing to write
    const auto& drv = jit::CudaDriver::get();
    drv.bind_device(device_.index);
    const WorkspaceLayout w = workspace_layout(c, cfg_.deterministic);
    detail::PlanWorkspace::Lease lease = workspace_->acquire(w.total, stream);
    kernels::AttnBwdParams p = params(c, w, lease.ptr());
    auto cu_stream = static_cast<CUstream>(stream);
    if (cfg_.deterministic)
      drv.check(drv.cuMemsetD32Async(lease.ptr() + w.sem, 0, static_cast<size_t>(c.B * c.H * w.n_q), cu_stream),
                "gqa_bwd: cuMemsetD32Async(dq_sem)");
    const int dp = kernels::gqa_bwd_compute_dim(static_cast<int>(D_));
    void* args[] = {&p};
    const long long rows = static_cast<long long>(c.B) * c.H * w.s_pad;
    launch_bwd_kernel(kOp, *k_.prep, bwd_blocks(rows * (dp / 8), 256), 1, 1, 256, 0, cu_stream, args);
    // Grid (key blocks, H_kv, B); deterministic causal: (H_kv * B * band, ceil(key blocks / band)), so
    // that the first band of key blocks of every (batch, KV head) starts first
    // (templates/common/attention_bwd.cuh, DenseSlots).
    const bool banded = cfg_.is_causal && cfg_.deterministic;
    auto grid = [&](int bn) {
      const int n_kv = static_cast<int>((c.S + bn - 1) / bn);
      const int groups = static_cast<int>(c.H_kv * c.B);
      const int band = gqa_bwd_det_causal_band(groups, n_kv, sm_count_, band_);
      return banded ? std::tuple{static_cast<unsigned>(groups * band), static_cast<unsigned>((n_kv + band - 1) / band), 1u}
                    : std::tuple{static_cast<unsigned>(n_kv), static_cast<unsigned>(c.H_kv), static_cast<unsigned>(c.B)};
    };
    if (hopper_) {
      kernels::AttnBwdHopperParams hp{};
      hp.p = p;
      const int bn = kernels::gqa_bwd_hopper_block_n(static_cast<int>(D_));
      for (auto [map, name, t, heads, box] :
           {std::tuple{&hp.q_map, "q", c.q, c.H, 64}, std::tuple{&hp.do_map, "do", c.dout, c.H, 64},
            std::tuple{&hp.k_map, "k", c.k, c.H_kv, bn}, std::tuple{&hp.v_map, "v", c.v, c.H_kv, bn}}) {
        const auto [sh, ss, sb] = bsh_strides(*t);
        encode_tma_rows(kOp, name, *map, c.dtype, t->data, D_, heads, c.S, c.B, sh, ss, sb, box);
      }
      encode_dq_acc_map(kOp, hp.dq_map, p.dq_acc, D_, rows);
      const kernels::AttnBwdHopperLayout layout{static_cast<int>(D_), bn};
      void* hargs[] = {&hp};
      const auto [gx, gy, gz] = grid(bn);
      launch_bwd_kernel(kOp, *k_.main, gx, gy, gz, static_cast<unsigned>(layout.threads()), layout.smem_bytes(), cu_stream,
                        hargs);
    } else {
      const int bn = kernels::gqa_bwd_block_n(static_cast<int>(D_));
      const auto [gx, gy, gz] = grid(bn);
      launch_bwd_kernel(kOp, *k_.main, gx, gy, gz, 256, kernels::gqa_bwd_smem_bytes(static_cast<int>(D_)), cu_stream, args);
    }
    launch_bwd_kernel(kOp, *k_.dq, bwd_blocks(static_cast<long long>(c.B) * c.H * c.S * (D_ / 8), 256), 1, 1, 256, 0,
                      cu_stream, args);
  }

  std::string describe() const override {
    return fmt::format("{} kernel plan: {} (+ prep, dq kernels)", kOp, k_.main->compiled->spec.describe());
  }

 private:
  kernels::AttnBwdParams params(const GqaBwdCall& c, const WorkspaceLayout& w, CUdeviceptr ws) const {
    kernels::AttnBwdParams p{};
    // (batch, head, sequence) strides of a [B, S, heads, D] tensor.
    struct Bhs {
      int64_t b, h, s;
    };
    fill_bwd_tensors(p, {c.q, c.k, c.v, c.o, c.dout, c.dq, c.dk, c.dv, c.lse},
                     [](const TensorRef& t) { return Bhs{t.strides[0], t.strides[2], t.strides[1]}; });
    p.batch = static_cast<int>(c.B);
    p.h_q = static_cast<int>(c.H);
    p.h_kv = static_cast<int>(c.H_kv);
    p.group = static_cast<int>(c.group());
    p.s_q = static_cast<int>(c.S);
    p.s_kv = static_cast<int>(c.S);
    p.n_q = static_cast<int>(w.n_q);
    const int bn = hopper_ ? kernels::gqa_bwd_hopper_block_n(static_cast<int>(D_)) : kernels::gqa_bwd_block_n(static_cast<int>(D_));
    p.n_kv = static_cast<int>((c.S + bn - 1) / bn);
    p.s_pad = static_cast<int>(w.s_pad);
    p.scale = static_cast<float>(c.scale);
    p.scale_log2 = static_cast<float>(c.scale * 1.4426950408889634);
    p.lse2 = reinterpret_cast<float*>(ws + w.lse2);
    p.delta = reinterpret_cast<float*>(ws + w.delta);
    p.dq_acc = reinterpret_cast<float*>(ws + w.dq_acc);
    p.dq_sem = cfg_.deterministic ? reinterpret_cast<int*>(ws + w.sem) : nullptr;
    // Windows wider than the sequence are no limit (and keep the kernels' row arithmetic in int).
    p.window_left = cfg_.window_left >= c.S ? -1 : static_cast<int>(cfg_.window_left);
    p.window_right = cfg_.window_right >= c.S ? -1 : static_cast<int>(cfg_.window_right);
    return p;
  }

  GqaBwdConfig cfg_;
  DType dtype_;
  int64_t D_;
  Device device_;
  Loaded k_;
  bool hopper_ = false;
  int sm_count_ = 1;  // the device's SMs (the deterministic causal grid's band)
  int band_ = 0;      // ATTNJIT_TUNE_GQA_BWD_BAND; 0: gqa_bwd_det_causal_band's
  std::unique_ptr<detail::PlanWorkspace> workspace_;
};

class GqaBwdOp final : public detail::OpInstance {
 public:
  GqaBwdOp(OpContext& ctx, const nlohmann::json& config)
      : GqaBwdOp(ctx, detail::ConfigReader(kOp, config, gqa_bwd_config_keys())) {}

  std::vector<jit::KernelSpec> kernels_for(const TensorArgs& tensors, const std::string& arch) const override {
    const GqaBwdCall c = validate_gqa_bwd_call(cfg_, tensors, Placement::kDevice);
    const bool hopper = use_hopper(backend_, c, arch, cfg_.deterministic, ctx_.tuning());
    if (!hopper) require_portable_arch(kOp, arch);
    const BwdKernels k = kernel_specs(c.dtype, c.D, cfg_.is_causal, cfg_.deterministic, arch, hopper, cfg_.windowed());
    return {k.prep, k.main, k.dq};
  }

 protected:
  Plan plan_for(const TensorArgs& tensors) override {
    const GqaBwdCall c = validate_gqa_bwd_call(cfg_, tensors, placement_for(impl_));
    if (impl_ == detail::Impl::kReference)
      return cached("reference", tensors, [&] {
        return reference_plan(kOp, [cfg = cfg_](const TensorArgs& t, void*) {
          reference::gqa_backward(cfg, validate_gqa_bwd_call(cfg, t, Placement::kHost));
        });
      });
    // use_hopper: the hopper kernel where it serves the call (TMA-able tensors).
    BackendPick pick(ctx_, backend_, c.device.index,
                     [&](const std::string& arch) { return use_hopper(backend_, c, arch, cfg_.deterministic, ctx_.tuning()); });
    std::string sig = fmt::format("{}.{}.{}.{}", static_cast<int>(c.dtype), c.D, c.device.index, pick.auto_hopper());
    return cached(std::move(sig), tensors, [&] {
      const std::string& arch = pick.arch();
      const bool hopper = pick.hopper();
      if (!hopper) require_portable_arch(kOp, arch);
      const BwdKernels specs =
          kernel_specs(c.dtype, c.D, cfg_.is_causal, cfg_.deterministic, arch, hopper, cfg_.windowed());
      const int dev = c.device.index;
      GqaBwdPlan::Loaded k;
      k.prep = ctx_.kernels().loaded(specs.prep, dev);
      k.main = ctx_.kernels().loaded(specs.main, dev);
      k.dq = ctx_.kernels().loaded(specs.dq, dev);
      const int smem =
          hopper ? kernels::AttnBwdHopperLayout{static_cast<int>(c.D), kernels::gqa_bwd_hopper_block_n(static_cast<int>(c.D))}.smem_bytes()
                 : kernels::gqa_bwd_smem_bytes(static_cast<int>(c.D));
      require_dynamic_smem(kOp, *k.main, specs.main, smem);
      return std::make_shared<GqaBwdPlan>(cfg_, c.dtype, c.D, c.device, std::move(k), hopper, ctx_.sm_count(dev),
                                          ctx_.tuning().gqa_bwd_band);
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
  // NOTE: D = 128 only, causal and not, non-deterministic (the training head dim); other head dims and
  // the deterministic kernels compile on first use.
  return ops::op_definition<ops::GqaBwdOp>(ops::kOp, [](const std::string& arch) {
    std::vector<jit::KernelSpec> specs;
    for (DType dt : {DType::kF16, DType::kBF16})
      for (bool causal : {true, false}) {
        const ops::BwdKernels k = ops::kernel_specs(dt, 128, causal, false, arch, /*hopper=*/false);
        if (causal) {
          specs.push_back(k.prep);
          specs.push_back(k.dq);
        }
        specs.push_back(k.main);
        if (ops::has_hopper_kernels(arch)) specs.push_back(ops::kernel_specs(dt, 128, causal, false, arch, true).main);
      }
    return specs;
  });
}

// Rank: the op's place in `attnjit info` and the warm-up (ops/registry.hpp), after the dense forwards.
const OpRegistrar kGqaBwdRegistrar{35, &gqa_bwd_definition};

}  // namespace attnjit::detail
