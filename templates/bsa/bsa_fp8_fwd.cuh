// bsa_fp8_fwd (SPEC.md §2.6), portable backend: the quantisation pre-pass and the block-sparse attention
// over the e4m3 operands.
//
// PRE-PASS (into the plan workspace, deterministic: fixed reduction orders, no atomics):
//   bsa8_stats     grid (n_chunks, B * H): per 256-key chunk, the fp64 sum of k and the max |v| per channel.
//   bsa8_finalize  grid (B * H): mu[b, h, :] = fp32(sum / S_kv) (the sums of bf16 values in fp64 are exact
//                  in practice, so mu equals the reference's rounded exact mean); CTAs of b = 0 also write
//                  s_v[h, :] = max(max_{b, j} |v|, 1e-3) / 448.
//   bsa8_quant_q   a half-warp per row: s_q = max(amax, 1e-3) / 448, q8 = e4m3(q / s_q).
//   bsa8_quant_k   one warp per 16-key group: kc = k - mu (fp32), s_k = max(amax |kc|, 1e-3) / 448,
//                  k8 = e4m3(kc / s_k).
//   bsa8_quant_v   (portable) one CTA per 64-key tile: v8 = e4m3(v / s_v) written TRANSPOSED, v8t[b, h, d, :],
//                  keys permuted inside each 16-key group (below), zeros up to s_kv_pad = ceil16(S_kv).
//   bsa8_quant_v16 (hopper) a half-warp per row: the same codes as fp16 values, v16[b, h, j, :].
//   Every division is an IEEE fp32 division (__fdiv_rn) and every store the saturating RNE e4m3
//   conversion of SPEC.md §1.8, so the codes equal the CPU reference's bit for bit.
//
// ATTENTION (bsa8_attention): the structure of bsa_fwd.cuh (one CTA per 64-row query block and head, 2
// warps of 32 rows, the flat stream of 32-key tiles over the row's active blocks with cp.async double
// buffering). The operands are e4m3 in global and shared memory (K and V tiles are half the bytes of
// bf16 ones); the products run on fp16 m16n8k16 MMAs after an exact e4m3 -> fp16 conversion in
// registers (cvt.rn.f16x2.e4m3x2). That is what ptxas emits for mma.sync m16n8k32 e4m3 on sm_90 anyway
// (Hopper has no warp-level FP8 MMA: the instruction becomes 12 F2FP unpacks + 2 HMMA.16816), but done
// here once per fragment and shared by the warp's two m16 row tiles. The products and their fp32
// accumulation are exact either way, so the numerics are those of an e4m3 x e4m3 -> fp32 MMA.
//   Probabilities stay fp16 (not e4m3): P in [0, 2^8] (lazy rescaling) rounds with 2^-11 relative error,
//   about 15x less than e4m3 P (measured in numpy: 2.4e-2 to 2.7e-2 rel_l2 against the fp8 reference,
//   more than half the 5e-2 budget), at no cost on sm_90 where an e4m3 P.V would be unpacked to fp16.
//   Logits: S = q8 . k8 (fp32), z = S * s_k(key group), l2 = z * (s_q(row) * scale * log2 e); online
//   softmax in the log2 domain with lazy rescaling as in bsa_fwd (the maximum in z units, the exponent
//   one FFMA per logit with the per-(row, group) factor). O = (sum_j P_ij v8_j) * s_v(d) / l_i.
//   Subtracting mu changes every logit of a row by the same amount (softmax-invariant, SPEC.md §2.6).
//
// FRAGMENT LAYOUTS. ldmatrix (b16, non-transposed) on rows of e4m3 bytes gives thread (g = lane / 4,
// t = lane % 4) the 4 bytes [4t, 4t + 4) of row g of each 8 x 16-byte matrix. Converted, the low half is
// the fp16 pair of bytes (4t, 4t + 1), the high half the pair (4t + 2, 4t + 3). Used as an m16n8k16 B
// fragment (b0 = low, b1 = high), MMA k-slots (2t, 2t + 1) hold bytes (4t, 4t + 1) and k-slots
// (8 + 2t, 9 + 2t) bytes (4t + 2, 4t + 3) of the 16-byte chunk: a fixed permutation of the 16 k-indices
// of the chunk, which the A operand must share:
//  - Q . K^T (k = head dim): Q is staged in shared memory as fp16 with each 16-channel chunk stored in
//    that permuted order (words [lo(W0), lo(W1), lo(W2), lo(W3), hi(W0), .., hi(W3)] of the chunk's e4m3
//    words W0..W3), so the standard ldmatrix_x4 A fragments line up.
//  - P . V (k = key): the A fragments are the standard ones from the S accumulators (keys 2t, 2t + 1 and
//    8 + 2t, 9 + 2t of each 16-key chunk), so the pre-pass stores v8t with byte s of each 16-key group
//    holding key perm(s) = 8 * ((s >> 1) & 1) + 2 * (s >> 2) + (s & 1).
#pragma once
#include "bsa/bsa_fp8_fwd_params.cuh"
#include "bsa/bsa_fwd.cuh"  // BsaTileStream
#include "common/mma.cuh"
#include "common/numeric.cuh"
#include "common/online_softmax.cuh"

