// nsa_topk: NSA block selection; portable backend on warp-level mma.sync (HOP = false), hopper backend on
// sm_90a warpgroup MMA (HOP = true: the CTA's 4 warps are one warpgroup and its 64 rows one m64nBNk16
// wgmma per 16 columns of D, q and the k_cmp tiles in the 128-byte-swizzled 64-column panels wgmma reads).
// The two differ only in the shared-memory layout and the Q K^T instruction: the accumulator layouts
// match (warp w holds rows 16 w + lane / 4 and + 8, column pairs 2 (lane % 4)), so everything after the
// scores is the same code.
//
// A CTA takes TOK consecutive packed tokens and one KV head r; its 64 query rows are (token, head of r's
// group), so every k_cmp tile is loaded once for all of them (G > 64: one token, tiles of 64 heads in
// turn). Tokens of one request share their chunk rows; the CTA's tokens are served request by request
// (a "segment": the tokens with the same first chunk row), the others' rows masked.
//
// Per segment: q rounded as the reference does (rnd(fp32(q) * scale) in the dtype) into shared memory;
// pass 1 streams the complete chunks and keeps each row's online max and sum (lse, fp32, 0 without a
// complete chunk); pass 2 streams the candidates [0, cur] window by window: each warp sums its 16 rows'
// weights exp(s - lse) (1 for the forced chunks 0, cur - 1, cur) into its own slice of the window, with
// no barrier; the slices of a token are then added in warp order (deterministic) into its first warp's
// slice. That warp alone merges the window into the token's running top-S set: keys are importance
// bits + 1 (0: no candidate), an 8-bit radix select over a histogram of its own finds the S-th largest
// key in four passes, then the keys above it and the first keys equal to it (in element order) are kept.
// The result is the set of min(S, candidates) chunks of highest importance, -1 after them.
#pragma once
#include "common/mma.cuh"
#include "common/numeric.cuh"
#include "common/tile_loader.cuh"
#include "nsa/nsa_topk_params.cuh"
#if defined(ATTNJIT_NSA_TOPK_HOPPER)
#include "hopper/sm90.cuh"
#include "hopper/wgmma_ops.cuh"
#endif

namespace attnjit::kernels {

// tile_loader.cuh's layout struct: rows of D 16-bit elements, 128-byte swizzled (D is 64 or 128).
template <typename T_, int D_>
struct NsaTopkTileCfg {
  using T = T_;
  using TKV = T_;
  static constexpr int D = D_;
  static constexpr int kPitch = D_;
  static constexpr bool kSwizzle = true;
  static constexpr int kThreads = kNsaTopkWarps * 32;
  static constexpr bool kFp8KV = false;
};

// One token of the CTA: ok (a token with a request), its request's first chunk row, the last candidate
// hi (candidates c in [lo, hi], those whose chunk row exists), cur and the complete chunk count.
struct NsaTopkToken {
  int ok, chunk0, lo, hi, cur, complete;
};

// The `want` largest of a token's n_el keys (running set, then window), kept by one warp: returns the
// threshold key thr (the want-th largest) and sets `take_eq` to how many keys equal to thr are kept.
// key_at(e) is the e-th key; hist is the warp's 256 counters. want >= 1 and at most the nonzero keys.
template <typename KeyAt>
__device__ __forceinline__ unsigned nsa_topk_radix_select(const KeyAt& key_at, int n_el, int want, int* hist,
                                                          int lane, int& take_eq) {
  unsigned prefix = 0u, mask = 0u;
  int k = want;  // rank of the threshold among the keys matching the prefix, from the top (1-based)
#pragma unroll 1
  for (int shift = 24; shift >= 0; shift -= 8) {
#pragma unroll
    for (int b = 0; b < 8; ++b) hist[lane * 8 + b] = 0;
    __syncwarp();
    for (int e = lane; e < n_el; e += 32) {
      const unsigned key = key_at(e);
      if (key != 0u && (key & mask) == prefix) atomicAdd(hist + ((key >> shift) & 255u), 1);
    }
    __syncwarp();
    // Lane l owns digits 255 - 8 l down to 248 - 8 l: counts in descending digit order.
    int c[8], lsum = 0;
#pragma unroll
    for (int b = 0; b < 8; ++b) c[b] = hist[255 - 8 * lane - b], lsum += c[b];
    int incl = lsum;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const int v = __shfl_up_sync(0xffffffffu, incl, o);
      if (lane >= o) incl += v;
    }
    const int excl = incl - lsum;
    const bool mine = excl < k && k <= incl;
    const int src = __ffs(__ballot_sync(0xffffffffu, mine)) - 1;
    int digit = 0, above = 0;
    if (mine) {
      int run = excl;
      bool found = false;
#pragma unroll
      for (int b = 0; b < 8; ++b)
        if (!found) {
          if (run + c[b] >= k) found = true, digit = 255 - 8 * lane - b, above = run;
          else run += c[b];
        }
    }
    digit = __shfl_sync(0xffffffffu, digit, src);
    above = __shfl_sync(0xffffffffu, above, src);
    k -= above;
    prefix |= static_cast<unsigned>(digit) << shift;
    mask |= 255u << shift;
    __syncwarp();  // every lane read hist before the next pass clears it
  }
  take_eq = k;
  return prefix;
}

