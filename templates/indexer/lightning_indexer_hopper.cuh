// lightning_indexer, hopper backend (sm_90a; SPEC.md §2.1): the portable fused kernel
// (indexer/lightning_indexer.cuh) with its score GEMM on warpgroup MMAs (wgmma) and its K tiles loaded by
// TMA into a two-stage, 128-byte-swizzled ring by a producer warp.
//
// Roles (384 threads, one CTA per SM):
//   warps 0-7  two consumer warpgroups. Per 128-key tile, warpgroup wg computes the scores of keys
//              [64 wg, 64 wg + 64) against all COLS (token, head) columns: S = K_tile Q^T, A = K rows
//              (K-major, from the ring), B = Q (K-major, loaded once), fp32 accumulators in registers.
//              For COLS = 256 with whole tokens per half (HP <= 128) the product runs as two n128 groups,
//              and the epilogue of the first half overlaps the MMAs of the second.
//   warps 8-11 the producer warpgroup (24 registers after setmaxnreg): one thread issues the TMA loads of each tile (D / 64 boxes of 64 columns x
//              128 rows) after the consumers released the stage (empty mbarrier, one arrival per
//              consumer warp); tile bytes complete on the stage's full mbarrier.
// The accumulator of m64nNk16 has, per warp, exactly the mma.sync m16n8 C layout, so the epilogue is the
// portable kernel's: relu, the per-head weight (1 / sqrt(H * D) folded in), the head sum of each token
// in the same fixed order (in-thread over the token's n8 tiles, quad shuffles xor 1 then 2, then the
// 64-column head groups in order), written to a [2][R][BN] partial-score tile in shared memory.
// Selection is the portable kernel's, unchanged (its helpers are reused from lightning_indexer.cuh):
// per row a buffer of CAP (key, index) entries, the row's warp appends each tile's candidates above
// the row's threshold in index order, trims (li_trim_row / li_compact_row) when it could overflow, and
// the final exact select writes the deterministic top-k in ascending index order; rows with |C| <= topk
// are written 0..|C|-1, -1... without scoring. Per tile and warp:
//   wait for the tile -> issue its wgmma (async) -> append tile it - 1's candidates (overlaps the MMAs)
//   -> wait, release the stage, epilogue into partial buffer it % 2 -> trims -> barrier (256 threads).
// Row r's selection runs on warp r * (8 / R) for R < 8 (spread over both warpgroups), else r % 8.
//
// Budget (H 64 -> HP 64, D 128, topk 2048: R 4, COLS 256, two n128 halves):
//   shared memory: Q 256 x 128 x 2 = 64 KB, K ring 2 x 128 x 128 x 2 = 64 KB, partial scores
//   2 x 4 x 128 x 4 = 4 KB, weights 1 KB, histograms 4 x 1 KB, row info and barriers < 0.1 KB, 1 KB of
//   alignment slack; the candidate buffers take the rest of the 227 KB: CAP 2816 entries per row (R x CAP
//   x 8 = 88 KB; the portable kernel has 2624), 231520 B (226.1 KB) in all (lightning_indexer_hopper_geometry).
//   registers: consumers 240 after setmaxnreg (producer 24; 256 x 240 + 128 x 24 <= 64 K); a consumer
//   holds COLS / 2 = 128 fp32 accumulators, the weights are read from shared memory in the epilogue
//   (a float2 per n8 tile), the selection state is a few registers per row of the warp.
// Served: fp16 / bf16, D 64 or 128, HP 8..256 except 192 (COLS = R * HP must be 64, 128 or 256), topk up to
// what the buffers hold; the planner refuses the rest for backend 'hopper'.
#pragma once
#include "hopper/sm90.cuh"
#include "indexer/lightning_indexer.cuh"
#include "indexer/lightning_indexer_hopper_params.cuh"

