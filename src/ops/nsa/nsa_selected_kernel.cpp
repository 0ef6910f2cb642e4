#include "ops/nsa/nsa_selected_kernel.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <tuple>
#include <utility>

#include "attnjit/error.hpp"
#include "jit/cuda_driver.hpp"
#include "jit/spec_builder.hpp"
#include "jit/kernel_cache.hpp"
#include "nsa/nsa_selected_fwd_params.cuh"
#include "ops/attention/attention_kernel.hpp"  // device_type_name
#include "ops/base/arch.hpp"
#include "ops/base/backend.hpp"
#include "ops/base/launch.hpp"
#include "ops/base/op_helpers.hpp"

namespace attnjit::ops::nsa {

namespace {

constexpr float kLog2e = 1.44269504088896340736f;

kernels::NsaSelectedParams selected_params(const SelectedConfig& cfg, const SelectedCall& c, const SelectedKernelChoice& kc) {
  const TensorRef &q = *c.q, &k = *c.k, &v = *c.v, &bi = *c.block_indices, &bc = *c.block_counts, &o = *c.o;
  const TensorRef& ti = *c.meta.token_indices;
  kernels::NsaSelectedParams p{};
  p.q = q.data;
  p.q_st = q.strides[0], p.q_sh = q.strides[1];
  p.k = k.data;
  p.k_st = k.strides[0], p.k_sh = k.strides[1];
  p.v = v.data;
  p.v_st = v.strides[0], p.v_sh = v.strides[1];
  p.o = o.data;
  p.o_st = o.strides[0], p.o_sh = o.strides[1];
  p.block_indices = static_cast<const int*>(bi.data);
  p.bi_st = bi.strides[0], p.bi_sh = bi.strides[1], p.bi_su = bi.strides[2];
  p.block_counts = static_cast<const int*>(bc.data);
  p.bc_st = bc.strides[0], p.bc_sh = bc.strides[1];
  p.offsets = static_cast<const int*>(c.meta.offsets->data);
  p.token_indices = static_cast<const int*>(ti.data);
  p.ti_st = ti.strides[0], p.ti_sc = ti.strides[1];
  p.T = static_cast<int>(c.T);
  p.n_req = static_cast<int>(c.meta.N);
  p.h_kv = static_cast<int>(c.H_kv);
  p.group = static_cast<int>(c.group());
  p.sel = static_cast<int>(c.SEL);
  p.block_size = static_cast<int>(cfg.block_size);
  p.causal = cfg.is_causal ? 1 : 0;
  p.m_tiles = kc.m_tiles(c.group());
  p.scale_log2 = static_cast<float>(cfg.scale) * kLog2e;
  return p;
}

// Extents the kernel indexes with 32-bit integers: tokens, the flattened slot list (at most
// SEL * min(block_size, T) slots) and the grid.
void check_extents(const char* op, const SelectedConfig& cfg, const SelectedCall& c, int64_t m_tiles) {
  constexpr int64_t kMax = int64_t{1} << 30;
  const int64_t slots = c.SEL * std::min<int64_t>(cfg.block_size, std::max<int64_t>(c.T, 1));
  if (c.T > kMax || c.SEL > kMax || slots > kMax)
    throw Unsupported(fmt::format("{}: unsupported: T, SEL and SEL * min(block_size, T) beyond 2^30 are not served "
                                  "(T {}, SEL {}, SEL * min(block_size, T) {})",
                                  op, c.T, c.SEL, slots));
  if (c.H_kv * m_tiles > 65535)
    throw Unsupported(fmt::format("{}: unsupported: grid: H_kv * row tiles = {} * {} must be at most 65535", op, c.H_kv,
                                  m_tiles));
}

}  // namespace

int SelectedKernelChoice::smem_bytes() const {
  return hopper ? kernels::nsa_selected_hopper_smem_bytes(D, heads(), stages)
                : kernels::nsa_selected_smem_bytes(D, warps, bn, stages);
}
int SelectedKernelChoice::threads() const {
  return hopper ? kernels::kNsaSelHopperThreads : kernels::nsa_selected_threads(warps, ksplit);
}

namespace {

// "BNxSTAGES[xKSPLIT]": BN 16, 32, 48 or 64 key slots, 2 to 4 stages, 1, 2 or 4 key splits of 16 slots
// or more, at most 8 warps (warps: the row groups of the call's group size).
std::tuple<int, int, int> parse_selected_tile(const char* op, const std::string& text, int warps) {
  int bn = 0, stages = 0, ksplit = 1;
  char x = 0, x2 = 0, extra = 0;
  const int n = std::sscanf(text.c_str(), "%d%c%d%c%d%c", &bn, &x, &stages, &x2, &ksplit, &extra);
  const bool ok = (n == 3 || (n == 5 && x2 == 'x')) && x == 'x' && bn % 16 == 0 && bn >= 16 && bn <= 64 && stages >= 2 &&
                  stages <= 4 && (ksplit == 1 || ksplit == 2 || ksplit == 4) && (bn / ksplit) % 16 == 0 &&
                  warps * ksplit <= 8;
  if (!ok)
    throw InvalidArgument(fmt::format("{}: param: ATTNJIT_TUNE_NSA_SELECTED_TILE: expected \"BNxSTAGES[xKSPLIT]\" with BN "
                                      "16, 32, 48 or 64, 2 to 4 stages, KSPLIT 1, 2 or 4 with BN / KSPLIT a multiple of "
                                      "16 and {} row groups x KSPLIT <= 8 warps, got \"{}\"", op, warps, text));
  return {bn, stages, ksplit};
}

// The hopper kernel's tiles are wgmma's 64 slots with no key split: "64xSTAGES", 2 to 4 stages.
int parse_selected_hopper_tile(const char* op, const std::string& text) {
  int bn = 0, stages = 0;
  char x = 0, extra = 0;
  const int n = std::sscanf(text.c_str(), "%d%c%d%c", &bn, &x, &stages, &extra);
  if (n != 3 || x != 'x' || bn != kernels::kNsaSelHopperSlots || stages < 2 || stages > 4)
    throw InvalidArgument(fmt::format("{}: param: ATTNJIT_TUNE_NSA_SELECTED_TILE: the hopper kernel expects \"64xSTAGES\" "
                                      "with 2 to 4 stages (64-slot tiles, no key split), got \"{}\"", op, text));
  return stages;
}

}  // namespace

SelectedKernelChoice choose_selected_kernel(const char* op, DType dtype, int64_t D, int64_t group,
                                            detail::Backend backend, const std::string& arch,
                                            const std::string& tile_override) {
  SelectedKernelChoice k;
  // 'auto' takes the portable kernel on every arch. NOTE: H100, 2026-12-06, T 64k H 64/4 D 128 S 16: hopper
  // 25.98 ms (64x2; 64x3 32.97) against portable 20.93 ms. Both issue-bound (0.57 warps issued a scheduler,
  // L2 hit 98.7%), the hopper kernel with 3 CTAs of 4 warps an SM; docs/tuning/nsa.md.
  k.hopper = pick_hopper(op, backend, [&] { return hopper_arch_gap(arch, "wgmma"); }, [] { return false; });
  if (!k.hopper) require_portable_arch(op, arch);
  k.dtype = dtype;
  k.D = static_cast<int>(D);
  k.warps = kernels::nsa_selected_warps(group);  // hopper: heads / 16, the same classes
  k.arch = arch;
  const int budget = arch_facts(arch).max_smem_per_block;
  if (k.hopper) {
    k.bn = kernels::kNsaSelHopperSlots;
    k.stages = 2;
    if (!tile_override.empty()) k.stages = parse_selected_hopper_tile(op, tile_override);
    if (k.smem_bytes() > budget)
      throw Unsupported(fmt::format("{}: unsupported: backend 'hopper': D {} with {} heads and {} stages needs {} bytes "
                                    "of shared memory, {} allows {}",
                                    op, k.D, k.heads(), k.stages, k.smem_bytes(), arch, budget));
    return k;
  }
  // NOTE: H200, 2026-12-03, T 64k H 64/4 D 128 S 16 (group 16: one row group): 32-slot tiles, 2 stages,
  // two warps splitting each tile: 21.3 ms (99.5 TFLOP/s) against 38.4 ms for one warp with 3 stages
  // (53 KB of shared memory a CTA, 4 warps an SM); 16x2 22.8, 64x2x4 22.8, 32x2 32.2, 16x4 32.6, 64x2x2
  // 31.4 ms. More warps an SM, not more bytes in flight, is what the one-warp kernel lacked.
  k.bn = 32;
  k.stages = 2;
  k.ksplit = 2;
  if (!tile_override.empty()) std::tie(k.bn, k.stages, k.ksplit) = parse_selected_tile(op, tile_override, k.warps);
  if (k.smem_bytes() > budget)
    throw Unsupported(fmt::format("{}: unsupported: backend 'portable': D {} with {} row groups needs {} bytes of shared "
                                  "memory, {} allows {}",
                                  op, k.D, k.warps, k.smem_bytes(), arch, budget));
  return k;
}

jit::KernelSpec selected_kernel_spec(const char* op, const SelectedKernelChoice& k) {
  jit::SpecBuilder b(op, k.hopper ? "nsa/nsa_selected_fwd_hopper.cuh" : "nsa/nsa_selected_fwd.cuh",
                     k.hopper ? "attnjit::kernels::nsa_selected_fwd_hopper" : "attnjit::kernels::nsa_selected_fwd", k.arch);
  b.field("backend", k.hopper ? "hopper" : "portable").name("{}");
  b.field("dtype", dtype_name(k.dtype)).arg(device_type_name(k.dtype)).name("{}");
  b.field("head_dim", k.D).arg().name("d{}");
  if (k.hopper) {
    b.field("heads", k.heads()).arg().name("h{}");
    b.field("stages", k.stages).arg().name("s{}");
  } else {
    // The template takes the row groups (warps); the key names the rows they hold.
    b.field("rows", 16 * k.warps).arg(k.warps).name("m{}");
    b.field("block_n", k.bn).arg().name("bn{}");
    b.field("stages", k.stages).arg().name_glued("s{}");
    b.field("key_split", k.ksplit).arg().name_glued("k{}");
  }
  return b.build();
}

std::vector<jit::KernelSpec> selected_warmup_specs(const char* op, DType dtype, int D, const std::string& arch) {
  std::vector<jit::KernelSpec> specs;
  for (int64_t group : {16, 32, 64})
    specs.push_back(selected_kernel_spec(op, choose_selected_kernel(op, dtype, D, group, detail::Backend::kPortable, arch)));
  if (hopper_arch_gap(arch).empty())
    for (int64_t group : {16, 32, 64})
      specs.push_back(selected_kernel_spec(op, choose_selected_kernel(op, dtype, D, group, detail::Backend::kHopper, arch)));
  return specs;
}

namespace {

class NsaSelectedPlan final : public detail::PlanImpl {
 public:
  NsaSelectedPlan(OpContext& ctx, const char* op, const SelectedConfig& cfg, const SelectedCall& call,
               detail::Backend backend)
      : op_(op), cfg_(cfg) {
    choice_ = choose_selected_kernel(op, call.dtype, call.D, call.group(), backend, ctx.arch_for_device(call.device.index),
                                     ctx.tuning().nsa_selected_tile);
    device_ = call.device.index;
    check_extents(op, cfg, call, choice_.m_tiles(call.group()));
    kernel_ = ctx.kernels().loaded(selected_kernel_spec(op, choice_), device_);
    require_dynamic_smem(op, *kernel_, kernel_->compiled->spec, choice_.smem_bytes());
  }

