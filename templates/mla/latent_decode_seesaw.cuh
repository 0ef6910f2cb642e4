// mla_decode / dsa_decode, hopper backend (sm_90a): the latent-decode attention on wgmma with the
// "seesaw" schedule of FlashMLA's 2025 kernel (its published write-up), 64-key tiles taken in pairs.
//
// A CTA attends kLatentBM (64) query rows of one KV head. O (64 x D fp32) is too large for one
// warpgroup, so warpgroup 0 holds the left value columns O_L = O[:, 0, D/2) and warpgroup 1 the right
// ones O_R. Tiles come in pairs (tile 2k in buffer 0, 2k + 1 in buffer 1); the running row maximum m is
// handed between the warpgroups through shared memory, so each computes the full-depth scores of one
// tile of the pair (no half-depth partial sums, no fp32 score exchange) and one warpgroup's softmax runs
// while the other's GEMMs hold the tensor cores:
//   [0] S0 = Q K0^T; m0 = max(m, rowmax S0); P0 = exp(S0 - m0) (to shared memory)
//   [1] S1 = Q K1^T; m1 = max(m0, rowmax S1); P1 = exp(S1 - m1) (to shared memory)
//   both, in tile order: O = O e^(m - m0) + P0 V0_half; O = O e^(m0 - m1) + P1 V1_half
// Each warpgroup keeps its own row sums relative to the shared m; they are added at the end. The P V
// products go in tile order, all four with P from shared memory, so buffer 0 is free once tile 2k's two
// products are done, about three quarters into the pair, and tile 2k + 2 loads under tile 2k + 1's
// products. (Measured on an H100 against the order where each warpgroup first multiplies its own P from
// registers: equal within 1% at H 128, up to 6% faster where split or sparse, and compute-sanitizer's
// racecheck reports nothing, where the register order's arrive/sync hand-off of m drew its false reports.)
//
// A P tile (64 rows x 64 keys, 16-bit) lives where the wgmma reading it as an A operand finds it: in
// the K tile's first tail block (columns [D, D + 64), dead once that tile's scores are computed) when the
// row has a tail, else in a buffer of its own.
//
// Loads: a producer warpgroup (its first 64 threads fill buffer 0, the others buffer 1; a thread resolves
// one row, eight lanes copy each row) gathers rows with cp.async (positions, pages or indices: one path for
// every cache layout) in 64-column blocks, each block completing on its own mbarrier so the first k-steps
// of Q K^T start before the tile has fully landed. A buffer's left value blocks and its right blocks (with
// the tail and P) are released separately: the left half of buffer 0 is free once warpgroup 0's P0 V0_L
// completes.
// Split-KV (SPLIT) as in the other latent kernels, for gqa_split_combine.
#pragma once
#include "common/mma.cuh"
#include "hopper/sm90.cuh"
#include "mla/latent_decode_params.cuh"
#include "mla/latent_slots.cuh"

namespace attnjit::kernels {

// cp.async.wait_group with a count known only after unrolling (the instruction takes an immediate).
__device__ __forceinline__ void cp_async_wait_upto(int n) {
  switch (n) {
    case 0: cp_async_wait<0>(); break;
    case 1: cp_async_wait<1>(); break;
    case 2: cp_async_wait<2>(); break;
    case 3: cp_async_wait<3>(); break;
    case 4: cp_async_wait<4>(); break;
    case 5: cp_async_wait<5>(); break;
    case 6: cp_async_wait<6>(); break;
    case 7: cp_async_wait<7>(); break;
    case 8: cp_async_wait<8>(); break;
    case 9: cp_async_wait<9>(); break;
    default: cp_async_wait<10>(); break;
  }
}

// cp.async of 16 bytes to a shared-window address (zero-filled when !valid).
__device__ __forceinline__ void cp_async_16_at(unsigned dst, const void* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(valid ? 16 : 0));
}

