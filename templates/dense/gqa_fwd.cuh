// gqa_fwd / gqa_varlen_fwd, portable backend: a FlashAttention-2-style forward on warp-level mma.sync.
//
// One CTA computes one tile of BM packed query rows of one KV head: packed row m is (query position
// i = m / g, head-in-group m % g), so the g query heads of a GQA group share every K/V tile the CTA
// loads. Q, K and V tiles live in shared memory (tile_at: XOR-swizzled rows of D elements when D is a
// multiple of 128, else rows padded to D + 8); S = Q K^T and O += P V run on m16n8k16 MMAs with fp32
// accumulation; the softmax is online in registers (log2 domain). Tiles wholly outside the causal/window band are
// skipped; only tiles crossing a boundary are masked. e4m3 inputs are dequantised (and RoPE applied) on
// the way into shared memory, in the compute dtype.
//
// Pipeline: K and V tiles are double-buffered; the loads of tile t + 2 are issued as soon as every warp
// is done with tile t, so each load has a whole tile of compute to land.
#pragma once
#include "common/mma.cuh"
#include "common/numeric.cuh"
#include "dense/gqa_fwd_params.cuh"
#include "dense/varlen_tile.cuh"

namespace attnjit::kernels {

// Where the keys of request b live (KV_MODE): dense [B, S_kv, H_kv, D]; packed [T_kv, H_kv, D] with
// cu_kv offsets; or paged: key j is pool row (page_table[b, j / page_size], j % page_size) and kv_len
// comes from kv_lens[b].
// Paged-append (3): keys below kv_lens[b] are paged pool rows, the rest this call's new rows
// (gqa_prefill_paged_append).
enum KvMode { kKvDense = 0, kKvPacked = 1, kKvPaged = 2, kKvPagedAppend = 3 };

template <typename T_, typename TQ_, typename TKV_, int D_, int BM_, int BN_, int WARPS_, bool CAUSAL_, bool WINDOW_,
          bool SOFTCAP_, int ROPE_, bool VARLEN_, int KV_MODE_, bool SINKS_, bool SPLIT_>
struct GqaFwdConfig {
  using T = T_;      // compute dtype (MMA operands, output)
  using TQ = TQ_;    // q's dtype: T or __nv_fp8_e4m3
  using TKV = TKV_;  // k's and v's dtype: T or __nv_fp8_e4m3
  static constexpr int D = D_, BM = BM_, BN = BN_, WARPS = WARPS_;
  static constexpr bool kCausal = CAUSAL_, kWindow = WINDOW_, kSoftcap = SOFTCAP_, kVarlen = VARLEN_, kSinks = SINKS_;
  static constexpr bool kSplit = SPLIT_;
  static constexpr int kKvMode = KV_MODE_;
  static constexpr int kRope = ROPE_;  // 0 none, 1 neox, 2 interleaved
  static_assert(sizeof(T) == 2, "gqa_fwd: the compute dtype is 16-bit");
  static_assert((sizeof(TQ) == 2 || sizeof(TQ) == 1) && (sizeof(TKV) == 2 || sizeof(TKV) == 1),
                "gqa_fwd: inputs are 16-bit or e4m3");
  static_assert(KV_MODE_ >= kKvDense && KV_MODE_ <= kKvPagedAppend, "gqa_fwd: KV mode is dense, packed, paged or append");
  static_assert((KV_MODE_ != kKvPacked && KV_MODE_ != kKvPagedAppend) || VARLEN_,
                "gqa_fwd: packed and appended keys come with packed queries");
  static_assert(KV_MODE_ != kKvPagedAppend || (sizeof(TQ_) == 2 && ROPE_ == 0 && !SINKS_),
                "gqa_fwd: the append mode takes 16-bit queries, pre-rotated, without sinks");
  static_assert(!SPLIT_ || !SINKS_, "gqa_fwd: split-KV applies sinks in the combine step");
  static_assert(D % 32 == 0 && D >= 32 && D <= 256, "gqa_fwd: D must be a multiple of 32 in [32, 256]");
  static_assert(BN % 16 == 0, "gqa_fwd: BN must be a multiple of 16");
  static_assert(BM % (16 * WARPS) == 0 || (SPLIT_ && BM % 16 == 0), "gqa_fwd: each warp owns a multiple of 16 rows");
  static_assert(kRope >= 0 && kRope <= 2, "gqa_fwd: rope mode is 0, 1 or 2");
  static_assert(!kSinks || kVarlen, "gqa_fwd: sinks come with packed queries");
  static constexpr bool kFp8Q = sizeof(TQ) == 1;
  static constexpr bool kFp8KV = sizeof(TKV) == 1;
  static constexpr int kThreads = WARPS * 32;
  // Split-KV decode tiles with several warps split the keys, not the rows: every warp owns all BM rows
  // and BN / WARPS keys of each tile, and the warps' softmax states merge at the end.
  static constexpr bool kWarpSplit = SPLIT_ && WARPS_ > 1;
  static constexpr int kWarpRows = kWarpSplit ? BM : BM / WARPS;
  static constexpr int kWarpKeys = kWarpSplit ? BN / WARPS : BN;
  static_assert(kWarpKeys % 16 == 0, "gqa_fwd: each warp takes a multiple of 16 keys of a tile");
  static constexpr int kMT = kWarpRows / 16;  // m16 tiles per warp
  static constexpr int kNT = kWarpKeys / 8;   // n8 tiles of S (this warp's keys)
  static constexpr int kDT = D / 8;           // n8 tiles of O
  static constexpr int kKS = D / 16;          // k16 steps of Q K^T
  // Shared-memory rows (see tile_at): D elements, swizzled, when D % 128 == 0; else D + 8, padded (H200,
  // session 10: swizzling D = 64's 128-byte rows cost 4%, while D = 128 gained 5-8% and D = 256 6-12%).
  static constexpr bool kSwizzle = D % 128 == 0;
  static constexpr int kPitch = kSwizzle ? D : D + 8;  // shared-memory row pitch, elements
  // RoPE keeps each rotated Q/K value as hi + lo in two 16-bit tiles (see rope_rotate).
  // Q, then K and V double-buffered (tile t + 2 loads while tile t + 1 waits and tile t is computed).
  static constexpr int kSmemRows = BM + 4 * BN + (kRope != 0 ? BM + 2 * BN : 0);
  // Q's A fragments stay in registers for the whole key loop (saving a third of the shared-memory
  // reads, the limiting resource of mma.sync attention) where the register budget allows it.
  static constexpr bool kQInRegs = kRope == 0 && (D <= 96 || kMT == 1);
  static constexpr int kSmemBytes = kSmemRows * kPitch * static_cast<int>(sizeof(T));
};

// Element offset of (row, col) in a shared-memory tile of Cfg::kPitch-element rows. Swizzled layout
// (Cfg::kSwizzle): the 16-byte chunk c of row r sits at chunk (c ^ r) % 8 of its 128-byte group, so a
// cp.async row segment fills whole aligned 128-byte lines, while the eight rows an ldmatrix phase reads
// at one logical chunk still fall in eight different bank groups. The padded layout (D + 8 elements per
// row) is conflict-free for ldmatrix too, but its rows start off the 128-byte lines: every 128-byte
// cp.async segment then spans two lines (H200 ncu at D 256: 2.6x the ideal shared-store wavefronts).
template <typename Cfg>
__device__ __forceinline__ int tile_at(int row, int col) {
  if constexpr (Cfg::kSwizzle) {
    const int c = col >> 3;
    return row * Cfg::kPitch + ((((c ^ row) & 7) | (c & ~7)) << 3) + (col & 7);
  } else {
    return row * Cfg::kPitch + col;
  }
}
// ldmatrix addressing. A lane reads logical chunk c + k of its row, c in {0, 1} (lane-dependent) and k
// even (compile-time after unrolling). lane_addr is the shared address of chunk c of the lane's row
// (swizzled: c ^ row % 8). (c + k) = (c | k), so chunk c + k is at lane_addr ^ 16 (k % 8) + 16 (k - k % 8):
// an XOR with an immediate and an immediate offset, since rows start on 128-byte boundaries. Further
// rows at multiples of 8 add their offset afterwards.
template <typename Cfg>
__device__ __forceinline__ unsigned lane_addr(const typename Cfg::T* tile, int row, int c) {
  return smem_addr(tile + row * Cfg::kPitch) + ((Cfg::kSwizzle ? (c ^ (row & 7)) : c) << 4);
}
template <typename Cfg>
__device__ __forceinline__ unsigned chunk_addr(unsigned lane, int k) {
  return Cfg::kSwizzle ? (lane ^ static_cast<unsigned>((k & 7) << 4)) + ((k & ~7) << 4) : lane + (k << 4);
}

// Loads ROWS rows of D elements into shared memory. row_ptr(row) gives the row's global address, or
// nullptr for a row outside the problem (zero-filled). 16-bit rows go through cp.async (the caller
// commits and waits); e4m3 rows are converted to T synchronously. Every e4m3 value is exact in fp16
// and bf16, so the dequantisation scales are not applied here but folded, exactly, into the logit
// scale (q_scale * k_scale) and the output (v_scale).
template <typename Cfg, typename TIn, int ROWS, typename RowPtr>
__device__ __forceinline__ void load_tile(typename Cfg::T* smem, RowPtr row_ptr) {
  using T = typename Cfg::T;
  if constexpr (sizeof(TIn) == 2) {
    constexpr int kChunks = Cfg::D / 8;
    if constexpr (Cfg::kThreads % kChunks == 0 && ROWS % (Cfg::kThreads / kChunks) == 0) {
      // NOTE: each thread keeps one 16-byte column and walks rows: fully unrolled, no divisions.
      constexpr int kRowStep = Cfg::kThreads / kChunks;
      const int ch = threadIdx.x % kChunks, row0 = threadIdx.x / kChunks;
#pragma unroll
      for (int it = 0; it < ROWS / kRowStep; ++it) {
        const int row = row0 + it * kRowStep;
        const auto* src = row_ptr(row);
        cp_async_16(smem + tile_at<Cfg>(row, ch * 8), src ? src + ch * 8 : nullptr, src != nullptr);
      }
    } else {
#pragma unroll
      for (int it = 0; it < (ROWS * kChunks + Cfg::kThreads - 1) / Cfg::kThreads; ++it) {
        const int idx = it * Cfg::kThreads + threadIdx.x;
        if (ROWS * kChunks % Cfg::kThreads != 0 && idx >= ROWS * kChunks) break;
        const int row = idx / kChunks, ch = idx % kChunks;
        const auto* src = row_ptr(row);
        cp_async_16(smem + tile_at<Cfg>(row, ch * 8), src ? src + ch * 8 : nullptr, src != nullptr);
      }
    }
  } else {
    constexpr int kChunks = Cfg::D / 16;
    for (int idx = threadIdx.x; idx < ROWS * kChunks; idx += Cfg::kThreads) {
      const int row = idx / kChunks, ch = idx % kChunks;
      const auto* src = row_ptr(row);
      uint4 raw = make_uint4(0, 0, 0, 0);
      if (src) raw = *reinterpret_cast<const uint4*>(reinterpret_cast<const unsigned char*>(src) + ch * 16);
      const unsigned w[4] = {raw.x, raw.y, raw.z, raw.w};
      unsigned out[8];
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        const float2 lo = e4m3x2_to_float2(static_cast<unsigned short>(w[q] & 0xFFFF));
        const float2 hi = e4m3x2_to_float2(static_cast<unsigned short>(w[q] >> 16));
        out[2 * q] = MmaOp<T>::pack(lo.x, lo.y);
        out[2 * q + 1] = MmaOp<T>::pack(hi.x, hi.y);
      }
      *reinterpret_cast<uint4*>(smem + tile_at<Cfg>(row, ch * 16)) = make_uint4(out[0], out[1], out[2], out[3]);
      *reinterpret_cast<uint4*>(smem + tile_at<Cfg>(row, ch * 16 + 8)) = make_uint4(out[4], out[5], out[6], out[7]);
    }
  }
}