namespace attnjit::kernels {

// Two e4m3 bytes (low byte first) to an fp16 pair (exact; cvt.rn.f16x2.e4m3x2 on sm_89+).
__device__ __forceinline__ unsigned bsa8_e4m3x2_to_h2(unsigned short v) {
  const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(v), __NV_E4M3);
  return static_cast<unsigned>(h.x) | (static_cast<unsigned>(h.y) << 16);
}
__device__ __forceinline__ unsigned bsa8_lo(unsigned w) { return bsa8_e4m3x2_to_h2(static_cast<unsigned short>(w & 0xffffu)); }
__device__ __forceinline__ unsigned bsa8_hi(unsigned w) { return bsa8_e4m3x2_to_h2(static_cast<unsigned short>(w >> 16)); }

// Four e4m3 bytes to two fp16 pairs: lo = bytes (0, 1), hi = bytes (2, 3). On sm_89+ through PTX 16-bit
// halves, so that the upper pair converts straight from the register's high half (F2FP ... R.H1) without
// a shift; older targets use cuda_fp8.h's software conversion.
__device__ __forceinline__ void bsa8_unpack(unsigned w, unsigned& lo, unsigned& hi) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  asm("{\n"
      "  .reg .b16 l, h;\n"
      "  mov.b32 {l, h}, %2;\n"
      "  cvt.rn.f16x2.e4m3x2 %0, l;\n"
      "  cvt.rn.f16x2.e4m3x2 %1, h;\n"
      "}\n"
      : "=r"(lo), "=r"(hi)
      : "r"(w));
#else
  lo = bsa8_lo(w);
  hi = bsa8_hi(w);
#endif
}

// One saturating RNE e4m3 code of an fp32 value (SPEC.md §1.8).
__device__ __forceinline__ unsigned bsa8_code(float x) {
  return static_cast<unsigned>(__nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3));
}

__device__ __forceinline__ float bsa8_warp_max(float x) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, o));
  return x;
}

// Four bf16 values (8 bytes) to fp32.
__device__ __forceinline__ void bsa8_load4(const __nv_bfloat16* src, float (&x)[4]) {
  const uint2 u = __ldg(reinterpret_cast<const uint2*>(src));
  const float2 a = Float16Traits<__nv_bfloat16>::to_float2(u.x), b = Float16Traits<__nv_bfloat16>::to_float2(u.y);
  x[0] = a.x;
  x[1] = a.y;
  x[2] = b.x;
  x[3] = b.y;
}

// ---------------------------------------------------------------------------------------------------
// Pre-pass

// Grid (n_chunks, B * H), 256 threads: thread (phase = tid / 64, pair = tid % 64) reads channels
// 2 pair, 2 pair + 1 of keys chunk0 + phase + 4 i; the four phases are combined in a fixed order.
// D is a template parameter (always 128) so that a cubin holds only the kernel it is built for.
template <int D>
__global__ void __launch_bounds__(256) bsa8_stats(const __grid_constant__ BsaFp8Params p) {
  static_assert(D == 128, "bsa_fp8_fwd: D = 128");
  __shared__ double s_sum[4][128];
  __shared__ float s_max[4][128];
  const int chunk = blockIdx.x, bh = blockIdx.y;
  const int b = bh / p.heads, h = bh % p.heads;
  const int tid = threadIdx.x, phase = tid >> 6, pair = tid & 63;
  const int j0 = chunk * kBsa8StatKeys, j1 = min(p.s_kv, j0 + kBsa8StatKeys);
  const auto* kb = static_cast<const __nv_bfloat16*>(p.k) + b * p.k_sb + h * p.k_sh + 2 * pair;
  const auto* vb = static_cast<const __nv_bfloat16*>(p.v) + b * p.v_sb + h * p.v_sh + 2 * pair;
  double s0 = 0, s1 = 0;
  float m0 = 0.f, m1 = 0.f;
#pragma unroll 4
  for (int j = j0 + phase; j < j1; j += 4) {
    const float2 kf = Float16Traits<__nv_bfloat16>::to_float2(__ldg(reinterpret_cast<const unsigned*>(kb + j * p.k_ss)));
    const float2 vf = Float16Traits<__nv_bfloat16>::to_float2(__ldg(reinterpret_cast<const unsigned*>(vb + j * p.v_ss)));
    s0 += static_cast<double>(kf.x);
    s1 += static_cast<double>(kf.y);
    m0 = fmaxf(m0, fabsf(vf.x));
    m1 = fmaxf(m1, fabsf(vf.y));
  }
  s_sum[phase][2 * pair] = s0;
  s_sum[phase][2 * pair + 1] = s1;
  s_max[phase][2 * pair] = m0;
  s_max[phase][2 * pair + 1] = m1;
  __syncthreads();
  if (tid < 128) {
    const double s = ((s_sum[0][tid] + s_sum[1][tid]) + s_sum[2][tid]) + s_sum[3][tid];
    const float m = fmaxf(fmaxf(s_max[0][tid], s_max[1][tid]), fmaxf(s_max[2][tid], s_max[3][tid]));
    const long long at = (static_cast<long long>(bh) * p.n_chunks + chunk) * 128 + tid;
    p.ksum[at] = s;
    p.vmax[at] = m;
  }
}

