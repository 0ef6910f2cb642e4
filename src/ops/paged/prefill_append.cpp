// gqa_prefill_paged_append (SPEC.md §2.10): packed chunked prefill that attends each new token to its
// request's paged cache plus the chunk, and appends the chunk's keys and values to the cache.
//
// Kernel plan, two launches on the caller's stream:
//  1. prefill_append (templates/paged/prefill_append.cuh): stores the new rows into the pool (16-bit as
//     they are, e4m3 as e4m3(x / scale)); with fuse_rope it first rotates q and k_new (tables computed
//     from rope_base, rounded to q's dtype) into the plan's workspace and stores the rotated keys.
//  2. the portable attention kernel in KV mode 3 (kPagedAppend): key j < old is pool row
//     block_table[b, j / PS] * PS + j % PS (e4m3 rows dequantised as rnd(decode(x) * scale)), key
//     j >= old is the chunk's unquantised new row. Step 2 never reads a row step 1 writes (the caller
//     contract keeps written rows out of every request's reads).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <optional>
#include <unordered_map>
#include <vector>

#include "attnjit/error.hpp"
#include "jit/cuda_driver.hpp"
#include "jit/spec_builder.hpp"
#include "ops/base/op_helpers.hpp"
#include "ops/attention/attention_kernel.hpp"
#include "ops/attention/attention_math.hpp"
#include "paged/prefill_append_params.cuh"
#include "ops/base/host_copy.hpp"
#include "base/host_numeric.hpp"
#include "ops/base/op.hpp"
#include "ops/base/context.hpp"
#include "ops/base/validation.hpp"
#include "ops/base/workspace.hpp"
#include "ops/registry.hpp"
#include "ops/base/launch.hpp"

