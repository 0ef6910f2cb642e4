// topk_select (SPEC.md §2.2), portable backend: per row (b, s, g) the topk window positions with the
// highest index_score[b, s, j, g], by a radix select on the fp32 bits mapped to order-preserving uint32
// keys (no sort; the order of the output is unspecified).
//
// One CTA (512 threads) per row:
//   1. histogram of the top 11 key bits over the window (the row is read from global once; windows of
//      at most cache_cap elements are kept in shared memory as keys for the later passes);
//   2. the threshold bin b1: elements above it are selected (appended through warp-aggregated shared
//      counters), elements in it become candidates (shared memory, up to cand_cap of them);
//   3. two more digit histograms (11 and 10 bits) over the candidates give the exact k-th key T; keys
//      above T are appended, and as many keys equal to T as are still missing.
// A threshold bin larger than cand_cap (many equal scores) takes the same steps over the whole row.
// Windows not larger than topk are copied (positions lo..hi-1, then -1).
#pragma once
#include "indexer/topk_select_params.cuh"

namespace attnjit::kernels {

__device__ __forceinline__ unsigned topk_ordered_key(float x) {
  const unsigned b = __float_as_uint(x);
  return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

// All 32 lanes call this together: returns, for a lane with `pred`, its slot in a buffer filled through
// the shared counter `counter` (one atomic per warp).
__device__ __forceinline__ int topk_warp_append(bool pred, int* counter) {
  const unsigned mask = __ballot_sync(0xffffffffu, pred);
  if (mask == 0) return 0;
  const int lane = threadIdx.x & 31;
  const int leader = __ffs(mask) - 1;
  int base = 0;
  if (lane == leader) base = atomicAdd(counter, __popc(mask));
  base = __shfl_sync(0xffffffffu, base, leader);
  return base + __popc(mask & ((1u << lane) - 1u));
}

// Visits every window element (offset i in [0, n), its key) with all lanes converged: f(i, key, valid).
// From the row cache when `cache` is set, else from global memory (16-byte loads when G = 1).
template <typename F>
__device__ __forceinline__ void topk_visit_row(const float* row, int G, int n, const unsigned* cache, F&& f) {
  constexpr int kT = kTopkSelectThreads;
  const int tid = threadIdx.x;
  if (cache) {
    for (int b0 = 0; b0 < n; b0 += kT) {
      const int i = b0 + tid;
      const bool v = i < n;
      f(i, v ? cache[i] : 0u, v);
    }
    return;
  }
  if (G != 1) {
    constexpr int U = 4;
    for (int b0 = 0; b0 < n; b0 += kT * U) {
      float x[U];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int i = b0 + u * kT + tid;
        x[u] = i < n ? __ldg(row + static_cast<long long>(i) * G) : 0.0f;
      }
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int i = b0 + u * kT + tid;
        f(i, topk_ordered_key(x[u]), i < n);
      }
    }
    return;
  }
  int head = static_cast<int>(((16 - (reinterpret_cast<unsigned long long>(row) & 15)) & 15) / 4);
  if (head > n) head = n;
  if (head > 0) f(tid, tid < head ? topk_ordered_key(row[tid < head ? tid : 0]) : 0u, tid < head);
  const int n4 = (n - head) / 4;
  const float4* r4 = reinterpret_cast<const float4*>(row + head);
  constexpr int U = 4;
  for (int b0 = 0; b0 < n4; b0 += kT * U) {
    float4 x[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int i = b0 + u * kT + tid;
      x[u] = i < n4 ? __ldg(r4 + i) : make_float4(0.f, 0.f, 0.f, 0.f);
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int i = b0 + u * kT + tid;
      const bool v = i < n4;
      const int o = head + 4 * i;
      f(o, topk_ordered_key(x[u].x), v);
      f(o + 1, topk_ordered_key(x[u].y), v);
      f(o + 2, topk_ordered_key(x[u].z), v);
      f(o + 3, topk_ordered_key(x[u].w), v);
    }
  }
  const int t0 = head + 4 * n4, rem = n - t0;
  if (rem > 0) f(t0 + tid, tid < rem ? topk_ordered_key(row[t0 + (tid < rem ? tid : 0)]) : 0u, tid < rem);
}

