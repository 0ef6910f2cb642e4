// CPU references of the paged attention ops (SPEC.md §2.9 gqa_paged_fwd, §2.11 mha_decode_paged),
// written for clarity, not speed: every formula in double from the exact input values, o rounded once
// (RNE) to call.compute_dtype.
#pragma once
#include "ops/attention/gqa_call.hpp"
#include "ops/paged/paged_call.hpp"

namespace attnjit::ops::reference {

// Host tensors of a validated call (validate_gqa_paged_call with Placement::kHost). Writes o [T_q, H, D]
// for every row: request b has queries [cu_seqlens_q[b], cu_seqlens_q[b + 1]) and kv_len =
// cache_seqlens[b] keys; logical key j is pool row (page_table[b, j / PS], j % PS, r) of k_pages /
// v_pages, r = h / (H / H_kv). Query i sits at p_i = kv_len - q_len + i. q is dequantised by
// q_scale[b, r] when it is e4m3, keys and values by k_scale / v_scale[b, r] when the cache is e4m3;
// RoPE rotates the first R channels of q at p_i and of key j at j; z = scale * <q, k>; softcap;
// causal / window visibility (§1.6); row softmax with sinks[h] when given and the empty-row rule.
// Page-table entries of logical pages >= ceil(kv_len / PS) and pool rows no request uses are never read.
// Every tensor is read and written through its strides (zero-stride scale views included). Offsets,
// lengths, page-table entries and rope positions are the caller's contract; the reference still refuses
// (InvalidArgument, category content, before writing anything) values that would make it read outside
// a tensor.
void gqa_paged_fwd(const GqaConfig& cfg, const PagedAttentionCall& call);

// Host tensors of a validated call (validate_mha_decode_paged_call with Placement::kHost). Writes
// o [B, S_q, H, D]: request b has L = real_seqlen_kv[b] keys, key j being row
// block_table[b, j / page_size] * page_size + j % page_size of k / v [N_kv, H, D] (same head h);
// logits scale * <q_i, k_j> with scale = 1/sqrt(D); causal visibility j <= i + L - S_q; row softmax;
// rows with no visible key (L = 0, or causal with i + L - S_q < 0) are zeros. Refuses, like
// gqa_paged_fwd, lengths or table entries that would make it read outside a tensor.
void mha_decode_paged(const MhaDecodePagedConfig& cfg, const PagedAttentionCall& call);

}  // namespace attnjit::ops::reference
