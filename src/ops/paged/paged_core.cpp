// The paged attention core of gqa_paged_fwd (gqa_paged_fwd.cpp) and mha_decode_paged
// (mha_decode_paged.cpp): validation, content checks, kernel choice, the kernel plan and the warm-up
// matrix. The kernel is the portable attention kernel with paged K/V rows (KvMode::kPaged): key j of
// request b is read from pool page page_table[b, j / PS], slot j % PS.
#include <fmt/format.h>

#include <cmath>
#include <algorithm>
#include <functional>
#include <optional>

#include "jit/cuda_driver.hpp"
#include "ops/base/arch.hpp"
#include "ops/base/op_helpers.hpp"
#include "ops/attention/attention_kernel.hpp"
#include "ops/paged/paged_core.hpp"
#include "ops/paged/paged_decode_hopper.hpp"
#include "ops/paged/reference.hpp"
#include "ops/base/host_copy.hpp"
#include "ops/base/op.hpp"
#include "ops/base/context.hpp"
#include "ops/base/workspace.hpp"
#include "ops/base/backend.hpp"

namespace attnjit::ops {

using detail::ArgChecker;
using detail::Placement;

namespace {

void check_head_dim(ArgChecker& c, int64_t D) {
  if (D != 64 && D != 128 && D != 256) c.fail("shape", "q", "expected head dim D in {{64, 128, 256}}, got {}", D);
}

// page_table / block_table [B, W] and the per-request key counts [B].
void check_tables(ArgChecker& c, PagedAttentionCall& call, const char* table_name, const char* lens_name) {
  const TensorRef& table = c.required(table_name);
  const TensorRef& lens = c.required(lens_name);
  call.page_table = &table;
  call.kv_lens = &lens;
  c.rank(table_name, table, 2, "[B, W]");
  c.extent(table_name, table, 0, call.B, "B");
  c.dtype_is(table_name, table, DType::kI32);
  c.metadata(table_name, table);
  c.rank(lens_name, lens, 1, "[B]");
  c.extent(lens_name, lens, 0, call.B, "B");
  c.dtype_is(lens_name, lens, DType::kI32);
  c.metadata(lens_name, lens);
  call.W = table.shape[1];
}

}  // namespace

PagedAttentionCall validate_gqa_paged_call(const GqaConfig& cfg, const TensorArgs& args, Placement placement) {
  ArgChecker c(kGqaPaged, args, placement);
  c.only_known({"q", "k_pages", "v_pages", "page_table", "cache_seqlens", "cu_seqlens_q", "q_scale", "k_scale", "v_scale",
                "rope_cos", "rope_sin", "sinks", "o"});
  PagedAttentionCall call;
  const TensorRef& q = c.required("q");
  const TensorRef& kp = c.required("k_pages");
  const TensorRef& vp = c.required("v_pages");
  const TensorRef& o = c.required("o");
  const TensorRef& cq = c.required("cu_seqlens_q");
  call.q = &q;
  call.k_pages = &kp;
  call.v_pages = &vp;
  call.o = &o;
  call.cu_seqlens_q = &cq;

  c.dtype_in("q", q, {DType::kF16, DType::kBF16, DType::kE4M3});
  c.dtype_in("k_pages", kp, {DType::kF16, DType::kBF16, DType::kE4M3});
  const bool pair_ok = kp.dtype == q.dtype || (kp.dtype == DType::kE4M3 && is_float16(q.dtype));
  if (!pair_ok)
    c.fail("dtype", "k_pages", "expected q's dtype {} or e4m3 (pairs fp16/fp16, bf16/bf16, fp16/e4m3, bf16/e4m3, "
           "e4m3/e4m3), got {}", dtype_name(q.dtype), dtype_name(kp.dtype));
  c.dtype_is("v_pages", vp, kp.dtype, "(k_pages' dtype)");
  call.q_dtype = q.dtype;
  call.kv_dtype = kp.dtype;
  if (q.dtype == DType::kE4M3) {
    if (!cfg.out_dtype) c.fail("dtype", "out_dtype", "expected fp16 or bf16 for e4m3 input q, got none");
    call.compute_dtype = *cfg.out_dtype;
  } else {
    if (cfg.out_dtype && *cfg.out_dtype != q.dtype)
      c.fail("dtype", "out_dtype", "expected unset or the input dtype {} for a 16-bit q, got {}", dtype_name(q.dtype),
             dtype_name(*cfg.out_dtype));
    call.compute_dtype = q.dtype;
  }

  c.rank("q", q, 3, "[T_q, H, D]");
  call.T_q = q.shape[0];
  call.H = q.shape[1];
  call.D = q.shape[2];
  c.rank("k_pages", kp, 4, "[NP, PS, H_kv, D]");
  call.NP = kp.shape[0];
  call.PS = kp.shape[1];
  call.H_kv = kp.shape[2];
  c.extent("k_pages", kp, 3, call.D, "D, q's head dim");
  c.rank("v_pages", vp, 4, "[NP, PS, H_kv, D]");
  for (int d = 0; d < 4; ++d) c.extent("v_pages", vp, d, kp.shape[d], "k_pages' shape");
  if (call.PS < 1) c.fail("shape", "k_pages", "expected page size PS >= 1, got {}", call.PS);
  if (call.H < 1) c.fail("shape", "q", "expected H >= 1, got {}", call.H);
  if (call.H_kv < 1) c.fail("shape", "k_pages", "expected H_kv >= 1, got {}", call.H_kv);
  if (call.H % call.H_kv != 0) c.fail("shape", "k_pages", "expected H_kv dividing q's H = {}, got H_kv = {}", call.H, call.H_kv);
  check_head_dim(c, call.D);
  c.rank("cu_seqlens_q", cq, 1, "[B + 1]");
  if (cq.shape[0] < 1) c.fail("shape", "cu_seqlens_q", "expected length B + 1 >= 1, got {}", cq.shape[0]);
  c.dtype_is("cu_seqlens_q", cq, DType::kI32);
  call.B = cq.shape[0] - 1;
  check_tables(c, call, "page_table", "cache_seqlens");

  call.q_scale = c.required_iff("q_scale", q.dtype == DType::kE4M3, "for an e4m3 q");
  call.k_scale = c.required_iff("k_scale", kp.dtype == DType::kE4M3, "for an e4m3 cache, with v_scale");
  call.v_scale = c.required_iff("v_scale", kp.dtype == DType::kE4M3, "for an e4m3 cache, with k_scale");
  for (auto [name, t] : {std::pair{"q_scale", call.q_scale}, std::pair{"k_scale", call.k_scale},
                         std::pair{"v_scale", call.v_scale}}) {
    if (t) check_kv_head_scale(c, name, *t, call.B, call.H_kv);
  }
  const RopeTables rope = check_rope_tables(c, cfg, call.D, call.compute_dtype);
  call.rope_cos = rope.cos;
  call.rope_sin = rope.sin;
  call.R = rope.R;
  call.P = rope.P;
  call.sinks = check_sinks(c, call.H);
  c.rank("o", o, 3, "[T_q, H, D]");
  for (int d = 0; d < 3; ++d) c.extent("o", o, d, q.shape[d], "q's shape");
  c.dtype_is("o", o, call.compute_dtype, "(the compute dtype)");

  c.feature("q", q, true);
  c.feature("k_pages", kp, true);
  c.feature("v_pages", vp, true);
  c.contiguous("cu_seqlens_q", cq, false);
  c.output("o", o, {{"q", &q}, {"k_pages", &kp}, {"v_pages", &vp}});
  for (auto [name, t] :
       {std::pair{"q", call.q}, std::pair{"k_pages", call.k_pages}, std::pair{"v_pages", call.v_pages},
        std::pair{"o", call.o}, std::pair{"page_table", call.page_table}, std::pair{"cache_seqlens", call.kv_lens},
        std::pair{"cu_seqlens_q", call.cu_seqlens_q}, std::pair{"q_scale", call.q_scale},
        std::pair{"k_scale", call.k_scale}, std::pair{"v_scale", call.v_scale}, std::pair{"rope_cos", call.rope_cos},
        std::pair{"rope_sin", call.rope_sin}, std::pair{"sinks", call.sinks}}) {
    if (t) c.device(name, *t);
  }
  call.page_stride = kp.strides[0];
  call.slot_stride = kp.strides[1];
  call.head_stride = kp.strides[2];
  call.device = c.call_device();
  call.scale = static_cast<float>(cfg.sm_scale.value_or(1.0 / std::sqrt(static_cast<double>(call.D))));
  return call;
}

PagedAttentionCall validate_mha_decode_paged_call(const MhaDecodePagedConfig& cfg, const TensorArgs& args,
                                                  Placement placement) {
  ArgChecker c(kMhaDecode, args, placement);
  c.only_known({"q", "k", "v", "real_seqlen_kv", "block_table", "o"});
  PagedAttentionCall call;
  call.mha_decode = true;
  const TensorRef& q = c.required("q");
  const TensorRef& k = c.required("k");
  const TensorRef& v = c.required("v");
  const TensorRef& o = c.required("o");
  call.q = &q;
  call.k_pages = &k;
  call.v_pages = &v;
  call.o = &o;
  c.dtype_in("q", q, {DType::kF16, DType::kBF16});
  c.dtype_is("k", k, q.dtype, "(q's dtype)");
  c.dtype_is("v", v, q.dtype, "(q's dtype)");
  call.q_dtype = call.kv_dtype = call.compute_dtype = q.dtype;
  c.rank("q", q, 4, "[B, S_q, H, D]");
  call.B = q.shape[0];
  call.S_q = q.shape[1];
  call.H = q.shape[2];
  call.D = q.shape[3];
  c.rank("k", k, 3, "[N_kv, H, D]");
  c.extent("k", k, 1, call.H, "H, q's head count");
  c.extent("k", k, 2, call.D, "D, q's head dim");
  c.rank("v", v, 3, "[N_kv, H, D]");
  for (int d = 0; d < 3; ++d) c.extent("v", v, d, k.shape[d], "k's shape");
  if (call.H < 1) c.fail("shape", "q", "expected H >= 1, got {}", call.H);
  check_head_dim(c, call.D);
  call.PS = cfg.page_size;
  if (k.shape[0] % call.PS != 0)
    c.fail("shape", "k", "expected N_kv a multiple of page_size {}, got N_kv = {}", call.PS, k.shape[0]);
  call.NP = k.shape[0] / call.PS;
  call.H_kv = call.H;
  check_tables(c, call, "block_table", "real_seqlen_kv");
  c.rank("o", o, 4, "[B, S_q, H, D]");
  for (int d = 0; d < 4; ++d) c.extent("o", o, d, q.shape[d], "q's shape");
  c.dtype_is("o", o, q.dtype, "(q's dtype)");
  c.feature("q", q, true);
  c.feature("k", k, true);
  c.feature("v", v, true);
  c.output("o", o, {{"q", &q}, {"k", &k}, {"v", &v}});
  for (auto [name, t] : {std::pair{"q", call.q}, std::pair{"k", call.k_pages}, std::pair{"v", call.v_pages},
                         std::pair{"o", call.o}, std::pair{"block_table", call.page_table},
                         std::pair{"real_seqlen_kv", call.kv_lens}}) {
    c.device(name, *t);
  }
  call.page_stride = call.PS * k.strides[0];
  call.slot_stride = k.strides[0];
  call.head_stride = k.strides[1];
  call.device = c.call_device();
  call.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(call.D)));
  return call;
}