namespace attnjit::ops {

namespace {

using detail::ArgChecker;
using detail::Placement;

constexpr const char* kOp = "gqa_prefill_paged_append";

struct AppendConfig {
  int64_t page_size = 0;
  int64_t max_seqlen_q = 0;
  bool is_causal = true;
  std::optional<DType> cache_dtype;  // unset: q's dtype
  std::optional<double> sm_scale;
  double softcap = 0;
  bool fuse_rope = false;
  double rope_base = 10000.0;
  int64_t max_position = 0;  // with fuse_rope
  std::optional<int64_t> rotary_dim;
  bool validate_inputs = false;
};

[[noreturn]] void param_error(std::string_view name, const std::string& what) {
  throw InvalidArgument(fmt::format("{}: param: {}: {}", kOp, name, what));
}

int64_t get_int(const detail::ConfigReader& r, const char* key, int64_t min) {
  const double v = r.get_number(key, 0);
  if (v != std::floor(v) || v < static_cast<double>(min) || v > static_cast<double>(1LL << 40))
    param_error(key, fmt::format("expected an integer >= {}, got {}", min, v));
  return static_cast<int64_t>(v);
}

AppendConfig parse_config(const detail::ConfigReader& r) {
  AppendConfig c;
  if (!r.has("page_size")) param_error("page_size", "expected a power of two >= 1, got none");
  c.page_size = get_int(r, "page_size", 1);
  if ((c.page_size & (c.page_size - 1)) != 0)
    param_error("page_size", fmt::format("expected a power of two >= 1, got {}", c.page_size));
  if (!r.has("max_seqlen_q")) param_error("max_seqlen_q", "expected an integer >= 1, got none");
  c.max_seqlen_q = get_int(r, "max_seqlen_q", 1);
  c.is_causal = r.get_bool("is_causal", true);
  if (r.has("cache_dtype")) {
    const std::string s = r.get_string("cache_dtype", "");
    auto dt = parse_dtype(s);
    if (!dt || (*dt != DType::kF16 && *dt != DType::kBF16 && *dt != DType::kE4M3))
      param_error("cache_dtype", fmt::format("expected \"fp16\", \"bf16\" or \"e4m3\", got \"{}\"", s));
    c.cache_dtype = *dt;
  }
  if (r.has("sm_scale")) {
    const double s = r.get_number("sm_scale", 0);
    if (!std::isfinite(s) || s <= 0) param_error("sm_scale", fmt::format("expected a finite value > 0, got {}", s));
    c.sm_scale = s;
  }
  c.softcap = r.get_number("softcap", 0);
  if (!std::isfinite(c.softcap) || c.softcap < 0)
    param_error("softcap", fmt::format("expected a finite value >= 0, got {}", c.softcap));
  c.fuse_rope = r.get_bool("fuse_rope", false);
  c.rope_base = r.get_number("rope_base", 10000.0);
  if (!std::isfinite(c.rope_base) || c.rope_base <= 0)
    param_error("rope_base", fmt::format("expected a finite value > 0, got {}", c.rope_base));
  if (c.fuse_rope) {
    if (!r.has("max_position")) param_error("max_position", "expected an integer >= 1 with fuse_rope, got none");
    c.max_position = get_int(r, "max_position", 1);
    if (c.cache_dtype == DType::kE4M3)
      param_error("fuse_rope", "expected no fuse_rope with an e4m3 cache_dtype, got fuse_rope = true");
  }
  if (r.has("rotary_dim")) {
    if (!c.fuse_rope) param_error("rotary_dim", "expected no rotary_dim without fuse_rope, got one");
    const double rd = r.get_number("rotary_dim", 0);
    if (rd != std::floor(rd) || rd < 2 || static_cast<int64_t>(rd) % 2 != 0)
      param_error("rotary_dim", fmt::format("expected an even integer >= 2, got {}", rd));
    c.rotary_dim = static_cast<int64_t>(rd);
  }
  c.validate_inputs = r.get_bool("validate_inputs", false);
  return c;
}

struct AppendCall {
  const TensorRef *q = nullptr, *k_new = nullptr, *v_new = nullptr, *k_pages = nullptr, *v_pages = nullptr;
  const TensorRef *k_scale = nullptr, *v_scale = nullptr, *cu_seqlens_q = nullptr, *cache_seqlens = nullptr;
  const TensorRef *block_table = nullptr, *o = nullptr;
  DType q_dtype = DType::kBF16, cache_dtype = DType::kBF16;
  int64_t T_q = 0, H = 0, H_kv = 0, D = 0, PT = 0, B = 0, W = 0, R = 0;
  float scale = 0;
  Device device{};
};

AppendCall validate_call(const AppendConfig& cfg, const TensorArgs& args, Placement placement) {
  ArgChecker c(kOp, args, placement);
  c.only_known({"q", "k_new", "v_new", "k_pages", "v_pages", "k_scale", "v_scale", "cu_seqlens_q", "cache_seqlens",
                "block_table", "o"});
  AppendCall call;
  const TensorRef& q = c.required("q");
  const TensorRef& kn = c.required("k_new");
  const TensorRef& vn = c.required("v_new");
  const TensorRef& kp = c.required("k_pages");
  const TensorRef& vp = c.required("v_pages");
  const TensorRef& ks = c.required("k_scale");
  const TensorRef& vs = c.required("v_scale");
  const TensorRef& cq = c.required("cu_seqlens_q");
  const TensorRef& cs = c.required("cache_seqlens");
  const TensorRef& bt = c.required("block_table");
  const TensorRef& o = c.required("o");
  call.q = &q, call.k_new = &kn, call.v_new = &vn, call.k_pages = &kp, call.v_pages = &vp, call.k_scale = &ks;
  call.v_scale = &vs, call.cu_seqlens_q = &cq, call.cache_seqlens = &cs, call.block_table = &bt, call.o = &o;

  c.dtype_in("q", q, {DType::kF16, DType::kBF16});
  c.dtype_is("k_new", kn, q.dtype, "(q's dtype)");
  c.dtype_is("v_new", vn, q.dtype, "(q's dtype)");
  call.q_dtype = q.dtype;
  call.cache_dtype = cfg.cache_dtype.value_or(q.dtype);
  if (call.cache_dtype != q.dtype && call.cache_dtype != DType::kE4M3)
    c.fail("dtype", "cache_dtype", "expected q's dtype {} or e4m3, got {}", dtype_name(q.dtype),
           dtype_name(call.cache_dtype));
  c.dtype_is("k_pages", kp, call.cache_dtype, "(the cache dtype)");
  c.dtype_is("v_pages", vp, call.cache_dtype, "(the cache dtype)");
  c.dtype_is("k_scale", ks, DType::kF32);
  c.dtype_is("v_scale", vs, DType::kF32);
  c.dtype_is("cu_seqlens_q", cq, DType::kI32);
  c.dtype_is("cache_seqlens", cs, DType::kI32);
  c.dtype_is("block_table", bt, DType::kI32);

  c.rank("q", q, 3, "[T_q, H, D]");
  call.T_q = q.shape[0];
  call.H = q.shape[1];
  call.D = q.shape[2];
  c.rank("k_new", kn, 3, "[T_q, H_kv, D]");
  c.extent("k_new", kn, 0, call.T_q, "T_q");
  call.H_kv = kn.shape[1];
  c.extent("k_new", kn, 2, call.D, "D, q's head dim");
  c.rank("v_new", vn, 3, "[T_q, H_kv, D]");
  for (int d = 0; d < 3; ++d) c.extent("v_new", vn, d, kn.shape[d], "k_new's shape");
  if (call.H < 1) c.fail("shape", "q", "expected H >= 1, got {}", call.H);
  if (call.H_kv < 1) c.fail("shape", "k_new", "expected H_kv >= 1, got {}", call.H_kv);
  if (call.H % call.H_kv != 0)
    c.fail("shape", "k_new", "expected H_kv dividing q's H = {}, got H_kv = {}", call.H, call.H_kv);
  if (call.D != 64 && call.D != 128 && call.D != 256)
    c.fail("shape", "q", "expected head dim D in {{64, 128, 256}}, got {}", call.D);
  c.rank("k_pages", kp, 3, "[PT, H_kv, D]");
  call.PT = kp.shape[0];
  c.extent("k_pages", kp, 1, call.H_kv, "H_kv, k_new's head count");
  c.extent("k_pages", kp, 2, call.D, "D, q's head dim");
  c.rank("v_pages", vp, 3, "[PT, H_kv, D]");
  for (int d = 0; d < 3; ++d) c.extent("v_pages", vp, d, kp.shape[d], "k_pages' shape");
  if (call.PT % cfg.page_size != 0)
    c.fail("shape", "k_pages", "expected PT a multiple of page_size {}, got PT = {}", cfg.page_size, call.PT);
  if (cfg.fuse_rope) {
    call.R = cfg.rotary_dim.value_or(call.D);
    if (call.R > call.D) c.fail("shape", "rotary_dim", "expected rotary_dim <= D = {}, got {}", call.D, call.R);
  }
  for (auto [name, t] : {std::pair{"k_scale", &ks}, std::pair{"v_scale", &vs}}) {
    c.rank(name, *t, 1, "[1]");
    c.extent(name, *t, 0, 1, "1");
  }
  c.rank("cu_seqlens_q", cq, 1, "[B + 1]");
  if (cq.shape[0] < 1) c.fail("shape", "cu_seqlens_q", "expected length B + 1 >= 1, got {}", cq.shape[0]);
  call.B = cq.shape[0] - 1;
  c.rank("cache_seqlens", cs, 1, "[B]");
  c.extent("cache_seqlens", cs, 0, call.B, "B");
  c.rank("block_table", bt, 2, "[B, W]");
  c.extent("block_table", bt, 0, call.B, "B");
  call.W = bt.shape[1];
  c.rank("o", o, 3, "[T_q, H, D]");
  for (int d = 0; d < 3; ++d) c.extent("o", o, d, q.shape[d], "q's shape");
  c.dtype_is("o", o, q.dtype, "(q's dtype)");

  c.feature("q", q, true);
  c.feature("k_new", kn, true);
  c.feature("v_new", vn, true);
  c.feature("k_pages", kp, false);
  c.feature("v_pages", vp, false);
  c.contiguous("k_pages", kp, true);
  c.contiguous("v_pages", vp, true);
  c.metadata("k_scale", ks);
  c.metadata("v_scale", vs);
  c.contiguous("cu_seqlens_q", cq, false);
  c.metadata("cache_seqlens", cs);
  c.metadata("block_table", bt);
  c.output("o", o, {{"q", &q}, {"k_new", &kn}, {"v_new", &vn}, {"k_pages", &kp}, {"v_pages", &vp}});
  for (auto [name, t] : {std::pair{"q", &q}, std::pair{"k_new", &kn}, std::pair{"v_new", &vn}, std::pair{"k_pages", &kp},
                         std::pair{"v_pages", &vp}, std::pair{"k_scale", &ks}, std::pair{"v_scale", &vs},
                         std::pair{"cu_seqlens_q", &cq}, std::pair{"cache_seqlens", &cs}, std::pair{"block_table", &bt},
                         std::pair{"o", &o}})
    c.device(name, *t);
  call.device = c.call_device();
  call.scale = static_cast<float>(cfg.sm_scale.value_or(1.0 / std::sqrt(static_cast<double>(call.D))));
  return call;
}

int64_t int_at(const TensorRef& t, int64_t off) { return static_cast<const int32_t*>(t.data)[off]; }

// One request as the caller contract describes it.
struct Request {
  int64_t q0 = 0, q_len = 0, old = 0;
};

// validate_inputs (SPEC.md §2.10 caller contract) on host copies; throws `content` naming the first
// offending element. `reference_guard` is the subset the CPU reference needs to stay in bounds.
std::vector<Request> check_requests(const AppendConfig& cfg, const AppendCall& call, bool full) {
  auto fail = [&](std::string_view arg, const std::string& what) {
    throw InvalidArgument(fmt::format("{}: content: {}: {}", kOp, arg, what));
  };
  auto cq = detail::host_view(*call.cu_seqlens_q);
  auto cs = detail::host_view(*call.cache_seqlens);
  auto bt = detail::host_view(*call.block_table);
  const TensorRef &cu = cq.ref, &lens = cs.ref, &table = bt.ref;
  std::vector<Request> reqs(static_cast<size_t>(call.B));
  const int64_t cu0 = int_at(cu, 0);
  if (cu0 != 0) fail("cu_seqlens_q", fmt::format("expected element 0 to be 0, got {}", cu0));
  const int64_t pages = call.PT / cfg.page_size;
  for (int64_t b = 0; b < call.B; ++b) {
    Request& r = reqs[b];
    r.q0 = int_at(cu, b);
    const int64_t next = int_at(cu, b + 1);
    if (next < r.q0)
      fail("cu_seqlens_q", fmt::format("expected non-decreasing offsets, got {} after {} at index {}", next, r.q0, b + 1));
    r.q_len = next - r.q0;
    r.old = int_at(lens, b * lens.strides[0]);
    if (full && r.q_len > cfg.max_seqlen_q)
      fail("cu_seqlens_q", fmt::format("expected request lengths <= max_seqlen_q = {}, got {} for request {}",
                                       cfg.max_seqlen_q, r.q_len, b));
    if (r.old < 0) fail("cache_seqlens", fmt::format("expected lengths >= 0, got {} at index {}", r.old, b));
    if (r.old + r.q_len > call.W * cfg.page_size)
      fail("cache_seqlens", fmt::format("expected old + q_len <= W * page_size = {}, got {} + {} for request {}",
                                        call.W * cfg.page_size, r.old, r.q_len, b));
    if (full && cfg.fuse_rope && r.old + r.q_len > cfg.max_position)
      fail("cache_seqlens", fmt::format("expected old + q_len <= max_position = {} with fuse_rope, got {} + {} for "
                                        "request {}", cfg.max_position, r.old, r.q_len, b));
    const int64_t used = r.q_len > 0 ? (r.old + r.q_len + cfg.page_size - 1) / cfg.page_size : 0;
    for (int64_t p = 0; p < used; ++p) {
      const int64_t e = int_at(table, b * table.strides[0] + p * table.strides[1]);
      if (e < 0 || e >= pages)
        fail("block_table", fmt::format("expected pool pages in [0, {}), got {} at [{}, {}]", pages, e, b, p));
    }
  }
  const int64_t end = int_at(cu, call.B);
  if (end != call.T_q) fail("cu_seqlens_q", fmt::format("expected the last offset to be T_q = {}, got {}", call.T_q, end));
  if (!full) return reqs;
  // Written rows pairwise distinct and never read by another request.
  auto row_of = [&](int64_t b, int64_t x) {
    return int_at(table, b * table.strides[0] + (x / cfg.page_size) * table.strides[1]) * cfg.page_size +
           x % cfg.page_size;
  };
  std::unordered_map<int64_t, int64_t> writer;  // pool row -> request writing it
  for (int64_t b = 0; b < call.B; ++b)
    for (int64_t x = reqs[b].old; x < reqs[b].old + reqs[b].q_len; ++x) {
      auto [it, fresh] = writer.emplace(row_of(b, x), b);
      if (!fresh)
        fail("block_table", fmt::format("expected the rows written by the call to be distinct, got pool row {} written "
                                        "by requests {} and {}", it->first, it->second, b));
    }
  for (int64_t b = 0; b < call.B; ++b) {
    if (reqs[b].q_len == 0) continue;
    for (int64_t x = 0; x < reqs[b].old; ++x) {
      auto it = writer.find(row_of(b, x));
      if (it != writer.end() && it->second != b)
        fail("block_table", fmt::format("expected no request to read a row another request writes, got pool row {} "
                                        "read by request {} and written by request {}", it->first, b, it->second));
    }
  }
  if (call.cache_dtype == DType::kE4M3) {
    for (auto [name, t] : {std::pair{"k_scale", call.k_scale}, std::pair{"v_scale", call.v_scale}}) {
      auto h = detail::host_view(*t);
      const float s = static_cast<const float*>(h.ref.data)[0];
      if (!(std::isfinite(s) && s > 0)) fail(name, fmt::format("expected a finite scale > 0, got {}", s));
    }
  }
  return reqs;
}

// ---- CPU reference.

double round_to(DType dt, double v) {
  uint64_t bits = 0;  // NOTE: wide enough for any dtype (dt is 16-bit here; GCC checks every case)
  numeric::store_from_double(&bits, dt, 0, v);
  return numeric::load_as_double(&bits, dt, 0);
}

// fuse_rope: rotates the first R channels of x (values of dtype dt) at position pos, neox pairs, with
// the contract's fp32 tables rounded to dt; the result is rounded to dt.
void rope_row(const AppendConfig& cfg, DType dt, int64_t R, int64_t pos, int64_t D, double* x) {
  std::vector<double> y(x, x + D);
  const int64_t half = R / 2;
  for (int64_t c = 0; c < half; ++c) {
    // inv_freq correctly rounded to fp32, the fp32 angle, cos/sin in double rounded to dt (the kernel
    // evaluates the same way; see templates/paged/prefill_append.cuh).
    const float inv_freq =
        static_cast<float>(1.0 / std::pow(static_cast<double>(static_cast<float>(cfg.rope_base)), 2.0 * c / R));
    const float angle = static_cast<float>(pos) * inv_freq;
    const double cs = round_to(dt, static_cast<float>(std::cos(static_cast<double>(angle))));
    const double sn = round_to(dt, static_cast<float>(std::sin(static_cast<double>(angle))));
    y[c] = x[c] * cs - x[c + half] * sn;
    y[c + half] = x[c + half] * cs + x[c] * sn;
  }
  for (int64_t d = 0; d < D; ++d) x[d] = d < R ? round_to(dt, y[d]) : x[d];
}

void reference_run(const AppendConfig& cfg, const AppendCall& call) {
  const std::vector<Request> reqs = check_requests(cfg, call, false);
  const int64_t D = call.D, g = call.H / call.H_kv, ps = cfg.page_size;
  const TensorRef &q = *call.q, &kn = *call.k_new, &vn = *call.v_new, &kp = *call.k_pages, &vp = *call.v_pages;
  const TensorRef& bt = *call.block_table;
  const bool fp8 = call.cache_dtype == DType::kE4M3;
  const float ksc = static_cast<const float*>(call.k_scale->data)[0];
  const float vsc = static_cast<const float*>(call.v_scale->data)[0];
  auto row_of = [&](int64_t b, int64_t x) {
    return int_at(bt, b * bt.strides[0] + (x / ps) * bt.strides[1]) * ps + x % ps;
  };
  // Pool values are read before any append (rows read and written are disjoint by contract).
  struct Store {
    int64_t row;
    int64_t r;
    std::vector<double> k, v;
  };
  std::vector<Store> stores;
  std::vector<double> K, V, qrow(static_cast<size_t>(D)), o(static_cast<size_t>(D)), logit;
  for (int64_t b = 0; b < call.B; ++b) {
    const Request& rq = reqs[b];
    if (rq.q_len == 0) continue;
    const int64_t n = rq.old + rq.q_len;
    K.assign(static_cast<size_t>(n * D), 0);
    V.assign(static_cast<size_t>(n * D), 0);
    logit.assign(static_cast<size_t>(n), 0);
    for (int64_t r = 0; r < call.H_kv; ++r) {
      for (int64_t j = 0; j < rq.old; ++j) {
        const int64_t row = row_of(b, j);
        for (int64_t d = 0; d < D; ++d) {
          const double kx = reference::math::load(kp, row * kp.strides[0] + r * kp.strides[1] + d);
          const double vx = reference::math::load(vp, row * vp.strides[0] + r * vp.strides[1] + d);
          K[j * D + d] = fp8 ? round_to(call.q_dtype, static_cast<float>(kx) * ksc) : kx;
          V[j * D + d] = fp8 ? round_to(call.q_dtype, static_cast<float>(vx) * vsc) : vx;
        }
      }
      for (int64_t i = 0; i < rq.q_len; ++i) {
        const int64_t t = rq.q0 + i, j = rq.old + i;
        reference::math::load_row(kn, t * kn.strides[0] + r * kn.strides[1], kn.strides[2], D, 1.0, &K[j * D]);
        reference::math::load_row(vn, t * vn.strides[0] + r * vn.strides[1], vn.strides[2], D, 1.0, &V[j * D]);
        if (cfg.fuse_rope) rope_row(cfg, call.q_dtype, call.R, j, D, &K[j * D]);
        Store s{row_of(b, j), r, std::vector<double>(&K[j * D], &K[j * D] + D), std::vector<double>(&V[j * D], &V[j * D] + D)};
        stores.push_back(std::move(s));
      }
      for (int64_t hg = 0; hg < g; ++hg) {
        const int64_t h = r * g + hg;
        for (int64_t i = 0; i < rq.q_len; ++i) {
          const int64_t t = rq.q0 + i;
          const int64_t hi = cfg.is_causal ? rq.old + i : n - 1;
          auto q_row = [&]() -> const double* {
            reference::math::load_row(q, t * q.strides[0] + h * q.strides[1], q.strides[2], D, 1.0, qrow.data());
            if (cfg.fuse_rope) rope_row(cfg, call.q_dtype, call.R, rq.old + i, D, qrow.data());
            return qrow.data();
          };
          reference::math::softmax_row(q_row, K.data(), V.data(), 0, hi, D, call.scale, cfg.softcap, -reference::math::kInf, logit, o.data());
          const TensorRef& out = *call.o;
          for (int64_t d = 0; d < D; ++d)
            numeric::store_from_double(out.data, out.dtype, t * out.strides[0] + h * out.strides[1] + d * out.strides[2], o[d]);
        }
      }
    }
  }
  for (const Store& s : stores)
    for (int64_t d = 0; d < D; ++d) {
      const int64_t kat = s.row * kp.strides[0] + s.r * kp.strides[1] + d;
      const int64_t vat = s.row * vp.strides[0] + s.r * vp.strides[1] + d;
      if (fp8) {
        // e4m3(x / scale): an IEEE fp32 division, then the saturating conversion (SPEC.md §1.8).
        numeric::store_from_double(kp.data, kp.dtype, kat, static_cast<float>(s.k[d]) / ksc);
        numeric::store_from_double(vp.data, vp.dtype, vat, static_cast<float>(s.v[d]) / vsc);
      } else {
        numeric::store_from_double(kp.data, kp.dtype, kat, s.k[d]);
        numeric::store_from_double(vp.data, vp.dtype, vat, s.v[d]);
      }
    }
}

// ---- Kernels.

jit::KernelSpec append_kernel_spec(DType q_dtype, DType cache_dtype, int64_t D, bool rope, const std::string& arch) {
  jit::SpecBuilder b(kOp, "paged/prefill_append.cuh", "attnjit::kernels::prefill_append", arch);
  b.field("backend", "portable").name("{}").name("append");
  b.field("q_dtype", dtype_name(q_dtype)).arg(device_type_name(q_dtype)).name("{}");
  b.field("cache_dtype", dtype_name(cache_dtype)).arg(device_type_name(cache_dtype)).name("cache-{}");
  b.field("head_dim", D).arg().name("d{}");
  b.field("fuse_rope", rope).arg().name_if(rope, "rope");
  return b.build();
}

AttentionKernelChoice attention_choice(const AppendConfig& cfg, DType q_dtype, DType cache_dtype, int64_t D,
                                       const std::string& arch, const std::string& tile) {
  GqaConfig gqa;
  gqa.varlen = true;
  gqa.is_causal = cfg.is_causal;
  gqa.softcap = cfg.softcap;
  return choose_attention_kernel(kOp, gqa, q_dtype, cache_dtype, q_dtype, D, true, KvMode::kPagedAppend, false, arch,
                                 tile);
}

class PrefillAppendPlan final : public detail::PlanImpl {
 public:
  PrefillAppendPlan(AppendConfig cfg, AttentionKernelChoice choice, std::shared_ptr<const jit::LoadedKernel> attention,
                   std::shared_ptr<const jit::LoadedKernel> append)
      : cfg_(std::move(cfg)), choice_(std::move(choice)), attention_(std::move(attention)), append_(std::move(append)),
        workspace_(kOp, attention_->device) {}