// Loads ROWS rows base[row * stride], rows >= valid_rows zero-filled: the K and V tiles. The same as
// load_tile, with the row address affine in the row so that the unrolled loop only adds offsets.
template <typename Cfg, int ROWS>
__device__ __forceinline__ void load_tile_affine(typename Cfg::T* smem, const typename Cfg::TKV* base, long long stride,
                                                 int valid_rows) {
  constexpr int kElems = Cfg::kFp8KV ? 16 : 8;  // elements per 16-byte global chunk
  constexpr int kChunks = Cfg::D / kElems;
  if constexpr (!Cfg::kFp8KV && Cfg::kThreads % kChunks == 0 && ROWS % (Cfg::kThreads / kChunks) == 0) {
    constexpr int kRowStep = Cfg::kThreads / kChunks;
    // A thread's rows share row % 8 when kRowStep is a multiple of 8: then its swizzled chunk is fixed.
    constexpr bool kFixedChunk = !Cfg::kSwizzle || kRowStep % 8 == 0;
    const int ch = threadIdx.x % kChunks, row0 = threadIdx.x / kChunks;
    const typename Cfg::TKV* src = base + row0 * stride + ch * kElems;
    typename Cfg::T* dst = smem + tile_at<Cfg>(row0, ch * kElems);
    const long long step = kRowStep * stride;
#pragma unroll
    for (int it = 0; it < ROWS / kRowStep; ++it) {
      const bool valid = row0 + it * kRowStep < valid_rows;
      typename Cfg::T* d =
          kFixedChunk ? dst + it * kRowStep * Cfg::kPitch : smem + tile_at<Cfg>(row0 + it * kRowStep, ch * kElems);
      cp_async_16(d, valid ? src + it * step : base, valid);
    }
  } else {
    load_tile<Cfg, typename Cfg::TKV, ROWS>(smem, [&](int row) -> const typename Cfg::TKV* {
      return row < valid_rows ? base + row * stride : nullptr;
    });
  }
}

