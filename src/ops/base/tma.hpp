// TMA (sm_90 tensor memory access) helpers the hopper kernels of every family share: whether a tensor
// can be a TMA source, and encoding its 4-d tensor map.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>

#include "attnjit/tensor.hpp"

namespace attnjit::ops {

// Why a 16-bit tensor cannot be a TMA source ("" when it can): a 16-byte aligned base, and the stride of
// each given (extent, stride) axis a positive multiple of 16 bytes unless the extent is at most 1.
std::string tma_gap(const char* name, const void* data, std::initializer_list<std::pair<int64_t, int64_t>> dims);
// Encodes a 4-d TMA map (D, head, row, batch; strides in elements) of a 16-bit tensor into `map`, with
// boxes of 64 columns by box_heads heads by box_rows rows and the 128-byte swizzle the hopper kernels read
// (a box lands as box_heads x box_rows rows of 128 bytes, head fastest).
void encode_tma_rows(const char* op, const char* name, unsigned long long (&map)[16], DType dtype, const void* data,
                     int64_t D, int64_t heads, int64_t rows, int64_t batch, int64_t s_head, int64_t s_row,
                     int64_t s_batch, int box_rows, int box_heads = 1);

}  // namespace attnjit::ops
