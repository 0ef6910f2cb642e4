// The hopper (sm_90a) attention backward main kernel shared by bsa_bwd and gqa_bwd: wgmma with TMA
// loads. It replaces only the main kernel of the portable launch sequence (templates/common/
// attention_bwd.cuh): prep (lse2, delta, zeroed dq_acc) and the final dq kernel (and bsa_bwd's routing
// and scan) are shared with the portable backend; the schedule (RoutedSlots, DenseSlots) says which
// 64-row query slots meet each key block and whether keys after the query row are hidden (causal).
//
// One CTA per (key block, KV head, batch), as the portable kernel. BS / 64 consumer warpgroups own 64
// keys each; one producer warp loads K and V of the block once, then walks the schedule's query slots
// (64 query rows of one query head of the group) and loads each slot's Q, dO (TMA, 64-column boxes,
// 128-byte swizzle; lane 0) and lse2, delta (plain copies, all lanes) into a two-stage ring.
// Per slot, per consumer warpgroup (M = its 64 keys, N = the slot's 64 query rows):
//   S^T = K Q^T, dP^T = V dO^T               (SS, both operands K-major)
//   P^T = exp2(S^T scale log2(e) - lse2)      (0 for hidden keys), dS^T = P^T (dP^T - delta)
//   dV += P^T dO, dK += dS^T Q                (RS: P^T, dS^T from registers; dO, Q N-major)
//   dS^T -> shared memory; a barrier over the consumer warpgroups; then per 64-column chunk of D:
//   dQ_chunk = dS K_chunk                     (SS: dS^T read M-major, K N-major), added to dq_acc: with
//   128 keys staged in one of two (D = 64: three) shared-memory tiles, which the dQ-writer warp adds with one
//   TMA reduce-add per 32-column box while the consumers go on to the next slot; with 64 keys by red.add.
// At the end dK * scale and dV are stored for every key row < S_kv of the block (zeros when unreached).
//
// Registers per consumer thread (D = 128): dK 64 + dV 64 fp32 accumulators across slots, S^T 32 + dP^T
// 32 per slot, P^T / dS^T fragments 16 + 16, a dQ chunk 32 (ptxas: no spills, no wgmma serialisation).
// Shared memory (D = 128): K, V 2 x BS x 256 B, two ring stages of 32 KB + 1 KB, dS^T BS x 128 B per
// buffer (two at BS = 128), two dQ staging tiles of 32 KB (BS = 128): 227 KB at BS = 128 (the most a CTA may
// have; the mbarriers sit in the ring's first stage; D = 64 has a third tile, 197 KB), 107 KB at BS = 64 (two
// CTAs per SM, one consumer warpgroup each).
// dQ accumulates with fp32 atomics: not bitwise deterministic, except under a deterministic schedule,
// where the dQ-writer warp waits for the slot's turn before its reduce-add and passes it on once the add
// completed, with up to two slots' adds in flight. The consumers wait only when every staging tile is still
// queued, so the turn chain's stalls stay off the tensor cores until the writer is that many slots behind.
#pragma once
#include "common/attention_bwd.cuh"
#include "hopper/attention_bwd_params.cuh"
#include "hopper/attention_core.cuh"  // hold_regs, sm90.cuh

