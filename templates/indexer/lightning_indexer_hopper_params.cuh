// Launch parameters and tile geometry of the hopper lightning_indexer kernel
// (templates/indexer/lightning_indexer_hopper.cuh), shared by the host planner and the device code
// (plain types and constexpr arithmetic only).
#pragma once
#include "indexer/lightning_indexer_params.cuh"

namespace attnjit::kernels {

// The portable kernel's parameters plus the TMA map of k (4-d: D, 1, key row, batch; 64-column boxes of
// kLiHopperBN rows, 128-byte swizzle).
struct alignas(64) LightningIndexerHopperParams {
  unsigned long long k_map[16];  // CUtensorMap bytes
  LightningIndexerParams p;
};

constexpr int kLiHopperBN = 128;            // keys per tile: two consumer warpgroups of 64 keys (m64)
constexpr int kLiHopperConsumers = 256;     // two consumer (score) warpgroups; thread 0 also issues the TMA loads
constexpr int kLiHopperSelectors = 128;     // the selection warpgroup: four warps, rows r = warp, warp + 4, ...
constexpr int kLiHopperThreads = kLiHopperConsumers + kLiHopperSelectors;
constexpr int kLiHopperStages = 2;          // K ring stages
constexpr int kLiHopperSlots = 4;           // score-tile ring between the consumers and the selection warps

// Tile geometry for one (head dim, padded head count, topk). The CTA owns R consecutive query tokens,
// COLS = R * HP (token, head) columns, the N of every wgmma (64, 128 or 256). Each of the R rows keeps a
// candidate buffer of CAP entries (key, index) in shared memory. R = 0: not served (D not 64 / 128, a
// head tile that gives no such COLS (192), or topk too large for the buffers).
struct LightningIndexerHopperGeometry {
  int R = 0, COLS = 0, CAP = 0;
  int q_bytes = 0, k_bytes = 0, part_bytes = 0, w_bytes = 0, hist_bytes = 0, row_bytes = 0, bar_bytes = 0;
  int buf_bytes = 0, smem_bytes = 0;  // smem_bytes includes 1024 bytes of alignment slack
};

ATTNJIT_LI_HD constexpr LightningIndexerHopperGeometry lightning_indexer_hopper_geometry(int D, int HP, int topk) {
  LightningIndexerHopperGeometry g{};
  if ((D != 64 && D != 128) || HP < 8 || HP > 256 || (HP & (HP - 1)) != 0 || topk < 1) return g;
  for (int cols = 256; cols >= 64; cols /= 2) {
    if (cols < HP) break;
    LightningIndexerHopperGeometry t{};
    t.R = cols / HP;
    t.COLS = cols;
    t.q_bytes = cols * D * 2;
    t.k_bytes = kLiHopperStages * kLiHopperBN * D * 2;
    t.part_bytes = kLiHopperSlots * t.R * kLiHopperBN * 4;
    t.w_bytes = cols * 4;
    t.hist_bytes = t.R * 256 * 4;
    t.row_bytes = t.R * kLightningIndexerRowInfo * 4;
    t.bar_bytes = 2 * (kLiHopperStages + kLiHopperSlots) * 8;
    const int fixed = 1024 + t.q_bytes + t.k_bytes + t.part_bytes + t.w_bytes + t.hist_bytes + t.row_bytes + t.bar_bytes;
    const int avail = kLightningIndexerSmemLimit - fixed;
    // Entries per row: topk plus slack for at least two tiles of arrivals, more when it fits (fewer
    // trims), capped at topk + 8 tiles (as the portable kernel).
    int cap = avail > 0 ? avail / (8 * t.R) : 0;
    cap = cap / 32 * 32;
    const int most = topk + 8 * kLiHopperBN;
    if (cap > most) cap = (most + 31) / 32 * 32;
    if (cap >= topk + 2 * kLiHopperBN) {
      t.CAP = cap;
      t.buf_bytes = t.R * cap * 8;
      t.smem_bytes = fixed + t.buf_bytes;
      return t;
    }
  }
  return g;
}

}  // namespace attnjit::kernels
