// lightning_indexer, portable backend (SPEC.md §2.1): fused scores + top-k on warp-level mma.sync.
//
// One CTA owns R consecutive query tokens of one batch element: R * HP "columns" (token, head), HP = H
// padded to 8/16/32 or a multiple of 64 (padded heads have zero q and weight). It walks the candidate
// pool in tiles of BN keys (only the range the CTA's rows can see: causal prefixes, document spans), so
// each K tile is read once per token block and shared by all R * HP columns:
//   scores: S[cand, col] = K_tile Q^T on m16n8k16 MMAs (fp32 accumulation; the A operand is the K tile,
//           B the CTA's Q, both in shared memory with D zero-padded to 16), then per column
//           w[token, head] / sqrt(H * D) * relu(S) summed over the heads of a token in fp32, in a fixed
//           order (in-thread, quad shuffles, then across warps in shared memory): bitwise reproducible.
//   selection: per row a candidate buffer of CAP (key, index) entries in shared memory, key = the score's
//           fp32 bits mapped to an order-preserving uint32 (-0 is canonicalised to +0 first). The
//           row's warp appends the candidates of each tile whose key beats the row's threshold, in
//           index order (ballot prefix sums), so the buffer stays sorted by index. When it could
//           overflow, the warp compacts it to exactly topk entries by an exact radix select (four
//           8-bit passes over the keys, early exit) under (key desc, index asc), keeping order, and
//           the smallest kept key becomes the threshold (a later candidate with a key <= threshold
//           ranks below topk kept ones: it has a larger index). At the end a last compaction leaves
//           the first topk candidates under (score desc, index asc), already in ascending index order.
// The full [T, S] score matrix never exists: scores live in registers and a BN x R tile of shared
// memory. No global scratch. Rows with |C| <= topk are written directly (0..|C|-1, then -1) without
// scoring; a CTA whose rows all are so does no MMA at all.
// The output is therefore always the deterministic one of SPEC.md §2.1 step 4.
#pragma once
#include "common/mma.cuh"
#include "common/numeric.cuh"
#include "indexer/lightning_indexer_params.cuh"

namespace attnjit::kernels {

template <typename T_, int D_, int HP_, int TOPK_, bool CAUSAL_, bool PACKED_>
struct LightningIndexerConfig {
  using T = T_;
  static constexpr int D = D_, HP = HP_, TOPK = TOPK_;
  static constexpr bool kCausal = CAUSAL_, kPacked = PACKED_;
  static constexpr LightningIndexerGeometry G = lightning_indexer_geometry(D, HP, TOPK);
  static_assert(sizeof(T) == 2, "lightning_indexer: q, k and weights are 16-bit");
  static_assert(D % 8 == 0 && D >= 8 && D <= 256, "lightning_indexer: D must be a multiple of 8 in [8, 256]");
  static_assert(HP == 8 || HP == 16 || HP == 32 || (HP % 64 == 0 && HP <= 256), "lightning_indexer: bad head tile");
  static_assert(TOPK >= 1, "lightning_indexer: topk = 0 launches nothing");
  static_assert(G.R >= 1, "lightning_indexer: topk too large for the shared-memory candidate buffers");
  static constexpr int DP = G.DP, kPitch = G.pitch, R = G.R, COLS = G.COLS, WN = G.WN, WGN = G.WGN, WGM = G.WGM,
                       WM = G.WM, BN = G.BN, CAP = G.CAP;
  static_assert(WM % 16 == 0 && BN % 32 == 0 && WN % 8 == 0, "lightning_indexer: bad warp tile");
  static constexpr int kMmaWarps = WGM * WGN;  // <= 8 (HP = 192 leaves two warps without MMA work)
  static constexpr int kMT = WM / 16, kNT = WN / 8, kKS = DP / 16;
  static constexpr int kTPW = WN >= HP ? WN / HP : 1;  // tokens per warp column block
  static constexpr int kGroups = HP > WN ? HP / WN : 1;  // warp column blocks per token
  static constexpr int kNTT = kNT / kTPW;               // n8 tiles per token inside a warp
  static constexpr int kParts = WGN * kTPW;             // partial-score rows in shared memory
  static constexpr int kRowsPerWarp = (R + 7) / 8;
  static constexpr int kThreads = kLightningIndexerThreads;
  static_assert(kNT == 1 || kNT % 2 == 0, "lightning_indexer: n8 tiles per warp are 1 or even");
};

__device__ __forceinline__ void ldmatrix_x2(unsigned (&r)[2], const void* smem) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1])
               : "r"(smem_addr(smem)));
}