// Grid (B * H), 128 threads (one channel each). Four independent partial sums / maxima keep four loads
// in flight; they are combined in a fixed order (deterministic).
template <int D>
__global__ void __launch_bounds__(128) bsa8_finalize(const __grid_constant__ BsaFp8Params p) {
  const int bh = blockIdx.x, d = threadIdx.x;
  const double* ks = p.ksum + static_cast<long long>(bh) * p.n_chunks * 128 + d;
  double s[4] = {0, 0, 0, 0};
  int c = 0;
  for (; c + 4 <= p.n_chunks; c += 4)
#pragma unroll
    for (int e = 0; e < 4; ++e) s[e] += ks[(c + e) * 128];
  for (; c < p.n_chunks; ++c) s[0] += ks[c * 128];
  p.mu[bh * 128 + d] = static_cast<float>(((s[0] + s[1]) + (s[2] + s[3])) / static_cast<double>(p.s_kv));
  if (bh < p.heads) {  // b = 0: s_v of head h = bh over every batch
    const int h = bh;
    float m[4] = {0.f, 0.f, 0.f, 0.f};
    for (int b = 0; b < p.batch; ++b) {
      const float* vm = p.vmax + (static_cast<long long>(b) * p.heads + h) * p.n_chunks * 128 + d;
      int c2 = 0;
      for (; c2 + 4 <= p.n_chunks; c2 += 4)
#pragma unroll
        for (int e = 0; e < 4; ++e) m[e] = fmaxf(m[e], vm[(c2 + e) * 128]);
      for (; c2 < p.n_chunks; ++c2) m[0] = fmaxf(m[0], vm[c2 * 128]);
    }
    const float mx = fmaxf(fmaxf(m[0], m[1]), fmaxf(m[2], m[3]));
    p.sv[h * 128 + d] = __fdiv_rn(fmaxf(mx, 1e-3f), 448.f);
  }
}

// Eight bf16 values (one 16-byte chunk) to fp32.
__device__ __forceinline__ void bsa8_unpack8(const uint4& u, float (&x)[8]) {
  const unsigned w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    const float2 f = Float16Traits<__nv_bfloat16>::to_float2(w[e]);
    x[2 * e] = f.x;
    x[2 * e + 1] = f.y;
  }
}
// Eight saturating RNE e4m3 codes of x / s (IEEE divisions), lowest channel first.
__device__ __forceinline__ uint2 bsa8_codes8(const float (&x)[8], float s) {
  uint2 r = make_uint2(0u, 0u);
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    r.x |= bsa8_code(__fdiv_rn(x[e], s)) << (8 * e);
    r.y |= bsa8_code(__fdiv_rn(x[4 + e], s)) << (8 * e);
  }
  return r;
}

// Rows are read and written as 16-byte chunks by half-warps (lane l % 16 owns channels [8 (l % 16), +8)), so
// a load instruction of a warp covers two 256-byte rows; the kernels below keep several rows' loads in flight
// per thread before any arithmetic (memory-level parallelism: they are bandwidth-bound passes).

