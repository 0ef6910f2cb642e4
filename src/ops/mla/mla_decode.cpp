// mla_decode (SPEC.md §2.13, extended as docs/ops/mla_decode.md says: per-request cache_seqlens, a paged
// latent cache through block_table, S_q > 1 query tokens): configuration, validation, content checks and
// the kernel plan (ops/mla/latent_kernel.hpp: the latent-decode kernel shared with dsa_decode) and the
// reference plan.
#include <fmt/format.h>

#include <cmath>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "attnjit/error.hpp"
#include "ops/base/context.hpp"
#include "ops/base/host_copy.hpp"
#include "ops/base/op.hpp"
#include "ops/base/op_helpers.hpp"
#include "ops/base/validation.hpp"
#include "ops/mla/latent_kernel.hpp"
#include "ops/mla/mla_call.hpp"
#include "ops/mla/reference.hpp"
#include "ops/registry.hpp"

namespace attnjit::ops {

namespace {

using detail::ArgChecker;
using detail::Placement;

constexpr const char* kOp = "mla_decode";

bool accepted_head_dim(int64_t D) { return D == 128 || D == 256 || D == 512; }
constexpr int64_t kPe = 64;

}  // namespace

MlaDecodeConfig parse_mla_decode_config(const detail::ConfigReader& r) {
  MlaDecodeConfig c;
  c.validate_inputs = r.get_bool("validate_inputs", false);
  c.kv_splits = parse_latent_kv_splits(kOp, r);
  return c;
}

const std::vector<std::string>& mla_decode_config_keys() {
  static const std::vector<std::string> keys = {"validate_inputs", "kv_splits"};
  return keys;
}

MlaDecodeCall validate_mla_decode_call(const MlaDecodeConfig& cfg, const TensorArgs& args, Placement placement) {
  (void)cfg;
  ArgChecker c(kOp, args, placement);
  c.only_known({"q", "q_pe", "k", "k_pe", "cache_seqlens", "block_table", "o"});
  MlaDecodeCall call;
  call.q = &c.required("q");
  call.q_pe = &c.required("q_pe");
  call.k = &c.required("k");
  call.k_pe = &c.required("k_pe");
  call.o = &c.required("o");
  call.cache_seqlens = c.optional("cache_seqlens");
  call.block_table = c.optional("block_table");
  if (call.block_table && !call.cache_seqlens)
    c.fail("args", "cache_seqlens", "expected a tensor with block_table (a paged cache needs per-request lengths), got none");
  const TensorRef &q = *call.q, &q_pe = *call.q_pe, &k = *call.k, &k_pe = *call.k_pe, &o = *call.o;

  // dtypes: 16-bit, one dtype; metadata int32
  c.dtype_in("q", q, {DType::kF16, DType::kBF16});
  call.dtype = q.dtype;
  for (auto [name, t] : {std::pair{"q_pe", call.q_pe}, std::pair{"k", call.k}, std::pair{"k_pe", call.k_pe},
                         std::pair{"o", call.o}})
    c.dtype_is(name, *t, call.dtype, "(q's dtype)");
  if (call.cache_seqlens) c.dtype_is("cache_seqlens", *call.cache_seqlens, DType::kI32);
  if (call.block_table) c.dtype_is("block_table", *call.block_table, DType::kI32);

  // ranks: q rank 3 (one query token) or 4 (S_q tokens); q_pe and o follow q
  if (q.ndim != 3 && q.ndim != 4)
    c.fail("shape", "q", "expected 3 dims [B, H, D] or 4 dims [B, S_q, H, D], got {}", q.shape_str());
  call.q_rank = q.ndim;
  const bool r4 = call.q_rank == 4;
  c.rank("q_pe", q_pe, call.q_rank, r4 ? "[B, S_q, H, PE] (q's rank)" : "[B, H, PE] (q's rank)");
  c.rank("o", o, call.q_rank, r4 ? "[B, S_q, H, D] (q's rank)" : "[B, H, D] (q's rank)");
  const bool paged = call.paged();
  c.rank("k", k, 4, paged ? "[NP, PS, H_kv, D] (a page pool, with block_table)" : "[B, N_kv, H_kv, D]");
  c.rank("k_pe", k_pe, 4, paged ? "[NP, PS, H_kv, PE] (a page pool, with block_table)" : "[B, N_kv, H_kv, PE]");
  if (call.cache_seqlens) c.rank("cache_seqlens", *call.cache_seqlens, 1, "[B]");
  if (call.block_table) c.rank("block_table", *call.block_table, 2, "[B, W]");

  // extents
  const int hd = call.q_rank - 2;  // q's head axis
  call.B = q.shape[0];
  call.S_q = r4 ? q.shape[1] : 1;
  call.H = q.shape[hd];
  call.D = q.shape[hd + 1];
  call.PE = q_pe.shape[hd + 1];
  c.extent("q_pe", q_pe, 0, call.B, "B");
  if (r4) c.extent("q_pe", q_pe, 1, call.S_q, "S_q");
  c.extent("q_pe", q_pe, hd, call.H, "H");
  for (int d = 0; d < call.q_rank; ++d) {
    static constexpr const char* kDims3[] = {"B", "H", "D"};
    static constexpr const char* kDims4[] = {"B", "S_q", "H", "D"};
    c.extent("o", o, d, q.shape[d], r4 ? kDims4[d] : kDims3[d]);
  }
  call.H_kv = k.shape[2];
  if (paged) {
    call.NP = k.shape[0];
    call.PS = k.shape[1];
    c.extent("k_pe", k_pe, 0, call.NP, "NP, k's page count");
    c.extent("k_pe", k_pe, 1, call.PS, "PS, k's page size");
  } else {
    c.extent("k", k, 0, call.B, "B");
    call.N_kv = k.shape[1];
    c.extent("k_pe", k_pe, 0, call.B, "B");
    c.extent("k_pe", k_pe, 1, call.N_kv, "N_kv, k's cache length");
  }
  c.extent("k", k, 3, call.D, "D, q's head dim");
  c.extent("k_pe", k_pe, 2, call.H_kv, "H_kv, k's heads");
  c.extent("k_pe", k_pe, 3, call.PE, "PE, q_pe's head dim");
  if (call.cache_seqlens) c.extent("cache_seqlens", *call.cache_seqlens, 0, call.B, "B");
  if (call.block_table) {
    c.extent("block_table", *call.block_table, 0, call.B, "B");
    call.W = call.block_table->shape[1];
  }

  // accepted head dims, head counts, page size
  if (!accepted_head_dim(call.D)) c.fail("shape", "q", "expected head dim D in {{128, 256, 512}}, got {}", call.D);
  if (call.PE != kPe) c.fail("shape", "q_pe", "expected rope head dim PE = 64, got {}", call.PE);
  if (call.H < 1) c.fail("shape", "q", "expected H >= 1 query heads, got {}", call.H);
  if (call.H_kv < 1 || call.H % call.H_kv != 0)
    c.fail("shape", "k", "expected H_kv dividing H (H % H_kv == 0), got H = {}, H_kv = {}", call.H, call.H_kv);
  if (paged && (call.PS < 16 || call.PS % 16 != 0))
    c.fail("shape", "k", "expected page size PS a multiple of 16 (64 is the usual one), got {}", call.PS);

  // layouts: inputs class F (read-only: zero strides allowed), metadata class M, o class O
  c.feature("q", q, /*read_only=*/true);
  c.feature("q_pe", q_pe, true);
  c.feature("k", k, true);
  c.feature("k_pe", k_pe, true);
  if (call.cache_seqlens) c.metadata("cache_seqlens", *call.cache_seqlens);
  if (call.block_table) c.metadata("block_table", *call.block_table);
  c.output("o", o, {{"q", call.q}, {"q_pe", call.q_pe}, {"k", call.k}, {"k_pe", call.k_pe},
                    {"cache_seqlens", call.cache_seqlens}, {"block_table", call.block_table}});

  // devices: one placement for all
  for (auto [name, t] : {std::pair{"q", call.q}, std::pair{"q_pe", call.q_pe}, std::pair{"k", call.k},
                         std::pair{"k_pe", call.k_pe}, std::pair{"cache_seqlens", call.cache_seqlens},
                         std::pair{"block_table", call.block_table}, std::pair{"o", call.o}})
    if (t) c.device(name, *t);
  call.device = c.call_device();
  call.scale = 1.0 / std::sqrt(static_cast<double>(call.D + call.PE));
  return call;
}

void check_mla_decode_contents(const MlaDecodeCall& call, void* stream) {
  if (!call.cache_seqlens || call.B == 0) return;  // without lengths there is no value contract
  detail::prepare_content_checks(kOp, call.device, stream);
  auto fail = [](std::string_view arg, const std::string& what) {
    throw InvalidArgument(fmt::format("{}: content: {}: {}", kOp, arg, what));
  };
  auto lens_h = detail::host_view(*call.cache_seqlens);
  const auto* lens = static_cast<const int32_t*>(lens_h.ref.data);
  const int64_t cap = call.paged() ? call.W * call.PS : call.N_kv;
  detail::HostView table_h;
  const int32_t* table = nullptr;
  if (call.paged()) {
    table_h = detail::host_view(*call.block_table);
    table = static_cast<const int32_t*>(table_h.ref.data);
  }
  for (int64_t b = 0; b < call.B; ++b) {
    const int64_t L = lens[b * lens_h.ref.strides[0]];
    if (L < 0 || L > cap)
      fail("cache_seqlens",
           fmt::format("expected 0 <= cache_seqlens[b] <= {} ({}), got {} at [{}]", cap,
                       call.paged() ? fmt::format("W * PS = {} * {}", call.W, call.PS) : "N_kv", L, b));
    if (!call.paged()) continue;
    for (int64_t pg = 0; pg < (L + call.PS - 1) / call.PS; ++pg) {
      const int64_t e = table[b * table_h.ref.strides[0] + pg * table_h.ref.strides[1]];
      if (e < 0 || e >= call.NP)
        fail("block_table", fmt::format("expected pages in [0, NP = {}) for the used entries (ceil(cache_seqlens[b] / "
                                        "PS) per request), got {} at [{}, {}]",
                                        call.NP, e, b, pg));
    }
  }
}

namespace {

constexpr float kLog2e = 1.44269504088896340736f;

// The latent kernel's parameters and shape of a validated call.
LatentShape latent_params(const MlaDecodeCall& c, kernels::LatentDecodeParams& p) {
  const bool r4 = c.q_rank == 4;
  auto rows3 = [&](const TensorRef& t, long long& sb, long long& ss, long long& sh) {
    sb = t.strides[0];
    ss = r4 ? t.strides[1] : 0;
    sh = t.strides[r4 ? 2 : 1];
  };
  p.q = c.q->data;
  rows3(*c.q, p.q_sb, p.q_ss, p.q_sh);
  p.q_tail = c.q_pe->data;
  rows3(*c.q_pe, p.qt_sb, p.qt_ss, p.qt_sh);
  p.o = c.o->data;
  rows3(*c.o, p.o_sb, p.o_ss, p.o_sh);
  p.k = c.k->data;
  p.k_sb = c.k->strides[0], p.k_ss = c.k->strides[1], p.k_sh = c.k->strides[2];
  p.k_tail = c.k_pe->data;
  p.kt_sb = c.k_pe->strides[0], p.kt_ss = c.k_pe->strides[1], p.kt_sh = c.k_pe->strides[2];
  if (c.cache_seqlens) {
    p.seqlens = static_cast<const int*>(c.cache_seqlens->data);
    p.seqlens_s = c.cache_seqlens->strides[0];
  }
  if (c.block_table) {
    p.block_table = static_cast<const int*>(c.block_table->data);
    p.bt_sb = c.block_table->strides[0], p.bt_sp = c.block_table->strides[1];
    p.page_size = static_cast<int>(c.PS);
  }
  p.batch = static_cast<int>(c.B);
  p.s_q = static_cast<int>(c.S_q);
  p.h = static_cast<int>(c.H);
  p.h_kv = static_cast<int>(c.H_kv);
  p.group = static_cast<int>(c.group());
  p.n_kv = static_cast<int>(c.N_kv);
  p.n_splits = 1;
  p.scale_log2 = static_cast<float>(c.scale) * kLog2e;
  LatentShape s;
  s.dtype = c.dtype;
  s.D = static_cast<int>(c.D);
  s.tail = static_cast<int>(c.PE);
  s.mode = c.paged() ? kernels::kLatentPaged : kernels::kLatentDense;
  s.B = c.B;
  s.tokens = c.S_q;
  s.H = c.H;
  s.H_kv = c.H_kv;
  s.rows = c.S_q * c.group();
  s.grid_y = c.H_kv;
  s.max_keys = c.paged() ? c.W * c.PS : c.N_kv;
  s.device = c.device.index;
  return s;
}

// Positions and extents the kernel indexes with 32-bit integers.
void check_int32_extents(const MlaDecodeCall& c) {
  constexpr int64_t kMax = int64_t{1} << 30;
  if (c.N_kv > kMax || c.W * c.PS > kMax || c.S_q * c.H > kMax)
    throw Unsupported(fmt::format("{}: unsupported: cache lengths and S_q * H beyond 2^30 are not served (N_kv {}, "
                                  "W * PS {}, S_q * H {})",
                                  kOp, c.N_kv, c.W * c.PS, c.S_q * c.H));
}

class MlaDecodeOp final : public detail::OpInstance {
 public:
  MlaDecodeOp(OpContext& ctx, const nlohmann::json& config)
      : MlaDecodeOp(ctx, detail::ConfigReader(kOp, config, mla_decode_config_keys())) {}