// fp32 -> uint32 with the same order (and -0 canonicalised to +0 by the caller).
__device__ __forceinline__ unsigned ordered_key(float s) {
  const unsigned u = __float_as_uint(s);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

// Compacts one row's buffer (keys/idx, `cnt` entries in ascending index order) to exactly `keep`
// entries: the first `keep` under (key desc, index asc), order kept. One warp; returns the smallest
// kept key. hist: 256 words of scratch.
__device__ __noinline__ unsigned li_compact_row(unsigned* key, int* idx, unsigned* hist, int cnt, int keep) {
  const unsigned lane = threadIdx.x & 31, lt = (1u << lane) - 1u;
  unsigned prefix = 0, mask = 0;
  int need = keep;
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (int i = lane; i < 256; i += 32) hist[i] = 0;
    __syncwarp();
    for (int base = 0; base < cnt; base += 32) {
      const int e = base + lane;
      unsigned digit = 256;
      if (e < cnt) {
        const unsigned k = key[e];
        if ((k & mask) == prefix) digit = (k >> shift) & 255u;
      }
      const unsigned peers = __match_any_sync(0xffffffffu, digit);
      if (digit < 256 && (__ffs(peers) - 1) == static_cast<int>(lane)) atomicAdd(&hist[digit], __popc(peers));
    }
    __syncwarp();
    // The digit d where the count from the top reaches `need`: lane l owns bins [8l, 8l + 8).
    unsigned h[8];
    unsigned tot = 0;
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      h[i] = hist[lane * 8 + i];
      tot += h[i];
    }
    unsigned sfx = tot;  // sum over lanes >= lane
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const unsigned v = __shfl_down_sync(0xffffffffu, sfx, o);
      if (lane + o < 32) sfx += v;
    }
    const unsigned above_lane = sfx - tot;
    const bool mine = above_lane < static_cast<unsigned>(need) && sfx >= static_cast<unsigned>(need);
    int d = 0;
    unsigned above = 0, count = 0;
    if (mine) {
      unsigned acc = above_lane;
#pragma unroll
      for (int i = 7; i >= 0; --i) {
        if (acc + h[i] >= static_cast<unsigned>(need)) {
          d = lane * 8 + i;
          above = acc;
          count = h[i];
          break;
        }
        acc += h[i];
      }
    }
    const int src = __ffs(__ballot_sync(0xffffffffu, mine)) - 1;
    d = __shfl_sync(0xffffffffu, d, src);
    above = __shfl_sync(0xffffffffu, above, src);
    count = __shfl_sync(0xffffffffu, count, src);
    need -= static_cast<int>(above);
    prefix |= static_cast<unsigned>(d) << shift;
    mask |= 255u << shift;
    __syncwarp();
    if (count == static_cast<unsigned>(need)) break;  // every entry with this prefix is kept
  }
  // Stable in-place compaction: entries above the prefix, then the first `need` equal to it.
  int out = 0, eq_seen = 0;
  unsigned mn = 0xffffffffu;
  for (int base = 0; base < cnt; base += 32) {
    const int e = base + lane;
    const bool in = e < cnt;
    const unsigned k = in ? key[e] : 0u;
    const int ix = in ? idx[e] : 0;
    const unsigned mk = k & mask;
    const bool gt = in && mk > prefix, eq = in && mk == prefix;
    const unsigned eqm = __ballot_sync(0xffffffffu, eq);
    const bool keepit = gt || (eq && eq_seen + __popc(eqm & lt) < need);
    const unsigned km = __ballot_sync(0xffffffffu, keepit);
    const int pos = out + __popc(km & lt);
    __syncwarp();
    if (keepit) {
      key[pos] = k;
      idx[pos] = ix;
      mn = min(mn, k);
    }
    out += __popc(km);
    eq_seen += __popc(eqm);
    __syncwarp();
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) mn = min(mn, __shfl_xor_sync(0xffffffffu, mn, o));
  return mn;
}