template <typename T, int D, int TAIL, int MODE, bool SPLIT>
__global__ void __launch_bounds__(kLatentSeesawThreads, 1)
    latent_decode_seesaw(const __grid_constant__ LatentDecodeParams p) {
  static_assert(sizeof(T) == 2, "latent_decode_seesaw: 16-bit operands");
  static_assert(D == 128 || D == 256 || D == 512, "latent_decode_seesaw: D is 128, 256 or 512");
  static_assert(TAIL % 16 == 0 && TAIL >= 0 && TAIL <= 128, "latent_decode_seesaw: TAIL is a multiple of 16 in [0, 128]");
  constexpr int BM = kLatentBM, BN = kLatentSeesawBN;
  constexpr int DQK = D + TAIL, DP = latent_hopper_depth(DQK);
  constexpr int KB = DP / 64;       // 64-column blocks of a row
  constexpr int DV = D / 2;         // value columns of a warpgroup
  constexpr int KL = DV / 64;       // blocks of the left value half: [0, KL); the right half and tail: [KL, KB)
  constexpr bool kPInTail = DP > D;  // P in the K tile's block D / 64
  constexpr unsigned kBlockBytes = BN * 128, kTileBytes = KB * kBlockBytes, kQBytes = BM * DP * 2;
  static_assert(KB <= 11, "latent_decode_seesaw: at most 11 column blocks (cp_async_wait_upto)");
  static_assert(BN == 64 && BM == 64, "latent_decode_seesaw: a P tile is one 64 x 64 block");

  extern __shared__ __align__(128) unsigned char smem_raw[];
  unsigned char* base = align_smem_1024(smem_raw);
  unsigned char* sQ = base;
  unsigned char* sK = sQ + kQBytes;  // [2][KB][BN rows x 128 B]
  unsigned char* sPx = sK + 2 * kTileBytes;  // [2][64 x 128 B] when P has no tail block to live in
  float* sM = reinterpret_cast<float*>(sPx + (kPInTail ? 0 : 2 * kBlockBytes));  // [2][64]: m0, m1 of the pair
  float* sL = sM + 2 * BM;                                                        // [2][64]: row sums at the end
  int* sValid = reinterpret_cast<int*>(sL + 2 * BM);                              // [2][BN]
  unsigned long long* bars = reinterpret_cast<unsigned long long*>(sValid + 2 * BN);  // 8-byte aligned
  // full[s][j]: block j of buffer s landed; empty_l / empty_r [s]: its left / right blocks are free.
  auto full = [&](int s, int j) { return smem_addr(bars + s * KB + j); };
  auto empty_l = [&](int s) { return smem_addr(bars + 2 * KB + s); };
  auto empty_r = [&](int s) { return smem_addr(bars + 2 * KB + 2 + s); };
  auto p_tile = [&](int s) -> unsigned char* {
    return kPInTail ? sK + s * kTileBytes + (D / 64) * kBlockBytes : sPx + s * kBlockBytes;
  };

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if constexpr (SPLIT) asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
  const int tid = threadIdx.x, lane = tid % 32;
  const LatentCoords c = latent_coords<MODE, BM>(p);
  const int b = c.b, s_tok = c.s_tok, r = c.r, g = c.g, rows = c.rows, split = c.split, m_base = c.m_base;
  const LatentRun<T, MODE, BM, BN, SPLIT> run(p, c);
  const auto& slots = run.slots;
  const int vis_base = run.vis_base, num_tiles = run.num_tiles, n_first = run.n_first;
  const int n_pairs = (num_tiles + 1) / 2;
  // Slots of this CTA's run: [n_first, n_lim) (a split's neighbour owns the slots after its last tile).
  const int n_lim = min(slots.n_keys, n_first + num_tiles * BN);

  if (tid == 0) {
#pragma unroll
    for (int s = 0; s < 2; ++s) {
#pragma unroll
      for (int j = 0; j < KB; ++j) mbar_init(full(s, j), 64);  // every producer thread of the buffer
    }
    mbar_init(empty_l(0), 4);  // warpgroup 0's warps (P0 V0_L)
    mbar_init(empty_r(0), 8);  // both warpgroups' warps (P0 V0_L reads P0; P0 V0_R P0 and the right values)
    mbar_init(empty_l(1), 4);  // warpgroup 0's warps (P1 V1_L; warpgroup 1's Q K1^T precedes it)
    mbar_init(empty_r(1), 8);  // both: warpgroup 1's P1 V1_R, warpgroup 0's read of P1
    mbar_init_fence();
  }
  if (tid < 256) {  // Q: the consumers' 256 threads, eight a row, 32 rows a pass
    const T* qb = static_cast<const T*>(p.q) + b * p.q_sb + s_tok * p.q_ss;
    const T* qtb = static_cast<const T*>(p.q_tail) + b * p.qt_sb + s_tok * p.qt_ss;
#pragma unroll
    for (int pass = 0; pass < BM / 32; ++pass) {
      const int row = tid / 8 + 32 * pass, gm = m_base + row;
      const int t = MODE == kLatentIndexed ? 0 : gm / g;
      const int h = r * g + (MODE == kLatentIndexed ? gm : gm - t * g);
      const bool ok = gm < rows;
      const T* main = qb + t * p.q_ss + h * p.q_sh;
      const T* tail = qtb + t * p.qt_ss + h * p.qt_sh;
#pragma unroll
      for (int i = 0; i < KB; ++i) {
        const int ch = tid % 8 + 8 * i;
        const bool live = ok && (DQK == DP || ch < DQK / 8);
        const T* src = ch < D / 8 ? main + ch * 8 : tail + (ch * 8 - D);
        cp_async_16(sQ + i * (BM * 128) + swizzle128(row, tid % 8), live ? src : nullptr, live);
      }
    }
    cp_async_commit();
  }
  __syncthreads();  // the barriers' initialisation, visible to every thread

  if (tid >= 256) {
    // ---- Producer warpgroup: threads [0, 64) fill buffer 0 with tiles 2k, [64, 128) buffer 1 with tiles
    // 2k + 1. Thread x of a buffer resolves row x of its tile; the copies are coalesced: in pass i a warp
    // copies rows 4 i .. 4 i + 3 of its 32, eight lanes a row (one 16-byte chunk each, so one instruction
    // covers four whole 128-byte lines), taking each row's address from the lane that resolved it.
    // (One row a thread would make each instruction touch 32 lines for 16 bytes of each: measured on an
    // H100, twice the L2 sectors of the 48-key kernel and two thirds of its speed.)
    setmaxnreg_dec<kLatentSeesawProducerRegs>();
    const int s = (tid - 256) / 64, row = (tid - 256) % 64;
    const int c8 = lane % 8, rq = lane / 8;  // this lane's chunk and its row within a pass of four
    // Destinations of pass i (rows 32 w + 4 i + rq): 128-byte swizzle, (4 i + rq) & 7 = rq + 4 (i & 1).
    const unsigned warp_dst = smem_addr(sK + s * kTileBytes) + (row / 32) * 32 * 128 + rq * 128;
    const unsigned dst_even = warp_dst + ((c8 ^ rq) << 4), dst_odd = warp_dst + ((c8 ^ (rq + 4)) << 4);
    for (int k = 0; k < n_pairs; ++k) {
      const int t = 2 * k + s, j = n_first + t * BN + row;
      const unsigned par = (k - 1) & 1;
      const T* mp = nullptr;
      const T* tp = nullptr;
      const bool ok = j < n_lim && slots.resolve(p, j, mp, tp);
      if (!ok) mp = tp = nullptr;  // a null row address: zeros
      // A 64-column block is wholly main part or wholly tail (D is a multiple of 128). The destination is
      // rebuilt from an opaque base per block so that the blocks' addresses are not all kept live.
      auto issue_block = [&](int jb) {
        unsigned de = dst_even + jb * kBlockBytes, dodd = dst_odd + jb * kBlockBytes;
        asm volatile("" : "+r"(de), "+r"(dodd));
        const bool tail_block = jb >= D / 64;
        const bool pad = DQK != DP && 8 * jb + c8 >= DQK / 8;  // the depth's zero padding
        // Opaque too, so that the eight shuffled row addresses are not shared (and kept live) across blocks.
        unsigned long long own = reinterpret_cast<unsigned long long>(tail_block ? tp : mp);
        asm volatile("" : "+l"(own));
#pragma unroll
        for (int i = 0; i < 8; ++i) {
          const T* rp = reinterpret_cast<const T*>(__shfl_sync(0xffffffffu, own, 4 * i + rq));
          const bool live = rp != nullptr && !pad;
          const T* src = rp + (tail_block ? 64 * jb - D : 64 * jb) + c8 * 8;
          cp_async_16_at((i & 1 ? dodd : de) + i * 512, live ? src : nullptr, live);
        }
        cp_async_commit();
      };
      auto retire = [&](int jb, int pending_after) {
        cp_async_wait_upto(pending_after);
        fence_proxy_async();  // this thread's copies, visible to wgmma
        unsigned fb = full(s, 0);  // opaque, as the destinations: the nine barrier addresses are not kept live
        asm volatile("" : "+r"(fb));
        mbar_arrive(fb + 8 * jb);
      };
      if (k > 0) mbar_wait(empty_l(s), par);
#pragma unroll
      for (int jb = 0; jb < KL; ++jb) issue_block(jb);
      const bool r_free = k == 0 || mbar_test(empty_r(s), par);
      if (!r_free) {  // publish the left blocks before blocking: the consumers may need them to free the right
#pragma unroll
        for (int jb = 0; jb < KL; ++jb) retire(jb, KL - 1 - jb);
        mbar_wait(empty_r(s), par);
      }
      if (MODE == kLatentIndexed) sValid[s * BN + row] = ok;
#pragma unroll
      for (int jb = KL; jb < KB; ++jb) issue_block(jb);
      if (r_free) {
#pragma unroll
        for (int jb = 0; jb < KB; ++jb) retire(jb, KB - 1 - jb);
      } else {
#pragma unroll
        for (int jb = KL; jb < KB; ++jb) retire(jb, KB - 1 - jb);
      }
    }
    return;
  }

  // ---- Consumers: warpgroup wg (0: O_L, tiles 2k; 1: O_R, tiles 2k + 1).
  setmaxnreg_inc<kLatentSeesawConsumerRegs>();
  const int wg = tid / 128, wt = tid % 128, wi = wt / 32;
  cp_async_wait<0>();
  fence_proxy_async();
  named_barrier(5, 256);  // Q landed for both warpgroups

  const float sl = p.scale_log2;
  int vis_end[2];
#pragma unroll
  for (int hf = 0; hf < 2; ++hf) vis_end[hf] = vis_base + (m_base + wi * 16 + lane / 4 + hf * 8) / g;
  const int vis_min = vis_base + m_base / g;
  const int row0 = wi * 16 + lane / 4;  // this thread's rows: row0, row0 + 8

  float o[DV / 2];
#pragma unroll
  for (int i = 0; i < DV / 2; ++i) o[i] = 0.f;
  float m[2] = {-kInf(), -kInf()}, l[2] = {0.f, 0.f};
  float sc[BN / 2];

  // Rescales this thread's O rows by f (skipped, exactly, when every factor of the warp is 1).
  auto rescale = [&](const float (&f)[2]) {
    if (__any_sync(0xffffffffu, f[0] != 1.f || f[1] != 1.f)) {
#pragma unroll
      for (int dt = 0; dt < DV / 8; ++dt) {
        o[dt * 4] *= f[0];
        o[dt * 4 + 1] *= f[0];
        o[dt * 4 + 2] *= f[1];
        o[dt * 4 + 3] *= f[1];
      }
    }
  };
  // S = Q K^T over the full depth for the tile in buffer s, each 64-column block as soon as it landed.
  auto qk = [&](int s, unsigned par) {
    const unsigned kb = smem_addr(sK + s * kTileBytes), qb = smem_addr(sQ);
#pragma unroll
    for (int jb = 0; jb < KB; ++jb) {
      mbar_wait(full(s, jb), par);
      wgmma_fence();
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const unsigned long long da = wgmma_desc_at(qb + jb * (BM * 128) + i * 32, 16, 1024);
        const unsigned long long db = wgmma_desc_at(kb + jb * kBlockBytes + i * 32, 16, 1024);
        Wgmma<T, BN>::template ss<0>(sc, da, db, jb > 0 || i > 0 ? 1 : 0);
      }
    }
    wgmma_commit();
    wgmma_wait<0>();
    fence_regs(sc);
  };
  // Masks the tile's invisible keys to -inf and returns this thread's row maxima (quad-reduced).
  auto mask_max = [&](int s, int t, float (&mx)[2]) {
    const int n0 = n_first + t * BN;
    bool need;
    if constexpr (MODE == kLatentIndexed) need = true;
    else need = n0 + BN > vis_min || n0 + BN > n_lim;
    if (need) {
#pragma unroll
      for (int nt = 0; nt < BN / 8; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int j = nt * 8 + 2 * (lane % 4) + (e & 1);
          bool vis;
          if constexpr (MODE == kLatentIndexed) vis = sValid[s * BN + j] != 0;
          else vis = n0 + j < vis_end[e >> 1] && n0 + j < n_lim;
          if (!vis) sc[nt * 4 + e] = -kInf();
        }
    }
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
      float x = -kInf();
#pragma unroll
      for (int nt = 0; nt < BN / 8; ++nt) x = fmaxf(x, fmaxf(sc[nt * 4 + 2 * hf], sc[nt * 4 + 2 * hf + 1]));
      x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
      mx[hf] = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
    }
  };
  // exp2 of (S - m_new) in place, the row sums added to l.
  auto exp_rows = [&](const float (&mn)[2]) {
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
      const float ms = mn[hf] == -kInf() ? 0.f : mn[hf] * sl;
      float rs = 0.f;
#pragma unroll
      for (int nt = 0; nt < BN / 8; ++nt) {
        const float p0 = fast_exp2(fmaf(sc[nt * 4 + 2 * hf], sl, -ms));
        const float p1 = fast_exp2(fmaf(sc[nt * 4 + 2 * hf + 1], sl, -ms));
        sc[nt * 4 + 2 * hf] = p0;
        sc[nt * 4 + 2 * hf + 1] = p1;
        rs += p0 + p1;
      }
      l[hf] += rs;
    }
  };
  // P into buffer s's P tile: 128-byte-swizzled rows, the layout an A operand reads.
  auto store_p = [&](int s) {
    unsigned char* pt = p_tile(s);
#pragma unroll
    for (int nt = 0; nt < BN / 8; ++nt)
#pragma unroll
      for (int hf = 0; hf < 2; ++hf) {
        const int row = row0 + hf * 8;
        *reinterpret_cast<unsigned*>(pt + swizzle128(row, nt) + (lane % 4) * 4) =
            MmaOp<T>::pack(sc[nt * 4 + 2 * hf], sc[nt * 4 + 2 * hf + 1]);
      }
    fence_proxy_async();  // the generic stores, visible to the warpgroups' wgmma
  };
  // O[:, this warpgroup's half] += P V for buffer s, P from its P tile.
  auto pv_smem = [&](int s) {
    const unsigned vb = smem_addr(sK + s * kTileBytes) + wg * KL * kBlockBytes, pb = smem_addr(p_tile(s));
#pragma unroll
    for (int kk = 0; kk < BN / 16; ++kk)
      Wgmma<T, DV>::template ss<1>(o, wgmma_desc_at(pb + kk * 32, 16, 1024),
                                   wgmma_desc_at(vb + kk * 2048, kBlockBytes, 1024), 1);
  };
  auto release = [&](unsigned bar) {
    __syncwarp();
    if (lane == 0) mbar_arrive(bar);
  };

  // e^(from - to) for the running maximum moving from `from` to `to` (1 while `to` is still -inf).
  auto factor = [&](float from, float to) { return to == -kInf() ? 1.f : fast_exp2((from - to) * sl); };
  // Both warpgroups run one instruction stream (wgmma issue in warpgroup-dependent branches serialises
  // it); only the hand-offs depend on wg. Named barriers: 1 m0 published, 2 m1 published, 3 P0 stored,
  // 4 P1 stored (256 threads: one side arrives, the other waits), 6 / 7 warpgroup 0's / 1's own P tile
  // stored (128: with the fence, every thread's stores visible to the warpgroup's wgmma). A warpgroup
  // cannot arrive on 1 or 3 for pair k + 1 before the other has waited on them for pair k: its Q K^T of
  // pair k + 1 needs buffer 0 refilled, which needs the other's release after those waits (and 2 and 4
  // likewise through barrier 1), so no barrier gathers two pairs' arrivals.
  for (int k = 0; k < n_pairs; ++k) {
    float mx[2], f[2], m0[2], mine[2];
    qk(wg, k & 1);  // S of tile 2k + wg
    mask_max(wg, 2 * k + wg, mx);
    if (wg == 1) named_barrier(1, 256);
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
      m0[hf] = wg == 0 ? fmaxf(m[hf], mx[hf]) : sM[row0 + hf * 8];
      mine[hf] = wg == 0 ? m0[hf] : fmaxf(m0[hf], mx[hf]);  // the maximum this warpgroup's P is relative to
      f[hf] = factor(m[hf], m0[hf]);
      l[hf] *= factor(m[hf], mine[hf]);
      if (lane % 4 == 0) sM[wg * BM + row0 + hf * 8] = mine[hf];
    }
    named_barrier_arrive(1 + wg, 256);
    exp_rows(mine);
    store_p(wg);  // P0 (relative to m0) / P1 (relative to m1)
    named_barrier_arrive(3 + wg, 256);
    rescale(f);
    named_barrier(wg == 0 ? 6 : 3, wg == 0 ? 128 : 256);  // P0: warpgroup 0's own stores, or its arrival
    wgmma_fence();
    pv_smem(0);  // O_L += P0 V0_L; O_R += P0 V0_R
    wgmma_commit();
    wgmma_wait<0>();
    fence_regs(o);
    if (wg == 0) release(empty_l(0));
    release(empty_r(0));
    if (wg == 0) named_barrier(2, 256);
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
      const float m1 = wg == 0 ? sM[BM + row0 + hf * 8] : mine[hf];
      f[hf] = factor(m0[hf], m1);
      if (wg == 0) l[hf] *= f[hf];
      m[hf] = m1;
    }
    rescale(f);
    named_barrier(wg == 0 ? 4 : 7, wg == 0 ? 256 : 128);  // P1: warpgroup 1's arrival, or its own stores
    wgmma_fence();
    pv_smem(1);  // O_L += P1 V1_L; O_R += P1 V1_R
    wgmma_commit();
    wgmma_wait<0>();
    fence_regs(o);
    if (wg == 0) release(empty_l(1));
    release(empty_r(1));
  }

  // Row sums: each warpgroup's, relative to the same final m, added through shared memory.
