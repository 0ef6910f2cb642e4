// lightning_indexer, hopper backend (sm_90a; SPEC.md §2.1): the portable fused kernel
// (indexer/lightning_indexer.cuh) with its score GEMM on warpgroup MMAs (wgmma), its K tiles loaded by
// TMA into a two-stage, 128-byte-swizzled ring, and its selection on warps of its own.
//
// Roles (384 threads, one CTA per SM):
//   warps 0-7  two consumer warpgroups (216 registers after setmaxnreg). Per 128-key tile, warpgroup wg
//              computes the scores of keys [64 wg, 64 wg + 64) against all COLS (token, head) columns:
//              S = K_tile Q^T, A = K rows (K-major, from the ring), B = Q (K-major, loaded once), fp32
//              accumulators in registers. For COLS = 256 with whole tokens per half (HP <= 128) the product
//              runs as two n128 groups, pipelined across tiles: group 0 of tile t + 1 runs during group 1's
//              epilogue of tile t, group 1 of t + 1 during group 0's epilogue of t + 1. The epilogue is the
//              portable kernel's: relu, the per-head weight (1 / sqrt(H * D) folded in), the head sum of
//              each token in the same fixed order (in-thread over the token's n8 tiles, quad shuffles xor 1
//              then 2, then the 64-column head groups in order), written to a [R][BN] score tile in a ring
//              of kLiHopperSlots slots. Thread 0 also issues the TMA loads: tile t + 2 into the stage of
//              tile t once all eight consumer warps have finished reading it.
//   warps 8-11 the selection warpgroup (72 registers): warp w owns rows w, w + 4, ... Per score tile it
//              appends each row's candidates above the row's threshold to the row's buffer of CAP (key,
//              index) entries in index order, releases the slot, then trims rows that could overflow on
//              the next tile (li_trim_row / li_compact_row) while the consumers run ahead; at the end the
//              exact select writes the deterministic top-k in ascending index order. Rows with |C| <= topk
//              are written 0..|C|-1, -1... without scoring. The selection is the portable kernel's, so the
//              index sets match.
// Synchronisation: K stages (full: TMA bytes; empty: one arrival per consumer warp after its wgmma_wait),
// score slots (full: every consumer thread after its stores; free: every selection thread after its loads).
//
// Budget (H 64 -> HP 64, D 128, topk 2048: R 4, COLS 256, two n128 halves):
//   shared memory: Q 256 x 128 x 2 = 64 KB, K ring 2 x 128 x 128 x 2 = 64 KB, score slots
//   4 x 4 x 128 x 4 = 8 KB, weights 1 KB, histograms 4 x 1 KB, row info and barriers < 0.2 KB, 1 KB of
//   alignment slack; the candidate buffers take the rest of the 227 KB: CAP 2688 entries per row (R x CAP
//   x 8 = 84 KB), 231584 B (226.2 KB) in all (lightning_indexer_hopper_geometry).
//   registers: 256 x 216 + 128 x 72 = 63 K, exactly the 384 x 168 of the launch (setmaxnreg moves
//   registers between warpgroups, it cannot add any); a consumer holds COLS / 2 = 128 fp32 accumulators, the weights
//   are read from shared memory in the epilogue (a float2 per n8 tile). The selection helpers are inlined
//   (ptxas cannot allocate registers across a call inside a setmaxnreg region).
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
  static_assert(kTokPerSplit >= 1 && kTokPerSplit * kSplit == R, "lightning_indexer_hopper: token split");
  static_assert(kStageBytes % 1024 == 0 && (COLS * 128) % 1024 == 0, "lightning_indexer_hopper: 1024-byte swizzle atoms");
  // setmaxnreg: the CTA starts with the launch bound's registers per thread (65536 / 384 -> 168); the
  // consumers' increase must come from what the selection warpgroup's decrease releases (an increase
  // beyond that pool waits forever).
  static constexpr int kLaunchRegs = 65536 / kLiHopperThreads / 8 * 8;
  static constexpr int kConsumerRegs = 216, kSelRegs = 72;
  static_assert(kLiHopperConsumers * (kConsumerRegs - kLaunchRegs) <= kLiHopperSelectors * (kLaunchRegs - kSelRegs),
                "lightning_indexer_hopper: setmaxnreg pool");
};

