// paged_kv_write (SPEC.md §2.19): validation, backend choice, launch geometry, the kernel plan and
// the reference plan.
#include <fmt/format.h>

#include <cmath>
#include <unordered_set>
#include <vector>

#include "jit/cuda_driver.hpp"
#include "jit/spec_builder.hpp"
#include "kv_cache/paged_kv_write_params.cuh"
#include "ops/base/arch.hpp"
#include "ops/base/op_helpers.hpp"
#include "ops/kv_cache/reference.hpp"
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

constexpr const char* kOp = "paged_kv_write";

// A validated call.
struct PagedKvWriteCall {
  const TensorRef *k, *v, *k_pages, *v_pages, *slot_mapping, *k_scale, *v_scale;
  DType dtype, cache_dtype;
  int64_t N, H, D, NP, PS;
  Device device;
};

PagedKvWriteCall validate(const TensorArgs& args, Placement placement) {
  ArgChecker c(kOp, args, placement);
  c.only_known({"k", "v", "k_pages", "v_pages", "slot_mapping", "k_scale", "v_scale"});
  PagedKvWriteCall call{};
  const TensorRef& k = c.required("k");
  const TensorRef& v = c.required("v");
  const TensorRef& kp = c.required("k_pages");
  const TensorRef& vp = c.required("v_pages");
  const TensorRef& slots = c.required("slot_mapping");
  c.rank("k", k, 3, "[N, H_kv, D]");
  call.N = k.shape[0];
  call.H = k.shape[1];
  call.D = k.shape[2];
  if (call.H < 1) c.fail("shape", "k", "expected H_kv >= 1, got {} (shape {})", call.H, k.shape_str());
  if (call.D < 1 || call.D % 16 != 0) c.fail("shape", "k", "expected D a positive multiple of 16, got {}", call.D);
  c.rank("v", v, 3, "[N, H_kv, D]");
  for (int d = 0; d < 3; ++d) c.extent("v", v, d, k.shape[d], d == 0 ? "N" : d == 1 ? "H_kv" : "D");
  c.rank("k_pages", kp, 4, "[NP, PS, H_kv, D]");
  call.NP = kp.shape[0];
  call.PS = kp.shape[1];
  if (call.PS < 1) c.fail("shape", "k_pages", "expected page size PS >= 1, got {} (shape {})", call.PS, kp.shape_str());
  c.extent("k_pages", kp, 2, call.H, "H_kv");
  c.extent("k_pages", kp, 3, call.D, "D");
  c.rank("v_pages", vp, 4, "[NP, PS, H_kv, D]");
  for (int d = 0; d < 4; ++d) c.extent("v_pages", vp, d, kp.shape[d], d == 0 ? "NP" : d == 1 ? "PS" : d == 2 ? "H_kv" : "D");
  c.rank("slot_mapping", slots, 1, "[N]");
  c.extent("slot_mapping", slots, 0, call.N, "N");

  c.dtype_in("k", k, {DType::kF16, DType::kBF16});
  c.dtype_is("v", v, k.dtype, "(k's dtype)");
  c.dtype_in("k_pages", kp, {k.dtype, DType::kE4M3});
  c.dtype_is("v_pages", vp, kp.dtype, "(k_pages' dtype)");
  c.dtype_is("slot_mapping", slots, DType::kI64);
  call.dtype = k.dtype;
  call.cache_dtype = kp.dtype;
  const bool fp8 = kp.dtype == DType::kE4M3;
  call.k_scale = c.required_iff("k_scale", fp8, "for an e4m3 cache");
  call.v_scale = c.required_iff("v_scale", fp8, "for an e4m3 cache");
  for (auto [name, t] : {std::pair{"k_scale", call.k_scale}, std::pair{"v_scale", call.v_scale}}) {
    if (!t) continue;
    c.rank(name, *t, 1, "[1]");
    c.extent(name, *t, 0, 1, "1");
    c.dtype_is(name, *t, DType::kF32);
  }

  c.feature("k", k, /*read_only=*/true);
  c.feature("v", v, true);
  c.feature("k_pages", kp, /*read_only=*/false);
  c.feature("v_pages", vp, false);
  c.metadata("slot_mapping", slots);
  for (auto [name, t] : {std::pair{"k", &k}, std::pair{"v", &v}, std::pair{"k_pages", &kp}, std::pair{"v_pages", &vp},
                         std::pair{"slot_mapping", &slots}, std::pair{"k_scale", call.k_scale},
                         std::pair{"v_scale", call.v_scale}}) {
    if (t) c.device(name, *t);
  }
  if (call.k_scale) c.metadata("k_scale", *call.k_scale);
  if (call.v_scale) c.metadata("v_scale", *call.v_scale);
  call.k = &k;
  call.v = &v;
  call.k_pages = &kp;
  call.v_pages = &vp;
  call.slot_mapping = &slots;
  call.device = c.call_device();
  return call;
}

