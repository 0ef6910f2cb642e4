// nsa_topk, portable backend: NSA block selection on warp-level mma.sync.
//
// A CTA takes TOK consecutive packed tokens and one KV head r; its 64 query rows are (token, head of r's
// group), so every k_cmp tile is loaded once for all of them (G > 64: one token, tiles of 64 heads in
// turn). Tokens of one request share their chunk rows; the CTA's tokens are served request by request
// (a "segment": the tokens with the same first chunk row), the others' rows masked.
//
// Per segment: q rounded as the reference does (rnd(fp32(q) * scale) in the dtype) into shared memory;
// pass 1 streams the complete chunks and keeps each row's online max and sum (lse, fp32, 0 without a
// complete chunk); pass 2 streams the candidates [0, cur] window by window, each row's weight
// exp(s - lse) (1 for the forced chunks 0, cur - 1, cur) summed over the token's heads in a fixed order
// (deterministic), into the window's importances. A window is merged into the token's running top-S
// set by an exact threshold select over (importance bits + 1), 0 meaning "no candidate": 31 rounds of a
// bitwise search find the S-th largest key, then the keys above it and enough keys equal to it are kept.
// The result is the set of min(S, candidates) chunks of highest importance, -1 after them.
#pragma once
#include "common/mma.cuh"
#include "common/numeric.cuh"
#include "common/tile_loader.cuh"
#include "nsa/nsa_topk_params.cuh"

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

