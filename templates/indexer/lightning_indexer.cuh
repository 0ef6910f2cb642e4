// lightning_indexer, portable backend (SPEC.md §2.1): fused scores + top-k on warp-level mma.sync.
//
// One CTA owns R consecutive query tokens of one batch element: R * HP "columns" (token, head), HP = H
// padded to 8/16/32 or a multiple of 64 (padded heads have zero q and weight). It walks the candidate
// pool in tiles of BN keys (only the range the CTA's rows can see: causal prefixes, document spans), so
// each K tile is read once per token block and shared by all R * HP columns:
//   scores: S[cand, col] = K_tile Q^T on m16n8k16 MMAs (fp32 accumulation; the A operand is the K tile
//           from shared memory, B the CTA's Q, held in registers for the whole walk when its fragments
//           fit (D <= 128), else re-read from shared memory; D zero-padded to 16), then per column
//           w[token, head] / sqrt(H * D) * relu(S) summed over the heads of a token in fp32, in a fixed
//           order (in-thread, quad shuffles, then across warps in shared memory): bitwise reproducible.
//           One barrier per tile: the selection of tile i - 1 runs next to the MMAs of tile i (the
//           partial scores are double-buffered), and K is prefetched one tile ahead.
//   selection: per row a candidate buffer of CAP (key, index) entries in shared memory, key = the score's
//           fp32 bits mapped to an order-preserving uint32 (-0 is canonicalised to +0 first). The
//           row's warp appends the candidates of each tile whose key beats the row's threshold, in
//           index order (ballot prefix sums), so the buffer stays sorted by index. When it could
//           overflow, the warp trims it: 256 linear bins over the buffer's key range, keeping every
//           bin down to the one where the count reaches topk (>= topk entries, all above every dropped
//           key; the bin's lower edge - 1 becomes the threshold); under heavy ties, when a trim would
//           free too little, an exact select to topk entries instead. At the end an exact select
//           (the same bins, narrowed 8 bits per round, ties at width 1 broken by index) leaves the
//           first topk candidates under (score desc, index asc), already in ascending index order.
//           A dropped candidate always has >= topk kept ones ranked above it, so thresholds and trims
//           never change the selected set.
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
  // Q's MMA fragments stay in registers for the whole key walk when they fit (<= 128 per thread); the
  // warp then runs its WM keys in two passes of kMTS m16 tiles (half the accumulators). Otherwise Q is
  // re-read from shared memory per tile and the warp does all kMT m tiles in one pass.
  static constexpr bool kQReg = kKS * kNT * 2 <= 128 && kNT % 2 == 0 && kMT % 2 == 0;
  static constexpr int kMTS = kQReg ? kMT / 2 : kMT;
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

// Row selection helpers. A row's buffer holds `cnt` (key, index) entries in ascending index order; keys
// are ordered fp32 bits. Both helpers bin the keys linearly (256 bins of width 2^shift above a base),
// with plain shared-memory atomics, so a pass costs a load and an atomic per entry.

// Min and max key of the buffer (all lanes get both).
__device__ __forceinline__ void li_key_range(const unsigned* key, int cnt, unsigned& mn, unsigned& mx) {
  const unsigned lane = threadIdx.x & 31;
  mn = 0xffffffffu;
  mx = 0u;
  for (int e = lane; e < cnt; e += 32) {
    const unsigned k = key[e];
    mn = min(mn, k);
    mx = max(mx, k);
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    mn = min(mn, __shfl_xor_sync(0xffffffffu, mn, o));
    mx = max(mx, __shfl_xor_sync(0xffffffffu, mx, o));
  }
}

// The shift that puts [mn, mx] into 256 bins: (mx - mn) >> shift <= 255.
__device__ __forceinline__ int li_bin_shift(unsigned mn, unsigned mx) {
  const unsigned span = mx - mn;
  return span < 256u ? 0 : 24 - __clz(span);
}

