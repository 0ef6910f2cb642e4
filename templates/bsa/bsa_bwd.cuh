// bsa_bwd, portable backend (mma.sync, sm_80+): the block-sparse attention backward of SPEC.md §2.5 as
// a FlashAttention-2-style key-block-parallel backward over an inverted (key block -> query blocks) map.
//
// Launch sequence on one stream (bsa_bwd.cpp), all scratch in the plan workspace:
//   1. memset counts = 0
//   2. bsa_bwd_prep<T, D>     per query row: lse2 = lse * log2(e) (+inf where lse = -inf, so P = 0),
//                             delta = sum_d o * do, and the row's fp32 dq accumulator zeroed
//   3. bsa_bwd_route(count)   per active (row block, u): counts[b, kv head, key block] += 1
//   4. bsa_bwd_scan           one CTA: offsets = exclusive prefix sums of counts (and fill cursors)
//   5. bsa_bwd_route(fill)    per active (row block, u): list[cursor++] = (head in group, query block)
//   6. bsa_bwd_main<..>       one CTA per (key block, kv head, batch): K and V stay in shared memory;
//                             the query blocks (of every query head of the group) that select the key
//                             block are walked in items of BM rows (half an entry for bs 128, two entries
//                             for bs 64): S^T = K Q^T, dP^T = V dO^T, P^T = exp2(S^T scale log2(e) - lse2),
//                             dS^T = P^T (dP^T - delta) (P^T, dS^T to shared memory), then
//                             dV += P^T dO, dK += dS^T Q (registers), dQ_acc += dS K (fp32 red.add);
//                             at the end dK * scale and dV are stored (zeros for unselected keys).
//   7. bsa_bwd_dq<T, D>       dq = rnd(scale * dq_acc) for every row (rows no block reaches: exact 0).
// dQ accumulates with fp32 atomics and the list order comes from atomic cursors: results are not
// bitwise deterministic (SPEC.md §2.5 allows it).
#pragma once
#include "bsa/bsa_bwd_params.cuh"
#include "common/mma.cuh"
#include "common/numeric.cuh"
#include "common/tile_loader.cuh"  // load_tile_affine (cp.async tile loads with zero-filled tails)

namespace attnjit::kernels {

constexpr float kBsaLog2e = 1.44269504088896340736f;

// Row-wise preprocessing over [B, H, s_pad] rows, D / 8 threads per row (one 16-byte chunk each).
template <typename T, int D>
__global__ void __launch_bounds__(256) bsa_bwd_prep(const __grid_constant__ BsaBwdParams p) {
  constexpr int kChunks = D / 8;
  static_assert(32 % kChunks == 0, "bsa_bwd_prep: a row's threads share one warp");
  const long long rows = static_cast<long long>(p.batch) * p.h_q * p.s_pad;
  const long long gid = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  const long long row = gid / kChunks;
  const int ch = static_cast<int>(gid % kChunks);
  const bool valid = row < rows;
  float dot = 0.f;
  int b = 0, h = 0, i = 0;
  if (valid) {
    i = static_cast<int>(row % p.s_pad);
    const long long bh = row / p.s_pad;
    h = static_cast<int>(bh % p.h_q);
    b = static_cast<int>(bh / p.h_q);
    if (i < p.s_q) {
      const T* o = static_cast<const T*>(p.o) + b * p.o_sb + h * p.o_sh + i * p.o_ss + ch * 8;
      const T* d = static_cast<const T*>(p.dout) + b * p.do_sb + h * p.do_sh + i * p.do_ss + ch * 8;
      const uint4 ov = *reinterpret_cast<const uint4*>(o);
      const uint4 dv = *reinterpret_cast<const uint4*>(d);
      const unsigned ow[4] = {ov.x, ov.y, ov.z, ov.w}, dw[4] = {dv.x, dv.y, dv.z, dv.w};
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const float2 x = Float16Traits<T>::to_float2(ow[e]), y = Float16Traits<T>::to_float2(dw[e]);
        dot = fmaf(x.x, y.x, dot);
        dot = fmaf(x.y, y.y, dot);
      }
    }
    float4* acc = reinterpret_cast<float4*>(p.dq_acc + row * D + ch * 8);
    acc[0] = make_float4(0.f, 0.f, 0.f, 0.f);
    acc[1] = make_float4(0.f, 0.f, 0.f, 0.f);
  }
#pragma unroll
  for (int off = kChunks / 2; off > 0; off >>= 1) dot += __shfl_xor_sync(0xffffffffu, dot, off);
  if (valid && ch == 0) {
    float l2 = kInf(), dl = 0.f;
    if (i < p.s_q) {
      const float l = p.lse[b * p.lse_sb + h * p.lse_sh + static_cast<long long>(i) * p.lse_ss];
      l2 = l == -kInf() ? kInf() : l * kBsaLog2e;
      dl = dot;
    }
    p.lse2[row] = l2;
    p.delta[row] = dl;
  }
}