// Minimum 1 block per SM in the launch bounds: without it ptxas (CUDA 13, sm_90a) held the D 64, TOK 1
// variant to 96 registers and spilled; with it every variant fits in at most 163 registers, no spills.
template <typename T, int D, int TOK>
__global__ void __launch_bounds__(kNsaTopkWarps * 32, 1) nsa_topk(const __grid_constant__ NsaTopkParams p) {
  static_assert(sizeof(T) == 2, "nsa_topk: 16-bit operands");
  static_assert(D == 64 || D == 128, "nsa_topk: D is 64 or 128");
  static_assert(TOK == 1 || TOK == 2 || TOK == 4, "nsa_topk: 1, 2 or 4 tokens a CTA");
  using Cfg = NsaTopkTileCfg<T, D>;
  using Mma = MmaOp<T>;
  constexpr int BM = kNsaTopkRows, BN = kNsaTopkBN, STAGES = kNsaTopkStages, kThreads = kNsaTopkWarps * 32;
  constexpr int SMAX = kNsaTopkMaxS, CAP = nsa_topk_window(TOK), REG = SMAX + CAP;
  constexpr int KS = D / 16, kNT = BN / 8, kCh = D / 8, kRowsPerPass = kThreads / 8;
  constexpr unsigned kRows16 = 16 * D * sizeof(T);
  static_assert(CAP % BN == 0, "nsa_topk: windows of whole tiles");
  static_assert(TOK * BN <= kThreads, "nsa_topk: one thread per (token, tile column) in the column sums");

  extern __shared__ __align__(128) unsigned char smem_raw[];
  T* sQ = reinterpret_cast<T*>(smem_raw);
  T* sK = sQ + BM * D;
  unsigned* sKey = reinterpret_cast<unsigned*>(sK + STAGES * BN * D);  // [TOK][REG]
  int* sId = reinterpret_cast<int*>(sKey + TOK * REG);                 // [TOK][SMAX]
  unsigned* sStKey = reinterpret_cast<unsigned*>(sId + TOK * SMAX);    // [TOK][SMAX]
  int* sStId = reinterpret_cast<int*>(sStKey + TOK * SMAX);            // [TOK][SMAX]
  float* sPart = reinterpret_cast<float*>(sStId + TOK * SMAX);         // [WARPS][BN]
  int* sCnt = reinterpret_cast<int*>(sPart + kNsaTopkWarps * BN);      // [3][TOK] + [TOK]
  NsaTopkToken* tk = reinterpret_cast<NsaTopkToken*>(sCnt + 16);       // [TOK]

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

  const T* kb = static_cast<const T*>(p.k_cmp) + static_cast<long long>(r) * p.k_sh;
  const float scale = p.scale;
  const int k_row = lane % 8 + (lane / 16) * 8;
  const unsigned q_lane = lane_addr<Cfg>(sQ, warp * 16 + lane % 16, lane / 16);

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

    // Empty running sets.
    for (int i = tid; i < TOK * SMAX; i += kThreads) sKey[(i / SMAX) * REG + i % SMAX] = 0u;

    // Tile i of the chunks [c_begin, c_end) into ring buffer i % STAGES (rows past c_end, or without a
    // chunk row, zero-filled); commits a group, an empty one past the last tile. A stream of tiles is
    // issue(0), then per tile: wait, barrier (tile i landed, every warp done with tile i - 1), issue(i + 1)
    // into tile i - 1's buffer, compute; then wait and a barrier, so that the ring is free again.
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
            cp_async_16(dk + tile_at<Cfg>(row, ch * 8), ok ? src + ch * 8 : nullptr, ok);
          }
        }
      }
      cp_async_commit();
    };

    // S = Q K^T for this warp's 16 rows and the tile in `stage`.
    auto scores = [&](int stage, float (&s)[kNT][4]) {
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

    float lse[2] = {0.f, 0.f};
    const int n_windows = (n_chunks + CAP - 1) / CAP;
    for (int w = 0; w < n_windows; ++w) {
      const int win0 = w * CAP, win_end = min(n_chunks, win0 + CAP);
      for (int i = tid; i < TOK * CAP; i += kThreads)
        reinterpret_cast<float*>(sKey)[(i / CAP) * REG + SMAX + i % CAP] = 0.f;

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
          *reinterpret_cast<uint4*>(sQ + tile_at<Cfg>(row, ch * 8)) = v;
        }
        // (the stream's first barrier orders these stores before the first ldmatrix.)

        // Pass 1: the rows' lse over the complete chunks (once when the rows stay in registers).
        if (w == 0 || p.m_tiles > 1) {
          float m_i[2] = {-kInf(), -kInf()}, l_i[2] = {0.f, 0.f};
          issue(0, n_complete, 0);
          for (int i = 0; i * BN < n_complete; ++i) {
            cp_async_wait<0>();
            __syncthreads();
            issue(0, n_complete, i + 1);
            const int c0 = i * BN, stage = i % STAGES;
            float s[kNT][4];
            scores(stage, s);
#pragma unroll
            for (int hf = 0; hf < 2; ++hf) {
              float mx = -kInf();
#pragma unroll
              for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
                for (int e = 0; e < 2; ++e) {
                  const int c = c0 + nt * 8 + 2 * (lane % 4) + e;
                  const bool in = wactive && c < me_complete && c >= me_lo && c <= me_hi;
                  if (!in) s[nt][2 * hf + e] = -kInf();
                  mx = fmaxf(mx, s[nt][2 * hf + e]);
                }
              mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
              mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
              const float m_new = fmaxf(m_i[hf], mx);
              if (m_new == -kInf()) continue;
              float sum = 0.f;
#pragma unroll
              for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
                for (int e = 0; e < 2; ++e) sum += expf(s[nt][2 * hf + e] - m_new);
              l_i[hf] = l_i[hf] * expf(m_i[hf] - m_new) + sum;
              m_i[hf] = m_new;
            }
          }
          cp_async_wait<0>();
          __syncthreads();
#pragma unroll
          for (int hf = 0; hf < 2; ++hf) {
            float l = l_i[hf];
            l += __shfl_xor_sync(0xffffffffu, l, 1);
            l += __shfl_xor_sync(0xffffffffu, l, 2);
            lse[hf] = l > 0.f ? m_i[hf] + logf(l) : 0.f;
          }
        }

        // Pass 2: the window's importances, summed over the token's heads.
        float* wimp = reinterpret_cast<float*>(sKey);
        issue(win0, win_end, 0);
        for (int i = 0; win0 + i * BN < win_end; ++i) {
          cp_async_wait<0>();
          __syncthreads();
          issue(win0, win_end, i + 1);
          const int c0 = win0 + i * BN, stage = i % STAGES;
          float s[kNT][4];
          scores(stage, s);
          float colsum[kNT][2];
#pragma unroll
          for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
            for (int e = 0; e < 2; ++e) {
              const int c = c0 + nt * 8 + 2 * (lane % 4) + e;
              const bool in = wactive && c >= me_lo && c <= me_hi;
              const bool forced = c == 0 || c == me_cur - 1 || c == me_cur;
              float v = 0.f;
#pragma unroll
              for (int hf = 0; hf < 2; ++hf) v += in ? (forced ? 1.f : expf(s[nt][2 * hf + e] - lse[hf])) : 0.f;
              v += __shfl_xor_sync(0xffffffffu, v, 4);
              v += __shfl_xor_sync(0xffffffffu, v, 8);
              v += __shfl_xor_sync(0xffffffffu, v, 16);
              colsum[nt][e] = v;
            }
          if (lane < 4)
#pragma unroll
            for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
              for (int e = 0; e < 2; ++e) sPart[warp * BN + nt * 8 + 2 * lane + e] = colsum[nt][e];
          __syncthreads();
          if (tid < TOK * BN) {
            const int j = tid / BN, col = tid % BN;
            float acc = 0.f;
#pragma unroll
            for (int wv = 0; wv < kNsaTopkWarps; ++wv) {
              const int vrow = mt * BM + wv * 16;
              if (vrow / g == j && (TOK > 1 || vrow < g)) acc += sPart[wv * BN + col];
            }
            const int idx = c0 + col - win0;
            if (idx < CAP) wimp[j * REG + SMAX + idx] += acc;
          }
        }
        cp_async_wait<0>();
        __syncthreads();
      }

      // Window importances -> keys (bits + 1; 0: not a candidate of the token).
      for (int i = tid; i < TOK * CAP; i += kThreads) {
        const int j = i / CAP, c = win0 + i % CAP;
        const float imp = __uint_as_float(sKey[j * REG + SMAX + i % CAP]);
        const bool cand = ((active >> j) & 1u) && c < win_end && c >= tk[j].lo && c <= tk[j].hi;
        const unsigned key = cand ? __float_as_uint(fmaxf(imp, 0.f)) + 1u : 0u;
        sKey[j * REG + SMAX + i % CAP] = key;
      }

      // Merge: the top min(S, keys > 0) keys of each token's running set and window.
      const int n_el = SMAX + (win_end - win0);
      // counts[j] of keys >= thr[j], over all the CTA's tokens at once; triple-buffered counters so
      // that one barrier a round suffices (buffer b is cleared two rounds after its last read).
      int round = 0;
      auto count_ge = [&](const unsigned (&thr)[TOK], int (&out)[TOK]) {
        int* cnt = sCnt + (round % 3) * TOK;
        int* next = sCnt + ((round + 1) % 3) * TOK;
        if (tid < TOK) next[tid] = 0;
        int mine[TOK];
#pragma unroll
        for (int j = 0; j < TOK; ++j) mine[j] = 0;
        for (int e = tid; e < n_el; e += kThreads)
#pragma unroll
          for (int j = 0; j < TOK; ++j) mine[j] += sKey[j * REG + e] >= thr[j] ? 1 : 0;
#pragma unroll
        for (int j = 0; j < TOK; ++j) {
          const int v = __reduce_add_sync(0xffffffffu, mine[j]);
          if (lane == 0 && v) atomicAdd(cnt + j, v);
        }
        __syncthreads();
#pragma unroll
        for (int j = 0; j < TOK; ++j) out[j] = cnt[j];
        ++round;
      };
      if (tid < 3 * TOK) sCnt[tid] = 0;
      __syncthreads();
      unsigned thr[TOK];
      int nvalid[TOK], want[TOK], cnt[TOK];