// validate_inputs: the caller contracts of §2.9 and §2.11 on host copies of the contract-bearing tensors.
void check_contents(const char* op, const PagedAttentionCall& call, const GqaConfig* gqa, void* stream) {
  detail::prepare_content_checks(op, call.device, stream);
  auto fail = [&](std::string_view arg, const std::string& what) {
    throw InvalidArgument(fmt::format("{}: content: {}: {}", op, arg, what));
  };
  const char* table_name = call.mha_decode ? "block_table" : "page_table";
  const char* lens_name = call.mha_decode ? "real_seqlen_kv" : "cache_seqlens";
  auto lens_h = detail::host_view(*call.kv_lens);
  auto table_h = detail::host_view(*call.page_table);
  const auto* lens = static_cast<const int32_t*>(lens_h.ref.data);
  const auto* table = static_cast<const int32_t*>(table_h.ref.data);
  std::vector<int64_t> q_lens(static_cast<size_t>(call.B), call.S_q);
  if (!call.mha_decode) {
    auto cq = detail::host_view(*call.cu_seqlens_q);
    const auto* off = static_cast<const int32_t*>(cq.ref.data);
    if (off[0] != 0) fail("cu_seqlens_q", fmt::format("expected element 0 to be 0, got {}", off[0]));
    for (int64_t b = 0; b < call.B; ++b) {
      if (off[b + 1] < off[b])
        fail("cu_seqlens_q", fmt::format("expected non-decreasing offsets, got {} after {} at index {}", off[b + 1], off[b], b + 1));
      q_lens[b] = off[b + 1] - off[b];
    }
    if (off[call.B] != call.T_q)
      fail("cu_seqlens_q", fmt::format("expected the last offset to equal T_q = {}, got {}", call.T_q, off[call.B]));
  }
  for (int64_t b = 0; b < call.B; ++b) {
    const int64_t L = lens[b * call.kv_lens->strides[0]];
    if (L < 0 || L > call.W * call.PS)
      fail(lens_name, fmt::format("expected 0 <= kv_len <= W * page size = {}, got {} in request {}", call.W * call.PS, L, b));
    if (!call.mha_decode && q_lens[b] > L)
      fail(lens_name, fmt::format("expected kv_len >= q_len (the cache includes this call's queries), got kv_len {} < "
                                  "q_len {} in request {}", L, q_lens[b], b));
    for (int64_t pg = 0; pg < (L + call.PS - 1) / call.PS; ++pg) {
      const int64_t e = table[b * call.page_table->strides[0] + pg * call.page_table->strides[1]];
      if (e < 0 || e >= call.NP)
        fail(table_name, fmt::format("expected pages in [0, {}) for the used entries, got {} at [{}, {}]", call.NP, e, b, pg));
    }
    if (gqa && gqa->rope != RopeLayout::kNone && call.P < L)
      fail("rope_cos", fmt::format("expected P >= kv_len for every request, got P = {} < kv_len {} in request {}", call.P, L, b));
  }
  for (auto [name, t] : {std::pair{"q_scale", call.q_scale}, std::pair{"k_scale", call.k_scale},
                         std::pair{"v_scale", call.v_scale}}) {
    if (!t) continue;
    auto h = detail::host_view(*t);
    for (int64_t b = 0; b < t->shape[0]; ++b)
      for (int64_t r = 0; r < t->shape[1]; ++r) {
        const float s = static_cast<const float*>(h.ref.data)[b * t->strides[0] + r * t->strides[1]];
        if (!(std::isfinite(s) && s > 0)) fail(name, fmt::format("expected finite scales > 0, got {} at [{}, {}]", s, b, r));
      }
  }
  if (call.sinks) {
    auto h = detail::host_view(*call.sinks);
    for (int64_t i = 0; i < call.H; ++i)
      if (std::isnan(static_cast<const float*>(h.ref.data)[i * call.sinks->strides[0]]))
        fail("sinks", fmt::format("expected no NaN sink, got NaN at index {}", i));
  }
}

