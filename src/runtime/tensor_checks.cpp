#include "runtime/tensor_checks.hpp"

#include <fmt/format.h>

#include <cstring>
#include <limits>
#include <type_traits>
#include <utility>
#include <vector>

#include "attnjit/error.hpp"
#include "ops/registry.hpp"

namespace attnjit::detail {

namespace {

[[noreturn]] void fail(std::string_view op, std::string_view category, std::string_view name, const std::string& msg) {
  if (op.empty()) throw InvalidArgument(fmt::format("{}: {}: {}", name, category, msg));
  throw InvalidArgument(fmt::format("{}: {}: {}: {}", op, category, name, msg));
}

std::string shape_of(const int64_t* shape, int ndim) {
  std::string s = "[";
  for (int d = 0; d < ndim; ++d) s += fmt::format("{}{}", d ? ", " : "", shape[d]);
  return s + "]";
}

// The DLDeviceType as an integer, without loading a value outside the enum's range as the enum.
int64_t device_type_value(const DLDevice& dev) {
  using Raw = std::underlying_type_t<DLDeviceType>;
  Raw raw{};
  static_assert(sizeof raw == sizeof dev.device_type);
  std::memcpy(&raw, &dev.device_type, sizeof raw);
  return static_cast<int64_t>(raw);
}

}  // namespace

std::optional<TensorProblem> tensor_problem(const TensorRef& t) {
  auto problem = [](const char* cat, std::string msg) { return TensorProblem{cat, std::move(msg)}; };
  if (t.ndim < 0 || t.ndim > TensorRef::kMaxDims)
    return problem("shape", fmt::format("expected at most {} dims, got {}", TensorRef::kMaxDims, t.ndim));
  int64_t numel = 1;
  for (int d = 0; d < t.ndim; ++d) {
    if (t.shape[d] < 0)
      return problem("shape", fmt::format("expected non-negative extents, got {} at dim {}", t.shape[d], d));
    if (t.strides[d] < 0)
      return problem("layout", fmt::format("expected non-negative strides, got {} at dim {}", t.strides[d], d));
    // NOTE: the product of the non-zero extents bounds every partial product, in any order.
    if (t.shape[d] != 0 && !checked_mul(numel, t.shape[d], &numel))
      return problem("shape", fmt::format("expected an element count that fits int64, got shape {}", t.shape_str()));
  }
  for (int d = 0; d < t.ndim; ++d)
    if (t.shape[d] == 0) return std::nullopt;  // no elements: any base and strides
  int64_t span = 1;
  for (int d = 0; d < t.ndim; ++d) {
    int64_t term = 0;
    if (!checked_mul(t.shape[d] - 1, t.strides[d], &term) || !checked_add(span, term, &span))
      return problem("layout", fmt::format("expected strides whose span fits int64, got stride {} at dim {} (shape {})",
                                           t.strides[d], d, t.shape_str()));
  }
  int64_t bytes = 0;
  if (!checked_mul(span, dtype_size(t.dtype), &bytes))
    return problem("layout", fmt::format("expected a byte span that fits int64, got {} elements of {} bytes (shape {})",
                                         span, dtype_size(t.dtype), t.shape_str()));
  if (!t.data)
    return problem("layout",
                   fmt::format("expected a non-NULL data pointer for a tensor of shape {}, got NULL", t.shape_str()));
  const auto addr = reinterpret_cast<std::uintptr_t>(t.data);
  if (addr > std::numeric_limits<std::uintptr_t>::max() - static_cast<std::uintptr_t>(bytes))
    return problem("layout", fmt::format("expected an address range that does not wrap, got base {:#x} + {} bytes",
                                         addr, bytes));
  return std::nullopt;
}

void check_tensor_args(const TensorArgs& args, std::string_view op) {
  for (int i = 0; i < args.size(); ++i) {
    if (auto p = tensor_problem(args.tensor(i))) fail(op, p->category, args.name(i), p->message);
  }
}

void throw_allocation_failure(const TensorArgs& args, std::string_view op) {
  std::string shapes;
  for (int i = 0; i < args.size(); ++i)
    shapes += fmt::format("{}{} {}", i ? ", " : "", args.name(i), args.tensor(i).shape_str());
  throw InvalidArgument(fmt::format("{}: shape: tensors: expected shapes whose working memory can be allocated, got {} "
                                    "(std::bad_alloc)", op, shapes));
}

namespace {
std::string prefixed(std::string_view op, const std::string& message) {
  if (message.size() > op.size() + 1 && message.compare(0, op.size(), op) == 0 && message[op.size()] == ':')
    return message;
  const auto colon = message.find(": ");
  if (colon != std::string::npos) {
    const std::string_view head(message.data(), colon);
    for (const auto& d : op_definitions())
      if (d.name == head) return fmt::format("{}{}", op, message.substr(colon));
  }
  return fmt::format("{}: {}", op, message);
}
}  // namespace

void rethrow_with_op(std::string_view op) {
  try {
    throw;
  } catch (const Unsupported& e) {
    throw Unsupported(prefixed(op, e.what()));
  } catch (const InvalidArgument& e) {
    if (std::string_view(e.what()).rfind("unknown op '", 0) == 0) throw;
    throw InvalidArgument(prefixed(op, e.what()));
  }
}

TensorRef checked_from_dlpack(const DLTensor& t, std::string_view op, std::string_view name) {
  TensorRef r;
  if (t.ndim < 0 || t.ndim > TensorRef::kMaxDims)
    fail(op, "shape", name, fmt::format("expected at most {} dims, got {}", TensorRef::kMaxDims, t.ndim));
  if (t.ndim > 0 && !t.shape) fail(op, "shape", name, fmt::format("expected a shape array for {} dims, got NULL", t.ndim));
  const DLDataType dt = t.dtype;
  if (dt.lanes != 1) fail(op, "dtype", name, fmt::format("expected lanes 1, got {}", dt.lanes));
  if (dt.code == kDLFloat && dt.bits == 16) r.dtype = DType::kF16;
  else if (dt.code == kDLBfloat && dt.bits == 16) r.dtype = DType::kBF16;
  else if (dt.code == kDLFloat && dt.bits == 32) r.dtype = DType::kF32;
  else if (dt.code == kDLInt && dt.bits == 32) r.dtype = DType::kI32;
  else if (dt.code == kDLInt && dt.bits == 64) r.dtype = DType::kI64;
  else if (dt.code == kDLFloat8E4M3FN && dt.bits == 8) r.dtype = DType::kE4M3;
  else
    fail(op, "dtype", name,
         fmt::format("expected one of fp16, bf16, e4m3, fp32, int32, int64, got DLPack code {} bits {}", dt.code,
                     dt.bits));
  const int64_t device_type = device_type_value(t.device);
  if (device_type == kDLCPU || device_type == kDLCUDAHost) {
    r.device = {DeviceKind::kCPU, 0};
  } else if (device_type == kDLCUDA || device_type == kDLCUDAManaged) {
    if (t.device.device_id < 0)
      fail(op, "device", name, fmt::format("expected a device index >= 0, got {}", t.device.device_id));
    r.device = {DeviceKind::kCUDA, static_cast<int>(t.device.device_id)};
  } else {
    fail(op, "device", name, fmt::format("expected a CPU or CUDA tensor, got DLPack device type {}", device_type));
  }
  r.ndim = t.ndim;
  int64_t stride = 1;
  bool empty = false;
  for (int d = r.ndim - 1; d >= 0; --d) {
    r.shape[d] = t.shape[d];
    if (r.shape[d] < 0)
      fail(op, "shape", name, fmt::format("expected non-negative extents, got {} at dim {}", r.shape[d], d));
    r.strides[d] = t.strides ? t.strides[d] : stride;  // DLPack: null strides mean compact row-major
    if (r.strides[d] < 0)
      fail(op, "layout", name, fmt::format("expected non-negative strides, got {} at dim {}", r.strides[d], d));
    empty = empty || r.shape[d] == 0;
    // NOTE: compact strides only matter while the product fits; an overflowing shape is rejected below.
    if (!t.strides && !checked_mul(stride, r.shape[d] == 0 ? 1 : r.shape[d], &stride))
      fail(op, "shape", name, fmt::format("expected an element count that fits int64, got shape {}",
                                          shape_of(t.shape, t.ndim)));
  }
  if (t.byte_offset > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
    fail(op, "layout", name, fmt::format("expected a byte_offset that fits int64, got {}", t.byte_offset));
  const auto base = reinterpret_cast<std::uintptr_t>(t.data);
  if (!empty && !t.data)
    fail(op, "layout", name,
         fmt::format("expected a non-NULL data pointer for a tensor of shape {}, got NULL", shape_of(t.shape, t.ndim)));
  if (t.data && base > std::numeric_limits<std::uintptr_t>::max() - t.byte_offset)
    fail(op, "layout", name,
         fmt::format("expected data + byte_offset not to wrap, got data {:#x} and byte_offset {}", base, t.byte_offset));
  // NOTE: integer arithmetic, not pointer arithmetic: a NULL base of an empty tensor stays representable.
  r.data = reinterpret_cast<void*>(base + static_cast<std::uintptr_t>(t.byte_offset));
  if (auto p = tensor_problem(r)) fail(op, p->category, name, p->message);
  return r;
}

namespace {
[[noreturn]] void json_too_deep(std::string_view what) {
  throw InvalidArgument(fmt::format("{}: expected JSON nested at most {} deep, got deeper", what, kMaxJsonDepth));
}
}  // namespace

void check_json_text(std::string_view text, std::string_view what) {
  if (text.size() > kMaxJsonBytes)
    throw InvalidArgument(fmt::format("{}: expected at most {} bytes of JSON, got {}", what, kMaxJsonBytes, text.size()));
  int depth = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    else if (c == '[' || c == '{') {
      if (++depth > kMaxJsonDepth) json_too_deep(what);
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
}

void check_json_value(const nlohmann::json& j, std::string_view what) {
  std::vector<std::pair<const nlohmann::json*, int>> stack{{&j, 1}};
  std::size_t nodes = 0;
  while (!stack.empty()) {
    auto [v, depth] = stack.back();
    stack.pop_back();
    if (++nodes > kMaxJsonBytes)
      throw InvalidArgument(fmt::format("{}: expected at most {} JSON values, got more", what, kMaxJsonBytes));
    if (!v->is_structured()) continue;
    if (depth > kMaxJsonDepth) json_too_deep(what);
    for (const auto& child : *v) stack.emplace_back(&child, depth + 1);
  }
}

}  // namespace attnjit::detail
