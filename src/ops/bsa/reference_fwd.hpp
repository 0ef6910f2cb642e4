// CPU references of the block-sparse forward ops (SPEC.md §2.4 bsa_fwd, §2.6 bsa_fp8_fwd), written for
// clarity, not speed: every formula in double from the exact input values, o rounded once (RNE).
#pragma once
#include <cstdint>
#include <vector>

#include "attnjit/tensor.hpp"
#include "ops/bsa/bsa_common.hpp"

namespace attnjit::ops::bsa::reference {

// bsa_fwd on host tensors of a validated call: for batch b, query head h, query i (block m = i / bs):
// visible keys = md.visible_ranges(b, h, m) of KV head h / (H_q / H_kv); l = scale * <q_i, k_j>; row
// softmax (§1.6, no sink; empty row: o = 0, lse = -inf). Writes o (q's dtype, call layout, head dim
// D_v) and, when given, lse [B, H_q, S_q] fp32, through their strides.
void bsa_forward(const BsaCall& call, const BsaMetadataHost& md, const TensorRef& o, const TensorRef* lse);

// bsa_fp8_fwd's internally quantised operands (SPEC.md §2.6 steps 1-3, fp32, exactly): BHSD, D = 128.
struct Fp8Operands {
  std::vector<uint8_t> q8, k8, v8;  // [B, H, S, 128] e4m3 codes
  std::vector<float> sq;            // [B, H, S_q]
  std::vector<float> sk;            // [B, H, ceil(S_kv / 16)]
  std::vector<float> sv;            // [H, 128]
  std::vector<float> mu;            // [B, H, 128]
};
Fp8Operands quantize_fp8(const BsaCall& call);

// bsa_fp8_fwd: quantize_fp8, then the attention of §2.4 on q8 * s_q, k8 * s_k, v8 * s_v in double (no
// probability quantisation); o [B, H, S_q, 128] bf16.
void bsa_fp8_forward(const BsaCall& call, const BsaMetadataHost& md, const TensorRef& o);

}  // namespace attnjit::ops::bsa::reference
