// validate_inputs support: host copies of the (small) tensors whose values are caller contract.
#pragma once
#include <cstdint>
#include <vector>

#include "attnjit/tensor.hpp"

namespace attnjit::detail {

// A host copy of a tensor's storage span; `ref` views it with the original shape and strides.
struct HostView {
  std::vector<uint8_t> bytes;
  TensorRef ref;
};

// For a device call: refuses under stream capture (Unsupported, naming `op`), then synchronises the
// stream. A no-op for host calls.
void prepare_content_checks(const char* op, Device device, void* stream);
// Copies the tensor's storage span to the host (a plain copy for host tensors).
HostView host_view(const TensorRef& t);

}  // namespace attnjit::detail
