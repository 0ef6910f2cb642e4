// mla_decode / dsa_decode, hopper backend (sm_90a): the latent-decode attention of mla/latent_decode.cuh
// on wgmma.
//
// A CTA of two warpgroups attends kLatentBM (64) query rows of one KV head (the rows and key slots of the
// portable kernel, mla/latent_slots.cuh) to runs of BN (32, or 48) key slots. Warpgroup h computes
// its half of the D + TAIL depth of S = Q K^T (m64nBNk16, both operands from shared memory), the two
// halves are summed through shared memory (each warpgroup then holds the whole S: the same sum in both),
// both run the same online softmax (hopper/attention_core.cuh's hopper_softmax), and warpgroup h adds P
// V for value columns [h D / 2, (h + 1) D / 2) (m64n{D/2}k16, P from registers, V N-major): 128 fp32
// accumulators a thread at D 512, FlashMLA's split of the 512 value columns over two warpgroups.
//
// Rows are gathered (positions, pages or indices: no TMA row gather exists) by cp.async into a
// STAGES-deep ring in the 128-byte-swizzled layout wgmma reads ([64-column blocks][rows][128 B]); the
// depth is padded to a multiple of 64 with zeros (dim_tail 16 / 32). Every thread loads; a tile's
// copies are made visible to the async proxy (fence.proxy.async) before the barrier that publishes it.
// Split-KV (SPLIT) as in the portable kernel, for gqa_split_combine.
#pragma once
#include "common/mma.cuh"
#include "hopper/attention_core.cuh"
#include "hopper/sm90.cuh"
#include "mla/latent_decode_params.cuh"
#include "mla/latent_slots.cuh"

