// bsa_fp8_fwd (SPEC.md §2.6): configuration, validation, the CPU reference plan and the kernel plan
// (quantisation pre-pass + e4m3 attention, templates/bsa/bsa_fp8_fwd.cuh) with its plan workspace.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <memory>

#include "bsa/bsa_fp8_fwd_params.cuh"
#include "jit/cuda_driver.hpp"
#include "ops/arch.hpp"
#include "ops/bsa/bsa_common.hpp"
#include "ops/bsa/bsa_fwd_kernel.hpp"
#include "ops/bsa/reference_fwd.hpp"
#include "ops/common/op_helpers.hpp"
#include "runtime/op_registry.hpp"
#include "runtime/runtime_impl.hpp"
#include "runtime/workspace.hpp"

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

// The pre-pass kernels, in launch order.
const char* const kPrepass[] = {"stats", "finalize", "quant_q", "quant_k", "quant_v"};

jit::KernelSpec prepass_spec(const std::string& which, const std::string& arch) {
  jit::KernelSpec s;
  s.op = kFp8Op;
  s.template_file = kTemplate;
  s.entry = fmt::format("attnjit::kernels::bsa8_{}<128>", which);
  s.fields = {{"backend", "portable"}, {"kernel", which}};
  s.arch = arch;
  s.name = fmt::format("{}.portable.prepass.{}", kFp8Op, which);
  return s;
}

jit::KernelSpec attention_spec(bool has_nums, int bsz_rank, const std::string& arch) {
  jit::KernelSpec s;
  s.op = kFp8Op;
  s.template_file = kTemplate;
  s.entry = fmt::format("attnjit::kernels::bsa8_attention<{}, {}>", has_nums, bsz_rank);
  s.fields = {{"backend", "portable"},
              {"kernel", "attention"},
              {"block_nums", has_nums ? "1" : "0"},
              {"block_sizes_rank", std::to_string(bsz_rank)}};
  s.arch = arch;
  std::string name = fmt::format("{}.portable.attention.e4m3.d128.bs64.bn32", kFp8Op);
  if (has_nums) name += ".nums";
  if (bsz_rank) name += fmt::format(".bsz{}", bsz_rank);
  s.name = name;
  return s;
}

std::vector<jit::KernelSpec> specs_for(bool has_nums, int bsz_rank, const std::string& arch) {
  std::vector<jit::KernelSpec> specs;
  for (const char* k : kPrepass) specs.push_back(prepass_spec(k, arch));
  specs.push_back(attention_spec(has_nums, bsz_rank, arch));
  return specs;
}

// The plan workspace: byte offsets of the quantised operands, their scales and the pre-pass partials
// (each region 256-byte aligned), for a call's shapes.
struct Fp8Workspace {
  size_t q8 = 0, k8 = 0, v8t = 0, sq = 0, sk = 0, sv = 0, mu = 0, ksum = 0, vmax = 0, total = 0;
  int64_t n_groups = 0, s_kv_pad = 0, n_chunks = 0;
};