// validate_inputs: the caller contract on host copies of slot_mapping and the scales.
void check_contents(const PagedKvWriteCall& call, const std::vector<int64_t>& slots, const float* k_scale,
                    const float* v_scale) {
  const int64_t capacity = call.NP * call.PS;
  std::unordered_set<int64_t> seen;
  for (size_t i = 0; i < slots.size(); ++i) {
    const int64_t s = slots[i];
    if (s == -1) continue;
    if (s < 0 || s >= capacity)
      throw InvalidArgument(fmt::format("{}: content: slot_mapping: expected -1 or a slot in [0, {}) (NP * PS), got {} "
                                        "at index {}", kOp, capacity, s, i));
    if (!seen.insert(s).second)
      throw InvalidArgument(fmt::format("{}: content: slot_mapping: expected pairwise distinct slots, got {} again at "
                                        "index {}", kOp, s, i));
  }
  for (auto [name, p] : {std::pair{"k_scale", k_scale}, std::pair{"v_scale", v_scale}}) {
    if (p && !(std::isfinite(*p) && *p > 0))
      throw InvalidArgument(fmt::format("{}: content: {}: expected a finite scale > 0, got {}", kOp, name, *p));
  }
}

std::string_view device_type_name(DType dt) {
  switch (dt) {
    case DType::kF16: return "__half";
    case DType::kBF16: return "__nv_bfloat16";
    case DType::kE4M3: return "__nv_fp8_e4m3";
    default: return "?";
  }
}

jit::KernelSpec kernel_spec(DType dt, DType cache_dt, int64_t D, const std::string& arch) {
  jit::SpecBuilder b(kOp, "kv_cache/paged_kv_write.cuh", "attnjit::kernels::paged_kv_write", arch);
  b.field("backend", "portable").name("{}");
  b.field("dtype", dtype_name(dt)).arg(device_type_name(dt)).name("{}");
  b.field("cache_dtype", dtype_name(cache_dt)).arg(device_type_name(cache_dt)).name("{}");
  b.field("head_dim", D).arg().name("d{}");
  return b.build();
}

// The one GPU kernel of this op is the portable one: a scatter copy has no use for wgmma or TMA, and
// runs at copy bandwidth on sm_90a (see the README's performance table).
void check_backend(detail::Backend backend, const std::string& arch) {
  if (backend == detail::Backend::kHopper)
    throw Unsupported(fmt::format("{}: backend 'hopper' has no kernel for this op (a memory-bound scatter served by "
                                  "the 'portable' kernel on every arch); use backend 'auto' or 'portable'", kOp));
  require_portable_arch(kOp, arch);
}

constexpr int kThreads = 256;
constexpr int kUnroll = 4;
constexpr int kBlocksPerSm = 8;  // 2048 resident threads per SM / 256

class PagedKvWritePortablePlan final : public detail::PlanImpl {
 public:
  PagedKvWritePortablePlan(std::shared_ptr<const jit::LoadedKernel> kernel, const PagedKvWriteCall& call, int sm_count,
             bool validate_inputs)
      : kernel_(std::move(kernel)),
        dtype_(call.dtype),
        cache_dtype_(call.cache_dtype),
        D_(call.D),
        device_(call.device),
        sm_count_(sm_count),
        validate_inputs_(validate_inputs) {}

