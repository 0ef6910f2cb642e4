// The NSA family (SPEC.md §2.14-2.17: nsa_compressed_fwd, nsa_topk, nsa_selected_fwd) through the public
// C++ API, for what the JSON cases cannot say: non-finite scales, device placement, overlapping outputs,
// the kernel impl's Unsupported error and empty warm-up matrix (nsa_compressed_fwd), the kernels
// nsa_topk's and nsa_selected_fwd's calls select and their warm-ups; the packed-metadata checks of
// validate_inputs leaving the outputs unwritten; and the references against inputs whose results are
// known in closed form (q = 0 gives uniform weights, constant key rows give known dot products).
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "attnjit/runtime.hpp"
#include "base/host_numeric.hpp"
#include "ops/registry.hpp"
#include "runtime/runtime_impl.hpp"
#include "test_util.hpp"

namespace {

namespace test = attnjit::test;
using attnjit::Device;
using attnjit::DeviceKind;
using attnjit::DType;
using attnjit::TensorArgs;
using attnjit::TensorRef;
namespace numeric = attnjit::numeric;

constexpr Device kHost{DeviceKind::kCPU, 0};
constexpr Device kGpu{DeviceKind::kCUDA, 0};
constexpr uint16_t kPoison = 0xA5A5;
constexpr int32_t kPoisonIdx = 0x7FFFFFFF;
constexpr double kInf = std::numeric_limits<double>::infinity();

// Packed metadata of requests with lengths `lens` (SPEC.md §2.14); chunk_offsets with bs > 0.
struct Meta {
  std::vector<int32_t> offsets{0}, token_indices, chunk_offsets{0};
  int64_t T = 0, N = 0, C = 0;
  Meta(std::vector<int> lens, int bs) {
    N = static_cast<int64_t>(lens.size());
    for (int n = 0; n < N; ++n) {
      offsets.push_back(offsets.back() + lens[n]);
      for (int p = 0; p < lens[n]; ++p) {
        token_indices.push_back(n);
        token_indices.push_back(p);
      }
      if (bs > 0) chunk_offsets.push_back(chunk_offsets.back() + (lens[n] + bs - 1) / bs);
    }
    T = offsets.back();
    C = chunk_offsets.back();
  }
  void add(TensorArgs& a, Device dev, bool chunks) {
    a.set("offsets", TensorRef::contiguous(offsets.data(), DType::kI32, {N + 1}, dev));
    a.set("token_indices", TensorRef::contiguous(token_indices.data(), DType::kI32, {T, 2}, dev));
    if (chunks) a.set("chunk_offsets", TensorRef::contiguous(chunk_offsets.data(), DType::kI32, {N + 1}, dev));
  }
};

void fill(std::vector<uint16_t>& x, size_t n, DType dt, int salt) {
  x.resize(n);
  for (size_t i = 0; i < n; ++i)
    numeric::store_from_double(x.data(), dt, static_cast<int64_t>(i), std::sin(0.37 * static_cast<double>(i) + salt) * 1.5);
}

double at(const std::vector<uint16_t>& x, DType dt, int64_t i) { return numeric::load_as_double(x.data(), dt, i); }

// Replaces every tensor's address by a distinct fake device address (never dereferenced).
TensorArgs on_device(const TensorArgs& host) {
  TensorArgs a;
  for (int i = 0; i < host.size(); ++i) {
    TensorRef t = *host.find(host.name(i));
    t.data = test::fake_addr(i);
    t.device = kGpu;
    a.set(host.name(i), t);
  }
  return a;
}

// nsa_compressed_fwd: q [T, H, DK], k_cmp [C, H_kv, DK], v_cmp [C, H_kv, DV], o [T, H, DV], lse [T, H].
struct Compressed {
  Meta m;
  int64_t H, H_kv, DK, DV;
  DType dt;
  std::vector<uint16_t> q, k, v, o;
  std::vector<float> lse;
  Compressed(std::vector<int> lens, int bs, int64_t h, int64_t hkv, int64_t dk, int64_t dv, DType d = DType::kF16)
      : m(std::move(lens), bs), H(h), H_kv(hkv), DK(dk), DV(dv), dt(d) {
    fill(q, static_cast<size_t>(m.T * H * DK), dt, 1);
    fill(k, static_cast<size_t>(m.C * H_kv * DK), dt, 2);
    fill(v, static_cast<size_t>(m.C * H_kv * DV), dt, 3);
    o.assign(static_cast<size_t>(m.T * H * DV), kPoison);
    lse.assign(static_cast<size_t>(m.T * H), std::numeric_limits<float>::quiet_NaN());
  }
  TensorArgs args(Device dev = kHost) {
    TensorArgs a;
    a.set("q", TensorRef::contiguous(q.data(), dt, {m.T, H, DK}, dev));
    a.set("k_cmp", TensorRef::contiguous(k.data(), dt, {m.C, H_kv, DK}, dev));
    a.set("v_cmp", TensorRef::contiguous(v.data(), dt, {m.C, H_kv, DV}, dev));
    m.add(a, dev, true);
    a.set("o", TensorRef::contiguous(o.data(), dt, {m.T, H, DV}, dev));
    a.set("lse", TensorRef::contiguous(lse.data(), DType::kF32, {m.T, H}, dev));
    return a;
  }
  bool untouched() const {
    return std::all_of(o.begin(), o.end(), [](uint16_t b) { return b == kPoison; }) &&
           std::all_of(lse.begin(), lse.end(), [](float x) { return std::isnan(x); });
  }
};

// nsa_topk: q [T, H, D], k_cmp [C, H_kv, D], block_indices [T, H_kv, S].
struct Topk {
  Meta m;
  int64_t H, H_kv, D, S;
  DType dt;
  std::vector<uint16_t> q, k;
  std::vector<int32_t> out;
  Topk(std::vector<int> lens, int bs, int64_t h, int64_t hkv, int64_t d, int64_t s, DType t = DType::kF16)
      : m(std::move(lens), bs), H(h), H_kv(hkv), D(d), S(s), dt(t) {
    fill(q, static_cast<size_t>(m.T * H * D), dt, 1);
    fill(k, static_cast<size_t>(m.C * H_kv * D), dt, 2);
    out.assign(static_cast<size_t>(m.T * H_kv * S), kPoisonIdx);
  }
  TensorArgs args(Device dev = kHost) {
    TensorArgs a;
    a.set("q", TensorRef::contiguous(q.data(), dt, {m.T, H, D}, dev));
    a.set("k_cmp", TensorRef::contiguous(k.data(), dt, {m.C, H_kv, D}, dev));
    m.add(a, dev, true);
    a.set("block_indices", TensorRef::contiguous(out.data(), DType::kI32, {m.T, H_kv, S}, dev));
    return a;
  }
  bool untouched() const { return std::all_of(out.begin(), out.end(), [](int32_t x) { return x == kPoisonIdx; }); }
};

// nsa_selected_fwd: q [T, H, D], k, v [T, H_kv, D], block_indices [T, H_kv, SEL], block_counts [T, H_kv].
struct Selected {
  Meta m;
  int64_t H, H_kv, D, SEL;
  DType dt;
  std::vector<uint16_t> q, k, v, o;
  std::vector<int32_t> idx, cnt;
  Selected(std::vector<int> lens, int64_t h, int64_t hkv, int64_t d, int64_t sel, DType t = DType::kF16)
      : m(std::move(lens), 0), H(h), H_kv(hkv), D(d), SEL(sel), dt(t) {
    fill(q, static_cast<size_t>(m.T * H * D), dt, 1);
    fill(k, static_cast<size_t>(m.T * H_kv * D), dt, 2);
    fill(v, static_cast<size_t>(m.T * H_kv * D), dt, 3);
    idx.assign(static_cast<size_t>(m.T * H_kv * SEL), -1);
    cnt.assign(static_cast<size_t>(m.T * H_kv), 0);
    o.assign(static_cast<size_t>(m.T * H * D), kPoison);
  }
  TensorArgs args(Device dev = kHost) {
    TensorArgs a;
    a.set("q", TensorRef::contiguous(q.data(), dt, {m.T, H, D}, dev));
    a.set("k", TensorRef::contiguous(k.data(), dt, {m.T, H_kv, D}, dev));
    a.set("v", TensorRef::contiguous(v.data(), dt, {m.T, H_kv, D}, dev));
    a.set("block_indices", TensorRef::contiguous(idx.data(), DType::kI32, {m.T, H_kv, SEL}, dev));
    a.set("block_counts", TensorRef::contiguous(cnt.data(), DType::kI32, {m.T, H_kv}, dev));
    m.add(a, dev, false);
    a.set("o", TensorRef::contiguous(o.data(), dt, {m.T, H, D}, dev));
    return a;
  }
  bool untouched() const { return std::all_of(o.begin(), o.end(), [](uint16_t b) { return b == kPoison; }); }
};

// The message of the error a run raises ("(no error)" when none).
std::string run_error(const attnjit::Op& op, const TensorArgs& args) {
  try {
    op.run(args);
  } catch (const attnjit::InvalidArgument& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("unexpected exception type: ") + e.what();
  }
  return "(no error)";
}

attnjit::Config compressed_cfg(int bs, bool validate = false) {
  return {{"impl", "reference"}, {"scale", 0.125}, {"bs", bs}, {"validate_inputs", validate}};
}
attnjit::Config topk_cfg(int bs, int S, double scale = 0.125) {
  return {{"impl", "reference"}, {"scale", scale}, {"bs", bs}, {"selected_block_num", S}};
}
attnjit::Config selected_cfg(int bs, bool causal, bool validate = false) {
  return {{"impl", "reference"}, {"scale", 0.125}, {"block_size", bs}, {"is_causal", causal}, {"validate_inputs", validate}};
}

}  // namespace

