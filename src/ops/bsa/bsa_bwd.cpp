// bsa_bwd (SPEC.md §2.5): configuration, validation, the kernel plan (workspace layout, the launch
// sequence of templates/bsa/bsa_bwd.cuh) and the reference plan.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <tuple>

#include "bsa/bsa_bwd_params.cuh"
#include "hopper/attention_bwd_params.cuh"
#include "jit/cuda_driver.hpp"
#include "jit/spec_builder.hpp"
#include "ops/base/arch.hpp"
#include "ops/bsa/bsa_common.hpp"
#include "ops/attention/attention_bwd.hpp"
#include "ops/attention/attention_kernel.hpp"  // tma_gap, encode_tma_rows
#include "ops/bsa/reference_bwd.hpp"
#include "ops/base/op_helpers.hpp"
#include "ops/base/op.hpp"
#include "ops/base/context.hpp"
#include "ops/base/validation.hpp"
#include "ops/base/workspace.hpp"
#include "ops/registry.hpp"
#include "ops/base/launch.hpp"
#include "ops/base/backend.hpp"

namespace attnjit::ops {

namespace {

using bsa::BsaCall;
using detail::ArgChecker;
using detail::Placement;

constexpr const char* kOp = "bsa_bwd";

struct BwdConfig {
  bsa::BsaSharedConfig shared;
  std::optional<int64_t> bucket_size_blocks;  // performance only: accepted, no effect on this backend
  bool validate_inputs = false;
};

BwdConfig parse_config(const detail::ConfigReader& r) {
  BwdConfig c;
  c.shared = bsa::parse_bsa_shared_config(kOp, r);
  if (r.has("bucket_size_blocks")) {
    const double n = r.get_number("bucket_size_blocks", 0);
    if (n != std::floor(n) || n < 1 || n > 2147483647.0)
      throw InvalidArgument(fmt::format("{}: param: bucket_size_blocks: expected an integer >= 1, got {}", kOp, n));
    c.bucket_size_blocks = static_cast<int64_t>(n);
  }
  c.validate_inputs = r.get_bool("validate_inputs", false);
  return c;
}

std::vector<std::string> config_keys() {
  std::vector<std::string> keys = bsa::bsa_shared_config_keys();
  keys.push_back("bucket_size_blocks");
  keys.push_back("validate_inputs");
  return keys;
}

// A validated call: the shared part plus the backward's own tensors.
struct BwdCall {
  BsaCall base;
  const TensorRef *o = nullptr, *dout = nullptr, *lse = nullptr, *dq = nullptr, *dk = nullptr, *dv = nullptr;
};

BwdCall validate(const BwdConfig& cfg, const TensorArgs& args, Placement placement) {
  ArgChecker c(kOp, args, placement);
  c.only_known({"do", "q", "k", "v", "o", "lse", "q2k_block_index", "q2k_block_nums", "block_sizes", "dq", "dk", "dv"});
  bsa::BsaInputRules rules;
  rules.head_dims = {64, 128};
  rules.value_dims = {64, 128};
  rules.equal_dims = true;
  BwdCall call;
  call.base = bsa::check_bsa_inputs(c, cfg.shared, rules);
  const BsaCall& b = call.base;
  const TensorRef& o = c.required("o");
  const TensorRef& dout = c.required("do");
  const TensorRef& lse = c.required("lse");
  const TensorRef& dq = c.required("dq");
  const TensorRef& dk = c.required("dk");
  const TensorRef& dv = c.required("dv");
  call.o = &o;
  call.dout = &dout;
  call.lse = &lse;
  call.dq = &dq;
  call.dk = &dk;
  call.dv = &dv;
  // dtypes
  c.dtype_is("o", o, b.dtype, "(q's dtype)");
  c.dtype_is("do", dout, b.dtype, "(q's dtype)");
  c.dtype_is("lse", lse, DType::kF32);
  for (auto [name, t] : {std::pair{"dq", &dq}, std::pair{"dk", &dk}, std::pair{"dv", &dv}})
    c.dtype_is(name, *t, b.dtype, "(q's dtype)");
  // shapes
  bsa::check_bsa_qshaped(c, "o", o, b, b.D);
  bsa::check_bsa_qshaped(c, "do", dout, b, b.D);
  bsa::check_bsa_lse_shape(c, "lse", lse, b);
  bsa::check_bsa_qshaped(c, "dq", dq, b, b.D);
  for (auto [name, t, like] : {std::tuple{"dk", &dk, b.k}, std::tuple{"dv", &dv, b.v}}) {
    c.rank(name, *t, 4, b.layout == bsa::BsaLayout::kBHSD ? "[B, H_kv, S_kv, D]" : "[B, S_kv, H_kv, D]");
    for (int d = 0; d < 4; ++d) c.extent(name, *t, d, like->shape[d], d == 3 ? "D" : "the input's shape");
  }
  // layouts and devices
  c.feature("o", o, true);
  c.feature("do", dout, true);
  c.metadata("lse", lse);
  const std::initializer_list<std::pair<std::string_view, const TensorRef*>> inputs = {
      {"q", b.q},       {"k", b.k},     {"v", b.v},     {"o", &o},
      {"do", &dout},    {"lse", &lse},  {"q2k_block_index", b.index}, {"q2k_block_nums", b.nums},
      {"block_sizes", b.block_sizes}};
  c.output("dq", dq, inputs);
  c.output("dk", dk, inputs);
  c.output("dv", dv, inputs);
  c.output("dq", dq, {{"dk", &dk}, {"dv", &dv}});
  c.output("dk", dk, {{"dv", &dv}});
  for (auto [name, t] : {std::pair{"o", &o}, std::pair{"do", &dout}, std::pair{"lse", &lse}, std::pair{"dq", &dq},
                         std::pair{"dk", &dk}, std::pair{"dv", &dv}})
    c.device(name, *t);
  return call;
}

std::string_view device_type(DType dt) { return dt == DType::kF16 ? "__half" : "__nv_bfloat16"; }

// The kernels of one static configuration (dtype, D, bs).
struct BwdKernels {
  jit::KernelSpec prep, route, scan, main, dq;
};

// hopper: the main kernel is the hopper backend's (templates/bsa/bsa_bwd_hopper.cuh); the prep, route,
// scan and dq kernels are the portable ones either way.
BwdKernels kernel_specs(DType dt, int64_t D, int bs, const std::string& arch, bool hopper = false) {
  // The dtype and head dim, where a kernel is typed by them.
  auto typed = [&](jit::SpecBuilder& b) {
    b.field("dtype", dtype_name(dt)).arg(device_type(dt)).name("{}");
    b.field("head_dim", D).arg().name("d{}");
  };
  // A portable helper kernel: its name puts the kernel before the backend.
  auto helper = [&](const std::string& what, bool is_typed) {
    jit::SpecBuilder b(kOp, "bsa/bsa_bwd.cuh", "attnjit::kernels::bsa_bwd_" + what, arch);
    b.field("backend", "portable").name("{}");
    b.field("kernel", what).name("{}").before("backend");
    if (is_typed) typed(b);
    return b.build();
  };
  BwdKernels k;
  k.prep = helper("prep", true);
  k.route = helper("route", false);
  k.scan = helper("scan", false);
  k.dq = helper("dq", true);
  jit::SpecBuilder b(kOp, hopper ? "bsa/bsa_bwd_hopper.cuh" : "bsa/bsa_bwd.cuh",
                     hopper ? "attnjit::kernels::bsa_bwd_hopper" : "attnjit::kernels::bsa_bwd_main", arch);
  b.field("backend", hopper ? "hopper" : "portable").name("{}");
  b.field("kernel", "main");
  typed(b);
  b.field("sparse_block_size", bs).arg().name("bs{}");
  // The portable main kernel's query rows per item (the hopper kernel's are fixed).
  if (!hopper) b.field("block_m", kernels::bsa_bwd_block_m(bs)).arg().name("bm{}");
  k.main = b.build();
  return k;
}

void check_portable(const std::string& arch) {
  require_portable_arch(kOp, arch);
}

// Why q, do, k and v cannot be the hopper kernel's TMA sources ("" when they can): 16-byte aligned bases,
// head / row / batch strides multiples of 16 bytes.
std::string hopper_tma_gap(const BwdCall& call) {
  const BsaCall& c = call.base;
  for (auto [name, t, heads, rows] : {std::tuple{"q", c.q, c.H_q, c.S_q}, std::tuple{"do", call.dout, c.H_q, c.S_q},
                                      std::tuple{"k", c.k, c.H_kv, c.S_kv}, std::tuple{"v", c.v, c.H_kv, c.S_kv}}) {
    const bsa::BhsStrides st = c.strides_of(*t);
    const std::string gap = tma_gap(name, t->data, {{heads, st.h}, {rows, st.s}, {c.B, st.b}});
    if (!gap.empty()) return gap;
  }
  return "";
}

// Why the hopper main kernel cannot serve a call ("" when it can): sm_90a and TMA-able tensors.
std::string hopper_gap(const BwdCall& call, const std::string& arch) {
  if (std::string gap = hopper_arch_gap(arch); !gap.empty()) return gap;
  return hopper_tma_gap(call);
}

// backend 'hopper' takes the hopper main kernel or fails naming why; 'auto' takes it wherever it serves
// the call, the portable kernel elsewhere.
bool use_hopper(detail::Backend backend, const BwdCall& call, const std::string& arch) {
  return pick_hopper(kOp, backend, [&] { return hopper_gap(call, arch); }, [] { return true; });
}

// Workspace sections (bytes from the base, each 256-aligned) for a call's shapes.
struct WorkspaceLayout {
  size_t lse2 = 0, delta = 0, dq_acc = 0, counts = 0, offsets = 0, cursor = 0, list = 0, total = 0;
  int64_t s_pad = 0, segments = 0;
};

WorkspaceLayout workspace_layout(const BsaCall& c) {
  WorkspaceLayout w;
  w.s_pad = c.N_q * c.bs;
  w.segments = c.B * c.H_kv * c.N_kv;
  const size_t rows = static_cast<size_t>(c.B * c.H_q * w.s_pad);
  detail::WorkspaceCursor cur;
  auto take = [&](size_t bytes) { return cur.take(bytes); };
  w.lse2 = take(rows * 4);
  w.delta = take(rows * 4);
  w.dq_acc = take(rows * static_cast<size_t>(c.D) * 4);
  w.counts = take(static_cast<size_t>(w.segments) * 4);
  w.offsets = take(static_cast<size_t>(w.segments + 1) * 4);
  w.cursor = take(static_cast<size_t>(w.segments) * 4);
  w.list = take(static_cast<size_t>(c.B * c.H_q * c.N_q * c.K_max) * 4);
  w.total = cur.total();
  return w;
}

class BsaBwdPlan final : public detail::PlanImpl {
 public:
  struct Loaded {
    std::shared_ptr<const jit::LoadedKernel> prep, route, scan, main, dq;
  };
  BsaBwdPlan(const BwdConfig& cfg, DType dtype, int64_t D, Device device, Loaded k, bool hopper)
      : cfg_(cfg), dtype_(dtype), D_(D), device_(device), k_(std::move(k)), hopper_(hopper),
        workspace_(std::make_unique<detail::PlanWorkspace>(kOp, device.index)) {}