// The bin d of a filled 256-bin histogram where the count from the top first reaches `need` (1 <= need <=
// entries): d, `above` (entries in bins > d) and `count` (entries in bin d), the same in all lanes; every
// lane has read hist on exit.
__device__ __forceinline__ void li_hist_pick(unsigned* hist, int need, int& d, unsigned& above, unsigned& count) {
  const unsigned lane = threadIdx.x & 31;
  // lane l owns bins [8l, 8l + 8)
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
  int dd = 0;
  unsigned ab = 0, ct = 0;
  if (mine) {
    unsigned acc = above_lane;
#pragma unroll
    for (int i = 7; i >= 0; --i) {
      if (acc + h[i] >= static_cast<unsigned>(need)) {
        dd = lane * 8 + i;
        ab = acc;
        ct = h[i];
        break;
      }
      acc += h[i];
    }
  }
  const int src = __ffs(__ballot_sync(0xffffffffu, mine)) - 1;  // exactly one lane
  d = __shfl_sync(0xffffffffu, dd, src);
  above = __shfl_sync(0xffffffffu, ab, src);
  count = __shfl_sync(0xffffffffu, ct, src);
  __syncwarp();
}

// Histogram of the keys in [base, base + (nbins << shift)) (nbins <= 256) into hist[(key - base) >> shift],
// then li_hist_pick. hist: 256 words, free on entry and on exit.
__device__ __forceinline__ void li_hist_find(const unsigned* key, int cnt, unsigned* hist, unsigned base, int shift,
                                             unsigned nbins, int need, int& d, unsigned& above, unsigned& count) {
  const unsigned lane = threadIdx.x & 31;
  for (int i = lane; i < 256; i += 32) hist[i] = 0;
  __syncwarp();
  for (int e = lane; e < cnt; e += 32) {
    const unsigned k = key[e];
    const unsigned bin = (k - base) >> shift;
    if (k >= base && bin < nbins) atomicAdd(&hist[bin], 1u);
  }
  __syncwarp();
  li_hist_pick(hist, need, d, above, count);
}

// Compacts the buffer to exactly `keep` entries (keep < cnt): the first `keep` under (key desc, index
// asc), order kept. Narrows the boundary bin by 8 bits per round (at most four rounds, usually two: it
// stops once the boundary bin is kept whole), then keeps every entry above the bin and the first `need`
// of the bin in index order (all of the bin, or, at width 1, ties broken by index). One warp; returns
// the smallest kept key. hist: 256 words of scratch.
__device__ __noinline__ unsigned li_compact_row(unsigned* key, int* idx, unsigned* hist, int cnt, int keep) {
  const unsigned lane = threadIdx.x & 31, lt = (1u << lane) - 1u;
  unsigned mn, mx;
  li_key_range(key, cnt, mn, mx);
  unsigned base = mn;
  int shift = li_bin_shift(mn, mx);
  unsigned nbins = 256;  // round 1: [mn, mx] lies in 256 bins of 2^shift
  int need = keep;
  for (;;) {
    int d;
    unsigned above, count;
    li_hist_find(key, cnt, hist, base, shift, nbins, need, d, above, count);
    need -= static_cast<int>(above);  // 1 <= need <= count
    base += static_cast<unsigned>(d) << shift;  // the boundary bin [base, base + 2^shift), inside [mn, mx]
    if (count == static_cast<unsigned>(need) || shift == 0) break;
    // Next round: exactly the boundary bin, in bins of 2^(shift - 8) (width 1 and 2^shift bins when shift < 8).
    nbins = shift >= 8 ? 256u : (1u << shift);
    shift = shift >= 8 ? shift - 8 : 0;
  }
  const unsigned long long hi_edge = static_cast<unsigned long long>(base) + (1ull << shift);  // exclusive
  int out = 0, eq_seen = 0;
  unsigned kmin = 0xffffffffu;
  for (int b0 = 0; b0 < cnt; b0 += 32) {
    const int e = b0 + lane;
    const bool in = e < cnt;
    const unsigned k = in ? key[e] : 0u;
    const int ix = in ? idx[e] : 0;
    const bool gt = in && k >= hi_edge, eq = in && k >= base && k < hi_edge;
    const unsigned eqm = __ballot_sync(0xffffffffu, eq);
    const bool keepit = gt || (eq && eq_seen + __popc(eqm & lt) < need);
    const unsigned km = __ballot_sync(0xffffffffu, keepit);
    const int pos = out + __popc(km & lt);
    __syncwarp();  // all reads of this chunk precede its writes (pos <= e)
    if (keepit) {
      key[pos] = k;
      idx[pos] = ix;
      kmin = min(kmin, k);
    }
    out += __popc(km);
    eq_seen += __popc(eqm);
    __syncwarp();
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) kmin = min(kmin, __shfl_xor_sync(0xffffffffu, kmin, o));
  return kmin;
}

