#include "test_case.hpp"

#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <unordered_map>

#include "base/host_numeric.hpp"

namespace attnjit::cli {

namespace {

[[noreturn]] void malformed(const std::string& where, const std::string& what) {
  throw std::runtime_error(fmt::format("{}: malformed test case: {}", where, what));
}

// nlohmann's get<int64_t>() converts a JSON float without a range check (undefined behaviour past the
// target's range), so every integer a case file gives is read through this: a JSON integer in [lo, hi].
std::optional<int64_t> integer_in(const nlohmann::json& v, int64_t lo, int64_t hi) {
  if (!v.is_number_integer()) return std::nullopt;
  if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
    return std::nullopt;
  const int64_t x = v.get<int64_t>();
  if (x < lo || x > hi) return std::nullopt;
  return x;
}

constexpr int64_t kI64Max = std::numeric_limits<int64_t>::max();
constexpr int64_t kI64Min = std::numeric_limits<int64_t>::min();

TensorSpec parse_tensor(const std::string& where, const std::string& name, const nlohmann::json& j) {
  TensorSpec t;
  t.name = name;
  if (!j.is_object()) malformed(where, name + ": expected a tensor object");
  if (!j.contains("shape") || !j["shape"].is_array()) malformed(where, name + ": missing \"shape\"");
  const auto extents = [&](const char* field) {
    const auto& a = j[field];
    if (a.size() > static_cast<size_t>(TensorRef::kMaxDims))
      malformed(where, fmt::format("{}: {} has {} dims, at most {} are supported", name, field, a.size(), TensorRef::kMaxDims));
    std::vector<int64_t> v;
    for (const auto& e : a) {
      const auto x = integer_in(e, 0, kI64Max);
      if (!x) malformed(where, fmt::format("{}: {} entries must be integers >= 0, got {}", name, field, e.dump()));
      v.push_back(*x);
    }
    return v;
  };
  t.shape = extents("shape");
  auto dt = parse_dtype(j.value("dtype", ""));
  if (!dt) malformed(where, name + ": unknown dtype " + j.value("dtype", "(none)"));
  t.dtype = *dt;
  if (j.contains("strides")) {
    if (!j["strides"].is_array()) malformed(where, name + ": \"strides\" must be a list");
    t.strides = extents("strides");
    if (t.strides.size() != t.shape.size()) malformed(where, name + ": strides and shape differ in length");
  }
  t.init = j.value("init", nlohmann::json{{"kind", "poison"}});
  if (t.init.is_string()) t.init = nlohmann::json{{"kind", t.init}};
  if (!t.init.is_object()) malformed(where, name + ": \"init\" must be an object or a kind name");
  // NOTE: host storage is allocated for the whole span; a bound keeps a typo from asking for terabytes.
  int64_t span = 1, count = 1;
  for (size_t d = 0; d < t.shape.size(); ++d) {
    if (t.shape[d] == 0) span = 0;
    if (__builtin_mul_overflow(count, t.shape[d] ? t.shape[d] : 1, &count) || count > (int64_t{1} << 32))
      malformed(where, fmt::format("{}: more than 2^32 elements", name));
  }
  const auto strides = t.resolved_strides();
  for (size_t d = 0; span && d < t.shape.size(); ++d) {
    int64_t term = 0;
    if (__builtin_mul_overflow(t.shape[d] - 1, strides[d], &term) || __builtin_add_overflow(span, term, &span) ||
        span > (int64_t{1} << 32))
      malformed(where, fmt::format("{}: storage of more than 2^32 elements", name));
  }
  t.output = j.value("output", false);
  return t;
}

uint64_t mix(uint64_t seed, const std::string& name) {
  uint64_t h = seed * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull;
  for (unsigned char c : name) h = (h ^ c) * 0x100000001B3ull;
  return h;
}

}  // namespace

std::vector<int64_t> TensorSpec::resolved_strides() const {
  if (!strides.empty()) return strides;
  std::vector<int64_t> s(shape.size());
  int64_t stride = 1;
  for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
    s[d] = stride;
    stride *= shape[d];
  }
  return s;
}

int64_t TensorSpec::storage_elements() const {
  const auto s = resolved_strides();
  int64_t last = 0;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 0) return 0;
    last += (shape[d] - 1) * s[d];
  }
  return last + 1;
}

