// Launch parameters of the bsa_fwd kernels (templates/bsa/bsa_fwd.cuh, bsa_combine.cuh), shared by the
// host planner and the device code (plain types only). Strides are in elements, along the logical axes
// (b, h, s) whatever the layout. (bsa_fp8_fwd has its own: bsa_fp8_fwd_params.cuh.)
#pragma once
#include "common/host_device.cuh"

namespace attnjit::kernels {

// Geometry of a bsa_fwd CTA (BsaFwdConfig static_asserts its layout against these): WARPS warps; Q, and
// double-buffered K and V, in 16-bit rows padded by 8 elements (conflict-free ldmatrix).
ATTNJIT_HD constexpr int bsa_fwd_threads(int warps) { return warps * 32; }
ATTNJIT_HD constexpr int bsa_fwd_smem_bytes(int D, int DV, int BM, int BN) {
  return (BM * (D + 8) + 2 * BN * (D + 8) + 2 * BN * (DV + 8)) * 2;
}

struct BsaFwdParams {
  const void* q;  // [B, H_q, S_q, D] (any layout: strides)
  const void* k;  // [B, H_kv, S_kv, D]
  const void* v;  // [B, H_kv, S_kv, D_v]
  void* o;        // [B, H_q, S_q, D_v], q's dtype (kv_splits = 1)
  float* lse;     // [B, H_q, S_q] natural log, null when absent
  long long q_sb, q_sh, q_ss;
  long long k_sb, k_sh, k_ss;
  long long v_sb, v_sh, v_ss;
  long long o_sb, o_sh, o_ss;
  long long lse_sb, lse_sh, lse_ss;
  const int* index;  // q2k_block_index [B, H_q, N_q, K_max]
  long long idx_sb, idx_sh, idx_sm, idx_su;
  const int* nums;   // q2k_block_nums [B, H_q, N_q] (variable counts)
  long long nums_sb, nums_sh, nums_sm;
  const int* bsz;    // block_sizes [N_kv] | [B, N_kv] | [B, H_q, N_kv]
  long long bsz_sb, bsz_sh, bsz_sk;  // strides of the axes the rank has (others unused)
  float* part_o;     // kv_splits > 1: [splits, B, H_q, S_q, D_v] fp32, normalised per split
  float* part_lse;   // kv_splits > 1: [splits, B, H_q, S_q] fp32 natural log (-inf: empty split)
  int batch, h_q, group, s_q, s_kv, n_q, n_kv, k_max;
  int fixed_count;   // block_sparse_num (fixed counts)
  int splits;        // kv_splits (1 without splitting)
  float scale_log2;  // scale * log2(e)
};

}  // namespace attnjit::kernels