// Paged 16-bit K and V tiles together (KV modes 2 and 3). Each thread keeps one 16-byte column and
// walks rows row0 + it * kRowStep, so a row's page lookup (an integer division and a page-table read)
// is done once for both K and V, and one tile ahead (PagedRows), so that the page-table reads of the
// next tile land while this one is computed instead of stalling the loads.
template <typename Cfg, int ROWS>
struct PagedRows {
  static constexpr int kChunks = Cfg::D / 8;
  static constexpr int kRowStep = Cfg::kThreads >= kChunks ? Cfg::kThreads / kChunks : 1;
  static constexpr int kColSteps = Cfg::kThreads >= kChunks ? 1 : kChunks / Cfg::kThreads;
  static constexpr int kIters = (ROWS + kRowStep - 1) / kRowStep;
  int page[kIters];  // pool page of the row, -1: not a pool row
  int slot[kIters];
  // Whole-tile fast paths (the same for every thread): 1 = every row is a pool row of one page (page
  // tile_page from slot tile_slot); 2 = every row is a new row or past kv_len; 0 = per-row (page, slot).
  int mode;
  int tile_page, tile_slot;

  __device__ __forceinline__ static int row0() { return Cfg::kThreads >= kChunks ? threadIdx.x / kChunks : 0; }
  __device__ __forceinline__ static int ch0() { return threadIdx.x % (Cfg::kThreads >= kChunks ? kChunks : Cfg::kThreads); }

  // Rows n0 + row with key j < old are pool rows; page-table entries are read for those only. A thread's
  // rows are kRowStep apart: one division for the first, then the (page, slot) pair steps forward, and a
  // page-table entry is read only when the page changes.
  __device__ __forceinline__ void lookup(int n0, int old, const int* page_row, long long pt_sp, int page_size) {
    static_assert(Cfg::kThreads % kChunks == 0 || kChunks % Cfg::kThreads == 0, "PagedRows: thread layout");
    if (n0 >= old) {
      mode = 2;
      return;
    }
    const unsigned first_pg = static_cast<unsigned>(n0) / static_cast<unsigned>(page_size);
    if (n0 + ROWS <= old && static_cast<unsigned>(n0 + ROWS - 1) / static_cast<unsigned>(page_size) == first_pg) {
      mode = 1;
      tile_page = page_row[first_pg * pt_sp];
      tile_slot = n0 - static_cast<int>(first_pg) * page_size;
      return;
    }
    mode = 0;
    const int j0 = n0 + row0();
    const unsigned ups = static_cast<unsigned>(page_size);
    unsigned pg = static_cast<unsigned>(j0) / ups;
    unsigned sl = static_cast<unsigned>(j0) - pg * ups;
    unsigned cached_pg = 0xffffffffu;
    int cached_page = 0;
#pragma unroll
    for (int it = 0; it < kIters; ++it) {
      const int j = j0 + it * kRowStep;
      page[it] = -1;
      slot[it] = static_cast<int>(sl);
      if (j < old && (ROWS % kRowStep == 0 || row0() + it * kRowStep < ROWS)) {
        if (pg != cached_pg) {
          cached_page = page_row[pg * pt_sp];
          cached_pg = pg;
        }
        page[it] = cached_page;
      }
      sl += kRowStep;
      while (sl >= ups) {  // NOTE: at most kRowStep / page_size + 1 steps
        sl -= ups;
        ++pg;
      }
    }
  }
};

// Loads the K and V rows n0.. of a tile looked up in `pr`: pool rows, else new rows j - old for
// old <= j < kv_len (append mode; old = kv_len otherwise), else zeros.
template <typename Cfg, int ROWS>
__device__ __forceinline__ void load_paged_kv_tile(typename Cfg::T* sK, typename Cfg::T* sV, const PagedRows<Cfg, ROWS>& pr,
                                                   int n0, int old, int kv_len, const typename Cfg::T* kpool,
                                                   const typename Cfg::T* vpool, long long k_ss, long long k_sp,
                                                   long long v_ss, long long v_sp, const typename Cfg::T* knew,
                                                   long long kn_ss, const typename Cfg::T* vnew, long long vn_ss) {
  using PR = PagedRows<Cfg, ROWS>;
  const int row0 = PR::row0(), ch0 = PR::ch0();
#pragma unroll
  for (int it = 0; it < PR::kIters; ++it) {
    const int row = row0 + it * PR::kRowStep;
    if (ROWS % PR::kRowStep != 0 && row >= ROWS) break;
    const int j = n0 + row;
    const typename Cfg::T *ks = nullptr, *vs = nullptr;
    if (pr.page[it] >= 0) {
      ks = kpool + pr.page[it] * k_sp + pr.slot[it] * k_ss;
      vs = vpool + pr.page[it] * v_sp + pr.slot[it] * v_ss;
    } else if (j >= old && j < kv_len) {
      ks = knew + (j - old) * kn_ss;
      vs = vnew + (j - old) * vn_ss;
    }
#pragma unroll
    for (int cs = 0; cs < PR::kColSteps; ++cs) {
      const int ch = ch0 + cs * Cfg::kThreads;
      const int at = tile_at<Cfg>(row, ch * 8);
      cp_async_16(sK + at, ks ? ks + ch * 8 : nullptr, ks != nullptr);
      cp_async_16(sV + at, vs ? vs + ch * 8 : nullptr, vs != nullptr);
    }
  }
}

