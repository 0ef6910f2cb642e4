// KV row addressing of the attention kernels: where key j of request b lives in each KV mode (dense,
// packed, paged, paged-append), the request's key extent, and the loaders of paged and appended K/V
// tiles (the dense and packed tiles are affine: load_tile_affine in common/tile_loader.cuh).
#pragma once
#include "common/tile_loader.cuh"

namespace attnjit::kernels {

// Where the keys of request b live (KV_MODE): dense [B, S_kv, H_kv, D]; packed [T_kv, H_kv, D] with
// cu_kv offsets; or paged: key j is pool row (page_table[b, j / page_size], j % page_size) and kv_len
// comes from kv_lens[b].
// Paged-append (3): keys below kv_lens[b] are paged pool rows, the rest this call's new rows
// (gqa_prefill_paged_append).
// Compressed (4): packed like mode 1, but key c is NSA's compressed chunk c, the summary of query
// positions [c bs, (c + 1) bs) (nsa_compressed_fwd): query i sees chunk c iff c < (i + 1) / bs, i.e. the
// causal band with row i at key position (i + 1) / bs - 1 (compressed_pos).
enum KvMode { kKvDense = 0, kKvPacked = 1, kKvPaged = 2, kKvPagedAppend = 3, kKvCompressed = 4 };

// The key position of query row i under KV_MODE: bottom-right aligned (i + kv_len - q_len) in every mode
// but the compressed one, where it is the last complete chunk (-1: none yet).
template <int KV_MODE>
__device__ __forceinline__ int key_position(int i, int shift, int cmp_bs) {
  if constexpr (KV_MODE == kKvCompressed) return (i + 1) / cmp_bs - 1;
  else return i + shift;
}

// The keys of request b: kv_len keys, of which the first kv_old are pool rows in append mode (this
// call's new rows follow); packed keys start at token kv_off. P: GqaFwdParams (cu_kv, kv_lens, s_kv).
template <int KV_MODE, typename P>
__device__ __forceinline__ void kv_extent(const P& p, int b, int q_len, int& kv_off, int& kv_len, int& kv_old) {
  if constexpr (KV_MODE == kKvDense) {
    kv_len = p.s_kv;
  } else if constexpr (KV_MODE == kKvPacked || KV_MODE == kKvCompressed) {
    kv_off = p.cu_kv[b];
    kv_len = p.cu_kv[b + 1] - kv_off;
  } else if constexpr (KV_MODE == kKvPaged) {
    kv_len = p.kv_lens[b * p.kv_lens_s];
  } else {
    kv_old = p.kv_lens[b * p.kv_lens_s];
    kv_len = kv_old + q_len;
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

}  // namespace attnjit::kernels