// Over a histogram of `nbins` (2048 or 1024) bins holding at least k counts: the bin b where the count of
// the bins above b is < k <= the count of the bins from b up; writes b and k minus the count above b.
__device__ __forceinline__ void topk_find_bin(const unsigned* hist, int nbins, int k, int* out_bin, int* out_krem,
                                              unsigned* warp_sums) {
  constexpr int kT = kTopkSelectThreads;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int per = nbins / kT;  // 4 or 2 consecutive bins per thread
  unsigned local = 0;
  for (int i = 0; i < per; ++i) local += hist[tid * per + i];
  // Exclusive suffix sum over threads (higher threads hold higher bins).
  unsigned incl = local;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const unsigned v = __shfl_down_sync(0xffffffffu, incl, o);
    if (lane + o < 32) incl += v;
  }
  if (lane == 0) warp_sums[warp] = incl;
  __syncthreads();
  unsigned above = incl - local;
  for (int w = warp + 1; w < kT / 32; ++w) above += warp_sums[w];
  if (above < static_cast<unsigned>(k) && above + local >= static_cast<unsigned>(k)) {
    unsigned run = above;
    for (int i = per - 1; i >= 0; --i) {
      const unsigned c = hist[tid * per + i];
      if (run + c >= static_cast<unsigned>(k)) {
        *out_bin = tid * per + i;
        *out_krem = k - static_cast<int>(run);
        break;
      }
      run += c;
    }
  }
  __syncthreads();
}

// Visits the elements of the threshold bin b1 with all lanes converged: the candidates when they were
// kept, else the whole row with the others marked invalid.
template <typename F>
__device__ __forceinline__ void topk_visit_bin(bool use_cand, int ncand, const unsigned* cand_key, const int* cand_off,
                                               const float* row, int G, int n, const unsigned* cache, unsigned b1,
                                               const F& f) {
  if (use_cand) {
    for (int b0 = 0; b0 < ncand; b0 += kTopkSelectThreads) {
      const int i = b0 + threadIdx.x;
      const bool v = i < ncand;
      f(v ? cand_off[i] : 0, v ? cand_key[i] : 0u, v);
    }
  } else {
    topk_visit_row(row, G, n, cache, [&](int i, unsigned key, bool v) { f(i, key, v && (key >> 21) == b1); });
  }
}