// One thread per (b, h, query block, u): fill = 0 counts the active (query block, key block) pairs per
// (b, kv head, key block); fill = 1 appends each pair to its key block's list. Indices outside
// [0, N_kv) (outside the caller contract) are skipped.
__global__ void __launch_bounds__(256) bsa_bwd_route(const __grid_constant__ BsaBwdParams p, int fill) {
  const long long gid = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  const long long total = static_cast<long long>(p.batch) * p.h_q * p.n_q * p.k_max;
  if (gid >= total) return;
  const int u = static_cast<int>(gid % p.k_max);
  long long rest = gid / p.k_max;
  const int m = static_cast<int>(rest % p.n_q);
  rest /= p.n_q;
  const int h = static_cast<int>(rest % p.h_q);
  const int b = static_cast<int>(rest / p.h_q);
  const int n = p.nums ? p.nums[b * p.nums_sb + h * p.nums_sh + m * p.nums_sm] : p.fixed_count;
  if (u >= n) return;
  const int kb = p.index[b * p.idx_sb + h * p.idx_sh + m * p.idx_sm + u * p.idx_su];
  if (kb < 0 || kb >= p.n_kv) return;
  const int r = h / p.group;
  const long long seg = (static_cast<long long>(b) * p.h_kv + r) * p.n_kv + kb;
  if (!fill) {
    atomicAdd(p.counts + seg, 1);
  } else {
    const int pos = atomicAdd(p.cursor + seg, 1);
    p.list[pos] = (h - r * p.group) * p.n_q + m;
  }
}

// One CTA of 1024 threads: offsets = exclusive prefix sums of counts (offsets[n] = total), cursor = offsets.
__global__ void __launch_bounds__(1024) bsa_bwd_scan(const __grid_constant__ BsaBwdParams p) {
  __shared__ int warp_excl[32];
  __shared__ int chunk_total;
  const long long n = static_cast<long long>(p.batch) * p.h_kv * p.n_kv;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  int carry = 0;
  for (long long base = 0; base < n; base += 4 * 1024) {
    const long long i0 = base + threadIdx.x * 4;
    int v[4], sum = 0;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      v[j] = i0 + j < n ? p.counts[i0 + j] : 0;
      sum += v[j];
    }
    int incl = sum;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const int t = __shfl_up_sync(0xffffffffu, incl, o);
      if (lane >= o) incl += t;
    }
    if (lane == 31) warp_excl[warp] = incl;
    __syncthreads();
    if (warp == 0) {
      const int w = warp_excl[lane];
      int wi = w;
#pragma unroll
      for (int o = 1; o < 32; o <<= 1) {
        const int t = __shfl_up_sync(0xffffffffu, wi, o);
        if (lane >= o) wi += t;
      }
      warp_excl[lane] = wi - w;
      if (lane == 31) chunk_total = wi;
    }
    __syncthreads();
    int excl = carry + warp_excl[warp] + incl - sum;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      if (i0 + j < n) {
        p.offsets[i0 + j] = excl;
        p.cursor[i0 + j] = excl;
      }
      excl += v[j];
    }
    carry += chunk_total;
    __syncthreads();  // warp_excl and chunk_total are rewritten by the next chunk
  }
  if (threadIdx.x == 0) p.offsets[n] = carry;
}

