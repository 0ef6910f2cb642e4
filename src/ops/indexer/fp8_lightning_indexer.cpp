// fp8_lightning_indexer (SPEC.md §2.3): validation, the caller-contract check, kernel choice, launch
// geometry, the kernel plan (bf16 pre-pass into the plan workspace + the FP8 MMA kernel) and the
// reference plan.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <vector>

#include "indexer/fp8_lightning_indexer_params.cuh"
#include "jit/cuda_driver.hpp"
#include "jit/spec_builder.hpp"
#include "ops/base/arch.hpp"
#include "ops/base/op_helpers.hpp"
#include "ops/indexer/fp8_reference.hpp"
#include "ops/base/host_copy.hpp"
#include "ops/base/op.hpp"
#include "ops/base/context.hpp"
#include "ops/base/validation.hpp"
#include "ops/base/workspace.hpp"
#include "ops/registry.hpp"
#include "ops/base/launch.hpp"

namespace attnjit::ops {

namespace {

using detail::ArgChecker;
using detail::Placement;

constexpr const char* kOp = "fp8_lightning_indexer";
// NOTE: key positions and query rows are int in the kernel; both stay well below this bound.
constexpr int64_t kMaxSeq = (int64_t{1} << 31) - (int64_t{1} << 20);

// A validated call.
struct Fp8IndexerCall {
  const TensorRef *q, *k, *weights, *ks, *ke, *scale, *logits;
  DType dtype;
  int64_t B, S, S_kv, H, G, D;
  Device device;
  int64_t HG() const { return H / G; }
};

Fp8IndexerCall validate(const TensorArgs& args, Placement placement) {
  ArgChecker c(kOp, args, placement);
  c.only_known({"index_q", "index_k", "weights", "cu_seqlen_ks", "cu_seqlen_ke", "index_k_scale", "logits"});
  Fp8IndexerCall call{};
  const TensorRef& q = c.required("index_q");
  const TensorRef& k = c.required("index_k");
  const TensorRef& w = c.required("weights");
  const TensorRef& ks = c.required("cu_seqlen_ks");
  const TensorRef& ke = c.required("cu_seqlen_ke");
  const TensorRef& out = c.required("logits");
  const TensorRef* scale = c.optional("index_k_scale");

  c.dtype_in("index_q", q, {DType::kBF16, DType::kE4M3});
  c.dtype_is("index_k", k, q.dtype, "(index_q's dtype)");
  c.dtype_is("weights", w, DType::kF32);
  c.dtype_is("cu_seqlen_ks", ks, DType::kI32);
  c.dtype_is("cu_seqlen_ke", ke, DType::kI32);
  if (scale) c.dtype_is("index_k_scale", *scale, DType::kF32);
  c.dtype_is("logits", out, DType::kF32);
  if (scale && q.dtype != DType::kE4M3)
    c.fail("args", "index_k_scale", "expected no tensor with {} inputs (scales come only with e4m3 keys), got one",
           dtype_name(q.dtype));

  c.rank("index_q", q, 4, "[B, S, H, D]");
  call.B = q.shape[0];
  call.S = q.shape[1];
  call.H = q.shape[2];
  call.D = q.shape[3];
  c.rank("index_k", k, 4, "[B, S_kv, G, D]");
  call.S_kv = k.shape[1];
  call.G = k.shape[2];
  c.extent("index_k", k, 0, call.B, "B");
  c.extent("index_k", k, 3, call.D, "D");
  if (call.D != 64 && call.D != 128) c.fail("shape", "index_q", "expected D = 64 or 128, got {} (shape {})", call.D, q.shape_str());
  if (call.H < 1) c.fail("shape", "index_q", "expected H >= 1, got {} (shape {})", call.H, q.shape_str());
  if (call.G < 1) c.fail("shape", "index_k", "expected G >= 1, got {} (shape {})", call.G, k.shape_str());
  if (call.H % call.G != 0)
    c.fail("shape", "index_k", "expected G to divide H = {} (H % G == 0), got G = {}", call.H, call.G);
  if (call.H / call.G > 128)
    c.fail("shape", "index_k", "expected 1 <= H/G <= 128, got H/G = {} (H = {}, G = {})", call.H / call.G, call.H, call.G);
  c.rank("weights", w, 2, "[S, H]");
  c.extent("weights", w, 0, call.S, "S");
  c.extent("weights", w, 1, call.H, "H");
  c.rank("cu_seqlen_ks", ks, 1, "[S]");
  c.extent("cu_seqlen_ks", ks, 0, call.S, "S");
  c.rank("cu_seqlen_ke", ke, 1, "[S]");
  c.extent("cu_seqlen_ke", ke, 0, call.S, "S");
  if (scale) {
    c.rank("index_k_scale", *scale, 3, "[B, S_kv, G]");
    c.extent("index_k_scale", *scale, 0, call.B, "B");
    c.extent("index_k_scale", *scale, 1, call.S_kv, "S_kv");
    c.extent("index_k_scale", *scale, 2, call.G, "G");
  }
  c.rank("logits", out, 4, "[B, S, S_kv, G]");
  c.extent("logits", out, 0, call.B, "B");
  c.extent("logits", out, 1, call.S, "S");
  c.extent("logits", out, 2, call.S_kv, "S_kv");
  c.extent("logits", out, 3, call.G, "G");

  c.feature("index_q", q, /*read_only=*/true);
  c.feature("index_k", k, true);
  c.metadata("weights", w);
  c.metadata("cu_seqlen_ks", ks);
  c.metadata("cu_seqlen_ke", ke);
  if (scale) c.metadata("index_k_scale", *scale);
  c.output("logits", out,
           {{"index_q", &q}, {"index_k", &k}, {"weights", &w}, {"cu_seqlen_ks", &ks}, {"cu_seqlen_ke", &ke},
            {"index_k_scale", scale}});
  for (auto [name, t] : {std::pair{"index_q", &q}, std::pair{"index_k", &k}, std::pair{"weights", &w},
                         std::pair{"cu_seqlen_ks", &ks}, std::pair{"cu_seqlen_ke", &ke},
                         std::pair{"index_k_scale", scale}, std::pair{"logits", &out}}) {
    if (t) c.device(name, *t);
  }
  call.q = &q;
  call.k = &k;
  call.weights = &w;
  call.ks = &ks;
  call.ke = &ke;
  call.scale = scale;
  call.logits = &out;
  call.dtype = q.dtype;
  call.device = c.call_device();
  return call;
}

// validate_inputs: index_k_scale entries finite and > 0 (a host view of the tensor).
void check_scale(const TensorRef& scale) {
  const auto* v = static_cast<const float*>(scale.data);
  for (int64_t b = 0; b < scale.shape[0]; ++b)
    for (int64_t t = 0; t < scale.shape[1]; ++t)
      for (int64_t g = 0; g < scale.shape[2]; ++g) {
        const float x = v[b * scale.strides[0] + t * scale.strides[1] + g * scale.strides[2]];
        if (!(std::isfinite(x) && x > 0))
          throw InvalidArgument(fmt::format("{}: content: index_k_scale: expected finite values > 0, got {} at [{}, {}, {}]",
                                            kOp, x, b, t, g));
      }
}

void run_content_checks(const Fp8IndexerCall& call, void* stream) {
  if (!call.scale) return;
  detail::prepare_content_checks(kOp, call.device, stream);
  const detail::HostView view = detail::host_view(*call.scale);
  check_scale(view.ref);
}

// The static choice that selects a main-kernel instantiation.
struct Fp8IndexerChoice {
  DType dtype = DType::kBF16;
  int D = 64, HG = 1;
  bool kappa = false, clean = true;
  std::string arch;
};

jit::KernelSpec main_kernel_spec(const Fp8IndexerChoice& k) {
  jit::SpecBuilder b(kOp, "indexer/fp8_lightning_indexer.cuh", "attnjit::kernels::fp8_lightning_indexer", k.arch);
  b.field("backend", "portable").name("{}");
  b.field("kernel", "logits");
  // The template takes "bf16 keys" after the head dims.
  b.field("dtype", dtype_name(k.dtype)).arg(k.dtype == DType::kBF16).before("kappa").name("{}");
  b.field("head_dim", k.D).arg().name("d{}");
  b.field("heads_per_group", k.HG).arg().name("hg{}");
  b.field("kappa", k.kappa).arg().name_if(k.dtype == DType::kE4M3 && k.kappa, "scale");
  b.field("clean_logits", k.clean).arg().name_if(k.clean, "clean");
  return b.build();
}

jit::KernelSpec quant_kernel_spec(int D, const std::string& arch) {
  jit::SpecBuilder b(kOp, "indexer/fp8_lightning_indexer.cuh", "attnjit::kernels::fp8_indexer_quantise_keys", arch);
  b.field("backend", "portable").name("{}");
  b.field("kernel", "quantise_keys").name("quantise-keys");
  b.field("dtype", "bf16").name("{}");
  b.field("head_dim", D).arg().name("d{}");
  return b.build();
}

Fp8IndexerChoice choose(const Fp8IndexerCall& call, bool clean, const std::string& arch) {
  Fp8IndexerChoice k;
  k.dtype = call.dtype;
  k.D = static_cast<int>(call.D);
  k.HG = static_cast<int>(call.HG());
  k.kappa = call.dtype == DType::kBF16 || call.scale != nullptr;
  k.clean = clean;
  k.arch = arch;
  return k;
}

std::vector<jit::KernelSpec> kernel_specs(const Fp8IndexerChoice& k) {
  std::vector<jit::KernelSpec> specs;
  if (k.dtype == DType::kBF16) specs.push_back(quant_kernel_spec(k.D, k.arch));
  specs.push_back(main_kernel_spec(k));
  return specs;
}

// The portable kernel needs FP8 mma.sync (sm_89+); no hopper (wgmma) kernel is built for this op.
void check_backend(detail::Backend backend, const std::string& arch) {
  if (backend == detail::Backend::kHopper)
    throw Unsupported(fmt::format("{}: backend 'hopper' (wgmma/TMA) is not built for this op; use backend 'auto' or "
                                  "'portable'", kOp));
  if (!arch_facts(arch).fp8_mma)
    throw Unsupported(fmt::format("{}: backend 'portable' needs FP8 mma.sync (sm_89 or newer), got {}", kOp, arch));
}

void check_sizes(const Fp8IndexerCall& call) {
  if (call.S >= kMaxSeq || call.S_kv >= kMaxSeq)
    throw Unsupported(fmt::format("{}: S = {} and S_kv = {} must stay below {} for this build's kernel", kOp, call.S,
                                  call.S_kv, kMaxSeq));
}

// bf16 calls: e4m3 keys [B, S_kv, G, D] then kappa [B, S_kv, G] fp32, in the plan workspace.
std::size_t k8_bytes(const Fp8IndexerCall& c) {
  return static_cast<std::size_t>((c.B * c.S_kv * c.G * c.D + 255) / 256 * 256);
}
std::size_t workspace_for(const Fp8IndexerCall& c) {
  if (c.dtype != DType::kBF16) return 0;
  return k8_bytes(c) + static_cast<std::size_t>(c.B * c.S_kv * c.G * 4);
}

constexpr int kChunkTiles = 8;  // key tiles (of 128) per CTA: 1024 keys

class Fp8LightningIndexerPortablePlan final : public detail::PlanImpl {
 public:
  Fp8LightningIndexerPortablePlan(std::shared_ptr<const jit::LoadedKernel> quant, std::shared_ptr<const jit::LoadedKernel> main,
             const Fp8IndexerChoice& choice, const Fp8IndexerCall& call, int sm_count, bool validate_inputs)
      : quant_(std::move(quant)),
        main_(std::move(main)),
        choice_(choice),
        device_(call.device),
        sm_count_(sm_count),
        validate_inputs_(validate_inputs),
        tiles_(kernels::fp8_indexer_tiles(choice.D, choice.HG)),
        ws_(std::make_unique<detail::PlanWorkspace>(kOp, call.device.index)) {}

