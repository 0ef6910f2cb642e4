// lightning_indexer, portable backend, the two-kernel ("slab") path for any topk (SPEC.md §2.1). The host
// planner takes it only when the fused kernel's shared-memory candidate buffers cannot hold topk
// (lightning_indexer_geometry(D, HP, topk).R == 0), or when the test-only ATTNJIT_LI_FORCE_SLAB is set.
//
// The host walks the B * T query rows (flattened b * T + t) in chunks whose scores fit the workspace slab
// (kLiBigSlabBytes) and launches, per chunk:
//   lightning_indexer_big_scores: grid (token groups, candidate tiles, batches of the chunk), 128 threads.
//     A CTA owns `tokens` consecutive query tokens of one batch element and walks, in tiles of 128 pool
//     rows, the union of the pool ranges of those of its rows that need a selection (|C| > topk; causal
//     prefixes, document spans), the tiles strided over gridDim.y. Each K tile is staged in shared memory
//     and multiplied against every (token, head) of the CTA with m16n8k16 mma.sync (fp32 accumulation; D
//     zero-padded to 16, H to 8); each warp owns 32 candidates of the tile (for D <= 128 its K fragments
//     stay in registers for the whole tile). Per token: relu, times weight * 1/sqrt(H * D), summed over
//     the heads in a fixed order (in-thread over 8-head chunks, then the quad), so the scores are bitwise
//     reproducible. Row r's score of local candidate s goes to slab[r][s] (-0 canonicalised to +0); only
//     [0, |C|) of a row is written, and the selection reads nothing else.
//   lightning_indexer_big_select: one CTA of 512 threads per row of the chunk. Rows with |C| <= topk are
//     written as 0..|C|-1, then -1, without reading the slab (rows past cu_seqlens[N] have |C| = 0). Other
//     rows: a radix select over the fp32 scores mapped to order-preserving uint32 keys (topk_select.cuh's
//     helpers: 11 + 11 + 10 bit digits, three histogram passes over the slab row) finds the k-th largest
//     key K and how many keys equal to K are taken (krem); a last pass walks the row in index order with
//     block-wide prefix sums and writes every index whose key is > K and the first krem whose key is == K.
//     That is exactly the first topk candidates under (score desc, index asc), written in ascending index
//     order: the deterministic output of SPEC.md §2.1 step 4, whatever the `deterministic` flag.
#pragma once
#include "common/mma.cuh"
#include "common/numeric.cuh"
#include "indexer/lightning_indexer_big_params.cuh"
#include "indexer/lightning_indexer_params.cuh"
#include "indexer/topk_select.cuh"

