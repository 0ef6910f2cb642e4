// Host buffers of any dtype and running one op on them, on the CPU (impl 'reference') or on a GPU (impl
// 'kernel': inputs uploaded, outputs downloaded after the stream has finished): the op-chain tests'
// (dsa_pipeline_test.cpp, nsa_forward_test.cpp) shared harness.
#pragma once
#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "attnjit/runtime.hpp"
#include "base/host_numeric.hpp"
#include "jit/cuda_driver.hpp"

namespace attnjit::test::chain {

using attnjit::Config;
using attnjit::Device;
using attnjit::DeviceKind;
using attnjit::DType;
using attnjit::TensorArgs;
using attnjit::TensorRef;

inline constexpr Device kHost{DeviceKind::kCPU, 0};
inline constexpr Device kGpu{DeviceKind::kCUDA, 0};

// ---- Host buffers of any dtype, filled with fresh random values.

struct Buf {
  DType dt = DType::kF16;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;

  Buf() = default;
  Buf(DType d, std::vector<int64_t> s) : dt(d), shape(std::move(s)) {
    bytes.assign(static_cast<size_t>(numel() * attnjit::dtype_size(dt)), 0);
  }
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t e : shape) n *= e;
    return n;
  }
  void* data() { return bytes.data(); }
  double at(int64_t i) const { return attnjit::numeric::load_as_double(bytes.data(), dt, i); }
  void put(int64_t i, double v) { attnjit::numeric::store_from_double(bytes.data(), dt, i, v); }
  int32_t* i32() { return reinterpret_cast<int32_t*>(bytes.data()); }
  const int32_t* i32() const { return reinterpret_cast<const int32_t*>(bytes.data()); }
};

inline Buf random_buf(std::mt19937& gen, DType dt, std::vector<int64_t> shape, double sd = 1.0) {
  Buf b(dt, std::move(shape));
  std::normal_distribution<double> nd(0.0, sd);
  for (int64_t i = 0; i < b.numel(); ++i) b.put(i, nd(gen));
  return b;
}

inline Buf i32_buf(std::vector<int64_t> shape, const std::vector<int32_t>& v) {
  Buf b(DType::kI32, std::move(shape));
  REQUIRE(static_cast<int64_t>(v.size()) == b.numel());
  if (!v.empty()) std::memcpy(b.data(), v.data(), v.size() * sizeof(int32_t));
  return b;
}

// ---- Running one op on host buffers, on the CPU (impl 'reference') or on the GPU (impl 'kernel': the
// ---- inputs are uploaded, the outputs downloaded after the stream has finished).

struct Arg {
  const char* name;
  Buf* buf;
  bool output = false;
  std::vector<int64_t> strides = {};  // empty: contiguous over buf->shape
  std::vector<int64_t> shape = {};    // empty: buf->shape
  int64_t offset = 0;                 // in elements
};

class DeviceMem {
 public:
  explicit DeviceMem(size_t bytes) {
    const auto& drv = attnjit::jit::CudaDriver::get();
    drv.check(drv.cuMemAlloc(&ptr_, bytes + 256), "cuMemAlloc");
  }
  ~DeviceMem() {
    if (ptr_) attnjit::jit::CudaDriver::get().cuMemFree(ptr_);
  }
  DeviceMem(const DeviceMem&) = delete;
  DeviceMem& operator=(const DeviceMem&) = delete;
  CUdeviceptr ptr() const { return ptr_; }

 private:
  CUdeviceptr ptr_ = 0;
};

inline bool gpu_present() {
  const auto& drv = attnjit::jit::CudaDriver::get();
  return drv.available() && drv.device_count() > 0;
}

inline void run_op(attnjit::Runtime& rt, const char* op, Config cfg, const std::vector<Arg>& args, bool gpu) {
  cfg.set("impl", gpu ? "kernel" : "reference");
  std::vector<std::unique_ptr<DeviceMem>> mem;
  TensorArgs ta;
  for (const Arg& a : args) {
    TensorRef t = TensorRef::contiguous(nullptr, a.buf->dt, a.shape.empty() ? a.buf->shape : a.shape,
                                        gpu ? kGpu : kHost);
    for (size_t i = 0; i < a.strides.size(); ++i) t.strides[i] = a.strides[i];
    const int64_t es = attnjit::dtype_size(a.buf->dt);
    if (gpu) {
      const auto& drv = attnjit::jit::CudaDriver::get();
      drv.bind_device(0);
      mem.push_back(std::make_unique<DeviceMem>(a.buf->bytes.size()));
      if (!a.buf->bytes.empty())
        drv.check(drv.cuMemcpyHtoD(mem.back()->ptr(), a.buf->bytes.data(), a.buf->bytes.size()), "cuMemcpyHtoD");
      t.data = reinterpret_cast<void*>(mem.back()->ptr() + a.offset * es);
    } else {
      t.data = a.buf->bytes.data() + a.offset * es;
    }
    ta.set(a.name, t);
  }
  rt.op(op, cfg).run(ta);
  if (!gpu) return;
  const auto& drv = attnjit::jit::CudaDriver::get();
  drv.check(drv.cuStreamSynchronize(nullptr), "cuStreamSynchronize");
  for (size_t i = 0; i < args.size(); ++i)
    if (args[i].output && !args[i].buf->bytes.empty())
      drv.check(drv.cuMemcpyDtoH(args[i].buf->bytes.data(), mem[i]->ptr(), args[i].buf->bytes.size()), "cuMemcpyDtoH");
}

// NaN in fp16 / bf16, -1 in int32.
inline void poison(Buf& b) { std::fill(b.bytes.begin(), b.bytes.end(), 0xFF); }

}  // namespace attnjit::test::chain