// Cheap trim while scanning (keep < cnt): one round of li_compact_row's binning over [min, max]; keeps
// every entry of the bins from the top down to the boundary bin d, i.e. every entry with key >= lb =
// min + (d << shift): at least `keep` entries, each with a key above every dropped one, order kept. A
// dropped entry therefore has at least `keep` kept ones ranked above it, and so does any later candidate
// (larger index) with key < lb. Returns the kept count and lb, or kept = -1 with nothing changed when
// more than `limit` entries would stay (heavy ties: the caller then runs the exact compaction). One warp;
// hist: 256 words of scratch.
struct LiTrim {
  int kept;
  unsigned lb;
};
__device__ __noinline__ LiTrim li_trim_row(unsigned* key, int* idx, unsigned* hist, int cnt, int keep, int limit) {
  const unsigned lane = threadIdx.x & 31, lt = (1u << lane) - 1u;
  unsigned mn, mx;
  li_key_range(key, cnt, mn, mx);
  const int shift = li_bin_shift(mn, mx);
  int d;
  unsigned above, count;
  li_hist_find(key, cnt, hist, mn, shift, 256u, keep, d, above, count);
  const unsigned kept = above + count;
  if (d == 0 || kept > static_cast<unsigned>(limit)) return {-1, 0u};
  const unsigned lb = mn + (static_cast<unsigned>(d) << shift);  // in (mn, mx]: lb >= 1
  int out = 0;
  for (int b0 = 0; b0 < cnt; b0 += 32) {
    const int e = b0 + lane;
    const bool in = e < cnt;
    const unsigned k = in ? key[e] : 0u;
    const int ix = in ? idx[e] : 0;
    const bool keepit = in && k >= lb;
    const unsigned km = __ballot_sync(0xffffffffu, keepit);
    const int pos = out + __popc(km & lt);
    __syncwarp();  // all reads of this chunk precede its writes (pos <= e)
    if (keepit) {
      key[pos] = k;
      idx[pos] = ix;
    }
    out += __popc(km);
    __syncwarp();
  }
  return {out, lb};
}

