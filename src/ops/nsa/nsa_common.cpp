#include "ops/nsa/nsa_common.hpp"

#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "attnjit/error.hpp"
#include "ops/base/host_copy.hpp"

namespace attnjit::ops::nsa {

namespace {

[[noreturn]] void param_error(const char* op, std::string_view key, const std::string& what) {
  throw InvalidArgument(fmt::format("{}: param: {}: {}", op, key, what));
}

int32_t at1(const TensorRef& t, int64_t i) { return static_cast<const int32_t*>(t.data)[i * t.strides[0]]; }
int32_t at2(const TensorRef& t, int64_t i, int64_t j) {
  return static_cast<const int32_t*>(t.data)[i * t.strides[0] + j * t.strides[1]];
}

}  // namespace

double parse_scale(const char* op, const detail::ConfigReader& r) {
  if (!r.has("scale")) param_error(op, "scale", "expected a finite value > 0, got none (scale is required)");
  const double s = r.get_number("scale", 0);
  if (!std::isfinite(s) || s <= 0) param_error(op, "scale", fmt::format("expected a finite value > 0, got {}", s));
  return s;
}

int64_t parse_int(const char* op, const detail::ConfigReader& r, const char* key, int64_t lo, int64_t hi) {
  if (!r.has(key))
    param_error(op, key, fmt::format("expected an integer in [{}, {}], got none ({} is required)", lo, hi, key));
  const double v = r.get_number(key, 0);
  if (v != std::floor(v) || v < static_cast<double>(lo) || v > static_cast<double>(hi))
    param_error(op, key, fmt::format("expected an integer in [{}, {}], got {}", lo, hi, v));
  return static_cast<int64_t>(v);
}

namespace {
constexpr int64_t kMaxInt = std::numeric_limits<int32_t>::max();
}

CompressedConfig parse_compressed_config(const detail::ConfigReader& r) {
  CompressedConfig c;
  c.scale = parse_scale("nsa_compressed_fwd", r);
  c.bs = parse_int("nsa_compressed_fwd", r, "bs", 1, kMaxInt);
  c.validate_inputs = r.get_bool("validate_inputs", false);
  return c;
}

TopkConfig parse_topk_config(const detail::ConfigReader& r) {
  TopkConfig c;
  c.scale = parse_scale("nsa_topk", r);
  c.selected_block_num = parse_int("nsa_topk", r, "selected_block_num", 1, 128);
  c.bs = parse_int("nsa_topk", r, "bs", 1, kMaxInt);
  c.validate_inputs = r.get_bool("validate_inputs", false);
  return c;
}

SelectedConfig parse_selected_config(const detail::ConfigReader& r) {
  SelectedConfig c;
  if (!r.has("is_causal"))
    param_error("nsa_selected_fwd", "is_causal", "expected a boolean, got none (is_causal is required)");
  c.is_causal = r.get_bool("is_causal", false);
  c.scale = parse_scale("nsa_selected_fwd", r);
  c.block_size = parse_int("nsa_selected_fwd", r, "block_size", 1, kMaxInt);
  c.validate_inputs = r.get_bool("validate_inputs", false);
  return c;
}

const std::vector<std::string>& compressed_config_keys() {
  static const std::vector<std::string> keys = {"scale", "bs", "validate_inputs"};
  return keys;
}
const std::vector<std::string>& topk_config_keys() {
  static const std::vector<std::string> keys = {"scale", "selected_block_num", "bs", "validate_inputs"};
  return keys;
}
const std::vector<std::string>& selected_config_keys() {
  static const std::vector<std::string> keys = {"is_causal", "scale", "block_size", "validate_inputs"};
  return keys;
}

Meta check_meta(detail::ArgChecker& c, int64_t T, bool chunks) {
  Meta m;
  m.offsets = &c.required("offsets");
  m.token_indices = &c.required("token_indices");
  if (chunks) m.chunk_offsets = &c.required("chunk_offsets");
  c.dtype_is("offsets", *m.offsets, DType::kI32);
  c.dtype_is("token_indices", *m.token_indices, DType::kI32);
  if (chunks) c.dtype_is("chunk_offsets", *m.chunk_offsets, DType::kI32);
  c.rank("offsets", *m.offsets, 1, "[N + 1]");
  c.rank("token_indices", *m.token_indices, 2, "[T, 2]");
  if (chunks) c.rank("chunk_offsets", *m.chunk_offsets, 1, "[N + 1]");
  if (m.offsets->shape[0] < 1)
    c.fail("shape", "offsets", "expected at least 1 element ([N + 1]), got {}", m.offsets->shape[0]);
  m.N = m.offsets->shape[0] - 1;
  c.extent("token_indices", *m.token_indices, 0, T, "T, q's tokens");
  c.extent("token_indices", *m.token_indices, 1, 2, "(request, position)");
  if (chunks) c.extent("chunk_offsets", *m.chunk_offsets, 0, m.N + 1, "N + 1, offsets' length");
  c.contiguous("offsets", *m.offsets, false);
  c.metadata("token_indices", *m.token_indices);
  if (chunks) c.contiguous("chunk_offsets", *m.chunk_offsets, false);
  return m;
}

void check_heads(const detail::ArgChecker& c, const char* kv_name, int64_t H, int64_t H_kv) {
  if (H < 1) c.fail("shape", "q", "expected H >= 1 query heads, got {}", H);
  if (H_kv < 1 || H % H_kv != 0)
    c.fail("shape", kv_name, "expected H_kv dividing H (H % H_kv == 0), got H = {}, H_kv = {}", H, H_kv);
  if ((H / H_kv) % 16 != 0)
    c.fail("shape", kv_name, "expected a group size H / H_kv that is a multiple of 16, got H = {}, H_kv = {} (group {})",
           H, H_kv, H / H_kv);
}

void check_head_dim(const detail::ArgChecker& c, const char* name, const char* what, int64_t D) {
  if (D != 64 && D != 128) c.fail("shape", name, "expected head dim {} in {{64, 128}}, got {}", what, D);
}

HostMeta read_meta(const Meta& m) {
  HostMeta h;
  auto off = detail::host_view(*m.offsets);
  for (int64_t i = 0; i <= m.N; ++i) h.offsets.push_back(at1(off.ref, i));
  auto tok = detail::host_view(*m.token_indices);
  for (int64_t t = 0; t < m.token_indices->shape[0]; ++t) {
    h.token_indices.push_back(at2(tok.ref, t, 0));
    h.token_indices.push_back(at2(tok.ref, t, 1));
  }
  if (m.chunk_offsets) {
    auto co = detail::host_view(*m.chunk_offsets);
    for (int64_t i = 0; i <= m.N; ++i) h.chunk_offsets.push_back(at1(co.ref, i));
  }
  return h;
}

void check_meta_contents(const char* op, const Meta& m, int64_t T, int64_t bs, int64_t C, Device device, void* stream) {
  detail::prepare_content_checks(op, device, stream);
  auto fail = [&](std::string_view arg, const std::string& what) {
    throw InvalidArgument(fmt::format("{}: content: {}: {}", op, arg, what));
  };
  const HostMeta h = read_meta(m);
  const auto& off = h.offsets;
  const int64_t N = m.N;
  if (off[0] != 0) fail("offsets", fmt::format("expected element 0 to be 0, got {}", off[0]));
  for (int64_t n = 0; n < N; ++n)
    if (off[n + 1] < off[n])
      fail("offsets", fmt::format("expected non-decreasing offsets, got {} after {} at index {}", off[n + 1], off[n], n + 1));
  if (off[N] != T)
    fail("offsets", fmt::format("expected the last offset (index {}) to be T = {}, got {}", N, T, off[N]));
  for (int64_t t = 0; t < T; ++t) {
    const int64_t n = h.token_indices[2 * t], p = h.token_indices[2 * t + 1];
    if (n < 0 || n >= N || !(off[n] <= t && t < off[n + 1]))
      fail("token_indices", fmt::format("expected token {}'s request id n with offsets[n] <= {} < offsets[n + 1], got {} "
                                        "at [{}, 0]", t, t, n, t));
    if (p != t - off[n])
      fail("token_indices", fmt::format("expected token {}'s position {} - offsets[{}] = {}, got {} at [{}, 1]", t, t, n,
                                        t - off[n], p, t));
  }
  if (bs <= 0) return;
  const auto& co = h.chunk_offsets;
  if (co[0] != 0) fail("chunk_offsets", fmt::format("expected element 0 to be 0, got {}", co[0]));
  for (int64_t n = 0; n < N; ++n) {
    const int64_t len = off[n + 1] - off[n], want = (len + bs - 1) / bs, got = int64_t{co[n + 1]} - co[n];
    if (got != want)
      fail("chunk_offsets", fmt::format("expected request {}'s chunk count chunk_offsets[{}] - chunk_offsets[{}] to be "
                                        "ceil(len {} / bs {}) = {}, got {}", n, n + 1, n, len, bs, want, got));
  }
  if (co[N] != C)
    fail("chunk_offsets", fmt::format("expected the last element (index {}) to be C = {} (k_cmp's rows), got {}", N, C,
                                      co[N]));
}

void check_block_counts(const char* op, const SelectedCall& call) {
  auto hv = detail::host_view(*call.block_counts);
  for (int64_t t = 0; t < call.T; ++t)
    for (int64_t r = 0; r < call.H_kv; ++r) {
      const int32_t v = at2(hv.ref, t, r);
      if (v < 0 || v > call.SEL)
        throw InvalidArgument(fmt::format("{}: content: block_counts: expected values in [0, SEL = {}], got {} at [{}, {}]",
                                          op, call.SEL, v, t, r));
    }
}

[[noreturn]] void no_kernel(const char* op, detail::Backend backend) {
  throw Unsupported(fmt::format("{}: unsupported: impl 'kernel' (backend '{}'): no GPU kernel is built yet for this op; "
                                "use impl 'reference' (CPU)",
                                op, detail::backend_name(backend)));
}

}  // namespace attnjit::ops::nsa