  void prepare(const TensorArgs& tensors) const override {
    const BwdCall call = validate(cfg_, tensors, Placement::kDevice);
    workspace_->reserve(workspace_layout(call.base).total);
  }
  std::size_t workspace_bytes() const override { return workspace_->bytes(); }

  void execute(const TensorArgs& tensors, void* stream) const override {
    const BwdCall call = validate(cfg_, tensors, Placement::kDevice);
    const BsaCall& c = call.base;
    if (c.dtype != dtype_ || c.D != D_ || !(c.device == device_))
      throw InvalidArgument(fmt::format("{}: args: tensors: expected this plan's static signature ({} D {} {}), got {} D "
                                        "{} {}; build a plan for the new signature", kOp, dtype_name(dtype_), D_,
                                        device_name(device_), dtype_name(c.dtype), c.D, device_name(c.device)));
    if (c.H_kv > 65535 || c.B > 65535)
      throw Unsupported(fmt::format("{}: B = {} and H_kv = {} must be at most 65535 for this kernel's grid", kOp, c.B, c.H_kv));
    if (c.B * c.H_q * c.N_q * c.K_max > std::numeric_limits<int32_t>::max() ||
        c.B * c.H_q * c.N_q * c.bs > std::numeric_limits<int32_t>::max())
      throw Unsupported(fmt::format("{}: B * H_q * N_q * max(K_max, sparse_block_size) must stay below 2^31 for this "
                                    "kernel's int32 lists and row indices, got B = {}, H_q = {}, N_q = {}, K_max = {}",
                                    kOp, c.B, c.H_q, c.N_q, c.K_max));
    if (hopper_)
      if (const std::string gap = hopper_tma_gap(call); !gap.empty())
        throw_hopper_gap(kOp, gap);
    const auto& drv = jit::CudaDriver::get();
    drv.bind_device(device_.index);
    if (cfg_.validate_inputs) bsa::BsaMetadataHost::load(kOp, c, stream).check_contents(kOp, /*allow_zero_counts=*/true);
    const WorkspaceLayout w = workspace_layout(c);
    detail::PlanWorkspace::Lease lease = workspace_->acquire(w.total, stream);
    kernels::AttnBwdParams p = params(call, w, lease.ptr());
    auto cu_stream = static_cast<CUstream>(stream);
    drv.check(drv.cuMemsetD32Async(lease.ptr() + w.counts, 0, static_cast<size_t>(w.segments), cu_stream),
              "bsa_bwd: cuMemsetD32Async(counts)");
    const long long rows = static_cast<long long>(c.B) * c.H_q * w.s_pad;
    const long long pairs = static_cast<long long>(c.B) * c.H_q * c.N_q * c.K_max;
    launch(*k_.prep, bwd_blocks(rows * (D_ / 8), 256), 1, 1, 256, 0, cu_stream, &p, nullptr);
    int mode = 0;
    launch(*k_.route, bwd_blocks(pairs, 256), 1, 1, 256, 0, cu_stream, &p, &mode);
    launch(*k_.scan, 1, 1, 1, 1024, 0, cu_stream, &p, nullptr);
    mode = 1;
    launch(*k_.route, bwd_blocks(pairs, 256), 1, 1, 256, 0, cu_stream, &p, &mode);
    if (hopper_) {
      kernels::AttnBwdHopperParams hp{};
      hp.p = p;
      const int bs = static_cast<int>(c.bs);
      for (auto [map, name, t, heads, rows, box] :
           {std::tuple{&hp.q_map, "q", c.q, c.H_q, c.S_q, 64}, std::tuple{&hp.do_map, "do", call.dout, c.H_q, c.S_q, 64},
            std::tuple{&hp.k_map, "k", c.k, c.H_kv, c.S_kv, bs}, std::tuple{&hp.v_map, "v", c.v, c.H_kv, c.S_kv, bs}}) {
        const bsa::BhsStrides st = c.strides_of(*t);
        encode_tma_rows(kOp, name, *map, c.dtype, t->data, D_, heads, rows, c.B, st.h, st.s, st.b, box);
      }
      const kernels::AttnBwdHopperLayout layout{static_cast<int>(D_), bs};
      if (layout.dq_tma()) encode_dq_acc_map(kOp, hp.dq_map, p.dq_acc, D_, static_cast<int64_t>(c.B) * c.H_q * w.s_pad);
      launch_raw(*k_.main, static_cast<unsigned>(c.N_kv), static_cast<unsigned>(c.H_kv), static_cast<unsigned>(c.B),
                 static_cast<unsigned>(layout.threads()), layout.smem_bytes(), cu_stream, &hp);
    } else {
      launch(*k_.main, static_cast<unsigned>(c.N_kv), static_cast<unsigned>(c.H_kv), static_cast<unsigned>(c.B), 256,
             kernels::attn_bwd_smem_bytes(static_cast<int>(D_), static_cast<int>(c.bs),
                                        kernels::bsa_bwd_block_m(static_cast<int>(c.bs))), cu_stream, &p, nullptr);
    }
    launch(*k_.dq, bwd_blocks(static_cast<long long>(c.B) * c.H_q * c.S_q * (D_ / 8), 256), 1, 1, 256, 0, cu_stream, &p,
           nullptr);
  }