namespace {

kernels::GqaFwdParams paged_params(const GqaConfig& cfg, const PagedAttentionCall& call) {
  kernels::GqaFwdParams p{};
  const bool packed = !call.mha_decode;
  fill_common_params(p, cfg, *call.q, *call.o, packed, call.scale, call.H, call.H_kv);
  const TensorRef& k = *call.k_pages;
  const TensorRef& v = *call.v_pages;
  p.k = k.data;
  p.v = v.data;
  if (call.mha_decode) {  // rank-3 pools [N_kv, H, D]: page = PS rows
    p.k_sp = call.PS * k.strides[0];
    p.k_ss = k.strides[0];
    p.k_sh = k.strides[1];
    p.v_sp = call.PS * v.strides[0];
    p.v_ss = v.strides[0];
    p.v_sh = v.strides[1];
  } else {
    p.k_sp = k.strides[0];
    p.k_ss = k.strides[1];
    p.k_sh = k.strides[2];
    p.v_sp = v.strides[0];
    p.v_ss = v.strides[1];
    p.v_sh = v.strides[2];
    p.cu_q = static_cast<const int*>(call.cu_seqlens_q->data);
  }
  p.page_table = static_cast<const int*>(call.page_table->data);
  p.pt_sb = call.page_table->strides[0];
  p.pt_sp = call.page_table->strides[1];
  p.kv_lens = static_cast<const int*>(call.kv_lens->data);
  p.kv_lens_s = call.kv_lens->strides[0];
  p.page_size = static_cast<int>(call.PS);
  fill_optional_params(p, call.q_scale, call.k_scale, call.v_scale, call.rope_cos, call.rope_sin, call.R, call.sinks);
  p.batch = static_cast<int>(call.B);
  p.s_q = static_cast<int>(call.S_q);
  return p;
}

// Calls whose requests average at most 16 query rows take the split-KV decode path.
bool paged_decode_like(const PagedAttentionCall& call) {
  const int64_t tokens = call.mha_decode ? call.B * call.S_q : call.T_q;
  return call.B > 0 && tokens > 0 && tokens * (call.H / call.H_kv) <= 16 * call.B;
}
// An explicit 'hopper' refuses the decode-like calls its decode kernel does not serve, saying why.
[[noreturn]] void refuse_hopper_decode(const char* op, const std::string& gap) {
  throw_hopper_gap(op, fmt::format("calls averaging at most 16 query rows per request take the split-KV decode path, "
                                   "and its hopper kernel cannot serve this one: {}; use backend 'auto' or 'portable'",
                                   gap));
}

// The split-KV decode path of a paged plan: the decode tile with partial outputs (portable, and on sm_90a
// the hopper kernel for the calls it serves), and the combine.
struct DecodePath {
  AttentionKernelChoice choice;
  std::shared_ptr<const jit::LoadedKernel> kernel, combine;
  std::optional<HopperDecodeChoice> hopper;
  std::shared_ptr<const jit::LoadedKernel> hopper_kernel;
  std::string hopper_gap;  // why there is no hopper kernel (static signature), when there is none
  int sms = 0;
  int splits_override = 0;  // ATTNJIT_TUNE_DECODE_SPLITS (0: the planner's choice)
  bool dependent_combine = false;  // sm_90+: the combine is a programmatic dependent launch
};

DecodePath load_decode_path(OpContext& ctx, const char* op, const AttentionKernelChoice& main, int device,
                            std::optional<HopperDecodeChoice> hopper) {
  DecodePath d;
  if (hopper) {
    d.hopper = hopper;
    d.hopper_kernel = load_hopper_decode_kernel(ctx, op, *hopper, device);
  }
  AttentionKernelChoice k = main;
  k.sinks = false;  // the combine adds the sink
  d.choice = decode_variant(op, k, ctx.tuning().decode_tile);
  d.kernel = load_attention_kernel(ctx, op, d.choice, device);
  d.combine = ctx.kernels().loaded(combine_kernel_spec(op, main.compute_dtype, main.D, main.arch), device);
  d.sms = ctx.sm_count(device);
  d.splits_override = ctx.tuning().decode_splits;
  d.dependent_combine = arch_facts(main.arch).programmatic_dependent_launch;
  return d;
}

// Both ops, through one kernel family: `validate` checks a call; `gqa` is the GqaConfig equivalent of
// the op's parameters (for mha_decode_paged: causal only). Calls whose requests average at most 16
// query rows (decode) take the split-KV path: the decode tile over n_splits runs of each request's
// keys, fp32 partials in the plan's workspace, then the combine. n_splits and the workspace size come
// from shapes only (batch, heads, query tokens, page-table capacity W * PS), never from lengths.
class PagedAttentionPlan final : public detail::PlanImpl {
 public:
  // Validates a call with the op's configuration (held by value: a plan may outlive its op).
  using Validate = PagedValidate;
  // hopper_kernel (optional): the hopper backend's kernel for the prefill path (gqa_paged_fwd, 16-bit
  // pools). decode.hopper_kernel (optional): the hopper decode kernel, taken by the decode-like calls it
  // serves (hopper_decode_call_gap); a plan of an explicit 'hopper' (hopper_only) refuses the others.
  PagedAttentionPlan(const char* op, GqaConfig gqa, bool validate_inputs, Validate validate, AttentionKernelChoice choice,
                  std::shared_ptr<const jit::LoadedKernel> kernel, DecodePath decode,
                  std::optional<HopperAttentionChoice> hopper = std::nullopt,
                  std::shared_ptr<const jit::LoadedKernel> hopper_kernel = nullptr, bool hopper_only = false)
      : op_(op), gqa_(std::move(gqa)), validate_inputs_(validate_inputs), validate_(std::move(validate)),
        choice_(std::move(choice)), kernel_(std::move(kernel)), decode_(std::move(decode)),
        hopper_(std::move(hopper)), hopper_kernel_(std::move(hopper_kernel)), hopper_only_(hopper_only),
        workspace_(op, kernel_->device) {}