TEST_CASE("nsa ops: scale required, finite and > 0; integer parameters in range; unknown keys rejected") {
  test::TempDir dir("nsacfg");
  attnjit::Runtime rt(test::options_in(dir));
  const attnjit::Config base[] = {{{"bs", 4}}, {{"bs", 4}, {"selected_block_num", 4}},
                                  {{"block_size", 4}, {"is_causal", true}}};
  const char* ops[] = {"nsa_compressed_fwd", "nsa_topk", "nsa_selected_fwd"};
  for (int i = 0; i < 3; ++i) {
    INFO(ops[i]);
    CHECK_THROWS_WITH_AS(rt.op(ops[i], base[i]), doctest::Contains("param: scale: expected a finite value > 0, got none"),
                         attnjit::InvalidArgument);
    for (double s : {0.0, -1.0, kInf, std::numeric_limits<double>::quiet_NaN()}) {
      try {
        attnjit::Config c = base[i];
        c.set("scale", s);
        rt.op(ops[i], c);
        FAIL("scale " << s << " accepted");
      } catch (const attnjit::InvalidArgument& e) {
        // JSON text cannot carry inf / NaN: attnjit::Config refuses them before the op sees them.
        CHECK((test::contains(e.what(), ": param: scale: expected") ||
               test::starts_with(e.what(), "config: param: scale: expected a finite number")));
      }
    }
    attnjit::Config ok = base[i];
    ok.set("scale", 0.1);
    CHECK_NOTHROW(rt.op(ops[i], ok));
    ok.set("window_size_left", std::int64_t{3});
    CHECK_THROWS_AS(rt.op(ops[i], ok), attnjit::InvalidArgument);
  }
  for (int s : {0, 129, -1})
    CHECK_THROWS_WITH_AS(rt.op("nsa_topk", {{"scale", 0.1}, {"bs", 4}, {"selected_block_num", s}}),
                         doctest::Contains("selected_block_num: expected an integer in [1, 128]"), attnjit::InvalidArgument);
  CHECK_NOTHROW(rt.op("nsa_topk", {{"scale", 0.1}, {"bs", 4}, {"selected_block_num", 128}}));
  CHECK_THROWS_WITH_AS(rt.op("nsa_compressed_fwd", {{"scale", 0.1}, {"bs", 0}}), doctest::Contains("bs: expected an integer"),
                       attnjit::InvalidArgument);
  CHECK_THROWS_WITH_AS(rt.op("nsa_selected_fwd", {{"scale", 0.1}, {"block_size", 4}}),
                       doctest::Contains("is_causal: expected a boolean, got none"), attnjit::InvalidArgument);
}