template <typename T, int D, int HP, int TOPK, bool CAUSAL, bool PACKED>
__global__ void __launch_bounds__(kLiHopperThreads, 1)
    lightning_indexer_hopper(const __grid_constant__ LightningIndexerHopperParams hp) {
  using Cfg = LightningIndexerHopperConfig<T, D, HP, TOPK, CAUSAL, PACKED>;
  constexpr int R = Cfg::R, BN = Cfg::BN, CAP = Cfg::CAP, COLS = Cfg::COLS, kSplit = Cfg::kSplit, kNC = Cfg::kNC;
  constexpr int kStageBytes = Cfg::kStageBytes, kChunks = D / 8, NS = kLiHopperSlots;
  const LightningIndexerParams& p = hp.p;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  unsigned char* base = align_smem_1024(smem_raw);
  unsigned char* sQ = base;                                            // [kDB][COLS][128 B], swizzled
  unsigned char* sK = sQ + COLS * D * 2;                               // [2][kDB][BN][128 B], swizzled
  float* sPart = reinterpret_cast<float*>(sK + 2 * kStageBytes);       // [NS][R][BN] score tiles
  float* sW = sPart + NS * R * BN;                                     // [COLS]
  unsigned* sHist = reinterpret_cast<unsigned*>(sW + COLS);            // [R][256]
  int* sRow = reinterpret_cast<int*>(sHist + R * 256);                 // [R][4]: base, n
  unsigned long long* sBar = reinterpret_cast<unsigned long long*>(sRow + R * kLightningIndexerRowInfo);
  unsigned* sKey = reinterpret_cast<unsigned*>(sBar + 2 * (kLiHopperStages + NS));  // [R][CAP]
  int* sIdx = reinterpret_cast<int*>(sKey + R * CAP);                  // [R][CAP]
  const unsigned bar0 = smem_addr(sBar);
  auto full = [&](int s) { return bar0 + 8u * s; };                          // K stage loaded (TMA bytes)
  auto empty = [&](int s) { return bar0 + 8u * (kLiHopperStages + s); };     // K stage read (8 consumer warps)
  auto sfull = [&](int s) { return bar0 + 8u * (2 * kLiHopperStages + s); };  // score slot written (256 threads)
  auto sfree = [&](int s) { return bar0 + 8u * (2 * kLiHopperStages + NS + s); };  // score slot read (128 threads)

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int b = blockIdx.y;
  // NOTE: causal rows grow with t: the longest token blocks are scheduled first (smaller tail).
  const int t0 = (CAUSAL ? static_cast<int>(gridDim.x - 1 - blockIdx.x) : static_cast<int>(blockIdx.x)) * R;
  int* out = p.indices + (static_cast<long long>(b) * p.T + t0) * TOPK;

  // 1. Each row's candidates: pool rows [base, base + n), local indices 0..n-1 (as the portable kernel).
  if (tid < R) {
    const int t = t0 + tid;
    int rbase = 0, n = 0;
    if (t < p.T) li_row_candidates<CAUSAL, PACKED>(p, t, rbase, n);
    sRow[tid * kLightningIndexerRowInfo + 0] = rbase;
    sRow[tid * kLightningIndexerRowInfo + 1] = n;
  }
  if (tid == kLiHopperConsumers) {  // the selection warpgroup's first thread
    for (int s = 0; s < kLiHopperStages; ++s) {
      mbar_init(full(s), 1);
      mbar_init(empty(s), 8);  // one arrival per consumer warp (after its wgmma_wait: async-proxy reads)
    }
    for (int s = 0; s < NS; ++s) {
      mbar_init(sfull(s), kLiHopperConsumers);  // every consumer thread, after its score stores
      mbar_init(sfree(s), kLiHopperSelectors);  // every selection thread, after its score loads
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
    } else if (r % 12 == warp && t0 + r < p.T) {
      for (int j = lane; j < TOPK; j += 32) out[static_cast<long long>(r) * TOPK + j] = j < n ? j : -1;
    }
  }
  if (hi == 0) return;
  const int num_tiles = (hi - lo + BN - 1) / BN;

  if (warp >= 8) {
    // 3s. The selection warpgroup: warp sw owns rows sw, sw + 4, ... For each score tile (slot t % NS) it
    // appends the row's candidates that beat the row's threshold, in index order, releases the slot, then
    // trims rows whose buffer could overflow on the next tile (li_trim_row: cheap, keeps >= topk entries
    // and frees at least half the slack; li_compact_row when ties defeat the bins). The trims run while
    // the consumers compute the next tiles' scores (the slot ring absorbs a trim's length).
    setmaxnreg_dec<Cfg::kSelRegs>();
    const int sw = warp - 8;
    constexpr int kRows = (R + 3) / 4;
    int cnt[kRows];
    unsigned thr[kRows];
    bool have_thr[kRows];
#pragma unroll
    for (int i = 0; i < kRows; ++i) {
      cnt[i] = 0;
      thr[i] = 0;
      have_thr[i] = false;
    }
    const unsigned lt = (1u << lane) - 1u;
    for (int t = 0; t < num_tiles; ++t) {
      const int slot = t % NS;
      mbar_wait(sfull(slot), (t / NS) & 1);
      const float* sPartR = sPart + slot * R * BN;
      const int n0 = lo + t * BN;
#pragma unroll
      for (int ri = 0; ri < kRows; ++ri) {
        const int r = sw + 4 * ri;
        if (r >= R) break;
        const int rb = sRow[r * kLightningIndexerRowInfo], n = sRow[r * kLightningIndexerRowInfo + 1];
        if (n <= TOPK) continue;
        unsigned* key = sKey + r * CAP;
        int* idx = sIdx + r * CAP;
        // Lane l holds keys 4l .. 4l + 3 of the tile; a taken key's position counts the taken keys of
        // lower lanes (any of their four) and this lane's earlier ones: index order.
        const float4 sc = reinterpret_cast<const float4*>(sPartR + r * BN)[lane];
        const float scs[4] = {sc.x, sc.y, sc.z, sc.w};
        unsigned k[4];
        bool take[4];
        int pos = cnt[ri];
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const int local = n0 + 4 * lane + j - rb;
          k[j] = ordered_key(__fadd_rn(scs[j], 0.f));  // -0 -> +0
          take[j] = local >= 0 && local < n && (!have_thr[ri] || k[j] > thr[ri]);
          const unsigned m = __ballot_sync(0xffffffffu, take[j]);
          pos += __popc(m & lt);
          cnt[ri] += __popc(m);
        }
#pragma unroll
        for (int j = 0; j < 4; ++j)
          if (take[j]) {
            key[pos] = k[j];
            idx[pos] = n0 + 4 * lane + j - rb;
            ++pos;
          }
      }
      mbar_arrive(sfree(slot));  // this thread's reads of the slot are done
      if (t + 1 == num_tiles) break;  // (no trim after the last tile: the final select takes any count up to CAP)
#pragma unroll
      for (int ri = 0; ri < kRows; ++ri) {
        const int r = sw + 4 * ri;
        if (r >= R) break;
        if (cnt[ri] <= CAP - BN) continue;  // (rows with n <= topk never append)
        unsigned* key = sKey + r * CAP;
        int* idx = sIdx + r * CAP;
        __syncwarp();
        li_shrink_row<true>(key, idx, sHist + r * 256, cnt[ri], thr[ri], TOPK, TOPK + (CAP - BN - TOPK) / 2);
        have_thr[ri] = true;
        __syncwarp();
      }
    }
    // 5. The first topk under (score desc, index asc), in ascending index order.
#pragma unroll
    for (int ri = 0; ri < kRows; ++ri) {
      const int r = sw + 4 * ri;
      if (r >= R) break;
      if (sRow[r * kLightningIndexerRowInfo + 1] <= TOPK) continue;
      unsigned* key = sKey + r * CAP;
      int* idx = sIdx + r * CAP;
      __syncwarp();
      if (cnt[ri] > TOPK) li_compact_row_v4(key, idx, sHist + r * 256, cnt[ri], TOPK);
      __syncwarp();
      for (int j = lane; j < TOPK; j += 32) out[static_cast<long long>(r) * TOPK + j] = idx[j];
    }
    return;
  }

  setmaxnreg_inc<Cfg::kConsumerRegs>();
  // 3c. Consumers. Thread 0 issues the TMA loads of tiles 0 and 1 (tile t = key rows [lo + t BN, lo + t BN
  // + BN) into stage t % 2; rows past S read as zeros and the whole box counts towards the transaction
  // bytes), then Q (columns = (token, head), zero pads) goes into the swizzled K-major layout, and the weights.
  const TmaMap* kmap = reinterpret_cast<const TmaMap*>(hp.k_map);
  auto load_tile = [&](int t) {
    const int s = t & 1;
    mbar_arrive_expect_tx(full(s), kStageBytes);
#pragma unroll
    for (int c = 0; c < Cfg::kDB; ++c)
      tma_load_4d(smem_addr(sK + s * kStageBytes + c * BN * 128), kmap, c * 64, 0, lo + t * BN, b, full(s));
  };
  if (tid == 0) {
    tma_prefetch_map(kmap);
    load_tile(0);
    if (num_tiles > 1) load_tile(1);
  }
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

  // Group h of S = K_tile Q^T for tile t: kKS wgmma in one commit group (A: this warpgroup's 64 keys, k16
  // step = 32 bytes inside a 64-column block, BN * 128 bytes per block; B: Q's columns of the group).
  auto issue = [&](int h, int t) {
    const unsigned ka = sKa + (t & 1) * kStageBytes;
    wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < Cfg::kKS; ++ks) {
      const unsigned long long da = wgmma_desc_at(ka + (ks / 4) * (BN * 128) + (ks % 4) * 32, 16, 1024);
      const unsigned long long db =
          wgmma_desc_at(sQa + (ks / 4) * (COLS * 128) + h * (kNC * 128) + (ks % 4) * 32, 16, 1024);
      Wgmma<T, kNC>::template ss<0>(acc[h], da, db, ks > 0 ? 1 : 0);
    }
    wgmma_commit();
  };

  // The portable kernel's epilogue on group h's accumulators: weighted relu summed over each token's
  // heads (in-thread, quad, then 64-column head groups in order) into the score slot.
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

  // Tile `it` is done with its K stage: this warp arrives; thread 0 waits for all eight warps and loads
  // tile it + 2 into the stage.
  auto release_stage = [&](int it) {
    const int s = it & 1;
    __syncwarp();
    if (lane == 0) mbar_arrive(empty(s));
    if (tid == 0 && it + 2 < num_tiles) {
      mbar_wait(empty(s), (it >> 1) & 1);
      load_tile(it + 2);
    }
    __syncwarp();
  };

  // 4. The key walk. Score tile it goes to slot it % NS once the selection warps have read tile it - NS.
  // With two groups, group 0 of tile it + 1 runs during group 1's epilogue of tile it, and group 1 of
  // it + 1 during group 0's epilogue of it + 1; the last tile's group-1 epilogue is peeled off.
  // NOTE: every wgmma in the loop is issued unconditionally, only the accumulators of finished groups are
  // read while others run, and no group is in flight across the loop's back edge (otherwise ptxas
  // serialises every wgmma, C7513 / C7514).
  auto slot_of = [&](int t) { return sPart + (t % NS) * R * BN; };
  auto wait_slot = [&](int t) { mbar_wait(sfree(t % NS), ((t / NS) & 1) ^ 1); };
  if constexpr (kSplit == 2) {
    mbar_wait(full(0), 0);
    issue(0, 0);
    issue(1, 0);
    wait_slot(0);
    wgmma_wait<1>();
    fence_regs(acc[0]);
    epilogue(0, slot_of(0));
    wgmma_wait<0>();
    fence_regs(acc[1]);
    release_stage(0);
    for (int it = 0; it + 1 < num_tiles; ++it) {
      const int nt = it + 1;
      mbar_wait(full(nt & 1), (nt >> 1) & 1);
      issue(0, nt);
      epilogue(1, slot_of(it));
      mbar_arrive(sfull(it % NS));  // this thread's score stores of tile it are done
      issue(1, nt);
      wait_slot(nt);
      wgmma_wait<1>();
      fence_regs(acc[0]);
      epilogue(0, slot_of(nt));
      wgmma_wait<0>();
      fence_regs(acc[1]);
      release_stage(nt);
    }
    epilogue(1, slot_of(num_tiles - 1));
    mbar_arrive(sfull((num_tiles - 1) % NS));
  } else {
    for (int it = 0; it < num_tiles; ++it) {
      const int slot = it % NS;
      float* sPartW = sPart + slot * R * BN;
      mbar_wait(full(it & 1), (it >> 1) & 1);
      issue(0, it);
      mbar_wait(sfree(slot), ((it / NS) & 1) ^ 1);
      wgmma_wait<0>();
      fence_regs(acc[0]);
      release_stage(it);
      epilogue(0, sPartW);
      mbar_arrive(sfull(slot));
    }
  }
}

}  // namespace attnjit::kernels
