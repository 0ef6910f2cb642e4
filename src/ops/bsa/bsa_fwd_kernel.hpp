// The bsa_fwd kernels (templates/bsa/bsa_fwd.cuh, bsa_combine.cuh) as the planner sees them: the static
// choice that selects an instantiation, its KernelSpec, loading with its shared memory, parameters and
// launches.
#pragma once
#include <memory>
#include <string>

#include "attnjit/tensor.hpp"
#include "bsa/bsa_fwd_params.cuh"
#include "bsa/bsa_fwd_hopper_params.cuh"
#include "jit/kernel_cache.hpp"
#include "jit/kernel_spec.hpp"
#include "ops/bsa/bsa_common.hpp"
#include "ops/base/op.hpp"

namespace attnjit::ops::bsa {

struct BsaFwdKernelChoice {
  DType dtype = DType::kBF16;
  int D = 0, Dv = 0, BM = 0, BN = 0, warps = 0;  // BM = sparse_block_size
  bool has_nums = false;
  int bsz_rank = 0;
  bool split = false;
  std::string arch;
  int smem_bytes() const { return kernels::bsa_fwd_smem_bytes(D, Dv, BM, BN); }
  int threads() const { return kernels::bsa_fwd_threads(warps); }
};

// Tiles: one CTA per query block (BM = bs) with 32 rows per warp (bs 128: 4 warps, bs 64: 2 warps);
// BN = 64 keys for D = D_v = 64, else 32.
BsaFwdKernelChoice choose_bsa_fwd_kernel(DType dt, int D, int Dv, int bs, bool has_nums, int bsz_rank, bool split,
                                         const std::string& arch);
jit::KernelSpec bsa_fwd_kernel_spec(const BsaFwdKernelChoice& k);
jit::KernelSpec bsa_combine_kernel_spec(DType dt, int Dv, const std::string& arch);

// The portable backend serves sm_80+; 'hopper' is not built (Unsupported, naming the op).
void check_bsa_backend(const char* op, detail::Backend backend, const std::string& arch);

// ---- hopper backend (templates/bsa/bsa_fwd_hopper.cuh): sm_90a, block size 64 or 128, D = D_v in {64, 128} ----
struct BsaHopperChoice {
  DType dtype = DType::kBF16;
  int D = 0, bs = 128;
  bool has_nums = false;
  int bsz_rank = 0;
  std::string arch;
  int threads() const { return kernels::bsa_fwd_hopper_threads(bs); }
  int smem_bytes() const { return kernels::bsa_fwd_hopper_smem_bytes(D, bs); }
};
// Why the hopper kernel cannot serve a call with these static properties ("" when it can).
std::string bsa_hopper_gap(const BsaCall& in, bool split_requested, const std::string& arch);
// Why q, k or v cannot be read by it ("" when they can): 16-byte aligned bases and positive strides.
std::string bsa_hopper_tma_gap(const BsaCall& in);
BsaHopperChoice choose_bsa_hopper(const BsaCall& in, const std::string& arch);
jit::KernelSpec bsa_fwd_hopper_spec(const BsaHopperChoice& k);
std::shared_ptr<const jit::LoadedKernel> load_bsa_fwd_hopper_kernel(OpContext& ctx, const BsaHopperChoice& k,
                                                                    int device);
// Encodes the K and V maps and launches one CTA per (query block, query head, batch).
void launch_bsa_fwd_hopper(const char* op, const jit::LoadedKernel& kernel, const BsaHopperChoice& k,
                           const kernels::BsaFwdParams& p, const BsaCall& in, void* stream);

std::shared_ptr<const jit::LoadedKernel> load_bsa_fwd_kernel(OpContext& ctx, const BsaFwdKernelChoice& k,
                                                             int device);

// The fields the bsa_fwd and bsa_fp8_fwd parameter structs share (kernels::BsaFwdParams,
// kernels::BsaFp8Params): q/k/v/o pointers and strides, the block index / counts / sizes tensors, the
// sizes, scale_log2.
template <class Params>
void set_bsa_common_params(Params& p, const BsaCall& in, const TensorRef& o) {
  p.q = in.q->data;
  p.k = in.k->data;
  p.v = in.v->data;
  p.o = o.data;
  p.q_sb = in.q_st.b, p.q_sh = in.q_st.h, p.q_ss = in.q_st.s;
  p.k_sb = in.k_st.b, p.k_sh = in.k_st.h, p.k_ss = in.k_st.s;
  p.v_sb = in.v_st.b, p.v_sh = in.v_st.h, p.v_ss = in.v_st.s;
  const BhsStrides os = in.strides_of(o);
  p.o_sb = os.b, p.o_sh = os.h, p.o_ss = os.s;
  p.index = static_cast<const int*>(in.index->data);
  p.idx_sb = in.index->strides[0], p.idx_sh = in.index->strides[1], p.idx_sm = in.index->strides[2];
  p.idx_su = in.index->strides[3];
  if (in.nums) {
    p.nums = static_cast<const int*>(in.nums->data);
    p.nums_sb = in.nums->strides[0], p.nums_sh = in.nums->strides[1], p.nums_sm = in.nums->strides[2];
  }
  if (in.block_sizes) {
    const TensorRef& t = *in.block_sizes;
    p.bsz = static_cast<const int*>(t.data);
    p.bsz_sk = t.strides[t.ndim - 1];
    if (t.ndim >= 2) p.bsz_sb = t.strides[0];
    if (t.ndim == 3) p.bsz_sh = t.strides[1];
  }
  p.batch = static_cast<int>(in.B);
  p.s_q = static_cast<int>(in.S_q);
  p.s_kv = static_cast<int>(in.S_kv);
  p.n_q = static_cast<int>(in.N_q);
  p.n_kv = static_cast<int>(in.N_kv);
  p.k_max = static_cast<int>(in.K_max);
  p.fixed_count = static_cast<int>(in.fixed_count);
  constexpr double kLog2e = 1.4426950408889634;
  p.scale_log2 = static_cast<float>(static_cast<double>(in.scale) * kLog2e);
}

// Parameters of a validated call: q/k/v/o/lse strides, metadata pointers and strides, scale, counts.
kernels::BsaFwdParams bsa_fwd_params(const BsaCall& in, const TensorRef& o, const TensorRef* lse);

// Grid x = N_q * splits (splits of one query block adjacent), y = H_q, z = B.
void launch_bsa_fwd(const char* op, const jit::LoadedKernel& kernel, const BsaFwdKernelChoice& k,
                    const kernels::BsaFwdParams& p, const BsaCall& in, int splits, void* stream);
// One warp per (b, h, i) row, 4 rows per CTA.
void launch_bsa_combine(const char* op, const jit::LoadedKernel& kernel, const kernels::BsaFwdParams& p, size_t rows,
                        void* stream);

}  // namespace attnjit::ops::bsa