  void execute(const TensorArgs& tensors, void* stream) const override {
    const PagedKvWriteCall call = validate(tensors, Placement::kDevice);
    if (call.dtype != dtype_ || call.cache_dtype != cache_dtype_ || call.D != D_ || !(call.device == device_))
      throw InvalidArgument(fmt::format("{}: args: tensors: expected this plan's static signature (k {}, cache {}, D {}, "
                                        "{}), got k {}, cache {}, D {}, {}; build a plan for the new signature",
                                        kOp, dtype_name(dtype_), dtype_name(cache_dtype_), D_, device_name(device_),
                                        dtype_name(call.dtype), dtype_name(call.cache_dtype), call.D,
                                        device_name(call.device)));
    const auto& drv = jit::CudaDriver::get();
    drv.bind_device(device_.index);
    auto cu_stream = static_cast<CUstream>(stream);
    if (validate_inputs_) run_content_checks(call, cu_stream);
    // Items per (token, head) row: 16-byte stores, 8 elements (16-bit cache) or 16 (e4m3).
    const long long total = static_cast<long long>(call.N) * call.H * (call.D / (cache_dtype_ == DType::kE4M3 ? 16 : 8));
    if (total == 0) return;
    kernels::PagedKvWriteParams p{};
    p.k = call.k->data;
    p.v = call.v->data;
    p.k_pages = call.k_pages->data;
    p.v_pages = call.v_pages->data;
    p.slot_mapping = static_cast<const long long*>(call.slot_mapping->data);
    p.k_scale = call.k_scale ? static_cast<const float*>(call.k_scale->data) : nullptr;
    p.v_scale = call.v_scale ? static_cast<const float*>(call.v_scale->data) : nullptr;
    p.num_tokens = call.N;
    p.num_heads = static_cast<int>(call.H);
    p.page_size = static_cast<int>(call.PS);
    p.slot_stride = call.slot_mapping->strides[0];
    p.k_stride_n = call.k->strides[0];
    p.k_stride_h = call.k->strides[1];
    p.v_stride_n = call.v->strides[0];
    p.v_stride_h = call.v->strides[1];
    p.kp_stride_page = call.k_pages->strides[0];
    p.kp_stride_slot = call.k_pages->strides[1];
    p.kp_stride_h = call.k_pages->strides[2];
    p.vp_stride_page = call.v_pages->strides[0];
    p.vp_stride_slot = call.v_pages->strides[1];
    p.vp_stride_h = call.v_pages->strides[2];
    const long long needed = (total + kThreads * kUnroll - 1) / (kThreads * kUnroll);
    Launch cfg;
    cfg.grid_x = static_cast<unsigned>(std::min<long long>(needed, static_cast<long long>(sm_count_) * kBlocksPerSm));
    cfg.threads = kThreads;
    cfg.smem_bytes = 0;
    cfg.stream = cu_stream;
    void* params[] = {&p};
    launch_kernel(kernel_->function, cfg, params, "paged_kv_write: cuLaunchKernelEx");
  }

  std::string describe() const override {
    return fmt::format("{} kernel plan: {}", kOp, kernel_->compiled->spec.describe());
  }

 private:
  void run_content_checks(const PagedKvWriteCall& call, CUstream stream) const {
    const auto& drv = jit::CudaDriver::get();
    CUstreamCaptureStatus status{};
    drv.check(drv.cuStreamIsCapturing(stream, &status), "cuStreamIsCapturing");
    if (status != CU_STREAM_CAPTURE_STATUS_NONE)
      throw Unsupported(fmt::format("{}: validate_inputs reads device memory and cannot run under stream capture", kOp));
    drv.check(drv.cuStreamSynchronize(stream), "cuStreamSynchronize");
    std::vector<int64_t> slots(static_cast<size_t>(call.N));
    const int64_t stride = call.slot_mapping->strides[0];
    if (call.N > 0) {
      std::vector<int64_t> raw(static_cast<size_t>((call.N - 1) * stride + 1));
      drv.check(drv.cuMemcpyDtoH(raw.data(), reinterpret_cast<CUdeviceptr>(call.slot_mapping->data),
                                 raw.size() * sizeof(int64_t)), "validate_inputs: copy slot_mapping");
      for (int64_t i = 0; i < call.N; ++i) slots[i] = raw[i * stride];
    }
    float ks = 0, vs = 0;
    if (call.k_scale) {
      drv.check(drv.cuMemcpyDtoH(&ks, reinterpret_cast<CUdeviceptr>(call.k_scale->data), 4), "validate_inputs: copy k_scale");
      drv.check(drv.cuMemcpyDtoH(&vs, reinterpret_cast<CUdeviceptr>(call.v_scale->data), 4), "validate_inputs: copy v_scale");
    }
    check_contents(call, slots, call.k_scale ? &ks : nullptr, call.v_scale ? &vs : nullptr);
  }

