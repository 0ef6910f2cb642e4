#include "ops/nsa/nsa_topk_kernel.hpp"

#include <fmt/format.h>

#include <cstdio>
#include <tuple>
#include <utility>

#include "attnjit/error.hpp"
#include "jit/cuda_driver.hpp"
#include "jit/spec_builder.hpp"
#include "jit/kernel_cache.hpp"
#include "nsa/nsa_topk_params.cuh"
#include "ops/attention/attention_kernel.hpp"  // device_type_name
#include "ops/base/arch.hpp"
#include "ops/base/backend.hpp"
#include "ops/base/launch.hpp"
#include "ops/base/op_helpers.hpp"

namespace attnjit::ops::nsa {

namespace {

kernels::NsaTopkParams topk_params(const TopkConfig& cfg, const TopkCall& c, int tokens) {
  const TensorRef &q = *c.q, &k = *c.k_cmp, &o = *c.block_indices, &ti = *c.meta.token_indices;
  kernels::NsaTopkParams p{};
  p.q = q.data;
  p.q_st = q.strides[0], p.q_sh = q.strides[1];
  p.k_cmp = k.data;
  p.k_st = k.strides[0], p.k_sh = k.strides[1];
  p.out = static_cast<int*>(o.data);
  p.o_st = o.strides[0], p.o_sh = o.strides[1], p.o_su = o.strides[2];
  p.chunk_offsets = static_cast<const int*>(c.meta.chunk_offsets->data);
  p.token_indices = static_cast<const int*>(ti.data);
  p.ti_st = ti.strides[0], p.ti_sc = ti.strides[1];
  p.T = static_cast<int>(c.T);
  p.C = static_cast<int>(c.C);
  p.n_req = static_cast<int>(c.meta.N);
  p.group = static_cast<int>(c.group());
  p.sel = static_cast<int>(cfg.selected_block_num);
  p.bs = static_cast<int>(cfg.bs);  // <= INT32_MAX (parse_topk_config)
  p.m_tiles = tokens == 1 ? static_cast<int>((c.group() + kernels::kNsaTopkRows - 1) / kernels::kNsaTopkRows) : 1;
  p.scale = static_cast<float>(cfg.scale);
  return p;
}

// Extents the kernel indexes with 32-bit integers: tokens, chunk rows, the CTA's rows (T + tokens per
// CTA) and the grid.
void check_extents(const char* op, const TopkCall& c) {
  constexpr int64_t kMax = int64_t{1} << 30;
  if (c.T > kMax || c.C > kMax || c.H > kMax)
    throw Unsupported(fmt::format("{}: unsupported: T, C and H beyond 2^30 are not served (T {}, C {}, H {})", op, c.T,
                                  c.C, c.H));
  if (c.H_kv > 65535)
    throw Unsupported(fmt::format("{}: unsupported: grid: H_kv = {} must be at most 65535", op, c.H_kv));
}

}  // namespace

// The hopper kernel aligns its panels to 1024 bytes inside the dynamic shared memory.
int TopkKernelChoice::smem_bytes() const { return kernels::nsa_topk_smem_bytes(D, tokens, bn, stages, window) + (hopper ? 1024 : 0); }
int TopkKernelChoice::threads() const { return 32 * kernels::kNsaTopkWarps; }

namespace {

// "BNxSTAGES[xWINDOW]": 32, 64 or 128 chunks a tile, 2 to 4 ring stages, windows of 128 to 2048
// candidates in steps of 128 (a multiple of BN).
std::tuple<int, int, int> parse_topk_tile(const char* op, const std::string& text, int window) {
  int bn = 0, stages = 0;
  char x = 0, x2 = 0, extra = 0;
  const int n = std::sscanf(text.c_str(), "%d%c%d%c%d%c", &bn, &x, &stages, &x2, &window, &extra);
  const bool ok = (n == 3 || (n == 5 && x2 == 'x')) && x == 'x' && (bn == 32 || bn == 64 || bn == 128) &&
                  stages >= 2 && stages <= 4 && window >= 128 && window <= 2048 && window % 128 == 0 &&
                  window % bn == 0;
  if (!ok)
    throw InvalidArgument(fmt::format("{}: param: ATTNJIT_TUNE_NSA_TOPK_TILE: expected \"BNxSTAGES[xWINDOW]\" with BN 32, "
                                      "64 or 128, 2 to 4 stages and a window of 128 to 2048 candidates (a multiple of 128 "
                                      "and of BN), got \"{}\"",
                                      op, text));
  return {bn, stages, window};
}

}  // namespace

TopkKernelChoice choose_topk_kernel(const char* op, DType dtype, int64_t D, int64_t group, detail::Backend backend,
                                    const std::string& arch, const std::string& tile_override) {
  TopkKernelChoice k;
  // 'auto' takes the hopper kernel on sm_90a: with 512-candidate windows it holds 4 CTAs an SM (106
  // registers, 54.5 KB) and measured 8.10 ms at 64k tokens against the portable kernel's 8.86 (H200,
  // 2026-12-03; the portable kernel's 139 registers keep it at 3 CTAs an SM whatever the window).
  k.hopper = pick_hopper(op, backend, [&] { return hopper_arch_gap(arch, "wgmma"); }, [] { return true; });
  if (!k.hopper) require_portable_arch(op, arch);
  k.dtype = dtype;
  k.D = static_cast<int>(D);
  k.tokens = kernels::nsa_topk_tokens(group);
  // NOTE: H200, 2026-12-03, T 64k H 64/4 D 128 S 16 bs 64: 32-chunk tiles, 2 stages: 8.8 ms (portable and
  // hopper alike); 64x2 11.4 (hopper 10.7), 32x3 9.3 ms. The kernel is issue-bound in the per-element
  // softmax and mask work, not in the MMA or the k_cmp stream: a deeper ring and wgmma did not help,
  // fewer registers and more CTAs an SM did.
  k.bn = kernels::kNsaTopkBN;
  k.stages = kernels::kNsaTopkStages;
  k.window = k.hopper ? kernels::kNsaTopkHopperWindow : kernels::kNsaTopkWindow;
  if (!tile_override.empty()) std::tie(k.bn, k.stages, k.window) = parse_topk_tile(op, tile_override, k.window);
  k.arch = arch;
  const int budget = arch_facts(arch).max_smem_per_block;
  if (k.smem_bytes() > budget)
    throw Unsupported(fmt::format("{}: unsupported: backend '{}': D {} with {} tokens a CTA and {}x{} tiles needs "
                                  "{} bytes of shared memory, {} allows {}",
                                  op, k.hopper ? "hopper" : "portable", k.D, k.tokens, k.bn, k.stages, k.smem_bytes(),
                                  arch, budget));
  return k;
}

jit::KernelSpec topk_kernel_spec(const char* op, const TopkKernelChoice& k) {
  jit::SpecBuilder b(op, k.hopper ? "nsa/nsa_topk_hopper.cuh" : "nsa/nsa_topk.cuh", "attnjit::kernels::nsa_topk", k.arch);
  // The hopper instantiation sets the template's last parameter.
  b.field("backend", k.hopper ? "hopper" : "portable").name("{}").arg_if(k.hopper, true).after("tile");
  b.field("dtype", dtype_name(k.dtype)).arg(device_type_name(k.dtype)).name("{}");
  b.field("head_dim", k.D).arg().name("d{}");
  b.field("tokens", k.tokens).arg().name("t{}");
  b.field("tile", fmt::format("{}x{}x{}", k.bn, k.stages, k.window))
      .arg(k.bn).arg(k.stages).arg(k.window)
      .name(fmt::format("bn{}s{}w{}", k.bn, k.stages, k.window));
  return b.build();
}

std::vector<jit::KernelSpec> topk_warmup_specs(const char* op, DType dtype, int D, const std::string& arch) {
  std::vector<jit::KernelSpec> specs;
  for (int64_t group : {16, 32, 64})
    specs.push_back(topk_kernel_spec(op, choose_topk_kernel(op, dtype, D, group, detail::Backend::kPortable, arch)));
  if (hopper_arch_gap(arch).empty())
    for (int64_t group : {16, 32, 64})
      specs.push_back(topk_kernel_spec(op, choose_topk_kernel(op, dtype, D, group, detail::Backend::kHopper, arch)));
  return specs;
}

namespace {

class NsaTopkPlan final : public detail::PlanImpl {
 public:
  NsaTopkPlan(OpContext& ctx, const char* op, const TopkConfig& cfg, const TopkCall& call, detail::Backend backend)
      : op_(op), cfg_(cfg) {
    choice_ = choose_topk_kernel(op, call.dtype, call.D, call.group(), backend, ctx.arch_for_device(call.device.index),
                                 ctx.tuning().nsa_topk_tile);
    device_ = call.device.index;
    check_extents(op, call);
    kernel_ = ctx.kernels().loaded(topk_kernel_spec(op, choice_), device_);
    require_dynamic_smem(op, *kernel_, kernel_->compiled->spec, choice_.smem_bytes());
  }

