// gqa_paged_fwd (SPEC.md §2.9) and mha_decode_paged (§2.11): attention over a paged KV cache. A
// validated call, shared by the planner, the kernel plans and the CPU reference.
#pragma once
#include <cstdint>

#include "attnjit/tensor.hpp"
#include "ops/attention/gqa_call.hpp"
#include "ops/base/validation.hpp"

namespace attnjit::ops {

// mha_decode_paged's construction parameters; gqa_paged_fwd uses GqaConfig (the parameters of §2.7).
struct MhaDecodePagedConfig {
  int64_t page_size = 0;  // required, >= 1
  bool is_causal = false;
  bool validate_inputs = false;
};

// A validated call of either op.
//  gqa_paged_fwd:    q [T_q, H, D] packed by cu_seqlens_q [B + 1]; k_pages/v_pages [NP, PS, H_kv, D];
//                    page_table [B, W]; kv_lens = cache_seqlens [B]; optional q/k/v scales [B, H_kv]
//                    (k/v scales may be zero-stride views), rope tables [P, R/2], sinks [H].
//  mha_decode_paged: q [B, S_q, H, D]; k/v [N_kv, H, D] seen as pages [N_kv / PS, PS, H, D] (k_pages,
//                    v_pages hold the original rank-3 tensors); page_table = block_table [B, W];
//                    kv_lens = real_seqlen_kv [B]; H_kv = H; no scales, rope or sinks.
struct PagedAttentionCall {
  bool mha_decode = false;
  const TensorRef* q = nullptr;
  const TensorRef* o = nullptr;
  const TensorRef* k_pages = nullptr;
  const TensorRef* v_pages = nullptr;
  const TensorRef* page_table = nullptr;
  const TensorRef* kv_lens = nullptr;
  const TensorRef* cu_seqlens_q = nullptr;  // gqa_paged_fwd only
  const TensorRef* q_scale = nullptr;
  const TensorRef* k_scale = nullptr;
  const TensorRef* v_scale = nullptr;
  const TensorRef* rope_cos = nullptr;
  const TensorRef* rope_sin = nullptr;
  const TensorRef* sinks = nullptr;

  DType q_dtype = DType::kBF16;
  DType kv_dtype = DType::kBF16;
  DType compute_dtype = DType::kBF16;
  int64_t B = 0;
  int64_t S_q = 0;  // mha_decode_paged
  int64_t T_q = 0;  // gqa_paged_fwd
  int64_t H = 0, H_kv = 0, D = 0;
  int64_t PS = 0;   // page size
  int64_t NP = 0;   // pages in the pool
  int64_t W = 0;    // page-table width
  // Element strides of k's pool: page, slot within the page, KV head (D is contiguous). v's pool may
  // have other strides: read them from v_pages.
  int64_t page_stride = 0, slot_stride = 0, head_stride = 0;
  int64_t R = 0, P = 0;
  float scale = 0;
  Device device{};
};

PagedAttentionCall validate_gqa_paged_call(const GqaConfig& cfg, const TensorArgs& args, detail::Placement placement);
PagedAttentionCall validate_mha_decode_paged_call(const MhaDecodePagedConfig& cfg, const TensorArgs& args,
                                                  detail::Placement placement);

}  // namespace attnjit::ops
