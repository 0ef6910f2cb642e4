#include "ops/mla/latent_kernel.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "attnjit/error.hpp"
#include "jit/cuda_driver.hpp"
#include "jit/spec_builder.hpp"
#include "ops/attention/attention_kernel.hpp"  // device_type_name
#include "ops/attention/split_kv.hpp"
#include "ops/base/arch.hpp"
#include "ops/base/backend.hpp"
#include "ops/base/launch.hpp"
#include "ops/base/op_helpers.hpp"

namespace attnjit::ops {

namespace {

const char* mode_name(int mode) {
  return mode == kernels::kLatentDense ? "dense" : mode == kernels::kLatentPaged ? "paged" : "indexed";
}

// Splits larger than this many bytes of fp32 partials are not taken ("auto" stops below it).
constexpr int64_t kMaxPartialBytes = int64_t{1} << 30;

int64_t partial_bytes(const LatentShape& s, int splits) {
  const int64_t rows = s.B * s.tokens * s.H;
  return static_cast<int64_t>(splits) * rows * (s.D + 1) * 4;
}

}  // namespace

int parse_latent_kv_splits(const char* op, const detail::ConfigReader& r) {
  return read_kv_splits(op, r, 128, kLatentAutoSplits, kLatentAutoSplits);
}

int LatentKernelChoice::smem_bytes() const {
  if (seesaw()) return kernels::latent_seesaw_smem_bytes(D, D + tail);
  return hopper ? kernels::latent_hopper_smem_bytes(D + tail, stages, bn) : kernels::latent_smem_bytes(D + tail, stages);
}
int LatentKernelChoice::threads() const {
  if (seesaw()) return kernels::kLatentSeesawThreads;
  return hopper ? kernels::kLatentHopperThreads : kernels::kLatentWarps * 32;
}

std::string latent_hopper_gap(const LatentShape& s, const std::string& arch) {
  if (std::string gap = hopper_arch_gap(arch); !gap.empty()) return gap;
  if (s.D != 128 && s.D != 256 && s.D != 512) return fmt::format("it serves D 128, 256 and 512, got D {}", s.D);
  return "";
}

namespace {

// The fields every choice takes from the shape.
LatentKernelChoice choice_for(const LatentShape& s, bool split, const std::string& arch) {
  LatentKernelChoice k;
  k.dtype = s.dtype;
  k.D = s.D;
  k.tail = s.tail;
  k.mode = s.mode;
  k.split = split;
  k.arch = arch;
  return k;
}

}  // namespace

LatentKernelChoice choose_latent_hopper(const char* op, const LatentShape& s, bool split, const std::string& arch,
                                        int bn) {
  if (const std::string gap = latent_hopper_gap(s, arch); !gap.empty()) throw_hopper_gap(op, gap);
  if (bn != 0 && bn != 32 && bn != 48 && bn != kernels::kLatentSeesawBN)
    throw InvalidArgument(fmt::format("{}: param: tune.latent_tile: expected 32, 48 or 64 key slots, got {}", op, bn));
  LatentKernelChoice k = choice_for(s, split, arch);
  k.hopper = true;
  const int budget = arch_facts(arch).max_smem_per_block;
  // The seesaw kernel (64-key tiles in pairs) by default wherever its two tiles, Q and the P tiles fit (D + tail
  // <= 576 at D 512); the 48-key kernel elsewhere, or when tune.latent_tile asks for 48 or 32.
  const int seesaw_bytes = kernels::latent_seesaw_smem_bytes(s.D, s.D + s.tail);
  if (bn == kernels::kLatentSeesawBN && seesaw_bytes > budget)
    throw Unsupported(fmt::format("{}: unsupported: tune.latent_tile: 64-key tiles at D {} + tail {} need {} bytes of "
                                  "shared memory, {} allows {}",
                                  op, s.D, s.tail, seesaw_bytes, arch, budget));
  k.bn = bn != 0 ? bn : seesaw_bytes <= budget ? kernels::kLatentSeesawBN : kernels::kLatentHopperBN;
  if (k.seesaw()) {
    k.stages = 2;
    return k;
  }
  k.stages = kernels::latent_hopper_smem_bytes(s.D + s.tail, 4, k.bn) <= budget   ? 4
             : kernels::latent_hopper_smem_bytes(s.D + s.tail, 3, k.bn) <= budget ? 3
                                                                                   : 2;
  return k;
}

LatentKernelChoice choose_latent_kernel(const char* op, const LatentShape& s, bool split, const std::string& arch) {
  require_portable_arch(op, arch);
  LatentKernelChoice k = choice_for(s, split, arch);
  const int budget = arch_facts(arch).max_smem_per_block;
  const int dqk = s.D + s.tail;
  k.stages = kernels::latent_smem_bytes(dqk, 3) <= budget ? 3 : 2;
  if (kernels::latent_smem_bytes(dqk, k.stages) > budget)
    throw Unsupported(fmt::format("{}: unsupported: backend 'portable': D {} + tail {} needs {} bytes of shared memory, "
                                  "{} allows {}",
                                  op, s.D, s.tail, kernels::latent_smem_bytes(dqk, 2), arch, budget));
  return k;
}

jit::KernelSpec latent_kernel_spec(const char* op, const LatentKernelChoice& k) {
  if (k.seesaw()) {
    jit::SpecBuilder b(op, "mla/latent_decode_seesaw.cuh", "attnjit::kernels::latent_decode_seesaw", k.arch);
    b.field("backend", "hopper").name("{}");
    b.field("dtype", dtype_name(k.dtype)).arg(device_type_name(k.dtype)).name("{}");
    b.field("head_dim", k.D).arg().name("d{}");
    b.field("tail_dim", k.tail).arg().name("t{}");
    b.field("kv_mode", mode_name(k.mode)).arg(k.mode).name("{}");
    b.field("schedule", "seesaw").name("{}");
    b.field("split", k.split).arg().name_if(k.split, "split");
    return b.build();
  }
  jit::SpecBuilder b(op, k.hopper ? "mla/latent_decode_hopper.cuh" : "mla/latent_decode.cuh",
                     k.hopper ? "attnjit::kernels::latent_decode_hopper" : "attnjit::kernels::latent_decode", k.arch);
  b.field("backend", k.hopper ? "hopper" : "portable").name("{}");
  b.field("dtype", dtype_name(k.dtype)).arg(device_type_name(k.dtype)).name("{}");
  b.field("head_dim", k.D).arg().name("d{}");
  b.field("tail_dim", k.tail).arg().name("t{}");
  b.field("kv_mode", mode_name(k.mode)).arg(k.mode).name("{}");
  b.field("stages", k.stages).arg().name("s{}");
  b.field("split", k.split).arg().name_if(k.split, "split");
  // Only the hopper kernel has a key-tile parameter; the name shows it where it is not the default.
  if (k.hopper) b.field("block_n", k.bn).arg().name_if(k.bn != kernels::kLatentHopperBN, "bn{}").before("split");
  return b.build();
}

std::vector<jit::KernelSpec> latent_warmup_specs(const char* op, DType dt, int D, int tail, int mode, bool combine,
                                                 const std::string& arch) {
  // The hopper kernels where the target runs them, then the portable ones (the 'portable' backend and
  // other archs).
  LatentShape s;
  s.dtype = dt;
  s.D = D;
  s.tail = tail;
  s.mode = mode;
  std::vector<jit::KernelSpec> specs;
  if (latent_hopper_gap(s, arch).empty())
    for (bool split : {false, true})
      specs.push_back(latent_kernel_spec(op, choose_latent_hopper(op, s, split, arch, 0)));
  for (bool split : {false, true}) specs.push_back(latent_kernel_spec(op, choose_latent_kernel(op, s, split, arch)));
  if (combine) specs.push_back(combine_kernel_spec(op, dt, D, arch));
  return specs;
}

int hopper_bn(OpContext& ctx) { return ctx.tuning().latent_tile; }

namespace {

// Whether a call takes the hopper kernel: 'hopper' does (or raises its gap), 'auto' wherever it serves
// the call, 'portable' never.
bool use_hopper(const char* op, detail::Backend backend, const LatentShape& s, const std::string& arch) {
  return pick_hopper(op, backend, [&] { return latent_hopper_gap(s, arch); }, [] { return true; });
}

LatentKernelChoice choose_for(const char* op, detail::Backend backend, const LatentShape& s, bool split,
                              const std::string& arch, int hopper_bn) {
  return use_hopper(op, backend, s, arch) ? choose_latent_hopper(op, s, split, arch, hopper_bn)
                                          : choose_latent_kernel(op, s, split, arch);
}

// The split count of a call: explicit, or "auto" (choose_splits' wave model over the kernel's key tiles
// of `bn` slots; at most 1 GiB of partials).
int splits_for(const LatentShape& s, int kv_splits, int sms, int bn) {
  int n = kv_splits;
  if (n == kLatentAutoSplits) {
    const int64_t ctas = s.m_tiles() * s.grid_y * s.B;
    n = choose_splits(ctas, s.max_keys, bn, sms, 1, 0);
  }
  while (n > 1 && partial_bytes(s, n) > kMaxPartialBytes) --n;
  return std::max(n, 1);
}

// The split workspace: fp32 partial outputs [splits, rows, D] (first: the combine reads them as float4),
// then the partial LSEs [splits, rows].
struct SplitLayout {
  size_t o_part = 0, lse_part = 0, bytes = 0;
};
SplitLayout split_layout(const LatentShape& s, int splits) {
  SplitLayout l;
  if (splits <= 1) return l;
  const size_t rows = static_cast<size_t>(s.B * s.tokens * s.H);
  detail::WorkspaceCursor c;
  l.o_part = c.take(static_cast<size_t>(splits) * rows * s.D * sizeof(float));
  l.lse_part = c.take(static_cast<size_t>(splits) * rows * sizeof(float));
  l.bytes = c.total();
  return l;
}

class LatentDecodePlan final : public detail::PlanImpl {
 public:
  LatentDecodePlan(OpContext& ctx, const char* op, const LatentShape& shape, int kv_splits, detail::Backend backend,
             LatentFill fill)
      : op_(op), shape_(shape), kv_splits_(kv_splits), sm_count_(ctx.sm_count(shape.device)), fill_(std::move(fill)),
        ws_(op, shape.device) {
    const std::string arch = ctx.arch_for_device(shape.device);
    if (kv_splits != 1) {
      split_ = choose_for(op, backend, shape, true, arch, hopper_bn(ctx));
      split_kernel_ = ctx.kernels().loaded(latent_kernel_spec(op, split_), shape.device);
      require_dynamic_smem(op, *split_kernel_, split_kernel_->compiled->spec, split_.smem_bytes());
      combine_kernel_ = ctx.kernels().loaded(combine_kernel_spec(op, shape.dtype, shape.D, arch), shape.device);
    }
    if (kv_splits == 1 || kv_splits == kLatentAutoSplits) {
      single_ = choose_for(op, backend, shape, false, arch, hopper_bn(ctx));
      single_kernel_ = ctx.kernels().loaded(latent_kernel_spec(op, single_), shape.device);
      require_dynamic_smem(op, *single_kernel_, single_kernel_->compiled->spec, single_.smem_bytes());
    }
    pdl_ = arch_facts(arch).programmatic_dependent_launch;
    what_single_ = fmt::format("{}: cuLaunchKernelEx", op);
    what_split_ = fmt::format("{}: cuLaunchKernelEx (split)", op);
  }

