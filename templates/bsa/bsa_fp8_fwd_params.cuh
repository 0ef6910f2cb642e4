// Launch parameters of the bsa_fp8_fwd kernels (templates/bsa/bsa_fp8_fwd.cuh): the quantisation
// pre-pass and the attention kernel share one struct (plain types only, host and device). The inputs
// are bf16 BHSD (class C); the quantised operands and their scales live in the plan's workspace.
#pragma once

namespace attnjit::kernels {

constexpr int kBsa8StatKeys = 256;    // keys per pre-pass statistics chunk (K sum, V max)
constexpr int kBsa8Threads = 64;      // attention CTA: 2 warps of 32 query rows (one 64-row query block)
constexpr int kBsa8SmemBytes = 38928; // attention dynamic shared memory (Bsa8Cfg::kSmemBytes)

struct BsaFp8Params {
  const void* q;  // [B, H, S_q, 128] bf16
  const void* k;  // [B, H, S_kv, 128] bf16
  const void* v;  // [B, H, S_kv, 128] bf16
  void* o;        // [B, H, S_q, 128] bf16
  long long q_sb, q_sh, q_ss;
  long long k_sb, k_sh, k_ss;
  long long v_sb, v_sh, v_ss;
  long long o_sb, o_sh, o_ss;
  const int* index;  // q2k_block_index [B, H, N_q, K_max]
  long long idx_sb, idx_sh, idx_sm, idx_su;
  const int* nums;   // q2k_block_nums [B, H, N_q] (variable counts)
  long long nums_sb, nums_sh, nums_sm;
  const int* bsz;    // block_sizes [N_kv] | [B, N_kv] | [B, H, N_kv]
  long long bsz_sb, bsz_sh, bsz_sk;
  int batch, heads, s_q, s_kv, n_q, n_kv, k_max;
  int fixed_count;   // block_sparse_num (fixed counts)
  int n_groups;      // ceil(S_kv / 16): K scale groups
  int s_kv_pad;      // S_kv rounded up to 16: row length of v8t
  int n_chunks;      // ceil(S_kv / kBsa8StatKeys)
  float scale_log2;  // scale * log2(e)
  // Workspace (device addresses inside the plan's buffer).
  unsigned char* q8;   // [B, H, S_q, 128] e4m3 codes
  unsigned char* k8;   // [B, H, S_kv, 128] e4m3 codes of k - mu
  unsigned char* v8t;  // [B, H, 128, s_kv_pad] e4m3 codes, keys contiguous, permuted per 16-key group (portable)
  unsigned short* v16; // [B, H, S_kv, 128] the same codes' values as fp16 bits (hopper)
  float* sq;           // [B, H, S_q]
  float* sk;           // [B, H, n_groups]
  float* sv;           // [H, 128]
  float* mu;           // [B, H, 128]
  double* ksum;        // [B, H, n_chunks, 128] partial key sums
  float* vmax;         // [B, H, n_chunks, 128] partial max |v|
};

}  // namespace attnjit::kernels
