// Launch parameters of the nsa_selected_fwd kernel (nsa/nsa_selected_fwd.cuh), shared by the host planner
// (src/ops/nsa/nsa_selected_kernel.cpp) and the device code (plain types only). Strides are in elements
// along the logical axes; the innermost stride of q, k, v and o is 1.
#pragma once
#include "common/host_device.cuh"

namespace attnjit::kernels {

// Geometry: a CTA takes the query rows of one (token, KV head) pair, WARPS row groups of 16 (the group
// size g when g <= 64, else tiles of 64 rows), and streams key tiles of BN slots through a STAGES-deep
// cp.async ring of K and V tiles.
ATTNJIT_HD constexpr int nsa_selected_warps(long long group) { return group >= 64 ? 4 : static_cast<int>(group / 16); }
ATTNJIT_HD constexpr int nsa_selected_smem_bytes(int d, int warps, int bn, int stages) {
  return (16 * warps + 2 * stages * bn) * d * 2  // Q, the K and V rings (16-bit)
         + stages * bn * 4;                      // slot validity flags
}
// Threads: warps row groups, each on ksplit warps that split the key tiles.
ATTNJIT_HD constexpr int nsa_selected_threads(int warps, int ksplit) { return warps * ksplit * 32; }
// The key-split merge reuses Q's tile and the rings: (ksplit - 1) warps of each row group leave m, l and O
// per lane.
ATTNJIT_HD constexpr int nsa_selected_merge_bytes(int d, int warps, int ksplit) {
  return (ksplit - 1) * warps * 32 * (4 + d / 2) * 4;
}

// The hopper kernel (nsa/nsa_selected_fwd_hopper.cuh): one warpgroup a CTA over NH heads (the group when
// g <= 64, else tiles of 64), key tiles of 64 slots (wgmma's M), a STAGES-deep ring of K and V tiles in
// 64-column panels, and the first kNsaSelHopperIdxCap listed blocks of the token kept in shared memory.
constexpr int kNsaSelHopperSlots = 64;
constexpr int kNsaSelHopperIdxCap = 128;
constexpr int kNsaSelHopperThreads = 128;  // one warpgroup
ATTNJIT_HD constexpr int nsa_selected_hopper_smem_bytes(int d, int nh, int stages) {
  return 1024                                                         // alignment slack (1024-byte panels)
         + (2 * stages * kNsaSelHopperSlots * d + nh * d + nh * kNsaSelHopperSlots) * 2  // K, V rings, Q, P^T
         + (stages * kNsaSelHopperSlots + 4 * nh + kNsaSelHopperIdxCap) * 4;          // validity, maxima, block list
}

struct NsaSelectedParams {
  const void* q;  // [T, H, D]
  long long q_st, q_sh;
  const void* k;  // [T, H_kv, D]
  long long k_st, k_sh;
  const void* v;  // [T, H_kv, D]
  long long v_st, v_sh;
  void* o;  // [T, H, D]
  long long o_st, o_sh;
  const int* block_indices;  // [T, H_kv, SEL], request-local block ids
  long long bi_st, bi_sh, bi_su;
  const int* block_counts;  // [T, H_kv]
  long long bc_st, bc_sh;
  const int* offsets;        // [N + 1], contiguous
  const int* token_indices;  // [T, 2]: (request, position)
  long long ti_st, ti_sc;
  int T, n_req, h_kv, group, sel;
  int block_size;
  int causal;
  int m_tiles;       // row tiles per (token, KV head): ceil(group / (16 WARPS)); hopper: ceil(group / NH)
  float scale_log2;  // logit scale * log2(e)
};

}  // namespace attnjit::kernels
