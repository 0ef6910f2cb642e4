// topk_select (SPEC.md §2.2): validation, kernel choice, launch geometry, the kernel plan and the
// reference plan.
#include <fmt/format.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "indexer/topk_select_params.cuh"
#include "jit/cuda_driver.hpp"
#include "jit/spec_builder.hpp"
#include "ops/base/arch.hpp"
#include "ops/base/op_helpers.hpp"
#include "ops/indexer/fp8_reference.hpp"
#include "ops/base/op.hpp"
#include "ops/base/context.hpp"
#include "ops/base/validation.hpp"
#include "ops/registry.hpp"
#include "ops/base/launch.hpp"
#include "ops/base/backend.hpp"

namespace attnjit::ops {

namespace {

using detail::ArgChecker;
using detail::Placement;

constexpr const char* kOp = "topk_select";
// NOTE: window positions are int32 (starts/ends), the kernel's row offsets too.
constexpr int64_t kMaxSkv = (int64_t{1} << 31) - 1;

struct TopkSelectCall {
  const TensorRef *score, *starts, *ends, *indexes;
  int64_t B, S, S_kv, G;
  Device device;
};

TopkSelectCall validate(const TensorArgs& args, Placement placement, int64_t topk) {
  ArgChecker c(kOp, args, placement);
  c.only_known({"index_score", "starts", "ends", "indexes"});
  TopkSelectCall call{};
  const TensorRef& score = c.required("index_score");
  const TensorRef& out = c.required("indexes");
  const TensorRef* starts = c.optional("starts");
  const TensorRef* ends = c.optional("ends");
  if (starts && !ends) c.fail("args", "ends", "expected a tensor (starts and ends come together), got none");
  if (ends && !starts) c.fail("args", "starts", "expected a tensor (starts and ends come together), got none");

  c.dtype_is("index_score", score, DType::kF32);
  if (starts) c.dtype_is("starts", *starts, DType::kI32);
  if (ends) c.dtype_is("ends", *ends, DType::kI32);
  c.dtype_is("indexes", out, DType::kI32);

  c.rank("index_score", score, 4, "[B, S, S_kv, G]");
  call.B = score.shape[0];
  call.S = score.shape[1];
  call.S_kv = score.shape[2];
  call.G = score.shape[3];
  if (call.G < 1) c.fail("shape", "index_score", "expected G >= 1, got {} (shape {})", call.G, score.shape_str());
  for (auto [name, t] : {std::pair{"starts", starts}, std::pair{"ends", ends}}) {
    if (!t) continue;
    c.rank(name, *t, 2, "[B, S]");
    c.extent(name, *t, 0, call.B, "B");
    c.extent(name, *t, 1, call.S, "S");
  }
  c.rank("indexes", out, 4, "[B, S, G, topk]");
  c.extent("indexes", out, 0, call.B, "B");
  c.extent("indexes", out, 1, call.S, "S");
  c.extent("indexes", out, 2, call.G, "G");
  c.extent("indexes", out, 3, topk, "topk");

  c.contiguous("index_score", score, /*align16=*/false);
  if (starts) c.metadata("starts", *starts);
  if (ends) c.metadata("ends", *ends);
  c.output("indexes", out, {{"index_score", &score}, {"starts", starts}, {"ends", ends}});
  for (auto [name, t] : {std::pair{"index_score", &score}, std::pair{"starts", starts}, std::pair{"ends", ends},
                         std::pair{"indexes", &out}}) {
    if (t) c.device(name, *t);
  }
  call.score = &score;
  call.starts = starts;
  call.ends = ends;
  call.indexes = &out;
  call.device = c.call_device();
  return call;
}

jit::KernelSpec kernel_spec(bool window, const std::string& arch) {
  jit::SpecBuilder b(kOp, "indexer/topk_select.cuh", "attnjit::kernels::topk_select", arch);
  b.field("backend", "portable").name("{}");
  b.field("window", window).arg().name_if(window, "window");
  return b.build();
}

void check_backend(detail::Backend backend, const std::string& arch) {
  if (backend == detail::Backend::kHopper)
    throw Unsupported(fmt::format("{}: backend 'hopper' has no kernel for this op (a memory-bound selection served by "
                                  "the 'portable' kernel); use backend 'auto' or 'portable'", kOp));
  require_portable_arch(kOp, arch);
}

void check_sizes(const TopkSelectCall& call) {
  if (call.S_kv > kMaxSkv)
    throw Unsupported(fmt::format("{}: S_kv = {} exceeds the {} positions an int32 index can hold", kOp, call.S_kv, kMaxSkv));
}

// Shared memory per CTA, from S_kv only (SPEC.md §1.3: launch geometry depends on shapes, never on
// contents): windows up to 16384 elements are cached as keys (64 KB); the threshold bin's candidates
// get a quarter of the row, between 1024 and 8192 entries. Larger rows are read from global memory
// (twice: the histogram pass and the split pass, the second mostly from L2).
struct TopkGeometry {
  int cache_cap, cand_cap, smem;
};
TopkGeometry geometry(int64_t S_kv) {
  TopkGeometry g{};
  g.cache_cap = S_kv <= 16384 ? static_cast<int>(S_kv) : 0;
  g.cand_cap = static_cast<int>(std::clamp<int64_t>(S_kv / 4, 1024, 8192));
  g.smem = kernels::topk_select_smem_bytes(g.cache_cap, g.cand_cap);
  return g;
}
constexpr int kMaxSmem = kernels::topk_select_smem_bytes(16384, 8192);

class TopkSelectPortablePlan final : public detail::PlanImpl {
 public:
  TopkSelectPortablePlan(std::shared_ptr<const jit::LoadedKernel> kernel, int64_t topk, bool window, Device device)
      : kernel_(std::move(kernel)), topk_(topk), window_(window), device_(device) {}

