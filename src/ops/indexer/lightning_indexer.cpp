// lightning_indexer (SPEC.md §2.1): configuration, validation, backend and kernel choice, the reference and
// topk = 0 plans, and the warm-up matrix. The kernel plans: lightning_indexer_portable.cpp (fused and slab
// path), lightning_indexer_hopper.cpp.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string_view>
#include <vector>

#include "indexer/lightning_indexer_big_params.cuh"
#include "indexer/lightning_indexer_hopper_params.cuh"
#include "indexer/lightning_indexer_params.cuh"
#include "jit/cuda_driver.hpp"
#include "jit/spec_builder.hpp"
#include "ops/base/arch.hpp"
#include "ops/base/op_helpers.hpp"
#include "ops/attention/attention_kernel.hpp"
#include "ops/indexer/lightning_indexer_plans.hpp"
#include "ops/indexer/reference.hpp"
#include "ops/base/host_copy.hpp"
#include "ops/base/op.hpp"
#include "ops/base/context.hpp"
#include "ops/base/validation.hpp"
#include "ops/base/workspace.hpp"
#include "ops/registry.hpp"
#include "ops/base/launch.hpp"
#include "ops/base/backend.hpp"

// (device_type_name, tma_gap and encode_tma_rows come from ops/attention/attention_kernel.hpp.)

