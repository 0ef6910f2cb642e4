// paged_kv_write through the CPU reference on host tensors, using only the installed public API.
// Prints "consumer ok <version>" and exits 0 when the pool rows match.
#include <attnjit/runtime.hpp>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

int main() {
  using namespace attnjit;
  constexpr int64_t N = 2, H = 1, D = 16, NP = 2, PS = 2;
  std::vector<std::uint16_t> k(N * H * D), v(N * H * D), kp(NP * PS * H * D, 0xABAB), vp(NP * PS * H * D, 0xABAB);
  for (size_t i = 0; i < k.size(); ++i) {
    k[i] = static_cast<std::uint16_t>(0x3C00 + i);
    v[i] = static_cast<std::uint16_t>(0x4000 + i);
  }
  std::vector<int64_t> slots = {3, 0};
  const Device host{DeviceKind::kCPU, 0};
  TensorArgs args{{"k", TensorRef::contiguous(k.data(), DType::kF16, {N, H, D}, host)},
                  {"v", TensorRef::contiguous(v.data(), DType::kF16, {N, H, D}, host)},
                  {"k_pages", TensorRef::contiguous(kp.data(), DType::kF16, {NP, PS, H, D}, host)},
                  {"v_pages", TensorRef::contiguous(vp.data(), DType::kF16, {NP, PS, H, D}, host)},
                  {"slot_mapping", TensorRef::contiguous(slots.data(), DType::kI64, {N}, host)}};
  RuntimeOptions options = RuntimeOptions::from_env();
  options.cache_disabled = true;
  Runtime rt(options);
  try {
    rt.op("paged_kv_write", {{"impl", "reference"}}).run(args);
  } catch (const Error& e) {
    std::fprintf(stderr, "consumer: %s\n", e.what());
    return 1;
  }
  const bool ok = std::memcmp(&kp[3 * D], &k[0], D * 2) == 0 && std::memcmp(&vp[0], &v[D], D * 2) == 0 &&
                  kp[D] == 0xABAB && vp[2 * D] == 0xABAB;
  std::printf("consumer %s %s\n", ok ? "ok" : "MISMATCH", version());
  return ok ? 0 : 1;
}