template <typename T, int D, int HP, int TOPK, bool CAUSAL, bool PACKED>
__global__ void __launch_bounds__(kLightningIndexerThreads, 1) lightning_indexer(const __grid_constant__ LightningIndexerParams p) {
  using Cfg = LightningIndexerConfig<T, D, HP, TOPK, CAUSAL, PACKED>;
  using Mma = MmaOp<T>;
  constexpr int R = Cfg::R, BN = Cfg::BN, CAP = Cfg::CAP, kPitch = Cfg::kPitch, COLS = Cfg::COLS;
  constexpr int kMT = Cfg::kMT, kNT = Cfg::kNT, kKS = Cfg::kKS, kThreads = Cfg::kThreads;
  constexpr int kChunks = D / 8, kPadChunks = (Cfg::DP - D) / 8;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  T* sQ = reinterpret_cast<T*>(smem_raw);                              // [COLS][kPitch]
  T* sK = sQ + COLS * kPitch;                                          // [2][BN][kPitch]
  float* sPart = reinterpret_cast<float*>(sK + 2 * BN * kPitch);       // [kParts][BN]
  unsigned* sHist = reinterpret_cast<unsigned*>(sPart + Cfg::kParts * BN);  // [R][256]
  int* sRow = reinterpret_cast<int*>(sHist + R * 256);                 // [R][4]: base, n
  unsigned* sKey = reinterpret_cast<unsigned*>(sRow + R * kLightningIndexerRowInfo + R * 4);  // [R][CAP]
  int* sIdx = reinterpret_cast<int*>(sKey + R * CAP);                  // [R][CAP]

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int b = blockIdx.y;
  // NOTE: causal rows grow with t: the longest token blocks are scheduled first (smaller tail).
  const int t0 = (CAUSAL ? static_cast<int>(gridDim.x - 1 - blockIdx.x) : static_cast<int>(blockIdx.x)) * R;
  int* out = p.indices + (static_cast<long long>(b) * p.T + t0) * TOPK;

  // 1. Each row's candidates: pool rows [base, base + n), local indices 0..n-1.
  if (tid < R) {
    const int t = t0 + tid;
    int base = 0, n = 0;
    if (t < p.T) {
      if constexpr (PACKED) {
        const int* cu = p.cu_seqlens;
        if (t < cu[p.N]) {
          int lo = 0, hi = p.N - 1;  // the last document d with cu[d] <= t
          while (lo < hi) {
            const int mid = (lo + hi + 1) >> 1;
            if (cu[mid] <= t) lo = mid;
            else hi = mid - 1;
          }
          base = p.cu_seqlens_k[lo];
          n = CAUSAL ? (t - cu[lo] + 1) / p.compress_ratio : p.cu_seqlens_k[lo + 1] - base;
        }
      } else {
        n = CAUSAL ? (t + 1) / p.compress_ratio : p.S;
      }
    }
    sRow[tid * kLightningIndexerRowInfo + 0] = base;
    sRow[tid * kLightningIndexerRowInfo + 1] = n;
  }
  __syncthreads();

  // 2. Rows that need no selection (|C| <= topk) are written now; the others bound the key range.
  int lo = 0x7fffffff, hi = 0;
  for (int r = 0; r < R; ++r) {
    const int base = sRow[r * kLightningIndexerRowInfo], n = sRow[r * kLightningIndexerRowInfo + 1];
    if (n > TOPK) {
      lo = min(lo, base);
      hi = max(hi, base + n);
    } else if (r % 8 == warp && t0 + r < p.T) {
      for (int j = lane; j < TOPK; j += 32) out[static_cast<long long>(r) * TOPK + j] = j < n ? j : -1;
    }
  }
  if (hi == 0) return;
  const int num_tiles = (hi - lo + BN - 1) / BN;

  // 3. Q (columns = (token, head)), zero pads, and this thread's weights.
  const T* qb = static_cast<const T*>(p.q) + static_cast<long long>(b) * p.q_sb;
  for (int i = tid; i < COLS * kChunks; i += kThreads) {
    const int col = i / kChunks, ch = i % kChunks;
    const int tok = col / HP, h = col % HP;
    const bool valid = h < p.H && t0 + tok < p.T;
    const T* src = valid ? qb + static_cast<long long>(t0 + tok) * p.q_st + static_cast<long long>(h) * p.q_sh + ch * 8 : qb;
    cp_async_16(sQ + col * kPitch + ch * 8, src, valid);
  }
  if constexpr (kPadChunks > 0) {
    for (int i = tid; i < COLS * kPadChunks; i += kThreads)
      *reinterpret_cast<uint4*>(sQ + (i / kPadChunks) * kPitch + D + (i % kPadChunks) * 8) = make_uint4(0, 0, 0, 0);
    for (int i = tid; i < 2 * BN * kPadChunks; i += kThreads)
      *reinterpret_cast<uint4*>(sK + (i / kPadChunks) * kPitch + D + (i % kPadChunks) * 8) = make_uint4(0, 0, 0, 0);
  }
  const int wm = warp % Cfg::WGM, wn = warp / Cfg::WGM;
  const bool mma_warp = warp < Cfg::kMmaWarps;
  float wreg[kNT][2];
  {
    const T* wb = static_cast<const T*>(p.weights) + static_cast<long long>(b) * p.w_sb;
#pragma unroll
    for (int j = 0; j < kNT; ++j)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int col = wn * Cfg::WN + j * 8 + 2 * (lane & 3) + e;
        const int tok = col / HP, h = col % HP;
        float w = 0.f;
        if (mma_warp && h < p.H && t0 + tok < p.T)
          w = to_float(wb[static_cast<long long>(t0 + tok) * p.w_st + static_cast<long long>(h) * p.w_sh]) * p.inv_scale;
        wreg[j][e] = w;
      }
  }

  // K tile t -> stage t % 2 (an empty group past the end keeps group numbering = tile numbering).
  const T* kb = static_cast<const T*>(p.k) + static_cast<long long>(b) * p.k_sb;
  auto issue_k = [&](int t) {
    if (t < num_tiles) {
      const int n0 = lo + t * BN;
      T* dst = sK + (t & 1) * BN * kPitch;
      for (int i = tid; i < BN * kChunks; i += kThreads) {
        const int row = i / kChunks, ch = i % kChunks;
        const bool valid = n0 + row < hi;
        const T* src = valid ? kb + static_cast<long long>(n0 + row) * p.k_ss + ch * 8 : kb;
        cp_async_16(dst + row * kPitch + ch * 8, src, valid);
      }
    }
    cp_async_commit();
  };
  issue_k(0);  // with Q
  issue_k(1);

  // Selection state of this warp's rows (r = warp + 8 i), in registers.
  int cnt[Cfg::kRowsPerWarp];
  unsigned thr[Cfg::kRowsPerWarp];
  bool have_thr[Cfg::kRowsPerWarp];
