// nsa_selected_fwd, hopper backend (sm_90a): the selected branch of Native Sparse Attention on warpgroup
// MMA, in transposed form.
//
// A CTA (one warpgroup, 128 threads) attends NH query heads of one (token t, KV head r) pair (NH = the
// group g when g <= 64, else tiles of 64 heads) to the token's flattened slot list, exactly as the portable
// kernel does (nsa_selected_fwd.cuh: key slot j is offset j % E of listed block j / E). A group's 16..64
// heads are too few rows for wgmma's M of 64, so the kernel computes the transposed products:
//   S^T  = K Q^T   (M: the 64 slots of a key tile, N: the NH heads, K: D; both operands K-major),
//   O^T += V^T P^T (M: 64 value columns a wgmma, N: the heads, K: the tile's slots; V^T is V's tile read
//                   M-major, P^T is written to shared memory as [head][slot]).
// A thread's S^T and O^T fragments hold the same head columns, so a head's softmax state (running max and
// this thread's part of the row sum) lives in the registers of the threads holding that column; a tile's
// column maxima are reduced over the 4 warps through shared memory. K and V tiles of 64 slots stream
// through a STAGES-deep cp.async ring in wgmma's 128-byte-swizzled 64-column panels; the token's block
// list is read into shared memory once, so resolving a slot costs no global load.
#pragma once
#include "hopper/sm90.cuh"
#include "hopper/wgmma_ops.cuh"
#include "nsa/nsa_selected_fwd.cuh"