template <bool WINDOW>
__global__ void __launch_bounds__(kTopkSelectThreads, 3) topk_select(const TopkSelectParams p) {
  constexpr int kT = kTopkSelectThreads;
  extern __shared__ __align__(16) unsigned char smem[];
  unsigned* hist = reinterpret_cast<unsigned*>(smem);
  int* vars = reinterpret_cast<int*>(smem + kTopkSelectBins * 4);  // 8 ints, then 16 warp sums
  unsigned* warp_sums = reinterpret_cast<unsigned*>(vars + 8);
  unsigned* cache = reinterpret_cast<unsigned*>(smem + kTopkSelectBins * 4 + 128);
  unsigned* cand_key = cache + p.cache_cap;
  int* cand_off = reinterpret_cast<int*>(cand_key + p.cand_cap);
  // vars: 0 bin, 1 krem, 2 count above (appended), 3 candidates, 4 equal keys taken
  const int tid = threadIdx.x;
  const int k = p.topk;

  for (long long r = blockIdx.x; r < p.rows; r += gridDim.x) {
    const long long bs = r / p.G;
    const int g = static_cast<int>(r - bs * p.G);
    int lo = 0, hi = p.S_kv;
    if constexpr (WINDOW) {
      const long long b = bs / p.S, s = bs - b * p.S;
      lo = max(__ldg(p.starts + b * p.st_sb + s * p.st_ss), 0);
      hi = min(__ldg(p.ends + b * p.en_sb + s * p.en_ss), p.S_kv);
    }
    const int n = hi > lo ? hi - lo : 0;
    int* out = p.indexes + r * k;
    if (n <= k) {
      for (int i = tid; i < k; i += kT) out[i] = i < n ? lo + i : -1;
      continue;
    }
    const float* row = p.score + bs * p.S_kv * p.G + g + static_cast<long long>(lo) * p.G;
    const bool cached = n <= p.cache_cap;

    // 1. Top digit histogram (and the row cache).
    __syncthreads();  // the previous row is done with the shared buffers
    for (int i = tid; i < kTopkSelectBins; i += kT) hist[i] = 0;
    if (tid < 8) vars[tid] = 0;
    __syncthreads();
    topk_visit_row(row, p.G, n, nullptr, [&](int i, unsigned key, bool v) {
      if (!v) return;
      if (cached) cache[i] = key;
      atomicAdd(hist + (key >> 21), 1u);
    });
    __syncthreads();
    topk_find_bin(hist, 2048, k, vars + 0, vars + 1, warp_sums);
    const unsigned b1 = static_cast<unsigned>(vars[0]);
    const int krem1 = vars[1];
    const bool use_cand = static_cast<int>(hist[b1]) <= p.cand_cap;
    const unsigned* src = cached ? cache : nullptr;

    // 2. Keys above the bin are selected; keys in it are candidates.
    topk_visit_row(row, p.G, n, src, [&](int i, unsigned key, bool v) {
      const unsigned d = key >> 21;
      const bool above = v && d > b1;
      const int pos = topk_warp_append(above, vars + 2);
      if (above) out[pos] = lo + i;
      if (use_cand) {
        const bool in = v && d == b1;
        const int c = topk_warp_append(in, vars + 3);
        if (in) {
          cand_key[c] = key;
          cand_off[c] = i;
        }
      }
    });
    __syncthreads();

    // 3. The two lower digits, over the candidates (or the whole row when they did not fit).
    const int ncand = vars[3];
    for (int i = tid; i < kTopkSelectBins; i += kT) hist[i] = 0;
    __syncthreads();
    topk_visit_bin(use_cand, ncand, cand_key, cand_off, row, p.G, n, src, b1, [&](int, unsigned key, bool v) {
      if (v) atomicAdd(hist + ((key >> 10) & 0x7FFu), 1u);
    });
    __syncthreads();
    topk_find_bin(hist, 2048, krem1, vars + 0, vars + 1, warp_sums);
    const unsigned hi21 = (b1 << 11) | static_cast<unsigned>(vars[0]);
    const int krem2 = vars[1];
    for (int i = tid; i < 1024; i += kT) hist[i] = 0;
    __syncthreads();
    topk_visit_bin(use_cand, ncand, cand_key, cand_off, row, p.G, n, src, b1, [&](int, unsigned key, bool v) {
      if (v && (key >> 10) == hi21) atomicAdd(hist + (key & 0x3FFu), 1u);
    });
    __syncthreads();
    topk_find_bin(hist, 1024, krem2, vars + 0, vars + 1, warp_sums);
    const unsigned T = (hi21 << 10) | static_cast<unsigned>(vars[0]);
    const int krem3 = vars[1];

    // 4. Candidates above T, then krem3 of those equal to T (at the end of the row).
    topk_visit_bin(use_cand, ncand, cand_key, cand_off, row, p.G, n, src, b1, [&](int i, unsigned key, bool v) {
      const bool above = v && key > T;
      const int pos = topk_warp_append(above, vars + 2);
      if (above) out[pos] = lo + i;
      const bool eq = v && key == T;
      const int e = topk_warp_append(eq, vars + 4);
      if (eq && e < krem3) out[k - krem3 + e] = lo + i;
    });
  }
}

}  // namespace attnjit::kernels
