// DeepSeek sparse-attention decode, as a user writes it against the public C++ API: lightning_indexer
// picks, per query row, the top-k compressed key positions; dsa_decode attends over exactly those keys.
// Runs on the CPU reference (host tensors); on a GPU the same calls take device tensors and impl
// "kernel". docs/ops/dsa_decode.md ("From the indexer to dsa_decode") explains the index conversion.
//
//   dsa_pipeline [T] [S] [topk] [ratio]
//     T      tokens seen by the indexer (query positions 0 .. T-1), default 16
//     S      decode rows: the last S positions, q_start_index_s = T - S, default 2
//     topk   keys per row, default 6
//     ratio  compress_ratio of the indexer = stride_kv of dsa_decode (raw tokens per key row), default 1
#include <attnjit/runtime.hpp>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <random>
#include <vector>

namespace {

// float -> bfloat16 bits, round to nearest even (finite inputs).
uint16_t to_bf16(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  return static_cast<uint16_t>((u + 0x7FFF + ((u >> 16) & 1)) >> 16);
}

float from_bf16(uint16_t b) {
  const uint32_t u = static_cast<uint32_t>(b) << 16;
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}

std::vector<uint16_t> random_bf16(std::mt19937& gen, int64_t n) {
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<uint16_t> v(static_cast<size_t>(n));
  for (auto& x : v) x = to_bf16(nd(gen));
  return v;
}

int64_t arg(int argc, char** argv, int i, int64_t dflt) { return argc > i ? std::atoll(argv[i]) : dflt; }

}  // namespace

int main(int argc, char** argv) try {
  using attnjit::DType;
  using attnjit::TensorRef;
  const int64_t T = arg(argc, argv, 1, 16), S = arg(argc, argv, 2, 2), topk = arg(argc, argv, 3, 6),
                ratio = arg(argc, argv, 4, 1);
  if (T < 1 || S < 1 || S > T || topk < 1 || ratio < 1 || T / ratio < 1) {
    std::fprintf(stderr, "usage: dsa_pipeline [T >= 1] [1 <= S <= T] [topk >= 1] [ratio >= 1, T / ratio >= 1]\n");
    return 2;
  }
  const attnjit::Device host{attnjit::DeviceKind::kCPU, 0};
  const int64_t B = 1, S_k = T / ratio, q_start = T - S;
  const int64_t H_i = 4, D_i = 64;                     // indexer heads and head dim
  const int64_t H = 16, H_kv = 1, D = 512, tail = 64;  // dsa_decode: latent dim 512 + rope tail 64
  std::mt19937 gen(2026);

  attnjit::Runtime rt;

  // 1. The indexer over every position so far: q [B, T, H_i, D_i], one key pool k [B, T // ratio, D_i],
  //    weights [B, T, H_i] -> indices [B, T, topk], document-free, -1 padded where fewer keys exist.
  auto iq = random_bf16(gen, B * T * H_i * D_i), ik = random_bf16(gen, B * S_k * D_i), iw = random_bf16(gen, B * T * H_i);
  std::vector<int32_t> li(static_cast<size_t>(B * T * topk));
  rt.run("lightning_indexer", {{"impl", "reference"}, {"topk", topk}, {"causal", true}, {"compress_ratio", ratio}},
         {{"q", TensorRef::contiguous(iq.data(), DType::kBF16, {B, T, H_i, D_i}, host)},
          {"k", TensorRef::contiguous(ik.data(), DType::kBF16, {B, S_k, D_i}, host)},
          {"weights", TensorRef::contiguous(iw.data(), DType::kBF16, {B, T, H_i}, host)},
          {"indices", TensorRef::contiguous(li.data(), DType::kI32, {B, T, topk}, host)}});

  // 2. The conversion, without a copy: dsa_decode wants indices [B, S, H_kv, K] for its S rows, which sit
  //    at positions q_start .. T-1. Take the indexer's rows from q_start and give the H_kv axis stride 0
  //    (every KV head reads the same list). -1 stays -1; dsa_decode skips it.
  TensorRef idx = TensorRef::contiguous(li.data() + q_start * topk, DType::kI32, {B, S, H_kv, topk}, host);
  idx.strides = {T * topk, topk, 0, 1};

  // 3. Sparse attention of the decode rows over the latent cache kv [B, T // ratio, H_kv, D + tail], whose
  //    row s holds the same compressed position the indexer numbered s.
  auto q = random_bf16(gen, B * S * H * (D + tail)), kv = random_bf16(gen, B * S_k * H_kv * (D + tail));
  std::vector<uint16_t> o(static_cast<size_t>(B * S * H * D));
  rt.run("dsa_decode",
         {{"impl", "reference"}, {"dim_tail", tail}, {"stride_kv", ratio}, {"q_start_index_s", q_start}},
         {{"q", TensorRef::contiguous(q.data(), DType::kBF16, {B, S, H, D + tail}, host)},
          {"kv", TensorRef::contiguous(kv.data(), DType::kBF16, {B, S_k, H_kv, D + tail}, host)},
          {"indices", idx},
          {"o", TensorRef::contiguous(o.data(), DType::kBF16, {B, S, H, D}, host)}});

  for (int64_t s = 0; s < S; ++s) {
    std::printf("q_pos %lld: keys", static_cast<long long>(q_start + s));
    for (int64_t u = 0; u < topk; ++u) std::printf(" %d", li[(q_start + s) * topk + u]);
    double sq = 0;
    for (int64_t i = s * H * D; i < (s + 1) * H * D; ++i) sq += double(from_bf16(o[i])) * from_bf16(o[i]);
    std::printf("  |o| %.4f\n", std::sqrt(sq));
  }
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "dsa_pipeline: %s\n", e.what());
  return 1;
}
