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

// One stage: the 8 warps' chunks of K or of V (a "half": K and V of a stage sit in separate slots of
// the ring, each with its own barriers, so the consumers free K's slot before they use V), for all
// H_kv heads: 8 x 16 x D x 2 bytes (the warps cover H_kv heads x 8 / H_kv chunks).
ATTNJIT_PDH_HD constexpr int pdh_half_bytes(int D) { return kPdhConsumerWarps * kPdhChunk * D * 2; }
// Ring slots (halves): 3 x 32 KB at D 128, 6 x 16 KB at D 64. Fewer bytes in flight stream faster here:
// at D 128, 4 / 6 / 7 halves and the joint 3 x 64 KB ring were 0.7-3.4% slower at B1 x 128k (docs/tuning/paged-attention.md).
ATTNJIT_PDH_HD constexpr int pdh_halves(int D) { return D == 64 ? 6 : 3; }
// The slots, their full/empty barriers, and 1024 bytes of alignment slack.
ATTNJIT_PDH_HD constexpr int pdh_smem_bytes(int D) { return pdh_halves(D) * pdh_half_bytes(D) + 2 * 8 * pdh_halves(D) + 1024; }

}  // namespace attnjit::kernels
