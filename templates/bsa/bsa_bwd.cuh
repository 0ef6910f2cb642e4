// bsa_bwd, portable backend (mma.sync, sm_80+): the block-sparse attention backward of SPEC.md §2.5 on
// the shared attention backward (templates/common/attention_bwd.cuh) with the routed schedule: each key
// block walks the (query head, query block) entries that select it, from an inverted (key block ->
// query blocks) map.
//
// Launch sequence on one stream (bsa_bwd.cpp), all scratch in the plan workspace:
//   1. memset counts = 0
//   2. bsa_bwd_prep<T, D>     lse2, delta, zeroed dq accumulator (attn_bwd_prep_rows)
//   3. bsa_bwd_route(count)   per active (row block, u): counts[b, kv head, key block] += 1
//   4. bsa_bwd_scan           one CTA: offsets = exclusive prefix sums of counts (and fill cursors)
//   5. bsa_bwd_route(fill)    per active (row block, u): list[cursor++] = (head in group, query block)
//   6. bsa_bwd_main<..>       one CTA per (key block, kv head, batch) (attn_bwd_main_body): items of BM
//                             rows (half an entry for bs 128, two entries for bs 64); keys past the
//                             block's length are hidden
//   7. bsa_bwd_dq<T, D>       dq = rnd(scale * dq_acc) for every row (rows no block reaches: exact 0).
// dQ accumulates with fp32 atomics and the list order comes from atomic cursors: results are not
// bitwise deterministic (SPEC.md §2.5 allows it).
#pragma once
#include "bsa/bsa_bwd_params.cuh"
#include "common/attention_bwd.cuh"

namespace attnjit::kernels {

template <typename T, int D>
__global__ void __launch_bounds__(256) bsa_bwd_prep(const __grid_constant__ AttnBwdParams p) {
  attn_bwd_prep_rows<T, D, D>(p);
}

// One thread per (b, h, query block, u): fill = 0 counts the active (query block, key block) pairs per
// (b, kv head, key block); fill = 1 appends each pair to its key block's list. Indices outside
// [0, N_kv) (outside the caller contract) are skipped.
__global__ void __launch_bounds__(256) bsa_bwd_route(const __grid_constant__ AttnBwdParams p, int fill) {
  const long long gid = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  const long long total = static_cast<long long>(p.batch) * p.h_q * p.n_q * p.k_max;
  if (gid >= total) return;
  const int u = static_cast<int>(gid % p.k_max);
  long long rest = gid / p.k_max;
  const int m = static_cast<int>(rest % p.n_q);
  rest /= p.n_q;
  const int h = static_cast<int>(rest % p.h_q);
  const int b = static_cast<int>(rest / p.h_q);
  const int n = p.nums ? p.nums[b * p.nums_sb + h * p.nums_sh + m * p.nums_sm] : p.fixed_count;
  if (u >= n) return;
  const int kb = p.index[b * p.idx_sb + h * p.idx_sh + m * p.idx_sm + u * p.idx_su];
  if (kb < 0 || kb >= p.n_kv) return;
  const int r = h / p.group;
  const long long seg = (static_cast<long long>(b) * p.h_kv + r) * p.n_kv + kb;
  if (!fill) {
    atomicAdd(p.counts + seg, 1);
  } else {
    const int pos = atomicAdd(p.cursor + seg, 1);
    p.list[pos] = (h - r * p.group) * p.n_q + m;
  }
}

// One CTA of 1024 threads: offsets = exclusive prefix sums of counts (offsets[n] = total), cursor = offsets.
__global__ void __launch_bounds__(1024) bsa_bwd_scan(const __grid_constant__ AttnBwdParams p) {
  __shared__ int warp_excl[32];
  __shared__ int chunk_total;
  const long long n = static_cast<long long>(p.batch) * p.h_kv * p.n_kv;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  int carry = 0;
  for (long long base = 0; base < n; base += 4 * 1024) {
    const long long i0 = base + threadIdx.x * 4;
    int v[4], sum = 0;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      v[j] = i0 + j < n ? p.counts[i0 + j] : 0;
      sum += v[j];
    }
    int incl = sum;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const int t = __shfl_up_sync(0xffffffffu, incl, o);
      if (lane >= o) incl += t;
    }
    if (lane == 31) warp_excl[warp] = incl;
    __syncthreads();
    if (warp == 0) {
      const int w = warp_excl[lane];
      int wi = w;
#pragma unroll
      for (int o = 1; o < 32; o <<= 1) {
        const int t = __shfl_up_sync(0xffffffffu, wi, o);
        if (lane >= o) wi += t;
      }
      warp_excl[lane] = wi - w;
      if (lane == 31) chunk_total = wi;
    }
    __syncthreads();
    int excl = carry + warp_excl[warp] + incl - sum;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      if (i0 + j < n) {
        p.offsets[i0 + j] = excl;
        p.cursor[i0 + j] = excl;
      }
      excl += v[j];
    }
    carry += chunk_total;
    __syncthreads();  // warp_excl and chunk_total are rewritten by the next chunk
  }
  if (threadIdx.x == 0) p.offsets[n] = carry;
}

template <typename T, int D>
__global__ void __launch_bounds__(256) bsa_bwd_dq(const __grid_constant__ AttnBwdParams p) {
  attn_bwd_dq_rows<T, D, D>(p);
}

// bsa_bwd's tile: one key block of BS keys per CTA, items of BM query rows.
template <typename T, int D, int BS, int BM>
struct BsaBwdConfig : AttnBwdTile<T, D, D, BS, BM> {
  static_assert(D == 64 || D == 128, "bsa_bwd: D is 64 or 128");
  static_assert(BS == 64 || BS == 128, "bsa_bwd: the sparse block size is 64 or 128");
  static_assert(BM == bsa_bwd_block_m(BS), "bsa_bwd: BM is 64 (bs 128) or 128 (bs 64)");
};

template <typename T, int D, int BS, int BM>
__global__ void __launch_bounds__(BsaBwdConfig<T, D, BS, BM>::kThreads, 1)
    bsa_bwd_main(const __grid_constant__ AttnBwdParams p) {
  attn_bwd_main_body<BsaBwdConfig<T, D, BS, BM>>(p, RoutedSlots<BS>(p, blockIdx.x, blockIdx.y, blockIdx.z));
}

}  // namespace attnjit::kernels