  void prepare(const TensorArgs& tensors) const override {
    if (cfg_.fuse_rope) workspace_.reserve(rope_bytes(validate_call(cfg_, tensors, Placement::kDevice)));
  }
  std::size_t workspace_bytes() const override { return workspace_.bytes(); }

  void execute(const TensorArgs& tensors, void* stream) const override {
    const AppendCall call = validate_call(cfg_, tensors, Placement::kDevice);
    if (call.q_dtype != choice_.q_dtype || call.cache_dtype != choice_.kv_dtype || call.D != choice_.D ||
        call.device.index != attention_->device)
      throw InvalidArgument(fmt::format("{}: args: tensors: expected this plan's static signature ({}), got q {}, cache "
                                        "{}, D {}, {}; build a plan for the new signature", kOp,
                                        attention_->compiled->spec.describe(), dtype_name(call.q_dtype),
                                        dtype_name(call.cache_dtype), call.D, device_name(call.device)));
    const auto& drv = jit::CudaDriver::get();
    drv.bind_device(call.device.index);
    if (cfg_.validate_inputs) {
      detail::prepare_content_checks(kOp, call.device, stream);
      check_requests(cfg_, call, true);
    }
    if (call.B == 0 || call.T_q == 0) return;
    if (cfg_.fuse_rope) {
      auto lease = workspace_.acquire(rope_bytes(call), stream);
      launch(call, lease.ptr(), stream);
    } else {
      launch(call, 0, stream);
    }
  }

