// Tensor descriptors (include/attnjit/tensor.hpp): DLPack conversion, dtype names, TensorArgs.
#include <doctest/doctest.h>

#include <cstdint>

#include "attnjit/error.hpp"
#include "attnjit/tensor.hpp"
#include "test_util.hpp"

namespace {

namespace test = attnjit::test;
using attnjit::Device;
using attnjit::DeviceKind;
using attnjit::DType;
using attnjit::TensorArgs;
using attnjit::TensorRef;

DLTensor dl(void* data, DLDataType dt, std::vector<int64_t>& shape, int64_t* strides = nullptr,
            DLDevice dev = {kDLCPU, 0}) {
  DLTensor t{};
  t.data = data;
  t.device = dev;
  t.ndim = static_cast<int>(shape.size());
  t.dtype = dt;
  t.shape = shape.data();
  t.strides = strides;
  t.byte_offset = 0;
  return t;
}

std::string rejection(const DLTensor& t, const char* name) {
  try {
    TensorRef::from_dlpack(t, name);
  } catch (const attnjit::InvalidArgument& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("tensor: from_dlpack maps every supported dtype") {
  struct Case {
    DLDataType dl;
    DType dt;
    int size;
    const char* name;
  };
  const Case cases[] = {
      {{kDLFloat, 16, 1}, DType::kF16, 2, "fp16"},
      {{kDLBfloat, 16, 1}, DType::kBF16, 2, "bf16"},
      {{kDLFloat, 32, 1}, DType::kF32, 4, "fp32"},
      {{kDLInt, 32, 1}, DType::kI32, 4, "int32"},
      {{kDLInt, 64, 1}, DType::kI64, 8, "int64"},
      {{attnjit::kDLFloat8E4M3FN, 8, 1}, DType::kE4M3, 1, "e4m3"},
  };
  alignas(16) static char buf[1024];
  for (const auto& c : cases) {
    CAPTURE(c.name);
    std::vector<int64_t> shape{2, 3, 4};
    auto r = TensorRef::from_dlpack(dl(buf, c.dl, shape), "x");
    CHECK(r.dtype == c.dt);
    CHECK(attnjit::dtype_size(r.dtype) == c.size);
    CHECK(attnjit::dtype_name(r.dtype) == c.name);
    CHECK(r.ndim == 3);
    CHECK(r.shape[0] == 2);
    CHECK(r.shape[1] == 3);
    CHECK(r.shape[2] == 4);
    CHECK(r.data == buf);
    CHECK(r.device == Device{DeviceKind::kCPU, 0});
  }
  CHECK(attnjit::is_float16(DType::kF16));
  CHECK(attnjit::is_float16(DType::kBF16));
  CHECK(!attnjit::is_float16(DType::kE4M3));
  CHECK(!attnjit::is_float16(DType::kF32));
}

TEST_CASE("tensor: null strides mean compact row-major; explicit strides and byte_offset are kept") {
  alignas(16) static char buf[4096];
  std::vector<int64_t> shape{2, 3, 4};
  auto r = TensorRef::from_dlpack(dl(buf, {kDLFloat, 16, 1}, shape), "k");
  CHECK(r.strides[0] == 12);
  CHECK(r.strides[1] == 4);
  CHECK(r.strides[2] == 1);
  CHECK(r.is_contiguous());
  CHECK(r.numel() == 24);
  CHECK(r.shape_str() == "[2, 3, 4]");

  int64_t strides[] = {40, 8, 1};
  DLTensor t = dl(buf, {kDLFloat, 16, 1}, shape, strides);
  t.byte_offset = 96;
  auto s = TensorRef::from_dlpack(t, "k");
  CHECK(s.strides[0] == 40);
  CHECK(s.strides[1] == 8);
  CHECK(s.strides[2] == 1);
  CHECK(!s.is_contiguous());
  CHECK(s.data == static_cast<void*>(buf + 96));

  std::vector<int64_t> scalar_shape{};
  auto z = TensorRef::from_dlpack(dl(buf, {kDLInt, 64, 1}, scalar_shape), "s");
  CHECK(z.ndim == 0);
  CHECK(z.numel() == 1);
  CHECK(z.shape_str() == "[]");
}

TEST_CASE("tensor: from_dlpack maps devices") {
  alignas(16) static char buf[64];
  std::vector<int64_t> shape{4};
  CHECK(TensorRef::from_dlpack(dl(buf, {kDLFloat, 32, 1}, shape, nullptr, {kDLCPU, 0}), "x").device ==
        Device{DeviceKind::kCPU, 0});
  CHECK(TensorRef::from_dlpack(dl(buf, {kDLFloat, 32, 1}, shape, nullptr, {kDLCUDAHost, 0}), "x").device ==
        Device{DeviceKind::kCPU, 0});
  CHECK(TensorRef::from_dlpack(dl(buf, {kDLFloat, 32, 1}, shape, nullptr, {kDLCUDA, 3}), "x").device ==
        Device{DeviceKind::kCUDA, 3});
  CHECK(TensorRef::from_dlpack(dl(buf, {kDLFloat, 32, 1}, shape, nullptr, {kDLCUDAManaged, 1}), "x").device ==
        Device{DeviceKind::kCUDA, 1});
  const std::string m = rejection(dl(buf, {kDLFloat, 32, 1}, shape, nullptr, {kDLOpenCL, 0}), "weights");
  CHECK(test::starts_with(m, "weights: device:"));
  CHECK(attnjit::device_name({DeviceKind::kCUDA, 2}) == "cuda:2");
  CHECK(attnjit::device_name({DeviceKind::kCPU, 0}) == "cpu");
}

TEST_CASE("tensor: from_dlpack rejects what it cannot represent, naming the tensor") {
  alignas(16) static char buf[64];
  std::vector<int64_t> shape{4};
  // lanes != 1
  std::string m = rejection(dl(buf, {kDLFloat, 16, 2}, shape), "k_pages");
  CHECK(test::starts_with(m, "k_pages: dtype:"));
  CHECK(test::contains(m, "lanes"));
  // unsupported dtypes
  for (DLDataType bad : {DLDataType{kDLFloat, 64, 1}, DLDataType{kDLUInt, 8, 1}, DLDataType{kDLInt, 8, 1},
                         DLDataType{kDLBfloat, 32, 1}, DLDataType{attnjit::kDLFloat8E4M3FN, 16, 1}}) {
    CAPTURE(int(bad.code));
    CAPTURE(int(bad.bits));
    m = rejection(dl(buf, bad, shape), "slot_mapping");
    CHECK(test::starts_with(m, "slot_mapping: dtype:"));
  }
  // too many dims
  std::vector<int64_t> nine(9, 1);
  m = rejection(dl(buf, {kDLFloat, 32, 1}, nine), "q");
  CHECK(test::starts_with(m, "q: shape:"));
  // negative extent, negative stride
  std::vector<int64_t> neg{-1};
  CHECK(test::starts_with(rejection(dl(buf, {kDLFloat, 32, 1}, neg), "q"), "q: shape:"));
  int64_t neg_stride[] = {-1};
  CHECK(test::starts_with(rejection(dl(buf, {kDLFloat, 32, 1}, shape, neg_stride), "q"), "q: layout:"));
}

TEST_CASE("tensor: parse_dtype accepts long and short names") {
  CHECK(attnjit::parse_dtype("fp16") == DType::kF16);
  CHECK(attnjit::parse_dtype("float16") == DType::kF16);
  CHECK(attnjit::parse_dtype("half") == DType::kF16);
  CHECK(attnjit::parse_dtype("bf16") == DType::kBF16);
  CHECK(attnjit::parse_dtype("bfloat16") == DType::kBF16);
  CHECK(attnjit::parse_dtype("e4m3") == DType::kE4M3);
  CHECK(attnjit::parse_dtype("float8_e4m3fn") == DType::kE4M3);
  CHECK(attnjit::parse_dtype("fp8_e4m3") == DType::kE4M3);
  CHECK(attnjit::parse_dtype("fp32") == DType::kF32);
  CHECK(attnjit::parse_dtype("float32") == DType::kF32);
  CHECK(attnjit::parse_dtype("float") == DType::kF32);
  CHECK(attnjit::parse_dtype("int32") == DType::kI32);
  CHECK(attnjit::parse_dtype("int64") == DType::kI64);
  CHECK(!attnjit::parse_dtype("fp64").has_value());
  CHECK(!attnjit::parse_dtype("FP16").has_value());
  CHECK(!attnjit::parse_dtype("").has_value());
  // Every canonical name parses back to its dtype.
  for (DType d : {DType::kF16, DType::kBF16, DType::kE4M3, DType::kF32, DType::kI32, DType::kI64})
    CHECK(attnjit::parse_dtype(attnjit::dtype_name(d)) == d);
}

TEST_CASE("tensor: contiguous() and TensorArgs set/find/replace") {
  alignas(16) static char a[64], b[64];
  auto ta = TensorRef::contiguous(a, DType::kF16, {2, 8});
  CHECK(ta.device == Device{DeviceKind::kCUDA, 0});  // contiguous() defaults to a CUDA tensor
  CHECK(ta.strides[0] == 8);
  CHECK(ta.strides[1] == 1);
  auto tb = TensorRef::contiguous(b, DType::kI64, std::vector<int64_t>{3}, Device{DeviceKind::kCPU, 0});
  CHECK(tb.device.kind == DeviceKind::kCPU);
  CHECK(tb.numel() == 3);
  CHECK_THROWS_AS(TensorRef::contiguous(a, DType::kF32, std::vector<int64_t>(9, 1)), attnjit::InvalidArgument);

  TensorArgs args{{"k", ta}, {"slot_mapping", tb}};
  CHECK(args.size() == 2);
  REQUIRE(args.find("k") != nullptr);
  CHECK(args.find("k")->data == a);
  CHECK(args.find("slot_mapping")->dtype == DType::kI64);
  CHECK(args.find("v") == nullptr);
  CHECK(args.name(0) == "k");
  CHECK(args.name(1) == "slot_mapping");
  // set() with an existing name replaces in place.
  args.set("k", tb);
  CHECK(args.size() == 2);
  CHECK(args.find("k")->data == b);
  CHECK(args.name(0) == "k");
  args.set("v", ta);
  CHECK(args.size() == 3);
  CHECK(args.tensor(2).data == a);

  static const std::vector<std::string> names = [] {
    std::vector<std::string> n;
    for (int i = 0; i < TensorArgs::kMaxArgs + 1; ++i) n.push_back("t" + std::to_string(i));
    return n;
  }();
  TensorArgs full;
  for (int i = 0; i < TensorArgs::kMaxArgs; ++i) full.set(names[i], ta);
  CHECK(full.size() == TensorArgs::kMaxArgs);
  CHECK_THROWS_AS(full.set(names[TensorArgs::kMaxArgs], ta), attnjit::InvalidArgument);
  CHECK_NOTHROW(full.set(names[0], tb));  // replacing still works when full
}
