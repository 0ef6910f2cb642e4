// bsa_fp8_fwd (SPEC.md §2.6): configuration, validation, the CPU reference plan and the kernel plan
// (quantisation pre-pass + e4m3 attention: templates/bsa/bsa_fp8_fwd.cuh, and on sm_90a the FP8 wgmma
// attention of templates/bsa/bsa_fp8_fwd_hopper.cuh) with its plan workspace.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <memory>

#include "bsa/bsa_fp8_fwd_params.cuh"
#include "bsa/bsa_fp8_fwd_hopper_params.cuh"
#include "jit/cuda_driver.hpp"
#include "jit/spec_builder.hpp"
#include "ops/base/arch.hpp"
#include "ops/bsa/bsa_common.hpp"
#include "ops/bsa/bsa_fwd_kernel.hpp"
#include "ops/bsa/reference_fwd.hpp"
#include "ops/base/op_helpers.hpp"
#include "ops/base/op.hpp"
#include "ops/base/context.hpp"
#include "ops/base/workspace.hpp"
#include "ops/registry.hpp"
#include "ops/base/launch.hpp"
#include "ops/base/backend.hpp"

namespace attnjit::ops::bsa {

namespace {

using detail::ArgChecker;
using detail::Placement;

constexpr const char* kFp8Op = "bsa_fp8_fwd";

struct Fp8Config {
  BsaSharedConfig shared;  // layout BHSD and sparse_block_size 64 are fixed (not config keys)
  bool allow_empty = false;
  bool validate_inputs = false;
};

std::vector<std::string> fp8_config_keys() { return {"scale", "block_sparse_num", "allow_empty_block_nums", "validate_inputs"}; }

Fp8Config parse_fp8_config(const detail::ConfigReader& r) {
  Fp8Config c;
  c.shared = parse_bsa_shared_config(kFp8Op, r);  // only scale and block_sparse_num can be present
  c.allow_empty = r.get_bool("allow_empty_block_nums", false);
  c.validate_inputs = r.get_bool("validate_inputs", false);
  return c;
}

struct Fp8Call {
  BsaCall in;
  const TensorRef* o = nullptr;
};

Fp8Call validate_fp8(const Fp8Config& cfg, const TensorArgs& args, Placement placement) {
  ArgChecker c(kFp8Op, args, placement);
  c.only_known({"q", "k", "v", "q2k_block_index", "q2k_block_nums", "block_sizes", "o"});
  BsaInputRules rules;
  rules.dtypes = {DType::kBF16};
  rules.head_dims = {128};
  rules.value_dims = {128};
  rules.equal_heads = true;
  rules.contiguous = true;
  Fp8Call call;
  call.in = check_bsa_inputs(c, cfg.shared, rules);
  const TensorRef& o = c.required("o");
  call.o = &o;
  c.dtype_is("o", o, DType::kBF16);
  check_bsa_qshaped(c, "o", o, call.in, 128);
  const BsaCall& in = call.in;
  c.output("o", o, {{"q", in.q}, {"k", in.k}, {"v", in.v}, {"q2k_block_index", in.index}, {"q2k_block_nums", in.nums},
                    {"block_sizes", in.block_sizes}});
  c.device("o", o);
  return call;
}

// ---------------------------------------------------------------------------------------------------
// Kernels (templates/bsa/bsa_fp8_fwd.cuh)

constexpr const char* kTemplate = "bsa/bsa_fp8_fwd.cuh";
constexpr int kAttnThreads = kernels::kBsa8Threads;      // 2 warps of 32 query rows
constexpr int kAttnSmemBytes = kernels::kBsa8SmemBytes;  // fp16 Q, double-buffered e4m3 K and V^T, s_k

// The pre-pass kernels, in launch order; the last one writes V for the attention kernel of the plan's backend
// (v8t for the portable kernel, v16 for the hopper one).
const char* const kPrepass[] = {"stats", "finalize", "quant_q", "quant_k", "quant_v"};
const char* prepass_name(size_t i, bool hopper) { return hopper && i == 4 ? "quant_v16" : kPrepass[i]; }

jit::KernelSpec prepass_spec(const std::string& which, const std::string& arch) {
  jit::SpecBuilder b(kFp8Op, kTemplate, "attnjit::kernels::bsa8_" + which, arch);
  b.field("backend", "portable").name("{}").name("prepass");
  // The prepass templates take the head dim, 128 for every kernel of this op.
  b.field("kernel", which).arg(128).name("{}");
  return b.build();
}

// The attention kernel: portable (mma.sync on converted fragments) or hopper (FP8 wgmma, sm_90a).
jit::KernelSpec attention_spec(bool hopper, bool has_nums, int bsz_rank, const std::string& arch) {
  jit::SpecBuilder b(kFp8Op, hopper ? "bsa/bsa_fp8_fwd_hopper.cuh" : kTemplate,
                     hopper ? "attnjit::kernels::bsa8_attention_hopper" : "attnjit::kernels::bsa8_attention", arch);
  b.field("backend", hopper ? "hopper" : "portable").name("{}");
  // The name shows the kernels' fixed geometry (e4m3, D 128, 64-row blocks, key tiles of 64 / 32).
  b.field("kernel", "attention").name("{}").name(hopper ? "e4m3.d128.bs64.bn64" : "e4m3.d128.bs64.bn32");
  b.field("block_nums", has_nums).arg().name_if(has_nums, "nums");
  b.field("block_sizes_rank", bsz_rank).arg().name_if(bsz_rank != 0, "bsz{}");
  return b.build();
}

std::vector<jit::KernelSpec> specs_for(bool hopper, bool has_nums, int bsz_rank, const std::string& arch) {
  std::vector<jit::KernelSpec> specs;
  for (size_t i = 0; i < std::size(kPrepass); ++i) specs.push_back(prepass_spec(prepass_name(i, hopper), arch));
  specs.push_back(attention_spec(hopper, has_nums, bsz_rank, arch));
  return specs;
}

// Whether the attention runs on the hopper kernel: 'auto' takes it on sm_90a (it reads only the plan's own
// workspace, so no call can fall outside what it serves), 'hopper' takes it or fails naming why, 'portable'
// never does.
bool use_hopper(detail::Backend backend, const std::string& arch) {
  if (pick_hopper(kFp8Op, backend, [&] { return hopper_arch_gap(arch, "FP8 wgmma, TMA"); }, [] { return true; }))
    return true;
  check_bsa_backend(kFp8Op, detail::Backend::kPortable, arch);
  return false;
}

// A 3-d TMA map of bytes in the workspace (the copies do not care what the bytes encode): dims innermost first,
// the two outer strides in bytes.
void encode_u8_map(unsigned long long (&map)[16], CUdeviceptr base, std::array<cuuint64_t, 3> dims,
                   std::array<cuuint64_t, 2> strides, std::array<cuuint32_t, 3> box, CUtensorMapSwizzle swizzle,
                   const char* name) {
  static_assert(sizeof(CUtensorMap) == sizeof(map), "CUtensorMap is 128 bytes");
  const cuuint32_t elem[3] = {1, 1, 1};
  const auto& drv = jit::CudaDriver::get();
  drv.check(drv.cuTensorMapEncodeTiled(reinterpret_cast<CUtensorMap*>(map), CU_TENSOR_MAP_DATA_TYPE_UINT8, 3,
                                       reinterpret_cast<void*>(base), dims.data(), strides.data(), box.data(), elem,
                                       CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                                       CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
            fmt::format("{}: cuTensorMapEncodeTiled ({})", kFp8Op, name).c_str());
}

// The plan workspace: byte offsets of the quantised operands, their scales and the pre-pass partials
// (each region 256-byte aligned), for a call's shapes.
struct Fp8Workspace {
  size_t q8 = 0, k8 = 0, v = 0, sq = 0, sk = 0, sv = 0, mu = 0, ksum = 0, vmax = 0, total = 0;
  int64_t n_groups = 0, s_kv_pad = 0, n_chunks = 0;
};

// v: v8t [B, H, 128, s_kv_pad] e4m3 (portable) or v16 [B, H, S_kv, 128] fp16 (hopper).
Fp8Workspace workspace_for(const BsaCall& in, bool hopper) {
  Fp8Workspace w;
  const auto BH = static_cast<size_t>(in.B * in.H_q);
  w.n_groups = (in.S_kv + 15) / 16;
  w.s_kv_pad = w.n_groups * 16;
  w.n_chunks = (in.S_kv + kernels::kBsa8StatKeys - 1) / kernels::kBsa8StatKeys;
  detail::WorkspaceCursor cur;
  auto take = [&](size_t bytes) { return cur.take(bytes); };
  w.q8 = take(BH * static_cast<size_t>(in.S_q) * 128);
  w.k8 = take(BH * static_cast<size_t>(in.S_kv) * 128);
  w.v = take(hopper ? BH * static_cast<size_t>(in.S_kv) * 128 * 2 : BH * 128 * static_cast<size_t>(w.s_kv_pad));
  w.sq = take(BH * static_cast<size_t>(in.S_q) * 4);
  w.sk = take(BH * static_cast<size_t>(w.n_groups) * 4);
  w.sv = take(static_cast<size_t>(in.H_q) * 128 * 4);
  w.mu = take(BH * 128 * 4);
  w.ksum = take(BH * static_cast<size_t>(w.n_chunks) * 128 * 8);
  w.vmax = take(BH * static_cast<size_t>(w.n_chunks) * 128 * 4);
  w.total = cur.total();
  return w;
}

// Sizes this build's grids serve (grid y/z limits, 32-bit key and row indices inside the kernels).
void check_sizes(const BsaCall& in) {
  if (in.B * in.H_q > 65535)
    throw Unsupported(fmt::format("{}: B * H = {} must be at most 65535 for this kernel's grids", kFp8Op, in.B * in.H_q));
  if (in.S_q > (int64_t{1} << 30) || in.S_kv > (int64_t{1} << 30))
    throw Unsupported(fmt::format("{}: sequence lengths beyond 2^30 are not served (S_q {}, S_kv {})", kFp8Op, in.S_q,
                                  in.S_kv));
}

class BsaFp8FwdPlan final : public detail::PlanImpl {
 public:
  BsaFp8FwdPlan(OpContext& ctx, const Fp8Config& cfg, const Fp8Call& call, const std::string& arch, bool hopper)
      : cfg_(cfg),
        hopper_(hopper),
        has_nums_(call.in.nums != nullptr),
        bsz_rank_(call.in.block_sizes_rank),
        device_(call.in.device.index),
        sm_count_(ctx.sm_count(call.in.device.index)),
        ws_(kFp8Op, call.in.device.index) {
    for (size_t i = 0; i < std::size(kPrepass); ++i)
      prepass_[i] = ctx.kernels().loaded(prepass_spec(prepass_name(i, hopper_), arch), device_);
    attention_ = ctx.kernels().loaded(attention_spec(hopper_, has_nums_, bsz_rank_, arch), device_);
    require_dynamic_smem(kFp8Op, *attention_, attention_->compiled->spec,
                         hopper_ ? kernels::kBsa8HopperSmemBytes : kAttnSmemBytes);
  }

  void prepare(const TensorArgs& tensors) const override {
    const Fp8Call call = validate_fp8(cfg_, tensors, Placement::kDevice);
    check_sizes(call.in);
    ws_.reserve(workspace_for(call.in, hopper_).total);
  }
  std::size_t workspace_bytes() const override { return ws_.bytes(); }

  void execute(const TensorArgs& tensors, void* stream) const override {
    const Fp8Call call = validate_fp8(cfg_, tensors, Placement::kDevice);
    const BsaCall& in = call.in;
    if ((in.nums != nullptr) != has_nums_ || in.block_sizes_rank != bsz_rank_ || in.device.index != device_)
      throw InvalidArgument(fmt::format(
          "{}: args: tensors: expected this plan's static signature (counts {}, block_sizes rank {}, cuda:{}), got "
          "counts {}, block_sizes rank {}, cuda:{}; build a plan for the new signature",
          kFp8Op, has_nums_ ? "variable" : "fixed", bsz_rank_, device_, in.nums ? "variable" : "fixed",
          in.block_sizes_rank, in.device.index));
    check_sizes(in);
    const auto& drv = jit::CudaDriver::get();
    drv.bind_device(device_);
    if (cfg_.validate_inputs) BsaMetadataHost::load(kFp8Op, in, stream).check_contents(kFp8Op, cfg_.allow_empty);

    const Fp8Workspace w = workspace_for(in, hopper_);
    // The lease orders the workspace after its previous user stream until every kernel is enqueued.
    const detail::PlanWorkspace::Lease lease = ws_.acquire(w.total, stream);
    const CUdeviceptr base = lease.ptr();
    kernels::BsaFp8Params p{};
    set_bsa_common_params(p, in, *call.o);
    p.heads = static_cast<int>(in.H_q);
    p.n_groups = static_cast<int>(w.n_groups);
    p.s_kv_pad = static_cast<int>(w.s_kv_pad);
    p.n_chunks = static_cast<int>(w.n_chunks);
    p.q8 = reinterpret_cast<unsigned char*>(base + w.q8);
    p.k8 = reinterpret_cast<unsigned char*>(base + w.k8);
    if (hopper_)
      p.v16 = reinterpret_cast<unsigned short*>(base + w.v);
    else
      p.v8t = reinterpret_cast<unsigned char*>(base + w.v);
    p.sq = reinterpret_cast<float*>(base + w.sq);
    p.sk = reinterpret_cast<float*>(base + w.sk);
    p.sv = reinterpret_cast<float*>(base + w.sv);
    p.mu = reinterpret_cast<float*>(base + w.mu);
    p.ksum = reinterpret_cast<double*>(base + w.ksum);
    p.vmax = reinterpret_cast<float*>(base + w.vmax);

    const auto BH = static_cast<unsigned>(in.B * in.H_q);
    const auto cap = static_cast<int64_t>(sm_count_) * 32;  // grid-stride kernels: 32 CTAs of 8 warps per SM
    const auto q_ctas = static_cast<unsigned>(std::min<int64_t>((in.B * in.H_q * in.S_q + 63) / 64, cap));  // 64 rows
    const auto v_ctas = static_cast<unsigned>(std::min<int64_t>((in.B * in.H_q * in.S_kv + 63) / 64, cap));
    const auto k_ctas = static_cast<unsigned>(std::min<int64_t>((in.B * in.H_q * w.n_groups + 7) / 8, cap));
    launch(0, {static_cast<unsigned>(w.n_chunks), BH, 1}, 256, 0, p, stream);         // stats
    launch(1, {BH, 1, 1}, 128, 0, p, stream);                                          // finalize
    launch(2, {q_ctas, 1, 1}, 256, 0, p, stream);                                      // quant_q
    launch(3, {k_ctas, 1, 1}, 256, 0, p, stream);                                      // quant_k
    if (hopper_)
      launch(4, {v_ctas, 1, 1}, 256, 0, p, stream);  // quant_v16
    else
      launch(4, {static_cast<unsigned>((w.s_kv_pad + 63) / 64), BH, 1}, 256, 0, p, stream);  // quant_v
    const Grid grid{static_cast<unsigned>(in.N_q), static_cast<unsigned>(in.H_q), static_cast<unsigned>(in.B)};
    if (!hopper_) {
      launch(5, grid, kAttnThreads, kAttnSmemBytes, p, stream);
      return;
    }
    // Q8 and K8 as (128 bytes, row, b * H + h), V16 as (256 bytes, key, b * H + h) read as two 128-byte boxes;
    // 64-row boxes, rows and keys past the ends zero-filled.
    kernels::BsaFp8HopperParams hp{};
    hp.p = p;
    const auto S_q = static_cast<cuuint64_t>(in.S_q), S_kv = static_cast<cuuint64_t>(in.S_kv);
    encode_u8_map(hp.q_map, base + w.q8, {128, S_q, BH}, {128, 128 * S_q}, {128, 64, 1}, CU_TENSOR_MAP_SWIZZLE_128B, "q8");
    encode_u8_map(hp.k_map, base + w.k8, {128, S_kv, BH}, {128, 128 * S_kv}, {128, 64, 1}, CU_TENSOR_MAP_SWIZZLE_128B,
                  "k8");
    encode_u8_map(hp.v_map, base + w.v, {256, S_kv, BH}, {256, 256 * S_kv}, {128, 64, 1}, CU_TENSOR_MAP_SWIZZLE_128B,
                  "v16");
    launch_raw(5, grid, kernels::kBsa8HopperThreads, kernels::kBsa8HopperSmemBytes, &hp, stream);
  }

  std::string describe() const override {
    std::string s = fmt::format("{} kernel plan:", kFp8Op);
    for (const auto& k : prepass_) s += fmt::format(" {}", k->compiled->spec.describe());
    return s + " " + attention_->compiled->spec.describe();
  }

 private:
  struct Grid {
    unsigned x, y, z;
  };
  // which: 0..4 the pre-pass kernels in kPrepass order, 5 the attention kernel.
  void launch(int which, Grid grid, unsigned threads, unsigned smem, const kernels::BsaFp8Params& p,
              void* stream) const {
    kernels::BsaFp8Params params = p;
    launch_raw(which, grid, threads, smem, &params, stream);
  }
  void launch_raw(int which, Grid grid, unsigned threads, unsigned smem, void* params, void* stream) const {
    const jit::LoadedKernel& k = which < 5 ? *prepass_[static_cast<size_t>(which)] : *attention_;
    Launch lc;
    lc.grid_x = grid.x;
    lc.grid_y = grid.y;
    lc.grid_z = grid.z;
    lc.threads = threads;
    lc.smem_bytes = smem;
    lc.stream = stream;
    void* args[] = {params};
    launch_kernel(k.function, lc, args,
              fmt::format("{}: {} launch", kFp8Op, which < 5 ? prepass_name(static_cast<size_t>(which), hopper_) : "attention")
                  );
  }

  Fp8Config cfg_;
  bool hopper_;
  bool has_nums_;
  int bsz_rank_;
  int device_;
  int sm_count_;
  std::array<std::shared_ptr<const jit::LoadedKernel>, 5> prepass_;
  std::shared_ptr<const jit::LoadedKernel> attention_;
  mutable detail::PlanWorkspace ws_;
};

class BsaFp8FwdOp final : public detail::OpInstance {
 public:
  BsaFp8FwdOp(OpContext& ctx, const nlohmann::json& config)
      : BsaFp8FwdOp(ctx, detail::ConfigReader(kFp8Op, config, fp8_config_keys())) {}

  std::vector<jit::KernelSpec> kernels_for(const TensorArgs& tensors, const std::string& arch) const override {
    const Fp8Call call = validate_fp8(cfg_, tensors, Placement::kDevice);
    return specs_for(use_hopper(backend_, arch), call.in.nums != nullptr, call.in.block_sizes_rank, arch);
  }

 protected:
  Plan plan_for(const TensorArgs& tensors) override {
    const Fp8Call call = validate_fp8(cfg_, tensors, placement_for(impl_));
    if (impl_ == detail::Impl::kReference)
      return cached("reference", tensors, [&] {
        return reference_plan(kFp8Op, [cfg = cfg_](const TensorArgs& t, void* stream) {
          const Fp8Call call = validate_fp8(cfg, t, Placement::kHost);
          const BsaMetadataHost md = BsaMetadataHost::load(kFp8Op, call.in, stream);
          if (cfg.validate_inputs) md.check_contents(kFp8Op, cfg.allow_empty);
          reference::bsa_fp8_forward(call.in, md, *call.o);
        });
      });
    std::string sig = fmt::format("{}.{}.{}", call.in.nums != nullptr, call.in.block_sizes_rank, call.in.device.index);
    return cached(std::move(sig), tensors, [&] {
      const std::string arch = ctx_.arch_for_device(call.in.device.index);
      return std::make_shared<BsaFp8FwdPlan>(ctx_, cfg_, call, arch, use_hopper(backend_, arch));
    });
  }

 private:
  BsaFp8FwdOp(OpContext& ctx, const detail::ConfigReader& r)
      : OpInstance(ctx, kFp8Op, r.impl(), r.backend()), cfg_(parse_fp8_config(r)) {}
  Fp8Config cfg_;
};

}  // namespace

}  // namespace attnjit::ops::bsa

namespace attnjit::detail {

OpDefinition bsa_fp8_fwd_definition() {
  return ops::op_definition<ops::bsa::BsaFp8FwdOp>(ops::bsa::kFp8Op, [](const std::string& arch) {
    using namespace ops::bsa;
    // The pre-pass, and the attention kernel for fixed and variable counts without block_sizes and for
    // fixed counts with rank-1 block_sizes: portable everywhere, and hopper on sm_90a ('auto' there).
    std::vector<jit::KernelSpec> specs = specs_for(false, false, 0, arch);
    for (const bool hopper : {false, true}) {
      if (hopper && !ops::has_hopper_kernels(arch)) continue;
      if (hopper) {
        specs.push_back(prepass_spec(prepass_name(4, true), arch));  // quant_v16
        specs.push_back(attention_spec(true, false, 0, arch));
      }
      specs.push_back(attention_spec(hopper, true, 0, arch));
      specs.push_back(attention_spec(hopper, false, 1, arch));
    }
    return specs;
  });
}

// Rank: the op's place in `attnjit info` and the warm-up (ops/registry.hpp).
const OpRegistrar kBsaFp8FwdRegistrar{120, &bsa_fp8_fwd_definition};

}  // namespace attnjit::detail
