// gqa_paged_fwd's split-KV decode path on the hopper backend (templates/paged/paged_decode_hopper.cuh):
// which calls it serves, its KernelSpec, its split count, and its launch (TMA maps of the pools).
#pragma once
#include <memory>
#include <string>

#include "jit/kernel_cache.hpp"
#include "jit/kernel_spec.hpp"
#include "ops/attention/gqa_call.hpp"
#include "ops/paged/paged_call.hpp"
#include "dense/gqa_fwd_params.cuh"

namespace attnjit::ops {

// Everything that selects an instantiation (heads, group and page size are launch arguments).
struct HopperDecodeChoice {
  DType dtype = DType::kBF16;
  int D = 0;
  bool causal = false, window = false, softcap = false;
  bool batched = false;  // mha_decode_paged: q [B, S_q, H, D], rank-3 pools
  std::string arch;
};

// Why the kernel cannot serve calls with this static signature ("" when it can): gqa_paged_fwd or
// mha_decode_paged on sm_90a, fp16/bf16 pools in q's dtype with the output in it too, D 64 or 128, no RoPE.
std::string hopper_decode_static_gap(const GqaConfig& gqa, const PagedAttentionCall& call, const std::string& arch);
// Why it cannot serve this call's shapes ("" when it can): H_kv 1, 2, 4 or a multiple of 8 (a CTA takes
// up to eight), H / H_kv <= 16, a page size that is a multiple of 16, pools that TMA can read (16-byte
// aligned, 16-byte multiple strides), q's rows 4-byte aligned.
std::string hopper_decode_call_gap(const PagedAttentionCall& call);
HopperDecodeChoice choose_hopper_decode(const GqaConfig& gqa, const PagedAttentionCall& call, const std::string& arch);
jit::KernelSpec hopper_decode_kernel_spec(const char* op, const HopperDecodeChoice& k);
std::shared_ptr<const jit::LoadedKernel> load_hopper_decode_kernel(OpContext& ctx, const char* op,
                                                                   const HopperDecodeChoice& k, int device);
// Splits of each request's keys: one CTA per SM, waves model as the portable path (at most 128).
int hopper_decode_splits(const PagedAttentionCall& call, int sms, int splits_override);
// Launches the split kernel over `p` (p.o_part, p.lse_part, p.part_rows and p.n_splits set), encoding the
// pools' TMA maps; the caller launches the combine after it.
void launch_hopper_decode(const char* op, const jit::LoadedKernel& kernel, const HopperDecodeChoice& k,
                          const kernels::GqaFwdParams& p, const PagedAttentionCall& call, void* stream);

}  // namespace attnjit::ops