  void prepare(const TensorArgs& tensors) const override {
    const PagedAttentionCall call = validate_(tensors, Placement::kDevice);
    check_served(call);
    if (decode_like(call)) workspace_.reserve(split_bytes(call, splits(call, hopper_decode(call))));
  }
  std::size_t workspace_bytes() const override { return workspace_.bytes(); }

  void execute(const TensorArgs& tensors, void* stream) const override {
    const PagedAttentionCall call = validate_(tensors, Placement::kDevice);
    if (call.q_dtype != choice_.q_dtype || call.kv_dtype != choice_.kv_dtype ||
        call.compute_dtype != choice_.compute_dtype || call.D != choice_.D || (call.sinks != nullptr) != choice_.sinks ||
        call.device.index != kernel_->device)
      throw InvalidArgument(fmt::format("{}: args: tensors: expected this plan's static signature ({}), got q {}, KV {}, "
                                        "D {}, sinks {}, {}; build a plan for the new signature", op_,
                                        kernel_->compiled->spec.describe(), dtype_name(call.q_dtype),
                                        dtype_name(call.kv_dtype), call.D, call.sinks != nullptr, device_name(call.device)));
    check_served(call);
    const auto& drv = jit::CudaDriver::get();
    drv.bind_device(call.device.index);
    if (validate_inputs_) check_contents(op_, call, call.mha_decode ? nullptr : &gqa_, stream);
    kernels::GqaFwdParams p = paged_params(gqa_, call);
    const int64_t q_rows = call.mha_decode ? call.S_q : call.T_q;
    if (!decode_like(call)) {
      if (hopper_kernel_) {
        kernels::GqaFwdHopperParams hp{};
        hp.p = p;  // paged keys: the producer copies rows itself, no tensor maps
        launch_hopper_attention(op_, *hopper_kernel_, *hopper_, hp, call.B, q_rows, call.H, call.H_kv, stream);
        return;
      }
      launch_attention(op_, *kernel_, choice_, p, call.B, q_rows, call.H, call.H_kv, stream);
      return;
    }
    const bool hopper = hopper_decode(call);  // once per call: the shape checks of hopper_decode_call_gap
    const int n = splits(call, hopper);
    const int64_t rows = tokens(call) * call.H;
    auto lease = workspace_.acquire(split_bytes(call, n), stream);
    p.o_part = reinterpret_cast<float*>(lease.ptr());
    p.lse_part = p.o_part + n * rows * call.D;
    p.part_rows = rows;
    p.n_splits = n;
    if (hopper)
      launch_hopper_decode(op_, *decode_.hopper_kernel, *decode_.hopper, p, call, stream);
    else
      launch_attention(op_, *decode_.kernel, decode_.choice, p, call.B, q_rows, call.H, call.H_kv, stream, n);
    kernels::GqaCombineParams c{};
    c.o_part = p.o_part;
    c.lse_part = p.lse_part;
    c.o = call.o->data;
    c.o_sb = p.o_sb;
    c.o_ss = p.o_ss;
    c.o_sh = p.o_sh;
    c.sinks = p.sinks;
    c.sinks_s = p.sinks_s;
    c.rows = rows;
    c.heads = static_cast<int>(call.H);
    c.s_q = call.mha_decode ? static_cast<int>(call.S_q) : 0;
    c.n_splits = n;
    launch_combine(op_, *decode_.combine, c, stream, decode_.dependent_combine);
  }
  std::string describe() const override {
    return fmt::format("{} kernel plan: {}; decode (<= 16 query rows per request on average): {}{} + {}", op_,
                       kernel_->compiled->spec.describe(), decode_.kernel->compiled->spec.describe(),
                       decode_.hopper_kernel ? " or " + decode_.hopper_kernel->compiled->spec.describe() : std::string(),
                       decode_.combine->compiled->spec.describe());
  }

