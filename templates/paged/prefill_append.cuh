// gqa_prefill_paged_append, step 1 of 2 (SPEC.md §2.10): append the chunk's keys and values to the
// paged cache, and with fuse_rope rotate q and the new keys first. Step 2 is the attention
// (dense/gqa_fwd.cuh in KV mode 3), which reads the old rows from the pool and the new rows unquantised
// from k_new / v_new (or the rotated copies this kernel leaves in the plan's workspace).
//
// One CTA per packed token: the token's request b comes from a binary search of cu_q, its position is
// pos = cache_seqlens[b] + (t - cu_q[b]) and its pool row block_table[b, pos / PS] * PS + pos % PS.
// Stores: 16-bit caches take the values as they are (rotated and rounded to q's dtype with RoPE); e4m3
// caches take e4m3(x / scale), an IEEE division and a saturating conversion (§1.8).
#pragma once
#include "common/mma.cuh"
#include "common/numeric.cuh"
#include "paged/prefill_append_params.cuh"

namespace attnjit::kernels {

// RoPE (neox) of channel d of row x at position pos with rotated width R, in fp32 from the 16-bit
// values: the table entries cos/sin(pos * inv_freq[c]) are rounded to T first, as the contract's tables.
// NOTE: inv_freq and cos/sin are evaluated in double and rounded once (the CPU reference does the same):
// fp32 powf/cosf differ between libraries by an ulp or two, and an ulp of inv_freq times a position of
// thousands moves the angle enough to flip table entries, which the rotation's cancellation turns into
// errors of tens of ulps in small rotated values.
template <typename T>
__device__ __forceinline__ T rope_neox(const T* x, int d, int R, float pos, float base) {
  if (d >= R) return x[d];
  const int half = R / 2;
  const int c = d < half ? d : d - half;
  const float inv_freq = static_cast<float>(1.0 / pow(static_cast<double>(base), 2.0 * c / R));
  const float angle = pos * inv_freq;
  const float cs = to_float(from_float<T>(static_cast<float>(cos(static_cast<double>(angle)))));
  const float sn = to_float(from_float<T>(static_cast<float>(sin(static_cast<double>(angle)))));
  const float xa = to_float(x[c]), xb = to_float(x[c + half]);
  return from_float<T>(d < half ? xa * cs - xb * sn : xb * cs + xa * sn);
}

template <typename T, typename TC, int D, bool ROPE>
__global__ void __launch_bounds__(128) prefill_append(const __grid_constant__ PrefillAppendParams p) {
  static_assert(sizeof(T) == 2, "prefill_append: q is 16-bit");
  static_assert(!ROPE || sizeof(TC) == 2, "prefill_append: fuse_rope needs a 16-bit cache");
  static_assert(D % 8 == 0, "prefill_append: D is a multiple of 8");
  constexpr bool kFp8 = sizeof(TC) == 1;
  const int t = blockIdx.x;
  // The request of token t: the last b with cu_q[b] <= t (empty requests share offsets with the next).
  int lo = 0, hi = p.batch;  // invariant: cu_q[lo] <= t, and t < cu_q[hi] unless t is past the end
  if (t >= p.cu_q[p.batch]) return;
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    if (p.cu_q[mid] <= t) lo = mid;
    else hi = mid;
  }
  const int b = lo;
  const int pos = p.cache_seqlens[b * p.cs_s] + (t - p.cu_q[b]);
  const long long row =
      static_cast<long long>(p.block_table[b * p.bt_sb + (pos / p.page_size) * p.bt_sp]) * p.page_size + pos % p.page_size;
  TC* kdst = static_cast<TC*>(p.k_pages) + row * p.h_kv * D;
  TC* vdst = static_cast<TC*>(p.v_pages) + row * p.h_kv * D;
  const T* ksrc = static_cast<const T*>(p.k_new) + t * p.kn_ss;
  const T* vsrc = static_cast<const T*>(p.v_new) + t * p.vn_ss;

  if constexpr (ROPE) {
    const float fpos = static_cast<float>(pos);
    const T* qsrc = static_cast<const T*>(p.q) + t * p.q_ss;
    T* qrot = static_cast<T*>(p.q_rot) + static_cast<long long>(t) * p.heads * D;
    T* krot = static_cast<T*>(p.k_rot) + static_cast<long long>(t) * p.h_kv * D;
    for (int idx = threadIdx.x; idx < p.heads * D; idx += blockDim.x) {
      const int h = idx / D, d = idx % D;
      qrot[idx] = rope_neox(qsrc + h * p.q_sh, d, p.rotary_dim, fpos, p.rope_base);
    }
    for (int idx = threadIdx.x; idx < p.h_kv * D; idx += blockDim.x) {
      const int r = idx / D, d = idx % D;
      const T y = rope_neox(ksrc + r * p.kn_sh, d, p.rotary_dim, fpos, p.rope_base);
      krot[idx] = y;
      kdst[idx] = y;
      vdst[idx] = vsrc[r * p.vn_sh + d];
    }
  } else {
    // 16-byte chunks of 8 values.
    constexpr int kChunks = D / 8;
    const float ksc = kFp8 ? p.k_scale[0] : 1.f, vsc = kFp8 ? p.v_scale[0] : 1.f;
    for (int idx = threadIdx.x; idx < 2 * p.h_kv * kChunks; idx += blockDim.x) {
      const bool is_v = idx >= p.h_kv * kChunks;
      const int j = is_v ? idx - p.h_kv * kChunks : idx;
      const int r = j / kChunks, ch = j % kChunks;
      const T* src = (is_v ? vsrc + r * p.vn_sh : ksrc + r * p.kn_sh) + ch * 8;
      TC* dst = (is_v ? vdst : kdst) + r * D + ch * 8;
      const uint4 x = *reinterpret_cast<const uint4*>(src);
      if constexpr (kFp8) *reinterpret_cast<uint2*>(dst) = to_e4m3x8<T>(x, is_v ? vsc : ksc);
      else *reinterpret_cast<uint4*>(dst) = x;
    }
  }
}

}  // namespace attnjit::kernels