namespace attnjit::kernels {

template <typename T, int D, int NH, int STAGES>
__global__ void __launch_bounds__(kNsaSelHopperThreads) nsa_selected_fwd_hopper(const __grid_constant__ NsaSelectedParams p) {
  static_assert(sizeof(T) == 2, "nsa_selected_fwd_hopper: 16-bit operands");
  static_assert(D == 64 || D == 128, "nsa_selected_fwd_hopper: D is 64 or 128");
  static_assert(NH == 16 || NH == 32 || NH == 48 || NH == 64, "nsa_selected_fwd_hopper: 16, 32, 48 or 64 heads a CTA");
  static_assert(STAGES >= 2 && STAGES <= 4, "nsa_selected_fwd_hopper: 2 to 4 stages");
  static_assert(kNsaSelHopperThreads == 128, "nsa_selected_fwd_hopper: one warpgroup (the loaders assume 128 threads)");
  constexpr int BN = kNsaSelHopperSlots;     // slots per key tile: wgmma's M
  constexpr int kPanel = BN * 64;            // elements of one 64-column panel of a key tile
  constexpr int kTile = D * BN;              // elements of a K (or V) tile
  constexpr int NR = NH / 2;                 // S^T / O^T accumulators a thread (per 64 value columns)
  constexpr int NC = NH / 4;                 // head columns a thread holds
  constexpr int kMT = D / 64;                // value-column wgmma tiles
  constexpr int kIdxCap = kNsaSelHopperIdxCap;
  static_assert(nsa_selected_hopper_smem_bytes(D, NH, STAGES) ==
                    1024 + (2 * STAGES * kTile + NH * D + NH * BN) * 2 + (STAGES * BN + 4 * NH + kIdxCap) * 4,
                "nsa_selected_fwd_hopper: the host's geometry (nsa_selected_fwd_params.cuh)");

  extern __shared__ __align__(128) unsigned char smem_raw[];
  unsigned char* base = align_smem_1024(smem_raw);  // wgmma's swizzled panels need 1024-byte alignment
  T* sK = reinterpret_cast<T*>(base);
  T* sV = sK + STAGES * kTile;
  T* sQ = sV + STAGES * kTile;  // [D / 64][NH][64]
  T* sP = sQ + NH * D;          // [NH][BN]: P^T, K-major for the second product
  int* sValid = reinterpret_cast<int*>(sP + NH * BN);
  float* sRed = reinterpret_cast<float*>(sValid + STAGES * BN);  // [4 warps][NH]
  int* sIdx = reinterpret_cast<int*>(sRed + 4 * NH);

  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int t = blockIdx.x;
  const int r = static_cast<int>(blockIdx.y) / p.m_tiles;
  const int m_base = (static_cast<int>(blockIdx.y) - r * p.m_tiles) * NH;
  const int g = p.group;

  // The token's request and view, its slot list (as the portable kernel's NsaSelSlots).
  NsaSelSlots slots;
  int count = 0;
  {
    const int n = p.token_indices[t * p.ti_st], pos = p.token_indices[t * p.ti_st + p.ti_sc];
    long long limit = 0;
    if (n >= 0 && n < p.n_req && pos >= 0) {
      slots.row0 = p.offsets[n];
      const long long len = static_cast<long long>(p.offsets[n + 1]) - p.offsets[n];
      limit = p.causal ? min(static_cast<long long>(pos) + 1, len) : len;
      limit = min(limit, static_cast<long long>(p.T));
    }
    slots.limit = static_cast<int>(max(limit, 0ll));
    slots.ebs = min(p.block_size, slots.limit);
    count = min(max(p.block_counts[t * p.bc_st + r * p.bc_sh], 0), p.sel);
    slots.n_keys = count * slots.ebs;
    slots.idx = p.block_indices + t * p.bi_st + r * p.bi_sh;
  }
  const int num_tiles = (slots.n_keys + BN - 1) / BN;

  // Q: heads m_base .. + NH into the panels, eight threads a row (rows past the group zero-filled).
  {
    const T* qb = static_cast<const T*>(p.q) + t * p.q_st;
#pragma unroll
    for (int pass = 0; pass < NH / 16; ++pass) {
      const int row = tid / 8 + 16 * pass, gm = m_base + row;
      const bool ok = gm < g;
      const T* src = qb + static_cast<long long>(r * g + gm) * p.q_sh;
#pragma unroll
      for (int c8 = 0; c8 < D / 64; ++c8)
        cp_async_16(sQ + c8 * NH * 64 + row * 64 + ((tid % 8) ^ (row % 8)) * 8, ok ? src + c8 * 64 + (tid % 8) * 8 : nullptr,
                    ok);
    }
  }
  // The listed blocks this CTA reads, once (a longer list reads its tail from global memory).
  for (int u = tid; u < min(count, kIdxCap); u += 128) sIdx[u] = slots.idx[u * p.bi_su];
  __syncthreads();
  auto resolve = [&](int j) {
    return slots.resolve_with(p, j, [&](int u) { return u < kIdxCap ? sIdx[u] : slots.idx[u * p.bi_su]; });
  };

  const T* kb = static_cast<const T*>(p.k) + r * p.k_sh;
  const T* vb = static_cast<const T*>(p.v) + r * p.v_sh;
  // K and V tile i into ring buffer i % STAGES, with its slots' validity; commits a group, an empty one
  // past the last tile, so that group i always holds tile i.
  auto issue = [&](int i) {
    if (i < num_tiles) {
      const int stage = i % STAGES;
      T* dk = sK + stage * kTile;
      T* dv = sV + stage * kTile;
#pragma unroll
      for (int pass = 0; pass < BN / 16; ++pass) {
        const int row = tid / 8 + 16 * pass;
        const long long x = resolve(i * BN + row);
        const bool ok = x >= 0;
        const T* ks = kb + (ok ? x : 0) * p.k_st;
        const T* vs = vb + (ok ? x : 0) * p.v_st;
        const int at = row * 64 + ((tid % 8) ^ (row % 8)) * 8;
#pragma unroll
        for (int c8 = 0; c8 < D / 64; ++c8) {
          const int col = c8 * 64 + (tid % 8) * 8;
          cp_async_16(dk + c8 * kPanel + at, ok ? ks + col : nullptr, ok);
          cp_async_16(dv + c8 * kPanel + at, ok ? vs + col : nullptr, ok);
        }
        if (tid % 8 == 0) sValid[stage * BN + row] = ok;
      }
    }
    cp_async_commit();
  };
#pragma unroll
  for (int i = 0; i < STAGES - 1; ++i) issue(i);  // group 0 also holds Q

  // Fragment coordinates: accumulator e of n8 tile j is (row 16 warp + lane / 4 + 8 (e / 2), column
  // 8 j + 2 (lane % 4) + e % 2); a thread's head columns q = 2 j + e % 2.
  const float scale = p.scale_log2;
  float o[kMT][NR];
  float m_i[NC], l_i[NC];
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
    for (int e = 0; e < NR; ++e) o[mt][e] = 0.f;
#pragma unroll
  for (int q = 0; q < NC; ++q) {
    m_i[q] = -kInf();
    l_i[q] = 0.f;
  }
  const unsigned aQ = smem_addr(sQ), aP = smem_addr(sP);
  const int srow = 16 * warp + lane / 4;  // this thread's first slot row of a tile

  for (int i = 0; i < num_tiles; ++i) {
    cp_async_wait<STAGES - 2>();
    fence_proxy_async();  // this thread's cp.async writes, before wgmma reads them
    __syncthreads();      // tile i landed; every thread is done with tile i - 1
    issue(i + STAGES - 1);
    const int stage = i % STAGES;
    const unsigned aK = smem_addr(sK + stage * kTile), aV = smem_addr(sV + stage * kTile);

    // S^T = K Q^T.
    float s[NR];
    wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < D / 16; ++ks) {
      const unsigned long long da = wgmma_desc_at(aK + (ks / 4) * (kPanel * 2) + (ks % 4) * 32, 16, 1024);
      const unsigned long long db = wgmma_desc_at(aQ + (ks / 4) * (NH * 128) + (ks % 4) * 32, 16, 1024);
      Wgmma<T, NH>::template ss<0>(s, da, db, ks > 0 ? 1 : 0);
    }
    wgmma_commit();
    wgmma_wait<0>();
    fence_regs(s);

    // Mask the invalid slots (the same for every head), then each head column's tile maximum.
    const bool v0 = sValid[stage * BN + srow] != 0, v1 = sValid[stage * BN + srow + 8] != 0;
    float cm[NC];
#pragma unroll
    for (int j = 0; j < NH / 8; ++j)
#pragma unroll
      for (int c = 0; c < 2; ++c) {
        if (!v0) s[4 * j + c] = -kInf();
        if (!v1) s[4 * j + 2 + c] = -kInf();
        float mx = fmaxf(s[4 * j + c], s[4 * j + 2 + c]);
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 4));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 8));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 16));
        cm[2 * j + c] = mx;
      }
    if (lane < 4) {
#pragma unroll
      for (int j = 0; j < NH / 8; ++j)
#pragma unroll
        for (int c = 0; c < 2; ++c) sRed[warp * NH + 8 * j + 2 * lane + c] = cm[2 * j + c];
    }
    named_barrier(1, 128);