  std::string describe() const override {
    return fmt::format("{} kernel plan: {} then {}", kOp, append_->compiled->spec.describe(),
                       attention_->compiled->spec.describe());
  }

 private:
  // The two launches; `ws` holds the rotated q and k_new (fuse_rope).
  void launch(const AppendCall& call, CUdeviceptr ws, void* stream) const {
    kernels::PrefillAppendParams a{};
    a.q = call.q->data;
    a.k_new = call.k_new->data;
    a.v_new = call.v_new->data;
    a.q_ss = call.q->strides[0];
    a.q_sh = call.q->strides[1];
    a.kn_ss = call.k_new->strides[0];
    a.kn_sh = call.k_new->strides[1];
    a.vn_ss = call.v_new->strides[0];
    a.vn_sh = call.v_new->strides[1];
    a.k_pages = call.k_pages->data;
    a.v_pages = call.v_pages->data;
    a.k_scale = static_cast<const float*>(call.k_scale->data);
    a.v_scale = static_cast<const float*>(call.v_scale->data);
    a.cu_q = static_cast<const int*>(call.cu_seqlens_q->data);
    a.cache_seqlens = static_cast<const int*>(call.cache_seqlens->data);
    a.cs_s = call.cache_seqlens->strides[0];
    a.block_table = static_cast<const int*>(call.block_table->data);
    a.bt_sb = call.block_table->strides[0];
    a.bt_sp = call.block_table->strides[1];
    a.batch = static_cast<int>(call.B);
    a.heads = static_cast<int>(call.H);
    a.h_kv = static_cast<int>(call.H_kv);
    a.page_size = static_cast<int>(cfg_.page_size);
    a.rotary_dim = static_cast<int>(call.R);
    a.rope_base = static_cast<float>(cfg_.rope_base);
    if (cfg_.fuse_rope) {
      a.q_rot = reinterpret_cast<void*>(ws);
      a.k_rot = reinterpret_cast<void*>(ws + call.T_q * call.H * call.D * 2);
    }
    Launch lc;
    lc.grid_x = static_cast<unsigned>(call.T_q);
    lc.threads = 128;
    lc.stream = stream;
    void* args[] = {&a};
    launch_kernel(append_->function, lc, args,
              fmt::format("{}: cuLaunchKernelEx (append)", kOp));

    kernels::GqaFwdParams p{};
    GqaConfig gqa;
    gqa.varlen = true;
    gqa.is_causal = cfg_.is_causal;
    gqa.softcap = cfg_.softcap;
    fill_common_params(p, gqa, *call.q, *call.o, true, call.scale, call.H, call.H_kv);
    if (cfg_.fuse_rope) {  // rotated copies, contiguous
      p.q = a.q_rot;
      p.q_ss = call.H * call.D;
      p.q_sh = call.D;
      p.k_new = a.k_rot;
      p.kn_ss = call.H_kv * call.D;
      p.kn_sh = call.D;
    } else {
      p.k_new = call.k_new->data;
      p.kn_ss = call.k_new->strides[0];
      p.kn_sh = call.k_new->strides[1];
    }
    p.v_new = call.v_new->data;
    p.vn_ss = call.v_new->strides[0];
    p.vn_sh = call.v_new->strides[1];
    p.k = call.k_pages->data;
    p.v = call.v_pages->data;
    p.k_ss = call.k_pages->strides[0];
    p.k_sp = cfg_.page_size * call.k_pages->strides[0];
    p.k_sh = call.k_pages->strides[1];
    p.v_ss = call.v_pages->strides[0];
    p.v_sp = cfg_.page_size * call.v_pages->strides[0];
    p.v_sh = call.v_pages->strides[1];
    p.cu_q = a.cu_q;
    p.page_table = a.block_table;
    p.pt_sb = a.bt_sb;
    p.pt_sp = a.bt_sp;
    p.kv_lens = a.cache_seqlens;
    p.kv_lens_s = a.cs_s;
    p.page_size = a.page_size;
    p.k_scale = a.k_scale;
    p.v_scale = a.v_scale;
    p.batch = a.batch;
    launch_attention(kOp, *attention_, choice_, p, call.B, call.T_q, call.H, call.H_kv, stream);
  }

