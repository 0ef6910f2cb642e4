// Launch parameters of paged_kv_write, shared by the host planner and the device kernel (plain
// types only, so both sides agree on the layout).
#pragma once

namespace attnjit::kernels {

struct PagedKvWriteParams {
  const void* k;                  // [N, H_kv, D] fp16/bf16
  const void* v;                  // [N, H_kv, D] fp16/bf16
  void* k_pages;                  // [NP, PS, H_kv, D] cache dtype
  void* v_pages;                  // [NP, PS, H_kv, D] cache dtype
  const long long* slot_mapping;  // [N] int64; page * PS + offset, or -1
  const float* k_scale;           // [1] fp32 divisor (e4m3 cache only)
  const float* v_scale;           // [1] fp32 divisor (e4m3 cache only)
  long long num_tokens;           // N
  int num_heads;                  // H_kv
  int page_size;                  // PS
  long long slot_stride;          // elements
  long long k_stride_n, k_stride_h, v_stride_n, v_stride_h;  // elements of k's dtype
  long long kp_stride_page, kp_stride_slot, kp_stride_h;     // elements of the cache dtype
  long long vp_stride_page, vp_stride_slot, vp_stride_h;
};

}  // namespace attnjit::kernels