namespace attnjit::kernels {

// Deterministic dQ: passes a slot's turn (its counter sem) once this CTA's reduce-adds into it are done (not
// only read): every bulk group issued so far but the last PENDING has completed, the proxy fence orders
// those writes before this thread's generic accesses, and the release reduction orders them before the
// turn. One thread issued every add, so a release suffices; the full fence.sc of attn_bwd_pass_turn
// (__threadfence) cost 3-13% of the deterministic kernel's time on the H100 (2026-12-06).
template <int PENDING = 0>
__device__ __forceinline__ void attn_bwd_pass_turn_after_bulk(int* sem) {
  bulk_wait<PENDING>();
  fence_proxy_async_global();
  asm volatile("red.release.gpu.global.add.s32 [%0], 1;\n" ::"l"(sem) : "memory");
}

// The mbarriers of either body (thread 0, before the CTA's first barrier), from bar0 on: K/V full; per ring
// stage full (every producer lane, each after its lse2 / delta store; lane 0 with the bytes) and empty (every
// consumer thread, after its last read of the stage); per dQ staging tile full (every consumer thread) and
// empty (the dQ writer).
template <int D, int BS>
__device__ __forceinline__ void attn_bwd_hopper_init_barriers(unsigned bar0) {
  constexpr AttnBwdHopperLayout L{D, BS};
  constexpr int S = L.stages(), NWG = L.consumer_warpgroups(), kQ = L.dq_tiles();
  mbar_init(bar0, 1);
  for (int s = 0; s < S; ++s) {
    mbar_init(bar0 + 8u + 8u * s, 32);
    mbar_init(bar0 + 8u * (1 + S) + 8u * s, 128 * NWG);
  }
  if constexpr (L.dq_tma()) {
    for (int q = 0; q < kQ; ++q) {
      mbar_init(bar0 + 8u * (1 + 2 * S) + 8u * q, 128 * NWG);
      mbar_init(bar0 + 8u * (1 + 2 * S + kQ) + 8u * q, 1);
    }
  }
  mbar_init_fence();
}

// The producer warp of either hopper body (lane 0 issues the TMA loads; all 32 lanes copy the slot's lse2 and
// delta, one 16-byte chunk each, with plain loads and stores and then arrive on the stage's full barrier, so
// that each store is released by its own thread: racecheck follows that, not a __syncwarp before another
// lane's arrival). K and V of the key block once (kv_full), then per slot of the schedule its Q and dO into
// ring stage g % S once the consumers released it.
template <int D, int BS, typename Sched>
__device__ __forceinline__ void attn_bwd_hopper_produce(const AttnBwdHopperParams& hp, const Sched& sched, unsigned char* sK,
                                                        unsigned char* sV, unsigned char* sRing, unsigned bar0, int lane) {
  constexpr AttnBwdHopperLayout L{D, BS};
  constexpr int kDB = D / 64, S = L.stages();
  constexpr int kKV = L.kv_bytes(), kRows = L.rows_bytes(), kStage = L.stage_bytes();
  const AttnBwdParams& p = hp.p;
  const unsigned kv_full = bar0;
  auto full = [&](int s) { return bar0 + 8u + 8u * s; };
  auto empty = [&](int s) { return bar0 + 8u * (1 + S) + 8u * s; };
  const int r = sched.r, b = sched.b, key0 = sched.kb * BS;
  const TmaMap* kmap = reinterpret_cast<const TmaMap*>(hp.k_map);
  const TmaMap* vmap = reinterpret_cast<const TmaMap*>(hp.v_map);
  const TmaMap* qmap = reinterpret_cast<const TmaMap*>(hp.q_map);
  const TmaMap* domap = reinterpret_cast<const TmaMap*>(hp.do_map);
  if (lane == 0) {
    tma_prefetch_map(qmap);
    tma_prefetch_map(domap);
    mbar_arrive_expect_tx(kv_full, 2 * kKV);
#pragma unroll
    for (int c = 0; c < kDB; ++c) {
      tma_load_4d(smem_addr(sK + c * BS * 128), kmap, c * 64, r, key0, b, kv_full);
      tma_load_4d(smem_addr(sV + c * BS * 128), vmap, c * 64, r, key0, b, kv_full);
    }
  }
  for (int g = 0; g < sched.n_slots; ++g) {
    int h, m0;
    sched.slot_at(g, h, m0);
    const int s = g % S;
    mbar_wait(empty(s), ((g / S) & 1) ^ 1);
    unsigned char* st = sRing + s * kStage;
    const long long row0 = (static_cast<long long>(b) * p.h_q + h) * p.s_pad + m0;
    const float4 x = *reinterpret_cast<const float4*>((lane < 16 ? p.lse2 : p.delta) + row0 + (lane % 16) * 4);
    *reinterpret_cast<float4*>(st + 2 * kRows + (lane / 16) * 256 + (lane % 16) * 16) = x;
    if (lane == 0) {
      mbar_arrive_expect_tx(full(s), 2 * kRows);
#pragma unroll
      for (int c = 0; c < kDB; ++c) {
        tma_load_4d(smem_addr(st + c * 64 * 128), qmap, c * 64, h, m0, b, full(s));
        tma_load_4d(smem_addr(st + kRows + c * 64 * 128), domap, c * 64, h, m0, b, full(s));
      }
    } else {
      mbar_arrive(full(s));
    }
  }
}

template <typename T, int D, int BS, typename Sched>
__device__ __forceinline__ void attn_bwd_hopper_body(const AttnBwdHopperParams& hp, const Sched& sched) {
  static_assert(sizeof(T) == 2, "attn_bwd_hopper: 16-bit operands");
  static_assert(BS == 64 || BS == 128, "attn_bwd_hopper: 64 or 128 keys per CTA");
  static_assert(D == 64 || D == 128, "attn_bwd_hopper: D is 64 or 128");
  static_assert(!Sched::kDeterministic || BS == 128, "attn_bwd_hopper: deterministic dQ takes the TMA reduce-add path");
  constexpr AttnBwdHopperLayout L{D, BS};
  constexpr int NWG = L.consumer_warpgroups(), kDB = D / 64, S = L.stages();
  constexpr int kKV = L.kv_bytes(), kRows = L.rows_bytes(), kStage = L.stage_bytes(), kDsB = L.ds_bytes();
  using Mma = MmaOp<T>;
  const AttnBwdParams& p = hp.p;
  extern __shared__ unsigned char smem_raw[];
  unsigned char* base = align_smem_1024(smem_raw);
  unsigned char* sK = base;
  unsigned char* sV = base + kKV;
  unsigned char* sRing = base + 2 * kKV;  // [S][Q 64 x D | dO 64 x D | lse2 64 | delta 64 | pad]
  unsigned char* sDs = sRing + S * kStage;  // [ds_buffers][BS keys][64 rows] 16-bit, swizzled
  unsigned char* sDq = sDs + L.ds_buffers() * kDsB;  // [2 tiles][dq_partials][D / 32 boxes][64 rows][128 B] fp32
  const unsigned bar0 = smem_addr(base + L.bar_offset());
  const unsigned kv_full = bar0;
  auto full = [&](int s) { return bar0 + 8u + 8u * s; };
  auto empty = [&](int s) { return bar0 + 8u * (1 + S) + 8u * s; };
  // Staging tile q of the dQ writer: full once every consumer thread stored its part of a slot, empty once
  // the writer's reduce-add from it completed.
  constexpr int kQ = L.dq_tiles();
  auto dq_full = [&](int q) { return bar0 + 8u * (1 + 2 * S) + 8u * q; };
  auto dq_empty = [&](int q) { return bar0 + 8u * (1 + 2 * S + kQ) + 8u * q; };

  const int kb = sched.kb, r = sched.r, b = sched.b;
  const int n_slots = sched.n_slots;
  const int key0 = kb * BS;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;

  // Slot g of the schedule: query head h and first query row m0 (a slot wholly past S_q reads zero rows
  // from TMA and lse2 = +inf: P = 0, it adds nothing).
  auto slot_of = [&](int g, int& h, int& m0) { sched.slot_at(g, h, m0); };
  auto block_len = [&](int h) -> int { return sched.len(h); };

  if (threadIdx.x == 0) attn_bwd_hopper_init_barriers<D, BS>(bar0);
  __syncthreads();

  if (warp >= 4 * NWG) {
    setmaxnreg_dec<24>();
    if (warp == 4 * NWG && n_slots > 0) attn_bwd_hopper_produce<D, BS>(hp, sched, sK, sV, sRing, bar0, lane);
    if constexpr (L.dq_tma()) {
      // The dQ writer (lane 0 of the next warp): per slot, once the consumers staged its dQ in tile g % kQ,
      // one TMA reduce-add per 32-column box (and partial) into dq_acc; the tile is free again once the adds
      // read it (deterministic: once they completed and the turn passed).
      if (warp == 4 * NWG + 1 && lane == 0 && n_slots > 0) {
        const TmaMap* dqmap = reinterpret_cast<const TmaMap*>(hp.dq_map);
        tma_prefetch_map(dqmap);
        // Deterministic: the slot whose adds are in flight and whose turn has not passed yet. A second slot's
        // adds go out beside them only when its turn has already come; otherwise the pending turn passes
        // first, so no turn is held while the writer waits for another.
        int* pend_sem = nullptr;
        int pend_q = 0;
        for (int g = 0; g < n_slots; ++g) {
          int h, m0;
          slot_of(g, h, m0);
          const int q = g % kQ;
          mbar_wait(dq_full(q), (g / kQ) & 1);
          int* sem = nullptr;
          if constexpr (Sched::kDeterministic) {
            sem = sched.sem(h, m0);
            const int turn = sched.turn(m0);
            if (!attn_bwd_turn_came(sem, turn)) {
              if (pend_sem != nullptr) {
                attn_bwd_pass_turn_after_bulk(pend_sem);
                mbar_arrive(dq_empty(pend_q));
                pend_sem = nullptr;
              }
              attn_bwd_wait_turn(sem, turn);
            }
            fence_proxy_async_global();
          }
          const int grow = static_cast<int>((static_cast<long long>(b) * p.h_q + h) * p.s_pad + m0);
          const unsigned tile = smem_addr(sDq + q * L.dq_tile_bytes());
#pragma unroll
          for (int pi = 0; pi < L.dq_partials(); ++pi)
#pragma unroll
            for (int j = 0; j < D / 32; ++j) tma_reduce_add_2d(dqmap, j * 32, grow, tile + pi * (64 * D * 4) + j * (64 * 128));
          bulk_commit();
          if constexpr (Sched::kDeterministic) {
            if (pend_sem != nullptr) {  // the older group is complete: its turn passes
              attn_bwd_pass_turn_after_bulk<1>(pend_sem);
              mbar_arrive(dq_empty(pend_q));
            }
            pend_sem = sem;
            pend_q = q;
          } else {
            bulk_wait_read<0>();
            mbar_arrive(dq_empty(q));
          }
        }
        if constexpr (Sched::kDeterministic) {
          if (pend_sem != nullptr) attn_bwd_pass_turn_after_bulk(pend_sem);
        }
        bulk_wait<0>();  // the last adds are done before the CTA's shared memory goes
      }
    }
    return;
  }

  // Two CTAs of 256 threads share the register file at block size 64 (128 each at launch).
  setmaxnreg_inc<NWG == 2 ? 240 : 232>();
  const int wg = warp / 4, wq = warp % 4, g8 = lane / 4, t4 = lane % 4;
  const int krow = wg * 64 + wq * 16 + g8;  // this thread's first key row in the block (the second is + 8)
  float dk[D / 2], dv[D / 2];
#pragma unroll
  for (int i = 0; i < D / 2; ++i) dk[i] = dv[i] = 0.f;

  if (n_slots > 0) {
    const unsigned aK = smem_addr(sK), aV = smem_addr(sV);
    float sc[32], dp[32];
    // S^T = K_wg Q^T (into sc) or dP^T = V_wg dO^T (into dp), 64 keys x 64 rows, of the slot in stage s:
    // operand A from K or V (this warpgroup's 64 rows), B from Q or dO, both K-major.
    auto issue_kt = [&](float(&acc)[32], unsigned a_kv, int s, int which, bool commit) {
      const unsigned aB = smem_addr(sRing + s * kStage) + which * kRows;
      wgmma_fence();
#pragma unroll
      for (int ks = 0; ks < D / 16; ++ks) {
        const unsigned koff = (ks / 4) * (BS * 128) + wg * (64 * 128) + (ks % 4) * 32;
        const unsigned qoff = (ks / 4) * (64 * 128) + (ks % 4) * 32;
        Wgmma<T, 64>::template ss<0>(acc, wgmma_desc_at(a_kv + koff, 16, 1024), wgmma_desc_at(aB + qoff, 16, 1024),
                                     ks > 0 ? 1 : 0);
      }
      if (commit) wgmma_commit();
    };
    mbar_wait(kv_full, 0);
    for (int g = 0; g < n_slots; ++g) {
      int h, m0;
      slot_of(g, h, m0);
      const int len = block_len(h);
      const int s = g % S;
      unsigned char* st = sRing + s * kStage;
      const unsigned aQ = smem_addr(st), adO = aQ + kRows;
      const float* lse2 = reinterpret_cast<const float*>(st + 2 * kRows);
      const float* delta = reinterpret_cast<const float*>(st + 2 * kRows + 256);
      // Causal: key key0 + k is hidden from query row m0 + c when k - c > m0 - key0 (slots crossing the
      // diagonal only).
      const int diag = m0 - key0;
      const bool causal_edge = Sched::kCausal && BS - 1 > diag;
      // Windows: key k visible from row c (slot-relative) when -left reach <= k - c - diag <= right reach.
      const int right = sched.right_reach(), left = sched.left_reach();
      mbar_wait(full(s), (g / S) & 1);
      issue_kt(sc, aK, s, 0, NWG == 2);  // (one group for both at block size 64: see below)
      issue_kt(dp, aV, s, 1, true);

      // P^T (as A fragments: m16n8k16 layout per warp, regs 0 / 1 rows g / g + 8 at query columns 2t,
      // regs 2 / 3 the same at 2t + 8 of each 16-column step) and dS^T (also stored to shared memory for
      // dQ: row (key) kr, query columns 2t, 2t + 1 of the swizzled row's 16-byte chunk nt).
      unsigned pa[4][4], da[4][4];
      unsigned char* ds = sDs + (L.ds_buffers() == 2 ? (g & 1) * kDsB : 0);
      auto make_p = [&](int nt) {  // sc[nt] -> P^T (fp32, in place) and its fragment
        const float2 l2 = *reinterpret_cast<const float2*>(lse2 + nt * 8 + 2 * t4);
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          float pv = fast_exp2(fmaf(sc[nt * 4 + e], p.scale_log2, -((e & 1) ? l2.y : l2.x)));
          if (krow + (e >> 1) * 8 >= len) pv = 0.f;
          if constexpr (Sched::kWindow) {
            const int dist = krow + (e >> 1) * 8 - (nt * 8 + 2 * t4 + (e & 1)) - diag;
            if (dist > right || -dist > left) pv = 0.f;
          } else if constexpr (Sched::kCausal) {
            if (causal_edge && krow + (e >> 1) * 8 - (nt * 8 + 2 * t4 + (e & 1)) > diag) pv = 0.f;
          }
          sc[nt * 4 + e] = pv;
        }
#pragma unroll
        for (int hf = 0; hf < 2; ++hf) pa[nt / 2][(nt % 2) * 2 + hf] = Mma::pack(sc[nt * 4 + 2 * hf], sc[nt * 4 + 2 * hf + 1]);
      };
      auto make_ds = [&](int nt) {  // P^T (dP^T - delta) -> fragment and shared memory
        const float2 dl = *reinterpret_cast<const float2*>(delta + nt * 8 + 2 * t4);
#pragma unroll
        for (int hf = 0; hf < 2; ++hf) {
          const unsigned dsv = Mma::pack(sc[nt * 4 + 2 * hf] * (dp[nt * 4 + 2 * hf] - dl.x),
                                         sc[nt * 4 + 2 * hf + 1] * (dp[nt * 4 + 2 * hf + 1] - dl.y));
          da[nt / 2][(nt % 2) * 2 + hf] = dsv;
          *reinterpret_cast<unsigned*>(ds + swizzle128(krow + hf * 8, nt) + t4 * 4) = dsv;
        }
      };
      if constexpr (NWG == 2) {  // P^T while dP^T runs
        wgmma_wait<1>();
        fence_regs(sc);
#pragma unroll
        for (int nt = 0; nt < 8; ++nt) make_p(nt);
        wgmma_wait<0>();
        fence_regs(dp);
#pragma unroll
        for (int nt = 0; nt < 8; ++nt) make_ds(nt);
      } else {
        // NOTE: block size 64 (232 registers, two CTAs per SM) keeps one pass: P^T in fp32 beside a dP^T
        // in flight serialised its wgmmas (C7512, insufficient registers).
        wgmma_wait<0>();
        fence_regs(sc);
        fence_regs(dp);
#pragma unroll
        for (int nt = 0; nt < 8; ++nt) {
          make_p(nt);
          make_ds(nt);
        }
      }

      // dV += P^T dO, dK += dS^T Q (dO and Q N-major: 64-column blocks 64 x 128 bytes apart).
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < 4; ++kk) Wgmma<T, D>::template rs<1>(dv, pa[kk], wgmma_desc_at(adO + kk * 2048, 64 * 128, 1024));
#pragma unroll
      for (int kk = 0; kk < 4; ++kk) Wgmma<T, D>::template rs<1>(dk, da[kk], wgmma_desc_at(aQ + kk * 2048, 64 * 128, 1024));
      wgmma_commit();

      // dS^T of all BS keys is in shared memory (and visible to the tensor cores) past this barrier.
      fence_proxy_async();
      named_barrier(1, NWG * 128);

      // dQ[64 rows, chunk] += dS[:, keys] K[keys, chunk]: dS^T read M-major (8-key groups 1024 bytes
      // apart, 16 keys per step), K N-major. Two warpgroups split D = 128 into a 64-column chunk each, or
      // (D = 64) the keys into a half each; one warpgroup takes every chunk over all keys. Every
      // warpgroup runs the same code (a warpgroup-dependent branch around wgmma serialises it).
      constexpr int kChunks = kDB >= NWG ? kDB / NWG : 1;
      constexpr int kKeySteps = kDB >= NWG ? BS / 16 : BS / 16 / NWG;
      const int c0 = kDB >= NWG ? wg * kChunks : 0;
      const int kk0 = kDB >= NWG ? 0 : wg * kKeySteps;
      const unsigned aDs = smem_addr(ds);
      float* acc = p.dq_acc + ((static_cast<long long>(b) * p.h_q + h) * p.s_pad + m0 + wq * 16 + g8) * D + 2 * t4;
#pragma unroll
      for (int ci = 0; ci < kChunks; ++ci) {
        float dq[32];
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < kKeySteps; ++kk)
          Wgmma<T, 64>::template ss<1, 1>(dq, wgmma_desc_at(aDs + (kk0 + kk) * 2048, BS * 128, 1024),
                                          wgmma_desc_at(aK + (c0 + ci) * (BS * 128) + (kk0 + kk) * 2048, BS * 128, 1024),
                                          kk > 0 ? 1 : 0);
        wgmma_commit();
        if constexpr (L.dq_tma()) {
          if (ci == 0) mbar_wait(dq_empty(g % kQ), ((g / kQ) & 1) ^ 1);  // the writer's adds of slot g - 2 read the tile
        }
        wgmma_wait<0>();
        fence_regs(dq);
        if constexpr (L.dq_tma()) {
          // Row r, columns col, col + 1 (col = chunk * 64 + nt * 8 + 2t) of this warpgroup's partial: box
          // col / 32, 16-byte chunk (col % 32) / 4 of the box's swizzled 128-byte row, word (col % 4).
          unsigned char* part = sDq + (g % kQ) * L.dq_tile_bytes() + (L.dq_partials() > 1 ? wg : 0) * (64 * D * 4);
#pragma unroll
          for (int nt = 0; nt < 8; ++nt)
#pragma unroll
            for (int hf = 0; hf < 2; ++hf) {
              const int row = wq * 16 + g8 + hf * 8, col = (c0 + ci) * 64 + nt * 8 + 2 * t4;
              *reinterpret_cast<float2*>(part + (col / 32) * (64 * 128) + swizzle128(row, (col % 32) / 4) + (col % 4) * 4) =
                  make_float2(dq[nt * 4 + 2 * hf], dq[nt * 4 + 2 * hf + 1]);
            }
        } else {
#pragma unroll
          for (int nt = 0; nt < 8; ++nt) {
            red_add_f32x2(acc + (c0 + ci) * 64 + nt * 8, dq[nt * 4], dq[nt * 4 + 1]);
            red_add_f32x2(acc + 8 * D + (c0 + ci) * 64 + nt * 8, dq[nt * 4 + 2], dq[nt * 4 + 3]);
          }
        }
      }
      if constexpr (L.dq_tma()) {
        // This thread's part of the slot's dQ is staged: visible to the writer's TMA past the arrival.
        fence_proxy_async();
        mbar_arrive(dq_full(g % kQ));
      }
      fence_regs(dv);
      fence_regs(dk);
      hold_regs(pa);
      hold_regs(da);
      // Each thread releases its own reads of the stage (racecheck does not follow a __syncwarp before
      // another lane's arrival).
      mbar_arrive(empty(s));
    }
  }

  // dK = scale * sum dS^T q, dV = sum P^T do for this thread's key rows < S_kv (zeros when unselected).
