// `attnjit bench --suite fp8_lightning_indexer` and `--suite topk_select` (called from cli_bench.cpp).
// Benchmarks, never tests: they print figures (and check nothing beyond the call succeeding).
//
// fp8_lightning_indexer: B=1, S=S_kv=8192, H=32, D=64, G=1, clean_logits; bf16 and e4m3 (with and
// without per-key scales) inputs; windows as in TileOPs' benchmark (documents of 1..1024 tokens, each
// query sees its document up to itself) and dense (every window [0, S_kv)). Figures: ms, GB/s of the
// logits write (S S_kv G 4 bytes; the op's floor), TFLOP/s over the visible pairs (2 H D per pair).
// topk_select: B=1, S=8192 rows, S_kv 8192 and 32768, topk 2048, G=1, with and without causal
// windows; GB/s = scores read + indexes written.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <functional>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "attnjit/runtime.hpp"
#include "bench_util.hpp"
#include "device_buffer.hpp"
#include "runtime/tools_facade.hpp"
#include "base/host_numeric.hpp"

namespace attnjit::cli {

namespace {

using BenchRow = std::array<std::string, 3>;  // what, value, note

void fp8_indexer(Runtime& rt, int reps, std::vector<BenchRow>& rows, nlohmann::json& out) {
  const int64_t B = 1, S = 8192, S_kv = 8192, H = 32, D = 64, G = 1;
  const Device dev{DeviceKind::kCUDA, 0};
  std::mt19937_64 rng(11);
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<uint16_t> qb(static_cast<size_t>(B * S * H * D)), kb(static_cast<size_t>(B * S_kv * G * D));
  std::vector<uint8_t> q8(qb.size()), k8(kb.size());
  for (size_t i = 0; i < qb.size(); ++i) {
    const float x = nd(rng);
    qb[i] = numeric::float_to_bf16(x);
    q8[i] = numeric::float_to_e4m3(x);
  }
  for (size_t i = 0; i < kb.size(); ++i) {
    const float x = nd(rng);
    kb[i] = numeric::float_to_bf16(x);
    k8[i] = numeric::float_to_e4m3(x);
  }
  std::vector<float> w(static_cast<size_t>(S * H)), scale(static_cast<size_t>(B * S_kv * G));
  for (auto& x : w) x = 0.2f * nd(rng);
  for (auto& x : scale) x = 0.75f + 0.25f * std::abs(nd(rng));
  DeviceBuffer dqb(qb.size() * 2), dkb(kb.size() * 2), dq8(q8.size()), dk8(k8.size()), dw(w.size() * 4),
      dscale(scale.size() * 4), dks(S * 4), dke(S * 4), dlogits(static_cast<size_t>(B * S * S_kv * G * 4));
  upload(dqb, qb);
  upload(dkb, kb);
  upload(dq8, q8);
  upload(dk8, k8);
  upload(dw, w);
  upload(dscale, scale);
  const double out_bytes = static_cast<double>(B * S * S_kv * G) * 4;
  for (const char* windows : {"doc-causal", "dense"}) {
    std::vector<int32_t> ks(static_cast<size_t>(S)), ke(static_cast<size_t>(S));
    if (std::string(windows) == "dense") {
      std::fill(ks.begin(), ks.end(), 0);
      std::fill(ke.begin(), ke.end(), static_cast<int32_t>(S_kv));
    } else {
      std::uniform_int_distribution<int> doc(1, 1024);
      for (int64_t s = 0; s < S;) {
        const int64_t n = doc(rng);
        for (int64_t i = s; i < std::min(S, s + n); ++i) {
          ks[i] = static_cast<int32_t>(s + S_kv - S);
          ke[i] = static_cast<int32_t>(i + S_kv - S + 1);
        }
        s += n;
      }
    }
    upload(dks, ks);
    upload(dke, ke);
    double pairs = 0;
    for (int64_t s = 0; s < S; ++s) pairs += std::max(0, std::min<int32_t>(ke[s], S_kv) - std::max(ks[s], 0));
    const double flops = 2.0 * pairs * B * H * D;
    for (auto [dt, with_scale] : {std::pair{DType::kBF16, false}, std::pair{DType::kE4M3, true},
                                  std::pair{DType::kE4M3, false}}) {
      const bool bf16 = dt == DType::kBF16;
      TensorArgs args;
      args.set("index_q", TensorRef::contiguous(bf16 ? dqb.data() : dq8.data(), dt, {B, S, H, D}, dev));
      args.set("index_k", TensorRef::contiguous(bf16 ? dkb.data() : dk8.data(), dt, {B, S_kv, G, D}, dev));
      args.set("weights", TensorRef::contiguous(dw.data(), DType::kF32, {S, H}, dev));
      args.set("cu_seqlen_ks", TensorRef::contiguous(dks.data(), DType::kI32, {S}, dev));
      args.set("cu_seqlen_ke", TensorRef::contiguous(dke.data(), DType::kI32, {S}, dev));
      if (with_scale) args.set("index_k_scale", TensorRef::contiguous(dscale.data(), DType::kF32, {B, S_kv, G}, dev));
      args.set("logits", TensorRef::contiguous(dlogits.data(), DType::kF32, {B, S, S_kv, G}, dev));
      const std::string what = fmt::format("fp8_lightning_indexer {}{} S{} Skv{} H{} D{} G{} {}", dtype_name(dt),
                                           with_scale ? "+scale" : "", S, S_kv, H, D, G, windows);
      try {
        Plan plan = rt.op("fp8_lightning_indexer").plan(args);
        const double ms = time_ms(3, reps, [&] { plan.execute(args, nullptr); });
        const double gbs = out_bytes / (ms * 1e-3) / 1e9;
        const double tf = flops / (ms * 1e-3) / 1e12;
        rows.push_back({what, fmt::format("{:.4f} ms", ms),
                        fmt::format("{:.0f} GB/s logits write, {:.1f} TFLOP/s over {:.3g} visible pairs ({:.1f}%); "
                                    "TileOPs H200: 0.163 ms", gbs, tf, pairs, 100.0 * pairs / (double(S) * S_kv))});
        out["fp8_lightning_indexer"][what] = {{"ms", ms}, {"gbs", gbs}, {"tflops", tf}};
      } catch (const Error& e) {
        rows.push_back({what, "error", e.what()});
      }
    }
  }
}

void topk_select(Runtime& rt, int reps, std::vector<BenchRow>& rows, nlohmann::json& out) {
  const int64_t B = 1, S = 8192, G = 1, topk = 2048;
  const Device dev{DeviceKind::kCUDA, 0};
  std::mt19937_64 rng(13);
  std::normal_distribution<float> nd(0.f, 1.f);
  for (int64_t S_kv : {int64_t{8192}, int64_t{32768}}) {
    std::vector<float> pattern(static_cast<size_t>(S_kv) * 64);
    for (auto& x : pattern) x = nd(rng);
    DeviceBuffer score(static_cast<size_t>(B * S * S_kv * G * 4)), idx(static_cast<size_t>(B * S * G * topk * 4));
    {
      // 64 random rows repeated (every row differs from its neighbours; uploading 1 GiB of fresh randoms
      // would dominate the run).
      std::vector<uint8_t> bytes(pattern.size() * 4);
      std::memcpy(bytes.data(), pattern.data(), bytes.size());
      const auto& drv = jit::CudaDriver::get();
      for (size_t done = 0; done < score.bytes(); done += bytes.size())
        drv.check(drv.cuMemcpyHtoD(reinterpret_cast<CUdeviceptr>(score.data()) + done, bytes.data(),
                                   std::min(bytes.size(), score.bytes() - done)), "cuMemcpyHtoD");
    }
    std::vector<int32_t> st(static_cast<size_t>(S), 0), en(static_cast<size_t>(S));
    for (int64_t s = 0; s < S; ++s) en[s] = static_cast<int32_t>(s + 1 + S_kv - S);
    DeviceBuffer dst(S * 4), den(S * 4);
    upload(dst, st);
    upload(den, en);
    const double bytes = static_cast<double>(B * S * S_kv * G) * 4 + static_cast<double>(B * S * G * topk) * 4;
    for (bool windowed : {false, true}) {
      TensorArgs args;
      args.set("index_score", TensorRef::contiguous(score.data(), DType::kF32, {B, S, S_kv, G}, dev));
      if (windowed) {
        args.set("starts", TensorRef::contiguous(dst.data(), DType::kI32, {B, S}, dev));
        args.set("ends", TensorRef::contiguous(den.data(), DType::kI32, {B, S}, dev));
      }
      args.set("indexes", TensorRef::contiguous(idx.data(), DType::kI32, {B, S, G, topk}, dev));
      const std::string what = fmt::format("topk_select S{} Skv{} topk{} {}", S, S_kv, topk,
                                           windowed ? "causal windows" : "no window");
      try {
        Plan plan = rt.op("topk_select", {{"topk", topk}}).plan(args);
        const double ms = time_ms(3, reps, [&] { plan.execute(args, nullptr); });
        const double gbs = bytes / (ms * 1e-3) / 1e9;
        rows.push_back({what, fmt::format("{:.4f} ms", ms), fmt::format("{:.0f} GB/s (scores read + indexes written)", gbs)});
        out["topk_select"][what] = {{"ms", ms}, {"gbs", gbs}};
      } catch (const Error& e) {
        rows.push_back({what, "error", e.what()});
      }
    }
  }
}

}  // namespace

// Runs the suites asked for; appends (what, value, note) rows.
void indexer_benches(Runtime& rt, int reps, bool fp8, bool topk, std::vector<BenchRow>& rows, nlohmann::json& out) {
  if (fp8) fp8_indexer(rt, reps, rows, out);
  if (topk) topk_select(rt, reps, rows, out);
}

}  // namespace attnjit::cli
