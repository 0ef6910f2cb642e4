#include "ops/kv_cache/reference.hpp"

#include <cstdint>
#include <cstring>

#include "base/host_numeric.hpp"

namespace attnjit::ops::reference {

namespace {

// Writes one D-element row: a bitwise copy into a 16-bit pool, or saturating e4m3(x / scale).
void store_row(const TensorRef& src, int64_t n, int64_t h, const TensorRef& pool, int64_t page, int64_t off,
               const TensorRef* scale) {
  const int64_t D = src.shape[2];
  const int es = dtype_size(src.dtype);
  const char* from = static_cast<const char*>(src.data) + (n * src.strides[0] + h * src.strides[1]) * es;
  const int64_t dst_elem = page * pool.strides[0] + off * pool.strides[1] + h * pool.strides[2];
  if (pool.dtype == src.dtype) {
    std::memcpy(static_cast<char*>(pool.data) + dst_elem * es, from, static_cast<size_t>(D * es));
    return;
  }
  const float s = *static_cast<const float*>(scale->data);
  uint8_t* to = static_cast<uint8_t*>(pool.data) + dst_elem;
  for (int64_t d = 0; d < D; ++d) {
    const float x = static_cast<float>(numeric::load_as_double(from, src.dtype, d));
    to[d] = numeric::float_to_e4m3(x / s);
  }
}

}  // namespace

void paged_kv_write(const TensorRef& k, const TensorRef& v, const TensorRef& k_pages, const TensorRef& v_pages,
                    const TensorRef& slot_mapping, const TensorRef* k_scale, const TensorRef* v_scale) {
  const int64_t N = k.shape[0], H = k.shape[1], PS = k_pages.shape[1];
  const auto* slots = static_cast<const int64_t*>(slot_mapping.data);
  for (int64_t n = 0; n < N; ++n) {
    const int64_t slot = slots[n * slot_mapping.strides[0]];
    if (slot < 0) continue;
    for (int64_t h = 0; h < H; ++h) {
      store_row(k, n, h, k_pages, slot / PS, slot % PS, k_scale);
      store_row(v, n, h, v_pages, slot / PS, slot % PS, v_scale);
    }
  }
}

}  // namespace attnjit::ops::reference