std::vector<TestCase> load_test_cases(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(fmt::format("{}: cannot open", path));
  std::ostringstream text;
  text << in.rdbuf();
  return parse_test_cases(text.str(), path);
}

std::vector<TestCase> parse_test_cases(const std::string& text, const std::string& path) {
  // NOTE: nesting is bounded before parsing: the values' destructors and dump() recurse.
  {
    int depth = 0;
    bool in_string = false, escaped = false;
    for (char ch : text) {
      if (in_string) {
        if (escaped) escaped = false;
        else if (ch == '\\') escaped = true;
        else if (ch == '"') in_string = false;
      } else if (ch == '"') {
        in_string = true;
      } else if (ch == '[' || ch == '{') {
        if (++depth > 64) throw std::runtime_error(fmt::format("{}: malformed test case: JSON nested deeper than 64", path));
      } else if (ch == ']' || ch == '}') {
        --depth;
      }
    }
  }
  nlohmann::json root = nlohmann::json::parse(text, nullptr, false);
  if (root.is_discarded()) throw std::runtime_error(fmt::format("{}: not valid JSON", path));
  if (!root.is_object()) malformed(path, "expected a case object or {\"cases\": [...]}");
  nlohmann::json list = root.contains("cases") ? root["cases"] : nlohmann::json::array({root});
  if (!list.is_array()) malformed(path, "\"cases\" must be a list");
  if (list.empty()) malformed(path, "the case list is empty");
  std::vector<TestCase> cases;
  int index = 0;
  for (const auto& j : list) {
    if (!j.is_object()) malformed(fmt::format("{}#{}", path, index), "a case must be an object");
    if (j.contains("name") && !j["name"].is_string()) malformed(fmt::format("{}#{}", path, index), "\"name\" must be a string");
    TestCase c;
    c.file = path;
    c.name = j.value("name", fmt::format("{}#{}", path, index));
    const std::string where = fmt::format("{} ({})", path, c.name);
    if (j.contains("op") && !j["op"].is_string()) malformed(where, "\"op\" must be a string");
    c.op = j.value("op", "");
    if (c.op.empty()) malformed(where, "missing \"op\"");
    if (j.contains("config")) c.config = j["config"];
    if (!c.config.is_object()) malformed(where, fmt::format("\"config\" must be an object, got {}", c.config.type_name()));
    c.seed = static_cast<uint64_t>(index + 1);
    if (j.contains("seed")) {
      const auto& sj = j["seed"];
      if (!sj.is_number_unsigned()) malformed(where, fmt::format("\"seed\" must be an integer >= 0, got {}", sj.dump()));
      c.seed = sj.get<uint64_t>();
    }
    if (!j.contains("tensors") || !j["tensors"].is_object()) malformed(where, "missing \"tensors\"");
    for (const auto& [name, t] : j["tensors"].items()) c.tensors.push_back(parse_tensor(where, name, t));
    if (j.contains("compare")) {
      for (const auto& [name, cj] : j["compare"].items()) {
        CompareSpec cs;
        cs.mode = cj.value("mode", "rel_l2");
        cs.tol = cj.value("tol", 0.0);
        cs.ascending = cj.value("ascending", false);
        cs.max_ulp = cj.value("max_ulp", -1.0);
        if (cs.mode != "bitwise" && cs.mode != "rel_l2" && cs.mode != "lse" && cs.mode != "topk" && cs.mode != "ulp" &&
            cs.mode != "masked_nse" && cs.mode != "grad")
          malformed(where, "compare " + name + ": unknown mode " + cs.mode);
        if (cs.mode == "rel_l2" && !(cs.tol > 0)) malformed(where, "compare " + name + ": rel_l2 needs tol > 0");
        if (cs.mode == "grad" && !(cs.tol > 0)) malformed(where, "compare " + name + ": grad needs tol > 0");
        if (cs.mode == "masked_nse" && !(cs.tol > 0)) malformed(where, "compare " + name + ": masked_nse needs tol > 0");
        if (cs.mode == "ulp" && !(cs.max_ulp >= 0)) malformed(where, "compare " + name + ": ulp needs max_ulp >= 0");
        bool found = false;
        for (const auto& t : c.tensors) {
          if (t.name != name || !t.output) continue;
          found = true;
          if (cs.mode == "ulp" && t.dtype != DType::kF16 && t.dtype != DType::kBF16 && t.dtype != DType::kE4M3 &&
              t.dtype != DType::kF32)
            malformed(where, "compare " + name + ": ulp needs an fp16, bf16, e4m3 or fp32 tensor");
        }
        if (!found) malformed(where, "compare names " + name + ", which is not an output tensor");
        c.compare[name] = cs;
      }
    }
    if (j.contains("golden")) {
      c.golden = j["golden"];
      if (!c.golden.is_object()) malformed(where, fmt::format("\"golden\" must be an object, got {}", c.golden.type_name()));
      // A golden under a name nothing compares (a misspelt tensor) would check nothing.
      for (const auto& [name, g] : c.golden.items()) {
        if (!c.compare.count(name)) malformed(where, "golden names " + name + ", which no \"compare\" entry checks");
        if (!g.is_object() || !(g.contains("bits") || g.contains("values")) ||
            !(g.contains("bits") ? g["bits"] : g["values"]).is_array())
          malformed(where, "golden " + name + ": expected {\"bits\": [...]} or {\"values\": [...]}");
      }
    }
    if (j.contains("expect_error")) {
      c.expect_error = ExpectedError{j["expect_error"].value("category", ""), j["expect_error"].value("contains", "")};
    }
    c.gpu_only = j.value("gpu_only", false);
    c.repeat = j.value("repeat", false);
    if (j.contains("kernel_unsupported")) {
      if (!j["kernel_unsupported"].is_string() || j["kernel_unsupported"].get<std::string>().empty())
        malformed(where, "\"kernel_unsupported\" must be a non-empty string (the expected message text)");
      c.kernel_unsupported = j["kernel_unsupported"].get<std::string>();
    }
    if (j.contains("setup")) {
      c.setup = j["setup"];
      if (!c.setup.is_array()) malformed(where, "\"setup\" must be a list");
      for (const auto& s : c.setup) {
        if (!s.is_object() || !s.contains("op") || !s.contains("tensors") || !s["tensors"].is_object())
          malformed(where, "a setup entry needs \"op\" and a \"tensors\" map");
        for (const auto& [arg, tn] : s["tensors"].items()) {
          bool found = false;
          for (const auto& t : c.tensors) found = found || (tn.is_string() && t.name == tn.get<std::string>());
          if (!found) malformed(where, "setup " + arg + " names no tensor of the case");
        }
      }
    }
    if (!c.expect_error && c.compare.empty()) malformed(where, "a case needs \"compare\" or \"expect_error\"");
    cases.push_back(std::move(c));
    ++index;
  }
  return cases;
}