  static std::size_t rope_bytes(const AppendCall& call) {
    return static_cast<std::size_t>(call.T_q) * (call.H + call.H_kv) * call.D * 2;
  }
  AppendConfig cfg_;
  AttentionKernelChoice choice_;
  std::shared_ptr<const jit::LoadedKernel> attention_, append_;
  mutable detail::PlanWorkspace workspace_;
};

const std::vector<std::string> kConfigKeys = {"page_size", "max_seqlen_q", "is_causal", "cache_dtype", "sm_scale",
                                              "softcap", "fuse_rope", "rope_base", "max_position", "rotary_dim",
                                              "validate_inputs"};

class PrefillAppendOp final : public detail::OpInstance {
 public:
  PrefillAppendOp(OpContext& ctx, const nlohmann::json& config)
      : PrefillAppendOp(ctx, detail::ConfigReader(kOp, config, kConfigKeys)) {}

  std::vector<jit::KernelSpec> kernels_for(const TensorArgs& tensors, const std::string& arch) const override {
    const AppendCall call = validate_call(cfg_, tensors, Placement::kDevice);
    check_attention_backend(kOp, backend_, arch);
    return {append_kernel_spec(call.q_dtype, call.cache_dtype, call.D, cfg_.fuse_rope, arch),
            attention_kernel_spec(kOp, attention_choice(cfg_, call.q_dtype, call.cache_dtype, call.D, arch,
                                                        ctx_.tuning().gqa_tile))};
  }

