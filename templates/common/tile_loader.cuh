// Global -> shared tile loaders and the shared-memory row layouts they write, shared by the mma.sync
// kernels: tile_at (XOR-swizzled or padded rows), the ldmatrix lane addressing that matches it
// (lane_addr, chunk_addr), load_tile (any row addressing, 16-bit or e4m3 rows), load_tile_affine (rows
// at a fixed stride) and load_rows_affine (a fixed pitch, no layout struct).
//
// Layout structs (Cfg): T (the shared-memory element type, 16-bit), TKV (the global K/V element type:
// T or __nv_fp8_e4m3), D (elements per row), kThreads (threads that load), kSwizzle, kPitch (row pitch,
// elements; D when swizzled), kFp8KV (TKV is e4m3).
#pragma once
#include "common/mma.cuh"
#include "common/numeric.cuh"

namespace attnjit::kernels {

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

// ROWS rows of COLS 16-bit elements from base[row * stride] into smem (pitch PITCH), rows >= valid
// zero-filled, through cp.async (the caller commits).
template <int THREADS, int ROWS, int COLS, int PITCH, typename T>
__device__ __forceinline__ void load_rows_affine(T* smem, const T* base, long long stride, int valid) {
  constexpr int kChunks = COLS / 8;
  if constexpr (THREADS % kChunks == 0 && ROWS % (THREADS / kChunks) == 0) {
    constexpr int kRowStep = THREADS / kChunks;
    const int ch = threadIdx.x % kChunks, row0 = threadIdx.x / kChunks;
    const T* src = base + row0 * stride + ch * 8;
    T* dst = smem + row0 * PITCH + ch * 8;
    const long long step = kRowStep * stride;
#pragma unroll
    for (int it = 0; it < ROWS / kRowStep; ++it) {
      const bool ok = row0 + it * kRowStep < valid;
      cp_async_16(dst + it * kRowStep * PITCH, ok ? src + it * step : base, ok);
    }
  } else {
#pragma unroll
    for (int it = 0; it < (ROWS * kChunks + THREADS - 1) / THREADS; ++it) {
      const int idx = it * THREADS + threadIdx.x;
      if (ROWS * kChunks % THREADS != 0 && idx >= ROWS * kChunks) break;
      const int row = idx / kChunks, ch = idx % kChunks;
      const bool ok = row < valid;
      cp_async_16(smem + row * PITCH + ch * 8, ok ? base + row * stride + ch * 8 : base, ok);
    }
  }
}

}  // namespace attnjit::kernels