TensorRef HostTensor::ref(void* data, Device device) const {
  TensorRef t;
  t.data = data;
  t.dtype = spec->dtype;
  t.device = device;
  t.ndim = static_cast<int>(spec->shape.size());
  const auto strides = spec->resolved_strides();
  for (int d = 0; d < t.ndim; ++d) {
    t.shape[d] = spec->shape[d];
    t.strides[d] = strides[d];
  }
  return t;
}

HostTensor make_host_tensor(const TensorSpec& spec, uint64_t seed) {
  HostTensor h;
  h.spec = &spec;
  const int64_t n = spec.storage_elements();
  const int es = dtype_size(spec.dtype);
  h.bytes.assign(static_cast<size_t>(n * es), 0);
  std::mt19937_64 rng(mix(seed, spec.name));
  const std::string kind = spec.init.value("kind", "poison");
  const bool is_float = spec.dtype != DType::kI32 && spec.dtype != DType::kI64;
  void* base = h.bytes.data();
  auto bad = [&](const std::string& why) {
    throw std::runtime_error(fmt::format("tensor {}: init {}: {}", spec.name, kind, why));
  };
  if (kind == "normal" || kind == "uniform") {
    if (!is_float) bad("needs a float dtype");
    const double specials = spec.init.value("specials", 0.0);
    const double mean = spec.init.value("mean", 0.0), stddev = spec.init.value("std", 1.0);
    const double low = spec.init.value("low", -1.0), high = spec.init.value("high", 1.0);
    // The distributions' preconditions (std > 0, low <= high) are not checked by the standard library.
    if (!(std::isfinite(mean) && std::isfinite(stddev) && stddev > 0))
      bad(fmt::format("needs a finite mean and std > 0, got mean {} std {}", mean, stddev));
    if (!(std::isfinite(low) && std::isfinite(high) && low <= high && std::isfinite(high - low)))
      bad(fmt::format("needs finite low <= high, got low {} high {}", low, high));
    std::normal_distribution<double> normal(mean, stddev);
    std::uniform_real_distribution<double> uniform(low, high);
    std::uniform_real_distribution<double> coin(0.0, 1.0);
    const double kSpecial[] = {std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity(),
                               std::numeric_limits<double>::quiet_NaN(), 1000.0, -1000.0};
    for (int64_t i = 0; i < n; ++i) {
      double x = kind == "normal" ? normal(rng) : uniform(rng);
      if (specials > 0 && coin(rng) < specials) x = kSpecial[rng() % 5];
      numeric::store_from_double(base, spec.dtype, i, x);
    }
  } else if (kind == "values") {
    const auto& v = spec.init.at("values");
    if (static_cast<int64_t>(v.size()) != n) bad(fmt::format("expected {} values, got {}", n, v.size()));
    for (int64_t i = 0; i < n; ++i) {
      if (v[i].is_string()) {  // "nan", "inf", "-inf"
        numeric::store_from_double(base, spec.dtype, i, std::stod(v[i].get<std::string>()));
      } else if (!is_float) {
        const bool i32 = spec.dtype == DType::kI32;
        const auto x = integer_in(v[i], i32 ? std::numeric_limits<int32_t>::min() : kI64Min,
                                  i32 ? std::numeric_limits<int32_t>::max() : kI64Max);
        if (!x) bad(fmt::format("expected {} integers, got {} at {}", dtype_name(spec.dtype), v[i].dump(), i));
        if (i32) static_cast<int32_t*>(base)[i] = static_cast<int32_t>(*x);
        else static_cast<int64_t*>(base)[i] = *x;
      } else {
        if (!v[i].is_number()) bad(fmt::format("expected a number or \"nan\", \"inf\", \"-inf\", got {} at {}", v[i].dump(), i));
        numeric::store_from_double(base, spec.dtype, i, v[i].get<double>());
      }
    }
  } else if (kind == "bits") {
    const auto& v = spec.init.at("bits");
    if (static_cast<int64_t>(v.size()) != n) bad(fmt::format("expected {} bit patterns, got {}", n, v.size()));
    for (int64_t i = 0; i < n; ++i) {
      if (!v[i].is_number_integer()) bad(fmt::format("expected integer bit patterns, got {} at {}", v[i].dump(), i));
      const uint64_t bits = v[i].is_number_unsigned() ? v[i].get<uint64_t>() : static_cast<uint64_t>(v[i].get<int64_t>());
      std::memcpy(h.bytes.data() + i * es, &bits, es);  // little-endian low bytes
    }
  } else if (kind == "bytes") {
    if (spec.init.contains("pattern")) {
      const auto& pattern = spec.init["pattern"];
      const auto byte = integer_in(pattern, 0, 255);
      if (!byte) bad(fmt::format("expected a byte pattern (an integer 0..255), got {}", pattern.dump()));
      std::fill(h.bytes.begin(), h.bytes.end(), static_cast<uint8_t>(*byte));
    } else {
      for (auto& b : h.bytes) b = static_cast<uint8_t>(rng());
    }
  } else if (kind == "poison") {
    for (int64_t i = 0; i < n; ++i) {
      if (is_float) numeric::store_from_double(base, spec.dtype, i, std::numeric_limits<double>::quiet_NaN());
      else numeric::store_from_double(base, spec.dtype, i, 0x7FFFFFFF);
    }
  } else if (kind == "slots") {
    if (spec.dtype != DType::kI64 && spec.dtype != DType::kI32) bad("needs an integer dtype");
    // Slots are stored as the dtype, so the capacity must fit it (int32 slots: at most 2^31).
    const auto cap = integer_in(spec.init.at("capacity"), 0,
                                spec.dtype == DType::kI32 ? int64_t{1} << 31 : kI64Max);
    if (!cap) bad(fmt::format("expected an integer capacity 0..{}, got {}",
                              spec.dtype == DType::kI32 ? "2^31" : "2^63-1", spec.init.at("capacity").dump()));
    const int64_t capacity = *cap;
    const double skip = spec.init.value("skip", 0.0);
    if (capacity < n) bad(fmt::format("capacity {} is below the {} slots needed", capacity, n));
    // A random injection of n slots into [0, capacity): partial Fisher-Yates over a lazy permutation.
    std::unordered_map<int64_t, int64_t> swapped;
    std::uniform_real_distribution<double> coin(0.0, 1.0);
    for (int64_t i = 0; i < n; ++i) {
      std::uniform_int_distribution<int64_t> pick(i, capacity - 1);
      const int64_t j = pick(rng);
      const int64_t vi = swapped.count(i) ? swapped[i] : i;
      const int64_t vj = swapped.count(j) ? swapped[j] : j;
      swapped[j] = vi;
      const int64_t slot = coin(rng) < skip ? -1 : vj;
      numeric::store_from_double(base, spec.dtype, i, static_cast<double>(slot));
    }
  } else if (kind == "rows") {
    // {"ranges": [[first, count], ...], "init": {...}, "else": {...}}: the listed rows (dim 0) take one
    // init, the rest of the storage the other (e.g. page pools: cached rows random, the rest poisoned).
    if (spec.shape.empty()) bad("needs a tensor of rank >= 1");
    TensorSpec rest = spec, rows = spec;
    rest.init = spec.init.value("else", nlohmann::json{{"kind", "poison"}});
    rows.init = spec.init.at("init");
    if (rest.init.value("kind", "") == "rows" || rows.init.value("kind", "") == "rows") bad("rows inits do not nest");
    h.bytes = make_host_tensor(rest, seed).bytes;
    const HostTensor in = make_host_tensor(rows, seed);
    const auto strides = spec.resolved_strides();
    TensorSpec inner;
    inner.shape.assign(spec.shape.begin() + 1, spec.shape.end());
    inner.strides.assign(strides.begin() + 1, strides.end());
    const int64_t span = inner.storage_elements();  // storage of one row
    for (const auto& r : spec.init.at("ranges")) {
      if (!r.is_array() || r.size() != 2) bad(fmt::format("expected a range [first, count], got {}", r.dump()));
      const auto first = integer_in(r[0], 0, spec.shape[0]), count = integer_in(r[1], 0, spec.shape[0]);
      if (!first || !count || *first + *count > spec.shape[0])
        bad(fmt::format("range {} outside dim 0 of extent {}", r.dump(), spec.shape[0]));
      for (int64_t k = *first; k < *first + *count; ++k)
        std::memcpy(h.bytes.data() + k * strides[0] * es, in.bytes.data() + k * strides[0] * es,
                    static_cast<size_t>(span * es));
    }
  } else {
    bad("unknown init kind");
  }
  return h;
}

