// Launch parameters of fp8_lightning_indexer, shared by the host planner and the device kernels (plain
// types only, so both sides agree on the layout). Strides are in elements.
#pragma once

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define ATTNJIT_FP8_INDEXER_HD __host__ __device__
#else
#define ATTNJIT_FP8_INDEXER_HD
#endif

namespace attnjit::kernels {

// Tile geometry of the main kernel for head dim D and H/G heads per group, computed the same way by the
// planner (grid, shared memory) and the kernel (its Config). One CTA: BQ queries x BN = 128 keys per
// tile; its MMA columns are the (query, head) pairs, NCOLS = BQ * HP with the head count padded to HP
// (1, 2, 4, or a multiple of 8) so that an n8 MMA tile never splits a query unevenly.
struct Fp8IndexerTiles {
  int HP, BQ, NCOLS, out_pitch, smem_bytes;
};
constexpr int kFp8IndexerBN = 128;
constexpr int kFp8IndexerThreads = 128;
ATTNJIT_FP8_INDEXER_HD constexpr Fp8IndexerTiles fp8_indexer_tiles(int D, int HG) {
  const int HP = HG <= 1 ? 1 : HG <= 2 ? 2 : HG <= 4 ? 4 : (HG + 7) / 8 * 8;
  const int cols_target = D == 64 ? 256 : 128;  // 16 KB of e4m3 queries in shared memory
  const int bq_raw = cols_target / HP;
  const int BQ = bq_raw < 1 ? 1 : bq_raw > 64 ? 64 : bq_raw;
  const int NCOLS = BQ * HP;
  const int out_pitch = kFp8IndexerBN + (HP == 1 ? 4 : 8);  // floats; keeps the staging stores conflict-free
  // queries | keys x2 | kappa x2 | weights | staged logits | windows (lo, hi)
  const int smem = NCOLS * D + 2 * kFp8IndexerBN * D + 2 * kFp8IndexerBN * 4 + NCOLS * 4 + BQ * out_pitch * 4 + 2 * BQ * 4;
  return {HP, BQ, NCOLS, out_pitch, smem};
}

// The main kernel: logits over FP8 operands.
struct Fp8IndexerParams {
  const void* q;          // [B, S, H, D] bf16 (quantised to e4m3 on load) or e4m3
  const void* k;          // [B, S_kv, G, D] e4m3 (a bf16 call: the pre-pass's copy in the plan workspace)
  const float* kappa;     // [B, S_kv, G] per-key-row factor (bf16: sigma; e4m3: index_k_scale); unused without
  const float* weights;   // [S, H] fp32
  const int* ks;          // [S] window starts
  const int* ke;          // [S] window ends (exclusive)
  float* logits;          // [B, S, S_kv, G] fp32, contiguous
  long long q_sb, q_ss, q_sh;
  long long k_sb, k_st, k_sg;
  long long kap_sb, kap_st, kap_sg;
  long long w_ss, w_sh;
  long long ks_s, ke_s;
  int B, S, S_kv, G;
  int chunk_tiles;        // key tiles of BN keys per CTA (grid y = key chunks)
};

// The bf16 pre-pass: per key row sigma = max(amax, 1e-4) / 448, k8 = e4m3(k / sigma), kappa = sigma.
struct Fp8IndexerQuantParams {
  const void* k;          // [B, S_kv, G, D] bf16
  unsigned char* k8;      // [B, S_kv, G, D] e4m3, contiguous (plan workspace)
  float* kappa;           // [B, S_kv, G] fp32, contiguous (plan workspace)
  long long k_sb, k_st, k_sg;
  long long rows;         // B * S_kv * G
  int S_kv, G;
};

}  // namespace attnjit::kernels
