// gqa_fwd / gqa_varlen_fwd, hopper backend (sm_90a): a warp-specialised FlashAttention forward on
// warpgroup MMAs (wgmma) with TMA loads.
//
// One CTA computes BM = 64 NWG packed query rows of one KV head (packed row m = (query i = m / g,
// head-in-group m % g), as in the portable kernel, so the g heads of a group share every K/V tile). Warps
// 0 .. 4 NWG - 1 are NWG consumer warpgroups that own 64 rows each (240 registers per thread after
// setmaxnreg with two, 160 with three); the last four warps are the producer warpgroup (24 registers), of
// which one thread issues the TMA loads of
// K and V tiles (BN keys, 64-column boxes, 128-byte swizzle) into a two-stage ring guarded by "full"
// (transaction-count) and "empty" (one arrival per consumer warp) mbarriers. Q is loaded once by its
// warpgroup with cp.async into the same swizzled layout. Q_TMA (the default, tune.gqa_fwd_q_tma): the producer
// thread loads Q with TMA before the first K tile where a warpgroup's 64 packed rows are one box (hp.q_tma:
// g divides 64 or is a multiple of it, q a TMA source; else the consumers copy it as above), and the
// mainloop makes each k-step's wgmma descriptors by one add (hopper_issue_qk's DESC_ADD).
//
// The mainloop is hopper/attention_core.cuh. Per key tile a consumer warpgroup runs S = Q K^T as
// D/16 wgmma (both operands in shared memory, K-major), releases K, applies masks, softcap and the online softmax in registers (the wgmma
// accumulator has the m16n8 fragment layout per warp, so each thread holds two rows), and runs
// O += P V as BN/16 wgmma with P from registers and V N-major in shared memory. Two warpgroups (D <= 128)
// take turns to issue (ping-pong, so one's softmax runs under the other's GEMMs); three (D 64: 192-row
// tiles, a third less K/V shared-memory traffic per row) interleave freely.
#pragma once
#include "common/band_mask.cuh"
#include "common/kv_rows.cuh"
#include "dense/gqa_fwd.cuh"
#include "hopper/attention_core.cuh"
#include "dense/gqa_fwd_hopper_params.cuh"

