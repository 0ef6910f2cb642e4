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
  int warps_per_row;      // 1, 2, 4, 8 or 16 (gqa_combine_warps)
};

constexpr int kGqaCombineWarps = 16;  // warps per CTA (512 threads)
#if !defined(__CUDACC_RTC__)
// Warps per row: about eight splits per warp (one batch of loads in flight), at most all sixteen (host side).
inline constexpr int gqa_combine_warps(int n_splits) {
  return n_splits > 64 ? 16 : n_splits > 32 ? 8 : n_splits > 16 ? 4 : n_splits > 8 ? 2 : 1;
}
#endif

}  // namespace attnjit::kernels
