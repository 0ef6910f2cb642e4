// Launch parameters of the attention backward kernels (templates/common/attention_bwd.cuh and the
// hopper body templates/hopper/attention_bwd.cuh), shared by bsa_bwd and gqa_bwd, their host planners
// and the device code (plain types only). Strides are in elements; q-like tensors are addressed through
// (batch, head, sequence) strides whatever the layout, so one kernel serves bhsd and bshd.
#pragma once

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define ATTNJIT_ATTN_BWD_HD __host__ __device__
#else
#define ATTNJIT_ATTN_BWD_HD
#endif

namespace attnjit::kernels {

struct AttnBwdParams {
  const void* q;     // [B, H, S_q, D] (bhsd) / [B, S_q, H, D] (bshd)
  const void* k;     // [.., H_kv, S_kv, D]
  const void* v;     // [.., H_kv, S_kv, D]
  const void* o;     // q's shape
  const void* dout;  // q's shape ("do")
  void* dq;          // q's shape
  void* dk;          // k's shape
  void* dv;          // v's shape
  const float* lse;  // [B, H, S_q] fp32 natural log
  const int* index;        // bsa: q2k_block_index [B, H, N_q, K_max]
  const int* nums;         // bsa: q2k_block_nums [B, H, N_q] or null (fixed count)
  const int* block_sizes;  // bsa: [N_kv] | [B, N_kv] | [B, H, N_kv] or null
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
  int s_q, s_kv;
  int n_q;          // bsa: query blocks; gqa: 64-row query slots per head (ceil(S / 64))
  int n_kv;         // key blocks (CTAs along grid x)
  int k_max;
  int fixed_count;  // bsa: the count of every row without q2k_block_nums
  int bsz_rank;     // bsa: block_sizes rank: 0 (absent), 1, 2 or 3
  int s_pad;        // rows of the per-row scratch per (batch, head)
  float scale;      // logit scale (also folded into dq and dk)
  float scale_log2; // scale * log2(e)
  // Plan workspace (the op's planner lays it out):
  float* lse2;       // [B, H, s_pad]: lse * log2(e); +inf for lse = -inf and for padding rows (P = 0)
  float* delta;      // [B, H, s_pad]: sum_d o * do; 0 for padding rows
  float* dq_acc;     // [B, H, s_pad, DP] fp32 dq accumulator (unscaled; DP = the kernel's compute head dim)
  int* counts;       // bsa: [B, H_kv, N_kv] query blocks that select each key block (zeroed before the count pass)
  int* offsets;      // bsa: [B * H_kv * N_kv + 1] exclusive prefix sums of counts
  int* cursor;       // bsa: [B * H_kv * N_kv] fill positions
  int* list;         // bsa: entries (head in group) * N_q + query block, grouped by (b, kv head, key block)
  int* dq_sem;       // deterministic gqa: [B, H, n_q] dQ slot turn counters (zeroed before the main kernel)
  int window_left;   // gqa, windowed kernels: key j visible to row i needs j >= i - window_left (>= 0; -1: no limit)
  int window_right;  //   ... and j <= i + window_right (>= 0; -1: no limit)
};

// Dynamic shared memory of the portable backward main kernel (BN keys, BM query rows per item, row
// pitch DP + 8): K and V, double-buffered Q and dO, P^T and dS^T (BN x BM, 16-bit), double-buffered
// lse2 and delta (BM floats each).
ATTNJIT_ATTN_BWD_HD constexpr int attn_bwd_smem_bytes(int DP, int BN, int BM) {
  return (2 * BN + 4 * BM) * (DP + 8) * 2 + 2 * BN * (BM + 8) * 2 + 4 * BM * 4;
}

}  // namespace attnjit::kernels