  void prepare(const TensorArgs& tensors) const override {
    kernels::LatentDecodeParams p{};
    const LatentShape s = fill_(tensors, nullptr, false, p);
    const size_t bytes = split_layout(s, splits_for(s, kv_splits_, sm_count_, split_tile())).bytes;
    if (bytes) ws_.reserve(bytes);
  }
  std::size_t workspace_bytes() const override { return ws_.bytes(); }

  void execute(const TensorArgs& tensors, void* stream) const override {
    kernels::LatentDecodeParams p{};
    const LatentShape s = fill_(tensors, stream, true, p);
    if (s.dtype != shape_.dtype || s.D != shape_.D || s.tail != shape_.tail || s.mode != shape_.mode ||
        s.device != shape_.device)
      throw InvalidArgument(fmt::format("{}: args: tensors: expected this plan's static signature ({} D {} tail {} {} "
                                        "cuda:{}), got {} D {} tail {} {} cuda:{}; build a plan for the new signature",
                                        op_, dtype_name(shape_.dtype), shape_.D, shape_.tail, mode_name(shape_.mode),
                                        shape_.device, dtype_name(s.dtype), s.D, s.tail, mode_name(s.mode), s.device));
    if (s.grid_y > 65535 || s.B > 65535)
      throw Unsupported(fmt::format("{}: unsupported: grid: B = {} and the (token, KV head) blocks = {} must be at most "
                                    "65535",
                                    op_, s.B, s.grid_y));
    const auto& drv = jit::CudaDriver::get();
    drv.bind_device(s.device);
    if (s.B == 0 || s.rows == 0 || s.grid_y == 0) return;
    const int splits = splits_for(s, kv_splits_, sm_count_, split_tile());
    Launch lc;
    lc.grid_y = static_cast<unsigned>(s.grid_y);
    lc.grid_z = static_cast<unsigned>(s.B);
    lc.stream = stream;
    if (splits <= 1) {
      lc.grid_x = static_cast<unsigned>(s.m_tiles());
      lc.threads = static_cast<unsigned>(single_.threads());
      lc.smem_bytes = static_cast<unsigned>(single_.smem_bytes());
      p.n_splits = 1;
      void* args[] = {&p};
      launch_kernel(single_kernel_->function, lc, args, what_single_);
      return;
    }
    const SplitLayout layout = split_layout(s, splits);
    auto lease = ws_.acquire(layout.bytes, stream);
    const int64_t rows = s.B * s.tokens * s.H;
    p.o_part = reinterpret_cast<float*>(lease.ptr() + layout.o_part);
    p.lse_part = reinterpret_cast<float*>(lease.ptr() + layout.lse_part);
    p.part_rows = rows;
    p.n_splits = splits;
    lc.grid_x = static_cast<unsigned>(s.m_tiles() * splits);
    lc.threads = static_cast<unsigned>(split_.threads());
    lc.smem_bytes = static_cast<unsigned>(split_.smem_bytes());
    void* args[] = {&p};
    launch_kernel(split_kernel_->function, lc, args, what_split_);

    kernels::GqaCombineParams cp{};
    cp.o_part = p.o_part;
    cp.lse_part = p.lse_part;
    cp.o = p.o;
    cp.o_sb = p.o_sb;
    cp.o_ss = p.o_ss;
    cp.o_sh = p.o_sh;
    cp.rows = rows;
    cp.heads = static_cast<int>(s.H);
    cp.s_q = static_cast<int>(s.tokens);
    cp.n_splits = splits;
    launch_combine(op_, *combine_kernel_, cp, stream, pdl_);
  }

