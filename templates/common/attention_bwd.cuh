// The portable (mma.sync, sm_80+) attention backward shared by bsa_bwd and gqa_bwd: a
// FlashAttention-2-style key-block-parallel backward. What differs between the two ops is only which
// query rows meet each key block (the schedule) and which (key, query) pairs are masked:
//   - RoutedSlots (bsa_bwd): the key block's list of (query head, query block) entries that the route
//     and scan kernels built from the block-sparse index; keys past the block's length are hidden;
//   - DenseSlots (gqa_bwd): every query head of the KV group times every 64-row query slot, from the
//     first slot that can see the block when causal; keys after the query row are hidden when causal.
//
// Kernels of a launch (the op's planner orders them on one stream; scratch in the plan workspace):
//   prep   per query row: lse2 = lse * log2(e) (+inf where lse = -inf, so P = 0), delta = sum_d o * do,
//          and the row's fp32 dq accumulator zeroed;
//   main   one CTA per (key block, KV head, batch): K and V stay in shared memory; the schedule's query
//          slots (64 rows of one query head of the group) are walked in items of BM rows: S^T = K Q^T,
//          dP^T = V dO^T, P^T = exp2(S^T scale log2(e) - lse2), dS^T = P^T (dP^T - delta) (P^T, dS^T to
//          shared memory), then dV += P^T dO, dK += dS^T Q (registers), dQ_acc += dS K (fp32 red.add);
//          at the end dK * scale and dV are stored (zeros for keys no slot reaches);
//   dq     dq = rnd(scale * dq_acc) for every row.
// dQ accumulates with fp32 atomics: the order of the adds into one row follows the CTAs' progress, so
// results are not bitwise reproducible, except under a deterministic schedule (DenseSlots<.., true>):
// there each slot's dQ adds wait their turn on a per-slot counter, in key-block order (every CTA of a
// (batch, KV head) walks the slots in the same order, and CTAs start in grid order, so a CTA only waits
// for CTAs that started before it: no deadlock). dK and dV are summed inside one CTA in a fixed order.
#pragma once
#include "common/attention_bwd_params.cuh"
#include "common/mma.cuh"
#include "common/numeric.cuh"
#include "common/tile_loader.cuh"  // load_tile_affine (cp.async tile loads with zero-filled tails)