namespace attnjit::kernels {

static_assert(kLiBigSelectThreads == kTopkSelectThreads, "lightning_indexer_big: topk_find_bin assumes 512 threads");
static_assert(kLiBigScoreThreads == 32 * (kLiBigScoreTileN / 32), "lightning_indexer_big: one warp per 32 candidates");

// Query row t's candidates (SPEC.md §2.1 step 1): pool rows [base, base + n) of its batch element (packed:
// of the one pool), local indices 0..n-1. n is clamped to [0, max_cand] (a no-op under the caller contract;
// it keeps slab writes in bounds when packed offsets break it).
template <bool CAUSAL, bool PACKED>
__device__ __forceinline__ void li_big_row(const LightningIndexerBigParams& p, int t, int& base, int& n) {
  li_row_candidates<CAUSAL, PACKED>(p, t, base, n);
  n = max(0, min(n, p.max_cand));
}

template <typename T, int D, bool CAUSAL, bool PACKED>
struct LiBigScoreConfig {
  static_assert(sizeof(T) == 2, "lightning_indexer_big: q, k and weights are 16-bit");
  static_assert(D % 8 == 0 && D >= 8 && D <= 256, "lightning_indexer_big: D must be a multiple of 8 in [8, 256]");
  static constexpr int DP = (D + 15) / 16 * 16;  // zero-padded k16 steps
  static constexpr int kPitch = DP + 8;          // shared-memory row pitch (elements) of Q and K
  static constexpr int kKS = DP / 16;            // k16 steps
  static constexpr int kChunks = DP / 8;         // 16-byte chunks per padded row
  static constexpr int kDataChunks = D / 8;      // ... of which hold data (the rest are zeros)
  static constexpr int BN = kLiBigScoreTileN;
  static constexpr int kThreads = kLiBigScoreThreads;
  static constexpr int kMT = 2;                  // m16 tiles per warp (32 candidates)
  // The warp's K fragments stay in registers for the whole tile when they fit (D <= 128: 64 registers);
  // otherwise they are re-read from shared memory for every (token, head chunk).
  static constexpr bool kAReg = kKS <= 8;
};

template <typename T, int D, bool CAUSAL, bool PACKED>
__global__ void __launch_bounds__(kLiBigScoreThreads) lightning_indexer_big_scores(const __grid_constant__ LightningIndexerBigParams p) {
  using Cfg = LiBigScoreConfig<T, D, CAUSAL, PACKED>;
  using Mma = MmaOp<T>;
  constexpr int kPitch = Cfg::kPitch, kKS = Cfg::kKS, kChunks = Cfg::kChunks, BN = Cfg::BN, kMT = Cfg::kMT;
  constexpr int kThreads = Cfg::kThreads;
  const int H8 = (p.H + 7) / 8 * 8, TB = p.tokens;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  T* sK = reinterpret_cast<T*>(smem_raw);                              // [BN][kPitch]
  T* sQ = sK + BN * kPitch;                                            // [TB * H8][kPitch]
  float* sW = reinterpret_cast<float*>(sQ + TB * H8 * kPitch);          // [TB][H8], weight / sqrt(H * D)
  int* sRow = reinterpret_cast<int*>(sW + TB * H8);                    // [TB][2]: base, n (0: not scored)

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  // This CTA's tokens: batch b, t in [t0, t1), a part of the chunk's rows [row_begin, row_end).
  const int b = static_cast<int>(p.row_begin / p.T) + static_cast<int>(blockIdx.z);
  const long long brow = static_cast<long long>(b) * p.T;
  const long long first = p.row_begin > brow ? p.row_begin : brow;
  const long long last = p.row_end < brow + p.T ? p.row_end : brow + p.T;
  const int t0 = static_cast<int>(first - brow) + static_cast<int>(blockIdx.x) * TB;
  if (first >= last || t0 >= static_cast<int>(last - brow)) return;
  const int t1 = min(t0 + TB, static_cast<int>(last - brow));

  // 1. Row info: rows with |C| > topk are scored; the union [lo, hi) of their pool ranges.
  if (tid < TB) {
    int base = 0, n = 0;
    if (t0 + tid < t1) li_big_row<CAUSAL, PACKED>(p, t0 + tid, base, n);
    sRow[2 * tid] = base;
    sRow[2 * tid + 1] = n > p.topk ? n : 0;
  }
  __syncthreads();
  int lo = 0x7fffffff, hi = 0;
  for (int j = 0; j < TB; ++j) {
    const int base = sRow[2 * j], n = sRow[2 * j + 1];
    if (n > 0) {
      lo = min(lo, base);
      hi = max(hi, base + n);
    }
  }
  if (hi == 0) return;  // no row of this CTA needs scores
  const int num_tiles = (hi - lo + BN - 1) / BN;
  if (static_cast<int>(blockIdx.y) >= num_tiles) return;

  // 2. Q of the scored tokens (zero for padded heads, unscored tokens and the D padding), and the weights
  //    with 1 / sqrt(H * D) folded in (zero likewise).
  const T* qb = static_cast<const T*>(p.q) + static_cast<long long>(b) * p.q_sb;
  for (int i = tid; i < TB * H8 * kChunks; i += kThreads) {
    const int col = i / kChunks, ch = i % kChunks;
    const int j = col / H8, h = col % H8;
    uint4 v = make_uint4(0u, 0u, 0u, 0u);
    if (ch < Cfg::kDataChunks && h < p.H && sRow[2 * j + 1] > 0)
      v = *reinterpret_cast<const uint4*>(qb + static_cast<long long>(t0 + j) * p.q_st + static_cast<long long>(h) * p.q_sh + ch * 8);
    *reinterpret_cast<uint4*>(sQ + col * kPitch + ch * 8) = v;
  }
  const T* wb = static_cast<const T*>(p.weights) + static_cast<long long>(b) * p.w_sb;
  for (int i = tid; i < TB * H8; i += kThreads) {
    const int j = i / H8, h = i % H8;
    float w = 0.f;
    if (h < p.H && sRow[2 * j + 1] > 0)
      w = to_float(wb[static_cast<long long>(t0 + j) * p.w_st + static_cast<long long>(h) * p.w_sh]) * p.inv_scale;
    sW[i] = w;
  }

  // 3. The tiles of [lo, hi), strided over gridDim.y.
  const T* kb = static_cast<const T*>(p.k) + static_cast<long long>(b) * p.k_sb;
  for (int tile = blockIdx.y; tile < num_tiles; tile += gridDim.y) {
    const int n0 = lo + tile * BN;
    __syncthreads();  // Q and weights visible; every warp is done with the previous tile
    for (int i = tid; i < BN * kChunks; i += kThreads) {
      const int r = i / kChunks, ch = i % kChunks;
      uint4 v = make_uint4(0u, 0u, 0u, 0u);
      if (ch < Cfg::kDataChunks && n0 + r < hi)
        v = *reinterpret_cast<const uint4*>(kb + static_cast<long long>(n0 + r) * p.k_ss + ch * 8);
      *reinterpret_cast<uint4*>(sK + r * kPitch + ch * 8) = v;
    }
    __syncthreads();

    const int m0 = n0 + warp * 32;  // this warp's pool rows [m0, m0 + 32)
    const T* sKw = sK + (warp * 32) * kPitch;
    unsigned af[Cfg::kAReg ? kKS : 1][kMT][4];
    if constexpr (Cfg::kAReg) {
#pragma unroll
      for (int ks = 0; ks < kKS; ++ks)
#pragma unroll
        for (int mt = 0; mt < kMT; ++mt)
          ldmatrix_x4(af[ks][mt], sKw + (mt * 16 + (lane & 15)) * kPitch + ks * 16 + (lane >> 4) * 8);
    }
    for (int j = 0; j < TB; ++j) {
      const int base = sRow[2 * j], n = sRow[2 * j + 1];
      if (n == 0 || m0 >= base + n || m0 + 32 <= base) continue;  // warp-uniform
      float s[kMT][2];  // [m tile][rows g, g + 8]: this thread's partial scores
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt) s[mt][0] = s[mt][1] = 0.f;
      const T* sQj = sQ + (j * H8) * kPitch;
      const float* sWj = sW + j * H8;
      for (int h0 = 0; h0 < H8; h0 += 8) {
        float acc[kMT][4];
#pragma unroll
        for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
          for (int e = 0; e < 4; ++e) acc[mt][e] = 0.f;
#pragma unroll
        for (int ks = 0; ks < kKS; ks += 2) {
          // B fragments of the 8 heads for k16 steps ks and ks + 1 in one ldmatrix.x4 (matrices: step ks's
          // two 8-column halves, then step ks + 1's; an odd last step loads its own halves twice).
          unsigned bq[4];
          const int kcol = ks * 16 + ((lane >> 3) & 1) * 8 + (ks + 1 < kKS ? (lane >> 4) * 16 : 0);
          ldmatrix_x4(bq, sQj + (h0 + (lane & 7)) * kPitch + kcol);
#pragma unroll
          for (int kk = 0; kk < 2; ++kk) {
            if (ks + kk >= kKS) break;
#pragma unroll
            for (int mt = 0; mt < kMT; ++mt) {
              if constexpr (Cfg::kAReg) {
                Mma::run(acc[mt], af[ks + kk][mt], bq[2 * kk], bq[2 * kk + 1]);
              } else {
                unsigned a[4];
                ldmatrix_x4(a, sKw + (mt * 16 + (lane & 15)) * kPitch + (ks + kk) * 16 + (lane >> 4) * 8);
                Mma::run(acc[mt], a, bq[2 * kk], bq[2 * kk + 1]);
              }
            }
          }
        }
        // acc[mt]: {0, 1} = candidate g, heads h0 + 2q, + 1; {2, 3} = candidate g + 8, same heads.
        const float w0 = sWj[h0 + 2 * (lane & 3)], w1 = sWj[h0 + 2 * (lane & 3) + 1];
#pragma unroll
        for (int mt = 0; mt < kMT; ++mt) {
          s[mt][0] += w0 * fmaxf(acc[mt][0], 0.f) + w1 * fmaxf(acc[mt][1], 0.f);
          s[mt][1] += w0 * fmaxf(acc[mt][2], 0.f) + w1 * fmaxf(acc[mt][3], 0.f);
        }
      }
      // Sum over the quad (the head pairs), then lane 4g writes candidates g and g + 8 of each m tile.
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          s[mt][e] += __shfl_xor_sync(0xffffffffu, s[mt][e], 1);
          s[mt][e] += __shfl_xor_sync(0xffffffffu, s[mt][e], 2);
        }
      if ((lane & 3) == 0) {
        float* dst = p.slab + (brow + t0 + j - p.row_begin) * p.slab_pitch;
#pragma unroll
        for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const int local = m0 + mt * 16 + e * 8 + (lane >> 2) - base;
            if (local >= 0 && local < n) dst[local] = __fadd_rn(s[mt][e], 0.f);  // -0 -> +0
          }
      }
    }
  }
}