// dq = rnd(scale * dq_acc) for every row i < S_q, one 16-byte chunk per thread.
template <typename T, int D>
__global__ void __launch_bounds__(256) bsa_bwd_dq(const __grid_constant__ BsaBwdParams p) {
  constexpr int kChunks = D / 8;
  const long long gid = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  const long long total = static_cast<long long>(p.batch) * p.h_q * p.s_q * kChunks;
  if (gid >= total) return;
  const int ch = static_cast<int>(gid % kChunks);
  const long long row = gid / kChunks;
  const int i = static_cast<int>(row % p.s_q);
  const long long bh = row / p.s_q;
  const int h = static_cast<int>(bh % p.h_q), b = static_cast<int>(bh / p.h_q);
  const float4* src = reinterpret_cast<const float4*>(p.dq_acc + (bh * p.s_pad + i) * D + ch * 8);
  const float4 x = src[0], y = src[1];
  const float s = p.scale;
  uint4 out;
  out.x = MmaOp<T>::pack(x.x * s, x.y * s);
  out.y = MmaOp<T>::pack(x.z * s, x.w * s);
  out.z = MmaOp<T>::pack(y.x * s, y.y * s);
  out.w = MmaOp<T>::pack(y.z * s, y.w * s);
  *reinterpret_cast<uint4*>(static_cast<T*>(p.dq) + b * p.dq_sb + h * p.dq_sh + static_cast<long long>(i) * p.dq_ss +
                            ch * 8) = out;
}

// fp32 dQ accumulation: two adjacent columns per instruction on sm_90 (red.global.add.v2.f32).
__device__ __forceinline__ void red_add_f32x2(float* addr, float x, float y) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("red.global.add.v2.f32 [%0], {%1, %2};\n" ::"l"(addr), "f"(x), "f"(y) : "memory");
#else
  atomicAdd(addr, x);
  atomicAdd(addr + 1, y);
#endif
}

