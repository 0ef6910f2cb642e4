// `attnjit bench --suite mla_decode` and `--suite dsa_decode` (called from cli_bench.cpp). Benchmarks,
// never tests: they print figures and check nothing beyond the call succeeding. The shapes are those of
// tools/bench/bench_torch.py's suites of the same names (tools/bench/bench_mla.py), attnjit only, one row
// per explicit backend (portable, hopper); a backend that does not serve the call gives an "unsupported"
// row with the op's message.
//
// mla_decode: bf16, H_kv 1, D 512, PE 64, one query token per request: B 64 / 128 x N_kv 4096 / 8192 at
// H 128; B 64 at H 16 (memory-bound); B 1 x 65536 (split-KV); a paged cache (page 64, shuffled table) at
// B 64 x 4096. TFLOP/s = (2 B H N_kv (D + PE) + 2 B H N_kv D) / time; GB/s = the latent cache read once,
// B N_kv H_kv (D + PE) * 2 bytes.
// dsa_decode: bf16, S 1, H 128, H_kv 1, D 512, dim_tail 64, topk 2048 distinct random indices of S_kv
// 65536, causal with q_start_index_s = S_kv - 1 (every index valid); B 64 and 8. TFLOP/s over the selected
// keys: (2 B S H topk (D + tail) + 2 B S H topk D) / time; GB/s = B S H_kv topk (D + tail) * 2 bytes.
//
// Without a GPU each case gives a "skipped" row with its counts (the same figures bench_mla.py's
// --self-test --cli checks).
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "attnjit/runtime.hpp"
#include "bench_util.hpp"
#include "device_buffer.hpp"
#include "runtime/tools_facade.hpp"