  void execute(const TensorArgs& tensors, void* stream) const override {
    const TopkCall c = validate_topk_call(cfg_, tensors, detail::Placement::kDevice);
    const int tokens = kernels::nsa_topk_tokens(c.group());
    if (c.dtype != choice_.dtype || c.D != choice_.D || tokens != choice_.tokens || c.device.index != device_)
      throw InvalidArgument(fmt::format("{}: args: tensors: expected this plan's static signature ({} D {} group class "
                                        "t{} cuda:{}), got {} D {} t{} cuda:{}; build a plan for the new signature",
                                        op_, dtype_name(choice_.dtype), choice_.D, choice_.tokens, device_,
                                        dtype_name(c.dtype), c.D, tokens, c.device.index));
    check_extents(op_, c);
    if (cfg_.validate_inputs) check_meta_contents(op_, c.meta, c.T, cfg_.bs, c.C, c.device, stream);
    const auto& drv = jit::CudaDriver::get();
    drv.bind_device(device_);
    if (c.T == 0) return;
    Launch lc;
    lc.grid_x = static_cast<unsigned>((c.T + tokens - 1) / tokens);
    lc.grid_y = static_cast<unsigned>(c.H_kv);
    lc.threads = static_cast<unsigned>(choice_.threads());
    lc.smem_bytes = static_cast<unsigned>(choice_.smem_bytes());
    lc.stream = stream;
    kernels::NsaTopkParams arg = topk_params(cfg_, c, tokens);
    void* args[] = {&arg};
    launch_kernel(kernel_->function, lc, args, fmt::format("{}: cuLaunchKernelEx", op_));
  }

  std::string describe() const override {
    return fmt::format("{} kernel plan: {}", op_, kernel_->compiled->spec.describe());
  }

 private:
  const char* op_;
  TopkConfig cfg_;
  TopkKernelChoice choice_;
  int device_ = 0;
  std::shared_ptr<const jit::LoadedKernel> kernel_;
};

}  // namespace

std::shared_ptr<const detail::PlanImpl> make_topk_plan(OpContext& ctx, const char* op, const TopkConfig& cfg,
                                                       const TopkCall& call, detail::Backend backend) {
  return std::make_shared<NsaTopkPlan>(ctx, op, cfg, call, backend);
}

}  // namespace attnjit::ops::nsa
