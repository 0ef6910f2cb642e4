// Launch parameters and shared-memory budget of paged_decode_hopper (paged/paged_decode_hopper.cuh), shared
// by the host planner and the device code.
#pragma once
#include "dense/gqa_fwd_params.cuh"

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define ATTNJIT_PDH_HD __host__ __device__
#else
#define ATTNJIT_PDH_HD
#endif

namespace attnjit::kernels {

// k_map / v_map: 4-d TMA maps of the pools (D, slot, KV head, page; strides in that order need not grow)
// with boxes of 64 columns x 16 slots x H_kv heads, 128-byte swizzle: a box lands as [head][slot][64].
struct alignas(64) PagedDecodeHopperParams {
  unsigned long long k_map[16];
  unsigned long long v_map[16];
  GqaFwdParams p;  // the split-KV decode fields of the portable path (o_part, lse_part, n_splits, ...)
};

constexpr int kPdhConsumerWarps = 8;                       // each owns (KV head, 16-key chunk) of a stage
constexpr int kPdhThreads = (kPdhConsumerWarps + 1) * 32;  // + one producer warp
constexpr int kPdhChunk = 16;                              // keys per TMA box (one page holds whole chunks)
constexpr int kPdhRows = 16;                               // (query, head of the group) rows per CTA

// One stage: the 8 warps' chunks of K and of V, for all H_kv heads: 8 x 16 x D x 2 bytes each
// (the warps cover H_kv heads x 8 / H_kv chunks).
ATTNJIT_PDH_HD constexpr int pdh_stage_bytes(int D) { return 2 * kPdhConsumerWarps * kPdhChunk * D * 2; }
ATTNJIT_PDH_HD constexpr int pdh_stages(int D) { return D == 64 ? 6 : 3; }
// Stages, their full/empty barriers, and 1024 bytes of alignment slack.
ATTNJIT_PDH_HD constexpr int pdh_smem_bytes(int D) { return pdh_stages(D) * pdh_stage_bytes(D) + 2 * 8 * 8 + 1024; }

}  // namespace attnjit::kernels
