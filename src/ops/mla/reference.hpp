// CPU references of mla_decode (SPEC.md §2.13 and docs/ops/mla_decode.md's extensions) and dsa_decode
// (SPEC.md §2.18), written for clarity, not speed: every dot product, the softmax and the weighted sum
// in double from the exact input values, o rounded once (RNE) to the inputs' dtype. Every tensor is read
// and written through its strides; every element of o is written.
#pragma once
#include "ops/mla/mla_call.hpp"

namespace attnjit::ops::reference {

// Host tensors of a validated call whose contents passed check_mla_decode_contents. For request b with
// len = cache_seqlens[b] (N_kv when absent), query token t < S_q and head h, r = h / (H / H_kv): the
// visible cache positions are n < min(len, len - S_q + 1 + t) (all n < len at S_q = 1); position n is
// row n of k[b] / k_pe[b], or slot n % PS of page block_table[b, n / PS] of the pools when paged;
//   l_n = (<q, k_n> + <q_pe, k_pe_n>) / sqrt(D + PE),   o = sum_n softmax(l)_n k_n[:D],
// zeros when no position is visible.
void mla_decode(const MlaDecodeCall& call);

// Host tensors of a validated call. Row (b, s, h), r = h / (H / H_kv), q_pos = q_start_index_s + s:
// slot u with x = indices[b, s, r, u] is valid iff 0 <= x < S_kv and (not causal, or
// (x + 1) * stride_kv <= q_pos + 1); each valid slot is one member of the visible multiset (a repeated
// index counts twice); logit scale * <q[b, s, h], kv[b, x, r]> over all D + dim_tail channels, value
// kv[b, x, r, :D]; zeros when no slot is valid.
void dsa_decode(const DsaDecodeConfig& cfg, const DsaDecodeCall& call);

}  // namespace attnjit::ops::reference
