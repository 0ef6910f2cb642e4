// Launch parameters of topk_select, shared by the host planner and the device kernel (plain types
// only). Strides are in elements.
#pragma once

namespace attnjit::kernels {

constexpr int kTopkSelectThreads = 512;
constexpr int kTopkSelectBins = 2048;  // 11-bit digits (the last digit has 10 bits)

struct TopkSelectParams {
  const float* score;     // [B, S, S_kv, G] fp32, contiguous
  const int* starts;      // [B, S] int32 (window start; may be broadcast with stride 0), or unused
  const int* ends;        // [B, S] int32 (window end, exclusive)
  int* indexes;           // [B, S, G, topk] int32, contiguous
  long long st_sb, st_ss, en_sb, en_ss;
  long long rows;         // B * S * G
  int S, S_kv, G, topk;
  int cache_cap;          // window elements kept in shared memory as ordered keys (0: rows read from global)
  int cand_cap;           // candidates of the threshold bin kept in shared memory
};

#ifndef __CUDACC_RTC__
// Dynamic shared memory of one CTA: histogram, scalars (8 counters, 16 warp sums), row cache, candidate
// keys and offsets.
constexpr int topk_select_smem_bytes(int cache_cap, int cand_cap) {
  return kTopkSelectBins * 4 + 128 + cache_cap * 4 + cand_cap * 8;
}
#endif

}  // namespace attnjit::kernels