 private:
  const char* op_;
  GqaConfig gqa_;
  bool validate_inputs_;
  Validate validate_;
  AttentionKernelChoice choice_;
  std::shared_ptr<const jit::LoadedKernel> kernel_;
  DecodePath decode_;
  std::optional<HopperAttentionChoice> hopper_;
  std::shared_ptr<const jit::LoadedKernel> hopper_kernel_;
  bool hopper_only_ = false;
  mutable detail::PlanWorkspace workspace_;

  void check_served(const PagedAttentionCall& call) const {
    if (!hopper_only_ || !decode_like(call)) return;
    const std::string gap = decode_.hopper_kernel ? hopper_decode_call_gap(call) : decode_.hopper_gap;
    if (!gap.empty()) refuse_hopper_decode(op_, gap);
  }
  bool hopper_decode(const PagedAttentionCall& call) const {
    return decode_.hopper_kernel && hopper_decode_call_gap(call).empty();
  }

  static int64_t tokens(const PagedAttentionCall& call) { return call.mha_decode ? call.B * call.S_q : call.T_q; }
  bool decode_like(const PagedAttentionCall& call) const { return paged_decode_like(call); }
  // hopper: hopper_decode(call), which the caller has already computed.
  int splits(const PagedAttentionCall& call, bool hopper) const {
    if (hopper) return hopper_decode_splits(call, decode_.sms, decode_.splits_override);
    const int64_t g = call.H / call.H_kv, BM = decode_.choice.BM;
    const int64_t q_tiles = call.mha_decode ? call.B * ((call.S_q * g + BM - 1) / BM)
                                            : std::max<int64_t>(call.B, (call.T_q * g + BM - 1) / BM);
    if (decode_.splits_override > 0) {
      // The tuning override: at least one key tile per split, and a batched grid keeps B * n <= 65535.
      int64_t n = std::min<int64_t>(decode_.splits_override, std::max<int64_t>(1, (call.W * call.PS + decode_.choice.BN - 1) / decode_.choice.BN));
      if (call.mha_decode) n = std::min<int64_t>(n, std::max<int64_t>(1, 65535 / call.B));
      return static_cast<int>(n);
    }
    return choose_splits(q_tiles * call.H_kv, call.W * call.PS, decode_.choice.BN, decode_.sms,
                         ctas_per_sm(decode_.choice), call.mha_decode ? call.B : 0);
  }
  static std::size_t split_bytes(const PagedAttentionCall& call, int n) {
    return static_cast<std::size_t>(n) * tokens(call) * call.H * (call.D + 1) * sizeof(float);
  }
};

// The kernels of a paged plan: the prefill tile, the split-KV decode tile and the combine.
}  // namespace