namespace attnjit::ops::lightning {

using detail::ArgChecker;
using detail::Placement;

namespace {

constexpr int64_t kMaxT = int64_t{1} << 20;

[[noreturn]] void param_error(std::string_view name, const std::string& what) {
  throw InvalidArgument(fmt::format("{}: param: {}: {}", kOp, name, what));
}

IndexerConfig parse_config(const detail::ConfigReader& r) {
  IndexerConfig c;
  if (!r.has("topk")) param_error("topk", "expected an integer >= 0, got none (topk is required)");
  const double topk = r.get_number("topk", 0);
  if (topk != std::floor(topk) || topk < 0 || topk > std::numeric_limits<int32_t>::max())
    param_error("topk", fmt::format("expected an integer >= 0, got {}", topk));
  c.topk = static_cast<int64_t>(topk);
  c.causal = r.get_bool("causal", false);
  const double ratio = r.get_number("compress_ratio", 1);
  if (ratio != std::floor(ratio) || ratio < 1 || ratio > std::numeric_limits<int32_t>::max())
    param_error("compress_ratio", fmt::format("expected an integer >= 1, got {}", ratio));
  c.compress_ratio = static_cast<int64_t>(ratio);
  if (c.compress_ratio != 1 && !c.causal)
    param_error("compress_ratio", fmt::format("expected 1 without causal = true, got {}", c.compress_ratio));
  c.deterministic = r.get_bool("deterministic", false);
  c.validate_inputs = r.get_bool("validate_inputs", false);
  return c;
}

}  // namespace

IndexerCall validate(const IndexerConfig& cfg, const TensorArgs& args, Placement placement) {
  ArgChecker c(kOp, args, placement);
  c.only_known({"q", "k", "weights", "cu_seqlens", "cu_seqlens_k", "indices"});
  IndexerCall call;
  const TensorRef& q = c.required("q");
  const TensorRef& k = c.required("k");
  const TensorRef& w = c.required("weights");
  const TensorRef& out = c.required("indices");
  call.q = &q;
  call.k = &k;
  call.weights = &w;
  call.indices = &out;
  call.cu_seqlens = c.optional("cu_seqlens");
  call.cu_seqlens_k = c.optional("cu_seqlens_k");
  if (call.cu_seqlens && !call.cu_seqlens_k)
    c.fail("args", "cu_seqlens_k", "expected a tensor together with cu_seqlens, got none");
  if (call.cu_seqlens_k && !call.cu_seqlens)
    c.fail("args", "cu_seqlens", "expected a tensor together with cu_seqlens_k, got none");
  const bool packed = call.cu_seqlens != nullptr;

  // dtypes
  if (placement == Placement::kHost) c.dtype_in("q", q, {DType::kF16, DType::kBF16, DType::kF32});
  else c.dtype_in("q", q, {DType::kF16, DType::kBF16});
  c.dtype_is("k", k, q.dtype, "(q's dtype)");
  c.dtype_is("weights", w, q.dtype, "(q's dtype)");
  if (packed) {
    c.dtype_is("cu_seqlens", *call.cu_seqlens, DType::kI32);
    c.dtype_is("cu_seqlens_k", *call.cu_seqlens_k, DType::kI32);
  }
  c.dtype_is("indices", out, DType::kI32);
  call.dtype = q.dtype;

  // shapes
  c.rank("q", q, 4, "[B, T, H, D]");
  call.B = q.shape[0];
  call.T = q.shape[1];
  call.H = q.shape[2];
  call.D = q.shape[3];
  if (call.T < 1 || call.T > kMaxT) c.fail("shape", "q", "expected 1 <= T <= 2^20, got T = {} (shape {})", call.T, q.shape_str());
  if (call.H < 1 || call.H > 256) c.fail("shape", "q", "expected 1 <= H <= 256, got H = {} (shape {})", call.H, q.shape_str());
  if (call.D < 8 || call.D > 256 || call.D % 8 != 0)
    c.fail("shape", "q", "expected head dim D a multiple of 8 in [8, 256], got {} (shape {})", call.D, q.shape_str());
  c.rank("k", k, 3, "[B, S, D]");
  c.extent("k", k, 0, call.B, "B, q's batch");
  c.extent("k", k, 2, call.D, "D, q's head dim");
  call.S = k.shape[1];
  if (call.S > std::numeric_limits<int32_t>::max())
    c.fail("shape", "k", "expected S < 2^31 candidates, got {}", call.S);
  c.rank("weights", w, 3, "[B, T, H]");
  c.extent("weights", w, 0, call.B, "B, q's batch");
  c.extent("weights", w, 1, call.T, "T, q's tokens");
  c.extent("weights", w, 2, call.H, "H, q's heads");
  if (packed) {
    const TensorRef& cu = *call.cu_seqlens;
    const TensorRef& cuk = *call.cu_seqlens_k;
    if (call.B != 1) c.fail("shape", "q", "expected B = 1 with packed offsets (cu_seqlens), got B = {}", call.B);
    c.rank("cu_seqlens", cu, 1, "[N + 1]");
    c.rank("cu_seqlens_k", cuk, 1, "[N + 1]");
    if (cu.shape[0] < 1) c.fail("shape", "cu_seqlens", "expected length N + 1 >= 1, got {}", cu.shape[0]);
    c.extent("cu_seqlens_k", cuk, 0, cu.shape[0], "N + 1, cu_seqlens' length");
    call.N = cu.shape[0] - 1;
  } else if (call.S != call.T / cfg.compress_ratio) {
    c.fail("shape", "k", "expected S = T // compress_ratio = {} // {} = {} candidates without packed offsets, got S = {}",
           call.T, cfg.compress_ratio, call.T / cfg.compress_ratio, call.S);
  }
  c.rank("indices", out, 3, "[B, T, topk]");
  c.extent("indices", out, 0, call.B, "B");
  c.extent("indices", out, 1, call.T, "T");
  c.extent("indices", out, 2, cfg.topk, "topk");

  // layouts and devices
  c.feature("q", q, /*read_only=*/true);
  c.feature("k", k, true);
  c.metadata("weights", w);
  if (packed) {
    c.contiguous("cu_seqlens", *call.cu_seqlens, false);
    c.contiguous("cu_seqlens_k", *call.cu_seqlens_k, false);
  }
  c.output("indices", out, {{"q", &q}, {"k", &k}, {"weights", &w}, {"cu_seqlens", call.cu_seqlens},
                            {"cu_seqlens_k", call.cu_seqlens_k}});
  for (const auto& [name, t] : {std::pair{"q", call.q}, std::pair{"k", call.k}, std::pair{"weights", call.weights},
                                std::pair{"cu_seqlens", call.cu_seqlens}, std::pair{"cu_seqlens_k", call.cu_seqlens_k},
                                std::pair{"indices", call.indices}}) {
    if (t) c.device(name, *t);
  }
  call.device = c.call_device();
  return call;
}

void check_contents(const IndexerConfig& cfg, const IndexerCall& call, void* stream) {
  if (!call.cu_seqlens) return;
  detail::prepare_content_checks(kOp, call.device, stream);
  auto fail = [&](std::string_view arg, const std::string& what) {
    throw InvalidArgument(fmt::format("{}: content: {}: {}", kOp, arg, what));
  };
  auto cq = detail::host_view(*call.cu_seqlens);
  auto ck = detail::host_view(*call.cu_seqlens_k);
  const auto* cu = static_cast<const int32_t*>(cq.ref.data);
  const auto* cuk = static_cast<const int32_t*>(ck.ref.data);
  for (auto [name, off, total, what] : {std::tuple{"cu_seqlens", cu, call.T, "T"}, std::tuple{"cu_seqlens_k", cuk, call.S, "S"}}) {
    if (off[0] != 0) fail(name, fmt::format("expected element 0 to be 0, got {}", off[0]));
    for (int64_t d = 0; d < call.N; ++d)
      if (off[d + 1] < off[d])
        fail(name, fmt::format("expected non-decreasing offsets, got {} after {} at index {}", off[d + 1], off[d], d + 1));
    if (off[call.N] > total)
      fail(name, fmt::format("expected the last offset to be at most {} = {}, got {} at index {}", what, total,
                             off[call.N], call.N));
  }
  for (int64_t d = 0; d < call.N; ++d) {
    const int64_t len = cu[d + 1] - cu[d], span = cuk[d + 1] - cuk[d];
    if (span != len / cfg.compress_ratio)
      fail("cu_seqlens_k", fmt::format("expected document {}'s candidate span cu_seqlens_k[{}] - cu_seqlens_k[{}] to be "
                                       "its query length {} // compress_ratio {} = {}, got {}", d, d + 1, d, len,
                                       cfg.compress_ratio, len / cfg.compress_ratio, span));
  }
}

std::string hopper_k_gap(const IndexerCall& call) {
  if (call.S == 0) return "";
  return tma_gap("k", call.k->data, {{call.k->shape[0], call.k->strides[0]}, {call.k->shape[1], call.k->strides[1]}});
}

void check_signature(const IndexerCall& call, const KernelChoice& choice, const jit::LoadedKernel& kernel) {
  const bool packed = call.cu_seqlens != nullptr;
  if (call.dtype != choice.dtype || call.D != choice.D ||
      kernels::lightning_indexer_head_tile(static_cast<int>(call.H)) != choice.HP || packed != choice.packed ||
      call.device.index != kernel.device)
    throw InvalidArgument(fmt::format("{}: args: tensors: expected this plan's static signature ({}), got dtype {}, D {}, "
                                      "H {}, packed {}, {}; build a plan for the new signature", kOp,
                                      kernel.compiled->spec.describe(), dtype_name(call.dtype), call.D, call.H, packed,
                                      device_name(call.device)));
}

namespace {

// force_slab (Tuning::li_force_slab, ATTNJIT_TUNE_LI_FORCE_SLAB; tests only) sends the plan to the slab
// path even where the fused kernel fits, so that small shapes exercise it under compute-sanitizer.
KernelChoice choose(const IndexerConfig& cfg, DType dtype, int64_t D, int64_t H, bool packed, const std::string& arch,
                    bool force_slab = false) {
  KernelChoice k;
  k.dtype = dtype;
  k.D = static_cast<int>(D);
  k.HP = kernels::lightning_indexer_head_tile(static_cast<int>(H));
  k.topk = cfg.topk;
  k.causal = cfg.causal;
  k.packed = packed;
  k.arch = arch;
  k.geo = kernels::lightning_indexer_geometry(k.D, k.HP, static_cast<int>(cfg.topk));
  k.slab = k.geo.R < 1 || force_slab;
  return k;
}

// The fields of the fused kernel, the same on both backends after "backend".
void fused_fields(jit::SpecBuilder& b, const KernelChoice& k) {
  b.field("dtype", dtype_name(k.dtype)).arg(device_type_name(k.dtype)).name("{}");
  b.field("head_dim", k.D).arg().name("d{}");
  b.field("head_tile", k.HP).arg().name("h{}");
  b.field("topk", k.topk).arg().name("k{}");
  b.field("causal", k.causal).arg().name_if(k.causal, "causal");
  b.field("packed", k.packed).arg().name_if(k.packed, "packed");
}

jit::KernelSpec kernel_spec(const KernelChoice& k) {
  jit::SpecBuilder b(kOp, "indexer/lightning_indexer.cuh", "attnjit::kernels::lightning_indexer", k.arch);
  b.field("backend", "portable").name("{}");
  fused_fields(b, k);
  return b.build();
}

// The slab path's score kernel: dtype, D, causal, packed (H, topk, compress_ratio, shapes are launch
// arguments).
jit::KernelSpec big_scores_spec(const KernelChoice& k) {
  jit::SpecBuilder b(kOp, "indexer/lightning_indexer_big.cuh", "attnjit::kernels::lightning_indexer_big_scores", k.arch);
  b.field("backend", "portable").name("{}");
  b.field("kernel", "slab_scores").name("slab-scores");
  b.field("dtype", dtype_name(k.dtype)).arg(device_type_name(k.dtype)).name("{}");
  b.field("head_dim", k.D).arg().name("d{}");
  b.field("causal", k.causal).arg().name_if(k.causal, "causal");
  b.field("packed", k.packed).arg().name_if(k.packed, "packed");
  return b.build();
}

// The slab path's selection kernel: causal, packed (topk is a launch argument).
jit::KernelSpec big_select_spec(const KernelChoice& k) {
  jit::SpecBuilder b(kOp, "indexer/lightning_indexer_big.cuh", "attnjit::kernels::lightning_indexer_big_select", k.arch);
  b.field("backend", "portable").name("{}");
  b.field("kernel", "slab_select").name("slab-select");
  b.field("causal", k.causal).arg().name_if(k.causal, "causal");
  b.field("packed", k.packed).arg().name_if(k.packed, "packed");
  return b.build();
}

std::vector<jit::KernelSpec> specs_for(const KernelChoice& k) {
  if (k.slab) return {big_scores_spec(k), big_select_spec(k)};
  return {kernel_spec(k)};
}

// The portable backend serves sm_80+ (backend 'hopper' is decided by use_hopper before this runs).
void check_backend(const std::string& arch) {
  require_portable_arch(kOp, arch);
}

// ---- hopper backend (templates/indexer/lightning_indexer_hopper.cuh) ----

// The largest topk the hopper kernel's candidate buffers hold for (D, HP) (0: none).
int hopper_max_topk(int D, int HP) {
  int lo = 0, hi = 1 << 17;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (kernels::lightning_indexer_hopper_geometry(D, HP, mid).R >= 1) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

// Why the hopper kernel cannot serve calls with these static properties ("" when it can): sm_90a, 16-bit
// inputs, D 64 or 128, a head tile whose token block is 64, 128 or 256 columns (not 192), topk within
// its shared-memory buffers (topk = 0 launches nothing).
std::string hopper_gap(const IndexerConfig& cfg, DType dtype, int64_t D, int64_t H, const std::string& arch) {
  if (std::string gap = hopper_arch_gap(arch); !gap.empty()) return gap;
  if (dtype != DType::kF16 && dtype != DType::kBF16)
    return fmt::format("it takes fp16 or bf16 q, k and weights, got {}", dtype_name(dtype));
  if (D != 64 && D != 128) return fmt::format("it serves head dims 64 and 128, got {}", D);
  const int HP = kernels::lightning_indexer_head_tile(static_cast<int>(H));
  if (HP == 192) return fmt::format("it serves H up to 128 or from 193 to 256 (head tiles 8..128 and 256), got H = {}", H);
  const int topk = static_cast<int>(std::min<int64_t>(cfg.topk, int64_t{1} << 20));
  if (topk > 0 && kernels::lightning_indexer_hopper_geometry(static_cast<int>(D), HP, topk).R < 1)
    return fmt::format("topk {} exceeds its shared-memory candidate buffers (at most {} for D {} and head tile {}); "
                       "backend 'portable' takes any topk", cfg.topk, hopper_max_topk(static_cast<int>(D), HP), D, HP);
  return "";
}

KernelChoice choose_hopper(const IndexerConfig& cfg, DType dtype, int64_t D, int64_t H, bool packed,
                           const std::string& arch) {
  KernelChoice k;
  k.dtype = dtype;
  k.D = static_cast<int>(D);
  k.HP = kernels::lightning_indexer_head_tile(static_cast<int>(H));
  k.topk = cfg.topk;
  k.causal = cfg.causal;
  k.packed = packed;
  k.arch = arch;
  k.hopper = true;
  k.hgeo = kernels::lightning_indexer_hopper_geometry(k.D, k.HP, static_cast<int>(cfg.topk));
  return k;
}

jit::KernelSpec hopper_kernel_spec(const KernelChoice& k) {
  jit::SpecBuilder b(kOp, "indexer/lightning_indexer_hopper.cuh", "attnjit::kernels::lightning_indexer_hopper", k.arch);
  b.field("backend", "hopper").name("{}");
  fused_fields(b, k);
  return b.build();
}

// topk = 0: an empty last axis; the call is validated and nothing is launched.
class LightningIndexerEmptyPlan final : public detail::PlanImpl {
 public:
  LightningIndexerEmptyPlan(const IndexerConfig& cfg, Placement placement) : cfg_(cfg), placement_(placement) {}
  void execute(const TensorArgs& tensors, void* stream) const override {
    const IndexerCall call = validate(cfg_, tensors, placement_);
    if (cfg_.validate_inputs) check_contents(cfg_, call, stream);
  }
  std::string describe() const override { return fmt::format("{} plan for topk = 0 (nothing to launch)", kOp); }

 private:
  IndexerConfig cfg_;
  Placement placement_;
};

class LightningIndexerOp final : public detail::OpInstance {
 public:
  LightningIndexerOp(OpContext& ctx, const nlohmann::json& config)
      : LightningIndexerOp(ctx, detail::ConfigReader(kOp, config, {"topk", "causal", "compress_ratio", "deterministic",
                                                                  "validate_inputs"})) {}

  std::vector<jit::KernelSpec> kernels_for(const TensorArgs& tensors, const std::string& arch) const override {
    const IndexerCall call = validate(cfg_, tensors, Placement::kDevice);
    if (use_hopper(call, arch)) {
      if (cfg_.topk == 0) return {};
      return {hopper_kernel_spec(choose_hopper(cfg_, call.dtype, call.D, call.H, call.cu_seqlens != nullptr, arch))};
    }
    check_backend(arch);
    if (cfg_.topk == 0) return {};
    return specs_for(
        choose(cfg_, call.dtype, call.D, call.H, call.cu_seqlens != nullptr, arch, ctx_.tuning().li_force_slab));
  }

 protected:
  Plan plan_for(const TensorArgs& tensors) override {
    const IndexerCall call = validate(cfg_, tensors, placement_for(impl_));
    if (impl_ == detail::Impl::kReference)
      return cached("reference", tensors, [&] {
        return reference_plan(kOp, [cfg = cfg_](const TensorArgs& t, void* stream) {
          const IndexerCall call = validate(cfg, t, Placement::kHost);
          if (cfg.validate_inputs) check_contents(cfg, call, stream);
          reference::lightning_indexer(*call.q, *call.k, *call.weights, call.cu_seqlens, call.cu_seqlens_k,
                                       *call.indices, cfg.topk, cfg.causal, cfg.compress_ratio);
        });
      });
    // use_hopper: 'auto' may choose per call from k's strides; 'hopper' and 'portable' choose from the
    // signature alone (or fail naming why).
    BackendPick pick(ctx_, backend_, call.device.index,
                     [&](const std::string& arch) { return use_hopper(call, arch); });
    return cached(
        fmt::format("{}.{}.{}.{}.{}.{}", static_cast<int>(call.dtype), call.D,
                    kernels::lightning_indexer_head_tile(static_cast<int>(call.H)), call.cu_seqlens != nullptr,
                    call.device.index, pick.auto_hopper()),
        tensors, [&]() -> std::shared_ptr<const detail::PlanImpl> {
          const std::string& arch = pick.arch();
          if (pick.hopper()) {
            if (cfg_.topk == 0) return std::make_shared<LightningIndexerEmptyPlan>(cfg_, Placement::kDevice);
            KernelChoice choice = choose_hopper(cfg_, call.dtype, call.D, call.H, call.cu_seqlens != nullptr, arch);
            auto kernel = ctx_.kernels().loaded(hopper_kernel_spec(choice), call.device.index);
            require_dynamic_smem(kOp, *kernel, kernel->compiled->spec, choice.hgeo.smem_bytes);
            return make_hopper_plan(cfg_, std::move(choice), std::move(kernel));
          }
          check_backend(arch);
          if (cfg_.topk == 0) return std::make_shared<LightningIndexerEmptyPlan>(cfg_, Placement::kDevice);
          KernelChoice choice = choose(cfg_, call.dtype, call.D, call.H, call.cu_seqlens != nullptr, arch,
                                       ctx_.tuning().li_force_slab);
          if (choice.slab) {
            auto scores = ctx_.kernels().loaded(big_scores_spec(choice), call.device.index);
            auto select = ctx_.kernels().loaded(big_select_spec(choice), call.device.index);
            // NOTE: a call's H (any H of this plan's head tile) stages as many tokens as fit kLiBigSmemBudget, or
            // one token beyond it; either way no more than this.
            const int smem =
                std::max(kernels::kLiBigSmemBudget, kernels::li_big_score_geometry(choice.D, choice.HP).smem_bytes);
            require_dynamic_smem(kOp, *scores, scores->compiled->spec, smem);
            return make_slab_plan(cfg_, std::move(choice), std::move(scores), std::move(select), call.device.index);
          }
          auto kernel = ctx_.kernels().loaded(kernel_spec(choice), call.device.index);
          if (choice.geo.smem_bytes > kernel->max_dynamic_smem_bytes)
            throw Unsupported(fmt::format("{}: unsupported: kernel {} needs {} bytes of shared memory, the device "
                                          "allows {}",
                                          kOp, kernel->compiled->spec.describe(), choice.geo.smem_bytes,
                                          kernel->max_dynamic_smem_bytes));
          set_max_dynamic_smem(*kernel, choice.geo.smem_bytes);
          return make_portable_plan(cfg_, std::move(choice), std::move(kernel));
        });
  }

 private:
  LightningIndexerOp(OpContext& ctx, const detail::ConfigReader& r)
      : OpInstance(ctx, kOp, r.impl(), r.backend()), cfg_(parse_config(r)) {}
  // backend 'hopper' takes the hopper kernel or fails naming why; 'portable' takes the portable kernels
  // (fused, or the slab path beyond its buffers); 'auto' takes the hopper kernel wherever it serves the call
  // (k addressable by TMA, topk > 0; not under ATTNJIT_TUNE_LI_FORCE_SLAB, which keeps exercising the portable
  // slab path) and the portable kernels elsewhere.
  bool use_hopper(const IndexerCall& call, const std::string& arch) const {
    return pick_hopper(kOp, backend_, [&] { return hopper_gap(cfg_, call.dtype, call.D, call.H, arch); },
                       [&] { return cfg_.topk > 0 && !ctx_.tuning().li_force_slab && hopper_k_gap(call).empty(); });
  }
  IndexerConfig cfg_;
};

}  // namespace

}  // namespace attnjit::ops::lightning

namespace attnjit::detail {

OpDefinition lightning_indexer_definition() {
  // The shape (H = 64, D = 128, topk 2048) in both dtypes, causal and not, plus topk 64 / D 64
  // and a packed causal kernel, and the slab path's two kernels for bf16 D 128 causal (any topk beyond the
  // fused kernel's buffers); other configurations compile on first use.
  return ops::op_definition<ops::lightning::LightningIndexerOp>(ops::lightning::kOp, [](const std::string& arch) {
    std::vector<jit::KernelSpec> specs;
    ops::lightning::IndexerConfig cfg;
    for (DType dt : {DType::kBF16, DType::kF16})
      for (bool causal : {false, true}) {
        cfg.causal = causal;
        for (auto [D, topk] : {std::pair<int64_t, int64_t>{128, 2048}, std::pair<int64_t, int64_t>{64, 64}}) {
          cfg.topk = topk;
          specs.push_back(ops::lightning::kernel_spec(ops::lightning::choose(cfg, dt, D, 64, false, arch)));
        }
      }
    cfg.causal = true;
    cfg.topk = 2048;
    specs.push_back(ops::lightning::kernel_spec(ops::lightning::choose(cfg, DType::kBF16, 128, 64, true, arch)));
    // The slab path (topk beyond the fused kernel's buffers): bf16 D 128 causal scores and their selection.
    cfg.topk = 65536;
    const ops::lightning::KernelChoice big = ops::lightning::choose(cfg, DType::kBF16, 128, 64, false, arch);
    specs.push_back(ops::lightning::big_scores_spec(big));
    specs.push_back(ops::lightning::big_select_spec(big));
    // The hopper kernel where the target has it (sm_90a): the shape in both dtypes, causal and not,
    // and bf16 causal packed.
    cfg.topk = 2048;
    if (ops::lightning::hopper_gap(cfg, DType::kBF16, 128, 64, arch).empty()) {
      for (DType dt : {DType::kBF16, DType::kF16})
        for (bool causal : {false, true}) {
          cfg.causal = causal;
          specs.push_back(ops::lightning::hopper_kernel_spec(ops::lightning::choose_hopper(cfg, dt, 128, 64, false, arch)));
        }
      cfg.causal = true;
      specs.push_back(ops::lightning::hopper_kernel_spec(ops::lightning::choose_hopper(cfg, DType::kBF16, 128, 64, true, arch)));
    }
    return specs;
  });
}

// Rank: the op's place in `attnjit info` and the warm-up (ops/registry.hpp).
const OpRegistrar kLightningIndexerRegistrar{90, &lightning_indexer_definition};

}  // namespace attnjit::detail