// Tile geometry of bsa_bwd_main. An item is one tile of BM query rows made of 64-row slots; a slot is
// the 64-row part of one list entry (query head, query block): bs 128 splits an entry into two items
// of one slot, bs 64 pairs two entries into one item of two slots, so both block sizes run the same
// 32 x 32 warp tiles. Three phases per item, FlashAttention-2 style, with eight warps:
//   1. S^T = K Q^T, dP^T = V dO^T, P^T, dS^T -> shared memory: warps kW1N (keys) x kW1M (queries);
//   2a. dV += P^T dO, dK += dS^T Q (registers): warps kW2N (keys) x kW2D (head dim);
//   2b. dQ_acc += dS K (fp32 red.add): warps kWqM (query rows) x kWqD (head dim).
// Every warp tile is 32 x 32 (or 32 x kDCols), which halves the shared-memory reads per MMA of the
// A-operand side against 16-row warp tiles; shared-memory bandwidth is what limits mma.sync attention.
template <typename T_, int D_, int BS_, int BM_>
struct BsaBwdConfig {
  using T = T_;
  using TKV = T_;  // the names load_tile_affine reads
  static constexpr bool kFp8KV = false;
  static constexpr int D = D_, BS = BS_, BM = BM_;
  static constexpr int BN = BS;                  // keys per CTA: one key block
  static constexpr int kSlot = 64;               // query rows per slot
  static constexpr int kSlots = BM / kSlot;      // slots per item: 1 (bs 128) or 2 (bs 64)
  static constexpr int kSubs = BS / kSlot;       // slots per list entry: 2 (bs 128) or 1 (bs 64)
  static constexpr int WARPS = 8;
  static constexpr int kThreads = WARPS * 32;
  static constexpr int kW1N = BN / 32, kW1M = WARPS / kW1N;                  // phase 1: 32 keys x 32 queries
  static constexpr int kW2N = BN / 32, kW2D = WARPS / kW2N, kDCols = D / kW2D;  // phase 2a: 32 keys x kDCols
  static constexpr int kDT = kDCols / 8;                                      // n8 tiles of dK / dV per warp
  static constexpr int kWqM = BM / 32, kWqD = WARPS / kWqM, kQCols = D / kWqD;  // phase 2b: 32 rows x kQCols
  // dQ columns per pass: 32, or all 64 where the dK / dV accumulators are small enough (bs 64, D 128).
  static constexpr int kQChunk = kQCols > 32 && kDT > 4 ? 32 : kQCols;
  static constexpr int kKS = D / 16;        // k16 steps over the head dim
  static constexpr int kPitch = D + 8;      // shared row pitch (elements) of K, V, Q, dO
  static constexpr bool kSwizzle = false;   // padded rows (tile_at, load_tile_affine)
  static constexpr int kPsPitch = BM + 8;   // shared row pitch of P^T and dS^T
  static constexpr int kSmemBytes = bsa_bwd_smem_bytes(D, BN, BM);
  static_assert(sizeof(T) == 2, "bsa_bwd: 16-bit inputs");
  static_assert(D == 64 || D == 128, "bsa_bwd: D is 64 or 128");
  static_assert(BS == 64 || BS == 128, "bsa_bwd: the sparse block size is 64 or 128");
  static_assert(BM == (BS == 64 ? 128 : 64), "bsa_bwd: BM is 64 (bs 128) or 128 (bs 64)");
  static_assert(kW1N * kW1M == WARPS && kW1M * 32 == BM, "bsa_bwd: phase 1 tiles the item with 32 x 32 warp tiles");
  static_assert(kW2N * kW2D == WARPS && kDCols % 16 == 0, "bsa_bwd: phase 2a splits dK / dV evenly");
  static_assert(kWqM * kWqD == WARPS && kQCols % kQChunk == 0 && kQChunk % 16 == 0,
                "bsa_bwd: phase 2b splits the dQ tile evenly");
  static_assert(kSlot % 32 == 0, "bsa_bwd: a 32-row warp tile lies in one slot");
};