namespace attnjit::kernels {

// Paged keys (gqa_paged_fwd's prefill path): the producer warpgroup's 128 threads copy the BN rows of
// each K and V tile from their pool pages (key j: page page_table[b, j / page_size], slot j % page_size;
// rows past kv_len zero) with cp.async into the ring's swizzled layout, thread i taking 16-byte chunks
// i, i + 128, ... A tile is announced (128 arrivals on each of its full barriers) once the thread's copies
// of it have landed and are fenced for the async proxy. Thread 0 also writes the tile's (n0, valid)
// record, as the TMA producer does.
// Order, for tile t: K(t + 1) is issued, then tile t is announced once its copies landed, then V(t + 1).
// K(t + 1) reuses the K stage of tile t - 1, which the consumers free with that tile's S = Q K^T, before
// they wait for tile t; V(t + 1) reuses the V stage of tile t - 1, which they free only after P V of
// t - 1, which the overlapped mainloop issues after it has tile t's K: so V(t + 1) waits until tile t is
// announced. (Issuing all of tile t + 1 before announcing tile t deadlocked from the third tile on.)
template <typename T, int D, int BN, typename Ring>
__device__ __forceinline__ void hopper_produce_paged(const Ring& ring, const GqaFwdParams& p, int b, int r, int n_first,
                                                     int num_tiles, int kv_len) {
  constexpr int kChunks = D / 8;
  const int ptid = threadIdx.x - 128 * Ring::kWarpgroups;
  const int* page_row = p.page_table + b * p.pt_sb;
  // One operand (K or V) of tile t into its stage, after the consumers freed it; one cp.async group.
  auto issue = [&](int t, bool is_v) {
    const int s = t & 1;
    const int n0 = n_first + t * BN;
    mbar_wait(is_v ? ring.empty_v(s) : ring.empty_k(s), ((t >> 1) & 1) ^ 1);
    // The tile's record, read by the consumers once the full_k barrier completes (this thread's arrival,
    // which releases the write, is one of the 128 that complete it).
    if (!is_v && ptid == 0) {
      ring.records[2 * s] = n0;
      ring.records[2 * s + 1] = BN;
    }
    const T* src = static_cast<const T*>(is_v ? p.v : p.k) + static_cast<long long>(r) * (is_v ? p.v_sh : p.k_sh);
    const long long sp = is_v ? p.v_sp : p.k_sp, ss = is_v ? p.v_ss : p.k_ss;
    unsigned char* dst0 = (is_v ? ring.v : ring.k) + s * Ring::kStageBytes;
    for (int idx = ptid; idx < BN * kChunks; idx += 128) {
      const int row = idx / kChunks, ch = idx % kChunks;
      const int j = n0 + row;
      const bool valid = j < kv_len;
      long long off = 0;
      if (valid) {
        const int page = __ldg(page_row + (j / p.page_size) * p.pt_sp);
        off = static_cast<long long>(page) * sp + static_cast<long long>(j % p.page_size) * ss + ch * 8;
      }
      cp_async_16(dst0 + (ch / 8) * (BN * 128) + swizzle128(row, ch % 8), src + off, valid);
    }
    cp_async_commit();
  };
  if (num_tiles == 0) return;
  issue(0, false);
  issue(0, true);
  for (int t = 0; t < num_tiles; ++t) {
    const bool more = t + 1 < num_tiles;
    if (more) issue(t + 1, false);
    // Tile t's groups are complete when at most the one just issued (K(t + 1)) is pending.
    if (more) cp_async_wait<1>();
    else cp_async_wait<0>();
    fence_proxy_async();
    mbar_arrive(ring.full_k(t & 1));
    mbar_arrive(ring.full_v(t & 1));
    if (more) issue(t + 1, true);
  }
}

// A consumer warp's epilogue: normalises its 16 rows of O (packed rows m_warp .. m_warp + 15 of KV head
// r; a thread's two rows m_warp + lane / 4 + 8 hf), folds in the sink, writes O (ob: the head group's
// base) and the natural-log LSE.
template <typename T, int D, bool VARLEN, bool SINKS>
__device__ __forceinline__ void gqa_fwd_hopper_store(const GqaFwdParams& p, const HopperSoftmaxState<D>& st,
                                                     float score_scale, T* ob, int b, int r, int q_off, int q_len,
                                                     int m_warp) {
  using Mma = MmaOp<T>;
  constexpr int kDT = D / 8;
  constexpr float kLn2 = 0.69314718055994530942f;
  const int lane = threadIdx.x % 32;
  const int g = p.group;
#pragma unroll
  for (int hf = 0; hf < 2; ++hf) {
    float l = st.l[hf];
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    float m = st.m[hf] * score_scale;
    const int gm = m_warp + lane / 4 + hf * 8;
    const int i = gm / g, hg = gm - i * g;
    const int h = r * g + hg;
    float empty_lse = -kInf();
    float out_scale = 1.f;
    if constexpr (SINKS) fold_sink(i < q_len ? p.sinks[h * p.sinks_s] : -kInf(), m, l, out_scale, empty_lse);
    const float inv = l > 0.f ? out_scale / l : 0.f;
    if (i < q_len) {
      T* orow = ob + static_cast<long long>(i) * p.o_ss + hg * p.o_sh + 2 * (lane % 4);
#pragma unroll
      for (int dt = 0; dt < kDT; ++dt)
        *reinterpret_cast<unsigned*>(orow + dt * 8) = Mma::pack(st.o[dt * 4 + 2 * hf] * inv, st.o[dt * 4 + 2 * hf + 1] * inv);
      if (p.lse && lane % 4 == 0) {
        const float lse = l > 0.f ? (m + log2f(l)) * kLn2 : empty_lse;
        if constexpr (VARLEN) p.lse[static_cast<long long>(q_off + i) * p.lse_ss + h * p.lse_sh] = lse;
        else p.lse[b * p.lse_sb + h * p.lse_sh + static_cast<long long>(i) * p.lse_ss] = lse;
      }
    }
  }
}

// One CTA, one work tile: query tile blockIdx.x (varlen: the linear tile index over the requests) of KV
// head blockIdx.y and batch blockIdx.z.
template <typename T, int D, int BN, int NWG, bool CAUSAL, bool WINDOW, bool SOFTCAP, bool VARLEN, int KV_MODE, bool SINKS,
          bool Q_TMA>
__device__ __forceinline__ void gqa_fwd_hopper_one_tile(const GqaFwdHopperParams& hp) {
  static_assert(sizeof(T) == 2, "gqa_fwd_hopper: 16-bit operands");
  static_assert(BN == 64 || BN == 128, "gqa_fwd_hopper: BN is 64 or 128");
  static_assert(NWG == 2 || (NWG == 3 && D == 64), "gqa_fwd_hopper: two consumer warpgroups, or three at D 64");
  static_assert(KV_MODE == kKvDense || ((KV_MODE == kKvPacked || KV_MODE == kKvPaged) && VARLEN) ||
                    (KV_MODE == kKvCompressed && VARLEN && CAUSAL && !WINDOW),
                "gqa_fwd_hopper: dense keys, or packed, paged or (causal) compressed keys with packed queries");
  static_assert(!SINKS || VARLEN, "gqa_fwd_hopper: sinks come with packed queries");
  using Mma = MmaOp<T>;
  constexpr int BM = 64 * NWG, kDT = D / 8;
  constexpr bool kPaged = KV_MODE == kKvPaged;
  const GqaFwdParams& p = hp.p;
  extern __shared__ unsigned char smem_raw[];
  static_assert(HopperRing<D, BN, NWG>::kSmemBytes == gqa_fwd_hopper_smem_bytes(D, BN, NWG) &&
                    gqa_fwd_hopper_threads(NWG) == 128 * (NWG + 1),
                "gqa_fwd_hopper: the host's launch geometry (gqa_fwd_hopper_params.cuh)");
  const HopperRing<D, BN, NWG> ring(smem_raw);

  const int r = blockIdx.y;  // KV head
  const int g = p.group;
  int b, tile, q_off = 0, kv_off = 0, q_len, kv_len, kv_old = 0;
  if constexpr (VARLEN) {
    if (!find_varlen_tile<BM>(p, b, tile)) return;
    q_off = p.cu_q[b];
    q_len = p.cu_q[b + 1] - q_off;
  } else {
    b = blockIdx.z;
    tile = blockIdx.x;
    q_len = p.s_q;
  }
  kv_extent<KV_MODE>(p, b, q_len, kv_off, kv_len, kv_old);
  const int m_base = tile * BM;
  if (m_base >= q_len * g) return;

  // The band of keys any row of this tile can see, and the tiles that cover it (as the portable kernel).
  const int shift = kv_len - q_len;
  const int i_min = m_base / g;
  const int i_max = min(q_len - 1, (m_base + BM - 1) / g);
  const int p_min = key_position<KV_MODE>(i_min, shift, p.cmp_bs), p_max = key_position<KV_MODE>(i_max, shift, p.cmp_bs);
  int lo = 0, hi = kv_len;
  band_keys<CAUSAL, WINDOW>(p_min, p_max, p.window_left, p.window_right, lo, hi);
  const int n_first = lo / BN * BN;
  const int num_tiles = hi > n_first ? (hi - n_first + BN - 1) / BN : 0;

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (threadIdx.x == 0) ring.init(kPaged ? 128 : 1, /*q_barriers=*/Q_TMA);
  __syncthreads();

  if (warp >= 4 * NWG) {
    // Producer warpgroup: one thread issues Q (Q_TMA and hp.q_tma) and then K(t) and V(t) for every tile
    // (TMA); paged keys: all 128 threads copy rows with cp.async (hopper_produce_paged), after the first
    // has issued Q.
    setmaxnreg_dec<gqa_fwd_hopper_producer_regs(kPaged)>();
    // Warpgroup w's rows m0 = m_base + 64 w start at query m0 / g, head-in-group m0 % g (0 unless g > 64);
    // rows past the request or the batch's queries are never stored (TMA fills those past the tensor with
    // zeros; a packed request's may read the next request's queries).
    auto produce_q = [&]() {
      const TmaMap* qmap = reinterpret_cast<const TmaMap*>(hp.q_map);
#pragma unroll
      for (int w = 0; w < NWG; ++w) {
        const int m0 = m_base + w * 64, i0 = m0 / g;
        ring.produce_q(qmap, w, r * g + (m0 - i0 * g), (VARLEN ? q_off : 0) + i0, VARLEN ? 0 : b);
      }
    };
    if constexpr (kPaged) {
      if (Q_TMA && hp.q_tma && threadIdx.x == 128 * NWG) produce_q();
      hopper_produce_paged<T, D, BN>(ring, p, b, r, n_first, num_tiles, kv_len);
      return;
    }
    if (warp == 4 * NWG && lane == 0) {
      if (Q_TMA && hp.q_tma) produce_q();
      const TmaMap* kmap = reinterpret_cast<const TmaMap*>(hp.k_map);
      const TmaMap* vmap = reinterpret_cast<const TmaMap*>(hp.v_map);
      tma_prefetch_map(kmap);
      tma_prefetch_map(vmap);
      constexpr bool kPackedKeys = KV_MODE == kKvPacked || KV_MODE == kKvCompressed;
      const int row0 = kPackedKeys ? kv_off : 0;
      const int bz = kPackedKeys ? 0 : b;
      for (int t = 0; t < num_tiles; ++t) {
        const int n0 = n_first + t * BN;
        ring.produce(t, kmap, vmap, r, row0 + n0, bz, n0, BN);
      }
    }
    return;
  }

  // Consumer warpgroups.
  setmaxnreg_inc<gqa_fwd_hopper_consumer_regs(NWG, kPaged)>();
  const int wg = warp / 4, wq = warp % 4;
  const T* qb = static_cast<const T*>(p.q) + (VARLEN ? q_off * p.q_ss : b * p.q_sb) + static_cast<long long>(r) * g * p.q_sh;
  T* ob = static_cast<T*>(p.o) + (VARLEN ? q_off * p.o_ss : b * p.o_sb) + static_cast<long long>(r) * g * p.o_sh;
  if (Q_TMA && hp.q_tma) {
    ring.wait_q_tma(wg);
  } else {
    ring.template load_q<T>(wg, [&](int lr) -> const T* {
      const int gm = m_base + wg * 64 + lr, i = gm / g;
      return i < q_len ? qb + static_cast<long long>(i) * p.q_ss + (gm - i * g) * p.q_sh : nullptr;
    });
  }

  const float score_scale = SOFTCAP ? 1.f : p.scale_log2;
  int row_pos[2];
#pragma unroll
  for (int hf = 0; hf < 2; ++hf)
    row_pos[hf] = key_position<KV_MODE>((m_base + wg * 64 + wq * 16 + lane / 4 + hf * 8) / g, shift, p.cmp_bs);

  HopperSoftmaxState<D> st;
  st.init();
  auto need = [&](int n0, int) {
    // The band's edges as band_edge (common/band_mask.cuh) computes them, written out (see there).
    bool need_mask = n0 + BN > kv_len;
    if constexpr (CAUSAL) need_mask = need_mask || n0 + BN - 1 > p_min;
    if constexpr (WINDOW) {
      need_mask = need_mask || (p.window_left >= 0 && n0 < p_max - p.window_left) ||
                  (p.window_right >= 0 && n0 + BN - 1 > p_min + p.window_right);
    }
    return need_mask;
  };
  auto visible = [&](int n0, int, int hf, int jl) {
    return key_visible<CAUSAL, WINDOW>(n0 + jl, row_pos[hf], kv_len, p.window_left, p.window_right);
  };
  hopper_mainloop<T, D, BN, SOFTCAP, NWG, (NWG == 2 && D <= 128), Q_TMA>(ring, wg, num_tiles, need, visible, score_scale,
                                                                         p.softcap_log2, p.softcap_inv_scale, st);

  // Normalise, fold in the sink, write O and the natural-log LSE (as gqa_fwd_hopper_store, written out: the
  // one-tile kernels keep their machine code).
  constexpr float kLn2 = 0.69314718055994530942f;
#pragma unroll
  for (int hf = 0; hf < 2; ++hf) {
    float l = st.l[hf];
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    float m = st.m[hf] * score_scale;
    const int gm = m_base + wg * 64 + wq * 16 + lane / 4 + hf * 8;
    const int i = gm / g, hg = gm - i * g;
    const int h = r * g + hg;
    float empty_lse = -kInf();
    float out_scale = 1.f;
    if constexpr (SINKS) fold_sink(i < q_len ? p.sinks[h * p.sinks_s] : -kInf(), m, l, out_scale, empty_lse);
    const float inv = l > 0.f ? out_scale / l : 0.f;
    if (i < q_len) {
      T* orow = ob + static_cast<long long>(i) * p.o_ss + hg * p.o_sh + 2 * (lane % 4);
#pragma unroll
      for (int dt = 0; dt < kDT; ++dt)
        *reinterpret_cast<unsigned*>(orow + dt * 8) = Mma::pack(st.o[dt * 4 + 2 * hf] * inv, st.o[dt * 4 + 2 * hf + 1] * inv);
      if (p.lse && lane % 4 == 0) {
        const float lse = l > 0.f ? (m + log2f(l)) * kLn2 : empty_lse;
        if constexpr (VARLEN) p.lse[static_cast<long long>(q_off + i) * p.lse_ss + h * p.lse_sh] = lse;
        else p.lse[b * p.lse_sb + h * p.lse_sh + static_cast<long long>(i) * p.lse_ss] = lse;
      }
    }
  }
}

// ---- The persistent kernel (PERSISTENT: gqa_fwd / gqa_varlen_fwd on TMA keys) ----
// The grid is at most one CTA per SM. CTA c computes the work tiles c, c + gridDim.x, c + 2 gridDim.x, ...
// of one static order (gqa_fwd_hopper_work); its producer thread and its consumer warpgroups derive the same
// sequence, so they share no scheduler state. One K/V ring serves all of a CTA's work tiles: the producer
// and the consumers count its tiles across work tiles (hopper_key_loop's t0), so the producer loads the next
// work tile's first K/V while the consumers finish the last P V, normalise and store O. A consumer
// warpgroup copies its next Q rows (cp.async) once its own last wgmma of a work tile has completed and
// before it stores that tile's O, so the copy lands under the store. Ping-pong turns (two warpgroups) carry
// on across work tiles: one start before the first and one finish after the last.

// A work tile and what the producer and the consumers both derive from it: (batch or request b, KV head r,
// query tile), the query and key extents, the band's key positions and the ring tiles that cover it.
struct GqaFwdHopperWork {
  int b, r, tile;
  int q_off, q_len, kv_off, kv_len;
  int m_base, shift, p_min, p_max;
  int n_first, num_tiles;
};

// Work tile `index` of the static order; false past the last. Causal masks take the heaviest tiles first
// (longest-processing-time order, for the tail). Dense queries: gqa_fwd_hopper_dense_tile (the (batch, KV
// head) pairs in sections whose K and V fit in L2 (section_pairs); within a section the query tiles from
// the last). Packed queries: KV head fastest, then the requests' tiles (find_varlen_tile_at, a warp-wide
// scan, so every lane of the warp calls it with the same index), each request's from its last under a
// causal mask. Without a causal mask tiles are equally heavy.
template <int BM, int BN, bool CAUSAL, bool WINDOW, bool VARLEN, int KV_MODE>
__device__ __forceinline__ bool gqa_fwd_hopper_work(const GqaFwdHopperParams& hp, int index, GqaFwdHopperWork& w) {
  const GqaFwdParams& p = hp.p;
  const int g = p.group;
  w.q_off = 0;
  w.kv_off = 0;
  if constexpr (VARLEN) {
    w.r = index % p.h_kv;
    if (!find_varlen_tile_at<BM>(p, index / p.h_kv, w.b, w.tile)) return false;
    w.q_off = p.cu_q[w.b];
    w.q_len = p.cu_q[w.b + 1] - w.q_off;
    if constexpr (CAUSAL) w.tile = (w.q_len * g + BM - 1) / BM - 1 - w.tile;
  } else {
    const int tiles = (p.s_q * g + BM - 1) / BM;
    const int pairs = p.batch * p.h_kv;
    if (index >= tiles * pairs) return false;
    const GqaFwdHopperTile t = gqa_fwd_hopper_dense_tile(index, tiles, pairs, hp.section_pairs, CAUSAL);
    w.tile = t.tile;
    w.b = t.pair / p.h_kv;
    w.r = t.pair - w.b * p.h_kv;
    w.q_len = p.s_q;
  }
  int kv_old = 0;
  kv_extent<KV_MODE>(p, w.b, w.q_len, w.kv_off, w.kv_len, kv_old);
  w.m_base = w.tile * BM;
  // As the one-tile kernel: the band of keys any row of this tile can see, and the ring tiles that cover it.
  w.shift = w.kv_len - w.q_len;
  const int i_min = w.m_base / g;
  const int i_max = min(w.q_len - 1, (w.m_base + BM - 1) / g);
  w.p_min = key_position<KV_MODE>(i_min, w.shift, p.cmp_bs);
  w.p_max = key_position<KV_MODE>(i_max, w.shift, p.cmp_bs);
  int lo = 0, hi = w.kv_len;
  band_keys<CAUSAL, WINDOW>(w.p_min, w.p_max, p.window_left, p.window_right, lo, hi);
  w.n_first = lo / BN * BN;
  w.num_tiles = hi > w.n_first ? (hi - w.n_first + BN - 1) / BN : 0;
  return true;
}

template <typename T, int D, int BN, int NWG, bool CAUSAL, bool WINDOW, bool SOFTCAP, bool VARLEN, int KV_MODE, bool SINKS>
__device__ __forceinline__ void gqa_fwd_hopper_persistent(const GqaFwdHopperParams& hp) {
  static_assert(sizeof(T) == 2, "gqa_fwd_hopper: 16-bit operands");
  static_assert(BN == 64 || BN == 128, "gqa_fwd_hopper: BN is 64 or 128");
  static_assert(NWG == 2 || (NWG == 3 && D == 64), "gqa_fwd_hopper: two consumer warpgroups, or three at D 64");
  static_assert(KV_MODE == kKvDense || (KV_MODE == kKvPacked && VARLEN),
                "gqa_fwd_hopper: the persistent kernel takes dense keys, or packed keys with packed queries (TMA)");
  static_assert(!SINKS || VARLEN, "gqa_fwd_hopper: sinks come with packed queries");
  constexpr int BM = 64 * NWG;
  constexpr bool kPingPong = NWG == 2 && D <= 128;
  const GqaFwdParams& p = hp.p;
  extern __shared__ unsigned char smem_raw[];
  static_assert(HopperRing<D, BN, NWG>::kSmemBytes == gqa_fwd_hopper_smem_bytes(D, BN, NWG) &&
                    gqa_fwd_hopper_threads(NWG) == 128 * (NWG + 1),
                "gqa_fwd_hopper: the host's launch geometry (gqa_fwd_hopper_params.cuh)");
  const HopperRing<D, BN, NWG> ring(smem_raw);
  const int g = p.group;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (threadIdx.x == 0) ring.init(1);
  __syncthreads();

  if (warp >= 4 * NWG) {
    // Producer warpgroup: its first warp walks the work tiles (all lanes: the varlen scan is warp-wide),
    // lane 0 issues K(t) and V(t) of every ring tile t by TMA.
    setmaxnreg_dec<gqa_fwd_hopper_producer_regs(false)>();
    if (warp != 4 * NWG) return;
    const TmaMap* kmap = reinterpret_cast<const TmaMap*>(hp.k_map);
    const TmaMap* vmap = reinterpret_cast<const TmaMap*>(hp.v_map);
    if (lane == 0) {
      tma_prefetch_map(kmap);
      tma_prefetch_map(vmap);
    }
    constexpr bool kPackedKeys = KV_MODE == kKvPacked;
    int ring_t = 0;  // ring tiles issued so far
    for (int index = blockIdx.x;; index += gridDim.x) {
      GqaFwdHopperWork w;
      if (!gqa_fwd_hopper_work<BM, BN, CAUSAL, WINDOW, VARLEN, KV_MODE>(hp, index, w)) break;
      if (lane == 0) {
        const int row0 = kPackedKeys ? w.kv_off : 0;
        const int bz = kPackedKeys ? 0 : w.b;
        for (int t = 0; t < w.num_tiles; ++t) {
          const int n0 = w.n_first + t * BN;
          ring.produce(ring_t + t, kmap, vmap, w.r, row0 + n0, bz, n0, BN);
        }
      }
      ring_t += w.num_tiles;
      __syncwarp();
    }
    return;
  }

  // Consumer warpgroups.
  setmaxnreg_inc<gqa_fwd_hopper_consumer_regs(NWG, false)>();
  const int wg = warp / 4, wq = warp % 4;
  const HopperPingPong<kPingPong> turn{wg};
  turn.start();
  const float score_scale = SOFTCAP ? 1.f : p.scale_log2;
  // Query rows of work tile w's warpgroup wg (lr: 0..63), nullptr past its request.
  auto issue_q = [&](const GqaFwdHopperWork& w) {
    const T* qb = static_cast<const T*>(p.q) + (VARLEN ? w.q_off * p.q_ss : w.b * p.q_sb) +
                  static_cast<long long>(w.r) * g * p.q_sh;
    const int m0 = w.m_base + wg * 64;
    ring.template issue_q<T>(wg, [&](int lr) -> const T* {
      const int gm = m0 + lr, i = gm / g;
      return i < w.q_len ? qb + static_cast<long long>(i) * p.q_ss + (gm - i * g) * p.q_sh : nullptr;
    });
  };
  int index = blockIdx.x;
  GqaFwdHopperWork w;
  bool have = gqa_fwd_hopper_work<BM, BN, CAUSAL, WINDOW, VARLEN, KV_MODE>(hp, index, w);
  if (have) {
    issue_q(w);
    ring.wait_q(wg);
  }
  int ring_t = 0;  // ring tiles consumed so far
  while (have) {
    int row_pos[2];
#pragma unroll
    for (int hf = 0; hf < 2; ++hf)
      row_pos[hf] = key_position<KV_MODE>((w.m_base + wg * 64 + wq * 16 + lane / 4 + hf * 8) / g, w.shift, p.cmp_bs);
    const int kv_len = w.kv_len, p_min = w.p_min, p_max = w.p_max;
    HopperSoftmaxState<D> st;
    st.init();
    auto need = [&](int n0, int) {
      // The band's edges as band_edge (common/band_mask.cuh) computes them, written out (see there).
      bool need_mask = n0 + BN > kv_len;
      if constexpr (CAUSAL) need_mask = need_mask || n0 + BN - 1 > p_min;
      if constexpr (WINDOW) {
        need_mask = need_mask || (p.window_left >= 0 && n0 < p_max - p.window_left) ||
                    (p.window_right >= 0 && n0 + BN - 1 > p_min + p.window_right);
      }
      return need_mask;
    };
    auto visible = [&](int n0, int, int hf, int jl) {
      return key_visible<CAUSAL, WINDOW>(n0 + jl, row_pos[hf], kv_len, p.window_left, p.window_right);
    };
    hopper_key_loop<T, D, BN, SOFTCAP, NWG, (NWG == 3)>(ring, wg, w.num_tiles, need, visible, score_scale,
                                                         p.softcap_log2, p.softcap_inv_scale, st, turn, ring_t);
    ring_t += w.num_tiles;

    // The next work tile's Q, copied while this one's O is stored.
    index += gridDim.x;
    GqaFwdHopperWork next;
    have = gqa_fwd_hopper_work<BM, BN, CAUSAL, WINDOW, VARLEN, KV_MODE>(hp, index, next);
    if (have) {
      named_barrier(1 + wg, 128);  // every warp of the warpgroup is past its last wgmma that read Q
      issue_q(next);
    }
    T* ob = static_cast<T*>(p.o) + (VARLEN ? w.q_off * p.o_ss : w.b * p.o_sb) + static_cast<long long>(w.r) * g * p.o_sh;
    gqa_fwd_hopper_store<T, D, VARLEN, SINKS>(p, st, score_scale, ob, w.b, w.r, w.q_off, w.q_len,
                                              w.m_base + wg * 64 + wq * 16);
    if (have) {
      ring.wait_q(wg);
      w = next;
    }
  }
  turn.finish();
}

// Q_TMA applies to the one-tile kernel (the persistent kernel copies each work tile's Q itself).
template <typename T, int D, int BN, int NWG, bool CAUSAL, bool WINDOW, bool SOFTCAP, bool VARLEN, int KV_MODE, bool SINKS,
          bool PERSISTENT, bool Q_TMA>
__global__ void __launch_bounds__(128 * (NWG + 1), 1) gqa_fwd_hopper(const __grid_constant__ GqaFwdHopperParams hp) {
  static_assert(!(PERSISTENT && Q_TMA), "gqa_fwd_hopper: Q by TMA is the one-tile kernel's");
  if constexpr (PERSISTENT) gqa_fwd_hopper_persistent<T, D, BN, NWG, CAUSAL, WINDOW, SOFTCAP, VARLEN, KV_MODE, SINKS>(hp);
  else gqa_fwd_hopper_one_tile<T, D, BN, NWG, CAUSAL, WINDOW, SOFTCAP, VARLEN, KV_MODE, SINKS, Q_TMA>(hp);
}

}  // namespace attnjit::kernels
