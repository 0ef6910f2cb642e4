#include "ops/paged/paged_decode_hopper.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>

#include "jit/cuda_driver.hpp"
#include "jit/spec_builder.hpp"
#include "ops/base/op_helpers.hpp"
#include "ops/attention/attention_kernel.hpp"
#include "ops/base/launch.hpp"
#include "ops/base/backend.hpp"
#include "paged/paged_decode_hopper_params.cuh"
#include "ops/base/context.hpp"

namespace attnjit::ops {

std::string hopper_decode_static_gap(const GqaConfig& gqa, const PagedAttentionCall& call, const std::string& arch) {
  if (std::string gap = hopper_arch_gap(arch, "TMA"); !gap.empty()) return gap;
  if (call.q_dtype != DType::kF16 && call.q_dtype != DType::kBF16)
    return fmt::format("it takes fp16 or bf16 q, got {}", dtype_name(call.q_dtype));
  if (call.kv_dtype != call.q_dtype) return "it reads 16-bit pools in q's dtype";
  if (call.compute_dtype != call.q_dtype) return "it writes the output in the input dtype";
  if (call.D != 64 && call.D != 128) return fmt::format("it serves head dims 64 and 128, got {}", call.D);
  if (gqa.rope != RopeLayout::kNone) return "fused RoPE is not built into it";
  return "";
}

std::string hopper_decode_call_gap(const PagedAttentionCall& call) {
  if (call.H_kv != 1 && call.H_kv != 2 && call.H_kv != 4 && call.H_kv % 8 != 0)
    return fmt::format("it serves 1, 2, 4 or a multiple of 8 KV heads, got {}", call.H_kv);
  if (call.H / call.H_kv > 16) return fmt::format("it serves up to 16 query heads per KV head, got {}", call.H / call.H_kv);
  if (call.PS % 16 != 0) return fmt::format("it reads pages in 16-slot boxes: page size a multiple of 16, got {}", call.PS);
  for (const TensorRef* t : {call.k_pages, call.v_pages}) {
    const char* name = call.mha_decode ? (t == call.k_pages ? "k" : "v") : (t == call.k_pages ? "k_pages" : "v_pages");
    const std::string gap =
        call.mha_decode ? tma_gap(name, t->data, {{t->shape[0], t->strides[0]}, {t->shape[1], t->strides[1]}})
                        : tma_gap(name, t->data, {{t->shape[0], t->strides[0]}, {t->shape[1], t->strides[1]},
                                                  {t->shape[2], t->strides[2]}});
    if (!gap.empty()) return gap;
  }
  const TensorRef& q = *call.q;
  bool even = reinterpret_cast<uintptr_t>(q.data) % 4 == 0;
  for (int d = 0; d + 1 < q.ndim; ++d) even = even && (q.shape[d] <= 1 || q.strides[d] % 2 == 0);
  if (!even) return "it reads q in 4-byte pairs: a 4-byte aligned base and even strides";
  return "";
}

HopperDecodeChoice choose_hopper_decode(const GqaConfig& gqa, const PagedAttentionCall& call, const std::string& arch) {
  HopperDecodeChoice k;
  k.dtype = call.q_dtype;
  k.D = static_cast<int>(call.D);
  k.causal = gqa.is_causal;
  k.window = gqa.has_window();
  k.softcap = gqa.softcap > 0;
  k.batched = call.mha_decode;
  k.arch = arch;
  return k;
}

jit::KernelSpec hopper_decode_kernel_spec(const char* op, const HopperDecodeChoice& k) {
  jit::SpecBuilder b(op, "paged/paged_decode_hopper.cuh", "attnjit::kernels::paged_decode_hopper", k.arch);
  b.field("backend", "hopper").name("{}");
  b.field("dtype", dtype_name(k.dtype)).arg(device_type_name(k.dtype)).name("{}");
  b.field("head_dim", k.D).arg().name("d{}");
  b.field("causal", k.causal).arg().name_if(k.causal, "causal");
  b.field("window", k.window).arg().name_if(k.window, "window");
  b.field("softcap", k.softcap).arg().name_if(k.softcap, "softcap");
  b.field("batched", k.batched).arg().name_if(k.batched, "batched");
  b.field("path", "decode").name("{}").before("dtype");
  return b.build();
}

std::shared_ptr<const jit::LoadedKernel> load_hopper_decode_kernel(OpContext& ctx, const char* op,
                                                                   const HopperDecodeChoice& k, int device) {
  auto kernel = ctx.kernels().loaded(hopper_decode_kernel_spec(op, k), device);
  require_dynamic_smem(op, *kernel, kernel->compiled->spec, kernels::pdh_smem_bytes(k.D));
  return kernel;
}

namespace {
// Query tiles of 16 (query, head-in-group) rows: the kernel's grid x (an upper bound for packed queries;
// exact for batched ones).
int64_t hopper_decode_tiles(const PagedAttentionCall& call) {
  const int64_t g = call.H / call.H_kv;
  if (call.mha_decode) return call.B * ((call.S_q * g + kernels::kPdhRows - 1) / kernels::kPdhRows);
  return (call.T_q * g + kernels::kPdhRows - 1) / kernels::kPdhRows + call.B;
}
// CTAs per query tile: groups of up to eight KV heads (grid z).
int64_t hopper_decode_head_groups(const PagedAttentionCall& call) {
  return (call.H_kv + kernels::kPdhConsumerWarps - 1) / kernels::kPdhConsumerWarps;
}
}  // namespace

int hopper_decode_splits(const PagedAttentionCall& call, int sms, int splits_override) {
  const int stage_keys =
      kernels::kPdhChunk * kernels::kPdhConsumerWarps / static_cast<int>(std::min<int64_t>(call.H_kv, kernels::kPdhConsumerWarps));
  const int64_t max_keys = call.W * call.PS;
  if (splits_override > 0)
    return static_cast<int>(std::clamp<int64_t>(splits_override, 1, std::max<int64_t>(1, (max_keys + stage_keys - 1) / stage_keys)));
  const int64_t g = call.H / call.H_kv;
  const int64_t tiles = call.mha_decode ? hopper_decode_tiles(call)
                                        : std::max<int64_t>(call.B, (call.T_q * g + kernels::kPdhRows - 1) / kernels::kPdhRows);
  return choose_splits(tiles * hopper_decode_head_groups(call), max_keys, stage_keys, sms, 1, 0);
}

void launch_hopper_decode(const char* op, const jit::LoadedKernel& kernel, const HopperDecodeChoice& k,
                          const kernels::GqaFwdParams& p, const PagedAttentionCall& call, void* stream) {
  const int64_t tiles = hopper_decode_tiles(call);
  if (call.B == 0 || (call.mha_decode ? call.S_q : call.T_q) == 0) return;
  if (tiles > 0x7fffffff)
    throw Unsupported(fmt::format("{}: {} query tiles exceed the grid this kernel takes", op, tiles));
  kernels::PagedDecodeHopperParams hp{};
  hp.p = p;
  const auto& drv = jit::CudaDriver::get();
  const CUtensorMapDataType dt = k.dtype == DType::kBF16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
  for (const TensorRef* t : {call.k_pages, call.v_pages}) {
    // [NP, PS, H_kv, D] (mha_decode_paged: [NP * PS, H, D]) as (D, slot, head, page): boxes of 64 columns
    // x 16 slots x a group's heads land as [head][slot][64] in shared memory (the slot stride exceeds the
    // head stride; TMA allows it). L2 promotion 128 B: each box row is one 128-byte half of a 256-byte
    // (slot, head) row at D 128; promoting it to 256 B measured 2-4% slower on H200 (both halves are
    // requested anyway, by the two column boxes), B1 x 128k 137.6 -> 134 us.
    auto& map = t == call.k_pages ? hp.k_map : hp.v_map;
    cuuint64_t dims[4] = {static_cast<cuuint64_t>(call.D), static_cast<cuuint64_t>(call.PS),
                          static_cast<cuuint64_t>(call.H_kv), static_cast<cuuint64_t>(std::max<int64_t>(1, call.NP))};
    auto stride = [&](int64_t s) { return static_cast<cuuint64_t>(s > 0 ? s * 2 : call.D * 2); };
    const int64_t s_slot = call.mha_decode ? t->strides[0] : t->strides[1];
    const int64_t s_head = call.mha_decode ? t->strides[1] : t->strides[2];
    const int64_t s_page = call.mha_decode ? call.PS * t->strides[0] : t->strides[0];
    cuuint64_t strides[3] = {stride(s_slot), stride(s_head), stride(s_page)};
    cuuint32_t box[4] = {64, static_cast<cuuint32_t>(kernels::kPdhChunk),
                         static_cast<cuuint32_t>(std::min<int64_t>(call.H_kv, kernels::kPdhConsumerWarps)), 1};
    cuuint32_t elem[4] = {1, 1, 1, 1};
    drv.check(drv.cuTensorMapEncodeTiled(reinterpret_cast<CUtensorMap*>(map), dt, 4, const_cast<void*>(t->data), dims,
                                         strides, box, elem, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                         CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
              fmt::format("{}: cuTensorMapEncodeTiled ({})", op, t == call.k_pages ? "k_pages" : "v_pages").c_str());
  }
  Launch lc;
  lc.grid_x = static_cast<unsigned>(tiles);
  lc.grid_y = static_cast<unsigned>(p.n_splits);
  lc.grid_z = static_cast<unsigned>(hopper_decode_head_groups(call));
  lc.threads = kernels::kPdhThreads;
  lc.smem_bytes = static_cast<unsigned>(kernels::pdh_smem_bytes(k.D));
  lc.stream = stream;
  void* args[] = {&hp};
  launch_kernel(kernel.function, lc, args, fmt::format("{}: cuLaunchKernelEx (hopper decode)", op));
}

}  // namespace attnjit::ops