#pragma unroll
  for (int i = 0; i < Cfg::kRowsPerWarp; ++i) {
    cnt[i] = 0;
    thr[i] = 0;
    have_thr[i] = false;
  }
  const unsigned lt = (1u << lane) - 1u;

  for (int it = 0; it < num_tiles; ++it) {
    cp_async_wait<1>();
    __syncthreads();  // tile `it` landed; the previous tile's partial scores were consumed
    if (mma_warp) {
      const T* sKt = sK + (it & 1) * BN * kPitch;
      float acc[kMT][kNT][4];
#pragma unroll
      for (int i = 0; i < kMT; ++i)
#pragma unroll
        for (int j = 0; j < kNT; ++j)
#pragma unroll
          for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.f;
#pragma unroll
      for (int ks = 0; ks < kKS; ++ks) {
        unsigned a[kMT][4];
#pragma unroll
        for (int i = 0; i < kMT; ++i)
          ldmatrix_x4(a[i], sKt + (wm * Cfg::WM + i * 16 + (lane & 15)) * kPitch + ks * 16 + (lane >> 4) * 8);
        unsigned bq[kNT][2];
        if constexpr (kNT == 1) {
          ldmatrix_x2(bq[0], sQ + (wn * Cfg::WN + (lane & 7)) * kPitch + ks * 16 + ((lane >> 3) & 1) * 8);
        } else {
#pragma unroll
          for (int jj = 0; jj < kNT / 2; ++jj) {
            unsigned r4[4];
            const int mi = lane >> 3;
            ldmatrix_x4(r4, sQ + (wn * Cfg::WN + jj * 16 + (mi >> 1) * 8 + (lane & 7)) * kPitch + ks * 16 + (mi & 1) * 8);
            bq[2 * jj][0] = r4[0];
            bq[2 * jj][1] = r4[1];
            bq[2 * jj + 1][0] = r4[2];
            bq[2 * jj + 1][1] = r4[3];
          }
        }
#pragma unroll
        for (int i = 0; i < kMT; ++i)
#pragma unroll
          for (int j = 0; j < kNT; ++j) Mma::run(acc[i][j], a[i], bq[j][0], bq[j][1]);
      }
      // Weighted relu, summed over the heads of each token: in-thread, then over the quad.
#pragma unroll
      for (int i = 0; i < kMT; ++i) {
#pragma unroll
        for (int tt = 0; tt < Cfg::kTPW; ++tt) {
          float s0 = 0.f, s1 = 0.f;
#pragma unroll
          for (int jj = 0; jj < Cfg::kNTT; ++jj) {
            const int j = tt * Cfg::kNTT + jj;
            s0 += wreg[j][0] * fmaxf(acc[i][j][0], 0.f) + wreg[j][1] * fmaxf(acc[i][j][1], 0.f);
            s1 += wreg[j][0] * fmaxf(acc[i][j][2], 0.f) + wreg[j][1] * fmaxf(acc[i][j][3], 0.f);
          }
          s0 += __shfl_xor_sync(0xffffffffu, s0, 1);
          s1 += __shfl_xor_sync(0xffffffffu, s1, 1);
          s0 += __shfl_xor_sync(0xffffffffu, s0, 2);
          s1 += __shfl_xor_sync(0xffffffffu, s1, 2);
          if ((lane & 3) == 0) {
            float* dst = sPart + (wn * Cfg::kTPW + tt) * BN + wm * Cfg::WM + i * 16 + (lane >> 2);
            dst[0] = s0;
            dst[8] = s1;
          }
        }
      }
    }
    __syncthreads();  // partial scores ready; every warp is done with K stage it % 2
    issue_k(it + 2);

    // Selection: the warp of row r appends the tile's candidates that beat the row's threshold.
#pragma unroll
    for (int ri = 0; ri < Cfg::kRowsPerWarp; ++ri) {
      const int r = warp + 8 * ri;
      if (r >= R) break;
      const int base = sRow[r * kLightningIndexerRowInfo], n = sRow[r * kLightningIndexerRowInfo + 1];
      if (n <= TOPK) continue;
      unsigned* key = sKey + r * CAP;
      int* idx = sIdx + r * CAP;
      const int n0 = lo + it * BN;
#pragma unroll
      for (int c0 = 0; c0 < BN; c0 += 32) {
        const int c = c0 + lane;
        const int local = n0 + c - base;
        float s;
        if constexpr (Cfg::kGroups == 1) {
          s = sPart[r * BN + c];
        } else {
          s = sPart[(r * Cfg::kGroups) * BN + c];
#pragma unroll
          for (int g = 1; g < Cfg::kGroups; ++g) s += sPart[(r * Cfg::kGroups + g) * BN + c];
        }
        const unsigned k = ordered_key(__fadd_rn(s, 0.f));  // -0 -> +0
        const bool take = local >= 0 && local < n && (!have_thr[ri] || k > thr[ri]);
        const unsigned m = __ballot_sync(0xffffffffu, take);
        if (take) {
          const int pos = cnt[ri] + __popc(m & lt);
          key[pos] = k;
          idx[pos] = local;
        }
        cnt[ri] += __popc(m);
      }
      if (cnt[ri] > CAP - BN) {
        __syncwarp();
        thr[ri] = li_compact_row(key, idx, sHist + r * 256, cnt[ri], TOPK);
        have_thr[ri] = true;
        cnt[ri] = TOPK;
      }
    }
  }
  cp_async_wait<0>();

  // 4. The first topk under (score desc, index asc), in ascending index order.
#pragma unroll
  for (int ri = 0; ri < Cfg::kRowsPerWarp; ++ri) {
    const int r = warp + 8 * ri;
    if (r >= R) break;
    if (sRow[r * kLightningIndexerRowInfo + 1] <= TOPK) continue;
    unsigned* key = sKey + r * CAP;
    int* idx = sIdx + r * CAP;
    __syncwarp();
    if (cnt[ri] > TOPK) li_compact_row(key, idx, sHist + r * 256, cnt[ri], TOPK);
    __syncwarp();
    for (int j = lane; j < TOPK; j += 32) out[static_cast<long long>(r) * TOPK + j] = idx[j];
  }
}

}  // namespace attnjit::kernels
