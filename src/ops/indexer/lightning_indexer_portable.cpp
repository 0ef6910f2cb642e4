// lightning_indexer on the portable backend (mma.sync): the fused kernel's plan
// (templates/indexer/lightning_indexer.cuh), the slab path's plan for a topk beyond its buffers
// (templates/indexer/lightning_indexer_big.cuh), and their launches.
#include <fmt/format.h>

#include <algorithm>
#include <memory>

#include "indexer/lightning_indexer_big_params.cuh"
#include "jit/cuda_driver.hpp"
#include "ops/base/launch.hpp"
#include "ops/base/workspace.hpp"
#include "ops/indexer/lightning_indexer_plans.hpp"

namespace attnjit::ops::lightning {

namespace {

using detail::Placement;

class LightningIndexerPortablePlan final : public detail::PlanImpl {
 public:
  LightningIndexerPortablePlan(const IndexerConfig& cfg, KernelChoice choice, std::shared_ptr<const jit::LoadedKernel> kernel)
      : cfg_(cfg), choice_(std::move(choice)), kernel_(std::move(kernel)) {}

  void execute(const TensorArgs& tensors, void* stream) const override {
    const IndexerCall call = validate(cfg_, tensors, Placement::kDevice);
    check_signature(call, choice_, *kernel_);
    const auto& drv = jit::CudaDriver::get();
    drv.bind_device(call.device.index);
    if (cfg_.validate_inputs) check_contents(cfg_, call, stream);
    if (call.B == 0) return;
    kernels::LightningIndexerParams p{};
    fill_call_params(p, cfg_, call);
    Launch lc;
    lc.grid_x = static_cast<unsigned>((call.T + choice_.geo.R - 1) / choice_.geo.R);
    lc.grid_y = static_cast<unsigned>(call.B);
    lc.grid_z = 1;
    lc.threads = kernels::kLightningIndexerThreads;
    lc.smem_bytes = static_cast<unsigned>(choice_.geo.smem_bytes);
    lc.stream = stream;
    void* args[] = {&p};
    launch_kernel(kernel_->function, lc, args, "lightning_indexer: cuLaunchKernelEx");
  }

  std::string describe() const override {
    return fmt::format("{} kernel plan: {} (R {}, BN {}, CAP {}, {} B shared memory)", kOp,
                       kernel_->compiled->spec.describe(), choice_.geo.R, choice_.geo.BN, choice_.geo.CAP,
                       choice_.geo.smem_bytes);
  }

 private:
  IndexerConfig cfg_;
  KernelChoice choice_;
  std::shared_ptr<const jit::LoadedKernel> kernel_;
};

// The slab path's row chunks (SPEC.md §1.3: from shapes and topk only, never from tensor contents). A row
// has at most max_cand candidates: S without offsets; with offsets min(S, T), since a document's span is
// its query length // compress_ratio (caller contract) and lies inside the pool. When max_cand <= topk no
// row needs scores: only the selection kernel runs (it writes 0..|C|-1, -1...) and there is no slab.
// Otherwise chunks of chunk_rows flattened rows b * T + t, each row's scores at a pitch of max_cand
// rounded up to 4 floats, in a slab of at most kLiBigSlabBytes (256 MiB; max_cand <= 2^20 keeps at least
// 64 rows per chunk).
struct SlabLayout {
  int64_t max_cand = 0, pitch = 0, rows = 0, chunk_rows = 0;
  bool scores = false;
  size_t bytes = 0;
};

SlabLayout slab_layout(const IndexerConfig& cfg, const IndexerCall& call) {
  SlabLayout l;
  l.max_cand = call.cu_seqlens ? std::min(call.S, call.T) : call.S;
  l.scores = l.max_cand > cfg.topk;
  l.pitch = (l.max_cand + 3) / 4 * 4;
  l.rows = call.B * call.T;
  constexpr int64_t kMaxChunkRows = int64_t{1} << 30;  // grid.x of the selection launch
  l.chunk_rows = l.scores ? std::max<int64_t>(1, kernels::kLiBigSlabBytes / (l.pitch * 4)) : l.rows;
  l.chunk_rows = std::min({l.chunk_rows, l.rows, kMaxChunkRows});
  l.bytes = l.scores ? static_cast<size_t>(l.chunk_rows) * static_cast<size_t>(l.pitch) * sizeof(float) : 0;
  return l;
}

// The two-kernel path for a topk the fused kernel cannot hold: per chunk of rows, the score kernel fills
// the plan's workspace slab and the selection kernel reads it (templates/indexer/lightning_indexer_big.cuh).
class LightningIndexerSlabPlan final : public detail::PlanImpl {
 public:
  LightningIndexerSlabPlan(const IndexerConfig& cfg, KernelChoice choice, std::shared_ptr<const jit::LoadedKernel> scores,
           std::shared_ptr<const jit::LoadedKernel> select, int device)
      : cfg_(cfg), choice_(std::move(choice)), scores_(std::move(scores)), select_(std::move(select)),
        ws_(kOp, device) {}

  void prepare(const TensorArgs& tensors) const override {
    const IndexerCall call = validate(cfg_, tensors, Placement::kDevice);
    const SlabLayout l = slab_layout(cfg_, call);
    if (call.B > 0 && l.bytes) ws_.reserve(l.bytes);
  }
  std::size_t workspace_bytes() const override { return ws_.bytes(); }