// This thread's 16-byte chunks (channels [8 ch, 8 ch + 8)) of rows r0 + 2 j + half, j < N, of a [B, H, S, 128]
// bf16 tensor with strides (sb, sh, ss) (flat row r = (b H + h) S + i; rows >= `rows` give zeros), and each
// row's head in hs. All N loads are issued before any is used.
template <int N>
__device__ __forceinline__ void bsa8_load_rows(const void* base, long long sb, long long sh, long long ss, int s_len,
                                               int heads, long long rows, long long r0, int half, int ch, uint4 (&u)[N],
                                               int (&hs)[N]) {
#pragma unroll
  for (int j = 0; j < N; ++j) {
    const long long r = r0 + 2 * j + half;
    u[j] = make_uint4(0u, 0u, 0u, 0u);
    hs[j] = 0;
    if (r < rows) {
      const long long bh = r / s_len;
      const int i = static_cast<int>(r - bh * s_len);
      const int b = static_cast<int>(bh / heads), h = static_cast<int>(bh % heads);
      hs[j] = h;
      u[j] = __ldg(reinterpret_cast<const uint4*>(static_cast<const __nv_bfloat16*>(base) + b * sb + h * sh + i * ss + 8 * ch));
    }
  }
}

// Q: 8 rows per warp per step (a half-warp per row, four loads per thread in flight), grid-stride over steps.
template <int D>
__global__ void __launch_bounds__(256) bsa8_quant_q(const __grid_constant__ BsaFp8Params p) {
  constexpr int kRows = 8;
  const int lane = threadIdx.x & 31, half = lane >> 4, ch = lane & 15;
  const long long rows = static_cast<long long>(p.batch) * p.heads * p.s_q;
  const long long warps = static_cast<long long>(gridDim.x) * 8;
  for (long long r0 = (static_cast<long long>(blockIdx.x) * 8 + (threadIdx.x >> 5)) * kRows; r0 < rows;
       r0 += warps * kRows) {
    uint4 u[kRows / 2];
    int hs[kRows / 2];
    bsa8_load_rows(p.q, p.q_sb, p.q_sh, p.q_ss, p.s_q, p.heads, rows, r0, half, ch, u, hs);
#pragma unroll
    for (int j = 0; j < kRows / 2; ++j) {
      const long long r = r0 + 2 * j + half;
      float x[8];
      bsa8_unpack8(u[j], x);
      float mx = 0.f;
#pragma unroll
      for (int e = 0; e < 8; ++e) mx = fmaxf(mx, fabsf(x[e]));
#pragma unroll
      for (int o = 8; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));  // within the half-warp
      const float s = __fdiv_rn(fmaxf(mx, 1e-3f), 448.f);
      if (r < rows) {
        *reinterpret_cast<uint2*>(p.q8 + r * 128 + 8 * ch) = bsa8_codes8(x, s);
        if (ch == 0) p.sq[r] = s;
      }
    }
  }
}

// K: one warp per 16-key group of one (b, h) (a half-warp per key, eight loads per thread in flight), 8 groups
// per CTA, grid-stride: kc = k - mu (fp32), s_k = max(amax |kc| over the group, 1e-3) / 448, k8 = e4m3(kc / s_k).
template <int D>
__global__ void __launch_bounds__(256) bsa8_quant_k(const __grid_constant__ BsaFp8Params p) {
  const int lane = threadIdx.x & 31, half = lane >> 4, ch = lane & 15;
  const long long groups = static_cast<long long>(p.batch) * p.heads * p.n_groups;
  const long long step = static_cast<long long>(gridDim.x) * 8;
  for (long long gr = static_cast<long long>(blockIdx.x) * 8 + (threadIdx.x >> 5); gr < groups; gr += step) {
    const long long bh = gr / p.n_groups;
    const int gi = static_cast<int>(gr - bh * p.n_groups);
    const int b = static_cast<int>(bh / p.heads), h = static_cast<int>(bh % p.heads);
    const int j0 = gi * 16, n = min(16, p.s_kv - j0);
    const auto* src = static_cast<const __nv_bfloat16*>(p.k) + b * p.k_sb + h * p.k_sh + 8 * ch;
    uint4 u[8];
#pragma unroll
    for (int jj = 0; jj < 8; ++jj) {
      const int key = 2 * jj + half;
      u[jj] = key < n ? __ldg(reinterpret_cast<const uint4*>(src + (j0 + key) * p.k_ss)) : make_uint4(0u, 0u, 0u, 0u);
    }
    const float4 mu0 = *reinterpret_cast<const float4*>(p.mu + bh * 128 + 8 * ch);
    const float4 mu1 = *reinterpret_cast<const float4*>(p.mu + bh * 128 + 8 * ch + 4);
    const float mu[8] = {mu0.x, mu0.y, mu0.z, mu0.w, mu1.x, mu1.y, mu1.z, mu1.w};
    float kc[8][8];
    float mx = 0.f;
#pragma unroll
    for (int jj = 0; jj < 8; ++jj) {
      float x[8];
      bsa8_unpack8(u[jj], x);
      const bool live = 2 * jj + half < n;
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        kc[jj][e] = x[e] - mu[e];
        if (live) mx = fmaxf(mx, fabsf(kc[jj][e]));
      }
    }
    mx = bsa8_warp_max(mx);
    const float s = __fdiv_rn(fmaxf(mx, 1e-3f), 448.f);
    unsigned char* dst = p.k8 + (bh * p.s_kv + j0) * 128 + 8 * ch;
#pragma unroll
    for (int jj = 0; jj < 8; ++jj) {
      const int key = 2 * jj + half;
      if (key < n) *reinterpret_cast<uint2*>(dst + key * 128) = bsa8_codes8(kc[jj], s);
    }
    if (lane == 0) p.sk[gr] = s;
  }
}