// The kernels a call selects (descriptors only; the numerics are the GPU grid's,
// tests/gen/nsa_compressed_fwd_cases.py): the shared attention kernels in compressed-key mode, hopper on
// sm_90a under 'auto' where TMA can read k_cmp / v_cmp, portable elsewhere; DK != DV has no kernel.
TEST_CASE("nsa_compressed_fwd: the kernel a call selects per backend, arch and layout; gaps named") {
  test::TempDir dir("nsacmpkern");
  attnjit::Runtime rt(test::options_in(dir));
  auto& impl = rt.impl();
  auto chosen = [&](const char* backend, const TensorArgs& dev, const std::string& arch) {
    const nlohmann::json c = {{"scale", 0.1}, {"bs", 4}, {"backend", backend}};
    const auto specs = impl.op("nsa_compressed_fwd", c)->kernels_for(dev, arch);
    REQUIRE(specs.size() == 1);
    return specs[0].name;
  };
  auto gap = [&](const char* backend, const TensorArgs& dev, const std::string& arch) -> std::string {
    try {
      chosen(backend, dev, arch);
    } catch (const attnjit::Unsupported& e) {
      return e.what();
    }
    return "";
  };
  Compressed f16({3, 5}, 4, 16, 1, 64, 64);
  Compressed bf16({9, 0, 2}, 4, 64, 2, 128, 128, DType::kBF16);
  CHECK(chosen("auto", on_device(f16.args()), "sm_90a") == "nsa_compressed_fwd.hopper.fp16.d64.bm192.bn128.causal");
  CHECK(chosen("hopper", on_device(bf16.args()), "sm_90a") == "nsa_compressed_fwd.hopper.bf16.d128.bm128.bn128.causal");
  CHECK(chosen("portable", on_device(f16.args()), "sm_90a") == "nsa_compressed_fwd.portable.fp16.d64.bm128.bn64.causal");
  CHECK(chosen("auto", on_device(bf16.args()), "sm_80") == "nsa_compressed_fwd.portable.bf16.d128.bm128.bn32.causal");
  {
    const nlohmann::json c = {{"scale", 0.1}, {"bs", 4}};
    const auto specs = impl.op("nsa_compressed_fwd", c)->kernels_for(on_device(f16.args()), "sm_90a");
    REQUIRE(specs.size() == 1);
    // Compressed keys keep the one-tile grid (not persistent).
    CHECK(specs[0].entry == "attnjit::kernels::gqa_fwd_hopper<__half, 64, 128, 3, true, false, false, true, 4, false, false, false>");  // ..., SINKS, PERSISTENT, Q_TMA
  }
  CHECK(test::contains(gap("hopper", on_device(f16.args()), "sm_80"),
                       "nsa_compressed_fwd: unsupported: backend 'hopper': it needs sm_90a"));
  CHECK(test::contains(gap("portable", on_device(f16.args()), "sm_75"), "backend 'portable' needs sm_80 or newer"));
  // A broadcast k_cmp (zero head stride) is class F but no TMA source: 'auto' takes the portable kernel,
  // 'hopper' names the gap.
  Compressed bc({3, 5}, 4, 32, 2, 64, 64);
  TensorArgs dev = on_device(bc.args());
  TensorRef k = *dev.find("k_cmp");
  k.strides[1] = 0;
  dev.set("k_cmp", k);
  CHECK(chosen("auto", dev, "sm_90a") == "nsa_compressed_fwd.portable.fp16.d64.bm128.bn64.causal");
  CHECK(test::contains(gap("hopper", dev, "sm_90a"), "nsa_compressed_fwd: unsupported: backend 'hopper': k_cmp"));
  // DK != DV: no kernel on any backend; the reference serves it.
  Compressed mixed({3, 5}, 4, 16, 1, 128, 64);
  for (const char* backend : {"auto", "portable", "hopper"})
    CHECK(gap(backend, on_device(mixed.args()), "sm_90a") ==
          "nsa_compressed_fwd: unsupported: impl 'kernel': the kernels take DK = DV, got DK 128 and DV 64; use impl "
          "'reference' (CPU)");
  // Warm-up: both dtypes at D 64 and 128 per backend, hopper only where the arch has it.
  std::set<std::string> warm;
  for (const auto& s : attnjit::detail::find_op("nsa_compressed_fwd").default_matrix("sm_90a")) warm.insert(s.name);
  std::set<std::string> want;
  for (const char* dt : {"fp16", "bf16"})
    for (int D : {64, 128}) {
      want.insert(fmt::format("nsa_compressed_fwd.portable.{}.d{}.bm128.bn{}.causal", dt, D, D == 128 ? 32 : 64));
      want.insert(fmt::format("nsa_compressed_fwd.hopper.{}.d{}.bm{}.bn128.causal", dt, D, D == 64 ? 192 : 128));
    }
  CHECK(warm == want);
  CHECK(attnjit::detail::find_op("nsa_compressed_fwd").default_matrix("sm_80").size() == 4);
  // A bad call is still an InvalidArgument (the checks come before the kernel choice); host tensors on the
  // kernel impl are a device error with the outputs untouched.
  TensorArgs bad = on_device(f16.args());
  TensorRef q = *bad.find("q");
  q.dtype = DType::kF32;
  bad.set("q", q);
  CHECK(test::starts_with(run_error(rt.op("nsa_compressed_fwd", {{"scale", 0.1}, {"bs", 4}}), bad),
                          "nsa_compressed_fwd: dtype: q: expected fp16 or bf16"));
  CHECK(test::starts_with(run_error(rt.op("nsa_compressed_fwd", {{"scale", 0.1}, {"bs", 4}}), f16.args()),
                          "nsa_compressed_fwd: device: q: expected a CUDA tensor"));
  CHECK(f16.untouched());
}

