#include "attnjit/tensor.hpp"

#include <fmt/format.h>

#include "attnjit/error.hpp"

namespace attnjit {

std::string_view dtype_name(DType dt) {
  switch (dt) {
    case DType::kF16: return "fp16";
    case DType::kBF16: return "bf16";
    case DType::kE4M3: return "e4m3";
    case DType::kF32: return "fp32";
    case DType::kI32: return "int32";
    case DType::kI64: return "int64";
  }
  return "?";
}

int dtype_size(DType dt) {
  switch (dt) {
    case DType::kF16:
    case DType::kBF16: return 2;
    case DType::kE4M3: return 1;
    case DType::kF32:
    case DType::kI32: return 4;
    case DType::kI64: return 8;
  }
  return 0;
}

bool is_float16(DType dt) { return dt == DType::kF16 || dt == DType::kBF16; }

std::optional<DType> parse_dtype(std::string_view n) {
  if (n == "fp16" || n == "float16" || n == "half") return DType::kF16;
  if (n == "bf16" || n == "bfloat16") return DType::kBF16;
  if (n == "e4m3" || n == "float8_e4m3fn" || n == "fp8_e4m3") return DType::kE4M3;
  if (n == "fp32" || n == "float32" || n == "float") return DType::kF32;
  if (n == "int32") return DType::kI32;
  if (n == "int64") return DType::kI64;
  return std::nullopt;
}

std::string device_name(Device d) {
  return d.kind == DeviceKind::kCPU ? std::string("cpu") : fmt::format("cuda:{}", d.index);
}

namespace {
template <typename Shape>
TensorRef make_contiguous(void* data, DType dtype, const Shape& shape, Device device) {
  TensorRef t;
  t.data = data;
  t.dtype = dtype;
  t.device = device;
  if (shape.size() > TensorRef::kMaxDims)
    throw InvalidArgument(fmt::format("tensor: expected at most {} dims, got {}", TensorRef::kMaxDims, shape.size()));
  t.ndim = static_cast<int>(shape.size());
  int i = 0;
  for (int64_t e : shape) t.shape[i++] = e;
  int64_t stride = 1;
  for (int d = t.ndim - 1; d >= 0; --d) {
    t.strides[d] = stride;
    stride *= t.shape[d];
  }
  return t;
}
}  // namespace

TensorRef TensorRef::contiguous(void* data, DType dtype, std::initializer_list<int64_t> shape, Device device) {
  return make_contiguous(data, dtype, shape, device);
}
TensorRef TensorRef::contiguous(void* data, DType dtype, const std::vector<int64_t>& shape, Device device) {
  return make_contiguous(data, dtype, shape, device);
}

TensorRef TensorRef::from_dlpack(const DLTensor& t, std::string_view name) {
  TensorRef r;
  const DLDataType dt = t.dtype;
  if (dt.lanes != 1)
    throw InvalidArgument(fmt::format("{}: dtype: expected lanes 1, got {}", name, dt.lanes));
  if (dt.code == kDLFloat && dt.bits == 16) r.dtype = DType::kF16;
  else if (dt.code == kDLBfloat && dt.bits == 16) r.dtype = DType::kBF16;
  else if (dt.code == kDLFloat && dt.bits == 32) r.dtype = DType::kF32;
  else if (dt.code == kDLInt && dt.bits == 32) r.dtype = DType::kI32;
  else if (dt.code == kDLInt && dt.bits == 64) r.dtype = DType::kI64;
  else if (dt.code == kDLFloat8E4M3FN && dt.bits == 8) r.dtype = DType::kE4M3;
  else
    throw InvalidArgument(fmt::format("{}: dtype: expected one of fp16, bf16, e4m3, fp32, int32, int64, got DLPack "
                                      "code {} bits {}", name, dt.code, dt.bits));
  switch (t.device.device_type) {
    case kDLCPU:
    case kDLCUDAHost: r.device = {DeviceKind::kCPU, 0}; break;
    case kDLCUDA:
    case kDLCUDAManaged: r.device = {DeviceKind::kCUDA, static_cast<int>(t.device.device_id)}; break;
    default:
      throw InvalidArgument(fmt::format("{}: device: expected a CPU or CUDA tensor, got DLPack device type {}", name,
                                        static_cast<int>(t.device.device_type)));
  }
  if (t.ndim < 0 || t.ndim > kMaxDims)
    throw InvalidArgument(fmt::format("{}: shape: expected at most {} dims, got {}", name, kMaxDims, t.ndim));
  r.ndim = t.ndim;
  r.data = static_cast<char*>(t.data) + t.byte_offset;
  int64_t stride = 1;
  for (int d = r.ndim - 1; d >= 0; --d) {
    r.shape[d] = t.shape[d];
    if (r.shape[d] < 0)
      throw InvalidArgument(fmt::format("{}: shape: expected non-negative extents, got {} at dim {}", name, r.shape[d], d));
    r.strides[d] = t.strides ? t.strides[d] : stride;  // DLPack: null strides mean compact row-major
    if (r.strides[d] < 0)
      throw InvalidArgument(fmt::format("{}: layout: expected non-negative strides, got {} at dim {}", name, r.strides[d], d));
    stride *= r.shape[d];
  }
  return r;
}

int64_t TensorRef::numel() const {
  int64_t n = 1;
  for (int d = 0; d < ndim; ++d) n *= shape[d];
  return n;
}

bool TensorRef::is_contiguous() const {
  // NOTE: a zero-element tensor is contiguous whatever its strides (torch and numpy give [1, 1000, 0]
  // strides such as [1000, 1, 1] or all zeros).
  if (numel() == 0) return true;
  int64_t stride = 1;
  for (int d = ndim - 1; d >= 0; --d) {
    if (shape[d] != 1 && strides[d] != stride) return false;
    stride *= shape[d];
  }
  return true;
}

std::string TensorRef::shape_str() const {
  std::string s = "[";
  for (int d = 0; d < ndim; ++d) s += fmt::format("{}{}", d ? ", " : "", shape[d]);
  return s + "]";
}

TensorArgs::TensorArgs(std::initializer_list<std::pair<std::string_view, TensorRef>> items) {
  for (const auto& [n, t] : items) set(n, t);
}

TensorArgs& TensorArgs::set(std::string_view name, const TensorRef& t) {
  for (int i = 0; i < count_; ++i) {
    if (names_[i] == name) {
      tensors_[i] = t;
      return *this;
    }
  }
  if (count_ == kMaxArgs)
    throw InvalidArgument(fmt::format("tensors: expected at most {} named tensors, got more", kMaxArgs));
  names_[count_] = name;
  tensors_[count_] = t;
  ++count_;
  return *this;
}

const TensorRef* TensorArgs::find(std::string_view name) const {
  for (int i = 0; i < count_; ++i)
    if (names_[i] == name) return &tensors_[i];
  return nullptr;
}

}  // namespace attnjit