namespace {
// Visits the storage index of every logical element.
template <typename F>
void for_each_element(const TensorSpec& spec, F&& f) {
  const auto strides = spec.resolved_strides();
  const int nd = static_cast<int>(spec.shape.size());
  for (auto e : spec.shape)
    if (e == 0) return;
  std::vector<int64_t> idx(nd, 0);
  while (true) {
    int64_t off = 0;
    for (int d = 0; d < nd; ++d) off += idx[d] * strides[d];
    f(off);
    int d = nd - 1;
    for (; d >= 0; --d) {
      if (++idx[d] < spec.shape[d]) break;
      idx[d] = 0;
    }
    if (d < 0) return;
  }
}
}  // namespace

double rel_l2(const HostTensor& a, const HostTensor& b) {
  double num = 0, den = 0;
  bool nan = false;
  for_each_element(*a.spec, [&](int64_t off) {
    const double x = numeric::load_as_double(a.bytes.data(), a.spec->dtype, off);
    const double y = numeric::load_as_double(b.bytes.data(), b.spec->dtype, off);
    if (std::isnan(x) || std::isnan(y)) nan = true;
    num += (x - y) * (x - y);
    den += y * y;
  });
  if (nan) return std::numeric_limits<double>::infinity();
  if (den == 0) return num == 0 ? 0.0 : std::numeric_limits<double>::infinity();
  return std::sqrt(num / den);
}