// The kernels a call selects (descriptors only; the numerics are the GPU grid's,
// tests/gen/nsa_selected_fwd_cases.py): one portable kernel per dtype, D and row-group count (g / 16
// up to 64 rows, tiles of 64 rows beyond; hopper: the same head classes, sm_90a only); 'hopper' names its
// gap elsewhere; bad calls are still InvalidArgument.
TEST_CASE("nsa_selected_fwd: the kernel a call selects per dtype, D, group and backend (hopper: sm_90a only)") {
  test::TempDir dir("nsaselkern");
  attnjit::Runtime rt(test::options_in(dir));
  auto& impl = rt.impl();
  const nlohmann::json cfg = {{"scale", 0.1}, {"block_size", 4}, {"is_causal", true}};
  auto selected = [&](const nlohmann::json& c, Selected& sl, const std::string& arch) {
    const auto specs = impl.op("nsa_selected_fwd", c)->kernels_for(on_device(sl.args()), arch);
    REQUIRE(specs.size() == 1);
    return specs[0].name;
  };
  struct Want {
    int64_t H, H_kv, D;
    DType dt;
    const char* name;
  } wants[] = {{16, 1, 64, DType::kF16, "nsa_selected_fwd.portable.fp16.d64.m16.bn32s2k2"},
               {32, 2, 128, DType::kBF16, "nsa_selected_fwd.portable.bf16.d128.m16.bn32s2k2"},
               {32, 1, 128, DType::kF16, "nsa_selected_fwd.portable.fp16.d128.m32.bn32s2k2"},
               {96, 2, 64, DType::kBF16, "nsa_selected_fwd.portable.bf16.d64.m48.bn32s2k2"},
               {64, 1, 128, DType::kBF16, "nsa_selected_fwd.portable.bf16.d128.m64.bn32s2k2"},
               {128, 1, 128, DType::kF16, "nsa_selected_fwd.portable.fp16.d128.m64.bn32s2k2"},
               {160, 2, 64, DType::kF16, "nsa_selected_fwd.portable.fp16.d64.m64.bn32s2k2"}};
  for (const auto& w : wants) {
    INFO(w.name);
    Selected sl({3, 5}, w.H, w.H_kv, w.D, 2, w.dt);
    // The hopper kernel of the same class: "m<rows>.bn32s2k2" -> "h<heads>.s2".
    std::string hopper_name = w.name;
    hopper_name.replace(hopper_name.find("portable"), 8, "hopper");
    hopper_name.replace(hopper_name.find(".m"), 2, ".h");
    hopper_name.replace(hopper_name.find(".bn32s2k2"), 9, ".s2");
    for (const char* backend : {"auto", "portable", "hopper"}) {
      nlohmann::json c = cfg;
      c["backend"] = backend;
      CHECK(selected(c, sl, "sm_90a") == (std::string(backend) == "hopper" ? hopper_name : std::string(w.name)));
      if (std::string(backend) != "hopper") CHECK(selected(c, sl, "sm_80") == w.name);
    }
  }
  Selected sl({3, 5}, 16, 1, 64, 2);
  nlohmann::json hopper = cfg;
  hopper["backend"] = "hopper";
  try {
    impl.op("nsa_selected_fwd", hopper)->kernels_for(on_device(sl.args()), "sm_80");
    FAIL("backend 'hopper' selected a kernel on sm_80");
  } catch (const attnjit::Unsupported& e) {
    CHECK(std::string(e.what()) ==
          "nsa_selected_fwd: unsupported: backend 'hopper': it needs sm_90a (wgmma), the device is sm_80");
  }
  try {
    impl.op("nsa_selected_fwd", cfg)->kernels_for(on_device(sl.args()), "sm_75");
    FAIL("sm_75 selected a kernel");
  } catch (const attnjit::Unsupported& e) {
    CHECK(test::contains(e.what(), "nsa_selected_fwd: backend 'portable' needs sm_80 or newer, got sm_75"));
  }
  // A bad call is still an InvalidArgument (the checks come before the kernel choice), and host tensors
  // on the kernel impl are a device error with the output untouched.
  TensorArgs bad = on_device(sl.args());
  TensorRef q = *bad.find("q");
  q.dtype = DType::kF32;
  bad.set("q", q);
  for (const char* backend : {"auto", "hopper"}) {
    attnjit::Config c{{"scale", 0.1}, {"block_size", 4}, {"is_causal", true}};
    c.set("backend", std::string(backend));
    CHECK(test::starts_with(run_error(rt.op("nsa_selected_fwd", c), bad), "nsa_selected_fwd: dtype: q: expected fp16 or bf16"));
  }
  CHECK(test::starts_with(run_error(rt.op("nsa_selected_fwd", {{"scale", 0.1}, {"block_size", 4}, {"is_causal", true}}),
                                    sl.args()),
                          "nsa_selected_fwd: device: q: expected a CUDA tensor"));
  CHECK(sl.untouched());
  // The warm-up: D 128, fp16 and bf16, group sizes 16, 32 and >= 64, both backends on sm_90a.
  std::set<std::string> warm;
  for (const auto& s : attnjit::detail::find_op("nsa_selected_fwd").default_matrix("sm_90a")) warm.insert(s.name);
  std::set<std::string> want;
  for (const char* dt : {"fp16", "bf16"})
    for (int m : {16, 32, 64}) {
      want.insert(fmt::format("nsa_selected_fwd.portable.{}.d128.m{}.bn32s2k2", dt, m));
      want.insert(fmt::format("nsa_selected_fwd.hopper.{}.d128.h{}.s2", dt, m));
    }
  CHECK(warm == want);
  CHECK(attnjit::detail::find_op("nsa_selected_fwd").default_matrix("sm_80").size() == 6);
}

