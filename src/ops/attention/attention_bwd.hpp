// Host side of the shared attention backward (templates/common/attention_bwd.cuh and
// templates/hopper/attention_bwd.cuh), used by bsa_bwd and gqa_bwd: the fp32 dq accumulator's TMA map,
// the tensor parameters, and the launch of one backward kernel.
#pragma once
#include <cstdint>

#include "attnjit/tensor.hpp"
#include "common/attention_bwd_params.cuh"
#include "jit/cuda_driver.hpp"
#include "jit/kernel_cache.hpp"

namespace attnjit::ops {

// The hopper main kernel's map of the fp32 dq accumulator: 2-d (D columns, `rows` rows of D floats),
// boxes of 32 columns (128 bytes) by 64 rows with the 128-byte swizzle its staging tiles use.
void encode_dq_acc_map(const char* op, unsigned long long (&map)[16], const float* dq_acc, int64_t D, int64_t rows);

// Launches one backward kernel whose arguments are `args` (pointers to each argument).
void launch_bwd_kernel(const char* op, const jit::LoadedKernel& k, unsigned gx, unsigned gy, unsigned gz,
                       unsigned threads, int smem, CUstream stream, void** args);

// The tensors of a backward call, and the (batch, head, sequence) strides of each: fills the pointers
// and strides of `p` (lse: [B, H, S] by its own strides). `bhs(t)` returns t's {b, h, s} strides.
struct BwdTensors {
  const TensorRef *q, *k, *v, *o, *dout, *dq, *dk, *dv, *lse;
};
template <class Bhs>
void fill_bwd_tensors(kernels::AttnBwdParams& p, const BwdTensors& t, Bhs bhs) {
  auto set3 = [&](const TensorRef& x, long long& sb, long long& sh, long long& ss) {
    const auto st = bhs(x);
    sb = st.b;
    sh = st.h;
    ss = st.s;
  };
  p.q = t.q->data;
  p.k = t.k->data;
  p.v = t.v->data;
  p.o = t.o->data;
  p.dout = t.dout->data;
  p.dq = t.dq->data;
  p.dk = t.dk->data;
  p.dv = t.dv->data;
  p.lse = static_cast<const float*>(t.lse->data);
  set3(*t.q, p.q_sb, p.q_sh, p.q_ss);
  set3(*t.k, p.k_sb, p.k_sh, p.k_ss);
  set3(*t.v, p.v_sb, p.v_sh, p.v_ss);
  set3(*t.o, p.o_sb, p.o_sh, p.o_ss);
  set3(*t.dout, p.do_sb, p.do_sh, p.do_ss);
  set3(*t.dq, p.dq_sb, p.dq_sh, p.dq_ss);
  set3(*t.dk, p.dk_sb, p.dk_sh, p.dk_ss);
  set3(*t.dv, p.dv_sb, p.dv_sh, p.dv_ss);
  p.lse_sb = t.lse->strides[0];
  p.lse_sh = t.lse->strides[1];
  p.lse_ss = t.lse->strides[2];
}

// Blocks of `per_block` threads that cover `work` items (at least one).
inline unsigned bwd_blocks(long long work, int per_block) {
  return static_cast<unsigned>(work <= 0 ? 1 : (work + per_block - 1) / per_block);
}

}  // namespace attnjit::ops
