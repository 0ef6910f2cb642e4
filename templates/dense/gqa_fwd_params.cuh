// Launch parameters of the gqa_fwd / gqa_varlen_fwd kernels, shared by the host planner and the device
// code (plain types only). Strides are in elements.
#pragma once
#include "common/host_device.cuh"

namespace attnjit::kernels {

// Geometry of a gqa_fwd CTA (GqaFwdConfig static_asserts its layout against these). Threads: WARPS
// warps. Dynamic shared memory: Q, double-buffered K and V, plus with RoPE the low parts of the rotated
// Q and (double-buffered) K; 16-bit rows of D elements (swizzled) when D % 128 == 0, else D + 8.
ATTNJIT_HD constexpr int gqa_fwd_threads(int warps) { return warps * 32; }
ATTNJIT_HD constexpr int gqa_fwd_smem_bytes(int D, int BM, int BN, bool rope) {
  return (BM + 4 * BN + (rope ? BM + 2 * BN : 0)) * (D % 128 == 0 ? D : D + 8) * 2;
}

struct GqaFwdParams {
  const void* q;  // dense [B, S_q, H, D]; varlen [T_q, H, D]
  const void* k;  // dense [B, S_kv, H_kv, D]; varlen [T_kv, H_kv, D]; paged: the pool
  const void* v;
  void* o;        // like q, compute dtype
  float* lse;     // dense [B, H, S_q]; varlen [T_q, H]; null when absent
  long long q_sb, q_ss, q_sh;  // batch (dense), token, head strides
  long long k_sb, k_ss, k_sh;
  long long v_sb, v_ss, v_sh;
  long long o_sb, o_ss, o_sh;
  long long lse_sb, lse_sh, lse_ss;
  const float* q_scale;  // [B, H_kv] e4m3 dequantisation scales (null for 16-bit input)
  const float* k_scale;
  const float* v_scale;
  long long qsc_sb, qsc_sr, ksc_sb, ksc_sr, vsc_sb, vsc_sr;
  const void* rope_cos;  // [P, R/2] compute dtype
  const void* rope_sin;
  long long cos_sp, cos_sc, sin_sp, sin_sc;
  const float* sinks;  // [H] (varlen)
  long long sinks_s;
  const int* cu_q;   // [B + 1] (packed queries)
  const int* cu_kv;  // [B + 1] (packed keys)
  const int* page_table;  // [B, W] (paged keys): pool page of each logical page
  long long pt_sb, pt_sp;
  const int* kv_lens;     // [B] (paged keys): keys of each request
  long long kv_lens_s;
  long long k_sp, v_sp;   // pool page strides (paged keys; k_ss / v_ss are then the slot strides)
  int page_size;
  int batch;         // B (dense) or requests (varlen)
  int s_q, s_kv;     // dense lengths
  int h_kv;          // KV heads
  int group;         // H / H_kv
  int rotary_dim;    // R (rope)
  int window_left, window_right;  // -1: unlimited
  float scale_log2;  // sm_scale * log2(e)
  float softcap;     // c (softcap kernels)
  float softcap_inv_scale;  // sm_scale / c
  float softcap_log2;       // c * log2(e)
  // Split-KV (SPLIT kernels): CTA z-index s of n_splits takes the s-th of n_splits equal runs of its key
  // tiles and writes its normalised fp32 partial output and log2-domain LSE (-inf: no key) here; the
  // combine kernel (dense/gqa_combine.cuh) merges them. Partial row index: token * H + head, with
  // token = packed token (q_packed) or b * s_q + i.
  float* o_part;        // [n_splits, part_rows, D]
  float* lse_part;      // [n_splits, part_rows]
  long long part_rows;  // T_q * H or B * s_q * H
  int n_splits;
  // Paged-append keys (KV mode 3): keys j < kv_lens[b] are pool rows (page table, as paged mode), keys
  // j >= kv_lens[b] are the request's new rows k_new/v_new [T, H_kv, D] (compute dtype, packed like q).
  // An e4m3 pool row is dequantised on load as rnd(decode(x) * k_scale[0]) (v: v_scale[0]).
  const void* k_new;
  const void* v_new;
  long long kn_ss, kn_sh, vn_ss, vn_sh;
  // Compressed keys (KV mode 4, nsa_compressed_fwd): tokens per chunk; query i sees chunks c < (i + 1) / cmp_bs.
  int cmp_bs;
};

}  // namespace attnjit::kernels
