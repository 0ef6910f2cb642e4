// CPU references of the dense attention family (SPEC.md §2.7 gqa_fwd, §2.8 gqa_varlen_fwd), written
// for clarity, not speed: every formula in double from the exact input values, o rounded once (RNE).
#pragma once
#include "ops/attention/gqa_call.hpp"

namespace attnjit::ops::reference {

// Host tensors of a validated call (validate_gqa_call with Placement::kHost). Writes o (dtype
// call.compute_dtype) and, when call.lse is set, lse (fp32, natural log) for every row:
//   per request b (dense: batch entry b; varlen: rows [cu_seqlens_q[b], cu_seqlens_q[b + 1]) and keys
//   [cu_seqlens_kv[b], cu_seqlens_kv[b + 1])), query i, head h, kv head r = h / (H / H_kv):
//   p_i = i + kv_len - q_len; FP8 dequantisation by q/k/v_scale[b, r]; RoPE of the first R channels
//   of q at p_i and of k at j; z = scale * <q, k>; softcap; causal / window visibility (§1.6);
//   row softmax with sinks[h] (varlen, optional) and the empty-row rule.
// Every tensor is read and written through its strides. Offsets and rope positions are the caller's
// contract; the reference still refuses (InvalidArgument, category content, before writing anything)
// offsets or positions that would make it read outside a tensor.
void gqa_forward(const GqaConfig& cfg, const GqaCall& call);

}  // namespace attnjit::ops::reference
