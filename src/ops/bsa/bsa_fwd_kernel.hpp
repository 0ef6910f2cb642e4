// The bsa_fwd kernels (templates/bsa/bsa_fwd.cuh, bsa_combine.cuh) as the planner sees them: the static
// choice that selects an instantiation, its KernelSpec, loading with its shared memory, parameters and
// launches.
#pragma once
#include <memory>
#include <string>

#include "attnjit/tensor.hpp"
#include "bsa/bsa_fwd_params.cuh"
#include "jit/kernel_cache.hpp"
#include "jit/kernel_spec.hpp"
#include "ops/bsa/bsa_common.hpp"
#include "runtime/op_registry.hpp"

namespace attnjit::detail {
class RuntimeImpl;
}

namespace attnjit::ops::bsa {

struct BsaFwdKernelChoice {
  DType dtype = DType::kBF16;
  int D = 0, Dv = 0, BM = 0, BN = 0, warps = 0;  // BM = sparse_block_size
  bool has_nums = false;
  int bsz_rank = 0;
  bool split = false;
  std::string arch;
  // = BsaFwdConfig::kSmemBytes: Q, double-buffered K and V.
  int smem_bytes() const { return (BM * (D + 8) + 2 * BN * (D + 8) + 2 * BN * (Dv + 8)) * 2; }
};

// Tiles: one CTA per query block (BM = bs) with 32 rows per warp (bs 128: 4 warps, bs 64: 2 warps);
// BN = 64 keys for D = D_v = 64, else 32.
BsaFwdKernelChoice choose_bsa_fwd_kernel(DType dt, int D, int Dv, int bs, bool has_nums, int bsz_rank, bool split,
                                         const std::string& arch);
jit::KernelSpec bsa_fwd_kernel_spec(const BsaFwdKernelChoice& k);
jit::KernelSpec bsa_combine_kernel_spec(DType dt, int Dv, const std::string& arch);

// The portable backend serves sm_80+; 'hopper' is not built (Unsupported, naming the op).
void check_bsa_backend(const char* op, detail::Backend backend, const std::string& arch);

std::shared_ptr<const jit::LoadedKernel> load_bsa_fwd_kernel(detail::RuntimeImpl& rt, const BsaFwdKernelChoice& k,
                                                             int device);

// Parameters of a validated call: q/k/v/o/lse strides, metadata pointers and strides, scale, counts.
kernels::BsaFwdParams bsa_fwd_params(const BsaCall& in, const TensorRef& o, const TensorRef* lse);

// Grid x = N_q * splits (splits of one query block adjacent), y = H_q, z = B.
void launch_bsa_fwd(const char* op, const jit::LoadedKernel& kernel, const BsaFwdKernelChoice& k,
                    const kernels::BsaFwdParams& p, const BsaCall& in, int splits, void* stream);
// One warp per (b, h, i) row, 4 rows per CTA.
void launch_bsa_combine(const char* op, const jit::LoadedKernel& kernel, const kernels::BsaFwdParams& p, size_t rows,
                        void* stream);

}  // namespace attnjit::ops::bsa