// V for the hopper kernel: v16[b, h, j, :] = fp16(e4m3(v / s_v)), the e4m3 values held exactly in fp16, keys
// in order (P V runs on fp16 wgmma with P in fp16; s_v is applied to O at the end). Four rows per warp per
// step (a half-warp per row, as quant_q), grid-stride; every key of every (b, h) (no padding).
template <int D>
__global__ void __launch_bounds__(256) bsa8_quant_v16(const __grid_constant__ BsaFp8Params p) {
  constexpr int kRows = 8;
  const int lane = threadIdx.x & 31, half = lane >> 4, ch = lane & 15;
  const long long rows = static_cast<long long>(p.batch) * p.heads * p.s_kv;
  const long long warps = static_cast<long long>(gridDim.x) * 8;
  for (long long r0 = (static_cast<long long>(blockIdx.x) * 8 + (threadIdx.x >> 5)) * kRows; r0 < rows;
       r0 += warps * kRows) {
    uint4 u[kRows / 2];
    int hs[kRows / 2];
    bsa8_load_rows(p.v, p.v_sb, p.v_sh, p.v_ss, p.s_kv, p.heads, rows, r0, half, ch, u, hs);
#pragma unroll
    for (int j = 0; j < kRows / 2; ++j) {
      const long long r = r0 + 2 * j + half;
      if (r >= rows) continue;
      float x[8];
      bsa8_unpack8(u[j], x);
      const float* sv = p.sv + hs[j] * 128 + 8 * ch;
      unsigned codes[2] = {0u, 0u};
#pragma unroll
      for (int e = 0; e < 8; ++e) codes[e / 4] |= bsa8_code(__fdiv_rn(x[e], __ldg(sv + e))) << (8 * (e % 4));
      uint4 w;
      bsa8_unpack(codes[0], w.x, w.y);
      bsa8_unpack(codes[1], w.z, w.w);
      *reinterpret_cast<uint4*>(p.v16 + r * 128 + 8 * ch) = w;
    }
  }
}

// Grid (ceil(s_kv_pad / 64), B * H), 256 threads: one 64-key tile of one (b, h). The bf16 tile is staged
// in shared memory (rows padded to 130 elements: the 16 keys a half-warp reads sit in distinct banks),
// then every thread writes 32-bit words of v8t: word w of channel d holds storage bytes [4w, 4w + 4) of
// the tile, i.e. keys 16 (w / 4) + {2t, 2t + 1, 8 + 2t, 9 + 2t} with t = w % 4.
template <int D>
__global__ void __launch_bounds__(256) bsa8_quant_v(const __grid_constant__ BsaFp8Params p) {
  constexpr int kPitch = 130;
  __shared__ __nv_bfloat16 s_v[64 * kPitch];
  const int tile = blockIdx.x, bh = blockIdx.y;
  const int b = bh / p.heads, h = bh % p.heads;
  const int j0 = tile * 64;
  const auto* src = static_cast<const __nv_bfloat16*>(p.v) + b * p.v_sb + h * p.v_sh;
  for (int it = threadIdx.x; it < 64 * 32; it += 256) {  // 64 rows x 32 four-element pieces
    const int row = it >> 5, c = it & 31;
    uint2 u = make_uint2(0u, 0u);
    if (j0 + row < p.s_kv) u = __ldg(reinterpret_cast<const uint2*>(src + (j0 + row) * p.v_ss + 4 * c));
    unsigned* dst = reinterpret_cast<unsigned*>(s_v + row * kPitch + 4 * c);  // 4-byte aligned (pitch even)
    dst[0] = u.x;
    dst[1] = u.y;
  }
  __syncthreads();
  const int valid_pad = min(64, p.s_kv_pad - j0);  // a multiple of 16
  for (int it = threadIdx.x; it < 128 * 16; it += 256) {
    const int d = it >> 4, w = it & 15;
    if (w * 4 >= valid_pad) continue;
    const float s = p.sv[h * 128 + d];
    const int g16 = (w >> 2) * 16, t = w & 3;
    const int keys[4] = {g16 + 2 * t, g16 + 2 * t + 1, g16 + 8 + 2 * t, g16 + 9 + 2 * t};
    unsigned word = 0;
#pragma unroll
    for (int e = 0; e < 4; ++e) word |= bsa8_code(__fdiv_rn(to_float(s_v[keys[e] * kPitch + d]), s)) << (8 * e);
    *reinterpret_cast<unsigned*>(p.v8t + (static_cast<long long>(bh) * 128 + d) * p.s_kv_pad + j0 + 4 * w) = word;
  }
}