#pragma unroll
  for (int hf = 0; hf < 2; ++hf) {
    const int j = key0 + krow + hf * 8;
    if (j >= p.s_kv) continue;
    T* dk_row = static_cast<T*>(p.dk) + b * p.dk_sb + r * p.dk_sh + static_cast<long long>(j) * p.dk_ss + 2 * t4;
    T* dv_row = static_cast<T*>(p.dv) + b * p.dv_sb + r * p.dv_sh + static_cast<long long>(j) * p.dv_ss + 2 * t4;
#pragma unroll
    for (int dt = 0; dt < D / 8; ++dt) {
      *reinterpret_cast<unsigned*>(dk_row + dt * 8) = Mma::pack(dk[dt * 4 + 2 * hf] * p.scale, dk[dt * 4 + 2 * hf + 1] * p.scale);
      *reinterpret_cast<unsigned*>(dv_row + dt * 8) = Mma::pack(dv[dt * 4 + 2 * hf], dv[dt * 4 + 2 * hf + 1]);
    }
  }
}

// D = 256 (AttnBwdHopperLayout::split_d, dense schedules without deterministic dQ). dK and dV of 64 keys x 256
// columns are 128 fp32 registers each per thread of one warpgroup, which do not fit, so the two consumer
// warpgroups split D: warpgroup w owns columns [128 w, 128 w + 128) of dK, dV and the slot's dQ. The
// products that sum over D are split by the slot's query rows instead, so no partial sums cross warpgroups:
//   S^T_w = K Q_w^T, dP^T_w = V dO_w^T        (64 keys x query rows [32 w, 32 w + 32), all of D; SS, K-major)
//   P^T_w, dS^T_w = P^T_w (dP^T_w - delta)     (registers) -> shared memory, where the two halves make the
//                                              slot's [64 keys][64 rows] P^T and dS^T tiles
//   a barrier over the two warpgroups
//   dQ[:, w] = dS K[:, w]                      (SS: dS^T read M-major, K N-major), added to dq_acc (red.add)
//   dV_w += P^T dO[:, w], dK_w += dS^T Q[:, w] (SS: P^T, dS^T K-major; dO, Q N-major)
// P^T and dS^T are double-buffered: a warpgroup writes slot g's buffers only past the barrier of slot g - 1,
// which the other warpgroup reaches after its last read of slot g - 2's (the same buffers). Registers per
// consumer thread: dK 64 + dV 64 across slots, dQ 64 per slot; S^T 16 and dP^T 16 before the barrier.
// Shared memory: K, V 2 x 32 KB, two ring stages of 65 KB, four 8 KB tiles: 227 KB, one CTA per SM.
template <typename T, int D, typename Sched>
__device__ __forceinline__ void attn_bwd_hopper_split_body(const AttnBwdHopperParams& hp, const Sched& sched) {
  static_assert(sizeof(T) == 2, "attn_bwd_hopper_split: 16-bit operands");
  static_assert(D == 256, "attn_bwd_hopper_split: D is 256");
  static_assert(!Sched::kDeterministic, "attn_bwd_hopper_split: dQ is added with red.add (not deterministic)");
  constexpr int BS = 64;
  constexpr AttnBwdHopperLayout L{D, BS};
  static_assert(L.split_d() && L.consumer_warpgroups() == 2 && L.ds_buffers() == 4 && !L.dq_tma(),
                "attn_bwd_hopper_split: layout");
  constexpr int S = L.stages(), kKV = L.kv_bytes(), kRows = L.rows_bytes(), kStage = L.stage_bytes(), kTile = L.ds_bytes();
  using Mma = MmaOp<T>;
  const AttnBwdParams& p = hp.p;
  extern __shared__ unsigned char smem_raw[];
  unsigned char* base = align_smem_1024(smem_raw);
  unsigned char* sK = base;
  unsigned char* sV = base + kKV;
  unsigned char* sRing = base + 2 * kKV;  // [S][Q 64 x D | dO 64 x D | lse2 64 | delta 64 | pad]
  unsigned char* sPd = sRing + S * kStage;  // [2 slots][P^T | dS^T][64 keys][64 rows] 16-bit, swizzled
  const unsigned bar0 = smem_addr(base + L.bar_offset());
  auto full = [&](int s) { return bar0 + 8u + 8u * s; };
  auto empty = [&](int s) { return bar0 + 8u * (1 + S) + 8u * s; };
  const int key0 = sched.kb * BS;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;

  if (threadIdx.x == 0) attn_bwd_hopper_init_barriers<D, BS>(bar0);
  __syncthreads();

  if (warp >= 8) {
    setmaxnreg_dec<24>();
    if (warp == 8 && sched.n_slots > 0) attn_bwd_hopper_produce<D, BS>(hp, sched, sK, sV, sRing, bar0, lane);
    return;
  }

  setmaxnreg_inc<240>();
  const int wg = warp / 4, wq = warp % 4, g8 = lane / 4, t4 = lane % 4;
  const int krow = wq * 16 + g8;  // this thread's first key row in the block (the second is + 8)
  const int qcol = wg * 32;       // this warpgroup's first query row of a slot in S^T, dP^T
  const unsigned cw = wg * 2 * (64 * 128);  // byte offset of its 128 columns in K, V, Q, dO (two 64-column blocks)
  float dk[64], dv[64];
#pragma unroll
  for (int i = 0; i < 64; ++i) dk[i] = dv[i] = 0.f;

  if (sched.n_slots > 0) {
    const unsigned aK = smem_addr(sK), aV = smem_addr(sV);
    float sc[16], dp[16];
    // S^T or dP^T of this warpgroup's 32 query rows: A = K or V (64 keys, K-major), B = Q or dO rows
    // [qcol, qcol + 32) (K-major; row qcol starts a 1024-byte swizzle atom), 16 k-steps over D.
    auto issue_kt = [&](float(&acc)[16], unsigned a_kv, unsigned a_rows) {
      wgmma_fence();
#pragma unroll
      for (int ks = 0; ks < D / 16; ++ks) {
        const unsigned off = (ks / 4) * (64 * 128) + (ks % 4) * 32;
        Wgmma<T, 32>::template ss<0>(acc, wgmma_desc_at(a_kv + off, 16, 1024),
                                     wgmma_desc_at(a_rows + qcol * 128 + off, 16, 1024), ks > 0 ? 1 : 0);
      }
      wgmma_commit();
    };
    mbar_wait(bar0, 0);  // K and V
    for (int g = 0; g < sched.n_slots; ++g) {
      int h, m0;
      sched.slot_at(g, h, m0);
      const int len = sched.len(h);
      const int s = g % S;
      unsigned char* st = sRing + s * kStage;
      const unsigned aQ = smem_addr(st), adO = aQ + kRows;
      const float* lse2 = reinterpret_cast<const float*>(st + 2 * kRows) + qcol;
      const float* delta = reinterpret_cast<const float*>(st + 2 * kRows + 256) + qcol;
      // Causal: key key0 + k is hidden from query row m0 + c when k - c > m0 - key0 (slots crossing the
      // diagonal only). Windows: key k visible from row c when -left reach <= k - c - diag <= right reach.
      const int diag = m0 - key0;
      const bool causal_edge = Sched::kCausal && BS - 1 > diag;
      const int right = sched.right_reach(), left = sched.left_reach();
      unsigned char* pt = sPd + (g & 1) * 2 * kTile;  // P^T of the slot, then dS^T
      unsigned char* dst = pt + kTile;
      mbar_wait(full(s), (g / S) & 1);
      issue_kt(sc, aK, aQ);
      issue_kt(dp, aV, adO);

      // P^T while dP^T runs: element e of column step nt is key krow + (e >> 1) * 8, slot row qcol + nt * 8 +
      // 2 t4 + (e & 1); stored as 16-bit pairs into the row's swizzled 16-byte chunk (qcol + nt * 8) / 8.
      wgmma_wait<1>();
      fence_regs(sc);
#pragma unroll
      for (int nt = 0; nt < 4; ++nt) {
        const float2 l2 = *reinterpret_cast<const float2*>(lse2 + nt * 8 + 2 * t4);
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          float pv = fast_exp2(fmaf(sc[nt * 4 + e], p.scale_log2, -((e & 1) ? l2.y : l2.x)));
          const int kr = krow + (e >> 1) * 8, c = qcol + nt * 8 + 2 * t4 + (e & 1);
          if (kr >= len) pv = 0.f;
          if constexpr (Sched::kWindow) {
            const int dist = kr - c - diag;
            if (dist > right || -dist > left) pv = 0.f;
          } else if constexpr (Sched::kCausal) {
            if (causal_edge && kr - c > diag) pv = 0.f;
          }
          sc[nt * 4 + e] = pv;
        }
#pragma unroll
        for (int hf = 0; hf < 2; ++hf)
          *reinterpret_cast<unsigned*>(pt + swizzle128(krow + hf * 8, qcol / 8 + nt) + t4 * 4) =
              Mma::pack(sc[nt * 4 + 2 * hf], sc[nt * 4 + 2 * hf + 1]);
      }
      wgmma_wait<0>();
      fence_regs(dp);
#pragma unroll
      for (int nt = 0; nt < 4; ++nt) {
        const float2 dl = *reinterpret_cast<const float2*>(delta + nt * 8 + 2 * t4);
#pragma unroll
        for (int hf = 0; hf < 2; ++hf)
          *reinterpret_cast<unsigned*>(dst + swizzle128(krow + hf * 8, qcol / 8 + nt) + t4 * 4) =
              Mma::pack(sc[nt * 4 + 2 * hf] * (dp[nt * 4 + 2 * hf] - dl.x),
                        sc[nt * 4 + 2 * hf + 1] * (dp[nt * 4 + 2 * hf + 1] - dl.y));
      }
      // Both halves of P^T and dS^T are in shared memory (and visible to the tensor cores) past this barrier.
      fence_proxy_async();
      named_barrier(1, 256);

      // dQ[64 rows, this warpgroup's columns] = dS K: dS^T read M-major (16 keys a step, 2048 bytes), K N-major
      // (its two 64-column blocks BS x 128 bytes apart); issued first so that its adds overlap dV and dK.
      const unsigned aP = smem_addr(pt), aDs = smem_addr(dst);
      float dq[64];
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < BS / 16; ++kk)
        Wgmma<T, 128>::template ss<1, 1>(dq, wgmma_desc_at(aDs + kk * 2048, BS * 128, 1024),
                                         wgmma_desc_at(aK + cw + kk * 2048, BS * 128, 1024), kk > 0 ? 1 : 0);
      wgmma_commit();
      // dV += P^T dO, dK += dS^T Q over the slot's 64 rows (16 a step: 32 bytes along a P^T row, 2048 down
      // dO and Q), this warpgroup's 128 columns (two 64-column blocks 64 x 128 bytes apart).
#pragma unroll
      for (int kk = 0; kk < 4; ++kk)
        Wgmma<T, 128>::template ss<1>(dv, wgmma_desc_at(aP + kk * 32, 16, 1024),
                                      wgmma_desc_at(adO + cw + kk * 2048, 64 * 128, 1024), 1);
#pragma unroll
      for (int kk = 0; kk < 4; ++kk)
        Wgmma<T, 128>::template ss<1>(dk, wgmma_desc_at(aDs + kk * 32, 16, 1024),
                                      wgmma_desc_at(aQ + cw + kk * 2048, 64 * 128, 1024), 1);
      wgmma_commit();
      wgmma_wait<1>();
      fence_regs(dq);
      float* acc = p.dq_acc + ((static_cast<long long>(sched.b) * p.h_q + h) * p.s_pad + m0 + wq * 16 + g8) * D +
                   wg * 128 + 2 * t4;
#pragma unroll
      for (int nt = 0; nt < 16; ++nt) {
        red_add_f32x2(acc + nt * 8, dq[nt * 4], dq[nt * 4 + 1]);
        red_add_f32x2(acc + 8 * D + nt * 8, dq[nt * 4 + 2], dq[nt * 4 + 3]);
      }
      wgmma_wait<0>();
      fence_regs(dv);
      fence_regs(dk);
      mbar_arrive(empty(s));  // this thread's reads of the stage (Q, dO, lse2, delta) are done
    }
  }

  // dK = scale * sum dS^T q, dV = sum P^T do for this thread's key rows < S_kv and columns (zeros when unreached).
#pragma unroll
  for (int hf = 0; hf < 2; ++hf) {
    const int j = key0 + krow + hf * 8;
    if (j >= p.s_kv) continue;
    T* dk_row = static_cast<T*>(p.dk) + sched.b * p.dk_sb + sched.r * p.dk_sh + static_cast<long long>(j) * p.dk_ss +
                wg * 128 + 2 * t4;
    T* dv_row = static_cast<T*>(p.dv) + sched.b * p.dv_sb + sched.r * p.dv_sh + static_cast<long long>(j) * p.dv_ss +
                wg * 128 + 2 * t4;
#pragma unroll
    for (int dt = 0; dt < 16; ++dt) {
      *reinterpret_cast<unsigned*>(dk_row + dt * 8) = Mma::pack(dk[dt * 4 + 2 * hf] * p.scale, dk[dt * 4 + 2 * hf + 1] * p.scale);
      *reinterpret_cast<unsigned*>(dv_row + dt * 8) = Mma::pack(dv[dt * 4 + 2 * hf], dv[dt * 4 + 2 * hf + 1]);
    }
  }
}

}  // namespace attnjit::kernels