  std::string describe() const override {
    return fmt::format("{} kernel plan: {} (+ prep, route, scan, dq kernels)", kOp, k_.main->compiled->spec.describe());
  }

 private:
  static void launch(const jit::LoadedKernel& k, unsigned gx, unsigned gy, unsigned gz, unsigned threads, int smem,
                     CUstream stream, kernels::AttnBwdParams* p, int* extra) {
    void* args[] = {p, extra};
    launch_bwd_kernel(kOp, k, gx, gy, gz, threads, smem, stream, args);
  }
  template <class Params>
  static void launch_raw(const jit::LoadedKernel& k, unsigned gx, unsigned gy, unsigned gz, unsigned threads, int smem,
                         CUstream stream, Params* p) {
    void* args[] = {p};
    launch_bwd_kernel(kOp, k, gx, gy, gz, threads, smem, stream, args);
  }

  kernels::AttnBwdParams params(const BwdCall& call, const WorkspaceLayout& w, CUdeviceptr ws) const {
    const BsaCall& c = call.base;
    kernels::AttnBwdParams p{};
    fill_bwd_tensors(p, {c.q, c.k, c.v, call.o, call.dout, call.dq, call.dk, call.dv, call.lse},
                     [&](const TensorRef& t) { return c.strides_of(t); });
    p.index = static_cast<const int*>(c.index->data);
    p.idx_sb = c.index->strides[0];
    p.idx_sh = c.index->strides[1];
    p.idx_sm = c.index->strides[2];
    p.idx_su = c.index->strides[3];
    if (c.nums) {
      p.nums = static_cast<const int*>(c.nums->data);
      p.nums_sb = c.nums->strides[0];
      p.nums_sh = c.nums->strides[1];
      p.nums_sm = c.nums->strides[2];
    }
    p.bsz_rank = c.block_sizes_rank;
    if (c.block_sizes) {
      p.block_sizes = static_cast<const int*>(c.block_sizes->data);
      p.bsz_s0 = c.block_sizes->strides[0];
      p.bsz_s1 = c.block_sizes->ndim > 1 ? c.block_sizes->strides[1] : 0;
      p.bsz_s2 = c.block_sizes->ndim > 2 ? c.block_sizes->strides[2] : 0;
    }
    p.batch = static_cast<int>(c.B);
    p.h_q = static_cast<int>(c.H_q);
    p.h_kv = static_cast<int>(c.H_kv);
    p.group = static_cast<int>(c.group());
    p.s_q = static_cast<int>(c.S_q);
    p.s_kv = static_cast<int>(c.S_kv);
    p.n_q = static_cast<int>(c.N_q);
    p.n_kv = static_cast<int>(c.N_kv);
    p.k_max = static_cast<int>(c.K_max);
    p.fixed_count = static_cast<int>(c.fixed_count);
    p.s_pad = static_cast<int>(w.s_pad);
    p.scale = c.scale;
    p.scale_log2 = static_cast<float>(static_cast<double>(c.scale) * 1.4426950408889634);
    p.lse2 = reinterpret_cast<float*>(ws + w.lse2);
    p.delta = reinterpret_cast<float*>(ws + w.delta);
    p.dq_acc = reinterpret_cast<float*>(ws + w.dq_acc);
    p.counts = reinterpret_cast<int*>(ws + w.counts);
    p.offsets = reinterpret_cast<int*>(ws + w.offsets);
    p.cursor = reinterpret_cast<int*>(ws + w.cursor);
    p.list = reinterpret_cast<int*>(ws + w.list);
    return p;
  }