std::vector<jit::KernelSpec> paged_specs(const char* op, const AttentionKernelChoice& main, const std::string& decode_tile) {
  AttentionKernelChoice k = main;
  k.sinks = false;
  return {attention_kernel_spec(op, main), attention_kernel_spec(op, decode_variant(op, k, decode_tile)),
          combine_kernel_spec(op, main.compute_dtype, main.D, main.arch)};
}

AttentionKernelChoice choose_paged(const char* op, const GqaConfig& gqa, const PagedAttentionCall& call,
                                   const std::string& arch, const std::string& tile) {
  return choose_attention_kernel(op, gqa, call.q_dtype, call.kv_dtype, call.compute_dtype, call.D, !call.mha_decode,
                                 KvMode::kPaged, call.sinks != nullptr, arch, tile);
}

// The hopper backend serves gqa_paged_fwd's prefill path (16-bit pools in q's dtype): 'auto' takes it
// where it serves, explicit 'hopper' refuses what it does not. The decode path stays portable.
std::optional<HopperAttentionChoice> paged_hopper_choice(const char* op, detail::Backend backend, const GqaConfig& gqa,
                                                         const PagedAttentionCall& call, const std::string& arch) {
  if (backend == detail::Backend::kPortable) return std::nullopt;
  const std::string gap = call.mha_decode ? std::string("it serves gqa_paged_fwd only")
                          : call.kv_dtype != call.q_dtype
                              ? std::string("it reads 16-bit pools in q's dtype")
                              : hopper_attention_gap(gqa, call.q_dtype, call.compute_dtype, call.D, arch);
  if (!gap.empty()) {
    if (backend == detail::Backend::kHopper)
      throw_hopper_gap(op, gap);
    return std::nullopt;
  }
  GqaConfig g = gqa;
  g.varlen = true;
  return choose_hopper_attention(g, call.q_dtype, call.D, call.sinks != nullptr, arch, /*paged=*/true);
}