// Append mode (KV mode 3): loads ROWS key rows n0.. of one request. Key j < old is pool row
// (page_table[j / page_size], j % page_size), dequantised from e4m3 as rnd(decode(x) * deq) when the
// pool is e4m3; key old <= j < kv_len is new row j - old; later rows are zero.
template <typename Cfg, int ROWS>
__device__ __forceinline__ void load_append_tile(typename Cfg::T* smem, int n0, int old, int kv_len,
                                                 const typename Cfg::TKV* pool, long long slot_stride,
                                                 long long page_stride, const int* page_row, long long pt_sp, int page_size,
                                                 const typename Cfg::T* fresh, long long fresh_stride, float deq) {
  using T = typename Cfg::T;
  constexpr int kChunks = Cfg::D / 8;
  for (int idx = threadIdx.x; idx < ROWS * kChunks; idx += Cfg::kThreads) {
    const int row = idx / kChunks, ch = idx % kChunks, j = n0 + row;
    T* dst = smem + tile_at<Cfg>(row, ch * 8);
    if (j >= kv_len) {
      cp_async_16(dst, nullptr, false);
    } else if (j >= old) {
      cp_async_16(dst, fresh + (j - old) * fresh_stride + ch * 8, true);
    } else {
      const typename Cfg::TKV* src = pool + static_cast<long long>(page_row[(j / page_size) * pt_sp]) * page_stride +
                                     (j % page_size) * slot_stride + ch * 8;
      if constexpr (Cfg::kFp8KV) {
        const uint2 raw = *reinterpret_cast<const uint2*>(src);
        const unsigned w[2] = {raw.x, raw.y};
        unsigned out[4];
#pragma unroll
        for (int q = 0; q < 2; ++q) {
          const float2 lo = e4m3x2_to_float2(static_cast<unsigned short>(w[q] & 0xFFFF));
          const float2 hi = e4m3x2_to_float2(static_cast<unsigned short>(w[q] >> 16));
          out[2 * q] = MmaOp<T>::pack(lo.x * deq, lo.y * deq);
          out[2 * q + 1] = MmaOp<T>::pack(hi.x * deq, hi.y * deq);
        }
        *reinterpret_cast<uint4*>(dst) = make_uint4(out[0], out[1], out[2], out[3]);
      } else {
        cp_async_16(dst, src, true);
      }
    }
  }
}

// Rotates the first R channels of ROWS shared-memory rows (SPEC.md §1.7) in fp32. The rotated value
// is stored as hi = rnd(x) in `smem` and lo = rnd(x - hi) in `lo_tile`, so that the S = Q K^T products
// hi*hi + hi*lo + lo*hi recover fp32 accuracy (rounding the rotated operands to 16 bits once would cost
// about 2^-9 of every logit). lo columns in [R, R rounded up to 16) and lo of rows outside the problem
// (pos_of(row) < 0) are zero.
template <typename Cfg, int ROWS, typename PosOf>
__device__ __forceinline__ void rope_rotate(typename Cfg::T* smem, typename Cfg::T* lo_tile, PosOf pos_of,
                                            const GqaFwdParams& p) {
  using T = typename Cfg::T;
  const int half = p.rotary_dim / 2;
  const int cols16 = (p.rotary_dim + 15) / 16 * 16;
  const T* cos_t = static_cast<const T*>(p.rope_cos);
  const T* sin_t = static_cast<const T*>(p.rope_sin);
  for (int idx = threadIdx.x; idx < ROWS * half; idx += Cfg::kThreads) {
    const int row = idx / half, c = idx % half;
    const int pos = pos_of(row);
    const int a = Cfg::kRope == 1 ? c : 2 * c;
    const int b = Cfg::kRope == 1 ? c + half : 2 * c + 1;
    const int at_a = tile_at<Cfg>(row, a), at_b = tile_at<Cfg>(row, b);
    if (pos < 0) {
      lo_tile[at_a] = from_float<T>(0.f);
      lo_tile[at_b] = from_float<T>(0.f);
      continue;
    }
    const float cs = to_float(cos_t[pos * p.cos_sp + c * p.cos_sc]);
    const float sn = to_float(sin_t[pos * p.sin_sp + c * p.sin_sc]);
    const float xa = to_float(smem[at_a]), xb = to_float(smem[at_b]);
    const float ya = xa * cs - xb * sn, yb = xb * cs + xa * sn;
    const T ha = from_float<T>(ya), hb = from_float<T>(yb);
    smem[at_a] = ha;
    smem[at_b] = hb;
    lo_tile[at_a] = from_float<T>(ya - to_float(ha));
    lo_tile[at_b] = from_float<T>(yb - to_float(hb));
  }
  const int pad = cols16 - p.rotary_dim;
  for (int idx = threadIdx.x; idx < ROWS * pad; idx += Cfg::kThreads)
    lo_tile[tile_at<Cfg>(idx / pad, p.rotary_dim + idx % pad)] = from_float<T>(0.f);
}

template <typename T, typename TQ, typename TKV, int D, int BM, int BN, int WARPS, bool CAUSAL, bool WINDOW, bool SOFTCAP,
          int ROPE, bool VARLEN, int KV_MODE, bool SINKS, bool SPLIT>
