// Launch parameters of the hopper gqa_fwd / gqa_varlen_fwd kernel: the portable kernel's parameters plus
// the TMA maps of K and V (4-d: D, KV head, key row, batch; 64-column boxes of BN rows, 128-byte swizzle).
#pragma once
#include "dense/gqa_fwd_params.cuh"
#include "hopper/ring_params.cuh"

namespace attnjit::kernels {

// A CTA: nwg consumer warpgroups of 64 query rows (BM = 64 nwg) and the producer warpgroup, on
// HopperRing<D, BN, nwg>.
ATTNJIT_HD constexpr int gqa_fwd_hopper_threads(int nwg) { return hopper_ring_threads(nwg); }
ATTNJIT_HD constexpr int gqa_fwd_hopper_smem_bytes(int D, int BN, int nwg) { return hopper_ring_smem_bytes(D, BN, nwg); }
// Registers a thread of a consumer / producer warpgroup keeps after setmaxnreg: multiples of 8, the CTA's
// total within the SM's 64K, at most 240 a consumer. The paged producer (cp.async over all 128 threads)
// needs more than TMA's one issuing thread.
ATTNJIT_HD constexpr int gqa_fwd_hopper_producer_regs(bool paged) { return paged ? 40 : 24; }
ATTNJIT_HD constexpr int gqa_fwd_hopper_consumer_regs(int nwg, bool paged) {
  const int fit = (65536 - 128 * gqa_fwd_hopper_producer_regs(paged)) / (128 * nwg) / 8 * 8;
  return fit < 240 ? fit : 240;
}

// The persistent kernel's static work order with dense queries (gqa_fwd_hopper_work): work tile `index`
// (< tiles * pairs) as query tile `tile` of (batch, KV head) pair `pair` = b * H_kv + r. Causal: the pairs
// in sections of section_pairs (0 or >= pairs: one section), one section after the other; within a
// section the query tiles from the last, the section's pairs of one query tile next to each other.
// Otherwise query tile fastest, then the pair (the one-tile grid's order).
struct GqaFwdHopperTile {
  int pair, tile;
};
ATTNJIT_HD constexpr GqaFwdHopperTile gqa_fwd_hopper_dense_tile(int index, int tiles, int pairs, int section_pairs,
                                                                bool causal) {
  if (!causal) return {index / tiles, index % tiles};
  const int per = section_pairs > 0 && section_pairs < pairs ? section_pairs : pairs;
  const int section = index / (per * tiles);
  const int rest = pairs - section * per;
  const int in_section = rest < per ? rest : per;  // the last section may hold fewer
  const int l = index - section * per * tiles;
  const int level = l / in_section;
  return {section * per + (l - level * in_section), tiles - 1 - level};
}

struct alignas(64) GqaFwdHopperParams {
  unsigned long long k_map[16];  // CUtensorMap bytes
  unsigned long long v_map[16];
  GqaFwdParams p;
  // The persistent kernel with dense keys and a causal mask: (batch, KV head) pairs per section of its
  // work order (gqa_fwd_hopper_work), so that a section's K and V stay in L2; 0: all pairs in one section.
  int section_pairs;
  // Q as a 4-d map (D, head, query row, batch) whose boxes are one warpgroup's 64 packed rows: 64 columns
  // x min(g, 64) heads x 64 / min(g, 64) rows. q_tma: the Q_TMA kernel's producer loads Q with it (set
  // where g divides 64 or 64 divides g and q is a TMA source); 0: the consumers copy Q rows (cp.async).
  // Last, so that the other kernels' parameter offsets stay where they were.
  alignas(64) unsigned long long q_map[16];
  int q_tma;
};

}  // namespace attnjit::kernels