template <typename T, int D, int BS, int BM>
__global__ void __launch_bounds__(BsaBwdConfig<T, D, BS, BM>::kThreads, 1)
    bsa_bwd_main(const __grid_constant__ BsaBwdParams p) {
  using Cfg = BsaBwdConfig<T, D, BS, BM>;
  using Mma = MmaOp<T>;
  constexpr int BN = Cfg::BN, kPitch = Cfg::kPitch, kPs = Cfg::kPsPitch, kDT = Cfg::kDT;
  constexpr int kSlot = Cfg::kSlot, kSlots = Cfg::kSlots, kSubs = Cfg::kSubs;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  T* sK = reinterpret_cast<T*>(smem_raw);
  T* sV = sK + BN * kPitch;
  T* sQbuf = sV + BN * kPitch;          // [2][BM][kPitch]
  T* sdObuf = sQbuf + 2 * BM * kPitch;  // [2][BM][kPitch]
  T* sPt = sdObuf + 2 * BM * kPitch;    // [BN][kPs]: P^T of the current item
  T* sdSt = sPt + BN * kPs;             // [BN][kPs]: dS^T of the current item
  float* sLse = reinterpret_cast<float*>(sdSt + BN * kPs);  // [2][BM]
  float* sDelta = sLse + 2 * BM;                            // [2][BM]

  const int kb = blockIdx.x, r = blockIdx.y, b = blockIdx.z;
  const long long seg = (static_cast<long long>(b) * p.h_kv + r) * p.n_kv + kb;
  const int first = p.offsets[seg];
  const int n_slots = (p.offsets[seg + 1] - first) * kSubs;
  const int n_items = (n_slots + kSlots - 1) / kSlots;
  const int key0 = kb * BS;
  const int kv_valid = min(BS, p.s_kv - key0);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;

  // Keys of this block visible to query head h: min(bsz, S_kv - key0), clamped to [0, BS].
  auto block_len = [&](int h) -> int {
    int sz = BS;
    if (p.bsz_rank == 1) sz = p.block_sizes[kb * p.bsz_s0];
    else if (p.bsz_rank == 2) sz = p.block_sizes[b * p.bsz_s0 + kb * p.bsz_s1];
    else if (p.bsz_rank == 3) sz = p.block_sizes[b * p.bsz_s0 + h * p.bsz_s1 + kb * p.bsz_s2];
    return max(0, min(sz, kv_valid));
  };
  // Slot g of this CTA's list: query head h and first query row m0; false when the slot is absent (past
  // the list: the second slot of a bs-64 item with an odd entry count) or wholly past S_q.
  auto slot_of = [&](int g, int& h, int& m0) -> bool {
    h = 0;
    m0 = 0;
    if (g >= n_slots) return false;
    const int e = g / kSubs, sub = g - e * kSubs;
    const int ent = p.list[first + e];
    const int hg = ent / p.n_q, qb = ent - hg * p.n_q;
    h = r * p.group + hg;
    m0 = qb * BS + sub * kSlot;
    return m0 < p.s_q;
  };

  // Phase 2a ownership (dK / dV accumulators and the final stores).
  const int n2 = (warp % Cfg::kW2N) * 32, d2 = (warp / Cfg::kW2N) * Cfg::kDCols;
  float dk[2][kDT][4], dv[2][kDT][4];
#pragma unroll
  for (int mt = 0; mt < 2; ++mt)
#pragma unroll
    for (int dt = 0; dt < kDT; ++dt)
#pragma unroll
      for (int e = 0; e < 4; ++e) dk[mt][dt][e] = dv[mt][dt][e] = 0.f;

  if (n_items > 0) {
    load_tile_affine<Cfg, BN>(sK, static_cast<const T*>(p.k) + b * p.k_sb + r * p.k_sh + static_cast<long long>(key0) * p.k_ss,
                              p.k_ss, kv_valid);
    load_tile_affine<Cfg, BN>(sV, static_cast<const T*>(p.v) + b * p.v_sb + r * p.v_sh + static_cast<long long>(key0) * p.v_ss,
                              p.v_ss, kv_valid);
    // Item t's slots: present, query head, first row, visible keys (the metadata reads are issued a
    // barrier ahead of their use).
    struct Slots {
      bool act[kSlots];
      int h[kSlots], m0[kSlots], len[kSlots];
    };
    auto slots_of = [&](int t, Slots& q) {
#pragma unroll
      for (int s = 0; s < kSlots; ++s) {
        q.act[s] = slot_of(t * kSlots + s, q.h[s], q.m0[s]);
        q.len[s] = q.act[s] ? block_len(q.h[s]) : 0;
      }
    };
    // Loads item t's present slots (Q, dO, lse2, delta) into buffer t % 2 and commits a group (an empty
    // one past the last item; group 0 also holds K and V). Absent slots are never read.
    auto issue = [&](int t, const Slots& q) {
      if (t < n_items) {
        const int buf = t & 1;
#pragma unroll
        for (int s = 0; s < kSlots; ++s) {
          if (!q.act[s]) continue;
          const int h = q.h[s], m0 = q.m0[s];
          const int valid = p.s_q - m0;  // > 0; rows past S_q are zero-filled
          load_tile_affine<Cfg, kSlot>(sQbuf + (buf * BM + s * kSlot) * kPitch,
                                       static_cast<const T*>(p.q) + b * p.q_sb + h * p.q_sh + static_cast<long long>(m0) * p.q_ss,
                                       p.q_ss, valid);
          load_tile_affine<Cfg, kSlot>(sdObuf + (buf * BM + s * kSlot) * kPitch,
                                       static_cast<const T*>(p.dout) + b * p.do_sb + h * p.do_sh +
                                           static_cast<long long>(m0) * p.do_ss,
                                       p.do_ss, valid);
          // lse2 / delta of the slot's 64 rows (padding rows past S_q hold +inf / 0: P = 0 there).
          const long long row0 = (static_cast<long long>(b) * p.h_q + h) * p.s_pad + m0;
          for (int c = threadIdx.x; c < kSlot / 2; c += Cfg::kThreads) {
            const bool is_delta = c >= kSlot / 4;
            const int cc = is_delta ? c - kSlot / 4 : c;
            cp_async_16((is_delta ? sDelta : sLse) + buf * BM + s * kSlot + cc * 4,
                        (is_delta ? p.delta : p.lse2) + row0 + cc * 4, true);
          }
        }
      }
      cp_async_commit();
    };
    Slots cur;
    slots_of(0, cur);
    issue(0, cur);

    for (int t = 0; t < n_items; ++t) {
      Slots nxt;
      slots_of(t + 1, nxt);  // (absent past the last item)
      cp_async_wait<0>();
      __syncthreads();  // item t (and K, V) landed; every warp is done with item t - 1 (its buffer, P^T, dS^T)
      issue(t + 1, nxt);  // into buffer (t + 1) % 2: lands while item t computes
      const int buf = t & 1;
      const T* sQ = sQbuf + buf * BM * kPitch;
      const T* sdO = sdObuf + buf * BM * kPitch;
      const bool* act = cur.act;
      // Slot s's entries with a warp-dependent s, by selects (no local-memory indexing).
      auto act_of = [&](int s) { return kSlots == 1 || s == 0 ? cur.act[0] : cur.act[kSlots - 1]; };
      auto h_of = [&](int s) { return kSlots == 1 || s == 0 ? cur.h[0] : cur.h[kSlots - 1]; };
      auto m0_of = [&](int s) { return kSlots == 1 || s == 0 ? cur.m0[0] : cur.m0[kSlots - 1]; };
      auto len_of = [&](int s) { return kSlots == 1 || s == 0 ? cur.len[0] : cur.len[kSlots - 1]; };

      // Phase 1: the warp's 32 keys x 32 queries of S^T and dP^T, then P^T and dS^T (16-bit) to shared.
      {
        const int n1 = (warp % Cfg::kW1N) * 32, c1 = (warp / Cfg::kW1N) * 32;
        const int s = c1 / kSlot;
        if (act_of(s)) {
          const int len = len_of(s);
          const float* lse2 = sLse + buf * BM;
          const float* delta = sDelta + buf * BM;
          float st[2][4][4], dpt[2][4][4];
#pragma unroll
          for (int mt = 0; mt < 2; ++mt)
#pragma unroll
            for (int nt = 0; nt < 4; ++nt)
#pragma unroll
              for (int e = 0; e < 4; ++e) st[mt][nt][e] = dpt[mt][nt][e] = 0.f;
#pragma unroll
          for (int ks = 0; ks < Cfg::kKS; ++ks) {
            unsigned ak[2][4];
#pragma unroll
            for (int mt = 0; mt < 2; ++mt)
              ldmatrix_x4(ak[mt], sK + (n1 + mt * 16 + lane % 16) * kPitch + ks * 16 + (lane / 16) * 8);
#pragma unroll
            for (int np = 0; np < 2; ++np) {
              unsigned bq[4];
              ldmatrix_x4(bq, sQ + (c1 + np * 16 + (lane % 8) + (lane / 16) * 8) * kPitch + ks * 16 + ((lane / 8) % 2) * 8);
#pragma unroll
              for (int mt = 0; mt < 2; ++mt) {
                Mma::run(st[mt][2 * np], ak[mt], bq[0], bq[1]);
                Mma::run(st[mt][2 * np + 1], ak[mt], bq[2], bq[3]);
              }
            }
            unsigned av[2][4];
#pragma unroll
            for (int mt = 0; mt < 2; ++mt)
              ldmatrix_x4(av[mt], sV + (n1 + mt * 16 + lane % 16) * kPitch + ks * 16 + (lane / 16) * 8);
#pragma unroll
            for (int np = 0; np < 2; ++np) {
              unsigned bo[4];
              ldmatrix_x4(bo, sdO + (c1 + np * 16 + (lane % 8) + (lane / 16) * 8) * kPitch + ks * 16 + ((lane / 8) % 2) * 8);
#pragma unroll
              for (int mt = 0; mt < 2; ++mt) {
                Mma::run(dpt[mt][2 * np], av[mt], bo[0], bo[1]);
                Mma::run(dpt[mt][2 * np + 1], av[mt], bo[2], bo[3]);
              }
            }
          }
          // P^T = exp2(S^T scale log2(e) - lse2) (0 for hidden keys and lse = -inf rows); dS^T = P^T (dP^T - delta).
          const bool mask = len < BN;
#pragma unroll
          for (int nt = 0; nt < 4; ++nt) {
            const int col = c1 + nt * 8 + 2 * (lane % 4);
            const float l0 = lse2[col], l1 = lse2[col + 1], e0 = delta[col], e1 = delta[col + 1];
#pragma unroll
            for (int mt = 0; mt < 2; ++mt)
#pragma unroll
              for (int e = 0; e < 4; ++e) {
                float pv = fast_exp2(fmaf(st[mt][nt][e], p.scale_log2, -((e & 1) ? l1 : l0)));
                if (mask && n1 + mt * 16 + lane / 4 + (e >> 1) * 8 >= len) pv = 0.f;
                st[mt][nt][e] = pv;
                dpt[mt][nt][e] = pv * (dpt[mt][nt][e] - ((e & 1) ? e1 : e0));
              }
          }
#pragma unroll
          for (int mt = 0; mt < 2; ++mt)
#pragma unroll
            for (int nt = 0; nt < 4; ++nt) {
              const int off = (n1 + mt * 16 + lane / 4) * kPs + c1 + nt * 8 + 2 * (lane % 4);
              *reinterpret_cast<unsigned*>(sPt + off) = Mma::pack(st[mt][nt][0], st[mt][nt][1]);
              *reinterpret_cast<unsigned*>(sPt + off + 8 * kPs) = Mma::pack(st[mt][nt][2], st[mt][nt][3]);
              *reinterpret_cast<unsigned*>(sdSt + off) = Mma::pack(dpt[mt][nt][0], dpt[mt][nt][1]);
              *reinterpret_cast<unsigned*>(sdSt + off + 8 * kPs) = Mma::pack(dpt[mt][nt][2], dpt[mt][nt][3]);
            }
        }
      }
      __syncthreads();  // P^T and dS^T complete

      // Phase 2a: dV += P^T dO, dK += dS^T Q for the warp's 32 keys x kDCols, over the present slots.
#pragma unroll
      for (int s = 0; s < kSlots; ++s) {
        if (!act[s]) continue;
#pragma unroll
        for (int kq = 0; kq < kSlot / 16; ++kq) {
          const int q0 = s * kSlot + kq * 16;
          unsigned ap[2][4], as[2][4];
#pragma unroll
          for (int mt = 0; mt < 2; ++mt) {
            ldmatrix_x4(ap[mt], sPt + (n2 + mt * 16 + lane % 16) * kPs + q0 + (lane / 16) * 8);
            ldmatrix_x4(as[mt], sdSt + (n2 + mt * 16 + lane % 16) * kPs + q0 + (lane / 16) * 8);
          }
#pragma unroll
          for (int dp = 0; dp < kDT / 2; ++dp) {
            const int off = (q0 + (lane % 8) + ((lane / 8) % 2) * 8) * kPitch + d2 + dp * 16 + (lane / 16) * 8;
            unsigned bo[4], bq[4];
            ldmatrix_x4_trans(bo, sdO + off);
            ldmatrix_x4_trans(bq, sQ + off);
#pragma unroll
            for (int mt = 0; mt < 2; ++mt) {
              Mma::run(dv[mt][2 * dp], ap[mt], bo[0], bo[1]);
              Mma::run(dv[mt][2 * dp + 1], ap[mt], bo[2], bo[3]);
              Mma::run(dk[mt][2 * dp], as[mt], bq[0], bq[1]);
              Mma::run(dk[mt][2 * dp + 1], as[mt], bq[2], bq[3]);
            }
          }
        }
      }

      // Phase 2b: dQ_acc[m0 + m, :] += dS[m, :] K over the block's keys, 32 rows x kQCols per warp.
      {
        const int q0 = (warp % Cfg::kWqM) * 32, dq0 = (warp / Cfg::kWqM) * Cfg::kQCols;
        const int s = q0 / kSlot;
        if (act_of(s)) {
          float* acc = p.dq_acc + ((static_cast<long long>(b) * p.h_q + h_of(s)) * p.s_pad + m0_of(s) + (q0 - s * kSlot) +
                                   lane / 4) * D;
#pragma unroll
          for (int c0 = 0; c0 < Cfg::kQCols; c0 += Cfg::kQChunk) {
            float dqf[2][Cfg::kQChunk / 8][4];
#pragma unroll
            for (int mt = 0; mt < 2; ++mt)
#pragma unroll
              for (int nt = 0; nt < Cfg::kQChunk / 8; ++nt)
#pragma unroll
                for (int e = 0; e < 4; ++e) dqf[mt][nt][e] = 0.f;
#pragma unroll
            for (int ks = 0; ks < BN / 16; ++ks) {
              unsigned a[2][4];
#pragma unroll
              for (int mt = 0; mt < 2; ++mt)
                ldmatrix_x4_trans(a[mt], sdSt + (ks * 16 + (lane % 8) + (lane / 16) * 8) * kPs + q0 + mt * 16 +
                                             ((lane / 8) % 2) * 8);
#pragma unroll
              for (int dp = 0; dp < Cfg::kQChunk / 16; ++dp) {
                unsigned bk[4];
                ldmatrix_x4_trans(bk, sK + (ks * 16 + (lane % 8) + ((lane / 8) % 2) * 8) * kPitch + dq0 + c0 + dp * 16 +
                                          (lane / 16) * 8);
#pragma unroll
                for (int mt = 0; mt < 2; ++mt) {
                  Mma::run(dqf[mt][2 * dp], a[mt], bk[0], bk[1]);
                  Mma::run(dqf[mt][2 * dp + 1], a[mt], bk[2], bk[3]);
                }
              }
            }
#pragma unroll
            for (int mt = 0; mt < 2; ++mt)
#pragma unroll
              for (int nt = 0; nt < Cfg::kQChunk / 8; ++nt) {
                const int col = dq0 + c0 + nt * 8 + 2 * (lane % 4);
                red_add_f32x2(acc + (mt * 16) * D + col, dqf[mt][nt][0], dqf[mt][nt][1]);
                red_add_f32x2(acc + (mt * 16 + 8) * D + col, dqf[mt][nt][2], dqf[mt][nt][3]);
              }
          }
        }
      }
      cur = nxt;
    }
    cp_async_wait<0>();  // no cp.async may be pending past here (the last group is empty)
  }

  // dK = scale * sum dS^T q, dV = sum P^T do: every key row < S_kv of the block (zeros when unselected).
#pragma unroll
  for (int mt = 0; mt < 2; ++mt)
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
      const int j = key0 + n2 + mt * 16 + lane / 4 + hf * 8;
      if (j >= p.s_kv) continue;
      T* dk_row = static_cast<T*>(p.dk) + b * p.dk_sb + r * p.dk_sh + static_cast<long long>(j) * p.dk_ss + d2 + 2 * (lane % 4);
      T* dv_row = static_cast<T*>(p.dv) + b * p.dv_sb + r * p.dv_sh + static_cast<long long>(j) * p.dv_ss + d2 + 2 * (lane % 4);
#pragma unroll
      for (int dt = 0; dt < kDT; ++dt) {
        *reinterpret_cast<unsigned*>(dk_row + dt * 8) =
            Mma::pack(dk[mt][dt][2 * hf] * p.scale, dk[mt][dt][2 * hf + 1] * p.scale);
        *reinterpret_cast<unsigned*>(dv_row + dt * 8) = Mma::pack(dv[mt][dt][2 * hf], dv[mt][dt][2 * hf + 1]);
      }
    }
}

}  // namespace attnjit::kernels