// The hopper decode kernel where it serves the plan's static signature ('auto' and 'hopper'); an explicit
// 'hopper' refuses a decode-like call it cannot serve.
std::optional<HopperDecodeChoice> paged_hopper_decode_choice(const char* op, detail::Backend backend,
                                                             const GqaConfig& gqa, const PagedAttentionCall& call,
                                                             const std::string& arch) {
  if (backend == detail::Backend::kPortable) return std::nullopt;
  const std::string static_gap = hopper_decode_static_gap(gqa, call, arch);
  if (backend == detail::Backend::kHopper && paged_decode_like(call)) {
    const std::string gap = static_gap.empty() ? hopper_decode_call_gap(call) : static_gap;
    if (!gap.empty()) refuse_hopper_decode(op, gap);
  }
  if (!static_gap.empty()) return std::nullopt;
  return choose_hopper_decode(gqa, call, arch);
}

PagedChoices paged_choices(const char* op, detail::Backend backend, const GqaConfig& gqa, const PagedAttentionCall& call,
                           const std::string& arch, const Tuning& tuning) {
  PagedChoices c;
  c.hopper = paged_hopper_choice(op, backend, gqa, call, arch);
  check_attention_backend(op, c.hopper ? detail::Backend::kPortable : backend, arch);
  c.main = choose_paged(op, gqa, call, arch, tuning.gqa_tile);
  c.hopper_decode = paged_hopper_decode_choice(op, backend, gqa, call, arch);
  return c;
}