// Four-entries-per-lane forms (16-byte loads, a quarter of the loop trips) of the range, the histogram,
// li_trim_row and li_compact_row, with the same results. key and idx must be 16-byte aligned with room
// for cnt rounded up to 4 (the hopper kernel's buffers: CAP % 32 == 0).
__device__ __forceinline__ void li_key_range_v4(const unsigned* key, int cnt, unsigned& mn, unsigned& mx) {
  const unsigned lane = threadIdx.x & 31;
  mn = 0xffffffffu;
  mx = 0u;
  for (int e = 4 * lane; e < cnt; e += 128) {
    const uint4 v = *reinterpret_cast<const uint4*>(key + e);
    const unsigned k[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int j = 0; j < 4; ++j)
      if (e + j < cnt) {
        mn = min(mn, k[j]);
        mx = max(mx, k[j]);
      }
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    mn = min(mn, __shfl_xor_sync(0xffffffffu, mn, o));
    mx = max(mx, __shfl_xor_sync(0xffffffffu, mx, o));
  }
}
__device__ __forceinline__ void li_hist_find_v4(const unsigned* key, int cnt, unsigned* hist, unsigned base, int shift,
                                                unsigned nbins, int need, int& d, unsigned& above, unsigned& count) {
  const unsigned lane = threadIdx.x & 31;
  for (int i = lane; i < 256; i += 32) hist[i] = 0;
  __syncwarp();
  for (int e = 4 * lane; e < cnt; e += 128) {
    const uint4 v = *reinterpret_cast<const uint4*>(key + e);
    const unsigned k[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const unsigned bin = (k[j] - base) >> shift;
      if (e + j < cnt && k[j] >= base && bin < nbins) atomicAdd(&hist[bin], 1u);
    }
  }
  __syncwarp();
  li_hist_pick(hist, need, d, above, count);
}
// One in-place compaction step over 128 entries: lane l holds entries b0 + 4l .. + 3; keep(j, k) says
// whether to keep entry j (0..3) with key k; `eq(j, k)` marks ties that are kept only while fewer than
// `need` ties were kept before them in index order (pass need < 0 for no tie rule). Returns the kept keys'
// minimum of this lane.
template <typename Keep, typename Eq>
__device__ __forceinline__ unsigned li_compact_step_v4(unsigned* key, int* idx, int cnt, int b0, int& out, int& eq_seen,
                                                       int need, Keep keep, Eq eq) {
  const unsigned lane = threadIdx.x & 31, lt = (1u << lane) - 1u;
  const int e = b0 + 4 * static_cast<int>(lane);
  uint4 kv = make_uint4(0u, 0u, 0u, 0u);
  int4 iv = make_int4(0, 0, 0, 0);
  if (e < cnt) {
    kv = *reinterpret_cast<const uint4*>(key + e);
    iv = *reinterpret_cast<const int4*>(idx + e);
  }
  const unsigned k[4] = {kv.x, kv.y, kv.z, kv.w};
  const int ix[4] = {iv.x, iv.y, iv.z, iv.w};
  bool is_eq[4], keepit[4];
  int eq_before = eq_seen;  // ties before this lane's first entry, in index order
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    is_eq[j] = need >= 0 && e + j < cnt && eq(k[j]);
    const unsigned m = __ballot_sync(0xffffffffu, is_eq[j]);
    eq_before += __popc(m & lt);
    eq_seen += __popc(m);
  }
  int pos = out;
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    keepit[j] = e + j < cnt && (keep(k[j]) || (is_eq[j] && eq_before < need));
    eq_before += is_eq[j] ? 1 : 0;
    const unsigned m = __ballot_sync(0xffffffffu, keepit[j]);
    pos += __popc(m & lt);
    out += __popc(m);
  }
  __syncwarp();  // all reads of this chunk precede its writes (a write lands at or before its entry)
  unsigned kmin = 0xffffffffu;
#pragma unroll
  for (int j = 0; j < 4; ++j)
    if (keepit[j]) {
      key[pos] = k[j];
      idx[pos] = ix[j];
      kmin = min(kmin, k[j]);
      ++pos;
    }
  __syncwarp();
  return kmin;
}
__device__ __forceinline__ LiTrim li_trim_row_v4(unsigned* key, int* idx, unsigned* hist, int cnt, int keep, int limit) {
  unsigned mn, mx;
  li_key_range_v4(key, cnt, mn, mx);
  const int shift = li_bin_shift(mn, mx);
  int d;
  unsigned above, count;
  li_hist_find_v4(key, cnt, hist, mn, shift, 256u, keep, d, above, count);
  const unsigned kept = above + count;
  if (d == 0 || kept > static_cast<unsigned>(limit)) return {-1, 0u};
  const unsigned lb = mn + (static_cast<unsigned>(d) << shift);  // in (mn, mx]: lb >= 1
  int out = 0, eq_seen = 0;
  for (int b0 = 0; b0 < cnt; b0 += 128)
    li_compact_step_v4(key, idx, cnt, b0, out, eq_seen, -1, [&](unsigned k) { return k >= lb; },
                       [](unsigned) { return false; });
  return {out, lb};
}
__device__ __forceinline__ unsigned li_compact_row_v4(unsigned* key, int* idx, unsigned* hist, int cnt, int keep) {
  unsigned mn, mx;
  li_key_range_v4(key, cnt, mn, mx);
  unsigned base = mn;
  int shift = li_bin_shift(mn, mx);
  unsigned nbins = 256;
  int need = keep;
  for (;;) {  // as li_compact_row
    int d;
    unsigned above, count;
    li_hist_find_v4(key, cnt, hist, base, shift, nbins, need, d, above, count);
    need -= static_cast<int>(above);
    base += static_cast<unsigned>(d) << shift;
    if (count == static_cast<unsigned>(need) || shift == 0) break;
    nbins = shift >= 8 ? 256u : (1u << shift);
    shift = shift >= 8 ? shift - 8 : 0;
  }
  const unsigned long long hi_edge = static_cast<unsigned long long>(base) + (1ull << shift);  // exclusive
  int out = 0, eq_seen = 0;
  unsigned kmin = 0xffffffffu;
  for (int b0 = 0; b0 < cnt; b0 += 128)
    kmin = min(kmin, li_compact_step_v4(key, idx, cnt, b0, out, eq_seen, need, [&](unsigned k) { return k >= hi_edge; },
                                        [&](unsigned k) { return k >= base && k < hi_edge; }));
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) kmin = min(kmin, __shfl_xor_sync(0xffffffffu, kmin, o));
  return kmin;
}

