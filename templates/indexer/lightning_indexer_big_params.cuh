// Launch parameters and geometry of lightning_indexer's two-kernel ("slab") path, shared by the host
// planner and the device code (plain types and constexpr arithmetic only). The path serves every topk the
// fused kernel's shared-memory candidate buffers cannot hold (templates/indexer/lightning_indexer.cuh):
// a score kernel writes the fp32 index scores of a chunk of query rows into a workspace slab, a
// selection kernel picks each row's top-k from it. The host loops over row chunks so the slab stays
// bounded (kLiBigSlabBytes).
#pragma once

namespace attnjit::kernels {

constexpr int kLiBigScoreThreads = 128;          // 4 warps, 32 candidates each
constexpr int kLiBigScoreTileN = 128;            // candidates per K tile
constexpr int kLiBigMaxTokens = 16;              // query tokens per score CTA, at most
constexpr int kLiBigSmemBudget = 96 * 1024;      // score CTA shared-memory target (two CTAs per SM on sm_90)
constexpr int kLiBigSelectThreads = 512;         // = kTopkSelectThreads (the radix select helpers assume it)
constexpr long long kLiBigSlabBytes = 256ll << 20;  // workspace slab, at most (one chunk of rows)

struct LightningIndexerBigParams {
  const void* q;        // [B, T, H, D]
  const void* k;        // [B, S, D] (packed: B = 1, documents concatenated)
  const void* weights;  // [B, T, H], any strides
  int* indices;         // [B, T, topk] contiguous
  const int* cu_seqlens;    // [N + 1] (packed only)
  const int* cu_seqlens_k;  // [N + 1] (packed only)
  float* slab;          // [row_end - row_begin, slab_pitch] fp32: row r's score of local candidate s at [r][s]
  long long q_sb, q_st, q_sh;
  long long k_sb, k_ss;
  long long w_sb, w_st, w_sh;
  long long row_begin, row_end;  // this chunk: flattened rows b * T + t in [row_begin, row_end)
  long long slab_pitch;          // floats per slab row: max_cand rounded up to 4 (16-byte aligned rows)
  int T, S, H, N;
  int compress_ratio;
  int topk;
  int max_cand;   // an upper bound of every row's candidate count (S; packed: min(S, T)); counts are clamped to it
  int tokens;     // query tokens per score CTA (LiBigScoreGeometry::tokens)
  float inv_scale;  // 1 / sqrt(H * D), folded into the weights
};

// Shared memory of one score CTA: a K tile [128][pitch], Q of `tokens` tokens [tokens * H8][pitch] (H8 = H
// rounded up to 8, zero heads in the padding), their weights [tokens][H8] fp32 and row info [tokens][2].
struct LiBigScoreGeometry {
  int DP = 0;      // D rounded up to 16 (zero-padded k16 steps)
  int pitch = 0;   // shared-memory row pitch of Q and K, elements (DP + 8: conflict-free ldmatrix)
  int H8 = 0;
  int tokens = 0;
  int k_bytes = 0, q_bytes = 0, w_bytes = 0, row_bytes = 0, smem_bytes = 0;
};

#ifndef __CUDACC_RTC__
// Host only (the kernel gets `tokens` as a launch argument and derives the rest from D and H).
constexpr LiBigScoreGeometry li_big_score_geometry(int D, int H) {
  LiBigScoreGeometry g{};
  g.DP = (D + 15) / 16 * 16;
  g.pitch = g.DP + 8;
  g.H8 = (H + 7) / 8 * 8;
  g.k_bytes = kLiBigScoreTileN * g.pitch * 2;
  const int per_token = g.H8 * g.pitch * 2 + g.H8 * 4 + 2 * 4;
  int tokens = (kLiBigSmemBudget - g.k_bytes) / per_token;
  if (tokens < 1) tokens = 1;  // H = 256, D = 256: 199 KB, still within sm_90's 227 KB
  if (tokens > kLiBigMaxTokens) tokens = kLiBigMaxTokens;
  g.tokens = tokens;
  g.q_bytes = tokens * g.H8 * g.pitch * 2;
  g.w_bytes = tokens * g.H8 * 4;
  g.row_bytes = tokens * 2 * 4;
  g.smem_bytes = g.k_bytes + g.q_bytes + g.w_bytes + g.row_bytes;
  return g;
}
#endif

}  // namespace attnjit::kernels