  BwdConfig cfg_;
  DType dtype_;
  int64_t D_;
  Device device_;
  Loaded k_;
  bool hopper_ = false;
  std::unique_ptr<detail::PlanWorkspace> workspace_;
};

class BsaBwdOp final : public detail::OpInstance {
 public:
  BsaBwdOp(OpContext& ctx, const nlohmann::json& config)
      : BsaBwdOp(ctx, detail::ConfigReader(kOp, config, config_keys())) {}

  std::vector<jit::KernelSpec> kernels_for(const TensorArgs& tensors, const std::string& arch) const override {
    const BwdCall call = validate(cfg_, tensors, Placement::kDevice);
    const bool hopper = use_hopper(backend_, call, arch);
    if (!hopper) check_portable(arch);
    BwdKernels k = kernel_specs(call.base.dtype, call.base.D, static_cast<int>(call.base.bs), arch, hopper);
    return {k.prep, k.route, k.scan, k.main, k.dq};
  }

 protected:
  Plan plan_for(const TensorArgs& tensors) override {
    const BwdCall call = validate(cfg_, tensors, placement_for(impl_));
    if (impl_ == detail::Impl::kReference)
      return cached("reference", tensors, [&] {
        return reference_plan(kOp, [cfg = cfg_](const TensorArgs& t, void* stream) {
          const BwdCall call = validate(cfg, t, Placement::kHost);
          const bsa::BsaMetadataHost md = bsa::BsaMetadataHost::load(kOp, call.base, stream);
          if (cfg.validate_inputs) md.check_contents(kOp, /*allow_zero_counts=*/true);
          reference::bsa_backward(call.base, md, *call.o, *call.dout, *call.lse, *call.dq, *call.dk, *call.dv);
        });
      });
    const BsaCall& c = call.base;
    BackendPick pick(ctx_, backend_, c.device.index,
                     [&](const std::string& arch) { return use_hopper(backend_, call, arch); });
    std::string sig = fmt::format("{}.{}.{}.{}", static_cast<int>(c.dtype), c.D, c.device.index, pick.auto_hopper());
    return cached(std::move(sig), tensors, [&] {
      const std::string& arch = pick.arch();
      const bool hopper = pick.hopper();
      if (!hopper) check_portable(arch);
      const BwdKernels specs = kernel_specs(c.dtype, c.D, static_cast<int>(c.bs), arch, hopper);
      const int dev = c.device.index;
      BsaBwdPlan::Loaded k;
      k.prep = ctx_.kernels().loaded(specs.prep, dev);
      k.route = ctx_.kernels().loaded(specs.route, dev);
      k.scan = ctx_.kernels().loaded(specs.scan, dev);
      k.main = ctx_.kernels().loaded(specs.main, dev);
      k.dq = ctx_.kernels().loaded(specs.dq, dev);
      const int smem = hopper ? kernels::AttnBwdHopperLayout{static_cast<int>(c.D), static_cast<int>(c.bs)}.smem_bytes()
                              : kernels::attn_bwd_smem_bytes(static_cast<int>(c.D), static_cast<int>(c.bs),
                                                            kernels::bsa_bwd_block_m(static_cast<int>(c.bs)));
      require_dynamic_smem(kOp, *k.main, specs.main, smem);
      return std::make_shared<BsaBwdPlan>(cfg_, c.dtype, c.D, c.device, std::move(k), hopper);
    });
  }

