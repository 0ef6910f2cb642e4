#include "ops/bsa/bsa_fwd_kernel.hpp"

#include <fmt/format.h>

#include <limits>
#include <tuple>

#include "jit/cuda_driver.hpp"
#include "jit/spec_builder.hpp"
#include "ops/base/arch.hpp"
#include "ops/base/op_helpers.hpp"
#include "ops/attention/attention_kernel.hpp"
#include "ops/base/launch.hpp"
#include "ops/base/backend.hpp"
#include "ops/base/context.hpp"

namespace attnjit::ops::bsa {

namespace {

std::string_view device_type(DType dt) { return dt == DType::kF16 ? "__half" : "__nv_bfloat16"; }

}  // namespace

BsaFwdKernelChoice choose_bsa_fwd_kernel(DType dt, int D, int Dv, int bs, bool has_nums, int bsz_rank, bool split,
                                         const std::string& arch) {
  BsaFwdKernelChoice k;
  k.dtype = dt;
  k.D = D;
  k.Dv = Dv;
  // NOTE: 32 rows per warp (two m16 tiles) halve the shared-memory reads per MMA, the limit of mma.sync
  // attention; BN 32 for the wide head dims keeps registers for pipelining and two 128-row CTAs per SM
  // (the tuning of gqa_fwd.cuh on the H200).
  k.BM = bs;
  k.warps = bs / 32;
  k.BN = (D <= 64 && Dv <= 64) ? 64 : 32;
  k.has_nums = has_nums;
  k.bsz_rank = bsz_rank;
  k.split = split;
  k.arch = arch;
  return k;
}

jit::KernelSpec bsa_fwd_kernel_spec(const BsaFwdKernelChoice& k) {
  jit::SpecBuilder b("bsa_fwd", "bsa/bsa_fwd.cuh", "attnjit::kernels::bsa_fwd", k.arch);
  b.field("backend", "portable").name("{}");
  b.field("dtype", dtype_name(k.dtype)).arg(device_type(k.dtype)).name("{}");
  b.field("head_dim", k.D).arg().name("d{}");
  b.field("head_dim_v", k.Dv).arg().name_if(k.Dv != k.D, "dv{}");
  b.field("sparse_block_size", k.BM).arg().name("bs{}");
  b.field("block_n", k.BN).arg().name("bn{}");
  b.field("warps", k.warps).arg();
  b.field("block_nums", k.has_nums).arg().name_if(k.has_nums, "nums");
  b.field("block_sizes_rank", k.bsz_rank).arg().name_if(k.bsz_rank != 0, "bsz{}");
  b.field("split", k.split).arg().name_if(k.split, "split");
  return b.build();
}

jit::KernelSpec bsa_combine_kernel_spec(DType dt, int Dv, const std::string& arch) {
  jit::SpecBuilder b("bsa_fwd", "bsa/bsa_combine.cuh", "attnjit::kernels::bsa_combine", arch);
  b.name("combine");
  b.field("backend", "portable");
  b.field("dtype", dtype_name(dt)).arg(device_type(dt)).name("{}");
  b.field("head_dim_v", Dv).arg().name("dv{}");
  return b.build();
}

void check_bsa_backend(const char* op, detail::Backend backend, const std::string& arch) {
  if (backend == detail::Backend::kHopper)
    throw Unsupported(fmt::format("{}: backend 'hopper' (wgmma/TMA) is not built for this op; use backend 'auto' or "
                                  "'portable'", op));
  require_portable_arch(op, arch);
}

std::string bsa_hopper_gap(const BsaCall& in, bool split_requested, const std::string& arch) {
  if (std::string gap = hopper_arch_gap(arch); !gap.empty()) return gap;
  if (in.D != in.D_v || (in.D != 64 && in.D != 128))
    return fmt::format("it serves D = D_v in {{64, 128}}, got D {} and D_v {}", in.D, in.D_v);
  if (split_requested) return "kv_splits > 1 is not built into it (one CTA takes a whole query block)";
  return "";
}

std::string bsa_hopper_tma_gap(const BsaCall& in) {
  for (auto [name, t, st] : {std::tuple{"k", in.k, in.k_st}, std::tuple{"v", in.v, in.v_st}}) {
    const std::string gap = tma_gap(name, t->data, {{in.H_kv, st.h}, {in.S_kv, st.s}, {in.B, st.b}});
    if (!gap.empty()) return gap;
  }
  return "";
}

BsaHopperChoice choose_bsa_hopper(const BsaCall& in, const std::string& arch) {
  BsaHopperChoice k;
  k.dtype = in.dtype;
  k.D = static_cast<int>(in.D);
  k.bs = static_cast<int>(in.bs);
  k.has_nums = in.nums != nullptr;
  k.bsz_rank = in.block_sizes_rank;
  k.arch = arch;
  return k;
}

jit::KernelSpec bsa_fwd_hopper_spec(const BsaHopperChoice& k) {
  jit::SpecBuilder b("bsa_fwd", "bsa/bsa_fwd_hopper.cuh", "attnjit::kernels::bsa_fwd_hopper", k.arch);
  b.field("backend", "hopper").name("{}");
  b.field("dtype", dtype_name(k.dtype)).arg(device_type(k.dtype)).name("{}");
  b.field("head_dim", k.D).arg().name("d{}");
  b.field("sparse_block_size", k.bs).arg().name("bs{}");
  b.field("counts", k.has_nums ? "variable" : "fixed").arg(k.has_nums).name_if(k.has_nums, "nums");
  b.field("block_sizes_rank", k.bsz_rank).arg().name_if(k.bsz_rank != 0, "bsz{}");
  return b.build();
}

std::shared_ptr<const jit::LoadedKernel> load_bsa_fwd_hopper_kernel(OpContext& ctx, const BsaHopperChoice& k,
                                                                    int device) {
  auto kernel = ctx.kernels().loaded(bsa_fwd_hopper_spec(k), device);
  require_dynamic_smem("bsa_fwd", *kernel, kernel->compiled->spec, k.smem_bytes());
  return kernel;
}

void launch_bsa_fwd_hopper(const char* op, const jit::LoadedKernel& kernel, const BsaHopperChoice& k,
                           const kernels::BsaFwdParams& p, const BsaCall& in, void* stream) {
  if (in.B > 65535 || in.H_q > 65535)
    throw Unsupported(fmt::format("{}: B = {} and H_q = {} must be at most 65535 for this kernel's grid", op, in.B, in.H_q));
  if (in.S_q > std::numeric_limits<int>::max() / 2 || in.S_kv > std::numeric_limits<int>::max() / 2)
    throw Unsupported(fmt::format("{}: sequence lengths beyond 2^30 are not served (S_q {}, S_kv {})", op, in.S_q, in.S_kv));
  if (in.B == 0 || in.H_q == 0 || in.N_q == 0) return;
  kernels::BsaFwdHopperParams hp{};
  hp.p = p;
  encode_tma_rows(op, "k", hp.k_map, k.dtype, in.k->data, k.D, in.H_kv, in.S_kv, in.B, in.k_st.h, in.k_st.s, in.k_st.b, k.bs);
  encode_tma_rows(op, "v", hp.v_map, k.dtype, in.v->data, k.D, in.H_kv, in.S_kv, in.B, in.v_st.h, in.v_st.s, in.v_st.b, k.bs);
  Launch lc;
  lc.grid_x = static_cast<unsigned>(in.N_q);
  lc.grid_y = static_cast<unsigned>(in.H_q);
  lc.grid_z = static_cast<unsigned>(in.B);
  lc.threads = static_cast<unsigned>(k.threads());
  lc.smem_bytes = static_cast<unsigned>(k.smem_bytes());
  lc.stream = stream;
  void* args[] = {&hp};
  launch_kernel(kernel.function, lc, args, fmt::format("{}: cuLaunchKernelEx", op));
}

std::shared_ptr<const jit::LoadedKernel> load_bsa_fwd_kernel(OpContext& ctx, const BsaFwdKernelChoice& k,
                                                             int device) {
  auto kernel = ctx.kernels().loaded(bsa_fwd_kernel_spec(k), device);
  require_dynamic_smem("bsa_fwd", *kernel, kernel->compiled->spec, k.smem_bytes());
  return kernel;
}

kernels::BsaFwdParams bsa_fwd_params(const BsaCall& in, const TensorRef& o, const TensorRef* lse) {
  kernels::BsaFwdParams p{};
  set_bsa_common_params(p, in, o);
  p.lse = lse ? static_cast<float*>(lse->data) : nullptr;
  if (lse) p.lse_sb = lse->strides[0], p.lse_sh = lse->strides[1], p.lse_ss = lse->strides[2];
  p.h_q = static_cast<int>(in.H_q);
  p.group = static_cast<int>(in.group());
  p.splits = 1;
  return p;
}

void launch_bsa_fwd(const char* op, const jit::LoadedKernel& kernel, const BsaFwdKernelChoice& k,
                    const kernels::BsaFwdParams& p, const BsaCall& in, int splits, void* stream) {
  if (in.B > 65535 || in.H_q > 65535)
    throw Unsupported(fmt::format("{}: B = {} and H_q = {} must be at most 65535 for this kernel's grid", op, in.B, in.H_q));
  if (in.S_q > std::numeric_limits<int>::max() / 2 || in.S_kv > std::numeric_limits<int>::max() / 2)
    throw Unsupported(fmt::format("{}: sequence lengths beyond 2^30 are not served (S_q {}, S_kv {})", op, in.S_q, in.S_kv));
  Launch lc;
  lc.grid_x = static_cast<unsigned>(in.N_q * splits);
  lc.grid_y = static_cast<unsigned>(in.H_q);
  lc.grid_z = static_cast<unsigned>(in.B);
  lc.threads = static_cast<unsigned>(k.threads());
  lc.smem_bytes = static_cast<unsigned>(k.smem_bytes());
  lc.stream = stream;
  kernels::BsaFwdParams params = p;
  void* args[] = {&params};
  launch_kernel(kernel.function, lc, args, fmt::format("{}: cuLaunchKernelEx", op));
}

void launch_bsa_combine(const char* op, const jit::LoadedKernel& kernel, const kernels::BsaFwdParams& p, size_t rows,
                        void* stream) {
  Launch lc;
  lc.grid_x = static_cast<unsigned>((rows + 3) / 4);
  lc.threads = 128;
  lc.smem_bytes = 0;
  lc.stream = stream;
  kernels::BsaFwdParams params = p;
  void* args[] = {&params};
  launch_kernel(kernel.function, lc, args, fmt::format("{}: combine cuLaunchKernelEx", op));
}

}  // namespace attnjit::ops::bsa
