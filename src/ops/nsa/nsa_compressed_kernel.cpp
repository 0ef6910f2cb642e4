#include "ops/nsa/nsa_compressed_kernel.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <utility>

#include "attnjit/error.hpp"
#include "jit/cuda_driver.hpp"
#include "ops/attention/attention_kernel.hpp"
#include "ops/base/arch.hpp"
#include "ops/base/backend.hpp"
#include "ops/base/tma.hpp"
#include "ops/nsa/nsa_compressed_fwd_plans.hpp"

namespace attnjit::ops::nsa {

namespace {

// The attention core's view of the op: packed queries, causal (in compressed positions), one scale.
GqaConfig attention_config(const CompressedConfig& cfg) {
  GqaConfig g;
  g.varlen = true;
  g.is_causal = true;
  g.sm_scale = cfg.scale;
  g.validate_inputs = cfg.validate_inputs;
  return g;
}

AttentionKernelChoice portable_choice(const char* op, const CompressedConfig& cfg, DType dtype, int64_t D,
                                      const std::string& arch) {
  require_portable_arch(op, arch);
  AttentionKernelChoice k = choose_attention_kernel(op, attention_config(cfg), dtype, dtype, dtype, D, /*q_packed=*/true,
                                                    KvMode::kCompressed, /*sinks=*/false, arch, /*tile_override=*/"");
  // NOTE: at D 128 the 64-key tile spills 24 bytes once the per-row chunk position (a division by bs)
  // joins the causal state; the 32-key tile does not (sm_90a, ptxas 13.0). gqa_fwd measured the two
  // tiles within 1-2% of each other at D 128 (H200, 2026-12-01).
  if (D == 128) k.BN = 32;
  return k;
}

HopperAttentionChoice hopper_choice(const CompressedConfig& cfg, DType dtype, int64_t D, const std::string& arch) {
  HopperAttentionChoice k = choose_hopper_attention(attention_config(cfg), dtype, D, /*sinks=*/false, arch);
  k.kv_mode = KvMode::kCompressed;
  return k;
}

// 'hopper' takes the hopper kernel or fails naming why; 'auto' takes it wherever it serves the call.
bool use_hopper(const char* op, detail::Backend backend, const CompressedCall& c, const std::string& arch) {
  // The call's strides are part of the gap, so 'hopper' fails at plan time on a broadcast k_cmp.
  return pick_hopper(
      op, backend,
      [&] {
        std::string gap = hopper_arch_gap(arch);
        return gap.empty() ? tma_inputs_gap(c) : gap;
      },
      [] { return true; });
}

}  // namespace

// Why k_cmp and v_cmp cannot be TMA sources ("" when they can).
std::string tma_inputs_gap(const CompressedCall& c) {
  for (auto [name, t] : {std::pair{"k_cmp", c.k_cmp}, std::pair{"v_cmp", c.v_cmp}}) {
    const std::string gap = tma_gap(name, t->data, {{t->shape[0], t->strides[0]}, {t->shape[1], t->strides[1]}});
    if (!gap.empty()) return gap;
  }
  return "";
}

void check_static(const char* op, const CompressedCall& c) {
  if (const std::string gap = compressed_kernel_gap(c.DK, c.DV); !gap.empty())
    throw Unsupported(fmt::format("{}: unsupported: impl 'kernel': {}; use impl 'reference' (CPU)", op, gap));
  // The kernels index packed rows (token, head of the group) with 32-bit integers.
  constexpr int64_t kMax = int64_t{1} << 30;
  if (c.T * c.group() > kMax)
    throw Unsupported(fmt::format("{}: unsupported: T * (H / H_kv) = {} * {} beyond 2^30 packed rows per KV head", op,
                                  c.T, c.group()));
}

kernels::GqaFwdParams compressed_params(const CompressedConfig& cfg, const CompressedCall& c) {
  kernels::GqaFwdParams p{};
  fill_common_params(p, attention_config(cfg), *c.q, *c.o, /*q_packed=*/true, static_cast<float>(cfg.scale), c.H, c.H_kv);
  p.k = c.k_cmp->data;
  p.v = c.v_cmp->data;
  p.k_ss = c.k_cmp->strides[0];
  p.k_sh = c.k_cmp->strides[1];
  p.v_ss = c.v_cmp->strides[0];
  p.v_sh = c.v_cmp->strides[1];
  if (c.lse) {
    p.lse = static_cast<float*>(c.lse->data);
    p.lse_ss = c.lse->strides[0];
    p.lse_sh = c.lse->strides[1];
  }
  p.cu_q = static_cast<const int*>(c.meta.offsets->data);
  p.cu_kv = static_cast<const int*>(c.meta.chunk_offsets->data);
  p.batch = static_cast<int>(c.meta.N);
  // A chunk longer than any request is never complete; clamping keeps (i + 1) / bs exact in 32 bits.
  p.cmp_bs = static_cast<int>(std::min<int64_t>(cfg.bs, std::numeric_limits<int>::max()));
  return p;
}

std::string compressed_kernel_gap(int64_t DK, int64_t DV) {
  if (DK != DV) return fmt::format("the kernels take DK = DV, got DK {} and DV {}", DK, DV);
  return "";
}

std::vector<jit::KernelSpec> compressed_warmup_specs(const char* op, const std::string& arch) {
  const CompressedConfig cfg;
  std::vector<jit::KernelSpec> specs;
  for (DType dt : {DType::kF16, DType::kBF16})
    for (int D : {64, 128}) specs.push_back(attention_kernel_spec(op, portable_choice(op, cfg, dt, D, arch)));
  if (hopper_arch_gap(arch).empty())
    for (DType dt : {DType::kF16, DType::kBF16})
      for (int D : {64, 128}) specs.push_back(hopper_attention_kernel_spec(op, hopper_choice(cfg, dt, D, arch)));
  return specs;
}

bool compressed_uses_hopper(const char* op, detail::Backend backend, const CompressedCall& call, const std::string& arch) {
  check_static(op, call);
  return use_hopper(op, backend, call, arch);
}

std::vector<jit::KernelSpec> compressed_kernels_for(const char* op, const CompressedConfig& cfg, const CompressedCall& call,
                                                    detail::Backend backend, const std::string& arch) {
  check_static(op, call);
  if (use_hopper(op, backend, call, arch)) return {hopper_attention_kernel_spec(op, hopper_choice(cfg, call.dtype, call.DK, arch))};
  return {attention_kernel_spec(op, portable_choice(op, cfg, call.dtype, call.DK, arch))};
}

std::shared_ptr<const detail::PlanImpl> make_compressed_plan(OpContext& ctx, const char* op, const CompressedConfig& cfg,
                                                             const CompressedCall& call, const std::string& arch,
                                                             bool hopper) {
  if (hopper) {
    HopperAttentionChoice k = hopper_choice(cfg, call.dtype, call.DK, arch);
    auto kernel = load_hopper_attention_kernel(ctx, op, k, call.device.index);
    return make_compressed_hopper_plan(op, cfg, call, std::move(k), std::move(kernel));
  }
  AttentionKernelChoice k = portable_choice(op, cfg, call.dtype, call.DK, arch);
  auto kernel = load_attention_kernel(ctx, op, k, call.device.index);
  return make_compressed_portable_plan(op, cfg, call, std::move(k), std::move(kernel));
}

}  // namespace attnjit::ops::nsa