std::vector<jit::KernelSpec> paged_kernels_for(const char* op, detail::Backend backend, const GqaConfig& gqa,
                                               const PagedAttentionCall& call, const std::string& arch,
                                               const Tuning& tuning) {
  const PagedChoices c = paged_choices(op, backend, gqa, call, arch, tuning);
  auto specs = paged_specs(op, c.main, tuning.decode_tile);
  if (c.hopper) specs.push_back(hopper_attention_kernel_spec(op, *c.hopper));
  if (c.hopper_decode) specs.push_back(hopper_decode_kernel_spec(op, *c.hopper_decode));
  return specs;
}

// A kernel plan for a validated device call of either op: the prefill tile, the split-KV decode path.
std::shared_ptr<const detail::PlanImpl> paged_kernel_plan(OpContext& ctx, const char* op,
                                                          detail::Backend backend, const GqaConfig& gqa,
                                                          bool validate_inputs, PagedValidate validate,
                                                          const PagedAttentionCall& call) {
  const std::string arch = ctx.arch_for_device(call.device.index);
  PagedChoices c = paged_choices(op, backend, gqa, call, arch, ctx.tuning());
  auto kernel = load_attention_kernel(ctx, op, c.main, call.device.index);
  DecodePath decode = load_decode_path(ctx, op, c.main, call.device.index, c.hopper_decode);
  if (!decode.hopper_kernel) decode.hopper_gap = hopper_decode_static_gap(gqa, call, arch);
  std::shared_ptr<const jit::LoadedKernel> hopper_kernel;
  if (c.hopper) hopper_kernel = load_hopper_attention_kernel(ctx, op, *c.hopper, call.device.index);
  return std::make_shared<PagedAttentionPlan>(op, gqa, validate_inputs, std::move(validate), std::move(c.main),
                                           std::move(kernel), std::move(decode), std::move(c.hopper),
                                           std::move(hopper_kernel), backend == detail::Backend::kHopper);
}

std::vector<jit::KernelSpec> paged_default_matrix(const char* op, bool mha, const std::string& arch) {
  std::vector<jit::KernelSpec> specs;
  GqaConfig gqa;
  gqa.varlen = !mha;
  for (DType dt : {DType::kF16, DType::kBF16})
    for (int D : {64, 128, 256})
      for (bool causal : {false, true}) {
        gqa.is_causal = causal;
        auto add = [&](const jit::KernelSpec& s) {
          if (std::find_if(specs.begin(), specs.end(), [&](const jit::KernelSpec& x) { return x.name == s.name; }) ==
              specs.end())
            specs.push_back(s);
        };
        for (const auto& s :
             paged_specs(op, choose_attention_kernel(op, gqa, dt, dt, dt, D, !mha, KvMode::kPaged, false, arch, ""), ""))
          add(s);
        if (!has_hopper_kernels(arch)) continue;
        // On sm_90a 'auto' takes the hopper decode kernel for D 64/128 (both ops) and the hopper prefill
        // kernel (gqa_paged_fwd).
        if (!mha) add(hopper_attention_kernel_spec(op, choose_hopper_attention(gqa, dt, D, false, arch, /*paged=*/true)));
        if (D != 256) {
          HopperDecodeChoice decode;
          decode.dtype = dt;
          decode.D = D;
          decode.causal = causal;
          decode.batched = mha;
          decode.arch = arch;
          add(hopper_decode_kernel_spec(op, decode));
        }
      }
  return specs;
}

}  // namespace attnjit::ops
