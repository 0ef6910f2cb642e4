// Launch parameters and tile geometry of the lightning_indexer kernel, shared by the host planner and
// the device code (plain types and constexpr arithmetic only).
#pragma once

// The geometry is computed by the host planner (plain C++) and by the kernel (NVRTC's JIT mode needs
// an execution space on every function it compiles).
#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define ATTNJIT_LI_HD __host__ __device__
#else
#define ATTNJIT_LI_HD
#endif

namespace attnjit::kernels {

struct LightningIndexerParams {
  const void* q;        // [B, T, H, D]
  const void* k;        // [B, S, D] (packed: B = 1, documents concatenated)
  const void* weights;  // [B, T, H], any strides
  int* indices;         // [B, T, topk] contiguous
  const int* cu_seqlens;    // [N + 1] (packed only)
  const int* cu_seqlens_k;  // [N + 1] (packed only)
  long long q_sb, q_st, q_sh;
  long long k_sb, k_ss;
  long long w_sb, w_st, w_sh;
  int T, S, H, N;
  int compress_ratio;
  float inv_scale;  // 1 / sqrt(H * D), folded into the weights
};

// Tile geometry for one (head dim, padded head count, topk). The CTA owns R consecutive query tokens
// (R * HP "columns" = (token, head) pairs) and walks the candidate axis in tiles of BN keys; 8 warps
// split the BN x COLS score tile as WGM x WGN warps of WM x WN. Each of the R rows keeps a candidate
// buffer of CAP entries (key, index) in shared memory.
struct LightningIndexerGeometry {
  int DP = 0;       // D rounded up to 16 (zero-padded k16 steps)
  int pitch = 0;    // shared-memory row pitch of Q and K, elements
  int R = 0;        // query tokens per CTA (0: topk too large for the shared-memory buffers)
  int COLS = 0, WN = 0, WGN = 0, WGM = 0, WM = 0, BN = 0;
  int CAP = 0;      // buffer entries per row (topk + slack)
  int q_bytes = 0, k_bytes = 0, part_bytes = 0, hist_bytes = 0, row_bytes = 0, buf_bytes = 0, smem_bytes = 0;
};

constexpr int kLightningIndexerThreads = 256;
constexpr int kLightningIndexerSmemLimit = 227 * 1024;  // sm_80 / sm_90 opt-in maximum per block
constexpr int kLightningIndexerRowInfo = 4;             // ints per row: kbeg, kend, base, flags

ATTNJIT_LI_HD constexpr LightningIndexerGeometry lightning_indexer_geometry(int D, int HP, int topk) {
  LightningIndexerGeometry g{};
  g.DP = (D + 15) / 16 * 16;
  g.pitch = g.DP + 8;
  for (int R = 256 / HP; R >= 1; R /= 2) {
    LightningIndexerGeometry t = g;
    t.R = R;
    t.COLS = R * HP;
    t.WN = t.COLS < 64 ? t.COLS : 64;
    t.WGN = t.COLS / t.WN;
    t.WGM = 8 / t.WGN;
    t.BN = (t.DP <= 128 || t.WGM == 8) ? 128 : 64;
    t.WM = t.BN / t.WGM;
    t.q_bytes = t.COLS * t.pitch * 2;
    t.k_bytes = 2 * t.BN * t.pitch * 2;
    // Partial scores per (warp column block, token), double-buffered: tile i's scores are selected
    // while tile i + 1's MMAs write the other buffer.
    t.part_bytes = 2 * t.WGN * (t.WN >= HP ? t.WN / HP : 1) * t.BN * 4;
    t.hist_bytes = R * 256 * 4;
    t.row_bytes = R * kLightningIndexerRowInfo * 4 + R * 4 * 4;  // row info + count/threshold/state
    const int fixed = t.q_bytes + t.k_bytes + t.part_bytes + t.hist_bytes + t.row_bytes;
    const int avail = kLightningIndexerSmemLimit - fixed;
    // Entries per row: topk plus slack for at least two tiles of arrivals, more when it fits (fewer
    // compactions), capped at topk + 8 tiles.
    int cap = avail > 0 ? avail / (8 * R) : 0;
    cap = cap / 32 * 32;
    const int most = topk + 8 * t.BN;
    if (cap > most) cap = (most + 31) / 32 * 32;
    if (cap >= topk + 2 * t.BN) {
      t.CAP = cap;
      t.buf_bytes = R * cap * 8;
      t.smem_bytes = fixed + t.buf_bytes;
      return t;
    }
  }
  g.R = 0;
  return g;
}

// The padded head count of a kernel: 8, 16, 32, 64, or a multiple of 64 up to 256.
ATTNJIT_LI_HD constexpr int lightning_indexer_head_tile(int H) {
  if (H <= 8) return 8;
  if (H <= 16) return 16;
  if (H <= 32) return 32;
  return (H + 63) / 64 * 64;
}

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
// Token t's candidates (t < T): pool rows [base, base + n), local indices 0..n-1; packed documents are
// found by binary search of cu_seqlens (tokens past the packed end have none). Shared by the fused,
// hopper and slab kernels; P is any of their parameter structs.
template <bool CAUSAL, bool PACKED, typename P>
__device__ __forceinline__ void li_row_candidates(const P& p, int t, int& base, int& n) {
  base = 0;
  n = 0;
  if constexpr (PACKED) {
    const int* cu = p.cu_seqlens;
    if (t < cu[p.N]) {
      int lo = 0, hi = p.N - 1;  // the last document d with cu[d] <= t
      while (lo < hi) {
        const int mid = (lo + hi + 1) >> 1;
        if (cu[mid] <= t) lo = mid;
        else hi = mid - 1;
      }
      base = p.cu_seqlens_k[lo];
      n = CAUSAL ? (t - cu[lo] + 1) / p.compress_ratio : p.cu_seqlens_k[lo + 1] - base;
    }
  } else {
    n = CAUSAL ? (t + 1) / p.compress_ratio : p.S;
  }
}
#endif

}  // namespace attnjit::kernels
