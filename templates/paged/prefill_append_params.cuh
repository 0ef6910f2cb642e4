// Launch parameters of the gqa_prefill_paged_append append kernel (paged/prefill_append.cuh), shared
// by host and device. Strides in elements.
#pragma once

namespace attnjit::kernels {

struct PrefillAppendParams {
  const void* q;       // [T_q, H, D]
  const void* k_new;   // [T_q, H_kv, D]
  const void* v_new;
  long long q_ss, q_sh, kn_ss, kn_sh, vn_ss, vn_sh;
  void* k_pages;       // [PT, H_kv, D], contiguous
  void* v_pages;
  const float* k_scale;  // [1] (e4m3 cache)
  const float* v_scale;
  const int* cu_q;       // [B + 1]
  const int* cache_seqlens;  // [B], length before the append
  long long cs_s;
  const int* block_table;    // [B, W]
  long long bt_sb, bt_sp;
  void* q_rot;   // fuse_rope: rotated q [T_q, H, D] and k [T_q, H_kv, D], contiguous, q's dtype
  void* k_rot;
  int batch, heads, h_kv, page_size, rotary_dim;
  float rope_base;
};

}  // namespace attnjit::kernels