Fp8Workspace workspace_for(const BsaCall& in) {
  Fp8Workspace w;
  const auto BH = static_cast<size_t>(in.B * in.H_q);
  w.n_groups = (in.S_kv + 15) / 16;
  w.s_kv_pad = w.n_groups * 16;
  w.n_chunks = (in.S_kv + kernels::kBsa8StatKeys - 1) / kernels::kBsa8StatKeys;
  size_t at = 0;
  auto take = [&](size_t bytes) {
    const size_t off = at;
    at += (bytes + 255) / 256 * 256;
    return off;
  };
  w.q8 = take(BH * static_cast<size_t>(in.S_q) * 128);
  w.k8 = take(BH * static_cast<size_t>(in.S_kv) * 128);
  w.v8t = take(BH * 128 * static_cast<size_t>(w.s_kv_pad));
  w.sq = take(BH * static_cast<size_t>(in.S_q) * 4);
  w.sk = take(BH * static_cast<size_t>(w.n_groups) * 4);
  w.sv = take(static_cast<size_t>(in.H_q) * 128 * 4);
  w.mu = take(BH * 128 * 4);
  w.ksum = take(BH * static_cast<size_t>(w.n_chunks) * 128 * 8);
  w.vmax = take(BH * static_cast<size_t>(w.n_chunks) * 128 * 4);
  w.total = at;
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

class KernelPlan final : public detail::PlanImpl {
 public:
  KernelPlan(detail::RuntimeImpl& rt, const Fp8Config& cfg, const Fp8Call& call, const std::string& arch)
      : cfg_(cfg),
        has_nums_(call.in.nums != nullptr),
        bsz_rank_(call.in.block_sizes_rank),
        device_(call.in.device.index),
        sm_count_(rt.sm_count(call.in.device.index)),
        ws_(kFp8Op, call.in.device.index) {
    for (size_t i = 0; i < std::size(kPrepass); ++i)
      prepass_[i] = rt.kernels().loaded(prepass_spec(kPrepass[i], arch), device_);
    attention_ = rt.kernels().loaded(attention_spec(has_nums_, bsz_rank_, arch), device_);
    require_dynamic_smem(kFp8Op, *attention_, attention_->compiled->spec, kAttnSmemBytes);
  }

  void prepare(const TensorArgs& tensors) const override {
    const Fp8Call call = validate_fp8(cfg_, tensors, Placement::kDevice);
    check_sizes(call.in);
    ws_.reserve(workspace_for(call.in).total);
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

    const Fp8Workspace w = workspace_for(in);
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
    p.v8t = reinterpret_cast<unsigned char*>(base + w.v8t);
    p.sq = reinterpret_cast<float*>(base + w.sq);
    p.sk = reinterpret_cast<float*>(base + w.sk);
    p.sv = reinterpret_cast<float*>(base + w.sv);
    p.mu = reinterpret_cast<float*>(base + w.mu);
    p.ksum = reinterpret_cast<double*>(base + w.ksum);
    p.vmax = reinterpret_cast<float*>(base + w.vmax);

    const auto BH = static_cast<unsigned>(in.B * in.H_q);
    const auto cap = static_cast<int64_t>(sm_count_) * 32;  // grid-stride kernels: 32 CTAs of 8 warps per SM
    const auto q_ctas = static_cast<unsigned>(std::min<int64_t>((in.B * in.H_q * in.S_q + 7) / 8, cap));
    const auto k_ctas = static_cast<unsigned>(std::min<int64_t>((in.B * in.H_q * w.n_groups + 7) / 8, cap));
    launch(0, {static_cast<unsigned>(w.n_chunks), BH, 1}, 256, 0, p, stream);         // stats
    launch(1, {BH, 1, 1}, 128, 0, p, stream);                                          // finalize
    launch(2, {q_ctas, 1, 1}, 256, 0, p, stream);                                      // quant_q
    launch(3, {k_ctas, 1, 1}, 256, 0, p, stream);                                      // quant_k
    launch(4, {static_cast<unsigned>((w.s_kv_pad + 63) / 64), BH, 1}, 256, 0, p, stream);  // quant_v
    launch(5, {static_cast<unsigned>(in.N_q), static_cast<unsigned>(in.H_q), static_cast<unsigned>(in.B)},
           kAttnThreads, kAttnSmemBytes, p, stream);
  }

  std::string describe() const override {
    std::string s = fmt::format("{} kernel plan:", kFp8Op);
    for (const auto& k : prepass_) s += " " + k->compiled->spec.describe();
    return s + " " + attention_->compiled->spec.describe();
  }

 private:
  struct Grid {
    unsigned x, y, z;
  };
  // which: 0..4 the pre-pass kernels in kPrepass order, 5 the attention kernel.
  void launch(int which, Grid grid, unsigned threads, unsigned smem, const kernels::BsaFp8Params& p,
              void* stream) const {
    const jit::LoadedKernel& k = which < 5 ? *prepass_[static_cast<size_t>(which)] : *attention_;
    CUlaunchConfig lc{};
    lc.gridDimX = grid.x;
    lc.gridDimY = grid.y;
    lc.gridDimZ = grid.z;
    lc.blockDimX = threads;
    lc.blockDimY = lc.blockDimZ = 1;
    lc.sharedMemBytes = smem;
    lc.hStream = static_cast<CUstream>(stream);
    kernels::BsaFp8Params params = p;
    void* args[] = {&params};
    const auto& drv = jit::CudaDriver::get();
    drv.check(drv.cuLaunchKernelEx(&lc, k.function, args, nullptr),
              fmt::format("{}: {} launch", kFp8Op, which < 5 ? kPrepass[which] : "attention").c_str());
  }

  Fp8Config cfg_;
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
  BsaFp8FwdOp(detail::RuntimeImpl& rt, const nlohmann::json& config)
      : BsaFp8FwdOp(rt, detail::ConfigReader(kFp8Op, config, fp8_config_keys())) {}

  std::vector<jit::KernelSpec> kernels_for(const TensorArgs& tensors, const std::string& arch) const override {
    const Fp8Call call = validate_fp8(cfg_, tensors, Placement::kDevice);
    check_bsa_backend(kFp8Op, backend_, arch);
    return specs_for(call.in.nums != nullptr, call.in.block_sizes_rank, arch);
  }

 protected:
  std::string signature(const TensorArgs& tensors) const override {
    const Fp8Call call = validate_fp8(cfg_, tensors, placement_for(impl_));
    if (impl_ == detail::Impl::kReference) return "reference";
    return fmt::format("{}.{}.{}", call.in.nums != nullptr, call.in.block_sizes_rank, call.in.device.index);
  }

  std::shared_ptr<const detail::PlanImpl> build_plan(const TensorArgs& tensors) override {
    if (impl_ == detail::Impl::kReference)
      return reference_plan(kFp8Op, [cfg = cfg_](const TensorArgs& t, void* stream) {
        const Fp8Call call = validate_fp8(cfg, t, Placement::kHost);
        const BsaMetadataHost md = BsaMetadataHost::load(kFp8Op, call.in, stream);
        if (cfg.validate_inputs) md.check_contents(kFp8Op, cfg.allow_empty);
        reference::bsa_fp8_forward(call.in, md, *call.o);
      });
    const Fp8Call call = validate_fp8(cfg_, tensors, Placement::kDevice);
    const std::string arch = rt_.arch_for_device(call.in.device.index);
    check_bsa_backend(kFp8Op, backend_, arch);
    return std::make_shared<KernelPlan>(rt_, cfg_, call, arch);
  }

 private:
  BsaFp8FwdOp(detail::RuntimeImpl& rt, const detail::ConfigReader& r)
      : OpInstance(rt, kFp8Op, r.impl(), r.backend()), cfg_(parse_fp8_config(r)) {}
  Fp8Config cfg_;
};

}  // namespace

}  // namespace attnjit::ops::bsa

namespace attnjit::detail {

OpDefinition bsa_fp8_fwd_definition() {
  return ops::op_definition<ops::bsa::BsaFp8FwdOp>(ops::bsa::kFp8Op, [](const std::string& arch) {
    using namespace ops::bsa;
    // The pre-pass, and the attention kernel for fixed and variable counts without block_sizes and for
    // fixed counts with rank-1 block_sizes.
    std::vector<jit::KernelSpec> specs = specs_for(false, 0, arch);
    specs.push_back(attention_spec(true, 0, arch));
    specs.push_back(attention_spec(false, 1, arch));
    return specs;
  });
}

}  // namespace attnjit::detail