  void prepare(const TensorArgs& tensors) const override {
    const Fp8IndexerCall call = validate(tensors, Placement::kDevice);
    if (const std::size_t bytes = workspace_for(call); bytes > 0) ws_->reserve(bytes);
  }

  std::size_t workspace_bytes() const override { return ws_->bytes(); }

  void execute(const TensorArgs& tensors, void* stream) const override {
    const Fp8IndexerCall call = validate(tensors, Placement::kDevice);
    if (call.dtype != choice_.dtype || call.D != choice_.D || call.HG() != choice_.HG ||
        (call.dtype == DType::kE4M3 && (call.scale != nullptr) != choice_.kappa) || !(call.device == device_))
      throw InvalidArgument(fmt::format(
          "{}: args: tensors: expected this plan's static signature ({}, D {}, H/G {}, index_k_scale {}, {}), got {}, "
          "D {}, H/G {}, index_k_scale {}, {}; build a plan for the new signature",
          kOp, dtype_name(choice_.dtype), choice_.D, choice_.HG, choice_.kappa ? "present" : "absent", device_name(device_),
          dtype_name(call.dtype), call.D, call.HG(), call.scale ? "present" : "absent", device_name(call.device)));
    check_sizes(call);
    const auto& drv = jit::CudaDriver::get();
    drv.bind_device(device_.index);
    if (validate_inputs_) run_content_checks(call, stream);
    if (call.B == 0 || call.S == 0 || call.S_kv == 0) return;
    auto cu_stream = static_cast<CUstream>(stream);

    kernels::Fp8IndexerParams p{};
    p.q = call.q->data;
    p.weights = static_cast<const float*>(call.weights->data);
    p.ks = static_cast<const int*>(call.ks->data);
    p.ke = static_cast<const int*>(call.ke->data);
    p.logits = static_cast<float*>(call.logits->data);
    p.q_sb = call.q->strides[0];
    p.q_ss = call.q->strides[1];
    p.q_sh = call.q->strides[2];
    p.w_ss = call.weights->strides[0];
    p.w_sh = call.weights->strides[1];
    p.ks_s = call.ks->strides[0];
    p.ke_s = call.ke->strides[0];
    p.B = static_cast<int>(call.B);
    p.S = static_cast<int>(call.S);
    p.S_kv = static_cast<int>(call.S_kv);
    p.G = static_cast<int>(call.G);
    const int64_t tiles = (call.S_kv + kernels::kFp8IndexerBN - 1) / kernels::kFp8IndexerBN;
    p.chunk_tiles = static_cast<int>(std::max<int64_t>(kChunkTiles, (tiles + 65534) / 65535));
    const int64_t chunks = (tiles + p.chunk_tiles - 1) / p.chunk_tiles;

    auto launch_main = [&] {
      Launch lc;
      lc.grid_x = static_cast<unsigned>((call.S + tiles_.BQ - 1) / tiles_.BQ);
      lc.grid_y = static_cast<unsigned>(chunks);
      lc.grid_z = static_cast<unsigned>(std::min<int64_t>(call.B * call.G, 65535));
      lc.threads = kernels::kFp8IndexerThreads;
      lc.smem_bytes = static_cast<unsigned>(tiles_.smem_bytes);
      lc.stream = cu_stream;
      void* args[] = {&p};
      launch_kernel(main_->function, lc, args, "fp8_lightning_indexer: cuLaunchKernelEx");
    };
    if (call.dtype == DType::kBF16) {
      // NOTE: the lease orders this plan's workspace after its previous user stream until both kernels
      // are enqueued.
      const detail::PlanWorkspace::Lease lease = ws_->acquire(workspace_for(call), stream);
      auto* k8 = reinterpret_cast<unsigned char*>(lease.ptr());
      auto* kappa = reinterpret_cast<float*>(lease.ptr() + k8_bytes(call));
      kernels::Fp8IndexerQuantParams qp{};
      qp.k = call.k->data;
      qp.k8 = k8;
      qp.kappa = kappa;
      qp.k_sb = call.k->strides[0];
      qp.k_st = call.k->strides[1];
      qp.k_sg = call.k->strides[2];
      qp.rows = call.B * call.S_kv * call.G;
      qp.S_kv = static_cast<int>(call.S_kv);
      qp.G = static_cast<int>(call.G);
      Launch lc;
      lc.grid_x = static_cast<unsigned>(std::min<int64_t>((qp.rows + 7) / 8, int64_t{sm_count_} * 16));
      lc.threads = 256;
      lc.stream = cu_stream;
      void* args[] = {&qp};
      launch_kernel(quant_->function, lc, args, "fp8_lightning_indexer: quantise keys launch");
      p.k = k8;
      p.k_sb = call.S_kv * call.G * call.D;
      p.k_st = call.G * call.D;
      p.k_sg = call.D;
      p.kappa = kappa;
      p.kap_sb = call.S_kv * call.G;
      p.kap_st = call.G;
      p.kap_sg = 1;
      launch_main();
    } else {
      p.k = call.k->data;
      p.k_sb = call.k->strides[0];
      p.k_st = call.k->strides[1];
      p.k_sg = call.k->strides[2];
      if (call.scale) {
        p.kappa = static_cast<const float*>(call.scale->data);
        p.kap_sb = call.scale->strides[0];
        p.kap_st = call.scale->strides[1];
        p.kap_sg = call.scale->strides[2];
      }
      launch_main();
    }
  }

