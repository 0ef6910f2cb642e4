// CPU reference of gqa_bwd (SPEC.md §2.12), written for clarity, not speed: every formula in double from
// the exact input values, dq / dk / dv rounded once (RNE) to the inputs' dtype.
#pragma once
#include "ops/dense/gqa_bwd_call.hpp"

namespace attnjit::ops::reference {

// Host tensors of a validated call (validate_gqa_bwd_call with Placement::kHost). For every batch entry
// b, query head h, kv head r = h / (H / H_kv), query row i and visible key j (j <= i when causal, every
// j < S otherwise), math::backward_row's step:
//   P_ij = exp(scale <q_i, k_j> - lse_i), Delta_i = <o_i, do_i>, dS_ij = P_ij (<do_i, v_j> - Delta_i);
//   dq_i = scale sum_j dS_ij k_j; dk_j = scale sum dS_ij q_i and dv_j = sum P_ij do_i over the rows of
//   every query head of kv head r. Every element of dq, dk, dv is written; every tensor is read and
//   written through its strides.
void gqa_backward(const GqaBwdConfig& cfg, const GqaBwdCall& call);
// The same sums over the absolute values of every product (math::backward_row<true>), written into
// dq, dk, dv: SPEC.md §1.12's ref_abs, the scale of the gradients' errors where they cancel.
void gqa_backward_abs(const GqaBwdConfig& cfg, const GqaBwdCall& call);

}  // namespace attnjit::ops::reference
