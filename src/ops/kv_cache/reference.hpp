// CPU references of the kv_cache family (SPEC.md §2.19), written for clarity, not speed.
#pragma once
#include "attnjit/tensor.hpp"

namespace attnjit::ops::reference {

// Host tensors, already validated. For each n with slot >= 0, copies (or quantises to e4m3 with an
// IEEE fp32 division by the scale) k[n] and v[n] into pool row (slot / PS, slot % PS).
void paged_kv_write(const TensorRef& k, const TensorRef& v, const TensorRef& k_pages, const TensorRef& v_pages,
                    const TensorRef& slot_mapping, const TensorRef* k_scale, const TensorRef* v_scale);

}  // namespace attnjit::ops::reference