// The kernels an nsa_topk call selects (descriptors only; the numerics are the GPU grid's,
// tests/gen/nsa_topk_cases.py): one portable kernel per dtype, D and tokens per CTA (64 / G for G 16
// and 32, else 1); 'hopper' names its gap; bad calls are still InvalidArgument.
TEST_CASE("nsa_topk: the kernel a call selects per dtype, D, group and backend (hopper: sm_90a only)") {
  test::TempDir dir("nsatopkkern");
  attnjit::Runtime rt(test::options_in(dir));
  auto& impl = rt.impl();
  const nlohmann::json cfg = {{"scale", 0.1}, {"bs", 4}, {"selected_block_num", 4}};
  auto selected = [&](const nlohmann::json& c, Topk& tk, const std::string& arch) {
    const auto specs = impl.op("nsa_topk", c)->kernels_for(on_device(tk.args()), arch);
    REQUIRE(specs.size() == 1);
    return specs[0].name;
  };
  struct Want {
    int64_t H, H_kv, D;
    DType dt;
    const char* name;
  } wants[] = {{16, 1, 64, DType::kF16, "nsa_topk.portable.fp16.d64.t4.bn32s2w1024"},
               {64, 4, 128, DType::kBF16, "nsa_topk.portable.bf16.d128.t4.bn32s2w1024"},
               {32, 1, 128, DType::kF16, "nsa_topk.portable.fp16.d128.t2.bn32s2w1024"},
               {96, 2, 64, DType::kBF16, "nsa_topk.portable.bf16.d64.t1.bn32s2w1024"},
               {64, 1, 128, DType::kBF16, "nsa_topk.portable.bf16.d128.t1.bn32s2w1024"},
               {256, 2, 128, DType::kF16, "nsa_topk.portable.fp16.d128.t1.bn32s2w1024"}};
  for (const auto& w : wants) {
    INFO(w.name);
    Topk tk({3, 5}, 4, w.H, w.H_kv, w.D, 4, w.dt);
    // 'portable' everywhere; 'auto' the hopper kernel (512-candidate windows) on sm_90a, else portable.
    std::string hopper_name = w.name;
    hopper_name.replace(hopper_name.find("portable"), 8, "hopper");
    hopper_name.replace(hopper_name.find("w1024"), 5, "w512");
    for (const char* backend : {"auto", "portable"}) {
      nlohmann::json c = cfg;
      c["backend"] = backend;
      CHECK(selected(c, tk, "sm_90a") == (std::string(backend) == "auto" ? hopper_name : std::string(w.name)));
      CHECK(selected(c, tk, "sm_80") == w.name);
    }
  }
  Topk tk({3, 5}, 4, 16, 1, 64, 4);
  nlohmann::json hopper = cfg;
  hopper["backend"] = "hopper";
  // 'hopper' takes the wgmma kernel on sm_90a and names the gap elsewhere.
  CHECK(selected(hopper, tk, "sm_90a") == std::string("nsa_topk.hopper.fp16.d64.t4.bn32s2w512"));
  try {
    impl.op("nsa_topk", hopper)->kernels_for(on_device(tk.args()), "sm_80");
    FAIL("backend 'hopper' selected a kernel on sm_80");
  } catch (const attnjit::Unsupported& e) {
    CHECK(std::string(e.what()) == "nsa_topk: unsupported: backend 'hopper': it needs sm_90a (wgmma), the device is sm_80");
  }
  try {
    impl.op("nsa_topk", cfg)->kernels_for(on_device(tk.args()), "sm_75");
    FAIL("sm_75 selected a kernel");
  } catch (const attnjit::Unsupported& e) {
    CHECK(test::contains(e.what(), "nsa_topk: backend 'portable' needs sm_80 or newer, got sm_75"));
  }
  TensorArgs bad = on_device(tk.args());
  TensorRef q = *bad.find("q");
  q.dtype = DType::kF32;
  bad.set("q", q);
  for (const char* backend : {"auto", "hopper"}) {
    attnjit::Config c{{"scale", 0.1}, {"bs", 4}, {"selected_block_num", 4}};
    c.set("backend", std::string(backend));
    CHECK(test::starts_with(run_error(rt.op("nsa_topk", c), bad), "nsa_topk: dtype: q: expected fp16 or bf16"));
  }
  CHECK(test::starts_with(run_error(rt.op("nsa_topk", {{"scale", 0.1}, {"bs", 4}, {"selected_block_num", 4}}),
                                    tk.args()),
                          "nsa_topk: device: q: expected a CUDA tensor"));
  CHECK(tk.untouched());
  // The warm-up: D 128, fp16 and bf16, 4, 2 and 1 tokens a CTA (group sizes 16, 32, >= 48); both
  // backends on sm_90a, portable only on sm_80.
  std::set<std::string> warm;
  for (const auto& s : attnjit::detail::find_op("nsa_topk").default_matrix("sm_90a")) warm.insert(s.name);
  std::set<std::string> want;
  for (const char* backend : {"portable", "hopper"})
    for (const char* dt : {"fp16", "bf16"})
      for (int t : {4, 2, 1})
        want.insert(fmt::format("nsa_topk.{}.{}.d128.t{}.bn32s2w{}", backend, dt, t,
                                std::string(backend) == "hopper" ? 512 : 1024));
  CHECK(warm == want);
  CHECK(attnjit::detail::find_op("nsa_topk").default_matrix("sm_80").size() == 6);
}