__global__ void __launch_bounds__(WARPS * 32) gqa_fwd(const __grid_constant__ GqaFwdParams p) {
  using Cfg = GqaFwdConfig<T, TQ, TKV, D, BM, BN, WARPS, CAUSAL, WINDOW, SOFTCAP, ROPE, VARLEN, KV_MODE, SINKS, SPLIT>;
  using Mma = MmaOp<T>;
  constexpr int kPitch = Cfg::kPitch, kMT = Cfg::kMT, kNT = Cfg::kNT, kDT = Cfg::kDT;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  T* sQ = reinterpret_cast<T*>(smem_raw);
  T* sKbuf = sQ + BM * kPitch;       // [2][BN][kPitch]
  T* sVbuf = sKbuf + 2 * BN * kPitch;  // [2][BN][kPitch]
  T* sQlo = sVbuf + 2 * BN * kPitch;   // RoPE only: low parts of the rotated Q and K ([2][BN] for K)
  T* sKlobuf = sQlo + BM * kPitch;
  const int rope_cols = ROPE != 0 ? (p.rotary_dim + 15) / 16 * 16 : 0;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  // The combine (gqa_combine.cuh) may be scheduled from now on; it waits for this grid's writes.
  if constexpr (SPLIT) asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif

  const int r = blockIdx.y;  // KV head
  const int g = p.group;
  int b, tile, q_off = 0, kv_off = 0, q_len, kv_len, kv_old = 0;
  // Split-KV: z = split (packed queries) or b * n_splits + split.
  const int split = SPLIT ? (VARLEN ? static_cast<int>(blockIdx.z) : static_cast<int>(blockIdx.z) % p.n_splits) : 0;
  if constexpr (VARLEN) {
    if (!find_varlen_tile<BM>(p, b, tile)) return;
    q_off = p.cu_q[b];
    q_len = p.cu_q[b + 1] - q_off;
  } else {
    b = SPLIT ? static_cast<int>(blockIdx.z) / p.n_splits : static_cast<int>(blockIdx.z);
    // Causal: the longest tiles (last query rows, most keys) first, so the grid's tail is short work.
    tile = CAUSAL && !SPLIT ? static_cast<int>(gridDim.x - 1 - blockIdx.x) : static_cast<int>(blockIdx.x);
    q_len = p.s_q;
  }
  if constexpr (KV_MODE == kKvDense) {
    kv_len = p.s_kv;
  } else if constexpr (KV_MODE == kKvPacked) {
    kv_off = p.cu_kv[b];
    kv_len = p.cu_kv[b + 1] - kv_off;
  } else if constexpr (KV_MODE == kKvPaged) {
    kv_len = p.kv_lens[b * p.kv_lens_s];
  } else {
    kv_old = p.kv_lens[b * p.kv_lens_s];
    kv_len = kv_old + q_len;
  }
  const int m_base = tile * BM;
  if (m_base >= q_len * g) return;

  const TQ* qb = static_cast<const TQ*>(p.q) + (VARLEN ? q_off * p.q_ss : b * p.q_sb) + static_cast<long long>(r) * g * p.q_sh;
  // Paged: kb/vb point at KV head r of pool row 0; otherwise at the request's first key.
  constexpr bool kPool = KV_MODE == kKvPaged || KV_MODE == kKvPagedAppend;
  const long long k_base = kPool ? 0 : KV_MODE == kKvPacked ? kv_off * p.k_ss : b * p.k_sb;
  const long long v_base = kPool ? 0 : KV_MODE == kKvPacked ? kv_off * p.v_ss : b * p.v_sb;
  const TKV* kb = static_cast<const TKV*>(p.k) + k_base + r * p.k_sh;
  const TKV* vb = static_cast<const TKV*>(p.v) + v_base + r * p.v_sh;
  T* ob = static_cast<T*>(p.o) + (VARLEN ? q_off * p.o_ss : b * p.o_sb) + static_cast<long long>(r) * g * p.o_sh;
  // Logit scales (log2 domain) and the output scale; e4m3 dequantisation folds in here.
  // score_scale turns a score into a log2-domain logit: sm_scale * log2(e) for raw dot products, 1 for
  // softcapped scores (already logits).
  float score_scale = SOFTCAP ? 1.f : p.scale_log2, softcap_inv_scale = p.softcap_inv_scale, out_scale_v = 1.f;
  if constexpr (KV_MODE != kKvPagedAppend && (Cfg::kFp8Q || Cfg::kFp8KV)) {
    float qk = 1.f;
    if constexpr (Cfg::kFp8Q) qk *= p.q_scale[b * p.qsc_sb + r * p.qsc_sr];
    if constexpr (Cfg::kFp8KV) {
      qk *= p.k_scale[b * p.ksc_sb + r * p.ksc_sr];
      out_scale_v = p.v_scale[b * p.vsc_sb + r * p.vsc_sr];
    }
    if constexpr (SOFTCAP) softcap_inv_scale *= qk;
    else score_scale *= qk;
  }

  // The band of keys any row of this tile can see, and the tiles that cover it.
  const int shift = kv_len - q_len;  // bottom-right alignment: p_i = i + shift
  const int i_min = m_base / g;
  const int i_max = min(q_len - 1, (m_base + BM - 1) / g);
  const int p_min = i_min + shift, p_max = i_max + shift;
  int lo = 0, hi = kv_len;
  if constexpr (CAUSAL) hi = min(hi, p_max + 1);
  if constexpr (WINDOW) {
    if (p.window_left >= 0) lo = max(lo, p_min - p.window_left);
    if (p.window_right >= 0) hi = min(hi, p_max + p.window_right + 1);
  }
  int n_first = lo / BN * BN;
  int num_tiles = hi > n_first ? (hi - n_first + BN - 1) / BN : 0;
  if constexpr (SPLIT) {
    // This CTA's run of tiles: the split-th of n_splits runs of (nearly) equal length.
    const int per = (num_tiles + p.n_splits - 1) / p.n_splits;
    const int first = min(num_tiles, split * per);
    num_tiles = min(num_tiles, first + per) - first;
    n_first += first * BN;
  }

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int warp_row0 = Cfg::kWarpSplit ? 0 : warp * Cfg::kWarpRows;
  const int wk0 = Cfg::kWarpSplit ? warp * Cfg::kWarpKeys : 0;  // this warp's first key of each tile
  constexpr unsigned kRows16 = 16 * kPitch * sizeof(T);  // bytes of 16 tile rows
  // This lane's ldmatrix rows in the warp's first m16 / key block: Q's (and Q's low parts), K's, V's. Q
  // (A operand) and V (trans) lanes read chunk lane / 16 of their row, K lanes chunk (lane / 8) % 2; every
  // block offset is a multiple of 8 rows, so a lane's row % 8 (its swizzle) is lane % 8 throughout.
  const unsigned q_lane = lane_addr<Cfg>(sQ, warp_row0 + lane % 16, lane / 16);
  const unsigned qlo_lane = lane_addr<Cfg>(sQlo, warp_row0 + lane % 16, lane / 16);
  const int k_row = wk0 + lane % 8 + (lane / 16) * 8, v_row = wk0 + lane % 8 + ((lane / 8) % 2) * 8;
  // This thread's rows: (mt, hf) -> tile row warp_row0 + mt * 16 + lane / 4 + hf * 8, at key position
  // row_pos (query index + shift).
  int row_pos[kMT][2];
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) row_pos[mt][hf] = (m_base + warp_row0 + mt * 16 + lane / 4 + hf * 8) / g + shift;

  auto q_row = [&](int row) -> const TQ* {
    const int gm = m_base + row, i = gm / g;
    return i < q_len ? qb + i * p.q_ss + (gm - i * g) * p.q_sh : nullptr;
  };
  auto q_pos = [&](int row) -> int {
    const int i = (m_base + row) / g;
    return i < q_len ? i + shift : -1;
  };
  auto k_pos = [&](int n0) {
    return [=](int row) -> int { return n0 + row < kv_len ? n0 + row : -1; };
  };

  float o_acc[kMT][kDT][4];
  float m_i[kMT][2], l_i[kMT][2];
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt) {
#pragma unroll
    for (int dt = 0; dt < kDT; ++dt)
#pragma unroll
      for (int e = 0; e < 4; ++e) o_acc[mt][dt][e] = 0.f;
    m_i[mt][0] = m_i[mt][1] = -kInf();
    l_i[mt][0] = l_i[mt][1] = 0.f;
  }

  // Loads K/V tile t into buffer t % 2 and commits a cp.async group (an empty one past the last tile,
  // so that group t always holds tile t).
  // Paged 16-bit keys: the page-table entries of tile t + 1 are looked up when tile t is issued.
  constexpr bool kPagedRows = (KV_MODE == kKvPaged || KV_MODE == kKvPagedAppend) && !Cfg::kFp8KV;
  PagedRows<Cfg, BN> pg_next;
  const int pool_keys = KV_MODE == kKvPagedAppend ? kv_old : kv_len;  // keys held by the pool
  const int* page_row = kPool ? p.page_table + b * p.pt_sb : nullptr;
  auto lookup_pages = [&](int t) {
    if constexpr (kPagedRows) {
      if (t < num_tiles) pg_next.lookup(n_first + t * BN, pool_keys, page_row, p.pt_sp, p.page_size);
    }
  };
  auto issue_kv = [&](int t) {
    if (t < num_tiles) {
      const int n0 = n_first + t * BN;
      if constexpr (kPagedRows) {
        const T* kn = KV_MODE == kKvPagedAppend ? static_cast<const T*>(p.k_new) + q_off * p.kn_ss + r * p.kn_sh : nullptr;
        const T* vn = KV_MODE == kKvPagedAppend ? static_cast<const T*>(p.v_new) + q_off * p.vn_ss + r * p.vn_sh : nullptr;
        if (pg_next.mode == 1) {  // one page: the dense kernel's affine loads
          const long long off_k = static_cast<long long>(pg_next.tile_page) * p.k_sp + pg_next.tile_slot * p.k_ss;
          const long long off_v = static_cast<long long>(pg_next.tile_page) * p.v_sp + pg_next.tile_slot * p.v_ss;
          load_tile_affine<Cfg, BN>(sKbuf + (t & 1) * BN * kPitch, kb + off_k, p.k_ss, BN);
          load_tile_affine<Cfg, BN>(sVbuf + (t & 1) * BN * kPitch, vb + off_v, p.v_ss, BN);
        } else if (KV_MODE == kKvPagedAppend && pg_next.mode == 2) {  // new rows only
          load_tile_affine<Cfg, BN>(sKbuf + (t & 1) * BN * kPitch, reinterpret_cast<const TKV*>(kn) + (n0 - pool_keys) * p.kn_ss,
                                    p.kn_ss, kv_len - n0);
          load_tile_affine<Cfg, BN>(sVbuf + (t & 1) * BN * kPitch, reinterpret_cast<const TKV*>(vn) + (n0 - pool_keys) * p.vn_ss,
                                    p.vn_ss, kv_len - n0);
        } else {
          load_paged_kv_tile<Cfg, BN>(sKbuf + (t & 1) * BN * kPitch, sVbuf + (t & 1) * BN * kPitch, pg_next, n0, pool_keys,
                                      kv_len, reinterpret_cast<const T*>(kb), reinterpret_cast<const T*>(vb), p.k_ss,
                                      p.k_sp, p.v_ss, p.v_sp, kn, p.kn_ss, vn, p.vn_ss);
        }
      } else if constexpr (KV_MODE == kKvPagedAppend) {
        // e4m3 pool: dequantised on load (16-bit pools take the PagedRows path above).
        const T* kn = static_cast<const T*>(p.k_new) + q_off * p.kn_ss + r * p.kn_sh;
        const T* vn = static_cast<const T*>(p.v_new) + q_off * p.vn_ss + r * p.vn_sh;
        const float kdeq = p.k_scale[0], vdeq = p.v_scale[0];
        load_append_tile<Cfg, BN>(sKbuf + (t & 1) * BN * kPitch, n0, kv_old, kv_len, kb, p.k_ss, p.k_sp, page_row,
                                  p.pt_sp, p.page_size, kn, p.kn_ss, kdeq);
        load_append_tile<Cfg, BN>(sVbuf + (t & 1) * BN * kPitch, n0, kv_old, kv_len, vb, p.v_ss, p.v_sp, page_row,
                                  p.pt_sp, p.page_size, vn, p.vn_ss, vdeq);
      } else if constexpr (KV_MODE == kKvPaged) {
        // NOTE: page-table entries are read only for keys < kv_len (SPEC.md §2.9: later entries may hold
        // anything).
        auto paged_row = [&](const TKV* base, long long slot_stride, long long page_stride) {
          return [=](int row) -> const TKV* {
            const int j = n0 + row;
            if (j >= kv_len) return nullptr;
            const int page = p.page_table[b * p.pt_sb + (j / p.page_size) * p.pt_sp];
            return base + page * page_stride + (j % p.page_size) * slot_stride;
          };
        };
        load_tile<Cfg, TKV, BN>(sKbuf + (t & 1) * BN * kPitch, paged_row(kb, p.k_ss, p.k_sp));
        load_tile<Cfg, TKV, BN>(sVbuf + (t & 1) * BN * kPitch, paged_row(vb, p.v_ss, p.v_sp));
      } else {
        load_tile_affine<Cfg, BN>(sKbuf + (t & 1) * BN * kPitch, kb + n0 * p.k_ss, p.k_ss, kv_len - n0);
        load_tile_affine<Cfg, BN>(sVbuf + (t & 1) * BN * kPitch, vb + n0 * p.v_ss, p.v_ss, kv_len - n0);
      }
    }
    cp_async_commit();
  };
  load_tile<Cfg, TQ, BM>(sQ, q_row);
  lookup_pages(0);
  issue_kv(0);  // group 0: Q and tile 0
  lookup_pages(1);
  issue_kv(1);
  lookup_pages(2);
  cp_async_wait<1>();
  __syncthreads();
  if constexpr (ROPE != 0) {
    rope_rotate<Cfg, BM>(sQ, sQlo, q_pos, p);
    if (num_tiles > 0) rope_rotate<Cfg, BN>(sKbuf, sKlobuf, k_pos(n_first), p);
    __syncthreads();
  }

  unsigned q_frag[Cfg::kQInRegs ? Cfg::kKS : 1][kMT][4];
  if constexpr (Cfg::kQInRegs) {
#pragma unroll
    for (int ks16 = 0; ks16 < Cfg::kKS; ++ks16)
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt)
        ldmatrix_x4_at(q_frag[ks16][mt], chunk_addr<Cfg>(q_lane, 2 * ks16) + mt * kRows16);
  }

  for (int t = 0; t < num_tiles; ++t) {
    const int n0 = n_first + t * BN;
    const T* sK = sKbuf + (t & 1) * BN * kPitch;
    const T* sV = sVbuf + (t & 1) * BN * kPitch;
    const T* sKlo = sKlobuf + (t & 1) * BN * kPitch;
    const unsigned k_lane = lane_addr<Cfg>(sK, k_row, (lane / 8) % 2);
    const unsigned klo_lane = lane_addr<Cfg>(sKlo, k_row, (lane / 8) % 2);
    const unsigned v_lane = lane_addr<Cfg>(sV, v_row, lane / 16);
    if (t > 0) {
      cp_async_wait<1>();
      __syncthreads();  // tile t landed (tile t + 1 may still be in flight)
      if constexpr (ROPE != 0) {
        rope_rotate<Cfg, BN>(sKbuf + (t & 1) * BN * kPitch, sKlobuf + (t & 1) * BN * kPitch, k_pos(n0), p);
        __syncthreads();
      }
    }

    // S = Q K^T for this warp's rows.
    float s[kMT][kNT][4];
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
      for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) s[mt][nt][e] = 0.f;