  std::vector<jit::KernelSpec> kernels_for(const TensorArgs& tensors, const std::string& arch) const override {
    const MlaDecodeCall call = validate_mla_decode_call(cfg_, tensors, Placement::kDevice);
    kernels::LatentDecodeParams p{};
    return latent_plan_specs(kOp, latent_params(call, p), cfg_.kv_splits, backend_, arch, hopper_bn(ctx_));
  }

 protected:
  Plan plan_for(const TensorArgs& tensors) override {
    const MlaDecodeCall call = validate_mla_decode_call(cfg_, tensors, placement_for(impl_));
    if (impl_ != detail::Impl::kReference)
      return cached(fmt::format("kernel.{}.{}.{}.{}.{}", static_cast<int>(call.dtype), call.D, call.PE, call.paged(),
                                call.device.index),
                    tensors, [&] {
                      kernels::LatentDecodeParams p0{};
                      return make_latent_plan(
                          ctx_, kOp, latent_params(call, p0), cfg_.kv_splits, backend_,
                          [cfg = cfg_](const TensorArgs& t, void* stream, bool executing,
                                       kernels::LatentDecodeParams& p) {
                            const MlaDecodeCall c = validate_mla_decode_call(cfg, t, Placement::kDevice);
                            check_int32_extents(c);
                            if (cfg.validate_inputs && executing) check_mla_decode_contents(c, stream);
                            return latent_params(c, p);
                          });
                    });
    return cached("reference", tensors, [&] {
      return reference_plan(kOp, [cfg = cfg_](const TensorArgs& t, void* stream) {
        const MlaDecodeCall call = validate_mla_decode_call(cfg, t, Placement::kHost);
        // The reference checks the value contract on every call (validate_inputs or not): it never reads
        // out of bounds, and a violation writes nothing.
        check_mla_decode_contents(call, stream);
        reference::mla_decode(call);
      });
    });
  }

 private:
  MlaDecodeOp(OpContext& ctx, const detail::ConfigReader& r)
      : OpInstance(ctx, kOp, r.impl(), r.backend()), cfg_(parse_mla_decode_config(r)) {}
  MlaDecodeConfig cfg_;
};

}  // namespace

}  // namespace attnjit::ops

namespace attnjit::detail {

OpDefinition mla_decode_definition() {
  // The DeepSeek shape: D 512, PE 64, fp16 and bf16, contiguous and paged caches, with and without splits.
  return ops::op_definition<ops::MlaDecodeOp>(ops::kOp, [](const std::string& arch) {
    std::vector<jit::KernelSpec> specs;
    for (DType dt : {DType::kF16, DType::kBF16})
      for (int mode : {kernels::kLatentDense, kernels::kLatentPaged})
        for (auto& s : ops::latent_warmup_specs(ops::kOp, dt, 512, 64, mode, mode == kernels::kLatentDense, arch)) specs.push_back(std::move(s));
    return specs;
  });
}

// Rank: the op's place in `attnjit info` and the warm-up (ops/registry.hpp), after the paged ops.
const OpRegistrar kMlaDecodeRegistrar{62, &mla_decode_definition};

}  // namespace attnjit::detail
