// paged_kv_write: scatter N new K/V rows into page pools (SPEC.md §2.19). Memory-bound: each work
// item is one 16-byte store per pool: 8 elements for a 16-bit cache, 16 (two 16-byte loads) for an
// e4m3 cache; a thread keeps kUnroll items in flight (all loads issued before any store). Slots < 0
// are skipped unread.
#pragma once
#include "common/numeric.cuh"
#include "kv_cache/paged_kv_write_params.cuh"

namespace attnjit::kernels {

template <typename T, typename CacheT, int D>
struct PagedKvWriteConfig {
  static_assert(D % 16 == 0, "paged_kv_write: D must be a multiple of 16");
  static_assert(sizeof(T) == 2, "paged_kv_write: k and v are 16-bit");
  static_assert(sizeof(CacheT) == 2 || sizeof(CacheT) == 1, "paged_kv_write: cache is 16-bit or e4m3");
  static constexpr bool kFp8 = sizeof(CacheT) == 1;
  static constexpr int kVec = kFp8 ? 16 : 8;   // elements per item (one 16-byte store)
  static constexpr int kLoads = kVec / 8;      // 16-byte loads per item and tensor
  static constexpr int kChunks = D / kVec;     // items per (token, head) row
  static constexpr int kThreads = 256;
  static constexpr int kUnroll = 4;            // items in flight per thread
};

template <typename T, typename CacheT, int D>
__global__ void __launch_bounds__(PagedKvWriteConfig<T, CacheT, D>::kThreads)
    paged_kv_write(const PagedKvWriteParams p) {
  using Cfg = PagedKvWriteConfig<T, CacheT, D>;
  const long long rows = p.num_tokens * p.num_heads;
  const long long total = rows * Cfg::kChunks;
  const long long step = static_cast<long long>(gridDim.x) * Cfg::kThreads * Cfg::kUnroll;
  const float k_scale = Cfg::kFp8 ? *p.k_scale : 1.0f;
  const float v_scale = Cfg::kFp8 ? *p.v_scale : 1.0f;
  const T* k = static_cast<const T*>(p.k);
  const T* v = static_cast<const T*>(p.v);
  CacheT* kp = static_cast<CacheT*>(p.k_pages);
  CacheT* vp = static_cast<CacheT*>(p.v_pages);

  for (long long base = static_cast<long long>(blockIdx.x) * Cfg::kThreads * Cfg::kUnroll + threadIdx.x;
       base < total; base += step) {
    uint4 kv[Cfg::kUnroll][Cfg::kLoads], vv[Cfg::kUnroll][Cfg::kLoads];
    long long kdst[Cfg::kUnroll], vdst[Cfg::kUnroll];
    bool live[Cfg::kUnroll];
#pragma unroll
    for (int u = 0; u < Cfg::kUnroll; ++u) {
      const long long i = base + static_cast<long long>(u) * Cfg::kThreads;
      live[u] = false;
      if (i < total) {
        const int c = static_cast<int>(i % Cfg::kChunks);
        const long long row = i / Cfg::kChunks;
        const int h = static_cast<int>(row % p.num_heads);
        const long long n = row / p.num_heads;
        const long long slot = __ldg(p.slot_mapping + n * p.slot_stride);
        if (slot >= 0) {
          live[u] = true;
          const long long page = slot / p.page_size;
          const long long off = slot - page * p.page_size;
          const uint4* ks = reinterpret_cast<const uint4*>(k + n * p.k_stride_n + h * p.k_stride_h + c * Cfg::kVec);
          const uint4* vs = reinterpret_cast<const uint4*>(v + n * p.v_stride_n + h * p.v_stride_h + c * Cfg::kVec);
#pragma unroll
          for (int l = 0; l < Cfg::kLoads; ++l) {
            kv[u][l] = __ldg(ks + l);
            vv[u][l] = __ldg(vs + l);
          }
          kdst[u] = page * p.kp_stride_page + off * p.kp_stride_slot + h * p.kp_stride_h + c * Cfg::kVec;
          vdst[u] = page * p.vp_stride_page + off * p.vp_stride_slot + h * p.vp_stride_h + c * Cfg::kVec;
        }
      }
    }
#pragma unroll
    for (int u = 0; u < Cfg::kUnroll; ++u) {
      if (!live[u]) continue;
      if constexpr (Cfg::kFp8) {
        const uint2 k0 = to_e4m3x8<T>(kv[u][0], k_scale), k1 = to_e4m3x8<T>(kv[u][Cfg::kLoads - 1], k_scale);
        const uint2 v0 = to_e4m3x8<T>(vv[u][0], v_scale), v1 = to_e4m3x8<T>(vv[u][Cfg::kLoads - 1], v_scale);
        *reinterpret_cast<uint4*>(kp + kdst[u]) = make_uint4(k0.x, k0.y, k1.x, k1.y);
        *reinterpret_cast<uint4*>(vp + vdst[u]) = make_uint4(v0.x, v0.y, v1.x, v1.y);
      } else {
        *reinterpret_cast<uint4*>(kp + kdst[u]) = kv[u][0];
        *reinterpret_cast<uint4*>(vp + vdst[u]) = vv[u][0];
      }
    }
  }
}

}  // namespace attnjit::kernels