#pragma unroll
      for (int j = 0; j < TOK; ++j) thr[j] = 1u;
      count_ge(thr, nvalid);
      bool search = false;
#pragma unroll
      for (int j = 0; j < TOK; ++j) {
        want[j] = min(p.sel, nvalid[j]);
        search = search || nvalid[j] > p.sel;
        thr[j] = 0u;
      }
      // thr: the largest value with count(key >= thr) >= want, built bit by bit (the want-th largest key).
      int n_gt[TOK];
      if (search) {
        for (int b = 30; b >= 0; --b) {
          unsigned cand[TOK];
#pragma unroll
          for (int j = 0; j < TOK; ++j) cand[j] = thr[j] | (1u << b);
          count_ge(cand, cnt);
#pragma unroll
          for (int j = 0; j < TOK; ++j)
            if (nvalid[j] > p.sel && cnt[j] >= want[j]) thr[j] = cand[j];
        }
        unsigned above[TOK];
#pragma unroll
        for (int j = 0; j < TOK; ++j) above[j] = thr[j] + 1u;
        count_ge(above, n_gt);
      }
#pragma unroll
      for (int j = 0; j < TOK; ++j)
        if (nvalid[j] <= p.sel) thr[j] = 0u, n_gt[j] = nvalid[j];  // every candidate is kept
      // Collect into the staging set: keys > thr at positions [0, n_gt), keys == thr after them.
      int* pos_gt = sCnt + 3 * TOK;  // reuses the counters: both are cleared here
      int* pos_eq = sCnt + ((round + 1) % 3) * TOK;
      if (tid < TOK) pos_gt[tid] = 0, pos_eq[tid] = 0;
      __syncthreads();
      for (int e = tid; e < n_el; e += kThreads)
