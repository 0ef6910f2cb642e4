// The whole Native Sparse Attention forward over a packed batch, as a user writes it against the public
// C++ API: three attention branches over the same queries, mixed by per-(token, head) gates,
//
//   o = g_cmp * o_cmp + g_sel * o_sel + g_win * o_win
//
//   o_cmp          nsa_compressed_fwd: each token over the complete compressed chunks of its request
//   block_indices  nsa_topk: per token and KV head, the S chunk ids (of bs tokens) of highest importance
//   o_sel          nsa_selected_fwd over those blocks of raw tokens (block_size = bs, causal)
//   o_win          gqa_varlen_fwd, causal, window_size_left = W - 1: the last W tokens, itself included
//
// k_cmp / v_cmp (one row per bs-token chunk) are inputs here: the compression MLP that produces them, and
// the gate projection, belong to the model. Runs on the CPU reference (host tensors). On a GPU the four
// op calls take device tensors and impl "kernel" unchanged; attnjit has no elementwise op, so the gated
// sum is the caller's (a framework's fused multiply-add, or, as a test would, a copy of the three branch
// outputs to the host and the loop below). docs/ops/nsa_forward.md describes the chain.
//
//   nsa_forward [bs] [S] [W]
//     bs  tokens per compressed chunk = selected block size, default 4
//     S   selected blocks per token (nsa_topk's selected_block_num), default 3
//     W   sliding window in tokens, default 8
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
  const int64_t bs = arg(argc, argv, 1, 4), S = arg(argc, argv, 2, 3), W = arg(argc, argv, 3, 8);
  if (bs < 1 || S < 1 || S > 128 || W < 1) {
    std::fprintf(stderr, "usage: nsa_forward [bs >= 1] [1 <= S <= 128] [W >= 1]\n");
    return 2;
  }
  const attnjit::Device host{attnjit::DeviceKind::kCPU, 0};
  const int64_t H = 32, H_kv = 2, D = 64;  // group size 16 (the NSA ops take multiples of 16)
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  std::mt19937 gen(2026);

  // Packed metadata (SPEC.md §2.14) for three requests: offsets, (request, position) per token, and
  // ceil(len / bs) chunk rows per request (the trailing partial chunk counts).
  const std::vector<int32_t> lens = {21, 3, 14};
  std::vector<int32_t> offsets = {0}, chunk_offsets = {0}, token_indices;
  for (size_t n = 0; n < lens.size(); ++n) {
    for (int32_t p = 0; p < lens[n]; ++p) token_indices.insert(token_indices.end(), {static_cast<int32_t>(n), p});
    offsets.push_back(offsets.back() + lens[n]);
    chunk_offsets.push_back(chunk_offsets.back() + static_cast<int32_t>((lens[n] + bs - 1) / bs));
  }
  const int64_t N = static_cast<int64_t>(lens.size()), T = offsets.back(), C = chunk_offsets.back();

  auto q = random_bf16(gen, T * H * D), k = random_bf16(gen, T * H_kv * D), v = random_bf16(gen, T * H_kv * D);
  auto k_cmp = random_bf16(gen, C * H_kv * D), v_cmp = random_bf16(gen, C * H_kv * D);
  std::vector<float> g_cmp(static_cast<size_t>(T * H)), g_sel(g_cmp.size()), g_win(g_cmp.size());
  std::uniform_real_distribution<float> ud(0.0f, 1.0f);  // the model's sigmoid gates
  for (auto* g : {&g_cmp, &g_sel, &g_win})
    for (float& x : *g) x = ud(gen);

  auto bf16 = [&](void* p, std::initializer_list<int64_t> shape) {
    return TensorRef::contiguous(p, DType::kBF16, shape, host);
  };
  auto i32 = [&](void* p, std::initializer_list<int64_t> shape) {
    return TensorRef::contiguous(p, DType::kI32, shape, host);
  };
  const TensorRef off = i32(offsets.data(), {N + 1}), coff = i32(chunk_offsets.data(), {N + 1}),
                  tok = i32(token_indices.data(), {T, 2});

  attnjit::Runtime rt;
  std::vector<uint16_t> o_cmp(static_cast<size_t>(T * H * D)), o_sel(o_cmp.size()), o_win(o_cmp.size());
  std::vector<int32_t> block_indices(static_cast<size_t>(T * H_kv * S));

  // 1. Compressed branch: tokens before their first complete chunk get zeros.
  rt.run("nsa_compressed_fwd", {{"impl", "reference"}, {"scale", scale}, {"bs", bs}},
         {{"q", bf16(q.data(), {T, H, D})}, {"k_cmp", bf16(k_cmp.data(), {C, H_kv, D})},
          {"v_cmp", bf16(v_cmp.data(), {C, H_kv, D})}, {"offsets", off}, {"chunk_offsets", coff},
          {"token_indices", tok}, {"o", bf16(o_cmp.data(), {T, H, D})}});

  // 2. Block selection over the same compressed keys: chunk ids, -1 padded when a token has fewer than S
  //    candidates (chunks 0 .. p // bs).
  rt.run("nsa_topk", {{"impl", "reference"}, {"scale", scale}, {"selected_block_num", S}, {"bs", bs}},
         {{"q", bf16(q.data(), {T, H, D})}, {"k_cmp", bf16(k_cmp.data(), {C, H_kv, D})}, {"offsets", off},
          {"chunk_offsets", coff}, {"token_indices", tok}, {"block_indices", i32(block_indices.data(), {T, H_kv, S})}});

  // 3. Selected branch: chunk c of bs tokens is block c of block_size bs, so the ids pass unchanged. Every
  //    slot is read (block_counts = S, one value broadcast with zero strides); -1 slots are skipped.
  int32_t all_slots = static_cast<int32_t>(S);
  TensorRef counts = i32(&all_slots, {T, H_kv});
  counts.strides = {0, 0};
  rt.run("nsa_selected_fwd", {{"impl", "reference"}, {"is_causal", true}, {"scale", scale}, {"block_size", bs}},
         {{"q", bf16(q.data(), {T, H, D})}, {"k", bf16(k.data(), {T, H_kv, D})}, {"v", bf16(v.data(), {T, H_kv, D})},
          {"block_indices", i32(block_indices.data(), {T, H_kv, S})}, {"block_counts", counts}, {"offsets", off},
          {"token_indices", tok}, {"o", bf16(o_sel.data(), {T, H, D})}});

  // 4. Sliding-window branch: the packed offsets serve as cu_seqlens for queries and keys alike.
  rt.run("gqa_varlen_fwd",
         {{"impl", "reference"}, {"is_causal", true}, {"window_size_left", W - 1}, {"sm_scale", scale}},
         {{"q", bf16(q.data(), {T, H, D})}, {"k", bf16(k.data(), {T, H_kv, D})}, {"v", bf16(v.data(), {T, H_kv, D})},
          {"cu_seqlens_q", off}, {"cu_seqlens_kv", off}, {"o", bf16(o_win.data(), {T, H, D})}});

  // 5. The gates, in fp32 from the three rounded branch outputs, rounded once to bf16.
  std::vector<uint16_t> o(o_cmp.size());
  for (int64_t i = 0; i < T * H * D; ++i) {
    const int64_t g = i / D;
    o[i] = to_bf16(g_cmp[g] * from_bf16(o_cmp[i]) + g_sel[g] * from_bf16(o_sel[i]) + g_win[g] * from_bf16(o_win[i]));
  }

  for (int64_t n = 0; n < N; ++n) {
    const int64_t t = offsets[n + 1] - 1;  // the request's last token
    std::printf("request %lld (len %d): last token blocks", static_cast<long long>(n), lens[n]);
    for (int64_t u = 0; u < S; ++u) std::printf(" %d", block_indices[t * H_kv * S + u]);
    double sq = 0;
    for (int64_t i = t * H * D; i < (t + 1) * H * D; ++i) sq += double(from_bf16(o[i])) * from_bf16(o[i]);
    std::printf("  |o| %.4f\n", std::sqrt(sq));
  }
  std::printf("nsa_forward: %lld tokens, %lld chunks, bs %lld, S %lld, W %lld\n", static_cast<long long>(T),
              static_cast<long long>(C), static_cast<long long>(bs), static_cast<long long>(S),
              static_cast<long long>(W));
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "nsa_forward: %s\n", e.what());
  return 1;
}
