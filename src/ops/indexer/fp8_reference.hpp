// CPU references of fp8_lightning_indexer (SPEC.md §2.3) and topk_select (§2.2), written for clarity,
// not speed. Host tensors of an already validated call; every tensor is read and written through its
// strides (outputs are contiguous, class O).
#pragma once
#include <cstdint>

#include "attnjit/tensor.hpp"

namespace attnjit::ops::reference {

// logits[b, s, t, g] = kappa[b, t, g] * sum_{h in group g} weights[s, h] * relu(<q8[b, s, h], k8[b, t, g]>)
// for t in the window [lo, hi) of query s (lo = clamp(ks[s], 0, S_kv), hi = clamp(ke[s], lo, S_kv)),
// -inf elsewhere when clean_logits (otherwise the outside is left unwritten). Operands (step 1):
//   bf16:  q8 = e4m3(q); per key row sigma = max(max_d |k|, 1e-4) / 448 (fp32), k8 = e4m3(k / sigma)
//          (IEEE fp32 division), kappa = sigma;
//   e4m3:  q8 = q, k8 = k, kappa = index_k_scale or 1.
// e4m3 conversions saturate (§1.8). Dot products and sums in double from the decoded values; each
// logit rounded once to fp32.
void fp8_lightning_indexer(const TensorRef& index_q, const TensorRef& index_k, const TensorRef& weights,
                           const TensorRef& cu_seqlen_ks, const TensorRef& cu_seqlen_ke,
                           const TensorRef* index_k_scale, const TensorRef& logits, bool clean_logits);

// The step-1 key quantisation of a bf16 call for one key row of D values: writes k8 codes and
// returns kappa (= sigma). Shared with the tests of the kernel's pre-pass.
float quantise_key_row(const float* k, int64_t D, uint8_t* k8);

// Order-preserving map of fp32 bits to uint32 (larger float -> larger key; -inf and NaNs included).
inline uint32_t ordered_key(uint32_t bits) { return (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u); }

// indexes[b, s, g, :] = the n = min(topk, hi - lo) window positions with the highest
// index_score[b, s, j, g] (ties by smaller position), in descending score order, then -1; the window
// is [max(starts[b, s], 0), min(ends[b, s], S_kv)) (empty if hi <= lo), or [0, S_kv) without starts.
// Scores compare by ordered_key, so -inf is an ordinary candidate and NaNs sort by their bits.
void topk_select(const TensorRef& index_score, const TensorRef* starts, const TensorRef* ends,
                 const TensorRef& indexes, int64_t topk);

}  // namespace attnjit::ops::reference