constexpr float kLog2e = 1.4426950408889634f;

// v[N] per lane, lanes with the same lane % 4 holding the same N columns of 8 row pairs (lane / 4): sums
// each column over the 8 lanes and leaves column off + k (k < N / 8) at the lane, off = N / 8 (lane & 4 ?
// 1 : 0) + N / 4 (lane & 8 ? 1 : 0) + N / 2 (lane & 16 ? 1 : 0): N - 1 shuffles instead of 3 N.
template <int HALF, int BIT, int N>
__device__ __forceinline__ void nsa_topk_fold(float (&v)[N], int lane) {
  const bool upper = lane & BIT;
#pragma unroll
  for (int i = 0; i < HALF; ++i) {
    const float send = upper ? v[i] : v[i + HALF];
    const float keep = upper ? v[i + HALF] : v[i];
    v[i] = keep + __shfl_xor_sync(0xffffffffu, send, BIT);
  }
}
template <int N>
__device__ __forceinline__ void nsa_topk_reduce_scatter(float (&v)[N], int lane) {
  static_assert(N % 8 == 0, "nsa_topk: whole column groups");
  nsa_topk_fold<N / 2, 16>(v, lane);
  nsa_topk_fold<N / 4, 8>(v, lane);
  nsa_topk_fold<N / 8, 4>(v, lane);
}

