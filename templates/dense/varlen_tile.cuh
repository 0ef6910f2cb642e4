// Packed (varlen) queries: which request and which of its row tiles a CTA computes. Shared by the
// portable attention kernel (dense/gqa_fwd.cuh), the hopper one and the sm_90a paged decode kernel.
#pragma once
#include "dense/gqa_fwd_params.cuh"

namespace attnjit::kernels {

// Varlen: maps a linear tile index to (request, tile within the request) by a warp-wide scan of
// per-request tile counts (every lane of the warp calls it with the same index). Returns false when the
// index lies past the last tile. A persistent kernel calls it once per work tile.
template <int BM>
__device__ __forceinline__ bool find_varlen_tile_at(const GqaFwdParams& p, int index, int& b, int& tile) {
  const int lane = threadIdx.x & 31;
  const int g = p.group;
  int acc = 0;
  tile = index;
  for (int base = 0; base < p.batch; base += 32) {
    const int idx = base + lane;
    const int len = idx < p.batch ? p.cu_q[idx + 1] - p.cu_q[idx] : 0;
    const int tiles = (len * g + BM - 1) / BM;
    int incl = tiles;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const int n = __shfl_up_sync(0xffffffffu, incl, o);
      if (lane >= o) incl += n;
    }
    const int total = __shfl_sync(0xffffffffu, incl, 31);
    if (tile < acc + total) {
      const unsigned mask = __ballot_sync(0xffffffffu, tile < acc + incl);
      const int first = __ffs(mask) - 1;
      const int excl = __shfl_sync(0xffffffffu, incl - tiles, first);
      b = base + first;
      tile -= acc + excl;
      return true;
    }
    acc += total;
  }
  return false;
}

// The CTA's tile: index blockIdx.x.
template <int BM>
__device__ __forceinline__ bool find_varlen_tile(const GqaFwdParams& p, int& b, int& tile) {
  return find_varlen_tile_at<BM>(p, static_cast<int>(blockIdx.x), b, tile);
}

}  // namespace attnjit::kernels