double grad_rel_l2(const HostTensor& a, const HostTensor& b, const HostTensor& abs) {
  double num = 0, den = 0, den_abs = 0;
  bool nan = false;
  for_each_element(*a.spec, [&](int64_t off) {
    const double x = numeric::load_as_double(a.bytes.data(), a.spec->dtype, off);
    const double y = numeric::load_as_double(b.bytes.data(), b.spec->dtype, off);
    const double z = numeric::load_as_double(abs.bytes.data(), abs.spec->dtype, off);
    if (std::isnan(x) || std::isnan(y)) nan = true;
    num += (x - y) * (x - y);
    den += y * y;
    den_abs += z * z;
  });
  if (nan) return std::numeric_limits<double>::infinity();
  const double scale = std::max(std::sqrt(den), 1e-3 * std::sqrt(den_abs));
  if (scale == 0) return num == 0 ? 0.0 : std::numeric_limits<double>::infinity();
  return std::sqrt(num) / scale;
}

double lse_error(const HostTensor& out, const HostTensor& ref, std::string* where) {
  double worst = 0;
  for_each_element(*out.spec, [&](int64_t off) {
    const double x = numeric::load_as_double(out.bytes.data(), out.spec->dtype, off);
    const double y = numeric::load_as_double(ref.bytes.data(), ref.spec->dtype, off);
    double e;
    if (std::isnan(x) || std::isnan(y)) e = std::numeric_limits<double>::infinity();
    else if (std::isinf(y) || std::isinf(x)) e = (x == y) ? 0 : std::numeric_limits<double>::infinity();
    else e = std::fabs(x - y) / std::max(1.0, std::fabs(y));
    if (e > worst) {
      worst = e;
      if (where) *where = fmt::format("storage element {}: {} vs reference {}", off, x, y);
    }
  });
  return worst;
}

