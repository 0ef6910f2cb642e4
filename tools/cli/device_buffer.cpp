#include "device_buffer.hpp"

#include "runtime/tools_facade.hpp"

namespace attnjit::cli {

DeviceBuffer::DeviceBuffer(std::size_t bytes) : bytes_(bytes) {
  const auto& drv = jit::CudaDriver::get();
  // NOTE: 256 extra bytes keep a zero-size tensor's address valid and distinct.
  drv.check(drv.cuMemAlloc(&ptr_, bytes + 256), "cuMemAlloc");
}

DeviceBuffer::~DeviceBuffer() {
  if (ptr_) jit::CudaDriver::get().cuMemFree(ptr_);
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    if (ptr_) jit::CudaDriver::get().cuMemFree(ptr_);
    ptr_ = o.ptr_;
    bytes_ = o.bytes_;
    o.ptr_ = 0;
    o.bytes_ = 0;
  }
  return *this;
}

void DeviceBuffer::upload(const std::vector<uint8_t>& host) {
  const auto& drv = jit::CudaDriver::get();
  if (!host.empty()) drv.check(drv.cuMemcpyHtoD(ptr_, host.data(), host.size()), "cuMemcpyHtoD");
}

std::vector<uint8_t> DeviceBuffer::download() const {
  std::vector<uint8_t> host(bytes_);
  const auto& drv = jit::CudaDriver::get();
  if (bytes_) drv.check(drv.cuMemcpyDtoH(host.data(), ptr_, bytes_), "cuMemcpyDtoH");
  return host;
}

}  // namespace attnjit::cli