TEST_CASE("nsa references: device tensors, mixed placements and overlapping outputs are rejected, unwritten") {
  test::TempDir dir("nsaref");
  attnjit::Runtime rt(test::options_in(dir));
  Compressed cp({3, 5}, 4, 16, 1, 64, 64);
  auto op = rt.op("nsa_compressed_fwd", compressed_cfg(4));
  CHECK(test::starts_with(run_error(op, on_device(cp.args())), "nsa_compressed_fwd: device: q: expected a host tensor"));
  TensorArgs mixed = cp.args();
  TensorRef co = *mixed.find("chunk_offsets");
  co.device = kGpu;
  mixed.set("chunk_offsets", co);
  CHECK(test::starts_with(run_error(op, mixed), "nsa_compressed_fwd: device: chunk_offsets: expected a host tensor"));
  TensorArgs a = cp.args();
  a.set("lse", TensorRef::contiguous(reinterpret_cast<float*>(cp.o.data()), DType::kF32, {cp.m.T, 16}, kHost));
  CHECK(test::starts_with(run_error(op, a), "nsa_compressed_fwd: layout: lse: expected no overlap with o"));
  a = cp.args();
  a.set("o", TensorRef::contiguous(cp.q.data(), cp.dt, {cp.m.T, 16, 64}, kHost));
  CHECK(test::starts_with(run_error(op, a), "nsa_compressed_fwd: layout: o: expected no overlap with q"));
  CHECK(cp.untouched());

  Topk tk({3, 5}, 4, 16, 1, 64, 2);
  a = tk.args();
  a.set("block_indices", TensorRef::contiguous(tk.m.token_indices.data(), DType::kI32, {tk.m.T, 1, 2}, kHost));
  CHECK(test::starts_with(run_error(rt.op("nsa_topk", topk_cfg(4, 2)), a),
                          "nsa_topk: layout: block_indices: expected no overlap with token_indices"));
  Selected sl({3, 5}, 16, 1, 64, 2);
  a = sl.args();
  std::vector<uint16_t> big(sl.o.size() + 64);
  a.set("o", TensorRef::contiguous(big.data() + 64, sl.dt, {sl.m.T, 16, 64}, kHost));
  a.set("v", TensorRef::contiguous(big.data(), sl.dt, {sl.m.T, 1, 64}, kHost));
  CHECK(test::starts_with(run_error(rt.op("nsa_selected_fwd", selected_cfg(4, true)), a),
                          "nsa_selected_fwd: layout: o: expected no overlap with v"));
  CHECK(sl.untouched());
}