namespace attnjit::cli {

namespace {

using BenchRow = std::array<std::string, 3>;  // what, value, note

struct MlaShape {
  int64_t B, H, H_kv, D, PE, N_kv, PS;  // PS = 0: contiguous cache
};
struct DsaShape {
  int64_t B, S, H, H_kv, D, tail, topk, S_kv;
};

constexpr MlaShape kMlaShapes[] = {
    {64, 128, 1, 512, 64, 4096, 0}, {64, 128, 1, 512, 64, 8192, 0}, {128, 128, 1, 512, 64, 4096, 0},
    {128, 128, 1, 512, 64, 8192, 0}, {64, 16, 1, 512, 64, 4096, 0}, {64, 16, 1, 512, 64, 8192, 0},
    {1, 128, 1, 512, 64, 65536, 0}, {64, 128, 1, 512, 64, 4096, 64}};
constexpr DsaShape kDsaShapes[] = {{64, 1, 128, 1, 512, 64, 2048, 65536}, {8, 1, 128, 1, 512, 64, 2048, 65536}};
constexpr const char* kBackends[] = {"portable", "hopper"};

double mla_flops(const MlaShape& s) {
  const double rows = double(s.B) * s.H * s.N_kv;  // S_q = 1
  return 2.0 * rows * (s.D + s.PE) + 2.0 * rows * s.D;
}
double mla_cache_bytes(const MlaShape& s) { return double(s.B) * s.N_kv * s.H_kv * (s.D + s.PE) * 2; }
double dsa_flops(const DsaShape& s) {
  const double rows = double(s.B) * s.S * s.H * s.topk;  // every selected index is valid here
  return 2.0 * rows * (s.D + s.tail) + 2.0 * rows * s.D;
}
double dsa_cache_bytes(const DsaShape& s) { return double(s.B) * s.S * s.H_kv * s.topk * (s.D + s.tail) * 2; }

std::string mla_what(const MlaShape& s, const char* backend) {
  return fmt::format("mla_decode bf16 B{} H{}/{} D{}+{} N{}{} {}", s.B, s.H, s.H_kv, s.D, s.PE, s.N_kv,
                     s.PS ? fmt::format(" paged PS{}", s.PS) : std::string(), backend);
}
std::string dsa_what(const DsaShape& s, const char* backend) {
  return fmt::format("dsa_decode bf16 B{} S{} H{}/{} D{}+{} topk{} S_kv{} causal {}", s.B, s.S, s.H, s.H_kv, s.D,
                     s.tail, s.topk, s.S_kv, backend);
}

// Repeats `pattern` over the whole buffer.
void fill_pattern(DeviceBuffer& b, const std::vector<uint8_t>& pattern) {
  const auto& drv = jit::CudaDriver::get();
  for (size_t done = 0; done < b.bytes(); done += pattern.size())
    drv.check(drv.cuMemcpyHtoD(reinterpret_cast<CUdeviceptr>(b.data()) + done, pattern.data(),
                               std::min(pattern.size(), b.bytes() - done)),
              "cuMemcpyHtoD");
}

// Plans `op` on each backend and times it; one row per backend.
void time_backends(Runtime& rt, int reps, const char* op, const TensorArgs& args,
                   const std::function<std::string(const char*)>& what_of,
                   const std::function<Config(const char*)>& cfg_of, double flops, double bytes,
                   std::vector<BenchRow>& rows, nlohmann::json& out) {
  for (const char* backend : kBackends) {
    const std::string what = what_of(backend);
    Plan plan;
    try {
      plan = rt.op(op, cfg_of(backend)).plan(args);
    } catch (const Unsupported& e) {
      rows.push_back({what, "unsupported", e.what()});
      out[op][what] = {{"unsupported", e.what()}, {"flops", flops}, {"cache_bytes", bytes}};
      continue;
    } catch (const Error& e) {
      rows.push_back({what, "error", e.what()});
      out[op][what] = {{"error", e.what()}, {"flops", flops}, {"cache_bytes", bytes}};
      continue;
    }
    const double ms = time_ms(3, reps, [&] { plan.execute(args, nullptr); });
    const double tflops = flops / (ms * 1e-3) / 1e12, gbs = bytes / (ms * 1e-3) / 1e9;
    rows.push_back({what, fmt::format("{:.1f} TF/s", tflops),
                    fmt::format("{:.0f} GB/s cache read, {:.1f} us; {}", gbs, ms * 1e3,
                                plan.describe().substr(plan.describe().find(": ") + 2))});
    out[op][what] = {{"us", ms * 1e3}, {"tflops", tflops}, {"gbs", gbs}, {"flops", flops}, {"cache_bytes", bytes}};
  }
}

void skipped(const std::string& what, const std::string& reason, double flops, double bytes, const char* op,
             std::vector<BenchRow>& rows, nlohmann::json& out) {
  rows.push_back({what, "skipped", fmt::format("{}; {:.6g} GFLOP, {:.6g} GB cache read per call", reason, flops / 1e9,
                                               bytes / 1e9)});
  out[op][what] = {{"skipped", reason}, {"flops", flops}, {"cache_bytes", bytes}};
}

void mla_decode_bench(Runtime* rt, int reps, const std::string& no_gpu, std::vector<BenchRow>& rows,
                      nlohmann::json& out) {
  const Device dev{DeviceKind::kCUDA, 0};
  for (const auto& s : kMlaShapes) {
    const double flops = mla_flops(s), bytes = mla_cache_bytes(s);
    if (rt == nullptr) {
      for (const char* backend : kBackends) skipped(mla_what(s, backend), no_gpu, flops, bytes, "mla_decode", rows, out);
      continue;
    }
    const int64_t W = s.PS ? (s.N_kv + s.PS - 1) / s.PS : 0, NP = s.B * W;
    // Contiguous: [B, N_kv, H_kv, *]; paged: pools [NP, PS, H_kv, *] of the same size (N_kv a page multiple).
    const std::vector<int64_t> k_lead = s.PS ? std::vector<int64_t>{NP, s.PS, s.H_kv} : std::vector<int64_t>{s.B, s.N_kv, s.H_kv};
    const int64_t k_rows = k_lead[0] * k_lead[1] * k_lead[2];
    DeviceBuffer q(static_cast<size_t>(s.B * s.H * s.D * 2)), q_pe(static_cast<size_t>(s.B * s.H * s.PE * 2)),
        k(static_cast<size_t>(k_rows * s.D * 2)), k_pe(static_cast<size_t>(k_rows * s.PE * 2)),
        o(static_cast<size_t>(s.B * s.H * s.D * 2)), table(static_cast<size_t>(std::max<int64_t>(NP, 1) * 4)),
        seqlens(static_cast<size_t>(s.B * 4));
    std::mt19937_64 rng(19);
    std::normal_distribution<float> nd(0.f, 1.f);
    const std::vector<uint8_t> pattern = bf16_pattern(std::min<size_t>(k.bytes(), 32ull << 20), rng, nd);
    for (DeviceBuffer* b : {&q, &q_pe, &k, &k_pe}) fill_pattern(*b, pattern);
    TensorArgs args;
    args.set("q", TensorRef::contiguous(q.data(), DType::kBF16, {s.B, s.H, s.D}, dev));
    args.set("q_pe", TensorRef::contiguous(q_pe.data(), DType::kBF16, {s.B, s.H, s.PE}, dev));
    args.set("k", TensorRef::contiguous(k.data(), DType::kBF16, {k_lead[0], k_lead[1], k_lead[2], s.D}, dev));
    args.set("k_pe", TensorRef::contiguous(k_pe.data(), DType::kBF16, {k_lead[0], k_lead[1], k_lead[2], s.PE}, dev));
    args.set("o", TensorRef::contiguous(o.data(), DType::kBF16, {s.B, s.H, s.D}, dev));
    if (s.PS) {
      // Pages in random order, what a serving engine's allocator gives.
      std::vector<int32_t> pages(static_cast<size_t>(NP));
      std::iota(pages.begin(), pages.end(), 0);
      std::shuffle(pages.begin(), pages.end(), rng);
      upload(table, pages);
      upload(seqlens, std::vector<int32_t>(static_cast<size_t>(s.B), static_cast<int32_t>(s.N_kv)));
      args.set("block_table", TensorRef::contiguous(table.data(), DType::kI32, {s.B, W}, dev));
      args.set("cache_seqlens", TensorRef::contiguous(seqlens.data(), DType::kI32, {s.B}, dev));
    }
    time_backends(
        *rt, reps, "mla_decode", args, [&](const char* b) { return mla_what(s, b); },
        [](const char* b) { return Config{{"backend", std::string(b)}}; }, flops, bytes, rows, out);
  }
}

void dsa_decode_bench(Runtime* rt, int reps, const std::string& no_gpu, std::vector<BenchRow>& rows,
                      nlohmann::json& out) {
  const Device dev{DeviceKind::kCUDA, 0};
  for (const auto& s : kDsaShapes) {
    const double flops = dsa_flops(s), bytes = dsa_cache_bytes(s);
    if (rt == nullptr) {
      for (const char* backend : kBackends) skipped(dsa_what(s, backend), no_gpu, flops, bytes, "dsa_decode", rows, out);
      continue;
    }
    const int64_t E = s.D + s.tail;
    DeviceBuffer q(static_cast<size_t>(s.B * s.S * s.H * E * 2)), kv(static_cast<size_t>(s.B * s.S_kv * s.H_kv * E * 2)),
        indices(static_cast<size_t>(s.B * s.S * s.H_kv * s.topk * 4)), o(static_cast<size_t>(s.B * s.S * s.H * s.D * 2));
    std::mt19937_64 rng(23);
    std::normal_distribution<float> nd(0.f, 1.f);
    const std::vector<uint8_t> pattern = bf16_pattern(std::min<size_t>(kv.bytes(), 32ull << 20), rng, nd);
    fill_pattern(q, pattern);
    fill_pattern(kv, pattern);
    // topk distinct positions of [0, S_kv) per (b, s, r), in random order.
    upload(indices, random_block_index(rng, s.B * s.S * s.H_kv, s.S_kv, s.topk));
    TensorArgs args;
    args.set("q", TensorRef::contiguous(q.data(), DType::kBF16, {s.B, s.S, s.H, E}, dev));
    args.set("kv", TensorRef::contiguous(kv.data(), DType::kBF16, {s.B, s.S_kv, s.H_kv, E}, dev));
    args.set("indices", TensorRef::contiguous(indices.data(), DType::kI32, {s.B, s.S, s.H_kv, s.topk}, dev));
    args.set("o", TensorRef::contiguous(o.data(), DType::kBF16, {s.B, s.S, s.H, s.D}, dev));
    const int64_t q_start = s.S_kv - 1;  // the query is the cache's last token: every index is visible
    time_backends(
        *rt, reps, "dsa_decode", args, [&](const char* b) { return dsa_what(s, b); },
        [&](const char* b) {
          return Config{{"dim_tail", s.tail}, {"stride_kv", std::int64_t{1}}, {"q_start_index_s", q_start},
                        {"is_causal", true}, {"backend", std::string(b)}};
        },
        flops, bytes, rows, out);
  }
}

}  // namespace

// Runs the suites asked for; appends (what, value, note) rows. rt == nullptr: no GPU (no_gpu says why),
// each case a "skipped" row with its counts.
void mla_benches(Runtime* rt, int reps, bool mla, bool dsa, const std::string& no_gpu,
                 std::vector<BenchRow>& rows, nlohmann::json& out) {
  if (mla) mla_decode_bench(rt, reps, no_gpu, rows, out);
  if (dsa) dsa_decode_bench(rt, reps, no_gpu, rows, out);
}

}  // namespace attnjit::cli