// Blocks per SM in the launch bounds: 3 for 32-chunk tiles (at most 168 registers, so that registers
// do not hold the SM to 2 CTAs: the k_cmp stream is latency-bound and wants CTAs), else 1 (without a
// bound ptxas (CUDA 13, sm_90a) held the D 64, TOK 1 variant to 96 registers and spilled).
template <int BN>
__host__ __device__ constexpr int nsa_topk_min_blocks() {
  return BN <= 32 ? 3 : 1;
}
template <typename T, int D, int TOK, int BN, int STAGES, int WIN, bool HOP = false>
__global__ void __launch_bounds__(kNsaTopkWarps * 32, nsa_topk_min_blocks<BN>())
    nsa_topk(const __grid_constant__ NsaTopkParams p) {
  static_assert(sizeof(T) == 2, "nsa_topk: 16-bit operands");
  static_assert(D == 64 || D == 128, "nsa_topk: D is 64 or 128");
  static_assert(TOK == 1 || TOK == 2 || TOK == 4, "nsa_topk: 1, 2 or 4 tokens a CTA");
  static_assert(BN == 32 || BN == 64 || BN == 128, "nsa_topk: tiles of 32, 64 or 128 chunks");
  static_assert(STAGES >= 2 && STAGES <= 4, "nsa_topk: 2 to 4 ring stages");
  static_assert(WIN >= 128 && WIN <= 2048 && WIN % 128 == 0, "nsa_topk: windows of 128 to 2048 candidates");
  using Cfg = NsaTopkTileCfg<T, D>;
  using Mma = MmaOp<T>;
  constexpr int BM = kNsaTopkRows, kWarps = kNsaTopkWarps, kThreads = kWarps * 32;
  constexpr int SMAX = kNsaTopkMaxS, CAP = WIN;
  constexpr int KS = D / 16, kNT = BN / 8, kCh = D / 8, kRowsPerPass = kThreads / 8;
  constexpr int kWarpsPerTok = kWarps / TOK;
  constexpr unsigned kRows16 = 16 * D * sizeof(T);
  static_assert(CAP % BN == 0, "nsa_topk: windows of whole tiles");
  static_assert(BN % kRowsPerPass == 0, "nsa_topk: whole loader passes");
#if defined(ATTNJIT_NSA_TOPK_HOPPER)
  static_assert(kWarps == 4, "nsa_topk: the hopper kernel's CTA is one warpgroup");
#else
  static_assert(!HOP, "nsa_topk: the hopper kernel is compiled with ATTNJIT_NSA_TOPK_HOPPER");
#endif

  extern __shared__ __align__(128) unsigned char smem_raw[];
  // wgmma's swizzled panels need 1024-byte alignment (the planner adds the slack).
#if defined(ATTNJIT_NSA_TOPK_HOPPER)
  unsigned char* smem_base = HOP ? align_smem_1024(smem_raw) : smem_raw;
#else
  unsigned char* smem_base = smem_raw;
#endif
  T* sQ = reinterpret_cast<T*>(smem_base);
  T* sK = sQ + BM * D;
  float* sImp = reinterpret_cast<float*>(sK + STAGES * BN * D);  // [WARPS][CAP]: importances, then keys
  unsigned* sRunKey = reinterpret_cast<unsigned*>(sImp + kWarps * CAP);  // [TOK][SMAX]
  int* sRunId = reinterpret_cast<int*>(sRunKey + TOK * SMAX);            // [TOK][SMAX]
  unsigned* sStKey = reinterpret_cast<unsigned*>(sRunId + TOK * SMAX);   // [TOK][SMAX]
  int* sStId = reinterpret_cast<int*>(sStKey + TOK * SMAX);              // [TOK][SMAX]
  int* sHist = reinterpret_cast<int*>(sStId + TOK * SMAX);               // [WARPS][256]
  NsaTopkToken* tk = reinterpret_cast<NsaTopkToken*>(sHist + kWarps * 256);  // [TOK]

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int r = blockIdx.y;
  const int t0 = blockIdx.x * TOK;
  const int g = p.group;

  if (tid < TOK) {
    NsaTopkToken x{0, 0, 0, -1, -1, 0};
    const int t = t0 + tid;
    if (t < p.T) {
      const long long ti = static_cast<long long>(t) * p.ti_st;
      const int n = p.token_indices[ti], pos = p.token_indices[ti + p.ti_sc];
      if (n >= 0 && n < p.n_req && pos >= 0) {
        x.ok = 1;
        x.chunk0 = p.chunk_offsets[n];
        x.cur = pos / p.bs;
        x.complete = static_cast<int>((static_cast<long long>(pos) + 1) / p.bs);
        x.lo = max(0, -x.chunk0);
        x.hi = static_cast<int>(min(static_cast<long long>(x.cur), static_cast<long long>(p.C) - 1 - x.chunk0));
      }
    }
    tk[tid] = x;
  }
  __syncthreads();

  // Element offset of 16-byte chunk ch (D / 8 a row) of row `row` in a tile of `rows` rows: the portable
  // layout (rows of D, 128-byte swizzle) or the hopper panels ([D / 64][rows][64], 128-byte swizzle).
  auto at = [](int row, int ch, int rows) {
    if constexpr (HOP) return (ch / 8) * rows * 64 + row * 64 + ((ch % 8) ^ (row % 8)) * 8;
    else return tile_at<Cfg>(row, ch * 8);
  };
  const T* kb = static_cast<const T*>(p.k_cmp) + static_cast<long long>(r) * p.k_sh;
  const float scale = p.scale;
  const int k_row = lane % 8 + (lane / 16) * 8;
  const unsigned q_lane = lane_addr<Cfg>(sQ, warp * 16 + lane % 16, lane / 16);
  // The token this warp selects for (the first warp of each token's rows), or -1.
  const int sel_tok = warp % kWarpsPerTok == 0 ? warp / kWarpsPerTok : -1;
  float* my_slice = sImp + warp * CAP;
  int* my_hist = sHist + warp * 256;

  for (int j0 = 0; j0 < TOK; ++j0) {
    // A segment starts at the first token of each request among the CTA's tokens.
    bool lead = tk[j0].ok;
#pragma unroll
    for (int j = 0; j < TOK; ++j)
      if (j < j0 && tk[j].ok && tk[j].chunk0 == tk[j0].chunk0) lead = false;
    if (!lead) continue;
    const int chunk0 = tk[j0].chunk0;
    unsigned active = 0;
    int n_chunks = 0, n_complete = 0;
#pragma unroll
    for (int j = 0; j < TOK; ++j)
      if (j >= j0 && tk[j].ok && tk[j].chunk0 == chunk0) {
        active |= 1u << j;
        n_chunks = max(n_chunks, tk[j].hi + 1);
        n_complete = max(n_complete, min(tk[j].complete, tk[j].hi + 1));
      }
    const bool selecting = sel_tok >= 0 && ((active >> sel_tok) & 1u);

    // Empty running set (only the selecting warp reads or writes its token's).
    if (selecting)
      for (int u = lane; u < SMAX; u += 32) sRunKey[sel_tok * SMAX + u] = 0u, sRunId[sel_tok * SMAX + u] = -1;

    // Tile i of the chunks [c_begin, c_end) into ring buffer i % STAGES (rows past c_end, or without a
    // chunk row, zero-filled); commits a group, an empty one past the last tile. A stream of n tiles is
    // issue(0 .. STAGES - 2), then per tile i: wait until tile i landed, barrier (every warp also done with
    // tile i - 1), issue(i + STAGES - 1) into tile i - 1's buffer, compute; then wait and a barrier, so
    // that the ring is free again.
    auto issue = [&](int c_begin, int c_end, int i) {
      if (c_begin + i * BN < c_end) {
        T* dk = sK + (i % STAGES) * BN * D;
#pragma unroll
        for (int pass = 0; pass < BN / kRowsPerPass; ++pass) {
          const int row = tid / 8 + kRowsPerPass * pass;
          const int c = c_begin + i * BN + row;
          const long long crow = static_cast<long long>(chunk0) + c;
          const bool ok = c < c_end && crow >= 0 && crow < p.C;
          const T* src = kb + (ok ? crow : 0) * p.k_st;
#pragma unroll
          for (int c8 = 0; c8 < kCh / 8; ++c8) {
            const int ch = tid % 8 + 8 * c8;
            cp_async_16(dk + at(row, ch, BN), ok ? src + ch * 8 : nullptr, ok);
          }
        }
      }
      cp_async_commit();
    };
    auto stream_begin = [&](int c_begin, int c_end) {
#pragma unroll
      for (int i = 0; i < STAGES - 1; ++i) issue(c_begin, c_end, i);
    };
    // (hopper: wgmma reads shared memory through the async proxy, so this thread's cp.async and q stores
    // are fenced before the barrier that publishes them.)
    auto tile_ready = [&](int c_begin, int c_end, int i) {
      cp_async_wait<STAGES - 2>();
#if defined(ATTNJIT_NSA_TOPK_HOPPER)
      if constexpr (HOP) fence_proxy_async();
#endif
      __syncthreads();
      issue(c_begin, c_end, i + STAGES - 1);
    };
    auto stream_end = [&] {
      cp_async_wait<0>();
      __syncthreads();
    };

    // S = Q K^T for this warp's 16 rows and the tile in `stage` (hopper: the warpgroup's 64 rows at once;
    // every warp takes part).
    auto scores = [&](int stage, float (&s)[kNT][4]) {
#if defined(ATTNJIT_NSA_TOPK_HOPPER)
      if constexpr (HOP) {
        float acc[BN / 2];
        const unsigned qa = smem_addr(sQ), ka = smem_addr(sK + stage * BN * D);
        wgmma_fence();
#pragma unroll
        for (int ks = 0; ks < KS; ++ks) {
          const unsigned long long da = wgmma_desc_at(qa + (ks / 4) * (BM * 128) + (ks % 4) * 32, 16, 1024);
          const unsigned long long db = wgmma_desc_at(ka + (ks / 4) * (BN * 128) + (ks % 4) * 32, 16, 1024);
          Wgmma<T, BN>::template ss<0>(acc, da, db, ks > 0 ? 1 : 0);
        }
        wgmma_commit();
        wgmma_wait<0>();
        fence_regs(acc);
#pragma unroll
        for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
          for (int e = 0; e < 4; ++e) s[nt][e] = acc[nt * 4 + e];
        return;
      }
#endif
      const unsigned k_lane = lane_addr<Cfg>(sK + stage * BN * D, k_row, (lane / 8) % 2);
#pragma unroll
      for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) s[nt][e] = 0.f;
#pragma unroll
      for (int ks = 0; ks < KS; ++ks) {
        unsigned a[4];
        ldmatrix_x4_at(a, chunk_addr<Cfg>(q_lane, 2 * ks));
#pragma unroll
        for (int np = 0; np < kNT / 2; ++np) {
          unsigned bk[4];
          ldmatrix_x4_at(bk, chunk_addr<Cfg>(k_lane, 2 * ks) + np * kRows16);
          Mma::run(s[2 * np], a, bk[0], bk[1]);
          Mma::run(s[2 * np + 1], a, bk[2], bk[3]);
        }
      }
    };

    // Each row's lse in base 2 (lse * log2 e): the weights are exp2(s log2 e - lse2) on ex2.approx, whose
    // relative error (~2^-22) is far inside the importance tolerance.
    float lse2[2] = {0.f, 0.f};
    const int n_windows = (n_chunks + CAP - 1) / CAP;
    for (int w = 0; w < n_windows; ++w) {
      const int win0 = w * CAP, win_end = min(n_chunks, win0 + CAP), n_win = win_end - win0;
      // This warp's slice is read by its token's selecting warp (a barrier ago, or by itself).
      for (int i = lane; i < CAP; i += 32) my_slice[i] = 0.f;

      for (int mt = 0; mt < p.m_tiles; ++mt) {
        // This warp's rows: CTA row mt * 64 + 16 warp + i is head (row % g) of token row / g.
        const int wrow = mt * BM + warp * 16;
        const int wj = wrow / g;
        const bool wactive = wj < TOK && (TOK > 1 || wrow < g) && ((active >> wj) & 1u);
        const int wt = wj < TOK ? wj : 0;
        const int me_lo = tk[wt].lo, me_hi = tk[wt].hi, me_cur = tk[wt].cur, me_complete = tk[wt].complete;

        // q rows of this tile, scaled and rounded in the dtype (zeros for rows outside the segment).
        // The previous reader of sQ finished before the closing barrier of the last stream.
        for (int i = tid; i < BM * kCh; i += kThreads) {
          const int row = i / kCh, ch = i % kCh, crow = mt * BM + row, j = crow / g;
          bool ok = j < TOK && (TOK > 1 || crow < g) && ((active >> j) & 1u);
          uint4 v = make_uint4(0u, 0u, 0u, 0u);
          if (ok) {
            const T* src = static_cast<const T*>(p.q) + static_cast<long long>(t0 + j) * p.q_st +
                           static_cast<long long>(r * g + crow % g) * p.q_sh + ch * 8;
            const uint4 raw = *reinterpret_cast<const uint4*>(src);
            const T* in = reinterpret_cast<const T*>(&raw);
            T* outv = reinterpret_cast<T*>(&v);
#pragma unroll
            for (int e = 0; e < 8; ++e) outv[e] = from_float<T>(to_float(in[e]) * scale);
          }
          *reinterpret_cast<uint4*>(sQ + at(row, ch, BM)) = v;
        }
        // (the stream's first barrier orders these stores before the first ldmatrix.)

        // Pass 1: the rows' lse over the complete chunks (once when the rows stay in registers).
        if (w == 0 || p.m_tiles > 1) {
          float m_i[2] = {-kInf(), -kInf()}, l_i[2] = {0.f, 0.f};
          stream_begin(0, n_complete);
          for (int i = 0; i * BN < n_complete; ++i) {
            tile_ready(0, n_complete, i);
            if (!HOP && !wactive) continue;
            const int c0 = i * BN, stage = i % STAGES;
            float s[kNT][4];
            scores(stage, s);
            if (!wactive) continue;
            // Tiles wholly inside the row's complete chunks skip the per-element mask.
            const bool full = c0 >= me_lo && c0 + BN - 1 <= min(me_hi, me_complete - 1);
#pragma unroll
            for (int hf = 0; hf < 2; ++hf) {
              float mx = -kInf();
#pragma unroll
              for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
                for (int e = 0; e < 2; ++e) {
                  const int c = c0 + nt * 8 + 2 * (lane % 4) + e;
                  if (!full && !(c < me_complete && c >= me_lo && c <= me_hi)) s[nt][2 * hf + e] = -kInf();
                  mx = fmaxf(mx, s[nt][2 * hf + e]);
                }
              mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
              mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
              const float m_new = fmaxf(m_i[hf], mx);
              if (m_new == -kInf()) continue;
              const float mb = m_new * kLog2e;
              float sum = 0.f;
#pragma unroll
              for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
                for (int e = 0; e < 2; ++e) sum += fast_exp2(fmaf(s[nt][2 * hf + e], kLog2e, -mb));
              l_i[hf] = l_i[hf] * fast_exp2((m_i[hf] - m_new) * kLog2e) + sum;
              m_i[hf] = m_new;
            }
          }
          stream_end();
#pragma unroll
          for (int hf = 0; hf < 2; ++hf) {
            float l = l_i[hf];
            l += __shfl_xor_sync(0xffffffffu, l, 1);
            l += __shfl_xor_sync(0xffffffffu, l, 2);
            lse2[hf] = l > 0.f ? m_i[hf] * kLog2e + log2f(l) : 0.f;
          }
        }

        // Pass 2: the window's importances, this warp's 16 rows summed into its slice.
        stream_begin(win0, win_end);
        for (int i = 0; win0 + i * BN < win_end; ++i) {
          tile_ready(win0, win_end, i);
          if (!HOP && !wactive) continue;
          const int c0 = win0 + i * BN, stage = i % STAGES;
          float s[kNT][4];
          scores(stage, s);
          if (!wactive) continue;
          // Tiles wholly inside [lo, hi] with no forced chunk skip the per-element mask.
          const bool plain = c0 >= me_lo && c0 + BN - 1 <= me_hi && c0 > 0 && c0 + BN - 1 < me_cur - 1;
          float v[2 * kNT];  // column (nt, e) summed over this lane's two rows
#pragma unroll
          for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
            for (int e = 0; e < 2; ++e) {
              float a = 0.f;
              if (plain) {
#pragma unroll
                for (int hf = 0; hf < 2; ++hf) a += fast_exp2(fmaf(s[nt][2 * hf + e], kLog2e, -lse2[hf]));
              } else {
                const int c = c0 + nt * 8 + 2 * (lane % 4) + e;
                const bool in = c >= me_lo && c <= me_hi;
                const bool forced = c == 0 || c == me_cur - 1 || c == me_cur;
#pragma unroll
                for (int hf = 0; hf < 2; ++hf)
                  a += in ? (forced ? 1.f : fast_exp2(fmaf(s[nt][2 * hf + e], kLog2e, -lse2[hf]))) : 0.f;
              }
              v[2 * nt + e] = a;
            }
          // Sum over the warp's 16 rows (lanes with the same lane % 4), each lane keeping 2 kNT / 8 columns.
          nsa_topk_reduce_scatter(v, lane);
          constexpr int kKeep = 2 * kNT / 8;
          const int off = (lane & 4 ? kKeep : 0) + (lane & 8 ? 2 * kKeep : 0) + (lane & 16 ? 4 * kKeep : 0);
#pragma unroll
          for (int k = 0; k < kKeep; ++k) {
            const int i = off + k;  // = 2 nt + e
            my_slice[c0 - win0 + (i / 2) * 8 + 2 * (lane % 4) + i % 2] += v[k];
          }
        }
        stream_end();
      }

      // A token's other warps' slices into its first warp's, in warp order.
      if constexpr (kWarpsPerTok > 1) {
        for (int i = tid; i < TOK * CAP; i += kThreads) {
          const int j = i / CAP, c = i % CAP;
          float acc = sImp[(j * kWarpsPerTok) * CAP + c];
#pragma unroll
          for (int u = 1; u < kWarpsPerTok; ++u) acc += sImp[(j * kWarpsPerTok + u) * CAP + c];
          sImp[(j * kWarpsPerTok) * CAP + c] = acc;
        }
        __syncthreads();
      }

      if (!selecting) continue;
      // Window importances -> keys (bits + 1; 0: not a candidate of the token), in place.
      const NsaTopkToken me = tk[sel_tok];
      unsigned* wkey = reinterpret_cast<unsigned*>(my_slice);
      unsigned* rkey = sRunKey + sel_tok * SMAX;
      int* rid = sRunId + sel_tok * SMAX;
      int n_valid = 0;
      for (int i = lane; i < n_win; i += 32) {
        const int c = win0 + i;
        const bool cand = c >= me.lo && c <= me.hi;
        const unsigned key = cand ? __float_as_uint(fmaxf(my_slice[i], 0.f)) + 1u : 0u;
        wkey[i] = key;
        n_valid += key != 0u;
      }
      for (int u = lane; u < SMAX; u += 32) n_valid += rkey[u] != 0u;
      n_valid = __reduce_add_sync(0xffffffffu, n_valid);
      __syncwarp();
      const int n_el = SMAX + n_win;
      auto key_at = [&](int e) { return e < SMAX ? rkey[e] : wkey[e - SMAX]; };
      const int want = min(p.sel, n_valid);
      if (want == 0) continue;
      // thr 0 keeps every nonzero key; else the want-th largest key, with take_eq of its equals.
      int take_eq = 0;
      const unsigned thr = n_valid <= p.sel ? 0u : nsa_topk_radix_select(key_at, n_el, want, my_hist, lane, take_eq);
      const int n_gt = want - take_eq;
      int gt_pos = 0, eq_pos = 0;
      const unsigned lt_mask = (1u << lane) - 1u;
      unsigned* stk = sStKey + sel_tok * SMAX;
      int* sti = sStId + sel_tok * SMAX;
      for (int base = 0; base < n_el; base += 32) {
        const int e = base + lane;
        const unsigned key = e < n_el ? key_at(e) : 0u;
        const bool gt = key > thr, eq = thr != 0u && key == thr;
        const unsigned bg = __ballot_sync(0xffffffffu, gt), be = __ballot_sync(0xffffffffu, eq);
        int slot = -1;
        if (gt) slot = gt_pos + __popc(bg & lt_mask);
        if (eq) {
          const int q_eq = eq_pos + __popc(be & lt_mask);
          if (q_eq < take_eq) slot = n_gt + q_eq;
        }
        if (slot >= 0) {
          stk[slot] = key;
          sti[slot] = e < SMAX ? rid[e] : win0 + e - SMAX;
        }
        gt_pos += __popc(bg);
        eq_pos += __popc(be);
      }
      __syncwarp();
      for (int u = lane; u < SMAX; u += 32) {
        rkey[u] = u < want ? stk[u] : 0u;
        rid[u] = u < want ? sti[u] : -1;
      }
      __syncwarp();
    }

    // The segment's rows: the running set, then -1 (each by its selecting warp).
    if (selecting)
      for (int u = lane; u < p.sel; u += 32) {
        const int id = u < SMAX && sRunKey[sel_tok * SMAX + u] != 0u ? sRunId[sel_tok * SMAX + u] : -1;
        p.out[static_cast<long long>(t0 + sel_tok) * p.o_st + static_cast<long long>(r) * p.o_sh + u * p.o_su] = id;
      }
    __syncthreads();
  }

  // Tokens with no request write -1 rows.
#pragma unroll
  for (int j = 0; j < TOK; ++j) {
    const int t = t0 + j;
    if (t >= p.T || tk[j].ok) continue;
    for (int u = tid; u < p.sel; u += kThreads)
      p.out[static_cast<long long>(t) * p.o_st + static_cast<long long>(r) * p.o_sh + u * p.o_su] = -1;
  }
}

}  // namespace attnjit::kernels