namespace attnjit::kernels {

template <typename T, int D, int TAIL, int MODE, int STAGES, bool SPLIT, int BN>
__global__ void __launch_bounds__(kLatentHopperThreads, 1)
    latent_decode_hopper(const __grid_constant__ LatentDecodeParams p) {
  static_assert(sizeof(T) == 2, "latent_decode_hopper: 16-bit operands");
  static_assert(D == 128 || D == 256 || D == 512, "latent_decode_hopper: D is 128, 256 or 512");
  static_assert(TAIL % 16 == 0 && TAIL >= 0 && TAIL <= 128, "latent_decode_hopper: TAIL is a multiple of 16 in [0, 128]");
  static_assert(STAGES >= 2 && STAGES <= 4, "latent_decode_hopper: 2 to 4 key-tile stages");
  static_assert(BN == 32 || BN == 48, "latent_decode_hopper: 32- or 48-key tiles");
  constexpr int BM = kLatentBM;
  constexpr int DQK = D + TAIL, DP = latent_hopper_depth(DQK);  // depth, padded to 64-column blocks
  constexpr int KB = DP / 64;                                    // 64-column blocks of a row
  constexpr int KSH = DP / 32;                                   // k16 steps of one half of the depth
  constexpr int DV = D / 2;                                      // value columns of a warpgroup
  constexpr int kCh = DP / 8;                                    // 16-byte chunks of a (padded) row
  constexpr unsigned kQBytes = BM * DP * 2, kStageBytes = BN * DP * 2;

  extern __shared__ __align__(128) unsigned char smem_raw[];
  unsigned char* base = align_smem_1024(smem_raw);
  unsigned char* sQ = base;
  unsigned char* sK = sQ + kQBytes;
  float* sX = reinterpret_cast<float*>(sK + STAGES * kStageBytes);  // [2][BN / 2][128]: the S halves
  int* sValid = reinterpret_cast<int*>(sX + 2 * (BN / 2) * 128);

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if constexpr (SPLIT) asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
  const int tid = threadIdx.x, wg = tid / 128, wt = tid % 128, lane = tid % 32, wi = wt / 32;
  const LatentCoords c = latent_coords<MODE, BM>(p);
  const int b = c.b, s_tok = c.s_tok, r = c.r, g = c.g, rows = c.rows, split = c.split, m_base = c.m_base;
  const LatentRun<T, MODE, BM, BN, SPLIT> run(p, c);
  const auto& slots = run.slots;
  const int vis_base = run.vis_base, num_tiles = run.num_tiles, n_first = run.n_first;

  // One row of DP elements into a swizzled buffer of `nrows` rows: chunks tid % 8 + 8 i (block i) from
  // main (c < D / 8), tail (c < DQK / 8) or zeros (the padding, or an invalid row).
  auto load_row = [&](unsigned char* buf, int nrows, int row, bool ok, const T* main, const T* tail) {
    const int c8 = tid % 8;
#pragma unroll
    for (int i = 0; i < KB; ++i) {
      const int c = c8 + 8 * i;
      const T* src = c < D / 8 ? main + c * 8 : tail + (c * 8 - D);
      const bool live = ok && (DQK == DP || c < DQK / 8);
      cp_async_16(buf + i * (nrows * 128) + swizzle128(row, c8), live ? src : nullptr, live);
    }
  };
  {
    const T* qb = static_cast<const T*>(p.q) + b * p.q_sb + s_tok * p.q_ss;
    const T* qtb = static_cast<const T*>(p.q_tail) + b * p.qt_sb + s_tok * p.qt_ss;
#pragma unroll
    for (int pass = 0; pass < BM / 32; ++pass) {
      const int row = tid / 8 + 32 * pass, gm = m_base + row;
      const int t = MODE == kLatentIndexed ? 0 : gm / g;
      const int h = r * g + (MODE == kLatentIndexed ? gm : gm - t * g);
      load_row(sQ, BM, row, gm < rows, qb + t * p.q_ss + h * p.q_sh, qtb + t * p.qt_ss + h * p.qt_sh);
    }
  }
  static_assert(kCh % 8 == 0, "latent_decode_hopper: rows are whole 64-column blocks");
  // Tile t's BN rows, 32 a pass (eight threads a row).
  auto issue = [&](int t) {
    if (t < num_tiles) {
#pragma unroll
      for (int pass = 0; pass < (BN + 31) / 32; ++pass) {
        const int row = tid / 8 + 32 * pass;
        if (BN % 32 != 0 && row >= BN) break;
        const T* main = nullptr;
        const T* tail = nullptr;
        const bool ok = slots.resolve(p, n_first + t * BN + row, main, tail);
        load_row(sK + (t % STAGES) * kStageBytes, BN, row, ok, main, tail);
        if (MODE == kLatentIndexed && tid % 8 == 0) sValid[(t % STAGES) * BN + row] = ok;
      }
    }
    cp_async_commit();
  };
#pragma unroll
  for (int t = 0; t < STAGES - 1; ++t) issue(t);  // group 0 also holds Q

  const float score_scale = p.scale_log2;
  int vis_end[2];
#pragma unroll
  for (int hf = 0; hf < 2; ++hf) vis_end[hf] = vis_base + (m_base + wi * 16 + lane / 4 + hf * 8) / g;
  const int vis_min = vis_base + m_base / g;
  HopperSoftmaxState<DV> st;
  st.init();
  float sc[BN / 2];
  unsigned pa[BN / 16][4];
  float alpha[2];

  for (int t = 0; t < num_tiles; ++t) {
    cp_async_wait<STAGES - 2>();
    fence_proxy_async();  // this thread's copies of tile t, visible to wgmma
    __syncthreads();      // tile t landed for every thread; every warpgroup is done with tile t - 1
    issue(t + STAGES - 1);
    const int n0 = n_first + t * BN, stage = t % STAGES;
    const unsigned sKs = smem_addr(sK + stage * kStageBytes);

    // This warpgroup's half of S = Q K^T.
    wgmma_fence();
#pragma unroll
    for (int i = 0; i < KSH; ++i) {
      const int ks = wg * KSH + i;
      const unsigned long long da = wgmma_desc_at(smem_addr(sQ) + (ks / 4) * (BM * 128) + (ks % 4) * 32, 16, 1024);
      const unsigned long long db = wgmma_desc_at(sKs + (ks / 4) * (BN * 128) + (ks % 4) * 32, 16, 1024);
      Wgmma<T, BN>::template ss<0>(sc, da, db, i > 0 ? 1 : 0);
    }
    wgmma_commit();
    wgmma_wait<0>();
    fence_regs(sc);
    // Sum the halves: same thread of the other warpgroup holds the same elements.
#pragma unroll
    for (int e = 0; e < BN / 2; ++e) sX[(wg * (BN / 2) + e) * 128 + wt] = sc[e];
    __syncthreads();
#pragma unroll
    for (int e = 0; e < BN / 2; ++e) sc[e] += sX[((wg ^ 1) * (BN / 2) + e) * 128 + wt];

    bool need_mask;
    if constexpr (MODE == kLatentIndexed) need_mask = true;
    else need_mask = n0 + BN > vis_min;
    const bool moved = hopper_softmax<T, DV, BN, false>(
        sc, need_mask,
        [&](int hf, int j) {
          if constexpr (MODE == kLatentIndexed) return sValid[stage * BN + j] != 0;
          else return n0 + j < vis_end[hf] && n0 + j < slots.n_keys;
        },
        score_scale, 0.f, 0.f, st, pa, alpha);
    if (moved) {
#pragma unroll
      for (int dt = 0; dt < DV / 8; ++dt) {
        st.o[dt * 4] *= alpha[0];
        st.o[dt * 4 + 1] *= alpha[0];
        st.o[dt * 4 + 2] *= alpha[1];
        st.o[dt * 4 + 3] *= alpha[1];
      }
    }
    // O[:, this warpgroup's columns] += P V (V: the tile's first D columns, N-major).
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < BN / 16; ++kk) {
      const unsigned long long db = wgmma_desc_at(sKs + wg * (DV / 64) * (BN * 128) + kk * 2048, BN * 128, 1024);
      Wgmma<T, DV>::template rs<1>(st.o, pa[kk], db);
    }
    wgmma_commit();
    wgmma_wait<0>();
    fence_regs(st.o);
    hold_regs(pa);
  }
  cp_async_wait<0>();

#pragma unroll
  for (int hf = 0; hf < 2; ++hf) {
    float l = st.l[hf];
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    const float m = st.m[hf] * score_scale;
    const int gm = m_base + wi * 16 + lane / 4 + hf * 8;
    if (gm >= rows) continue;
    const int t = MODE == kLatentIndexed ? s_tok : gm / g;
    const int h = r * g + (MODE == kLatentIndexed ? gm : gm - (gm / g) * g);
    const float inv = l > 0.f ? 1.f / l : 0.f;
    const int col0 = wg * DV + 2 * (lane % 4);
    if constexpr (SPLIT) {
      const long long row = (static_cast<long long>(b) * p.s_q + t) * p.h + h;
      const long long at = static_cast<long long>(split) * p.part_rows + row;
      float* orow = p.o_part + at * D + col0;
#pragma unroll
      for (int dt = 0; dt < DV / 8; ++dt)
        *reinterpret_cast<float2*>(orow + dt * 8) = make_float2(st.o[dt * 4 + 2 * hf] * inv, st.o[dt * 4 + 2 * hf + 1] * inv);
      if (wg == 0 && lane % 4 == 0) p.lse_part[at] = l > 0.f ? m + log2f(l) : -kInf();
    } else {
      T* orow = static_cast<T*>(p.o) + b * p.o_sb + static_cast<long long>(t) * p.o_ss + h * p.o_sh + col0;
#pragma unroll
      for (int dt = 0; dt < DV / 8; ++dt)
        *reinterpret_cast<unsigned*>(orow + dt * 8) =
            MmaOp<T>::pack(st.o[dt * 4 + 2 * hf] * inv, st.o[dt * 4 + 2 * hf + 1] * inv);
    }
  }
}

}  // namespace attnjit::kernels