 protected:
  Plan plan_for(const TensorArgs& tensors) override {
    const AppendCall call = validate_call(cfg_, tensors, placement_for(impl_));
    if (impl_ == detail::Impl::kReference)
      return cached("reference", tensors, [&] {
        return reference_plan(kOp, [cfg = cfg_](const TensorArgs& t, void* stream) {
          const AppendCall call = validate_call(cfg, t, Placement::kHost);
          if (cfg.validate_inputs) {
            detail::prepare_content_checks(kOp, call.device, stream);
            check_requests(cfg, call, true);
          }
          reference_run(cfg, call);
        });
      });
    return cached(fmt::format("{}.{}.{}.{}", static_cast<int>(call.q_dtype), static_cast<int>(call.cache_dtype), call.D,
                              call.device.index),
                  tensors, [&] {
                    const std::string arch = ctx_.arch_for_device(call.device.index);
                    check_attention_backend(kOp, backend_, arch);
                    AttentionKernelChoice choice =
                        attention_choice(cfg_, call.q_dtype, call.cache_dtype, call.D, arch, ctx_.tuning().gqa_tile);
                    auto attention = load_attention_kernel(ctx_, kOp, choice, call.device.index);
                    auto append = ctx_.kernels().loaded(
                        append_kernel_spec(call.q_dtype, call.cache_dtype, call.D, cfg_.fuse_rope, arch),
                        call.device.index);
                    return std::make_shared<PrefillAppendPlan>(cfg_, std::move(choice), std::move(attention),
                                                               std::move(append));
                  });
  }