double masked_nse(const HostTensor& out, const HostTensor& ref, std::string* where) {
  double num = 0, den = 0;
  bool mismatch = false;
  for_each_element(*out.spec, [&](int64_t off) {
    if (mismatch) return;
    const double x = numeric::load_as_double(out.bytes.data(), out.spec->dtype, off);
    const double y = numeric::load_as_double(ref.bytes.data(), ref.spec->dtype, off);
    if (std::isnan(y)) return;
    if (std::isinf(y) || !std::isfinite(x)) {
      if (x != y) {
        mismatch = true;
        if (where) *where = fmt::format("storage element {}: {} vs reference {}", off, x, y);
      }
      return;
    }
    num += (x - y) * (x - y);
    den += y * y;
  });
  if (mismatch) return std::numeric_limits<double>::infinity();
  if (den == 0) return num == 0 ? 0.0 : std::numeric_limits<double>::infinity();
  return num / den;
}

bool zeros_match(const HostTensor& out, const HostTensor& ref, std::string* where) {
  // Rows (innermost axis) that are all exact zeros in the reference are rows the contract makes zero
  // (empty visible sets, +inf sinks): the output's row must be exact zeros too. A lone zero element
  // inside a row is just rounding (fp16 flushes |x| < 2^-25 to zero) and is left to the tolerance.
  const TensorSpec& spec = *out.spec;
  if (spec.shape.empty()) return true;
  const auto strides = spec.resolved_strides();
  const int nd = static_cast<int>(spec.shape.size());
  const int64_t cols = spec.shape[nd - 1], col_stride = strides[nd - 1];
  TensorSpec rows = spec;
  rows.shape[nd - 1] = 1;
  bool ok = true;
  for_each_element(rows, [&](int64_t base) {
    if (!ok) return;
    bool ref_zero = true;
    for (int64_t c = 0; c < cols && ref_zero; ++c)
      ref_zero = numeric::load_as_double(ref.bytes.data(), ref.spec->dtype, base + c * col_stride) == 0;
    if (!ref_zero) return;
    for (int64_t c = 0; c < cols; ++c) {
      const double x = numeric::load_as_double(out.bytes.data(), out.spec->dtype, base + c * col_stride);
      if (x != 0) {
        ok = false;
        if (where)
          *where = fmt::format("storage element {}: {} in a row the reference makes exactly zero", base + c * col_stride, x);
        return;
      }
    }
  });
  return ok;
}