#pragma unroll
  for (int hf = 0; hf < 2; ++hf) {
    float x = l[hf];
    x += __shfl_xor_sync(0xffffffffu, x, 1);
    x += __shfl_xor_sync(0xffffffffu, x, 2);
    l[hf] = x;
    if (lane % 4 == 0) sL[wg * BM + row0 + hf * 8] = x;
  }
  named_barrier(5, 256);
#pragma unroll
  for (int hf = 0; hf < 2; ++hf) {
    const float lt = l[hf] + sL[(wg ^ 1) * BM + row0 + hf * 8];
    const float ms = m[hf] * sl;
    const int gm = m_base + row0 + hf * 8;
    if (gm >= rows) continue;
    const int t = MODE == kLatentIndexed ? s_tok : gm / g;
    const int h = r * g + (MODE == kLatentIndexed ? gm : gm - (gm / g) * g);
    const float inv = lt > 0.f ? 1.f / lt : 0.f;
    const int col0 = wg * DV + 2 * (lane % 4);
    if constexpr (SPLIT) {
      const long long row = (static_cast<long long>(b) * p.s_q + t) * p.h + h;
      const long long at = static_cast<long long>(split) * p.part_rows + row;
      float* orow = p.o_part + at * D + col0;
#pragma unroll
      for (int dt = 0; dt < DV / 8; ++dt)
        *reinterpret_cast<float2*>(orow + dt * 8) = make_float2(o[dt * 4 + 2 * hf] * inv, o[dt * 4 + 2 * hf + 1] * inv);
      if (wg == 0 && lane % 4 == 0) p.lse_part[at] = lt > 0.f ? ms + log2f(lt) : -kInf();
    } else {
      T* orow = static_cast<T*>(p.o) + b * p.o_sb + static_cast<long long>(t) * p.o_ss + h * p.o_sh + col0;
#pragma unroll
      for (int dt = 0; dt < DV / 8; ++dt)
        *reinterpret_cast<unsigned*>(orow + dt * 8) = MmaOp<T>::pack(o[dt * 4 + 2 * hf] * inv, o[dt * 4 + 2 * hf + 1] * inv);
    }
  }
}

}  // namespace attnjit::kernels