#pragma unroll
        for (int j = 0; j < TOK; ++j) {
          const unsigned key = sKey[j * REG + e];
          if (key == 0u || key < thr[j]) continue;
          int slot;
          if (key > thr[j]) {
            slot = atomicAdd(pos_gt + j, 1);
          } else {
            slot = n_gt[j] + atomicAdd(pos_eq + j, 1);
            if (slot >= want[j]) continue;
          }
          sStKey[j * SMAX + slot] = key;
          sStId[j * SMAX + slot] = e < SMAX ? sId[j * SMAX + e] : win0 + e - SMAX;
        }
      __syncthreads();
      for (int i = tid; i < TOK * SMAX; i += kThreads) {
        const int j = i / SMAX, u = i % SMAX;
        int wj = 0;
#pragma unroll
        for (int jj = 0; jj < TOK; ++jj)
          if (jj == j) wj = want[jj];
        sKey[j * REG + u] = u < wj ? sStKey[i] : 0u;
        sId[i] = u < wj ? sStId[i] : -1;
      }
      __syncthreads();
    }

    // The segment's rows: the running set, then -1.
    for (int i = tid; i < TOK * p.sel; i += kThreads) {
      const int j = i / p.sel, u = i % p.sel;
      if (!((active >> j) & 1u)) continue;
      const int id = u < SMAX && sKey[j * REG + u] != 0u ? sId[j * SMAX + u] : -1;
      p.out[static_cast<long long>(t0 + j) * p.o_st + static_cast<long long>(r) * p.o_sh + u * p.o_su] = id;
    }
    __syncthreads();
  }

  // Tokens with no request (or no candidate: n_chunks 0 makes no window) write -1 rows.
#pragma unroll
  for (int j = 0; j < TOK; ++j) {
    const int t = t0 + j;
    if (t >= p.T || tk[j].ok) continue;
    for (int u = tid; u < p.sel; u += kThreads)
      p.out[static_cast<long long>(t) * p.o_st + static_cast<long long>(r) * p.o_sh + u * p.o_su] = -1;
  }
}

}  // namespace attnjit::kernels
