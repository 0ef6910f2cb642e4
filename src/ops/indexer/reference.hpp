// CPU reference of lightning_indexer (SPEC.md §2.1), written for clarity, not speed (rows are spread
// over the host's cores so that the GPU test grid's larger cases finish).
#pragma once
#include <cstdint>

#include "attnjit/tensor.hpp"

namespace attnjit::ops::reference {

// Host tensors, already validated: q [B, T, H, D], k [B, S, D], weights [B, T, H] (fp16, bf16 or fp32),
// optional cu_seqlens / cu_seqlens_k [N + 1] int32 (both or neither), indices [B, T, topk] int32.
// Scores in double precision rounded once to fp32 (-0 -> +0); each row holds the first
// n = min(topk, |C|) candidates under (score desc, index asc), in ascending index order, then -1.
void lightning_indexer(const TensorRef& q, const TensorRef& k, const TensorRef& weights, const TensorRef* cu_seqlens,
                       const TensorRef* cu_seqlens_k, const TensorRef& indices, int64_t topk, bool causal,
                       int64_t compress_ratio);

// The order-preserving map of an fp32 score to uint32 that defines "score desc" for ties and NaN.
inline uint32_t ordered_score_key(float s) {
  uint32_t u;
  static_assert(sizeof(u) == sizeof(s));
  __builtin_memcpy(&u, &s, 4);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

}  // namespace attnjit::ops::reference
