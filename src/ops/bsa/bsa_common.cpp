#include "ops/bsa/bsa_common.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "attnjit/error.hpp"

namespace attnjit::ops::bsa {

using detail::ArgChecker;

const char* layout_name(BsaLayout l) { return l == BsaLayout::kBHSD ? "bhsd" : "bshd"; }

const std::vector<std::string>& bsa_shared_config_keys() {
  static const std::vector<std::string> keys = {"layout", "sparse_block_size", "scale", "block_sparse_num"};
  return keys;
}

BsaSharedConfig parse_bsa_shared_config(const char* op, const detail::ConfigReader& r) {
  auto fail = [&](std::string_view key, const std::string& what) {
    throw InvalidArgument(fmt::format("{}: param: {}: {}", op, key, what));
  };
  BsaSharedConfig c;
  const std::string layout = r.get_string("layout", "bhsd");
  if (layout == "bhsd") c.layout = BsaLayout::kBHSD;
  else if (layout == "bshd") c.layout = BsaLayout::kBSHD;
  else fail("layout", fmt::format("expected \"bhsd\" or \"bshd\", got \"{}\"", layout));
  const double bs = r.get_number("sparse_block_size", 64);
  if (bs != 64 && bs != 128) fail("sparse_block_size", fmt::format("expected 64 or 128, got {}", bs));
  c.block_size = static_cast<int>(bs);
  if (r.has("scale")) {
    const double s = r.get_number("scale", 0);
    if (!std::isfinite(s) || s <= 0) fail("scale", fmt::format("expected a finite value > 0, got {}", s));
    c.scale = s;
  }
  if (r.has("block_sparse_num")) {
    const double n = r.get_number("block_sparse_num", 0);
    if (n != std::floor(n) || n < 1 || n > 2147483647.0)
      fail("block_sparse_num", fmt::format("expected an integer >= 1, got {}", n));
    c.block_sparse_num = static_cast<int64_t>(n);
  }
  return c;
}

std::vector<int64_t> BsaCall::shape_like(int64_t heads, int64_t seq, int64_t dim) const {
  if (layout == BsaLayout::kBHSD) return {B, heads, seq, dim};
  return {B, seq, heads, dim};
}

BhsStrides BsaCall::strides_of(const TensorRef& t) const {
  BhsStrides s;
  s.b = t.strides[0];
  s.h = layout == BsaLayout::kBHSD ? t.strides[1] : t.strides[2];
  s.s = layout == BsaLayout::kBHSD ? t.strides[2] : t.strides[1];
  return s;
}

namespace {

std::string list_of(const std::vector<int64_t>& v) {
  std::string s;
  for (auto x : v) s += fmt::format("{}{}", s.empty() ? "" : ", ", x);
  return s;
}

std::string dtypes_of(const std::vector<DType>& v) {
  std::string s;
  for (auto d : v) s += fmt::format("{}{}", s.empty() ? "" : " or ", dtype_name(d));
  return s;
}

void check_like(const ArgChecker& c, std::string_view name, const TensorRef& t, const std::vector<int64_t>& shape,
                const char* dims, const char* const* what) {
  c.rank(name, t, static_cast<int>(shape.size()), dims);
  for (size_t d = 0; d < shape.size(); ++d) c.extent(name, t, static_cast<int>(d), shape[d], what[d]);
}

}  // namespace

void check_bsa_qshaped(const ArgChecker& c, std::string_view name, const TensorRef& t, const BsaCall& call,
                       int64_t last_dim) {
  static const char* bhsd[] = {"B", "H_q", "S_q", "head dim"};
  static const char* bshd[] = {"B", "S_q", "H_q", "head dim"};
  const bool h = call.layout == BsaLayout::kBHSD;
  check_like(c, name, t, call.shape_like(call.H_q, call.S_q, last_dim), h ? "[B, H_q, S_q, D]" : "[B, S_q, H_q, D]",
             h ? bhsd : bshd);
}

void check_bsa_lse_shape(const ArgChecker& c, std::string_view name, const TensorRef& t, const BsaCall& call) {
  static const char* what[] = {"B", "H_q", "S_q"};
  check_like(c, name, t, {call.B, call.H_q, call.S_q}, "[B, H_q, S_q]", what);
}

BsaCall check_bsa_inputs(ArgChecker& c, const BsaSharedConfig& cfg, const BsaInputRules& rules) {
  BsaCall call;
  const TensorRef& q = c.required("q");
  const TensorRef& k = c.required("k");
  const TensorRef& v = c.required("v");
  const TensorRef& index = c.required("q2k_block_index");
  const TensorRef* nums = c.optional("q2k_block_nums");
  const TensorRef* sizes = c.optional("block_sizes");
  call.q = &q;
  call.k = &k;
  call.v = &v;
  call.index = &index;
  call.nums = nums;
  call.block_sizes = sizes;
  call.layout = cfg.layout;
  call.bs = cfg.block_size;

  // dtypes
  if (std::find(rules.dtypes.begin(), rules.dtypes.end(), q.dtype) == rules.dtypes.end())
    c.fail("dtype", "q", "expected {}, got {}", dtypes_of(rules.dtypes), dtype_name(q.dtype));
  c.dtype_is("k", k, q.dtype, "(q's dtype)");
  c.dtype_is("v", v, q.dtype, "(q's dtype)");
  c.dtype_is("q2k_block_index", index, DType::kI32);
  if (nums) c.dtype_is("q2k_block_nums", *nums, DType::kI32);
  if (sizes) c.dtype_is("block_sizes", *sizes, DType::kI32);
  call.dtype = q.dtype;

  // q, k, v shapes
  const bool bhsd = cfg.layout == BsaLayout::kBHSD;
  const int ah = bhsd ? 1 : 2, as = bhsd ? 2 : 1;  // head and sequence axes
  c.rank("q", q, 4, bhsd ? "[B, H_q, S_q, D]" : "[B, S_q, H_q, D]");
  c.rank("k", k, 4, bhsd ? "[B, H_kv, S_kv, D]" : "[B, S_kv, H_kv, D]");
  c.rank("v", v, 4, bhsd ? "[B, H_kv, S_kv, D_v]" : "[B, S_kv, H_kv, D_v]");
  call.B = q.shape[0];
  call.H_q = q.shape[ah];
  call.S_q = q.shape[as];
  call.D = q.shape[3];
  call.H_kv = k.shape[ah];
  call.S_kv = k.shape[as];
  call.D_v = v.shape[3];
  if (call.B < 1) c.fail("shape", "q", "expected B >= 1, got {} (shape {})", call.B, q.shape_str());
  if (call.H_q < 1) c.fail("shape", "q", "expected H_q >= 1, got {} (shape {})", call.H_q, q.shape_str());
  if (call.S_q < 1) c.fail("shape", "q", "expected S_q >= 1, got {} (shape {})", call.S_q, q.shape_str());
  c.extent("k", k, 0, call.B, "B, q's batch");
  c.extent("v", v, 0, call.B, "B, q's batch");
  if (call.H_kv < 1) c.fail("shape", "k", "expected H_kv >= 1, got {} (shape {})", call.H_kv, k.shape_str());
  if (call.S_kv < 1) c.fail("shape", "k", "expected S_kv >= 1, got {} (shape {})", call.S_kv, k.shape_str());
  c.extent("v", v, ah, call.H_kv, "H_kv, k's heads");
  c.extent("v", v, as, call.S_kv, "S_kv, k's length");
  c.extent("k", k, 3, call.D, "D, q's head dim");
  if (rules.equal_heads && call.H_kv != call.H_q)
    c.fail("shape", "k", "expected H_kv = H_q = {} (MHA), got H_kv = {}", call.H_q, call.H_kv);
  if (call.H_q % call.H_kv != 0)
    c.fail("shape", "k", "expected H_kv dividing q's H_q = {}, got H_kv = {}", call.H_q, call.H_kv);
  if (std::find(rules.head_dims.begin(), rules.head_dims.end(), call.D) == rules.head_dims.end())
    c.fail("shape", "q", "expected head dim D in {{{}}}, got {}", list_of(rules.head_dims), call.D);
  if (rules.equal_dims && call.D_v != call.D)
    c.fail("shape", "v", "expected D_v = D = {}, got D_v = {}", call.D, call.D_v);
  if (std::find(rules.value_dims.begin(), rules.value_dims.end(), call.D_v) == rules.value_dims.end())
    c.fail("shape", "v", "expected head dim D_v in {{{}}}, got {}", list_of(rules.value_dims), call.D_v);

  // metadata shapes
  call.N_q = (call.S_q + call.bs - 1) / call.bs;
  call.N_kv = (call.S_kv + call.bs - 1) / call.bs;
  c.rank("q2k_block_index", index, 4, "[B, H_q, N_q, K_max]");
  c.extent("q2k_block_index", index, 0, call.B, "B");
  c.extent("q2k_block_index", index, 1, call.H_q, "H_q");
  c.extent("q2k_block_index", index, 2, call.N_q, "N_q = ceil(S_q / sparse_block_size)");
  call.K_max = index.shape[3];
  if (call.K_max < 1)
    c.fail("shape", "q2k_block_index", "expected K_max >= 1 (dim 3), got {} (shape {})", call.K_max, index.shape_str());
  if (nums) {
    c.rank("q2k_block_nums", *nums, 3, "[B, H_q, N_q]");
    c.extent("q2k_block_nums", *nums, 0, call.B, "B");
    c.extent("q2k_block_nums", *nums, 1, call.H_q, "H_q");
    c.extent("q2k_block_nums", *nums, 2, call.N_q, "N_q = ceil(S_q / sparse_block_size)");
  }
  if (sizes) {
    call.block_sizes_rank = sizes->ndim;
    if (sizes->ndim == 1) {
      c.extent("block_sizes", *sizes, 0, call.N_kv, "N_kv = ceil(S_kv / sparse_block_size)");
    } else if (sizes->ndim == 2) {
      c.extent("block_sizes", *sizes, 0, call.B, "B");
      c.extent("block_sizes", *sizes, 1, call.N_kv, "N_kv = ceil(S_kv / sparse_block_size)");
    } else if (sizes->ndim == 3) {
      c.extent("block_sizes", *sizes, 0, call.B, "B");
      c.extent("block_sizes", *sizes, 1, call.H_q, "H_q");
      c.extent("block_sizes", *sizes, 2, call.N_kv, "N_kv = ceil(S_kv / sparse_block_size)");
    } else {
      c.fail("shape", "block_sizes", "expected rank 1, 2 or 3 ([N_kv], [B, N_kv] or [B, H_q, N_kv]), got {}",
             sizes->shape_str());
    }
  }

  // fixed count
  if (!nums) {
    call.fixed_count = cfg.block_sparse_num.value_or(call.K_max);
    if (call.fixed_count < 1 || call.fixed_count > call.K_max)
      c.fail("param", "block_sparse_num", "expected a value in [1, K_max = {}] (fixed counts: no q2k_block_nums), got {}",
             call.K_max, call.fixed_count);
  }

  // layouts
  for (auto [name, t] : {std::pair{"q", &q}, std::pair{"k", &k}, std::pair{"v", &v}}) {
    if (rules.contiguous) c.contiguous(name, *t, /*align16=*/true);
    else c.feature(name, *t, /*read_only=*/true);
  }
  c.metadata("q2k_block_index", index);
  if (nums) c.metadata("q2k_block_nums", *nums);
  if (sizes) c.metadata("block_sizes", *sizes);

  // devices
  for (auto [name, t] : {std::pair{"q", &q}, std::pair{"k", &k}, std::pair{"v", &v}, std::pair{"q2k_block_index", &index},
                         std::pair{"q2k_block_nums", nums}, std::pair{"block_sizes", sizes}})
    if (t) c.device(name, *t);
  call.device = c.call_device();

  call.q_st = call.strides_of(q);
  call.k_st = call.strides_of(k);
  call.v_st = call.strides_of(v);
  call.scale = static_cast<float>(cfg.scale.value_or(1.0 / std::sqrt(static_cast<double>(call.D))));
  return call;
}

// ---------------------------------------------------------------------------------------------------
// Host metadata

BsaMetadataHost BsaMetadataHost::load(const char* op, const BsaCall& call, void* stream) {
  detail::prepare_content_checks(op, call.device, stream);
  BsaMetadataHost m;
  m.call_ = call;
  m.index_ = detail::host_view(*call.index);
  if (call.nums) m.nums_ = detail::host_view(*call.nums);
  if (call.block_sizes) m.sizes_ = detail::host_view(*call.block_sizes);
  return m;
}

int64_t BsaMetadataHost::count(int64_t b, int64_t h, int64_t m) const {
  if (!call_.nums) return call_.fixed_count;
  const auto& t = nums_.ref;
  return static_cast<const int32_t*>(t.data)[b * t.strides[0] + h * t.strides[1] + m * t.strides[2]];
}

int32_t BsaMetadataHost::index(int64_t b, int64_t h, int64_t m, int64_t u) const {
  const auto& t = index_.ref;
  return static_cast<const int32_t*>(t.data)[b * t.strides[0] + h * t.strides[1] + m * t.strides[2] + u * t.strides[3]];
}

int64_t BsaMetadataHost::raw_block_size(int64_t b, int64_t h, int64_t kb) const {
  if (!call_.block_sizes) return call_.bs;
  const auto& t = sizes_.ref;
  const auto* p = static_cast<const int32_t*>(t.data);
  switch (call_.block_sizes_rank) {
    case 1: return p[kb * t.strides[0]];
    case 2: return p[b * t.strides[0] + kb * t.strides[1]];
    default: return p[b * t.strides[0] + h * t.strides[1] + kb * t.strides[2]];
  }
}

int64_t BsaMetadataHost::block_len(int64_t b, int64_t h, int64_t kb) const {
  return std::min(raw_block_size(b, h, kb), call_.S_kv - kb * call_.bs);
}

std::vector<KeyRange> BsaMetadataHost::visible_ranges(int64_t b, int64_t h, int64_t m) const {
  std::vector<KeyRange> out;
  const int64_t n = std::clamp<int64_t>(count(b, h, m), 0, call_.K_max);
  std::vector<int64_t> seen;
  for (int64_t u = 0; u < n; ++u) {
    const int64_t kb = index(b, h, m, u);
    if (kb < 0 || kb >= call_.N_kv) continue;  // outside the contract: skipped, never read past S_kv
    if (std::find(seen.begin(), seen.end(), kb) != seen.end()) continue;
    seen.push_back(kb);
    const int64_t len = block_len(b, h, kb);
    if (len <= 0) continue;
    out.push_back({kb * call_.bs, kb * call_.bs + len});
  }
  return out;
}

void BsaMetadataHost::check_contents(const char* op, bool allow_zero_counts) const {
  const BsaCall& c = call_;
  auto fail = [&](std::string_view arg, const std::string& what) {
    throw InvalidArgument(fmt::format("{}: content: {}: {}", op, arg, what));
  };
  const int64_t lo = allow_zero_counts ? 0 : 1;
  std::vector<int64_t> seen_at(static_cast<size_t>(c.N_kv), -1);  // kb -> the row stamp that last saw it
  int64_t stamp = 0;
  for (int64_t b = 0; b < c.B; ++b)
    for (int64_t h = 0; h < c.H_q; ++h)
      for (int64_t m = 0; m < c.N_q; ++m, ++stamp) {
        const int64_t n = count(b, h, m);
        if (c.nums && (n < lo || n > c.K_max))
          fail("q2k_block_nums", fmt::format("expected counts in [{}, K_max = {}]{}, got {} at [{}, {}, {}]", lo, c.K_max,
                                             allow_zero_counts ? "" : " (zero counts need allow_empty_block_nums)", n, b,
                                             h, m));
        for (int64_t u = 0; u < n; ++u) {
          const int64_t kb = index(b, h, m, u);
          if (kb < 0 || kb >= c.N_kv)
            fail("q2k_block_index", fmt::format("expected active indices in [0, N_kv = {}), got {} at [{}, {}, {}, {}]",
                                                c.N_kv, kb, b, h, m, u));
          if (seen_at[kb] == stamp)
            fail("q2k_block_index", fmt::format("expected unique active indices per row, got {} again at [{}, {}, {}, {}]",
                                                kb, b, h, m, u));
          seen_at[kb] = stamp;
          if (c.block_sizes) {
            const int64_t sz = raw_block_size(b, h, kb);
            if (sz < 1 || sz > c.bs) {
              std::string at = c.block_sizes_rank == 1   ? fmt::format("[{}]", kb)
                               : c.block_sizes_rank == 2 ? fmt::format("[{}, {}]", b, kb)
                                                         : fmt::format("[{}, {}, {}]", b, h, kb);
              fail("block_sizes", fmt::format("expected referenced block sizes in [1, sparse_block_size = {}], got {} at "
                                              "{} (referenced by q2k_block_index[{}, {}, {}, {}])",
                                              c.bs, sz, at, b, h, m, u));
            }
          }
        }
      }
}

}  // namespace attnjit::ops::bsa
