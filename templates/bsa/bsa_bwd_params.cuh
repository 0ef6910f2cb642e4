// Launch parameters of the bsa_bwd kernels (templates/bsa/bsa_bwd.cuh), shared by the host planner and
// the device code (plain types only). Strides are in elements; q-like tensors are addressed through
// (batch, head, sequence) strides whatever the layout, so one kernel serves bhsd and bshd.
#pragma once

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define ATTNJIT_BSA_BWD_HD __host__ __device__
#else
#define ATTNJIT_BSA_BWD_HD
#endif

namespace attnjit::kernels {

struct BsaBwdParams {
  const void* q;     // [B, H, S_q, D] (bhsd) / [B, S_q, H, D] (bshd)
  const void* k;     // [.., H_kv, S_kv, D]
  const void* v;     // [.., H_kv, S_kv, D]
  const void* o;     // q's shape
  const void* dout;  // q's shape ("do")
  void* dq;          // q's shape
  void* dk;          // k's shape
  void* dv;          // v's shape
  const float* lse;  // [B, H, S_q] fp32 natural log
  const int* index;        // q2k_block_index [B, H, N_q, K_max]
  const int* nums;         // q2k_block_nums [B, H, N_q] or null (fixed count)
  const int* block_sizes;  // [N_kv] | [B, N_kv] | [B, H, N_kv] or null
  long long q_sb, q_sh, q_ss;
  long long k_sb, k_sh, k_ss;
  long long v_sb, v_sh, v_ss;
  long long o_sb, o_sh, o_ss;
  long long do_sb, do_sh, do_ss;
  long long dq_sb, dq_sh, dq_ss;
  long long dk_sb, dk_sh, dk_ss;
  long long dv_sb, dv_sh, dv_ss;
  long long lse_sb, lse_sh, lse_ss;
  long long idx_sb, idx_sh, idx_sm, idx_su;
  long long nums_sb, nums_sh, nums_sm;
  long long bsz_s0, bsz_s1, bsz_s2;  // block_sizes strides by rank: [kb] / [b, kb] / [b, h, kb]
  int batch, h_q, h_kv, group;
  int s_q, s_kv, n_q, n_kv, k_max;
  int fixed_count;  // the count of every row without q2k_block_nums
  int bsz_rank;     // block_sizes rank: 0 (absent), 1, 2 or 3
  int s_pad;        // n_q * bs: rows of the per-row scratch
  float scale;      // logit scale (also folded into dq and dk)
  float scale_log2; // scale * log2(e)
  // Plan workspace (bsa_bwd.cpp lays it out):
  float* lse2;       // [B, H, s_pad]: lse * log2(e); +inf for lse = -inf and for padding rows (P = 0)
  float* delta;      // [B, H, s_pad]: sum_d o * do; 0 for padding rows
  float* dq_acc;     // [B, H, s_pad, D] fp32 dq accumulator (unscaled)
  int* counts;       // [B, H_kv, N_kv] query blocks that select each key block (zeroed before the count pass)
  int* offsets;      // [B * H_kv * N_kv + 1] exclusive prefix sums of counts
  int* cursor;       // [B * H_kv * N_kv] fill positions
  int* list;         // entries (head in group) * N_q + query block, grouped by (b, kv head, key block)
};

// Query rows per item of bsa_bwd_main for a sparse block size: 64 (bs 128: half a query block) or 128
// (bs 64: two list entries).
ATTNJIT_BSA_BWD_HD constexpr int bsa_bwd_block_m(int bs) { return bs == 64 ? 128 : 64; }

// Dynamic shared memory of bsa_bwd_main<.., D, BN, BM>: K and V (BN rows), double-buffered Q and dO
// (BM rows), P^T and dS^T (BN x BM, 16-bit), double-buffered lse2 and delta (BM floats each).
ATTNJIT_BSA_BWD_HD constexpr int bsa_bwd_smem_bytes(int D, int BN, int BM) {
  return (2 * BN + 4 * BM) * (D + 8) * 2 + 2 * BN * (BM + 8) * 2 + 4 * BM * 4;
}

}  // namespace attnjit::kernels