  std::string describe() const override {
    std::string s = fmt::format("{} kernel plan: ", kOp);
    if (quant_) s += quant_->compiled->spec.describe() + " + ";
    return s + main_->compiled->spec.describe();
  }

 private:
  std::shared_ptr<const jit::LoadedKernel> quant_, main_;
  Fp8IndexerChoice choice_;
  Device device_;
  int sm_count_;
  bool validate_inputs_;
  kernels::Fp8IndexerTiles tiles_;
  std::unique_ptr<detail::PlanWorkspace> ws_;
};

class Fp8LightningIndexerOp final : public detail::OpInstance {
 public:
  Fp8LightningIndexerOp(OpContext& ctx, const nlohmann::json& config)
      : Fp8LightningIndexerOp(ctx, detail::ConfigReader(kOp, config, {"clean_logits", "validate_inputs"})) {}

  std::vector<jit::KernelSpec> kernels_for(const TensorArgs& tensors, const std::string& arch) const override {
    const Fp8IndexerCall call = validate(tensors, Placement::kDevice);
    check_backend(backend_, arch);
    check_sizes(call);
    return kernel_specs(choose(call, clean_, arch));
  }

 protected:
  Plan plan_for(const TensorArgs& tensors) override {
    const Fp8IndexerCall call = validate(tensors, placement_for(impl_));
    if (impl_ == detail::Impl::kReference)
      return cached("reference", tensors, [&] {
        return reference_plan(kOp, [clean = clean_, validate_inputs = validate_inputs_](const TensorArgs& t, void*) {
          const Fp8IndexerCall call = validate(t, Placement::kHost);
          if (validate_inputs && call.scale) check_scale(*call.scale);
          reference::fp8_lightning_indexer(*call.q, *call.k, *call.weights, *call.ks, *call.ke, call.scale,
                                           *call.logits, clean);
        });
      });
    return cached(fmt::format("{}.{}.{}.{}.{}", static_cast<int>(call.dtype), call.D, call.HG(), call.scale ? 1 : 0,
                              call.device.index),
                  tensors, [&] {
                    const std::string arch = ctx_.arch_for_device(call.device.index);
                    check_backend(backend_, arch);
                    check_sizes(call);
                    const Fp8IndexerChoice choice = choose(call, clean_, arch);
                    std::shared_ptr<const jit::LoadedKernel> quant;
                    if (choice.dtype == DType::kBF16)
                      quant = ctx_.kernels().loaded(quant_kernel_spec(choice.D, arch), call.device.index);
                    auto main = ctx_.kernels().loaded(main_kernel_spec(choice), call.device.index);
                    const int smem = kernels::fp8_indexer_tiles(choice.D, choice.HG).smem_bytes;
                    require_dynamic_smem(kOp, *main, main->compiled->spec, smem);
                    return std::make_shared<Fp8LightningIndexerPortablePlan>(
                        std::move(quant), std::move(main), choice, call, ctx_.sm_count(call.device.index),
                        validate_inputs_);
                  });
  }