TEST_CASE("nsa validate_inputs: packed-metadata violations raise content errors naming tensor, element and rule") {
  test::TempDir dir("nsavalid");
  attnjit::Runtime rt(test::options_in(dir));
  Compressed cp({3, 5}, 4, 16, 1, 64, 64);
  auto op = rt.op("nsa_compressed_fwd", compressed_cfg(4, true));
  CHECK(run_error(op, cp.args()) == "(no error)");  // valid metadata: runs
  cp.o.assign(cp.o.size(), kPoison);
  cp.lse.assign(cp.lse.size(), std::numeric_limits<float>::quiet_NaN());
  cp.m.chunk_offsets = {0, 1, 2};  // request 1 has 5 tokens: ceil(5 / 4) = 2 chunks
  CHECK(run_error(op, cp.args()) ==
        "nsa_compressed_fwd: content: chunk_offsets: expected request 1's chunk count chunk_offsets[2] - "
        "chunk_offsets[1] to be ceil(len 5 / bs 4) = 2, got 1");
  cp.m.chunk_offsets = {0, 1, 3};
  cp.m.token_indices[2 * 6 + 1] = 2;  // token 6 is position 3 of request 1
  CHECK(run_error(op, cp.args()) ==
        "nsa_compressed_fwd: content: token_indices: expected token 6's position 6 - offsets[1] = 3, got 2 at [6, 1]");
  cp.m.token_indices[2 * 6 + 1] = 3;
  cp.m.offsets = {0, 4, 8};
  CHECK(test::starts_with(run_error(op, cp.args()),
                          "nsa_compressed_fwd: content: token_indices: expected token 3's request id n"));
  CHECK(cp.untouched());
  // Without validate_inputs the contents are not inspected (the call runs).
  CHECK(run_error(rt.op("nsa_compressed_fwd", compressed_cfg(4, false)), cp.args()) == "(no error)");

  Selected sl({3, 5}, 16, 1, 64, 2);
  sl.cnt[4] = 3;
  CHECK(run_error(rt.op("nsa_selected_fwd", selected_cfg(4, true, true)), sl.args()) ==
        "nsa_selected_fwd: content: block_counts: expected values in [0, SEL = 2], got 3 at [4, 0]");
  sl.cnt[4] = 0;
  sl.m.offsets[0] = 1;
  CHECK(run_error(rt.op("nsa_selected_fwd", selected_cfg(4, true, true)), sl.args()) ==
        "nsa_selected_fwd: content: offsets: expected element 0 to be 0, got 1");
  CHECK(sl.untouched());
}

TEST_CASE("nsa_compressed_fwd reference: q = 0 averages the complete chunks; no complete chunk gives o = 0, lse = -inf") {
  test::TempDir dir("nsacmp");
  attnjit::Runtime rt(test::options_in(dir));
  for (DType dt : {DType::kF16, DType::kBF16}) {
    // Requests of 5, 0, 2 and 1 tokens, bs 2: chunks 3, 0, 1, 1 (the trailing partial chunks count).
    Compressed c({5, 0, 2, 1}, 2, 32, 2, 64, 128, dt);
    REQUIRE(c.m.C == 5);
    std::fill(c.q.begin(), c.q.end(), uint16_t{0});
    rt.op("nsa_compressed_fwd", compressed_cfg(2)).run(c.args());
    for (int64_t t = 0; t < c.m.T; ++t) {
      const int n = c.m.token_indices[2 * t], p = c.m.token_indices[2 * t + 1];
      const int nc = (p + 1) / 2;  // complete chunks whose last token is <= p
      for (int64_t h = 0; h < 32; ++h) {
        const int64_t r = h / 16;
        const double lse = c.lse[t * 32 + h];
        if (nc == 0) {
          CHECK(lse == -kInf);
        } else {
          CHECK(lse == doctest::Approx(std::log(static_cast<double>(nc))).epsilon(1e-6));
        }
        for (int64_t d = 0; d < 128; ++d) {
          double want = 0;
          for (int cc = 0; cc < nc; ++cc) want += at(c.v, dt, ((c.m.chunk_offsets[n] + cc) * 2 + r) * 128 + d) / nc;
          const double got = at(c.o, dt, (t * 32 + h) * 128 + d);
          if (nc == 0) {
            CHECK(got == 0.0);
            CHECK(!std::signbit(got));
          } else {
            CHECK(std::fabs(got - want) <= (dt == DType::kF16 ? 2e-3 : 1e-2) * std::max(1.0, std::fabs(want)));
          }
        }
      }
    }
  }
}

TEST_CASE("nsa_compressed_fwd reference: against a direct softmax over the visible chunks") {
  test::TempDir dir("nsacmp2");
  attnjit::Runtime rt(test::options_in(dir));
  Compressed c({7, 3}, 3, 16, 1, 64, 64);
  rt.op("nsa_compressed_fwd", compressed_cfg(3)).run(c.args());
  for (int64_t t = 0; t < c.m.T; ++t) {
    const int n = c.m.token_indices[2 * t], p = c.m.token_indices[2 * t + 1], nc = (p + 1) / 3;
    for (int64_t h = 0; h < 16; ++h) {
      std::vector<double> z;
      for (int cc = 0; cc < nc; ++cc) {
        double s = 0;
        for (int64_t d = 0; d < 64; ++d)
          s += at(c.q, c.dt, (t * 16 + h) * 64 + d) * at(c.k, c.dt, (c.m.chunk_offsets[n] + cc) * 64 + d);
        z.push_back(0.125 * s);
      }
      double Z = 0;
      for (double x : z) Z += std::exp(x);
      if (nc) CHECK(c.lse[t * 16 + h] == doctest::Approx(std::log(Z)).epsilon(1e-5));
      for (int64_t d = 0; d < 64; ++d) {
        double want = 0;
        for (int cc = 0; cc < nc; ++cc) want += std::exp(z[cc]) / Z * at(c.v, c.dt, (c.m.chunk_offsets[n] + cc) * 64 + d);
        CHECK(at(c.o, c.dt, (t * 16 + h) * 64 + d) == doctest::Approx(want).epsilon(2e-3).scale(1.0));
      }
    }
  }
}