  void execute(const TensorArgs& tensors, void* stream) const override {
    const TopkSelectCall call = validate(tensors, Placement::kDevice, topk_);
    if ((call.starts != nullptr) != window_ || !(call.device == device_))
      throw InvalidArgument(fmt::format("{}: args: tensors: expected this plan's static signature (starts/ends {}, {}), "
                                        "got starts/ends {}, {}; build a plan for the new signature",
                                        kOp, window_ ? "present" : "absent", device_name(device_),
                                        call.starts ? "present" : "absent", device_name(call.device)));
    check_sizes(call);
    const int64_t rows = call.B * call.S * call.G;
    if (rows == 0) return;
    const auto& drv = jit::CudaDriver::get();
    drv.bind_device(device_.index);
    kernels::TopkSelectParams p{};
    p.score = static_cast<const float*>(call.score->data);
    p.indexes = static_cast<int*>(call.indexes->data);
    if (call.starts) {
      p.starts = static_cast<const int*>(call.starts->data);
      p.ends = static_cast<const int*>(call.ends->data);
      p.st_sb = call.starts->strides[0];
      p.st_ss = call.starts->strides[1];
      p.en_sb = call.ends->strides[0];
      p.en_ss = call.ends->strides[1];
    }
    p.rows = rows;
    p.S = static_cast<int>(call.S);
    p.S_kv = static_cast<int>(call.S_kv);
    p.G = static_cast<int>(call.G);
    p.topk = static_cast<int>(topk_);
    const TopkGeometry geo = geometry(call.S_kv);
    p.cache_cap = geo.cache_cap;
    p.cand_cap = geo.cand_cap;
    Launch lc;
    lc.grid_x = static_cast<unsigned>(std::min<int64_t>(rows, 0x7FFFFFFF));
    lc.threads = kernels::kTopkSelectThreads;
    lc.smem_bytes = static_cast<unsigned>(geo.smem);
    lc.stream = stream;
    void* args[] = {&p};
    launch_kernel(kernel_->function, lc, args, "topk_select: cuLaunchKernelEx");
  }