#pragma unroll
    for (int ks16 = 0; ks16 < Cfg::kKS; ++ks16) {
      unsigned a[kMT][4];
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt) {
        if constexpr (Cfg::kQInRegs) {
#pragma unroll
          for (int e = 0; e < 4; ++e) a[mt][e] = q_frag[ks16][mt][e];
        } else {
          ldmatrix_x4_at(a[mt], chunk_addr<Cfg>(q_lane, 2 * ks16) + mt * kRows16);
        }
      }
#pragma unroll
      for (int np = 0; np < kNT / 2; ++np) {
        unsigned bk[4];
        ldmatrix_x4_at(bk, chunk_addr<Cfg>(k_lane, 2 * ks16) + np * kRows16);
#pragma unroll
        for (int mt = 0; mt < kMT; ++mt) {
          Mma::run(s[mt][2 * np], a[mt], bk[0], bk[1]);
          Mma::run(s[mt][2 * np + 1], a[mt], bk[2], bk[3]);
        }
      }
      if constexpr (ROPE != 0) {
        // The rotated channels' correction terms: Q_lo K_hi + Q_hi K_lo.
        if (ks16 * 16 < rope_cols) {
          unsigned alo[kMT][4];
#pragma unroll
          for (int mt = 0; mt < kMT; ++mt)
            ldmatrix_x4_at(alo[mt], chunk_addr<Cfg>(qlo_lane, 2 * ks16) + mt * kRows16);
#pragma unroll
          for (int np = 0; np < kNT / 2; ++np) {
            unsigned bk[4], bklo[4];
            ldmatrix_x4_at(bk, chunk_addr<Cfg>(k_lane, 2 * ks16) + np * kRows16);
            ldmatrix_x4_at(bklo, chunk_addr<Cfg>(klo_lane, 2 * ks16) + np * kRows16);
#pragma unroll
            for (int mt = 0; mt < kMT; ++mt) {
              Mma::run(s[mt][2 * np], alo[mt], bk[0], bk[1]);
              Mma::run(s[mt][2 * np + 1], alo[mt], bk[2], bk[3]);
              Mma::run(s[mt][2 * np], a[mt], bklo[0], bklo[1]);
              Mma::run(s[mt][2 * np + 1], a[mt], bklo[2], bklo[3]);
            }
          }
        }
      }
    }

    // Scores: raw dot products (the logit scale is applied inside exp2 below), or with softcap already
    // capped logits in the log2 domain. Masking only on tiles that cross the band's edges or kv_len.
    bool need_mask = n0 + BN > kv_len;
    if constexpr (CAUSAL) need_mask = need_mask || n0 + BN - 1 > p_min;
    if constexpr (WINDOW) {
      need_mask = need_mask || (p.window_left >= 0 && n0 < p_max - p.window_left) ||
                  (p.window_right >= 0 && n0 + BN - 1 > p_min + p.window_right);
    }
    if (SOFTCAP || need_mask) {
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
        for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            float x = s[mt][nt][e];
            if constexpr (SOFTCAP) x = p.softcap_log2 * fast_tanh(x * softcap_inv_scale);
            if (need_mask) {
              const int j = n0 + wk0 + nt * 8 + 2 * (lane % 4) + (e & 1);
              const int pos = row_pos[mt][e >> 1];
              bool visible = j < kv_len;
              if constexpr (CAUSAL) visible = visible && j <= pos;
              if constexpr (WINDOW) {
                visible = visible && (p.window_left < 0 || j >= pos - p.window_left) &&
                          (p.window_right < 0 || j <= pos + p.window_right);
              }
              if (!visible) x = -kInf();
            }
            s[mt][nt][e] = x;
          }
    }

    // Online softmax with lazy rescaling: a row's reference maximum m_i moves only when the tile's
    // maximum exceeds it by more than 2^8 (probabilities up to 256 are exact enough in fp32 sums and
    // 16-bit P), and O and l are rescaled only when some row of the warp moved.
    float tile_max[kMT][2];
    bool moved = false;
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
      for (int hf = 0; hf < 2; ++hf) {
        float mx = -kInf();
#pragma unroll
        for (int nt = 0; nt < kNT; ++nt) mx = fmaxf(mx, fmaxf(s[mt][nt][2 * hf], s[mt][nt][2 * hf + 1]));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
        tile_max[mt][hf] = mx;
        moved = moved || mx * score_scale > m_i[mt][hf] * score_scale + 8.f;
      }
    if (__any_sync(0xffffffffu, moved)) {
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
        for (int hf = 0; hf < 2; ++hf) {
          const float m_new = fmaxf(m_i[mt][hf], tile_max[mt][hf]);
          const float alpha = m_new == -kInf() ? 1.f : fast_exp2((m_i[mt][hf] - m_new) * score_scale);
          m_i[mt][hf] = m_new;
          l_i[mt][hf] *= alpha;
#pragma unroll
          for (int dt = 0; dt < kDT; ++dt) {
            o_acc[mt][dt][2 * hf] *= alpha;
            o_acc[mt][dt][2 * hf + 1] *= alpha;
          }
        }
    }
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
      for (int hf = 0; hf < 2; ++hf) {
        const float m_scaled = m_i[mt][hf] == -kInf() ? 0.f : m_i[mt][hf] * score_scale;
        float rs = 0.f;
#pragma unroll
        for (int nt = 0; nt < kNT; ++nt) {
          const float p0 = fast_exp2(fmaf(s[mt][nt][2 * hf], score_scale, -m_scaled));
          const float p1 = fast_exp2(fmaf(s[mt][nt][2 * hf + 1], score_scale, -m_scaled));
          s[mt][nt][2 * hf] = p0;
          s[mt][nt][2 * hf + 1] = p1;
          rs += p0 + p1;
        }
        l_i[mt][hf] += rs;
      }


    // O += P V.