  std::shared_ptr<const jit::LoadedKernel> kernel_;
  DType dtype_, cache_dtype_;
  int64_t D_;
  Device device_;
  int sm_count_;
  bool validate_inputs_;
};

class PagedKvWriteOp final : public detail::OpInstance {
 public:
  PagedKvWriteOp(OpContext& ctx, const nlohmann::json& config)
      : PagedKvWriteOp(ctx, detail::ConfigReader(kOp, config, {"validate_inputs"})) {}

  std::vector<jit::KernelSpec> kernels_for(const TensorArgs& tensors, const std::string& arch) const override {
    const PagedKvWriteCall call = validate(tensors, Placement::kDevice);
    check_backend(backend_, arch);
    return {kernel_spec(call.dtype, call.cache_dtype, call.D, arch)};
  }

 protected:
  Plan plan_for(const TensorArgs& tensors) override {
    const PagedKvWriteCall call = validate(tensors, placement_for(impl_));
    if (impl_ == detail::Impl::kReference)
      return cached("reference", tensors, [&] {
        return reference_plan(kOp, [validate_inputs = validate_inputs_](const TensorArgs& t, void*) {
          const PagedKvWriteCall call = validate(t, Placement::kHost);
          if (validate_inputs) {
            std::vector<int64_t> slots(static_cast<size_t>(call.N));
            for (int64_t i = 0; i < call.N; ++i)
              slots[i] = static_cast<const int64_t*>(call.slot_mapping->data)[i * call.slot_mapping->strides[0]];
            check_contents(call, slots, call.k_scale ? static_cast<const float*>(call.k_scale->data) : nullptr,
                           call.v_scale ? static_cast<const float*>(call.v_scale->data) : nullptr);
          }
          reference::paged_kv_write(*call.k, *call.v, *call.k_pages, *call.v_pages, *call.slot_mapping, call.k_scale,
                                    call.v_scale);
        });
      });
    return cached(fmt::format("{}.{}.{}.{}", static_cast<int>(call.dtype), static_cast<int>(call.cache_dtype), call.D,
                              call.device.index),
                  tensors, [&] {
                    const std::string arch = ctx_.arch_for_device(call.device.index);
                    check_backend(backend_, arch);
                    auto kernel =
                        ctx_.kernels().loaded(kernel_spec(call.dtype, call.cache_dtype, call.D, arch), call.device.index);
                    return std::make_shared<PagedKvWritePortablePlan>(std::move(kernel), call,
                                                                      ctx_.sm_count(call.device.index), validate_inputs_);
                  });
  }

 private:
  PagedKvWriteOp(OpContext& ctx, const detail::ConfigReader& cfg)
      : OpInstance(ctx, kOp, cfg.impl(), cfg.backend()), validate_inputs_(cfg.get_bool("validate_inputs", false)) {}
  bool validate_inputs_;
};

}  // namespace

}  // namespace attnjit::ops

namespace attnjit::detail {

OpDefinition paged_kv_write_definition() {
  return ops::op_definition<ops::PagedKvWriteOp>(ops::kOp, [](const std::string& arch) {
    std::vector<jit::KernelSpec> specs;
    for (DType dt : {DType::kF16, DType::kBF16})
      for (DType cache : {dt, DType::kE4M3})
        for (int D : {64, 128, 256, 512, 576}) specs.push_back(ops::kernel_spec(dt, cache, D, arch));
    return specs;
  });
}

// Rank: the op's place in `attnjit info` and the warm-up (ops/registry.hpp).
const OpRegistrar kPagedKvWriteRegistrar{10, &paged_kv_write_definition};

}  // namespace attnjit::detail