 private:
  PrefillAppendOp(OpContext& ctx, const detail::ConfigReader& r)
      : OpInstance(ctx, kOp, r.impl(), r.backend()), cfg_(parse_config(r)) {}
  AppendConfig cfg_;
};

std::vector<jit::KernelSpec> default_matrix(const std::string& arch) {
  std::vector<jit::KernelSpec> specs;
  AppendConfig cfg;
  for (DType dt : {DType::kF16, DType::kBF16})
    for (int D : {64, 128, 256}) {
      for (DType cache : {dt, DType::kE4M3})
        for (bool causal : {true, false}) {
          cfg.is_causal = causal;
          specs.push_back(attention_kernel_spec(kOp, attention_choice(cfg, dt, cache, D, arch, "")));
        }
      specs.push_back(append_kernel_spec(dt, dt, D, false, arch));
      specs.push_back(append_kernel_spec(dt, dt, D, true, arch));
      specs.push_back(append_kernel_spec(dt, DType::kE4M3, D, false, arch));
    }
  return specs;
}

}  // namespace

}  // namespace attnjit::ops

namespace attnjit::detail {

OpDefinition gqa_prefill_paged_append_definition() {
  return ops::op_definition<ops::PrefillAppendOp>(ops::kOp, ops::default_matrix);
}

// Rank: the op's place in `attnjit info` and the warm-up (ops/registry.hpp).
const OpRegistrar kGqaPrefillPagedAppendRegistrar{60, &gqa_prefill_paged_append_definition};

}  // namespace attnjit::detail
