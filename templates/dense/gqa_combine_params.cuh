// Launch parameters of gqa_split_combine (dense/gqa_combine.cuh), shared by host and device.
#pragma once

namespace attnjit::kernels {

struct GqaCombineParams {
  const float* o_part;    // [n_splits, rows, D]
  const float* lse_part;  // [n_splits, rows]
  void* o;                // output, compute dtype; row = token * H + h
  long long o_sb, o_ss, o_sh;  // batch (s_q > 0), token, head strides of o
  float* lse;             // optional natural-log LSE: [T, H] (lse_ss, lse_sh) or [B, H, S_q] (+ lse_sb)
  long long lse_sb, lse_ss, lse_sh;
  const float* sinks;     // [H] or null
  long long sinks_s;
  long long rows;         // tokens * H
  int heads;              // H
  int s_q;                // > 0: tokens are b * s_q + i (batched q); 0: packed tokens
  int n_splits;
};

}  // namespace attnjit::kernels
