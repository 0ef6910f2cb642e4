#include "ops/base/validation.hpp"

#include <cstdint>

namespace attnjit::detail {

namespace {
std::string names_of(std::initializer_list<std::string_view> names) {
  std::string s;
  for (auto n : names) s += fmt::format("{}{}", s.empty() ? "" : ", ", n);
  return s;
}
std::string dtypes_of(std::initializer_list<DType> dts) {
  std::string s;
  for (auto d : dts) s += fmt::format("{}{}", s.empty() ? "" : " or ", dtype_name(d));
  return s;
}
std::string strides_of(const TensorRef& t) {
  std::string s = "[";
  for (int d = 0; d < t.ndim; ++d) s += fmt::format("{}{}", d ? ", " : "", t.strides[d]);
  return s + "]";
}
}  // namespace

void ArgChecker::only_known(std::initializer_list<std::string_view> known) const {
  for (int i = 0; i < args_.size(); ++i) {
    bool ok = false;
    for (auto k : known) ok = ok || k == args_.name(i);
    if (!ok) fail("args", args_.name(i), "expected one of {}, got an unknown tensor name", names_of(known));
  }
}

const TensorRef& ArgChecker::required(std::string_view name) const {
  const TensorRef* t = args_.find(name);
  if (!t) fail("args", name, "expected a tensor, got none");
  return *t;
}

const TensorRef* ArgChecker::required_iff(std::string_view name, bool needed, std::string_view reason) const {
  const TensorRef* t = args_.find(name);
  if (needed && !t) fail("args", name, "expected a tensor ({}), got none", reason);
  if (!needed && t) fail("args", name, "expected no tensor (only {}), got one", reason);
  return t;
}

void ArgChecker::rank(std::string_view name, const TensorRef& t, int ndim, std::string_view dims) const {
  if (t.ndim != ndim) fail("shape", name, "expected {} dims {}, got {}", ndim, dims, t.shape_str());
}

void ArgChecker::extent(std::string_view name, const TensorRef& t, int dim, int64_t expected,
                        std::string_view what) const {
  if (t.shape[dim] != expected)
    fail("shape", name, "expected dim {} ({}) = {}, got {} (shape {})", dim, what, expected, t.shape[dim], t.shape_str());
}

void ArgChecker::dtype_in(std::string_view name, const TensorRef& t, std::initializer_list<DType> allowed) const {
  for (auto d : allowed)
    if (t.dtype == d) return;
  fail("dtype", name, "expected {}, got {}", dtypes_of(allowed), dtype_name(t.dtype));
}

void ArgChecker::dtype_is(std::string_view name, const TensorRef& t, DType expected, std::string_view why) const {
  if (t.dtype != expected)
    fail("dtype", name, "expected {}{}{}, got {}", dtype_name(expected), why.empty() ? "" : " ", why, dtype_name(t.dtype));
}

void ArgChecker::feature(std::string_view name, const TensorRef& t, bool read_only) const {
  if (t.numel() == 0) return;  // SPEC.md §1.12: zero-element tensors are valid whatever their strides
  const int es = dtype_size(t.dtype);
  const auto addr = reinterpret_cast<std::uintptr_t>(t.data);
  const bool device = placement_ == Placement::kDevice;
  if (t.ndim > 0 && t.shape[t.ndim - 1] > 1 && t.strides[t.ndim - 1] != 1)
    fail("layout", name, "expected innermost stride 1 (class F), got {}", t.strides[t.ndim - 1]);
  if (device && addr % 16 != 0) fail("layout", name, "expected a 16-byte aligned base (class F), got address {:#x}", addr);
  if (!device && addr % es != 0) fail("layout", name, "expected an element-aligned base, got address {:#x}", addr);
  for (int d = 0; d + 1 < t.ndim; ++d) {
    if (t.shape[d] == 1) continue;
    if (t.strides[d] == 0) {
      if (!read_only) fail("layout", name, "expected no zero (broadcast) stride on a written tensor, got 0 at dim {}", d);
      continue;
    }
    if (device && (t.strides[d] * es) % 16 != 0)
      fail("layout", name, "expected dim {} stride to be a multiple of 16 bytes (class F), got {} elements ({} bytes)", d,
           t.strides[d], t.strides[d] * es);
  }
}

void ArgChecker::metadata(std::string_view name, const TensorRef& t) const {
  if (t.numel() == 0) return;
  const auto addr = reinterpret_cast<std::uintptr_t>(t.data);
  if (addr % dtype_size(t.dtype) != 0)
    fail("layout", name, "expected a base aligned to {} bytes (class M), got address {:#x}", dtype_size(t.dtype), addr);
}

void ArgChecker::contiguous(std::string_view name, const TensorRef& t, bool align16) const {
  if (t.numel() == 0) return;
  if (!t.is_contiguous()) fail("layout", name, "expected a contiguous (row-major) tensor, got strides {}", strides_of(t));
  const auto addr = reinterpret_cast<std::uintptr_t>(t.data);
  const std::uintptr_t align = align16 && placement_ == Placement::kDevice ? 16 : dtype_size(t.dtype);
  if (addr % align != 0) fail("layout", name, "expected a {}-byte aligned base, got address {:#x}", align, addr);
}

void ArgChecker::output(std::string_view name, const TensorRef& t,
                        std::initializer_list<std::pair<std::string_view, const TensorRef*>> others) const {
  contiguous(name, t, /*align16=*/true);
  const auto lo = reinterpret_cast<std::uintptr_t>(t.data);
  const auto hi = lo + static_cast<std::uintptr_t>(t.numel() * dtype_size(t.dtype));
  for (const auto& [other_name, o] : others) {
    if (!o || o->numel() == 0 || t.numel() == 0) continue;
    int64_t span = 1;
    for (int d = 0; d < o->ndim; ++d) span += (o->shape[d] - 1) * o->strides[d];
    const auto olo = reinterpret_cast<std::uintptr_t>(o->data);
    const auto ohi = olo + static_cast<std::uintptr_t>(span * dtype_size(o->dtype));
    if (lo < ohi && olo < hi) fail("layout", name, "expected no overlap with {} (class O), got overlapping memory", other_name);
  }
}

void ArgChecker::device(std::string_view name, const TensorRef& t) {
  if (placement_ == Placement::kHost && t.device.kind != DeviceKind::kCPU)
    fail("device", name, "expected a host tensor (impl: reference), got {}", device_name(t.device));
  if (placement_ == Placement::kDevice && t.device.kind != DeviceKind::kCUDA)
    fail("device", name, "expected a CUDA tensor (impl: kernel), got {}", device_name(t.device));
  if (have_device_ && !(t.device == device_))
    fail("device", name, "expected the device of the other tensors ({}), got {}", device_name(device_), device_name(t.device));
  device_ = t.device;
  have_device_ = true;
}

}  // namespace attnjit::detail