  void execute(const TensorArgs& tensors, void* stream) const override {
    const SelectedCall c = validate_selected_call(tensors, detail::Placement::kDevice);
    const int warps = kernels::nsa_selected_warps(c.group());
    if (c.dtype != choice_.dtype || c.D != choice_.D || warps != choice_.warps || c.device.index != device_)
      throw InvalidArgument(fmt::format("{}: args: tensors: expected this plan's static signature ({} D {} group class "
                                        "m{} cuda:{}), got {} D {} m{} cuda:{}; build a plan for the new signature",
                                        op_, dtype_name(choice_.dtype), choice_.D, 16 * choice_.warps, device_,
                                        dtype_name(c.dtype), c.D, 16 * warps, c.device.index));
    const kernels::NsaSelectedParams p = selected_params(cfg_, c, choice_);
    check_extents(op_, cfg_, c, p.m_tiles);
    if (cfg_.validate_inputs) {
      check_meta_contents(op_, c.meta, c.T, /*bs=*/0, 0, c.device, stream);
      check_block_counts(op_, c);
    }
    const auto& drv = jit::CudaDriver::get();
    drv.bind_device(device_);
    if (c.T == 0) return;
    Launch lc;
    lc.grid_x = static_cast<unsigned>(c.T);
    lc.grid_y = static_cast<unsigned>(c.H_kv * p.m_tiles);
    lc.threads = static_cast<unsigned>(choice_.threads());
    lc.smem_bytes = static_cast<unsigned>(choice_.smem_bytes());
    lc.stream = stream;
    kernels::NsaSelectedParams arg = p;
    void* args[] = {&arg};
    launch_kernel(kernel_->function, lc, args, fmt::format("{}: cuLaunchKernelEx", op_));
  }

  std::string describe() const override {
    return fmt::format("{} kernel plan: {}", op_, kernel_->compiled->spec.describe());
  }

 private:
  const char* op_;
  SelectedConfig cfg_;
  SelectedKernelChoice choice_;
  int device_ = 0;
  std::shared_ptr<const jit::LoadedKernel> kernel_;
};

}  // namespace

std::shared_ptr<const detail::PlanImpl> make_selected_plan(OpContext& ctx, const char* op, const SelectedConfig& cfg,
                                                           const SelectedCall& call, detail::Backend backend) {
  return std::make_shared<NsaSelectedPlan>(ctx, op, cfg, call, backend);
}

}  // namespace attnjit::ops::nsa