#pragma unroll
    for (int j = 0; j < NH / 8; ++j)
#pragma unroll
      for (int c = 0; c < 2; ++c) {
        const int col = 8 * j + 2 * (lane % 4) + c, q = 2 * j + c;
        const float tmax = fmaxf(fmaxf(sRed[col], sRed[NH + col]), fmaxf(sRed[2 * NH + col], sRed[3 * NH + col]));
        // The running maximum moves only by more than 2^8 (online_softmax.cuh's lazy rescaling): the
        // probabilities stay below 2^8, exact in fp32, and most tiles skip the rescale.
        if (softmax_moves(tmax, m_i[q], scale)) {
          const float m_new = fmaxf(m_i[q], tmax);
          const float alpha = m_i[q] == -kInf() ? 1.f : fast_exp2((m_i[q] - m_new) * scale);
          m_i[q] = m_new;
          l_i[q] *= alpha;
#pragma unroll
          for (int mt = 0; mt < kMT; ++mt) {
            o[mt][4 * j + c] *= alpha;
            o[mt][4 * j + 2 + c] *= alpha;
          }
        }
        const float m_scaled = m_i[q] == -kInf() ? 0.f : m_i[q] * scale;
        const float p0 = fast_exp2(fmaf(s[4 * j + c], scale, -m_scaled));
        const float p1 = fast_exp2(fmaf(s[4 * j + 2 + c], scale, -m_scaled));
        l_i[q] += p0 + p1;
        // P^T[head col][slot], 128-byte swizzled rows of BN slots.
        T* prow = sP + col * BN;
        prow[(((srow / 8) ^ (col % 8)) * 8) + srow % 8] = from_float<T>(p0);
        prow[((((srow + 8) / 8) ^ (col % 8)) * 8) + srow % 8] = from_float<T>(p1);
      }
    fence_proxy_async();   // P^T's stores, before wgmma reads them
    named_barrier(1, 128);  // every thread's P^T written; every thread has read sRed

    // O^T += V^T P^T.
    wgmma_fence();
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
      for (int kk = 0; kk < BN / 16; ++kk) {
        const unsigned long long da = wgmma_desc_at(aV + mt * (kPanel * 2) + kk * 2048, kPanel * 2, 1024);
        const unsigned long long db = wgmma_desc_at(aP + kk * 32, 16, 1024);
        Wgmma<T, NH>::template ss<0, 1>(o[mt], da, db, 1);
      }
    wgmma_commit();
    wgmma_wait<0>();
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt) fence_regs(o[mt]);
  }
  cp_async_wait<0>();  // no cp.async may be pending at exit

  // Each head's row sum: this thread's part, over the 8 lanes of its column, then over the 4 warps.
  __syncthreads();  // every thread is past the loop: sRed and the K ring are free