#pragma unroll
    for (int kk = 0; kk < Cfg::kWarpKeys / 16; ++kk) {
      unsigned a[kMT][4];
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt) {
        a[mt][0] = Mma::pack(s[mt][2 * kk][0], s[mt][2 * kk][1]);
        a[mt][1] = Mma::pack(s[mt][2 * kk][2], s[mt][2 * kk][3]);
        a[mt][2] = Mma::pack(s[mt][2 * kk + 1][0], s[mt][2 * kk + 1][1]);
        a[mt][3] = Mma::pack(s[mt][2 * kk + 1][2], s[mt][2 * kk + 1][3]);
      }
#pragma unroll
      for (int dp = 0; dp < kDT / 2; ++dp) {
        unsigned bv[4];
        ldmatrix_x4_trans_at(bv, chunk_addr<Cfg>(v_lane, 2 * dp) + kk * kRows16);
#pragma unroll
        for (int mt = 0; mt < kMT; ++mt) {
          Mma::run(o_acc[mt][2 * dp], a[mt], bv[0], bv[1]);
          Mma::run(o_acc[mt][2 * dp + 1], a[mt], bv[2], bv[3]);
        }
      }
    }

    __syncthreads();  // every warp is done with buffer t % 2
    issue_kv(t + 2);
    lookup_pages(t + 3);
  }
  cp_async_wait<0>();  // no cp.async may be pending at exit

  if constexpr (Cfg::kWarpSplit) {
    // Merge the warps' states (same rows, disjoint keys) into warp 0 through shared memory (the K/V
    // buffers are free now): per lane, its fragments' m, l and O.
    constexpr int kPer = kMT * 4 + kMT * kDT * 4;
    float* red = reinterpret_cast<float*>(smem_raw);
    __syncthreads();
    if (warp != 0) {
      float* dst = red + ((warp - 1) * 32 + lane) * kPer;
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt) {
#pragma unroll
        for (int hf = 0; hf < 2; ++hf) {
          dst[mt * 4 + hf] = m_i[mt][hf];
          dst[mt * 4 + 2 + hf] = l_i[mt][hf];
        }
#pragma unroll
        for (int dt = 0; dt < kDT; ++dt)
#pragma unroll
          for (int e = 0; e < 4; ++e) dst[kMT * 4 + (mt * kDT + dt) * 4 + e] = o_acc[mt][dt][e];
      }
    }
    __syncthreads();
    if (warp != 0) return;
    for (int w = 1; w < WARPS; ++w) {
      const float* src = red + ((w - 1) * 32 + lane) * kPer;
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
        for (int hf = 0; hf < 2; ++hf) {
          const float mw = src[mt * 4 + hf], lw = src[mt * 4 + 2 + hf];
          const float M = fmaxf(m_i[mt][hf], mw);
          const float a0 = m_i[mt][hf] == -kInf() ? 0.f : fast_exp2((m_i[mt][hf] - M) * score_scale);
          const float aw = mw == -kInf() ? 0.f : fast_exp2((mw - M) * score_scale);
          m_i[mt][hf] = M;
          l_i[mt][hf] = l_i[mt][hf] * a0 + lw * aw;
#pragma unroll
          for (int dt = 0; dt < kDT; ++dt)
#pragma unroll
            for (int e = 0; e < 2; ++e) {
              const int k = 2 * hf + e;
              o_acc[mt][dt][k] = o_acc[mt][dt][k] * a0 + src[kMT * 4 + (mt * kDT + dt) * 4 + k] * aw;
            }
        }
    }
  }

  // Normalise, fold in the sink, write O and the natural-log LSE.
  constexpr float kLn2 = 0.69314718055994530942f;
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
      float l = l_i[mt][hf];
      l += __shfl_xor_sync(0xffffffffu, l, 1);
      l += __shfl_xor_sync(0xffffffffu, l, 2);
      float m = m_i[mt][hf] * score_scale;  // log2 domain (-inf stays -inf)
      const int gm = m_base + warp_row0 + mt * 16 + lane / 4 + hf * 8;
      const int i = gm / g, hg = gm - i * g;
      const int h = r * g + hg;
      float empty_lse = -kInf();
      float out_scale = out_scale_v;
      if constexpr (SINKS) fold_sink(i < q_len ? p.sinks[h * p.sinks_s] : -kInf(), m, l, out_scale, empty_lse);
      const float inv = l > 0.f ? out_scale / l : 0.f;
      if constexpr (SPLIT) {
        if (i < q_len) {
          const long long row = (VARLEN ? q_off + i : static_cast<long long>(b) * p.s_q + i) * (p.h_kv * g) + h;
          const long long at = static_cast<long long>(split) * p.part_rows + row;
          float* orow = p.o_part + at * D + 2 * (lane % 4);
#pragma unroll
          for (int dt = 0; dt < kDT; ++dt)
            *reinterpret_cast<float2*>(orow + dt * 8) =
                make_float2(o_acc[mt][dt][2 * hf] * inv, o_acc[mt][dt][2 * hf + 1] * inv);
          if (lane % 4 == 0) p.lse_part[at] = l > 0.f ? m + log2f(l) : -kInf();
        }
        continue;
      }
      if (i < q_len) {
        T* orow = ob + static_cast<long long>(i) * p.o_ss + hg * p.o_sh + 2 * (lane % 4);
#pragma unroll
        for (int dt = 0; dt < kDT; ++dt)
          *reinterpret_cast<unsigned*>(orow + dt * 8) =
              Mma::pack(o_acc[mt][dt][2 * hf] * inv, o_acc[mt][dt][2 * hf + 1] * inv);
        if (p.lse && lane % 4 == 0) {
          const float lse = l > 0.f ? (m + log2f(l)) * kLn2 : empty_lse;
          if constexpr (VARLEN) p.lse[static_cast<long long>(q_off + i) * p.lse_ss + h * p.lse_sh] = lse;
          else p.lse[b * p.lse_sb + h * p.lse_sh + static_cast<long long>(i) * p.lse_ss] = lse;
        }
      }
    }
}

}  // namespace attnjit::kernels
