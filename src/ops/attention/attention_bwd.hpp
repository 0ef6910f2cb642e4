// Host side of the shared attention backward (templates/common/attention_bwd.cuh and
// templates/hopper/attention_bwd.cuh), used by bsa_bwd and gqa_bwd: the fp32 dq accumulator's TMA map,
// the launch of one backward kernel, and the workspace sections every backward reserves.
#pragma once
#include <cstddef>
#include <cstdint>

#include "jit/cuda_driver.hpp"
#include "jit/kernel_cache.hpp"

namespace attnjit::ops {

// The hopper main kernel's map of the fp32 dq accumulator: 2-d (D columns, `rows` rows of D floats),
// boxes of 32 columns (128 bytes) by 64 rows with the 128-byte swizzle its staging tiles use.
void encode_dq_acc_map(const char* op, unsigned long long (&map)[16], const float* dq_acc, int64_t D, int64_t rows);

// Launches one backward kernel whose arguments are `args` (pointers to each argument).
void launch_bwd_kernel(const char* op, const jit::LoadedKernel& k, unsigned gx, unsigned gy, unsigned gz,
                       unsigned threads, int smem, CUstream stream, void** args);

// Blocks of `per_block` threads that cover `work` items (at least one).
inline unsigned bwd_blocks(long long work, int per_block) {
  return static_cast<unsigned>(work <= 0 ? 1 : (work + per_block - 1) / per_block);
}

// Sequential 256-byte aligned sections of one workspace allocation.
class WorkspaceCursor {
 public:
  std::size_t take(std::size_t bytes) {
    const std::size_t here = at_;
    at_ += (bytes + 255) / 256 * 256;
    return here;
  }
  std::size_t total() const { return at_; }

 private:
  std::size_t at_ = 0;
};

}  // namespace attnjit::ops