  std::string describe() const override { return fmt::format("{} kernel plan: {}", kOp, kernel_->compiled->spec.describe()); }

 private:
  std::shared_ptr<const jit::LoadedKernel> kernel_;
  int64_t topk_;
  bool window_;
  Device device_;
};

int64_t read_topk(const detail::ConfigReader& cfg) {
  if (!cfg.has("topk")) throw InvalidArgument(fmt::format("{}: param: topk: expected an integer >= 1, got none", kOp));
  const double v = cfg.get_number("topk", 0);
  if (!(v >= 1) || v != static_cast<double>(static_cast<int64_t>(v)) || v > 0x7FFFFFFF)
    throw InvalidArgument(fmt::format("{}: param: topk: expected an integer in [1, 2^31 - 1], got {}", kOp, v));
  return static_cast<int64_t>(v);
}

class TopkSelectOp final : public detail::OpInstance {
 public:
  TopkSelectOp(OpContext& ctx, const nlohmann::json& config)
      : TopkSelectOp(ctx, detail::ConfigReader(kOp, config, {"topk"})) {}

  std::vector<jit::KernelSpec> kernels_for(const TensorArgs& tensors, const std::string& arch) const override {
    const TopkSelectCall call = validate(tensors, Placement::kDevice, topk_);
    check_backend(backend_, arch);
    check_sizes(call);
    return {kernel_spec(call.starts != nullptr, arch)};
  }

 protected:
  Plan plan_for(const TensorArgs& tensors) override {
    const TopkSelectCall call = validate(tensors, placement_for(impl_), topk_);
    if (impl_ == detail::Impl::kReference)
      return cached("reference", tensors, [&] {
        return reference_plan(kOp, [topk = topk_](const TensorArgs& t, void*) {
          const TopkSelectCall call = validate(t, Placement::kHost, topk);
          reference::topk_select(*call.score, call.starts, call.ends, *call.indexes, topk);
        });
      });
    const bool window = call.starts != nullptr;
    return cached(fmt::format("{}.{}", window ? 1 : 0, call.device.index), tensors, [&] {
      const std::string arch = ctx_.arch_for_device(call.device.index);
      check_backend(backend_, arch);
      check_sizes(call);
      auto kernel = ctx_.kernels().loaded(kernel_spec(window, arch), call.device.index);
      if (kMaxSmem > kernel->max_dynamic_smem_bytes)
        throw Unsupported(fmt::format("{}: kernel {} needs up to {} bytes of shared memory, the device allows {}", kOp,
                                      kernel->compiled->spec.describe(), kMaxSmem, kernel->max_dynamic_smem_bytes));
      set_max_dynamic_smem(*kernel, kMaxSmem);
      return std::make_shared<TopkSelectPortablePlan>(std::move(kernel), topk_, window, call.device);
    });
  }

 private:
  TopkSelectOp(OpContext& ctx, const detail::ConfigReader& cfg)
      : OpInstance(ctx, kOp, cfg.impl(), cfg.backend()), topk_(read_topk(cfg)) {}
  int64_t topk_;
};

}  // namespace

}  // namespace attnjit::ops

namespace attnjit::detail {

OpDefinition topk_select_definition() {
  // topk is a launch argument (one kernel serves every topk), so the matrix is the window axis.
  return ops::op_definition<ops::TopkSelectOp>(ops::kOp, [](const std::string& arch) {
    return std::vector<jit::KernelSpec>{ops::kernel_spec(false, arch), ops::kernel_spec(true, arch)};
  });
}

// Rank: the op's place in `attnjit info` and the warm-up (ops/registry.hpp).
const OpRegistrar kTopkSelectRegistrar{80, &topk_select_definition};

}  // namespace attnjit::detail