bool bitwise_equal(const HostTensor& a, const HostTensor& b, std::string* where) {
  if (a.bytes.size() != b.bytes.size()) {
    if (where) *where = fmt::format("storage sizes differ ({} vs {} bytes)", a.bytes.size(), b.bytes.size());
    return false;
  }
  const int es = dtype_size(a.spec->dtype);
  for (size_t i = 0; i < a.bytes.size(); ++i) {
    if (a.bytes[i] != b.bytes[i]) {
      const int64_t e = static_cast<int64_t>(i) / es;
      if (where)
        *where = fmt::format("storage element {} differs: {} vs {}", e,
                             numeric::load_as_double(a.bytes.data(), a.spec->dtype, e),
                             numeric::load_as_double(b.bytes.data(), b.spec->dtype, e));
      return false;
    }
  }
  return true;
}

double ulp_error(const HostTensor& out, const HostTensor& ref, std::string* where) {
  const DType dt = ref.spec->dtype;
  // Mantissa bits and the exponent of the smallest normal of the stored dtype.
  int mant = 23, emin = -126;
  if (dt == DType::kF16) mant = 10, emin = -14;
  else if (dt == DType::kBF16) mant = 7, emin = -126;
  else if (dt == DType::kE4M3) mant = 3, emin = -6;
  const int es = dtype_size(dt);
  const int64_t n = static_cast<int64_t>(std::min(out.bytes.size(), ref.bytes.size())) / es;
  double worst = out.bytes.size() == ref.bytes.size() ? 0.0 : std::numeric_limits<double>::infinity();
  if (where && worst > 0) *where = fmt::format("storage sizes differ ({} vs {} bytes)", out.bytes.size(), ref.bytes.size());
  for (int64_t i = 0; i < n; ++i) {
    if (std::memcmp(out.bytes.data() + i * es, ref.bytes.data() + i * es, es) == 0) continue;
    const double x = numeric::load_as_double(out.bytes.data(), dt, i);
    const double y = numeric::load_as_double(ref.bytes.data(), dt, i);
    double e;
    if (!std::isfinite(x) || !std::isfinite(y)) {
      e = std::numeric_limits<double>::infinity();  // NaN / inf must be bitwise identical
    } else {
      int exp2 = emin;
      if (y != 0) {
        std::frexp(y, &exp2);  // |y| = f * 2^exp2, f in [0.5, 1): |y| in [2^(exp2-1), 2^exp2)
        exp2 = std::max(exp2 - 1, emin);
      }
      e = std::fabs(x - y) / std::ldexp(1.0, exp2 - mant);
    }
    if (e > worst) {
      worst = e;
      if (where) *where = fmt::format("storage element {}: {} vs reference {}", i, x, y);
    }
  }
  return worst;
}

HostTensor golden_tensor(const TensorSpec& spec, const nlohmann::json& golden) {
  // The golden tensor has the spec's dtype, shape and strides; only its contents differ.
  TensorSpec g;
  g.name = spec.name;
  g.dtype = spec.dtype;
  g.shape = spec.shape;
  g.strides = spec.strides;
  if (golden.contains("bits")) g.init = {{"kind", "bits"}, {"bits", golden["bits"]}};
  else if (golden.contains("values")) g.init = {{"kind", "values"}, {"values", golden["values"]}};
  else throw std::runtime_error(fmt::format("golden {}: expected \"bits\" or \"values\"", spec.name));
  HostTensor h = make_host_tensor(g, 0);
  h.spec = &spec;
  return h;
}

nlohmann::json with_impl(const nlohmann::json& config, const char* impl) {
  nlohmann::json c = config.is_object() ? config : nlohmann::json::object();
  if (!c.contains("impl")) c["impl"] = impl;
  return c;
}

// Fake, distinct, 256-aligned device addresses for compile-only validation (never dereferenced).
TensorArgs descriptor_args(const TestCase& c) {
  TensorArgs args;
  for (size_t i = 0; i < c.tensors.size(); ++i) {
    HostTensor shape_only;
    shape_only.spec = &c.tensors[i];
    args.set(c.tensors[i].name, shape_only.ref(reinterpret_cast<void*>((i + 1) << 32), {DeviceKind::kCUDA, 0}));
  }
  return args;
}

}  // namespace attnjit::cli
