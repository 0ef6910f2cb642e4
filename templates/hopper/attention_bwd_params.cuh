// Launch parameters of the hopper attention backward main kernels (templates/hopper/attention_bwd.cuh,
// serving bsa_bwd and gqa_bwd): the portable backward's parameters (the prep and dq kernels, and
// bsa_bwd's route and scan, are shared) plus the TMA maps of
// K and V (4-d: D, KV head, key row, batch; boxes of 64 columns by BS rows) and of Q and dO (D, query
// head, query row, batch; boxes of 64 columns by 64 rows), all with the 128-byte swizzle.
#pragma once
#include "common/attention_bwd_params.cuh"

namespace attnjit::kernels {

struct alignas(64) AttnBwdHopperParams {
  unsigned long long k_map[16];  // CUtensorMap bytes
  unsigned long long v_map[16];
  unsigned long long q_map[16];
  unsigned long long do_map[16];
  unsigned long long dq_map[16];  // fp32 dq_acc as 2-d (D, B * H_q * s_pad rows), boxes of 32 columns x 64 rows
  AttnBwdParams p;
};

// Shared-memory layout of the hopper main kernel <T, D, BS> (bytes; every tile 1024-byte aligned): K and V of the
// key block (BS keys), a ring of (Q, dO, lse2, delta) stages for 64 query rows (two), dS^T buffers ([BS keys][64 rows]
// 16-bit; two when two consumer warpgroups share them), at block size 128 the dQ staging tiles (two at D = 128, three
// at D = 64) that the dQ-writer warp adds to dq_acc with one TMA reduce-add per 32-column box while the consumers
// fill another ([64 rows][D] fp32 in 32-column 128-byte-swizzled boxes, one partial per consumer warpgroup when they
// split the keys, D = 64),
// and alignment slack. The mbarriers (K/V, full and empty per stage, dQ full and empty per staging tile) live in
// the unused tail of stage 0 (after lse2 and delta), which keeps D = 128 at exactly the 227 KB a CTA may have.
// D = 256 splits D instead of the keys (split_d(): attn_bwd_hopper_split_body): two consumer warpgroups over one
// block of 64 keys, and P^T beside dS^T in shared memory, both double-buffered (four [64 keys][64 rows] buffers):
// 227 KB as well.
struct AttnBwdHopperLayout {
  int D, BS;
  ATTNJIT_ATTN_BWD_HD constexpr bool split_d() const { return D == 256; }
  ATTNJIT_ATTN_BWD_HD constexpr int consumer_warpgroups() const { return split_d() ? 2 : BS / 64; }
  ATTNJIT_ATTN_BWD_HD constexpr int threads() const { return (consumer_warpgroups() + 1) * 128; }
  ATTNJIT_ATTN_BWD_HD constexpr int kv_bytes() const { return BS * D * 2; }
  ATTNJIT_ATTN_BWD_HD constexpr int rows_bytes() const { return 64 * D * 2; }
  ATTNJIT_ATTN_BWD_HD constexpr int stages() const { return 2; }
  ATTNJIT_ATTN_BWD_HD constexpr bool dq_tma() const { return BS == 128; }
  ATTNJIT_ATTN_BWD_HD constexpr int dq_partials() const { return D / 64 >= BS / 64 ? 1 : BS / 64; }
  ATTNJIT_ATTN_BWD_HD constexpr int dq_tile_bytes() const { return dq_partials() * 64 * D * 4; }
  ATTNJIT_ATTN_BWD_HD constexpr int dq_tiles() const { return dq_tma() ? (D == 64 ? 3 : 2) : 0; }
  ATTNJIT_ATTN_BWD_HD constexpr int stage_bytes() const { return 2 * rows_bytes() + 1024; }  // + lse2, delta, padding
  ATTNJIT_ATTN_BWD_HD constexpr int ds_bytes() const { return BS * 128; }
  ATTNJIT_ATTN_BWD_HD constexpr int ds_buffers() const { return split_d() ? 4 : BS == 128 ? 2 : 1; }
  // Stage 0's tail past lse2 and delta (512 bytes): room for 64 barriers.
  ATTNJIT_ATTN_BWD_HD constexpr int bar_offset() const { return 2 * kv_bytes() + 2 * rows_bytes() + 512; }
  ATTNJIT_ATTN_BWD_HD constexpr int smem_bytes() const {
    return 2 * kv_bytes() + stages() * stage_bytes() + ds_buffers() * ds_bytes() + dq_tiles() * dq_tile_bytes() + 1024;
  }
};

}  // namespace attnjit::kernels