namespace attnjit::kernels {

template <typename T_, int D_, int HP_, int TOPK_, bool CAUSAL_, bool PACKED_>
struct LightningIndexerHopperConfig {
  using T = T_;
  static constexpr int D = D_, HP = HP_, TOPK = TOPK_;
  static constexpr bool kCausal = CAUSAL_, kPacked = PACKED_;
  static constexpr LightningIndexerHopperGeometry G = lightning_indexer_hopper_geometry(D, HP, TOPK);
  static_assert(sizeof(T) == 2, "lightning_indexer_hopper: q, k and weights are 16-bit");
  static_assert(D == 64 || D == 128, "lightning_indexer_hopper: D is 64 or 128");
  static_assert(HP == 8 || HP == 16 || HP == 32 || HP == 64 || HP == 128 || HP == 256,
                "lightning_indexer_hopper: head tile 8, 16, 32, 64, 128 or 256");
  static_assert(TOPK >= 1, "lightning_indexer_hopper: topk = 0 launches nothing");
  static_assert(G.R >= 1, "lightning_indexer_hopper: topk too large for the shared-memory candidate buffers");
  static constexpr int R = G.R, COLS = G.COLS, CAP = G.CAP, BN = kLiHopperBN;
  static_assert(COLS == 64 || COLS == 128 || COLS == 256, "lightning_indexer_hopper: COLS is 64, 128 or 256");
  static_assert(G.smem_bytes <= kLightningIndexerSmemLimit, "lightning_indexer_hopper: shared memory");
  static constexpr int kDB = D / 64;              // 64-column blocks of Q and K
  static constexpr int kKS = D / 16;              // k16 steps
  static constexpr int kStageBytes = BN * D * 2;  // one K tile
  // Column halves: two n128 groups for COLS = 256 with whole tokens in each half, else one nCOLS group.
  static constexpr int kSplit = (COLS == 256 && HP <= 128) ? 2 : 1;
  static constexpr int kNC = COLS / kSplit;            // columns (N) per wgmma group
  static constexpr int kTokPerSplit = kNC / HP;        // tokens per group (HP <= kNC)
  static constexpr int kGroups = HP > 64 ? HP / 64 : 1;  // 64-column head groups per token
  static constexpr int kNTT = (HP > 64 ? 64 : HP) / 8;   // n8 tiles per head group
  static constexpr int kRowsPerWarp = R >= 8 ? R / 8 : 1;
  static constexpr int kRowStride = R >= 8 ? 1 : 8 / R;  // R < 8: row r belongs to warp r * kRowStride
  static_assert(kTokPerSplit >= 1 && kTokPerSplit * kSplit == R, "lightning_indexer_hopper: token split");
  static_assert(kStageBytes % 1024 == 0 && (COLS * 128) % 1024 == 0, "lightning_indexer_hopper: 1024-byte swizzle atoms");
};

template <typename T, int D, int HP, int TOPK, bool CAUSAL, bool PACKED>
__global__ void __launch_bounds__(kLiHopperThreads, 1)
    lightning_indexer_hopper(const __grid_constant__ LightningIndexerHopperParams hp) {
  using Cfg = LightningIndexerHopperConfig<T, D, HP, TOPK, CAUSAL, PACKED>;
  constexpr int R = Cfg::R, BN = Cfg::BN, CAP = Cfg::CAP, COLS = Cfg::COLS, kSplit = Cfg::kSplit, kNC = Cfg::kNC;
  constexpr int kStageBytes = Cfg::kStageBytes, kChunks = D / 8, kRowStride = Cfg::kRowStride;
  const LightningIndexerParams& p = hp.p;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  unsigned char* base = reinterpret_cast<unsigned char*>((reinterpret_cast<unsigned long long>(smem_raw) + 1023) & ~1023ull);
  unsigned char* sQ = base;                                            // [kDB][COLS][128 B], swizzled
  unsigned char* sK = sQ + COLS * D * 2;                               // [2][kDB][BN][128 B], swizzled
  float* sPart = reinterpret_cast<float*>(sK + 2 * kStageBytes);       // [2][R][BN]
  float* sW = sPart + 2 * R * BN;                                      // [COLS]
  unsigned* sHist = reinterpret_cast<unsigned*>(sW + COLS);            // [R][256]
  int* sRow = reinterpret_cast<int*>(sHist + R * 256);                 // [R][4]: base, n
  unsigned long long* sBar = reinterpret_cast<unsigned long long*>(sRow + R * kLightningIndexerRowInfo);  // full[2], empty[2]
  unsigned* sKey = reinterpret_cast<unsigned*>(sBar + 2 * kLiHopperStages);  // [R][CAP]
  int* sIdx = reinterpret_cast<int*>(sKey + R * CAP);                  // [R][CAP]
  const unsigned bar0 = smem_addr(sBar);
  auto full = [&](int s) { return bar0 + 8u * s; };
  auto empty = [&](int s) { return bar0 + 8u * (kLiHopperStages + s); };

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int b = blockIdx.y;
  // NOTE: causal rows grow with t: the longest token blocks are scheduled first (smaller tail).
  const int t0 = (CAUSAL ? static_cast<int>(gridDim.x - 1 - blockIdx.x) : static_cast<int>(blockIdx.x)) * R;
  int* out = p.indices + (static_cast<long long>(b) * p.T + t0) * TOPK;

  // 1. Each row's candidates: pool rows [base, base + n), local indices 0..n-1 (as the portable kernel).
  if (tid < R) {
    const int t = t0 + tid;
    int rbase = 0, n = 0;
    if (t < p.T) {
      if constexpr (PACKED) {
        const int* cu = p.cu_seqlens;
        if (t < cu[p.N]) {
          int lo = 0, hi = p.N - 1;  // the last document d with cu[d] <= t
          while (lo < hi) {
            const int mid = (lo + hi + 1) >> 1;
            if (cu[mid] <= t) lo = mid;
            else hi = mid - 1;
          }
          rbase = p.cu_seqlens_k[lo];
          n = CAUSAL ? (t - cu[lo] + 1) / p.compress_ratio : p.cu_seqlens_k[lo + 1] - rbase;
        }
      } else {
        n = CAUSAL ? (t + 1) / p.compress_ratio : p.S;
      }
    }
    sRow[tid * kLightningIndexerRowInfo + 0] = rbase;
    sRow[tid * kLightningIndexerRowInfo + 1] = n;
  }
  if (tid == kLiHopperConsumers) {  // the producer warp's first thread
    for (int s = 0; s < kLiHopperStages; ++s) {
      mbar_init(full(s), 1);
      mbar_init(empty(s), 8);  // one arrival per consumer warp
    }
    mbar_init_fence();
  }
  __syncthreads();

  // 2. Rows that need no selection (|C| <= topk) are written now; the others bound the key range.
  int lo = 0x7fffffff, hi = 0;
  for (int r = 0; r < R; ++r) {
    const int rb = sRow[r * kLightningIndexerRowInfo], n = sRow[r * kLightningIndexerRowInfo + 1];
    if (n > TOPK) {
      lo = min(lo, rb);
      hi = max(hi, rb + n);
    } else if (r % 8 == warp && t0 + r < p.T) {
      for (int j = lane; j < TOPK; j += 32) out[static_cast<long long>(r) * TOPK + j] = j < n ? j : -1;
    }
  }
  if (hi == 0) return;
  const int num_tiles = (hi - lo + BN - 1) / BN;

  if (warp >= 8) {
    // Producer warpgroup: tile t = key rows [lo + t BN, lo + t BN + BN) into stage t % 2 (rows past S read as zeros;
    // the whole box counts towards the transaction bytes).
    setmaxnreg_dec<24>();
    if (warp == 8 && lane == 0) {
      const TmaMap* kmap = reinterpret_cast<const TmaMap*>(hp.k_map);
      tma_prefetch_map(kmap);
      for (int t = 0; t < num_tiles; ++t) {
        const int s = t & 1;
        mbar_wait(empty(s), ((t >> 1) & 1) ^ 1);
        mbar_arrive_expect_tx(full(s), kStageBytes);
#pragma unroll
        for (int c = 0; c < Cfg::kDB; ++c)
          tma_load_4d(smem_addr(sK + s * kStageBytes + c * BN * 128), kmap, c * 64, 0, lo + t * BN, b, full(s));
      }
    }
    return;
  }

  setmaxnreg_inc<240>();
  // 3. Consumers: Q (columns = (token, head), zero pads) into the swizzled K-major layout, and the weights.
  {
    const T* qb = static_cast<const T*>(p.q) + static_cast<long long>(b) * p.q_sb;
    for (int i = tid; i < COLS * kChunks; i += kLiHopperConsumers) {
      const int col = i / kChunks, ch = i % kChunks;
      const int tok = col / HP, h = col % HP;
      const bool valid = h < p.H && t0 + tok < p.T;
      const T* src = valid ? qb + static_cast<long long>(t0 + tok) * p.q_st + static_cast<long long>(h) * p.q_sh + ch * 8 : qb;
      cp_async_16(sQ + (ch / 8) * (COLS * 128) + swizzle128(col, ch % 8), src, valid);
    }
    cp_async_commit();
    const T* wb = static_cast<const T*>(p.weights) + static_cast<long long>(b) * p.w_sb;
    for (int col = tid; col < COLS; col += kLiHopperConsumers) {
      const int tok = col / HP, h = col % HP;
      float w = 0.f;
      if (h < p.H && t0 + tok < p.T)
        w = to_float(wb[static_cast<long long>(t0 + tok) * p.w_st + static_cast<long long>(h) * p.w_sh]) * p.inv_scale;
      sW[col] = w;
    }
    cp_async_wait<0>();
    fence_proxy_async();  // Q's generic-proxy writes before the wgmma (async proxy) reads
    named_barrier(1, kLiHopperConsumers);
  }

  const int wg = warp / 4, wq = warp % 4, tq = lane & 3;
  const int key_lo = wg * 64 + wq * 16 + (lane >> 2);  // tile-relative key of accumulator rows (and + 8)
  const unsigned sQa = smem_addr(sQ), sKa = smem_addr(sK) + wg * (64 * 128);
  const float2* sW2 = reinterpret_cast<const float2*>(sW);
  float acc[kSplit][kNC / 2];

  // Selection state of this warp's rows, in registers.
  auto row_of = [&](int ri) { return R >= 8 ? warp + 8 * ri : (warp % kRowStride == 0 ? warp / kRowStride : R); };
  int cnt[Cfg::kRowsPerWarp];
  unsigned thr[Cfg::kRowsPerWarp];
  bool have_thr[Cfg::kRowsPerWarp];
#pragma unroll
  for (int i = 0; i < Cfg::kRowsPerWarp; ++i) {
    cnt[i] = 0;
    thr[i] = 0;
    have_thr[i] = false;
  }
  const unsigned lt = (1u << lane) - 1u;

  // S = K_tile Q^T for tile t: kSplit commit groups of kKS wgmma (A: this warpgroup's 64 keys, k16 step
  // = 32 bytes inside a 64-column block, BN * 128 bytes per block; B: Q's columns of the group).
  auto issue = [&](int t) {
    const unsigned ka = sKa + (t & 1) * kStageBytes;
    wgmma_fence();
#pragma unroll
    for (int h = 0; h < kSplit; ++h) {
#pragma unroll
      for (int ks = 0; ks < Cfg::kKS; ++ks) {
        const unsigned long long da = wgmma_desc_at(ka + (ks / 4) * (BN * 128) + (ks % 4) * 32, 16, 1024);
        const unsigned long long db =
            wgmma_desc_at(sQa + (ks / 4) * (COLS * 128) + h * (kNC * 128) + (ks % 4) * 32, 16, 1024);
        Wgmma<T, kNC>::template ss<0>(acc[h], da, db, ks > 0 ? 1 : 0);
      }
      wgmma_commit();
    }
  };

  // The portable kernel's epilogue on group h's accumulators: weighted relu summed over each token's
  // heads (in-thread, quad, then 64-column head groups in order) into partial buffer `buf`.
  auto epilogue = [&](int h, float* sPartW) {
#pragma unroll
    for (int tt = 0; tt < Cfg::kTokPerSplit; ++tt) {
      float S0 = 0.f, S1 = 0.f;
#pragma unroll
      for (int gr = 0; gr < Cfg::kGroups; ++gr) {
        float s0 = 0.f, s1 = 0.f;
#pragma unroll
        for (int jj = 0; jj < Cfg::kNTT; ++jj) {
          const int j = (tt * HP + gr * 64) / 8 + jj;  // n8 tile inside the group
          const float2 w = sW2[(h * kNC + j * 8 + 2 * tq) / 2];
          s0 += w.x * fmaxf(acc[h][4 * j], 0.f) + w.y * fmaxf(acc[h][4 * j + 1], 0.f);
          s1 += w.x * fmaxf(acc[h][4 * j + 2], 0.f) + w.y * fmaxf(acc[h][4 * j + 3], 0.f);
        }
        s0 += __shfl_xor_sync(0xffffffffu, s0, 1);
        s1 += __shfl_xor_sync(0xffffffffu, s1, 1);
        s0 += __shfl_xor_sync(0xffffffffu, s0, 2);
        s1 += __shfl_xor_sync(0xffffffffu, s1, 2);
        if (gr == 0) {
          S0 = s0;
          S1 = s1;
        } else {
          S0 += s0;
          S1 += s1;
        }
      }
      if (tq == 0) {
        float* dst = sPartW + (h * Cfg::kTokPerSplit + tt) * BN + key_lo;
        dst[0] = S0;
        dst[8] = S1;
      }
    }
  };

  // Selection of tile `tile` (partial buffer tile % 2): the warp of row r appends its candidates that
  // beat the row's threshold, in index order.
  auto select_tile = [&](int tile) {
    const float* sPartR = sPart + (tile & 1) * R * BN;
#pragma unroll
    for (int ri = 0; ri < Cfg::kRowsPerWarp; ++ri) {
      const int r = row_of(ri);
      if (r >= R) break;
      const int rb = sRow[r * kLightningIndexerRowInfo], n = sRow[r * kLightningIndexerRowInfo + 1];
      if (n <= TOPK) continue;
      unsigned* key = sKey + r * CAP;
      int* idx = sIdx + r * CAP;
      const int n0 = lo + tile * BN;
#pragma unroll
      for (int c0 = 0; c0 < BN; c0 += 32) {
        const int c = c0 + lane;
        const int local = n0 + c - rb;
        const float s = sPartR[r * BN + c];
        const unsigned k = ordered_key(__fadd_rn(s, 0.f));  // -0 -> +0
        const bool take = local >= 0 && local < n && (!have_thr[ri] || k > thr[ri]);
        const unsigned m = __ballot_sync(0xffffffffu, take);
        if (take) {
          const int pos = cnt[ri] + __popc(m & lt);
          key[pos] = k;
          idx[pos] = local;
        }
        cnt[ri] += __popc(m);
      }
    }
  };

  // Rows whose buffer has room for less than one more tile: trim (cheap, keeps >= topk entries and frees
  // at least half the slack), or, when ties defeat the bins, the exact select down to topk entries.
  auto trim_rows = [&]() {
#pragma unroll
    for (int ri = 0; ri < Cfg::kRowsPerWarp; ++ri) {
      const int r = row_of(ri);
      if (r >= R) break;
      if (cnt[ri] <= CAP - BN) continue;  // (rows with n <= topk never append)
      unsigned* key = sKey + r * CAP;
      int* idx = sIdx + r * CAP;
      __syncwarp();
      const LiTrim tr = li_trim_row(key, idx, sHist + r * 256, cnt[ri], TOPK, TOPK + (CAP - BN - TOPK) / 2);
      if (tr.kept >= 0) {
        thr[ri] = tr.lb - 1u;  // lb >= 1; later candidates are taken when key >= lb
        cnt[ri] = tr.kept;
      } else {
        thr[ri] = li_compact_row(key, idx, sHist + r * 256, cnt[ri], TOPK);
        cnt[ri] = TOPK;
      }
      have_thr[ri] = true;
      __syncwarp();
    }
  };

  // 4. The key walk. One barrier (the consumers') per tile: at the end of iteration `it`, partial buffer
  // it % 2 is complete (every epilogue of tile it) and every warp finished appending tile it - 1, so
  // iteration it + 1 may append tile it and overwrite buffer (it + 1) % 2 with tile it + 1's scores.
  // NOTE: the wgmma are issued unconditionally in the loop body and only registers other than the
  // accumulators are touched while they run (ptxas serialises every wgmma otherwise, C7513 / C7514).
  for (int it = 0; it < num_tiles; ++it) {
    const int s = it & 1;
    mbar_wait(full(s), (it >> 1) & 1);
    issue(it);
    if (it > 0) select_tile(it - 1);
    float* sPartW = sPart + s * R * BN;
    if constexpr (kSplit == 2) {
      wgmma_wait<1>();
      fence_regs(acc[0]);
      epilogue(0, sPartW);
      wgmma_wait<0>();
      fence_regs(acc[1]);
    } else {
      wgmma_wait<0>();
      fence_regs(acc[0]);
    }
    __syncwarp();
    if (lane == 0) mbar_arrive(empty(s));  // this warp's reads of the stage are complete
    epilogue(kSplit - 1, sPartW);
    trim_rows();
    named_barrier(1, kLiHopperConsumers);
  }
  select_tile(num_tiles - 1);  // (no trim: the final select takes any count up to CAP)

  // 5. The first topk under (score desc, index asc), in ascending index order.
#pragma unroll
  for (int ri = 0; ri < Cfg::kRowsPerWarp; ++ri) {
    const int r = row_of(ri);
    if (r >= R) break;
    if (sRow[r * kLightningIndexerRowInfo + 1] <= TOPK) continue;
    unsigned* key = sKey + r * CAP;
    int* idx = sIdx + r * CAP;
    __syncwarp();
    if (cnt[ri] > TOPK) li_compact_row(key, idx, sHist + r * 256, cnt[ri], TOPK);
    __syncwarp();
    for (int j = lane; j < TOPK; j += 32) out[static_cast<long long>(r) * TOPK + j] = idx[j];
  }
}

}  // namespace attnjit::kernels