  std::string describe() const override {
    std::string d = fmt::format("{} kernel plan (kv_splits {}):", op_,
                                kv_splits_ == kLatentAutoSplits ? std::string("auto") : std::to_string(kv_splits_));
    for (const auto* k : {single_kernel_.get(), split_kernel_.get(), combine_kernel_.get()})
      if (k) d += fmt::format(" {}", k->compiled->spec.describe());
    return d;
  }

 private:
  // The key tile of the split kernel ("auto" sizes splits in its tiles; unused when kv_splits is 1).
  int split_tile() const { return split_.hopper ? split_.bn : kernels::kLatentBN; }

  const char* op_;
  std::string what_single_, what_split_;  // launch error labels, formatted once
  LatentShape shape_;
  int kv_splits_;
  int sm_count_;
  bool pdl_ = false;
  LatentFill fill_;
  LatentKernelChoice single_, split_;
  std::shared_ptr<const jit::LoadedKernel> single_kernel_, split_kernel_, combine_kernel_;
  mutable detail::PlanWorkspace ws_;
};

}  // namespace

std::shared_ptr<const detail::PlanImpl> make_latent_plan(OpContext& ctx, const char* op, const LatentShape& shape,
                                                         int kv_splits, detail::Backend backend, LatentFill fill) {
  return std::make_shared<LatentDecodePlan>(ctx, op, shape, kv_splits, backend, std::move(fill));
}

std::vector<jit::KernelSpec> latent_plan_specs(const char* op, const LatentShape& shape, int kv_splits,
                                               detail::Backend backend, const std::string& arch, int hopper_bn) {
  std::vector<jit::KernelSpec> specs;
  if (kv_splits == 1 || kv_splits == kLatentAutoSplits)
    specs.push_back(latent_kernel_spec(op, choose_for(op, backend, shape, false, arch, hopper_bn)));
  if (kv_splits != 1) {
    specs.push_back(latent_kernel_spec(op, choose_for(op, backend, shape, true, arch, hopper_bn)));
    specs.push_back(combine_kernel_spec(op, shape.dtype, shape.D, arch));
  }
  return specs;
}

}  // namespace attnjit::ops