// A row's buffer that has room for less than one more tile of candidates: li_trim_row (cheap, keeps
// between keep and limit entries), or, when ties defeat the bins, li_compact_row's exact select down to
// keep. Updates the row's count and threshold (later candidates are taken when key > thr). V4: the
// four-entries-per-lane forms (16-byte aligned buffers).
template <bool V4>
__device__ __forceinline__ void li_shrink_row(unsigned* key, int* idx, unsigned* hist, int& cnt, unsigned& thr, int keep,
                                              int limit) {
  LiTrim tr;
  if constexpr (V4) tr = li_trim_row_v4(key, idx, hist, cnt, keep, limit);
  else tr = li_trim_row(key, idx, hist, cnt, keep, limit);
  if (tr.kept >= 0) {
    thr = tr.lb - 1u;  // lb >= 1; later candidates are taken when key >= lb
    cnt = tr.kept;
  } else {
    if constexpr (V4) thr = li_compact_row_v4(key, idx, hist, cnt, keep);
    else thr = li_compact_row(key, idx, hist, cnt, keep);
    cnt = keep;
  }
}

template <typename T, int D, int HP, int TOPK, bool CAUSAL, bool PACKED>
__global__ void __launch_bounds__(kLightningIndexerThreads, 1) lightning_indexer(const __grid_constant__ LightningIndexerParams p) {
  using Cfg = LightningIndexerConfig<T, D, HP, TOPK, CAUSAL, PACKED>;
  using Mma = MmaOp<T>;
  constexpr int R = Cfg::R, BN = Cfg::BN, CAP = Cfg::CAP, kPitch = Cfg::kPitch, COLS = Cfg::COLS;
  constexpr int kMT = Cfg::kMT, kNT = Cfg::kNT, kKS = Cfg::kKS, kThreads = Cfg::kThreads, kMTS = Cfg::kMTS;
  constexpr int kChunks = D / 8, kPadChunks = (Cfg::DP - D) / 8;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  T* sQ = reinterpret_cast<T*>(smem_raw);                              // [COLS][kPitch]
  T* sK = sQ + COLS * kPitch;                                          // [2][BN][kPitch]
  float* sPart = reinterpret_cast<float*>(sK + 2 * BN * kPitch);       // [2][kParts][BN]
  unsigned* sHist = reinterpret_cast<unsigned*>(sPart + 2 * Cfg::kParts * BN);  // [R][256]
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
    if (t < p.T) li_row_candidates<CAUSAL, PACKED>(p, t, base, n);
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

  // Q's B fragments in registers (kQReg): Q landed with tile 0's group.
  unsigned qf[Cfg::kQReg ? kKS : 1][Cfg::kQReg ? kNT : 1][2];
  if constexpr (Cfg::kQReg) {
    cp_async_wait<0>();
    __syncthreads();
    const int mi = lane >> 3;
#pragma unroll
    for (int ks = 0; ks < kKS; ++ks)
#pragma unroll
      for (int jj = 0; jj < kNT / 2; ++jj) {
        unsigned r4[4] = {0u, 0u, 0u, 0u};
        if (mma_warp)  // (warps without MMA work, HP = 192, would read past Q)
          ldmatrix_x4(r4, sQ + (wn * Cfg::WN + jj * 16 + (mi >> 1) * 8 + (lane & 7)) * kPitch + ks * 16 + (mi & 1) * 8);
        qf[ks][2 * jj][0] = r4[0];
        qf[ks][2 * jj][1] = r4[1];
        qf[ks][2 * jj + 1][0] = r4[2];
        qf[ks][2 * jj + 1][1] = r4[3];
      }
  }

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

  // Software pipeline, one barrier per tile: iteration `it` runs the selection of tile it - 1 (partial
  // buffer (it - 1) % 2) and then the MMAs of tile `it` (partial scores into buffer it % 2), so a warp's
  // selection overlaps the MMAs of the warp sharing its SM sub-partition (warp w + 4). The barrier at
  // the top of iteration `it` orders: tile `it` landed (each thread waited for its own copies) and is
  // visible; every warp finished the MMAs of tile it - 1, so K stage (it + 1) % 2 may be refilled and
  // partial buffer (it - 1) % 2 is complete; every warp finished the selection of tile it - 2, so
  // partial buffer it % 2 may be overwritten. Selection state stays per warp (rows r = warp + 8 i).
  for (int it = 0; it <= num_tiles; ++it) {
    cp_async_wait<0>();
    __syncthreads();
    issue_k(it + 1);
    if (it > 0) {
      // Selection of tile it - 1: the warp of row r appends its candidates that beat the row's threshold.
      const float* sPartR = sPart + ((it - 1) & 1) * Cfg::kParts * BN;
#pragma unroll
      for (int ri = 0; ri < Cfg::kRowsPerWarp; ++ri) {
        const int r = warp + 8 * ri;
        if (r >= R) break;
        const int base = sRow[r * kLightningIndexerRowInfo], n = sRow[r * kLightningIndexerRowInfo + 1];
        if (n <= TOPK) continue;
        unsigned* key = sKey + r * CAP;
        int* idx = sIdx + r * CAP;
        const int n0 = lo + (it - 1) * BN;
#pragma unroll
        for (int c0 = 0; c0 < BN; c0 += 32) {
          const int c = c0 + lane;
          const int local = n0 + c - base;
          float s;
          if constexpr (Cfg::kGroups == 1) {
            s = sPartR[r * BN + c];
          } else {
            s = sPartR[(r * Cfg::kGroups) * BN + c];
#pragma unroll
            for (int g = 1; g < Cfg::kGroups; ++g) s += sPartR[(r * Cfg::kGroups + g) * BN + c];
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
          // Room for less than one more tile: trim (cheap, keeps >= topk entries and frees at least half
          // the slack), or, when ties defeat the bins, the exact select down to topk entries.
          __syncwarp();
          li_shrink_row<false>(key, idx, sHist + r * 256, cnt[ri], thr[ri], TOPK, TOPK + (CAP - BN - TOPK) / 2);
          have_thr[ri] = true;
          __syncwarp();
        }
      }
    }
    if (mma_warp && it < num_tiles) {
      const T* sKt = sK + (it & 1) * BN * kPitch;
      float* sPartW = sPart + (it & 1) * Cfg::kParts * BN;
#pragma unroll
      for (int mp = 0; mp < kMT / kMTS; ++mp) {  // m-tile passes (two with Q in registers, else one)
      float acc[kMTS][kNT][4];
#pragma unroll
      for (int i = 0; i < kMTS; ++i)
#pragma unroll
        for (int j = 0; j < kNT; ++j)
#pragma unroll
          for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.f;
#pragma unroll
      for (int ks = 0; ks < kKS; ++ks) {
        unsigned a[kMTS][4];
#pragma unroll
        for (int i = 0; i < kMTS; ++i)
          ldmatrix_x4(a[i], sKt + (wm * Cfg::WM + (mp * kMTS + i) * 16 + (lane & 15)) * kPitch + ks * 16 + (lane >> 4) * 8);
        unsigned bq[kNT][2];
        if constexpr (Cfg::kQReg) {
#pragma unroll
          for (int j = 0; j < kNT; ++j) {
            bq[j][0] = qf[ks][j][0];
            bq[j][1] = qf[ks][j][1];
          }
        } else if constexpr (kNT == 1) {
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
        for (int i = 0; i < kMTS; ++i)
#pragma unroll
          for (int j = 0; j < kNT; ++j) Mma::run(acc[i][j], a[i], bq[j][0], bq[j][1]);
      }
      // Weighted relu, summed over the heads of each token: in-thread, then over the quad.
#pragma unroll
      for (int i = 0; i < kMTS; ++i) {
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
            float* dst = sPartW + (wn * Cfg::kTPW + tt) * BN + wm * Cfg::WM + (mp * kMTS + i) * 16 + (lane >> 2);
            dst[0] = s0;
            dst[8] = s1;
          }
        }
      }
      }  // m-tile passes
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