TEST_CASE("nsa_selected_fwd reference: q = 0 averages the visible multiset; unread slots, -1, future blocks skipped") {
  test::TempDir dir("nsasel");
  attnjit::Runtime rt(test::options_in(dir));
  // One request of 10 tokens, block size 4 (blocks [0, 4), [4, 8), [8, 10)), one KV head, SEL 4.
  for (bool causal : {true, false}) {
    Selected s({10}, 16, 1, 64, 4);
    std::fill(s.q.begin(), s.q.end(), uint16_t{0});
    for (int64_t t = 0; t < 10; ++t) {
      // Slots: block 2, -1, block 1, block 2 again (count 3: the repeat in slot 3 is never read), except
      // token 1 (count 0, junk in every slot) and token 6 (count 4: block 2 counts twice).
      const int32_t row[4] = {2, -1, 1, 2};
      for (int u = 0; u < 4; ++u) s.idx[t * 4 + u] = row[u];
      s.cnt[t] = t == 1 ? 0 : t == 6 ? 4 : 3;
    }
    rt.op("nsa_selected_fwd", selected_cfg(4, causal)).run(s.args());
    for (int64_t t = 0; t < 10; ++t) {
      const int64_t limit = causal ? t + 1 : 10;
      std::vector<int64_t> keys;
      for (int u = 0; u < s.cnt[t]; ++u) {
        const int64_t b = s.idx[t * 4 + u];
        if (b < 0 || b * 4 >= limit) continue;
        for (int64_t x = b * 4; x < std::min<int64_t>((b + 1) * 4, limit); ++x) keys.push_back(x);
      }
      // Token 6: causal sees block 1 truncated at itself ([4, 7)); non-causal sees block 2 twice.
      if (t == 6) CHECK(keys.size() == (causal ? 3u : 8u));
      for (int64_t h = 0; h < 16; ++h)
        for (int64_t d = 0; d < 64; ++d) {
          double want = 0;
          for (int64_t x : keys) want += at(s.v, s.dt, x * 64 + d) / static_cast<double>(keys.size());
          const double got = at(s.o, s.dt, (t * 16 + h) * 64 + d);
          if (keys.empty()) {
            CHECK(got == 0.0);
          } else {
            CHECK(std::fabs(got - want) <= 2e-3 * std::max(1.0, std::fabs(want)));
          }
        }
    }
  }
}

TEST_CASE("nsa_topk reference: forced chunks, importance order by known dot products, -1 padding, no future chunk") {
  test::TempDir dir("nsatopk");
  attnjit::Runtime rt(test::options_in(dir));
  // One request of 8 tokens, bs 1 (chunk c is token c), D 64, G 16, S 5. q = 1 everywhere and scale
  // 1/64 (exact in fp16), so qs = 1/64 and <qs, K_c> = a_c for k_cmp row c filled with a_c.
  const double a[8] = {0.5, 3.0, -1.0, 2.0, 0.0, 1.0, 4.0, 6.0};
  Topk t({8}, 1, 16, 1, 64, 5);
  for (int64_t i = 0; i < 8 * 16 * 64; ++i) numeric::store_from_double(t.q.data(), t.dt, i, 1.0);
  for (int64_t c = 0; c < 8; ++c)
    for (int64_t d = 0; d < 64; ++d) numeric::store_from_double(t.k.data(), t.dt, c * 64 + d, a[c]);
  rt.op("nsa_topk", topk_cfg(1, 5, 1.0 / 64)).run(t.args());
  for (int64_t p = 0; p < 8; ++p) {
    const int64_t cur = p;
    // Expected: forced {0, cur - 1, cur}, then the non-forced c < cur - 1 by descending a_c.
    std::vector<int64_t> rest;
    for (int64_t c = 1; c < cur - 1; ++c) rest.push_back(c);
    std::sort(rest.begin(), rest.end(), [&](int64_t x, int64_t y) { return a[x] > a[y]; });
    std::set<int64_t> want = {0, std::max<int64_t>(cur - 1, 0), cur};
    for (int64_t c : rest)
      if (static_cast<int64_t>(want.size()) < 5) want.insert(c);
    const int64_t m = std::min<int64_t>(5, cur + 1);
    REQUIRE(static_cast<int64_t>(want.size()) == m);
    std::set<int64_t> got;
    for (int64_t u = 0; u < 5; ++u) {
      const int32_t v = t.out[p * 5 + u];
      if (u < m) {
        CHECK(v >= 0);
        CHECK(v <= cur);
        got.insert(v);
      } else {
        CHECK(v == -1);
      }
    }
    INFO("p = " << p);
    CHECK(got == want);
    // The reference's order: descending importance (forced first, ties by ascending id).
    if (cur >= 2) {
      CHECK(t.out[p * 5 + 0] == 0);
      CHECK(t.out[p * 5 + 1] == cur - 1);
      CHECK(t.out[p * 5 + 2] == cur);
    }
  }
}
