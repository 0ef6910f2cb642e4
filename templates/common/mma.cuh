// Warp-level tensor-core building blocks for sm_80+: cp.async (with zero-fill), ldmatrix, mma.sync
// m16n8k16 with fp32 accumulation, fast exp2/tanh, and packing fp32 pairs to 16-bit.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace attnjit::kernels {

__device__ __forceinline__ unsigned smem_addr(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// 16-byte async copy global -> shared; bytes beyond `src_bytes` (0 or 16) are zero-filled.
__device__ __forceinline__ void cp_async_16(void* smem, const void* gmem, bool valid) {
  const int src_bytes = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(smem)), "l"(gmem), "r"(src_bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

// ldmatrix x4 (and its transposing form) at a shared-window address, or at a generic pointer into shared memory.
__device__ __forceinline__ void ldmatrix_x4_at(unsigned (&r)[4], unsigned addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ void ldmatrix_x4_trans_at(unsigned (&r)[4], unsigned addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ void ldmatrix_x4(unsigned (&r)[4], const void* smem) { ldmatrix_x4_at(r, smem_addr(smem)); }
__device__ __forceinline__ void ldmatrix_x4_trans(unsigned (&r)[4], const void* smem) {
  ldmatrix_x4_trans_at(r, smem_addr(smem));
}

template <typename T>
struct MmaOp;

// D (16x8 fp32) += A (16x16, row) * B (16x8, col), fp16 operands.
template <>
struct MmaOp<__half> {
  static __device__ __forceinline__ void run(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
  static __device__ __forceinline__ unsigned pack(float x, float y) {
    __half2 h = __floats2half2_rn(x, y);
    return *reinterpret_cast<unsigned*>(&h);
  }
};

// bf16 operands.
template <>
struct MmaOp<__nv_bfloat16> {
  static __device__ __forceinline__ void run(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
  static __device__ __forceinline__ unsigned pack(float x, float y) {
    __nv_bfloat162 h = __floats2bfloat162_rn(x, y);
    return *reinterpret_cast<unsigned*>(&h);
  }
};

// +infinity without <cmath> (NVRTC has no host headers).
__device__ __forceinline__ float kInf() { return __int_as_float(0x7f800000); }

__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

__device__ __forceinline__ float fast_tanh(float x) {
  float y;
  asm("tanh.approx.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// Folds an attention sink (a logit, natural-log domain) into a row's softmax state at the end: m is the
// row's maximum in the log2 domain (-inf: no key), l its sum relative to m, out_scale the factor O is
// multiplied by before 1 / l. A +inf sink takes all the weight (O = 0, LSE = +inf via empty_lse);
// -inf is no sink.
__device__ __forceinline__ void fold_sink(float sink, float& m, float& l, float& out_scale, float& empty_lse) {
  constexpr float kLog2e = 1.44269504088896340736f;
  if (sink == kInf()) {
    l = 0.f;
    empty_lse = kInf();
  } else if (sink != -kInf()) {
    const float s2 = sink * kLog2e;
    const float M = fmaxf(m, s2);
    const float f = fast_exp2(m - M);
    l = l * f + fast_exp2(s2 - M);
    out_scale *= f;
    m = M;
  }
}

}  // namespace attnjit::kernels