// ---------------------------------------------------------------------------------------------------
// Attention

struct Bsa8Cfg {
  static constexpr int D = 128, BM = 64, BN = 32, WARPS = 2, kThreads = 64;
  static constexpr int kMT = 2;               // m16 tiles per warp (32 rows)
  static constexpr int kNT = BN / 8;          // n8 key tiles per tile
  static constexpr int kDT = D / 8;           // n8 channel tiles of O
  static constexpr int kPitchQ = D + 8;       // fp16 elements (272 bytes: conflict-free ldmatrix)
  static constexpr int kPitchK = D + 16;      // bytes (144)
  static constexpr int kPitchV = BN + 16;     // bytes (48)
  static constexpr int kOffK = BM * kPitchQ * 2;              // 17408
  static constexpr int kOffV = kOffK + 2 * BN * kPitchK;      // + 9216
  static constexpr int kOffSk = kOffV + 2 * D * kPitchV;      // + 12288
  static constexpr int kSmemBytes = kOffSk + 2 * (BN / 16) * 4;
  static_assert(kOffK % 16 == 0 && kOffV % 16 == 0 && kOffSk % 16 == 0, "bsa8: 16-byte aligned tiles");
  static_assert(BN == 32, "bsa8: a tile is two 16-key scale groups and one ldmatrix_x4 of K rows");
  static_assert(kThreads == kBsa8Threads && kSmemBytes == kBsa8SmemBytes, "bsa8: the host's launch constants");
};

__device__ __forceinline__ void bsa8_cp_async_4(void* smem, const void* gmem, bool valid) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(smem_addr(smem)), "l"(gmem), "r"(valid ? 4 : 0));
}

