// attnjit: tensor descriptors. A TensorRef is an address, a dtype, a shape and strides (in elements)
// on one device; it never owns memory. Build one by hand or from a DLPack DLTensor.
#pragma once
#include <attnjit/export.hpp>
#include <dlpack/dlpack.h>

#include <array>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace attnjit {

enum class DType : uint8_t { kF16, kBF16, kE4M3, kF32, kI32, kI64 };

// Canonical short name: "fp16", "bf16", "e4m3", "fp32", "int32", "int64".
ATTNJIT_API std::string_view dtype_name(DType dt);
ATTNJIT_API int dtype_size(DType dt);
ATTNJIT_API bool is_float16(DType dt);  // fp16 or bf16
// Accepts the short names and the long forms ("float16", "bfloat16", "float8_e4m3fn", "float32").
ATTNJIT_API std::optional<DType> parse_dtype(std::string_view name);

enum class DeviceKind : uint8_t { kCPU, kCUDA };
struct Device {
  DeviceKind kind = DeviceKind::kCPU;
  int index = 0;
  bool operator==(const Device&) const = default;
};
ATTNJIT_API std::string device_name(Device d);

// DLPack 1.1's kDLFloat8_e4m3fn; Debian's dlpack 0.6 header predates it.
inline constexpr uint8_t kDLFloat8E4M3FN = 10;

struct ATTNJIT_API TensorRef {
  static constexpr int kMaxDims = 8;
  void* data = nullptr;
  DType dtype = DType::kF32;
  int ndim = 0;
  std::array<int64_t, kMaxDims> shape{};
  std::array<int64_t, kMaxDims> strides{};  // in elements
  Device device{};

  // A dense row-major tensor of the given shape.
  static TensorRef contiguous(void* data, DType dtype, std::initializer_list<int64_t> shape,
                              Device device = {DeviceKind::kCUDA, 0});
  static TensorRef contiguous(void* data, DType dtype, const std::vector<int64_t>& shape,
                              Device device = {DeviceKind::kCUDA, 0});
  // Throws InvalidArgument naming `name` when the DLTensor cannot be represented.
  static TensorRef from_dlpack(const DLTensor& t, std::string_view name);

  int64_t numel() const;
  bool is_contiguous() const;
  std::string shape_str() const;  // "[4, 8, 128]"
};

// Named tensor arguments of one call, by the argument names of SPEC.md. Small and allocation-free
// once built; lookups are linear over at most kMaxArgs entries.
class ATTNJIT_API TensorArgs {
 public:
  static constexpr int kMaxArgs = 24;
  TensorArgs() = default;
  TensorArgs(std::initializer_list<std::pair<std::string_view, TensorRef>> items);

  // Names must outlive the TensorArgs (string literals, or the caller's own strings).
  TensorArgs& set(std::string_view name, const TensorRef& t);
  const TensorRef* find(std::string_view name) const;
  int size() const { return count_; }
  std::string_view name(int i) const { return names_[i]; }
  const TensorRef& tensor(int i) const { return tensors_[i]; }

 private:
  std::array<std::string_view, kMaxArgs> names_{};
  std::array<TensorRef, kMaxArgs> tensors_{};
  int count_ = 0;
};

}  // namespace attnjit