namespace attnjit::kernels {

constexpr float kAttnBwdLog2e = 1.44269504088896340736f;

// Row-wise preprocessing over [B, H, s_pad] rows, DP / 8 threads per row (one 16-byte chunk each; the
// chunks of a D < DP head dim past D only zero their accumulator columns).
template <typename T, int D, int DP>
__device__ __forceinline__ void attn_bwd_prep_rows(const AttnBwdParams& p) {
  constexpr int kLanes = DP / 8, kChunks = D / 8;
  static_assert(32 % kLanes == 0, "attn_bwd_prep: a row's threads share one warp");
  const long long rows = static_cast<long long>(p.batch) * p.h_q * p.s_pad;
  const long long gid = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  const long long row = gid / kLanes;
  const int ch = static_cast<int>(gid % kLanes);
  const bool valid = row < rows;
  float dot = 0.f;
  int b = 0, h = 0, i = 0;
  if (valid) {
    i = static_cast<int>(row % p.s_pad);
    const long long bh = row / p.s_pad;
    h = static_cast<int>(bh % p.h_q);
    b = static_cast<int>(bh / p.h_q);
    if (i < p.s_q && (kChunks == kLanes || ch < kChunks)) {
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
    float4* acc = reinterpret_cast<float4*>(p.dq_acc + row * DP + ch * 8);
    acc[0] = make_float4(0.f, 0.f, 0.f, 0.f);
    acc[1] = make_float4(0.f, 0.f, 0.f, 0.f);
  }
#pragma unroll
  for (int off = kLanes / 2; off > 0; off >>= 1) dot += __shfl_xor_sync(0xffffffffu, dot, off);
  if (valid && ch == 0) {
    float l2 = kInf(), dl = 0.f;
    if (i < p.s_q) {
      const float l = p.lse[b * p.lse_sb + h * p.lse_sh + static_cast<long long>(i) * p.lse_ss];
      l2 = l == -kInf() ? kInf() : l * kAttnBwdLog2e;
      dl = dot;
    }
    p.lse2[row] = l2;
    p.delta[row] = dl;
  }
}

// dq = rnd(scale * dq_acc) for every row i < S_q, one 16-byte chunk of the D columns per thread.
template <typename T, int D, int DP>
__device__ __forceinline__ void attn_bwd_dq_rows(const AttnBwdParams& p) {
  constexpr int kChunks = D / 8;
  const long long gid = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  const long long total = static_cast<long long>(p.batch) * p.h_q * p.s_q * kChunks;
  if (gid >= total) return;
  const int ch = static_cast<int>(gid % kChunks);
  const long long row = gid / kChunks;
  const int i = static_cast<int>(row % p.s_q);
  const long long bh = row / p.s_q;
  const int h = static_cast<int>(bh % p.h_q), b = static_cast<int>(bh / p.h_q);
  const float4* src = reinterpret_cast<const float4*>(p.dq_acc + (bh * p.s_pad + i) * DP + ch * 8);
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

// The deterministic schedule's turn counters: a CTA waits until the slot's counter reaches its turn
// (acquire), adds its dQ, and passes the turn on (release, after a barrier over its adders).
__device__ __forceinline__ bool attn_bwd_turn_came(const int* sem, int turn) {
  int v;
  asm volatile("ld.acquire.gpu.global.s32 %0, [%1];\n" : "=r"(v) : "l"(sem) : "memory");
  return v == turn;
}
__device__ __forceinline__ void attn_bwd_wait_turn(const int* sem, int turn) {
  while (!attn_bwd_turn_came(sem, turn)) {
  }
}
__device__ __forceinline__ void attn_bwd_pass_turn(int* sem) {
  __threadfence();
  asm volatile("red.release.gpu.global.add.s32 [%0], 1;\n" ::"l"(sem) : "memory");
}

// The routed schedule of bsa_bwd: slot g of the key block's list is the 64-row part g % kSubs of list
// entry g / kSubs (a query block of BS rows of one query head of the group).
template <int BS>
struct RoutedSlots {
  static constexpr bool kCausal = false, kDeterministic = false, kWindow = false;
  static constexpr int kSubs = BS / 64;  // slots per list entry
  const AttnBwdParams& p;
  int kb, r, b, first, n_slots, kv_valid;
  __device__ __forceinline__ RoutedSlots(const AttnBwdParams& p_, int kb_, int r_, int b_) : p(p_), kb(kb_), r(r_), b(b_) {
    const long long seg = (static_cast<long long>(b) * p.h_kv + r) * p.n_kv + kb;
    first = p.offsets[seg];
    n_slots = (p.offsets[seg + 1] - first) * kSubs;
    kv_valid = min(BS, p.s_kv - kb * BS);
  }
  // Query head h and first query row m0 of slot g < n_slots.
  __device__ __forceinline__ void slot_at(int g, int& h, int& m0) const {
    const int e = g / kSubs, sub = g - e * kSubs;
    const int ent = p.list[first + e];
    const int hg = ent / p.n_q, qb = ent - hg * p.n_q;
    h = r * p.group + hg;
    m0 = qb * BS + sub * 64;
  }
  // Keys of this block visible to query head h: min(bsz, S_kv - key0), clamped to [0, BS].
  __device__ __forceinline__ int len(int h) const {
    int sz = BS;
    if (p.bsz_rank == 1) sz = p.block_sizes[kb * p.bsz_s0];
    else if (p.bsz_rank == 2) sz = p.block_sizes[b * p.bsz_s0 + kb * p.bsz_s1];
    else if (p.bsz_rank == 3) sz = p.block_sizes[b * p.bsz_s0 + h * p.bsz_s1 + kb * p.bsz_s2];
    return max(0, min(sz, kv_valid));
  }
  __device__ __forceinline__ int* sem(int, int) const { return nullptr; }
  __device__ __forceinline__ int turn(int) const { return 0; }
  __device__ __forceinline__ int left_reach() const { return 0; }
  __device__ __forceinline__ int right_reach() const { return 0; }
};

// The dense schedule of gqa_bwd (square, S_q = S_kv): slot g is 64-row query slot m_first + g % tiles of
// query head r * group + g / tiles, where m_first is the first slot that can see the block (causal) or 0.
// CTAs of one (batch, KV head) are adjacent in the grid (key block fastest): they stream the same
// query slots at about the same time, so Q and dO are read from L2 once per group of key blocks
// (ordering the CTAs by key block first lost 5-20% to L2 misses on the H200). Deterministic causal
// schedules take that order all the same (grid (H_kv * B, key blocks): the key block slowest): their
// turns pass from key block 0 upwards, so the key block 0 CTAs of every group must start first (H200,
// S 4096 causal: 1.5x faster). A turn only waits for CTAs that started earlier either way.
// Deterministic schedules walk each head's slots from the last:
// every CTA then meets the same slot first, and the turns pass along the key blocks one slot apart
// (walking up, key block kb's first slot would wait for key block 0 to climb to it).
template <int BN, bool CAUSAL, bool DET, bool WINDOW = false>
struct DenseSlots {
  static constexpr bool kCausal = CAUSAL, kDeterministic = DET, kWindow = WINDOW;
  static constexpr int kUnlimited = 1 << 28;  // a reach no row distance exceeds
  const AttnBwdParams& p;
  int kb, r, b, m_start, tiles, n_slots, kv_valid;  // m_start: the first slot walked (the last when DET)
  __device__ __forceinline__ DenseSlots(const AttnBwdParams& p_, int kb_, int r_, int b_) : p(p_), kb(kb_), r(r_), b(b_) {
    if constexpr (CAUSAL && DET) {
      // Grid (H_kv * B * band, ceil(key blocks / band)): blockIdx.x = (b, r) * band + kb % band, blockIdx.y
      // = kb / band, so each (batch, KV head)'s key blocks rise with the linear block index (a CTA waits
      // only for CTAs launched before it), the heaviest causal blocks start first, and the band's key
      // blocks of a group run together, sharing its Q and dO reads in L2. The host picks the band
      // (gqa_bwd_det_causal_band); key blocks past the last one (a partial last band) are idle().
      const int band = static_cast<int>(gridDim.x) / (p.batch * p.h_kv);
      const int g = kb_ / band;
      kb = r_ * band + (kb_ - g * band);
      r = g % p.h_kv;
      b = g / p.h_kv;
    }
    // Rows that see a key of the block: [key0 - right reach, key0 + BN - 1 + left reach].
    const int key0 = kb * BN;
    const int lo_row = max(0, key0 - right_reach());
    const int hi_row = min(p.s_q - 1, key0 + BN - 1 + left_reach());
    const int m_first = lo_row / 64, m_last = hi_row / 64;  // m_first <= m_last: row key0 sees key key0
    m_start = DET ? m_last : m_first;
    tiles = m_last - m_first + 1;
    n_slots = p.group * tiles;
    kv_valid = min(BN, p.s_kv - key0);
  }
  // How far right of its row (key - row) and left (row - key) a visible key may lie.
  __device__ __forceinline__ int right_reach() const {
    if constexpr (WINDOW) {
      if (CAUSAL) return 0;
      return p.window_right >= 0 ? p.window_right : kUnlimited;
    }
    return CAUSAL ? 0 : kUnlimited;
  }
  __device__ __forceinline__ int left_reach() const {
    if constexpr (WINDOW) return p.window_left >= 0 ? p.window_left : kUnlimited;
    return kUnlimited;
  }
  __device__ __forceinline__ void slot_at(int g, int& h, int& m0) const {
    const int hg = g / tiles;
    h = r * p.group + hg;
    const int t = g - hg * tiles;
    m0 = (DET ? m_start - t : m_start + t) * 64;
  }
  __device__ __forceinline__ int len(int) const { return kv_valid; }
  // A CTA of a partial last band (deterministic causal grid) holds no key block: it returns at once.
  __device__ __forceinline__ bool idle() const { return CAUSAL && DET && kb * BN >= p.s_kv; }
  // The slot's turn counter, and this CTA's turn there: the key blocks that reach slot m0 are
  // consecutive, from the one holding key m0 - left reach (0 without a left window) to the last.
  __device__ __forceinline__ int* sem(int h, int m0) const {
    return p.dq_sem + (static_cast<long long>(b) * p.h_q + h) * p.n_q + m0 / 64;
  }
  __device__ __forceinline__ int turn(int m0) const {
    if constexpr (WINDOW) return p.window_left >= 0 ? kb - max(0, m0 - p.window_left) / BN : kb;
    return kb;
  }
};

// Tile geometry of the portable main kernel: BN keys per CTA, items of BM query rows made of 64-row
// slots, compute head dim DP (D rounded up to a tile multiple; columns past D are zero in shared memory
// and never stored). Three phases per item with eight warps:
//   1. S^T = K Q^T, dP^T = V dO^T, P^T, dS^T -> shared memory: warps kW1N (keys) x kW1M (queries), warp
//      tiles 32 keys x kQW queries;
//   2a. dV += P^T dO, dK += dS^T Q (registers): warps kW2N (keys) x kW2D (head dim);
//   2b. dQ_acc += dS K (fp32 red.add): warps kWqM (query rows) x kWqD (head dim).
// 32-row warp tiles halve the shared-memory reads per MMA of the A-operand side against 16-row tiles;
// shared-memory bandwidth is what limits mma.sync attention.
template <typename T_, int D_, int DP_, int BN_, int BM_>
struct AttnBwdTile {
  using T = T_;
  using TKV = T_;  // the names load_tile_affine reads
  static constexpr bool kFp8KV = false;
  static constexpr int D = DP_;                  // compute head dim (the loaders' Load::D is the real one)
  static constexpr int kLoadD = D_;
  static constexpr int BN = BN_, BM = BM_;
  static constexpr int kSlot = 64;               // query rows per slot
  static constexpr int kSlots = BM / kSlot;      // slots per item: 1 or 2
  static constexpr int WARPS = 8;
  static constexpr int kThreads = WARPS * 32;
  static constexpr int kW1N = BN / 32, kW1M = WARPS / kW1N, kQW = BM / kW1M;  // phase 1: 32 keys x kQW queries
  static constexpr int kW2N = BN / 32, kW2D = WARPS / kW2N, kDCols = D / kW2D;  // phase 2a: 32 keys x kDCols
  static constexpr int kDT = kDCols / 8;                                      // n8 tiles of dK / dV per warp
  static constexpr int kWqM = BM / 32, kWqD = WARPS / kWqM, kQCols = D / kWqD;  // phase 2b: 32 rows x kQCols
  // dQ columns per pass: 32, or all 64 where the dK / dV accumulators are small enough (bs 64, D 128).
  static constexpr int kQChunk = kQCols > 32 && kDT > 4 ? 32 : kQCols;
  static constexpr int kKS = D / 16;        // k16 steps over the head dim
  static constexpr int kPitch = D + 8;      // shared row pitch (elements) of K, V, Q, dO
  static constexpr bool kSwizzle = false;   // padded rows (tile_at, load_tile_affine)
  static constexpr int kPsPitch = BM + 8;   // shared row pitch of P^T and dS^T
  static constexpr int kSmemBytes = attn_bwd_smem_bytes(D, BN, BM);
  // The loaders' view: the real head dim at the compute pitch.
  struct Load {
    using T = T_;
    using TKV = T_;
    static constexpr bool kFp8KV = false, kSwizzle = false;
    static constexpr int D = D_, kThreads = WARPS * 32, kPitch = DP_ + 8;
  };
  static_assert(sizeof(T) == 2, "attn_bwd: 16-bit inputs");
  static_assert(D % 64 == 0 && D_ <= D && D_ % 8 == 0, "attn_bwd: the compute head dim is a multiple of 64");
  static_assert(BN == 64 || BN == 128, "attn_bwd: 64 or 128 keys per CTA");
  static_assert(BM == 64 || BM == 128, "attn_bwd: items of 64 or 128 query rows");
  static_assert(kW1N * kW1M == WARPS && (kQW == 16 || kQW == 32), "attn_bwd: phase 1 tiles the item with 32 x 16 or 32 x 32 warp tiles");
  static_assert(kW2N * kW2D == WARPS && kDCols % 16 == 0, "attn_bwd: phase 2a splits dK / dV evenly");
  static_assert(kWqM * kWqD == WARPS && kQCols % kQChunk == 0 && kQChunk % 16 == 0,
                "attn_bwd: phase 2b splits the dQ tile evenly");
  static_assert(kSlot % 32 == 0, "attn_bwd: a 32-row warp tile lies in one slot");
};

// The main kernel's body for one CTA (key block blockIdx.x, KV head blockIdx.y, batch blockIdx.z).
template <typename Cfg, typename Sched>
__device__ __forceinline__ void attn_bwd_main_body(const AttnBwdParams& p, const Sched& sched) {
  using T = typename Cfg::T;
  using Mma = MmaOp<T>;
  using LoadCfg = typename Cfg::Load;
  constexpr int D = Cfg::D, BN = Cfg::BN, BM = Cfg::BM, kPitch = Cfg::kPitch, kPs = Cfg::kPsPitch, kDT = Cfg::kDT;
  constexpr int kSlot = Cfg::kSlot, kSlots = Cfg::kSlots, kQW = Cfg::kQW;
  static_assert(!Sched::kDeterministic || kSlots == 1, "attn_bwd: deterministic dQ takes items of one slot");
  extern __shared__ __align__(128) unsigned char smem_raw[];
  T* sK = reinterpret_cast<T*>(smem_raw);
  T* sV = sK + BN * kPitch;
  T* sQbuf = sV + BN * kPitch;          // [2][BM][kPitch]
  T* sdObuf = sQbuf + 2 * BM * kPitch;  // [2][BM][kPitch]
  T* sPt = sdObuf + 2 * BM * kPitch;    // [BN][kPs]: P^T of the current item
  T* sdSt = sPt + BN * kPs;             // [BN][kPs]: dS^T of the current item
  float* sLse = reinterpret_cast<float*>(sdSt + BN * kPs);  // [2][BM]
  float* sDelta = sLse + 2 * BM;                            // [2][BM]

  const int kb = sched.kb, r = sched.r, b = sched.b;
  const int n_slots = sched.n_slots;
  const int n_items = (n_slots + kSlots - 1) / kSlots;
  const int key0 = kb * BN;
  const int kv_valid = sched.kv_valid;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;

  // Slot g of this CTA's schedule: query head h and first query row m0; false when the slot is absent
  // (past the schedule: the second slot of a two-slot item with an odd slot count) or wholly past S_q.
  auto slot_of = [&](int g, int& h, int& m0) -> bool {
    h = 0;
    m0 = 0;
    if (g >= n_slots) return false;
    sched.slot_at(g, h, m0);
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
    if constexpr (Cfg::kLoadD < D) {
      // Columns past the real head dim stay zero in every K, V, Q and dO row (the loads never write them).
      constexpr int kPadChunks = (D - Cfg::kLoadD) / 8, kRows = 2 * BN + 4 * BM;
      for (int c = threadIdx.x; c < kRows * kPadChunks; c += Cfg::kThreads)
        *reinterpret_cast<uint4*>(sK + (c / kPadChunks) * kPitch + Cfg::kLoadD + (c % kPadChunks) * 8) = make_uint4(0, 0, 0, 0);
    }
    load_tile_affine<LoadCfg, BN>(sK, static_cast<const T*>(p.k) + b * p.k_sb + r * p.k_sh + static_cast<long long>(key0) * p.k_ss,
                                  p.k_ss, kv_valid);
    load_tile_affine<LoadCfg, BN>(sV, static_cast<const T*>(p.v) + b * p.v_sb + r * p.v_sh + static_cast<long long>(key0) * p.v_ss,
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
        q.len[s] = q.act[s] ? sched.len(q.h[s]) : 0;
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
          load_tile_affine<LoadCfg, kSlot>(sQbuf + (buf * BM + s * kSlot) * kPitch,
                                           static_cast<const T*>(p.q) + b * p.q_sb + h * p.q_sh + static_cast<long long>(m0) * p.q_ss,
                                           p.q_ss, valid);
          load_tile_affine<LoadCfg, kSlot>(sdObuf + (buf * BM + s * kSlot) * kPitch,
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
    int* pending = nullptr;  // deterministic: the turn counter of the slot whose dQ this CTA just added

    for (int t = 0; t < n_items; ++t) {
      Slots nxt;
      slots_of(t + 1, nxt);  // (absent past the last item)
      cp_async_wait<0>();
      __syncthreads();  // item t (and K, V) landed; every warp is done with item t - 1 (its buffer, P^T, dS^T)
      if constexpr (Sched::kDeterministic) {
        if (threadIdx.x == 0 && pending) attn_bwd_pass_turn(pending);
      }
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

      // Phase 1: the warp's 32 keys x kQW queries of S^T and dP^T, then P^T and dS^T (16-bit) to shared.
      {
        const int n1 = (warp % Cfg::kW1N) * 32, c1 = (warp / Cfg::kW1N) * kQW;
        const int s = c1 / kSlot;
        if (act_of(s)) {
          const int len = len_of(s);
          const float* lse2 = sLse + buf * BM;
          const float* delta = sDelta + buf * BM;
          float st[2][kQW / 8][4], dpt[2][kQW / 8][4];
#pragma unroll
          for (int mt = 0; mt < 2; ++mt)
#pragma unroll
            for (int nt = 0; nt < kQW / 8; ++nt)
#pragma unroll
              for (int e = 0; e < 4; ++e) st[mt][nt][e] = dpt[mt][nt][e] = 0.f;
#pragma unroll
          for (int ks = 0; ks < Cfg::kKS; ++ks) {
            unsigned ak[2][4];
#pragma unroll
            for (int mt = 0; mt < 2; ++mt)
              ldmatrix_x4(ak[mt], sK + (n1 + mt * 16 + lane % 16) * kPitch + ks * 16 + (lane / 16) * 8);
#pragma unroll
            for (int np = 0; np < kQW / 16; ++np) {
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
            for (int np = 0; np < kQW / 16; ++np) {
              unsigned bo[4];
              ldmatrix_x4(bo, sdO + (c1 + np * 16 + (lane % 8) + (lane / 16) * 8) * kPitch + ks * 16 + ((lane / 8) % 2) * 8);
#pragma unroll
              for (int mt = 0; mt < 2; ++mt) {
                Mma::run(dpt[mt][2 * np], av[mt], bo[0], bo[1]);
                Mma::run(dpt[mt][2 * np + 1], av[mt], bo[2], bo[3]);
              }
            }
          }
          // P^T = exp2(S^T scale log2(e) - lse2) (0 for keys past len and lse = -inf rows); dS^T = P^T (dP^T - delta).
          const bool mask = len < BN;
#pragma unroll
          for (int nt = 0; nt < kQW / 8; ++nt) {
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
            for (int nt = 0; nt < kQW / 8; ++nt) {
              const int off = (n1 + mt * 16 + lane / 4) * kPs + c1 + nt * 8 + 2 * (lane % 4);
              *reinterpret_cast<unsigned*>(sPt + off) = Mma::pack(st[mt][nt][0], st[mt][nt][1]);
              *reinterpret_cast<unsigned*>(sPt + off + 8 * kPs) = Mma::pack(st[mt][nt][2], st[mt][nt][3]);
              *reinterpret_cast<unsigned*>(sdSt + off) = Mma::pack(dpt[mt][nt][0], dpt[mt][nt][1]);
              *reinterpret_cast<unsigned*>(sdSt + off + 8 * kPs) = Mma::pack(dpt[mt][nt][2], dpt[mt][nt][3]);
            }
          if constexpr (Sched::kWindow) {
            // Windows: key key0 + n is visible from query row q + c (q the warp tile's first row) when
            // -left reach <= n - c - (q - key0) <= right reach; warp tiles with a hidden pair zero those
            // P^T and dS^T entries in shared memory, as the causal pass below.
            const int diag = m0_of(s) + (c1 - s * kSlot) - key0;
            const int right = sched.right_reach(), left = sched.left_reach();
            if (n1 + 31 - diag > right || n1 - diag + left < kQW - 1) {
              __syncwarp();
              const int n = n1 + lane;
              const int lo = min(kQW, max(0, n - diag - right)), hi = max(-1, min(kQW - 1, n - diag + left));
              unsigned short* pr = reinterpret_cast<unsigned short*>(sPt + n * kPs + c1);
              unsigned short* dr = reinterpret_cast<unsigned short*>(sdSt + n * kPs + c1);
              for (int c = 0; c < kQW; ++c)
                if (c < lo || c > hi) pr[c] = dr[c] = 0;
            }
          } else if constexpr (Sched::kCausal) {
            // Causal: key key0 + n is hidden from query row q + c (q the warp tile's first row) when
            // c < n - (q - key0). A warp tile crossing the diagonal zeroes those P^T and dS^T entries in
            // shared memory, after the fragments died: masking the fragments in registers spilled.
            const int diag = m0_of(s) + (c1 - s * kSlot) - key0;
            if (n1 + 31 > diag) {
              __syncwarp();
              const int n = n1 + lane, hide = min(kQW, n - diag);
              unsigned short* pr = reinterpret_cast<unsigned short*>(sPt + n * kPs + c1);
              unsigned short* dr = reinterpret_cast<unsigned short*>(sdSt + n * kPs + c1);
              for (int c = 0; c < hide; ++c) pr[c] = dr[c] = 0;
            }
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

      if constexpr (Sched::kDeterministic) {
        // This slot's dQ adds wait for the key blocks before this one (phase 2a ran meanwhile).
        if (threadIdx.x == 0) attn_bwd_wait_turn(sched.sem(cur.h[0], cur.m0[0]), sched.turn(cur.m0[0]));
        __syncthreads();
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
      if constexpr (Sched::kDeterministic) pending = sched.sem(cur.h[0], cur.m0[0]);
      cur = nxt;
    }
    cp_async_wait<0>();  // no cp.async may be pending past here (the last group is empty)
    if constexpr (Sched::kDeterministic) {
      __syncthreads();  // every warp's adds of the last slot are issued
      if (threadIdx.x == 0 && pending) attn_bwd_pass_turn(pending);
    }
  }

  // dK = scale * sum dS^T q, dV = sum P^T do: every key row < S_kv of the block (zeros when unreached).
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
        if (Cfg::kLoadD < D && d2 + dt * 8 >= Cfg::kLoadD) continue;  // padding columns
        *reinterpret_cast<unsigned*>(dk_row + dt * 8) =
            Mma::pack(dk[mt][dt][2 * hf] * p.scale, dk[mt][dt][2 * hf + 1] * p.scale);
        *reinterpret_cast<unsigned*>(dv_row + dt * 8) = Mma::pack(dv[mt][dt][2 * hf], dv[mt][dt][2 * hf + 1]);
      }
    }
}

}  // namespace attnjit::kernels