template <bool HAS_NUMS, int BSZ_RANK>
__global__ void __launch_bounds__(Bsa8Cfg::kThreads) bsa8_attention(const __grid_constant__ BsaFp8Params p) {
  using Cfg = Bsa8Cfg;
  using Mma = MmaOp<__half>;
  constexpr int BM = Cfg::BM, BN = Cfg::BN, D = Cfg::D, kMT = Cfg::kMT, kNT = Cfg::kNT, kDT = Cfg::kDT;
  constexpr int kPQ = Cfg::kPitchQ, kPK = Cfg::kPitchK, kPV = Cfg::kPitchV, kThreads = Cfg::kThreads;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  __half* sQ = reinterpret_cast<__half*>(smem_raw);
  unsigned char* sKbuf = smem_raw + Cfg::kOffK;  // [2][BN][kPK]
  unsigned char* sVbuf = smem_raw + Cfg::kOffV;  // [2][D][kPV]
  float* sSk = reinterpret_cast<float*>(smem_raw + Cfg::kOffSk);  // [2][BN / 16]

  const int m = blockIdx.x, h = blockIdx.y, b = blockIdx.z;
  const long long bh = static_cast<long long>(b) * p.heads + h;
  const int i0 = m * BM;

  BsaTileStream<BM, BN, BSZ_RANK> ts;
  ts.open(p, b, h, m, 0, bsa_row_count<HAS_NUMS>(p, b, h, m));

  const unsigned char* k8 = p.k8 + bh * p.s_kv * D;
  const unsigned char* v8t = p.v8t + bh * D * p.s_kv_pad;
  const float* skb = p.sk + bh * p.n_groups;

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int warp_row0 = warp * 32;

  // Q: e4m3 codes -> fp16 in shared memory, each 16-channel chunk in the permuted order of the header
  // comment; rows past S_q are zero.
  {
    const unsigned char* qb = p.q8 + (bh * p.s_q + i0) * D;
    for (int it = threadIdx.x; it < BM * (D / 16); it += kThreads) {
      const int row = it / (D / 16), ch = it % (D / 16);
      uint4 w = make_uint4(0u, 0u, 0u, 0u);
      if (i0 + row < p.s_q) w = __ldg(reinterpret_cast<const uint4*>(qb + row * D + ch * 16));
      uint4 lo, hi;
      bsa8_unpack(w.x, lo.x, hi.x);
      bsa8_unpack(w.y, lo.y, hi.y);
      bsa8_unpack(w.z, lo.z, hi.z);
      bsa8_unpack(w.w, lo.w, hi.w);
      uint4* dst = reinterpret_cast<uint4*>(sQ + row * kPQ + ch * 16);
      dst[0] = lo;
      dst[1] = hi;
    }
  }

  // Per-row factor of the log2-domain logits: s_q * scale * log2(e) (rows past S_q: any finite value).
  float rq[kMT][2];
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
      const int i = i0 + warp_row0 + mt * 16 + lane / 4 + hf * 8;
      rq[mt][hf] = (i < p.s_q ? __ldg(p.sq + bh * p.s_q + i) : 1.f) * p.scale_log2;
    }

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

  int valid_buf0 = 0, valid_buf1 = 0;
  auto issue_kv = [&](int slot) {
    int n0, valid;
    ts.next(n0, valid);
    if (valid > 0) {
      // K rows [n0, n0 + valid) (others zero): BN rows x 8 chunks of 16 bytes.
      unsigned char* sK = sKbuf + slot * BN * kPK;
      const unsigned char* kt = k8 + static_cast<long long>(n0) * D;
#pragma unroll
      for (int it = 0; it < BN * (D / 16) / kThreads; ++it) {
        const int idx = it * kThreads + threadIdx.x;
        const int row = idx / (D / 16), ch = idx % (D / 16);
        const bool ok = row < valid;
        cp_async_16(sK + row * kPK + ch * 16, ok ? kt + row * D + ch * 16 : kt, ok);
      }
      // V^T: D rows x 2 chunks (16 keys each) of the tile's keys; a chunk past the valid keys is zero.
      unsigned char* sV = sVbuf + slot * D * kPV;
      const unsigned char* vt = v8t + n0;
#pragma unroll
      for (int it = 0; it < D * (BN / 16) / kThreads; ++it) {
        const int idx = it * kThreads + threadIdx.x;
        const int d = idx / (BN / 16), ch = idx % (BN / 16);
        const bool ok = ch * 16 < valid;
        cp_async_16(sV + d * kPV + ch * 16, ok ? vt + static_cast<long long>(d) * p.s_kv_pad + ch * 16 : vt, ok);
      }
      // The tile's two s_k (groups n0 / 16 and n0 / 16 + 1). A second group past S_kv (all its keys are
      // masked) takes the last group's scale: every s_k stays finite and > 0, so -inf * s_k = -inf.
      if (threadIdx.x < BN / 16) {
        const int gi = min(n0 / 16 + static_cast<int>(threadIdx.x), p.n_groups - 1);
        bsa8_cp_async_4(sSk + slot * (BN / 16) + threadIdx.x, skb + gi, true);
      }
    }
    if (slot == 0) valid_buf0 = valid;
    else valid_buf1 = valid;
    cp_async_commit();
  };
  issue_kv(0);
  issue_kv(1);
  cp_async_wait<1>();
  __syncthreads();  // Q staged (plain stores) and tile 0 landed

  for (int t = 0;; ++t) {
    const int slot = t & 1;
    const int valid = slot ? valid_buf1 : valid_buf0;
    if (valid == 0) break;  // uniform: the stream ended
    const unsigned char* sK = sKbuf + slot * BN * kPK;
    const unsigned char* sV = sVbuf + slot * D * kPV;
    if (t > 0) {
      cp_async_wait<1>();
      __syncthreads();  // tile t landed (tile t + 1 may still be in flight)
    }

    // S = Q K^T over 8 chunks of 16 channels.
    float s[kMT][kNT][4];
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
      for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) s[mt][nt][e] = 0.f;
#pragma unroll
    for (int c = 0; c < D / 16; ++c) {
      unsigned kr[4];  // n8 tile j: keys 8 j + g, channel bytes [16 c + 4 t, 16 c + 4 t + 4)
      ldmatrix_x4(kr, sK + lane * kPK + c * 16);
      unsigned a[kMT][4];
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt)
        ldmatrix_x4(a[mt], sQ + (warp_row0 + mt * 16 + (lane % 16)) * kPQ + c * 16 + (lane / 16) * 8);