  void execute(const TensorArgs& tensors, void* stream) const override {
    const IndexerCall call = validate(cfg_, tensors, Placement::kDevice);
    const bool packed = call.cu_seqlens != nullptr;
    if (call.dtype != choice_.dtype || call.D != choice_.D ||
        kernels::lightning_indexer_head_tile(static_cast<int>(call.H)) != choice_.HP || packed != choice_.packed ||
        call.device.index != scores_->device)
      throw InvalidArgument(fmt::format("{}: args: tensors: expected this plan's static signature ({}, head tile {}), "
                                        "got dtype {}, D {}, H {}, packed {}, {}; build a plan for the new signature",
                                        kOp, scores_->compiled->spec.describe(), choice_.HP, dtype_name(call.dtype),
                                        call.D, call.H, packed, device_name(call.device)));
    const auto& drv = jit::CudaDriver::get();
    drv.bind_device(call.device.index);
    if (cfg_.validate_inputs) check_contents(cfg_, call, stream);
    if (call.B == 0) return;
    const SlabLayout l = slab_layout(cfg_, call);
    const kernels::LiBigScoreGeometry geo = kernels::li_big_score_geometry(choice_.D, static_cast<int>(call.H));
    kernels::LightningIndexerBigParams p{};
    fill_call_params(p, cfg_, call);
    p.slab_pitch = l.pitch;
    p.topk = static_cast<int>(cfg_.topk);
    p.max_cand = static_cast<int>(l.max_cand);
    p.tokens = geo.tokens;
    // NOTE: the workspace lease (and its cross-stream ordering) is taken only when there are scores to stage.
    if (!l.scores) {
      launch_chunks(p, l, geo, call.T, stream);
      return;
    }
    auto lease = ws_.acquire(l.bytes, stream);
    p.slab = reinterpret_cast<float*>(lease.ptr());
    launch_chunks(p, l, geo, call.T, stream);
  }

  std::string describe() const override {
    return fmt::format("{} slab plan ({}): {} + {}, row chunks in a workspace of at most {} MiB ({} B reserved)", kOp,
                       choice_.geo.R >= 1 ? "forced by ATTNJIT_TUNE_LI_FORCE_SLAB"
                                          : fmt::format("topk {} beyond the fused kernel's buffers", choice_.topk),
                       scores_->compiled->spec.describe(), select_->compiled->spec.describe(),
                       kernels::kLiBigSlabBytes >> 20, ws_.bytes());
  }

 private:
  // Per chunk of rows: the score kernel (when any row can need scores), then the selection kernel.
  void launch_chunks(kernels::LightningIndexerBigParams& p, const SlabLayout& l, const kernels::LiBigScoreGeometry& geo,
                     int64_t T, void* stream) const {
    Launch sc;  // score kernel: (token groups, candidate tiles, batch elements of the chunk)
    sc.grid_x = static_cast<unsigned>((std::min(l.chunk_rows, T) + geo.tokens - 1) / geo.tokens);
    sc.grid_y = static_cast<unsigned>((l.max_cand + kernels::kLiBigScoreTileN - 1) / kernels::kLiBigScoreTileN);
    sc.threads = kernels::kLiBigScoreThreads;
    sc.smem_bytes = static_cast<unsigned>(geo.smem_bytes);
    sc.stream = stream;
    Launch se;  // selection kernel: one CTA per row of the chunk
    se.threads = kernels::kLiBigSelectThreads;
    se.stream = stream;
    void* args[] = {&p};
    for (int64_t r0 = 0; r0 < l.rows; r0 += l.chunk_rows) {
      p.row_begin = r0;
      p.row_end = std::min(l.rows, r0 + l.chunk_rows);
      if (l.scores) {
        sc.grid_z = static_cast<unsigned>((p.row_end - 1) / T - p.row_begin / T + 1);
        launch_kernel(scores_->function, sc, args,
                  "lightning_indexer: cuLaunchKernelEx (slab scores)");
      }
      se.grid_x = static_cast<unsigned>(p.row_end - p.row_begin);
      launch_kernel(select_->function, se, args,
                "lightning_indexer: cuLaunchKernelEx (slab select)");
    }
  }

  IndexerConfig cfg_;
  KernelChoice choice_;
  std::shared_ptr<const jit::LoadedKernel> scores_, select_;
  mutable detail::PlanWorkspace ws_;
};

}  // namespace

std::shared_ptr<const detail::PlanImpl> make_portable_plan(const IndexerConfig& cfg, KernelChoice choice,
                                                           std::shared_ptr<const jit::LoadedKernel> kernel) {
  return std::make_shared<LightningIndexerPortablePlan>(cfg, std::move(choice), std::move(kernel));
}

std::shared_ptr<const detail::PlanImpl> make_slab_plan(const IndexerConfig& cfg, KernelChoice choice,
                                                       std::shared_ptr<const jit::LoadedKernel> scores,
                                                       std::shared_ptr<const jit::LoadedKernel> select, int device) {
  return std::make_shared<LightningIndexerSlabPlan>(cfg, std::move(choice), std::move(scores), std::move(select), device);
}

}  // namespace attnjit::ops::lightning
