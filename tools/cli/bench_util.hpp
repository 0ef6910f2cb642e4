// Helpers shared by the `attnjit bench` suites (cli_bench.cpp, bench_fp8_indexer.cpp): a GPU timer,
// host-to-device uploads and random bf16 fill patterns. Benchmarks only: nothing here checks results.
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "device_buffer.hpp"
#include "runtime/tools_facade.hpp"

namespace attnjit::cli {

// The median of v (0 for an empty v).
inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// A GPU timer over `reps` launches of f after `warmup` launches: median milliseconds per launch.
template <typename F>
double time_ms(int warmup, int reps, F&& f) {
  const auto& drv = jit::CudaDriver::get();
  CUevent a, b;
  drv.check(drv.cuEventCreate(&a, CU_EVENT_DEFAULT), "cuEventCreate");
  drv.check(drv.cuEventCreate(&b, CU_EVENT_DEFAULT), "cuEventCreate");
  for (int i = 0; i < warmup; ++i) f();
  std::vector<double> ms;
  for (int i = 0; i < reps; ++i) {
    drv.check(drv.cuEventRecord(a, nullptr), "cuEventRecord");
    f();
    drv.check(drv.cuEventRecord(b, nullptr), "cuEventRecord");
    drv.check(drv.cuEventSynchronize(b), "cuEventSynchronize");
    float t = 0;
    drv.check(drv.cuEventElapsedTime(&t, a, b), "cuEventElapsedTime");
    ms.push_back(t);
  }
  drv.cuEventDestroy(a);
  drv.cuEventDestroy(b);
  return median(ms);
}

// Copies v's bytes to the start of b.
template <typename T>
void upload(DeviceBuffer& b, const std::vector<T>& v) {
  std::vector<uint8_t> bytes(v.size() * sizeof(T));
  std::memcpy(bytes.data(), v.data(), bytes.size());
  b.upload(bytes);
}

// `bytes` bytes of random bf16 values (the top halves of dist(rng) floats): a host pattern to repeat over
// a device buffer. Draws from rng and dist exactly as an inline loop would, so later draws are unchanged.
template <typename Dist>
std::vector<uint8_t> bf16_pattern(size_t bytes, std::mt19937_64& rng, Dist& dist) {
  std::vector<uint8_t> pattern(bytes);
  for (size_t i = 0; i + 1 < pattern.size(); i += 2) {
    float f = dist(rng);
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    pattern[i] = static_cast<uint8_t>(bits >> 16);
    pattern[i + 1] = static_cast<uint8_t>(bits >> 24);
  }
  return pattern;
}

// A q2k_block_index of `rows` rows of k distinct key blocks out of n, in random order (one shuffle of
// 0..n-1 per row with rng).
inline std::vector<int32_t> random_block_index(std::mt19937_64& rng, int64_t rows, int64_t n, int64_t k) {
  std::vector<int32_t> idx(static_cast<size_t>(rows * k));
  std::vector<int32_t> perm(static_cast<size_t>(n));
  for (size_t row = 0; row < idx.size() / k; ++row) {
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);
    std::copy(perm.begin(), perm.begin() + k, idx.begin() + row * k);
  }
  return idx;
}

}  // namespace attnjit::cli