#pragma unroll
      for (int nt = 0; nt < kNT; ++nt) {
        unsigned b0, b1;
        bsa8_unpack(kr[nt], b0, b1);
#pragma unroll
        for (int mt = 0; mt < kMT; ++mt) Mma::run(s[mt][nt], a[mt], b0, b1);
      }
    }

    // Keys past the tile's valid count (a short block or the end of S_kv) are masked.
    if (valid < BN) {
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
        for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
          for (int e = 0; e < 4; ++e)
            if (nt * 8 + 2 * (lane % 4) + (e & 1) >= valid) s[mt][nt][e] = -kInf();
    }

    // Online softmax (log2 domain) with lazy rescaling (common/online_softmax.cuh): every tile has a
    // visible key in every row. The running maximum m_i is kept in units of z = S * s_k; since s_k > 0 is
    // constant over each 16-key group (n8 tiles 0-1 and 2-3), a row's tile maximum is
    // max_g(s_k(g) * max_{j in g} S_j), and the exponent is S_j * (rq * s_k(g)) - m_i * rq: the scales
    // cost a few products per tile, not a multiply per logit.
    const float sk0 = sSk[slot * (BN / 16)], sk1 = sSk[slot * (BN / 16) + 1];
    float tile_max[kMT][2];
    bool moved = false;
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
      for (int hf = 0; hf < 2; ++hf) {
        float g0 = -kInf(), g1 = -kInf();
#pragma unroll
        for (int nt = 0; nt < kNT / 2; ++nt) {
          g0 = fmaxf(g0, fmaxf(s[mt][nt][2 * hf], s[mt][nt][2 * hf + 1]));
          g1 = fmaxf(g1, fmaxf(s[mt][nt + kNT / 2][2 * hf], s[mt][nt + kNT / 2][2 * hf + 1]));
        }
        tile_max[mt][hf] = softmax_quad_max(fmaxf(g0 * sk0, g1 * sk1));
        moved = moved || softmax_moves(tile_max[mt][hf], m_i[mt][hf], rq[mt][hf]);
      }
    online_softmax_step(
        s, tile_max, moved, m_i, l_i, o_acc, [&](int mt, int hf) { return rq[mt][hf]; },
        [&](int mt, int hf, int nt) { return rq[mt][hf] * (nt < kNT / 2 ? sk0 : sk1); });

    // O += P V8 over the tile's two 16-key chunks; V^T rows are channels, bytes are permuted keys.
#pragma unroll
    for (int kk = 0; kk < BN / 16; ++kk) {
      unsigned a[kMT][4];
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt) {
        a[mt][0] = Mma::pack(s[mt][2 * kk][0], s[mt][2 * kk][1]);
        a[mt][1] = Mma::pack(s[mt][2 * kk][2], s[mt][2 * kk][3]);
        a[mt][2] = Mma::pack(s[mt][2 * kk + 1][0], s[mt][2 * kk + 1][1]);
        a[mt][3] = Mma::pack(s[mt][2 * kk + 1][2], s[mt][2 * kk + 1][3]);
      }
#pragma unroll
      for (int dq = 0; dq < kDT / 4; ++dq) {
        unsigned vr[4];  // channel tile 4 dq + j: channel 8 (4 dq + j) + g, storage bytes [16 kk + 4 t, +4)
        ldmatrix_x4(vr, sV + (32 * dq + lane) * kPV + kk * 16);
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          unsigned b0, b1;
          bsa8_unpack(vr[j], b0, b1);
#pragma unroll
          for (int mt = 0; mt < kMT; ++mt) Mma::run(o_acc[mt][4 * dq + j], a[mt], b0, b1);
        }
      }
    }

    __syncthreads();  // every warp is done with buffer `slot`
    issue_kv(slot);   // tile t + 2
  }
  cp_async_wait<0>();  // no cp.async may be pending at exit

  // O = acc * s_v(d) / l (empty rows: l = 0, O = 0), bf16.
  const float* svh = p.sv + h * D + 2 * (lane % 4);
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
      float l = l_i[mt][hf];
      l += __shfl_xor_sync(0xffffffffu, l, 1);
      l += __shfl_xor_sync(0xffffffffu, l, 2);
      const int i = i0 + warp_row0 + mt * 16 + lane / 4 + hf * 8;
      const float inv = l > 0.f ? 1.f / l : 0.f;
      if (i >= p.s_q) continue;
      __nv_bfloat16* orow = static_cast<__nv_bfloat16*>(p.o) + b * p.o_sb + h * p.o_sh + static_cast<long long>(i) * p.o_ss +
                            2 * (lane % 4);
#pragma unroll
      for (int dt = 0; dt < kDT; ++dt) {
        const float2 sv = __ldg(reinterpret_cast<const float2*>(svh + dt * 8));
        *reinterpret_cast<unsigned*>(orow + dt * 8) =
            MmaOp<__nv_bfloat16>::pack(o_acc[mt][dt][2 * hf] * inv * sv.x, o_acc[mt][dt][2 * hf + 1] * inv * sv.y);
      }
    }
}

}  // namespace attnjit::kernels
