// lightning_indexer inside the op: what lightning_indexer.cpp (the op) and the kernel plans of
// lightning_indexer_portable.cpp and lightning_indexer_hopper.cpp share. Not for other ops.
#pragma once
#include <fmt/format.h>

#include <cmath>
#include <cstdint>
#include <memory>
#include <string>

#include "attnjit/error.hpp"
#include "indexer/lightning_indexer_hopper_params.cuh"
#include "indexer/lightning_indexer_params.cuh"
#include "jit/kernel_cache.hpp"
#include "ops/base/op.hpp"
#include "ops/base/validation.hpp"

namespace attnjit::ops::lightning {

constexpr const char* kOp = "lightning_indexer";

struct IndexerConfig {
  int64_t topk = 0;
  bool causal = false;
  int64_t compress_ratio = 1;
  bool deterministic = false;
  bool validate_inputs = false;
};

// A validated call.
struct IndexerCall {
  const TensorRef *q = nullptr, *k = nullptr, *weights = nullptr, *indices = nullptr;
  const TensorRef *cu_seqlens = nullptr, *cu_seqlens_k = nullptr;
  DType dtype = DType::kBF16;
  int64_t B = 0, T = 0, H = 0, D = 0, S = 0, N = 0;
  Device device{};
};

IndexerCall validate(const IndexerConfig& cfg, const TensorArgs& args, detail::Placement placement);
// validate_inputs: the caller contract of §2.1 (packed offsets) on host copies.
void check_contents(const IndexerConfig& cfg, const IndexerCall& call, void* stream);

// The static choice that selects the kernels of a plan.
struct KernelChoice {
  DType dtype = DType::kBF16;
  int D = 0, HP = 0;
  int64_t topk = 0;
  bool causal = false, packed = false;
  // The two-kernel slab path (templates/indexer/lightning_indexer_big.cuh): taken exactly when the fused
  // kernel's candidate buffers cannot hold topk for (D, HP) (geo.R == 0), or when ATTNJIT_TUNE_LI_FORCE_SLAB
  // asks for it (tests only).
  bool slab = false;
  kernels::LightningIndexerGeometry geo{};
  // The hopper kernel (templates/indexer/lightning_indexer_hopper.cuh): wgmma scores, TMA K ring.
  bool hopper = false;
  kernels::LightningIndexerHopperGeometry hgeo{};
  std::string arch;
};

// Why k cannot be the hopper kernel's TMA source ("" when it can): a 16-byte aligned base, and token and
// batch strides positive multiples of 16 bytes (no broadcast batch). An empty k (S = 0) is never loaded.
std::string hopper_k_gap(const IndexerCall& call);

// The fields both kernel paths take from a validated device call: tensors, strides, sizes, the weight
// scale 1 / sqrt(H * D). Refuses a batch beyond the 65535 their grids take.
template <typename Params>
void fill_call_params(Params& p, const IndexerConfig& cfg, const IndexerCall& call) {
  if (call.B > 65535)
    throw Unsupported(fmt::format("{}: unsupported: q: batch {} exceeds the 65535 this kernel's grid takes", kOp, call.B));
  const bool packed = call.cu_seqlens != nullptr;
  p.q = call.q->data;
  p.k = call.k->data;
  p.weights = call.weights->data;
  p.indices = static_cast<int*>(call.indices->data);
  p.cu_seqlens = packed ? static_cast<const int*>(call.cu_seqlens->data) : nullptr;
  p.cu_seqlens_k = packed ? static_cast<const int*>(call.cu_seqlens_k->data) : nullptr;
  p.q_sb = call.q->strides[0];
  p.q_st = call.q->strides[1];
  p.q_sh = call.q->strides[2];
  p.k_sb = call.k->strides[0];
  p.k_ss = call.k->strides[1];
  p.w_sb = call.weights->strides[0];
  p.w_st = call.weights->strides[1];
  p.w_sh = call.weights->strides[2];
  p.T = static_cast<int>(call.T);
  p.S = static_cast<int>(call.S);
  p.H = static_cast<int>(call.H);
  p.N = static_cast<int>(call.N);
  p.compress_ratio = static_cast<int>(cfg.compress_ratio);
  p.inv_scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(call.H * call.D)));
}

// A fused plan's kernel was compiled for the call's dtype, D, head tile, packing and device: any other
// call needs a new plan.
void check_signature(const IndexerCall& call, const KernelChoice& choice, const jit::LoadedKernel& kernel);

// The portable backend's plans: the fused kernel, or the slab path's score and selection kernels (choice.slab).
std::shared_ptr<const detail::PlanImpl> make_portable_plan(const IndexerConfig& cfg, KernelChoice choice,
                                                           std::shared_ptr<const jit::LoadedKernel> kernel);
std::shared_ptr<const detail::PlanImpl> make_slab_plan(const IndexerConfig& cfg, KernelChoice choice,
                                                       std::shared_ptr<const jit::LoadedKernel> scores,
                                                       std::shared_ptr<const jit::LoadedKernel> select, int device);
// The hopper backend's plan: the fused kernel with k read through TMA.
std::shared_ptr<const detail::PlanImpl> make_hopper_plan(const IndexerConfig& cfg, KernelChoice choice,
                                                         std::shared_ptr<const jit::LoadedKernel> kernel);

}  // namespace attnjit::ops::lightning