 private:
  BsaBwdOp(OpContext& ctx, const detail::ConfigReader& r)
      : OpInstance(ctx, kOp, r.impl(), r.backend()), cfg_(parse_config(r)) {}
  BwdConfig cfg_;
};

}  // namespace

}  // namespace attnjit::ops

namespace attnjit::detail {

OpDefinition bsa_bwd_definition() {
  // NOTE: D = 128 only (the training head dim; 10 kernels, ~3.5 s of NVRTC each for the main ones): D = 64
  // compiles on first use.
  return ops::op_definition<ops::BsaBwdOp>(ops::kOp, [](const std::string& arch) {
    std::vector<jit::KernelSpec> specs;
    for (DType dt : {DType::kF16, DType::kBF16})
      for (int bs : {64, 128}) {
        ops::BwdKernels k = ops::kernel_specs(dt, 128, bs, arch);
        if (bs == 64) {
          specs.push_back(k.prep);
          specs.push_back(k.dq);
          if (dt == DType::kBF16) {
            specs.push_back(k.route);
            specs.push_back(k.scan);
          }
        }
        specs.push_back(k.main);
        if (ops::has_hopper_kernels(arch)) specs.push_back(ops::kernel_specs(dt, 128, bs, arch, /*hopper=*/true).main);
      }
    return specs;
  });
}

// Rank: the op's place in `attnjit info` and the warm-up (ops/registry.hpp).
const OpRegistrar kBsaBwdRegistrar{100, &bsa_bwd_definition};

}  // namespace attnjit::detail
