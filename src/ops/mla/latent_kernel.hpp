// The latent-decode kernels (templates/mla/latent_decode.cuh, portable; latent_decode_hopper.cuh,
// hopper) as the planners of mla_decode and dsa_decode see them: the choice that selects an
// instantiation, its KernelSpec, the split-KV sizing and workspace, and one kernel plan both ops use.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "attnjit/tensor.hpp"
#include "jit/kernel_cache.hpp"
#include "jit/kernel_spec.hpp"
#include "mla/latent_decode_params.cuh"
#include "ops/base/context.hpp"
#include "ops/base/op.hpp"
#include "ops/base/workspace.hpp"

namespace attnjit::ops {

constexpr int kLatentAutoSplits = 0;  // kv_splits "auto"

// Parses the optional `kv_splits` key (an integer in [1, 128] or "auto"; default "auto").
int parse_latent_kv_splits(const char* op, const detail::ConfigReader& r);

// What the planner needs of a call, from either op: the static part selects the kernel, the extents
// size the grid, the splits and the workspace.
struct LatentShape {
  DType dtype = DType::kBF16;
  int D = 0, tail = 0, mode = 0;  // mode: kernels::kLatentDense / kLatentPaged / kLatentIndexed
  int64_t B = 0, tokens = 1, H = 0, H_kv = 0;
  int64_t rows = 0;      // query rows per (b, r[, s]) block: mla S_q * g, dsa g
  int64_t grid_y = 0;    // mla H_kv, dsa S * H_kv
  int64_t max_keys = 0;  // key slots a block may scan: mla N_kv (paged W * PS), dsa K
  int device = 0;
  int64_t m_tiles() const { return (rows + kernels::kLatentBM - 1) / kernels::kLatentBM; }
};

struct LatentKernelChoice {
  DType dtype = DType::kBF16;
  int D = 0, tail = 0, mode = 0, stages = 3;
  bool split = false;
  bool hopper = false;
  int bn = kernels::kLatentHopperBN;  // hopper: key slots per tile (64: the seesaw kernel)
  std::string arch;
  bool seesaw() const { return hopper && bn == kernels::kLatentSeesawBN; }
  int smem_bytes() const;
  int threads() const;
};

// The portable choice for `s` on `arch` (Unsupported when the device cannot hold even two key stages).
LatentKernelChoice choose_latent_kernel(const char* op, const LatentShape& s, bool split, const std::string& arch);
// Why the hopper kernel cannot serve `s` on `arch` ("" when it can): sm_90a, D 128, 256 or 512.
std::string latent_hopper_gap(const LatentShape& s, const std::string& arch);
// The hopper choice (Unsupported naming the gap when there is one). `bn`: the key tile tune.latent_tile asks
// for (64 is the seesaw kernel, 48 and 32 the one-tile kernel; 0: 64 where it fits, else kLatentHopperBN).
LatentKernelChoice choose_latent_hopper(const char* op, const LatentShape& s, bool split, const std::string& arch,
                                        int bn);
jit::KernelSpec latent_kernel_spec(const char* op, const LatentKernelChoice& k);
// The warm-up entries of one (dtype, D, tail, mode): the single-pass and split kernels, and the combine
// when `combine` (it depends on dtype and D only).
std::vector<jit::KernelSpec> latent_warmup_specs(const char* op, DType dt, int D, int tail, int mode, bool combine,
                                                 const std::string& arch);

// The kernel plan of both ops: `fill` turns the call's tensors into the kernel parameters (validating
// them as a device call, and, when `executing` and the op's config asks, checking their contents on
// `stream`) and returns its shape.
using LatentFill = std::function<LatentShape(const TensorArgs& tensors, void* stream, bool executing,
                                             kernels::LatentDecodeParams& p)>;
std::shared_ptr<const detail::PlanImpl> make_latent_plan(OpContext& ctx, const char* op, const LatentShape& shape,
                                                         int kv_splits, detail::Backend backend, LatentFill fill);
// The kernels make_latent_plan would load for `shape` (hopper_bn: hopper_bn of the op's context).
std::vector<jit::KernelSpec> latent_plan_specs(const char* op, const LatentShape& shape, int kv_splits,
                                               detail::Backend backend, const std::string& arch, int hopper_bn);
// The hopper kernel's key tile the context's tuning map asks for (tune.latent_tile; 0: the planner's).
int hopper_bn(OpContext& ctx);

}  // namespace attnjit::ops
