// CPU reference of bsa_bwd (SPEC.md §2.5), written for clarity, not speed: every formula in double from
// the exact input values, dq / dk / dv rounded once (RNE) to q's dtype.
#pragma once
#include "attnjit/tensor.hpp"
#include "ops/bsa/bsa_common.hpp"

namespace attnjit::ops::reference {

// The tensors of a validated bsa_bwd call on the host (q, k, v, metadata in `call`; o, do, lse the
// forward's output, its upstream gradient and its natural-log LSE). For every batch b, query head h,
// query row i with visible key set K_i = md.visible_ranges(b, h, i / bs) (keys of kv head r = h / g):
//   P_ij = exp(scale <q_i, k_j> - lse_i) for j in K_i (0 when lse_i = -inf), Delta_i = <o_i, do_i>,
//   dP_ij = <do_i, v_j>, dS_ij = P_ij (dP_ij - Delta_i);
//   dq_i = scale sum_j dS_ij k_j; dk_j = scale sum dS_ij q_i and dv_j = sum P_ij do_i over the rows of
//   every query head of kv head r. Every element of dq, dk, dv is written (zeros where nothing reaches).
// The per-row step is math::backward_row (ops/attention/backward_math.hpp), shared with gqa_bwd.
void bsa_backward(const bsa::BsaCall& call, const bsa::BsaMetadataHost& md, const TensorRef& o, const TensorRef& dout,
                  const TensorRef& lse, const TensorRef& dq, const TensorRef& dk, const TensorRef& dv);

}  // namespace attnjit::ops::reference