#pragma unroll
  for (int j = 0; j < NH / 8; ++j)
#pragma unroll
    for (int c = 0; c < 2; ++c) {
      float l = l_i[2 * j + c];
      l += __shfl_xor_sync(0xffffffffu, l, 4);
      l += __shfl_xor_sync(0xffffffffu, l, 8);
      l += __shfl_xor_sync(0xffffffffu, l, 16);
      if (lane < 4) sRed[warp * NH + 8 * j + 2 * lane + c] = l;
    }
  __syncthreads();
  // O^T normalised into [head][D + 8] rows in the K ring (rows without a visible key: l = 0, zeros), then
  // written out a 16-byte chunk a thread.
  constexpr int kOPitch = D + 8;
  T* sO = sK;
#pragma unroll
  for (int j = 0; j < NH / 8; ++j)
#pragma unroll
    for (int c = 0; c < 2; ++c) {
      const int col = 8 * j + 2 * (lane % 4) + c;
      const float l = sRed[col] + sRed[NH + col] + sRed[2 * NH + col] + sRed[3 * NH + col];
      const float inv = l > 0.f ? 1.f / l : 0.f;
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt) {
        sO[col * kOPitch + 64 * mt + srow] = from_float<T>(o[mt][4 * j + c] * inv);
        sO[col * kOPitch + 64 * mt + srow + 8] = from_float<T>(o[mt][4 * j + 2 + c] * inv);
      }
    }
  __syncthreads();
  for (int e = tid; e < NH * (D / 8); e += 128) {
    const int n = e / (D / 8), ch = e % (D / 8), gm = m_base + n;
    if (gm >= g) continue;
    T* orow = static_cast<T*>(p.o) + t * p.o_st + static_cast<long long>(r * g + gm) * p.o_sh;
    *reinterpret_cast<uint4*>(orow + ch * 8) = *reinterpret_cast<const uint4*>(sO + n * kOPitch + ch * 8);
  }
}

}  // namespace attnjit::kernels