 private:
  Fp8LightningIndexerOp(OpContext& ctx, const detail::ConfigReader& cfg)
      : OpInstance(ctx, kOp, cfg.impl(), cfg.backend()),
        clean_(cfg.get_bool("clean_logits", true)),
        validate_inputs_(cfg.get_bool("validate_inputs", false)) {}
  bool clean_;
  bool validate_inputs_;
};

}  // namespace

}  // namespace attnjit::ops

namespace attnjit::detail {

OpDefinition fp8_lightning_indexer_definition() {
  // The two common indexer shapes: H = 32, D = 64 (TileOPs' benchmark) and H = 64, D = 128 (DeepSeek
  // V3.2), G = 1; bf16 and e4m3 (with and without scales); clean logits (the default). Other H/G, D
  // pairs and clean_logits = false compile on first use.
  return ops::op_definition<ops::Fp8LightningIndexerOp>(ops::kOp, [](const std::string& arch) {
    std::vector<jit::KernelSpec> specs;
    for (auto [D, HG] : {std::pair{64, 32}, std::pair{128, 64}}) {
      specs.push_back(ops::quant_kernel_spec(D, arch));
      for (auto [dt, kappa] :
           {std::pair{DType::kBF16, true}, std::pair{DType::kE4M3, true}, std::pair{DType::kE4M3, false}}) {
        ops::Fp8IndexerChoice k;
        k.dtype = dt;
        k.D = D;
        k.HG = HG;
        k.kappa = kappa;
        k.clean = true;
        k.arch = arch;
        specs.push_back(ops::main_kernel_spec(k));
      }
    }
    return specs;
  });
}

// Rank: the op's place in `attnjit info` and the warm-up (ops/registry.hpp).
const OpRegistrar kFp8LightningIndexerRegistrar{70, &fp8_lightning_indexer_definition};

}  // namespace attnjit::detail