// Exclusive prefix sum of v over the block (512 threads, in thread order) and the block total. warp_tot:
// 16 ints of shared memory, free on entry and on exit.
__device__ __forceinline__ void li_big_block_scan(int v, int& excl, int& total, int* warp_tot) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  int incl = v;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const int y = __shfl_up_sync(0xffffffffu, incl, o);
    if (lane >= o) incl += y;
  }
  if (lane == 31) warp_tot[warp] = incl;
  __syncthreads();
  int before = 0, all = 0;
#pragma unroll
  for (int w = 0; w < kLiBigSelectThreads / 32; ++w) {
    const int x = warp_tot[w];
    before += w < warp ? x : 0;
    all += x;
  }
  excl = before + incl - v;
  total = all;
  __syncthreads();
}

template <bool CAUSAL, bool PACKED>
__global__ void __launch_bounds__(kLiBigSelectThreads) lightning_indexer_big_select(const __grid_constant__ LightningIndexerBigParams p) {
  constexpr int kT = kLiBigSelectThreads;
  __shared__ unsigned hist[kTopkSelectBins];
  __shared__ unsigned warp_sums[kT / 32];
  __shared__ int scan_tot[kT / 32];
  __shared__ int vars[2];  // bin, remaining count (topk_find_bin's outputs)
  const int tid = threadIdx.x;
  const long long row = p.row_begin + blockIdx.x;  // b * T + t
  const int t = static_cast<int>(row % p.T);
  int base, n;
  li_big_row<CAUSAL, PACKED>(p, t, base, n);
  const int k = p.topk;
  int* out = p.indices + row * k;
  if (n <= k) {
    for (long long i = tid; i < k; i += kT) out[i] = i < n ? static_cast<int>(i) : -1;
    return;
  }
  const float* sc = p.slab + static_cast<long long>(blockIdx.x) * p.slab_pitch;  // 16-byte aligned

  // 1. Top 11 bits: the bin b1 holding the k-th largest key, krem1 = how many to take from it.
  for (int i = tid; i < kTopkSelectBins; i += kT) hist[i] = 0;
  __syncthreads();
  topk_visit_row(sc, 1, n, nullptr, [&](int, unsigned key, bool v) {
    if (v) atomicAdd(hist + (key >> 21), 1u);
  });
  __syncthreads();
  topk_find_bin(hist, 2048, k, vars + 0, vars + 1, warp_sums);
  const unsigned b1 = static_cast<unsigned>(vars[0]);
  const int krem1 = vars[1];
  // 2. The next 11 bits inside b1.
  for (int i = tid; i < kTopkSelectBins; i += kT) hist[i] = 0;
  __syncthreads();
  topk_visit_row(sc, 1, n, nullptr, [&](int, unsigned key, bool v) {
    if (v && (key >> 21) == b1) atomicAdd(hist + ((key >> 10) & 0x7FFu), 1u);
  });
  __syncthreads();
  topk_find_bin(hist, 2048, krem1, vars + 0, vars + 1, warp_sums);
  const unsigned hi21 = (b1 << 11) | static_cast<unsigned>(vars[0]);
  const int krem2 = vars[1];
  // 3. The last 10 bits: the k-th largest key K, and krem = how many keys equal to K are taken.
  for (int i = tid; i < 1024; i += kT) hist[i] = 0;
  __syncthreads();
  topk_visit_row(sc, 1, n, nullptr, [&](int, unsigned key, bool v) {
    if (v && (key >> 10) == hi21) atomicAdd(hist + (key & 0x3FFu), 1u);
  });
  __syncthreads();
  topk_find_bin(hist, 1024, krem2, vars + 0, vars + 1, warp_sums);
  const unsigned K = (hi21 << 10) | static_cast<unsigned>(vars[0]);
  const int krem = vars[1];

  // 4. In index order (4 consecutive entries per thread, threads in order): every key > K, and the first
  //    krem keys == K (ties toward the lower index). Exactly k entries, ascending.
  int written = 0, eq_seen = 0;  // block-uniform
  for (int c0 = 0; c0 < n; c0 += 4 * kT) {
    const int i0 = c0 + 4 * tid;
    unsigned key[4];
    bool valid[4];
    if (i0 + 3 < n) {
      const float4 x = __ldg(reinterpret_cast<const float4*>(sc + i0));
      key[0] = topk_ordered_key(x.x);
      key[1] = topk_ordered_key(x.y);
      key[2] = topk_ordered_key(x.z);
      key[3] = topk_ordered_key(x.w);
#pragma unroll
      for (int u = 0; u < 4; ++u) valid[u] = true;
    } else {
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        valid[u] = i0 + u < n;
        key[u] = valid[u] ? topk_ordered_key(sc[i0 + u]) : 0u;
      }
    }
    int neq = 0;
#pragma unroll
    for (int u = 0; u < 4; ++u) neq += (valid[u] && key[u] == K) ? 1 : 0;
    int eq_before, eq_total;
    li_big_block_scan(neq, eq_before, eq_total, scan_tot);
    int rank = eq_seen + eq_before;  // keys == K before this thread's first entry, in index order
    bool take[4];
    int ntake = 0;
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      const bool eq = valid[u] && key[u] == K;
      take[u] = (valid[u] && key[u] > K) || (eq && rank < krem);
      rank += eq ? 1 : 0;
      ntake += take[u] ? 1 : 0;
    }
    int pos, take_total;
    li_big_block_scan(ntake, pos, take_total, scan_tot);
    pos += written;
#pragma unroll
    for (int u = 0; u < 4; ++u)
      if (take[u]) out[pos++] = i0 + u;
    written += take_total;
    eq_seen += eq_total;
    if (written >= k) break;  // the rest of the row holds nothing more to take
  }
}

}  // namespace attnjit::kernels
