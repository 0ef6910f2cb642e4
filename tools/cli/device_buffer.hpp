// Device memory for the CLI's test runner and benchmarks (the library itself never allocates).
#pragma once
#include <cuda.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace attnjit::cli {

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t bytes);  // on the current (bound) device
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(o.ptr_), bytes_(o.bytes_) { o.ptr_ = 0; o.bytes_ = 0; }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* data() const { return reinterpret_cast<void*>(ptr_); }
  std::size_t bytes() const { return bytes_; }
  void upload(const std::vector<uint8_t>& host);
  std::vector<uint8_t> download() const;

 private:
  CUdeviceptr ptr_ = 0;
  std::size_t bytes_ = 0;
};

}  // namespace attnjit::cli
