// `attnjit bench`: the runtime's own costs (cold compile, cached load in a fresh process, plan() hit,
// execute() overhead over a bare launch) and op bandwidth beside its ceiling, measured in one run.
// A benchmark, never a test: it prints figures and asserts nothing.
#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <numeric>
#include <random>

#include "attnjit/runtime.hpp"
#include "bench_util.hpp"
#include "cli_commands.hpp"
#include "device_buffer.hpp"
#include "runtime/tools_facade.hpp"
#include "kv_cache/paged_kv_write_params.cuh"

namespace attnjit::cli {

namespace {

using Clock = std::chrono::steady_clock;

struct BenchArgs {
  std::vector<std::string> suites;  // runtime, paged_kv_write, gqa, gqa_bwd, ...; empty = all
  std::string json_out;
  int reps = 20;
  double gib = 1.0;
  std::string backend;  // the gqa suite's `backend` config ("" = the op's default, "auto")
  std::string probe;  // internal: the fresh-process load probe
};

struct Row {
  std::string what, value, note;
};

double us_since(Clock::time_point t0) { return std::chrono::duration<double, std::micro>(Clock::now() - t0).count(); }

// A small paged_kv_write problem with device tensors (bf16 -> cache dtype, H, D=128, page size 16).
struct KvWriteProblem {
  int64_t N, H, D = 128, PS = 16, NP;
  DType cache;
  DeviceBuffer k, v, kp, vp, slots, scale;
  TensorArgs args;

  KvWriteProblem(int64_t n, int64_t h, DType cache_dtype) : N(n), H(h), NP((n + 15) / 16), cache(cache_dtype) {
    const size_t row = static_cast<size_t>(H * D);
    const size_t cache_es = static_cast<size_t>(dtype_size(cache));
    k = DeviceBuffer(N * row * 2);
    v = DeviceBuffer(N * row * 2);
    kp = DeviceBuffer(NP * PS * row * cache_es);
    vp = DeviceBuffer(NP * PS * row * cache_es);
    slots = DeviceBuffer(N * 8);
    scale = DeviceBuffer(4);
    std::mt19937_64 rng(42);
    // Random data (never zeros): a host pattern of random bf16 values repeated over the buffer.
    std::uniform_real_distribution<float> u(-2.f, 2.f);
    const std::vector<uint8_t> pattern = bf16_pattern(std::min<size_t>(N * row * 2, 64ull << 20), rng, u);
    fill(k, pattern);
    fill(v, pattern);
    // Pages in random order, slots sequential inside a page: what a serving engine's allocator gives.
    std::vector<int64_t> pages(static_cast<size_t>(NP));
    std::iota(pages.begin(), pages.end(), 0);
    std::shuffle(pages.begin(), pages.end(), rng);
    std::vector<int64_t> s(static_cast<size_t>(N));
    for (int64_t i = 0; i < N; ++i) s[i] = pages[i / PS] * PS + i % PS;
    upload(slots, s);
    upload(scale, std::vector<float>{0.5f});
    const Device dev{DeviceKind::kCUDA, 0};
    args.set("k", TensorRef::contiguous(k.data(), DType::kBF16, {N, H, D}, dev));
    args.set("v", TensorRef::contiguous(v.data(), DType::kBF16, {N, H, D}, dev));
    args.set("k_pages", TensorRef::contiguous(kp.data(), cache, {NP, PS, H, D}, dev));
    args.set("v_pages", TensorRef::contiguous(vp.data(), cache, {NP, PS, H, D}, dev));
    args.set("slot_mapping", TensorRef::contiguous(slots.data(), DType::kI64, {N}, dev));
    if (cache == DType::kE4M3) {
      args.set("k_scale", TensorRef::contiguous(scale.data(), DType::kF32, {1}, dev));
      args.set("v_scale", TensorRef::contiguous(scale.data(), DType::kF32, {1}, dev));
    }
  }
  static void fill(DeviceBuffer& b, const std::vector<uint8_t>& pattern) {
    const auto& drv = jit::CudaDriver::get();
    size_t done = 0;
    while (done < b.bytes()) {
      size_t n = std::min(pattern.size(), b.bytes() - done);
      drv.check(drv.cuMemcpyHtoD(reinterpret_cast<CUdeviceptr>(b.data()) + done, pattern.data(), n), "cuMemcpyHtoD");
      done += n;
    }
  }
  double bytes_moved() const {
    return double(N) * H * D * (2 * 2 + 2 * dtype_size(cache)) + N * 8.0;
  }
};

void cold_compile(std::vector<Row>& rows) {
  // A fresh NVRTC program per kernel, no cache: NVRTC's full cost, the first 4 kernels of each op's
  // warm-up matrix.
  jit::NvrtcCompiler compiler;
  for (const auto& m : tools::warmup_matrices("sm_90a")) {
    std::vector<double> secs;
    const auto& specs = m.kernels;
    if (specs.empty()) continue;  // an op without GPU kernels (gqa_bwd today)
    for (size_t i = 0; i < specs.size() && i < 4; ++i) secs.push_back(compiler.compile(specs[i]).seconds);
    rows.push_back({fmt::format("cold compile, {}", m.op), fmt::format("{:.3f} s", median(secs)),
                    fmt::format("median of {} kernels, e.g. {}", secs.size(), specs[0].describe())});
  }
}

// Runs this binary again as a fresh process that loads one cached kernel and reports its timings.
void fresh_process_load(std::vector<Row>& rows, bool gpu) {
  char exe[4096] = {};
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) return;
  std::string cmd = fmt::format("'{}' bench --probe {}", exe, gpu ? "gpu" : "disk");
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return;
  char buf[512] = {};
  std::string out;
  while (fgets(buf, sizeof buf, p)) out += buf;
  pclose(p);
  double disk_us = 0, ready_us = 0, runtime_us = 0;
  std::sscanf(out.c_str(), "probe runtime_us=%lf disk_us=%lf ready_us=%lf", &runtime_us, &disk_us, &ready_us);
  rows.push_back({"fresh process: Runtime constructed", fmt::format("{:.0f} us", runtime_us), "options, cache dir, NVRTC version"});
  rows.push_back({"fresh process: cached cubin read + verified", fmt::format("{:.0f} us", disk_us), "manifest, sha256 of the cubin"});
  if (gpu)
    rows.push_back({"fresh process: plan() ready (kernel loaded)", fmt::format("{:.0f} us", ready_us),
                    "first plan: cache read + cuModuleLoadData + attributes (driver already initialised)"});
}

int probe(const std::string& mode) {
  auto t0 = Clock::now();
  Runtime rt;
  const double runtime_us = us_since(t0);
  const auto spec = tools::warmup_matrix("paged_kv_write", tools::default_arch(rt))[0];
  auto t1 = Clock::now();
  auto c = tools::compile(rt, spec);
  const double disk_us = us_since(t1);
  double ready_us = 0;
  if (mode == "gpu") {
    const auto& drv = jit::CudaDriver::get();
    drv.bind_device(0);
    KvWriteProblem prob(16, 1, DType::kBF16);
    auto t2 = Clock::now();
    Plan plan = rt.op("paged_kv_write").plan(prob.args);
    ready_us = us_since(t2);
  }
  fmt::print("probe runtime_us={:.1f} disk_us={:.1f} ready_us={:.1f} from_disk={}\n", runtime_us, disk_us, ready_us,
             c->from_disk);
  return 0;
}

void plan_hit(std::vector<Row>& rows, Runtime& rt, const TensorArgs& args, const Config& config) {
  Op op = rt.op("paged_kv_write", config);
  op.plan(args);
  constexpr int kIters = 200000;
  auto t0 = Clock::now();
  for (int i = 0; i < kIters; ++i) {
    Plan p = op.plan(args);
    asm volatile("" ::"r"(&p) : "memory");
  }
  rows.push_back({"Op::plan() in-memory hit", fmt::format("{:.2f} us", us_since(t0) / kIters),
                  "validate + signature + map lookup (target < 2 us)"});
  t0 = Clock::now();
  for (int i = 0; i < kIters / 10; ++i) {
    Plan p = rt.plan("paged_kv_write", config, args);
    asm volatile("" ::"r"(&p) : "memory");
  }
  rows.push_back({"Runtime::plan(name, config) hit", fmt::format("{:.2f} us", us_since(t0) / (kIters / 10)),
                  "adds the op-instance lookup by (name, config JSON)"});
}

void execute_overhead(std::vector<Row>& rows, Runtime& rt) {
  const auto& drv = jit::CudaDriver::get();
  KvWriteProblem prob(1, 1, DType::kBF16);
  Plan plan = rt.op("paged_kv_write").plan(prob.args);
  // The bare launch: the same kernel of the plan, params prepared once.
  auto spec = tools::kernels_for(rt, "paged_kv_write", nlohmann::json::object(), prob.args, tools::arch_for_device(rt, 0))[0];
  auto kernel = tools::load(rt, spec, 0);
  kernels::PagedKvWriteParams p{};
  p.k = prob.k.data();
  p.v = prob.v.data();
  p.k_pages = prob.kp.data();
  p.v_pages = prob.vp.data();
  p.slot_mapping = static_cast<const long long*>(prob.slots.data());
  p.num_tokens = 1;
  p.num_heads = 1;
  p.page_size = 16;
  p.slot_stride = 1;
  p.k_stride_n = p.v_stride_n = 128;
  p.k_stride_h = p.v_stride_h = 128;
  p.kp_stride_page = p.vp_stride_page = 16 * 128;
  p.kp_stride_slot = p.vp_stride_slot = 128;
  p.kp_stride_h = p.vp_stride_h = 128;
  CUlaunchConfig cfg{};
  cfg.gridDimX = cfg.gridDimY = cfg.gridDimZ = 1;
  cfg.blockDimX = 256;
  cfg.blockDimY = cfg.blockDimZ = 1;
  void* params[] = {&p};
  constexpr int kBatch = 256, kBatches = 40;
  auto measure = [&](auto&& launch) {
    std::vector<double> per;
    for (int b = 0; b < kBatches + 4; ++b) {
      auto t0 = Clock::now();
      for (int i = 0; i < kBatch; ++i) launch();
      const double us = us_since(t0) / kBatch;
      drv.check(drv.cuStreamSynchronize(nullptr), "cuStreamSynchronize");
      if (b >= 4) per.push_back(us);
    }
    return median(per);
  };
  const double bare = measure([&] { drv.cuLaunchKernelEx(&cfg, kernel->function, params, nullptr); });
  const double exec = measure([&] { plan.execute(prob.args, nullptr); });
  rows.push_back({"bare cuLaunchKernelEx (host)", fmt::format("{:.2f} us", bare), "median per launch, batches of 256"});
  rows.push_back({"Plan::execute() (host)", fmt::format("{:.2f} us", exec),
                  fmt::format("overhead {:+.2f} us over the bare launch (target < 1 us)", exec - bare)});
}

void kv_write_bandwidth(std::vector<Row>& rows, Runtime& rt, const BenchArgs& a, nlohmann::json& out) {
  const auto& drv = jit::CudaDriver::get();
  const int64_t H = 8, D = 128;
  const int64_t N = static_cast<int64_t>(a.gib * (1ull << 30) / (2.0 * H * D * 2));  // k + v = `gib` GiB
  // The ceiling: a device-to-device copy of the same bytes, in this run.
  {
    DeviceBuffer src(static_cast<size_t>(N * H * D * 2 * 2)), dst(static_cast<size_t>(N * H * D * 2 * 2));
    const double ms = time_ms(3, a.reps, [&] {
      drv.check(drv.cuMemcpyDtoDAsync(reinterpret_cast<CUdeviceptr>(dst.data()), reinterpret_cast<CUdeviceptr>(src.data()),
                                      src.bytes(), nullptr), "cuMemcpyDtoDAsync");
    });
    const double gbs = 2.0 * src.bytes() / (ms * 1e-3) / 1e9;
    rows.push_back({fmt::format("device copy {:.2f} GiB (ceiling)", src.bytes() / double(1ull << 30)),
                    fmt::format("{:.0f} GB/s", gbs), "read + written; GPU.md's figure: 4276 GB/s"});
    out["copy_gbs"] = gbs;
  }
  for (DType cache : {DType::kBF16, DType::kE4M3}) {
    KvWriteProblem prob(N, H, cache);
    Plan plan = rt.op("paged_kv_write").plan(prob.args);
    const double ms = time_ms(3, a.reps, [&] { plan.execute(prob.args, nullptr); });
    const double gbs = prob.bytes_moved() / (ms * 1e-3) / 1e9;
    const double copy = out.value("copy_gbs", 0.0);
    rows.push_back({fmt::format("paged_kv_write bf16->{} N={} H={} D={} PS=16", dtype_name(cache), N, H, D),
                    fmt::format("{:.0f} GB/s", gbs),
                    fmt::format("{:.3f} ms, {:.1f}% of the copy measured here", ms, copy > 0 ? 100 * gbs / copy : 0)});
    out[fmt::format("paged_kv_write_{}_gbs", dtype_name(cache))] = gbs;
  }
}

// gqa_fwd on the dense shapes of the performance table: bf16 BSHD, random inputs, TFLOP/s counted as
// GPU.md says (4 B H S_q S_kv D, causal counting only the visible pairs).
void gqa_bench(std::vector<Row>& rows, Runtime& rt, const BenchArgs& a, nlohmann::json& out) {
  struct Shape {
    int64_t B, S, H, H_kv, D;
  };
  const Shape shapes[] = {{16, 1024, 32, 8, 128}, {4, 4096, 32, 8, 128}, {1, 16384, 32, 8, 128},
                          {4, 4096, 32, 8, 64},   {4, 4096, 16, 4, 256}};
  const Device dev{DeviceKind::kCUDA, 0};
  for (const auto& sh : shapes) {
    const size_t q_bytes = static_cast<size_t>(sh.B * sh.S * sh.H * sh.D * 2);
    const size_t kv_bytes = static_cast<size_t>(sh.B * sh.S * sh.H_kv * sh.D * 2);
    DeviceBuffer q(q_bytes), k(kv_bytes), v(kv_bytes), o(q_bytes);
    std::mt19937_64 rng(7);
    std::normal_distribution<float> nd(0.f, 1.f);
    const std::vector<uint8_t> pattern = bf16_pattern(std::min<size_t>(q_bytes, 32ull << 20), rng, nd);
    KvWriteProblem::fill(q, pattern);
    KvWriteProblem::fill(k, pattern);
    KvWriteProblem::fill(v, pattern);
    TensorArgs args;
    args.set("q", TensorRef::contiguous(q.data(), DType::kBF16, {sh.B, sh.S, sh.H, sh.D}, dev));
    args.set("k", TensorRef::contiguous(k.data(), DType::kBF16, {sh.B, sh.S, sh.H_kv, sh.D}, dev));
    args.set("v", TensorRef::contiguous(v.data(), DType::kBF16, {sh.B, sh.S, sh.H_kv, sh.D}, dev));
    args.set("o", TensorRef::contiguous(o.data(), DType::kBF16, {sh.B, sh.S, sh.H, sh.D}, dev));
    for (bool causal : {true, false}) {
      const std::string what = fmt::format("gqa_fwd bf16 B{} S{} H{}/{} D{} {}", sh.B, sh.S, sh.H, sh.H_kv, sh.D,
                                           causal ? "causal" : "full");
      Plan plan;
      try {
        Config cfg = {{"is_causal", causal}};
        if (!a.backend.empty()) cfg.set("backend", a.backend);
        plan = rt.op("gqa_fwd", cfg).plan(args);
      } catch (const Error& e) {
        rows.push_back({what, "error", e.what()});
        continue;
      }
      const double ms = time_ms(3, a.reps, [&] { plan.execute(args, nullptr); });
      const double pairs = causal ? sh.S * (sh.S + 1) / 2.0 : double(sh.S) * sh.S;
      const double tflops = 4.0 * sh.B * sh.H * pairs * sh.D / (ms * 1e-3) / 1e12;
      rows.push_back({what, fmt::format("{:.1f} TF/s", tflops),
                      fmt::format("{:.3f} ms, {}", ms, plan.describe().substr(plan.describe().find(": ") + 2))});
      out["gqa"][what] = tflops;
    }
  }
}

// bsa_bwd on the README's block-sparse shapes: bf16 BHSD, B=1, H=32 (MHA), S=16384, D=128, every query
// block attending to 16 of 128 key blocks of 128 tokens, or 32 of 256 blocks of 64 (random distinct
// blocks per row, fixed count). o and lse come from bsa_fwd when this build has it (else o random and
// lse = 10, which only changes the values, not the work). TFLOP/s counted as FlashAttention does:
// 2.5 x the forward's 4 * visible pairs * D.
void bsa_bwd_bench(std::vector<Row>& rows, Runtime& rt, const BenchArgs& a, nlohmann::json& out) {
  struct Shape {
    int64_t B, H, S, D, bs, K;
  };
  const Shape shapes[] = {{1, 32, 16384, 128, 128, 16}, {1, 32, 16384, 128, 64, 32}};
  const Device dev{DeviceKind::kCUDA, 0};
  for (const auto& sh : shapes) {
    const int64_t N = sh.S / sh.bs;
    const size_t t_bytes = static_cast<size_t>(sh.B * sh.H * sh.S * sh.D * 2);
    DeviceBuffer q(t_bytes), k(t_bytes), v(t_bytes), o(t_bytes), dout(t_bytes), dq(t_bytes), dk(t_bytes), dv(t_bytes);
    DeviceBuffer lse(static_cast<size_t>(sh.B * sh.H * sh.S * 4)), index(static_cast<size_t>(sh.B * sh.H * N * sh.K * 4));
    std::mt19937_64 rng(11);
    std::normal_distribution<float> nd(0.f, 1.f);
    const std::vector<uint8_t> pattern = bf16_pattern(std::min<size_t>(t_bytes, 32ull << 20), rng, nd);
    for (DeviceBuffer* b : {&q, &k, &v, &o, &dout}) KvWriteProblem::fill(*b, pattern);
    upload(index, random_block_index(rng, sh.B * sh.H * N, N, sh.K));
    std::vector<float> lse_host(static_cast<size_t>(sh.B * sh.H * sh.S), 10.f);
    upload(lse, lse_host);
    const std::vector<int64_t> qs = {sh.B, sh.H, sh.S, sh.D};
    TensorArgs args;
    args.set("q", TensorRef::contiguous(q.data(), DType::kBF16, qs, dev));
    args.set("k", TensorRef::contiguous(k.data(), DType::kBF16, qs, dev));
    args.set("v", TensorRef::contiguous(v.data(), DType::kBF16, qs, dev));
    args.set("q2k_block_index", TensorRef::contiguous(index.data(), DType::kI32, {sh.B, sh.H, N, sh.K}, dev));
    const Config cfg = {{"sparse_block_size", std::int64_t(sh.bs)}, {"block_sparse_num", std::int64_t(sh.K)}};
    std::string o_note = "o, lse from bsa_fwd";
    try {
      TensorArgs fargs = args;
      fargs.set("o", TensorRef::contiguous(o.data(), DType::kBF16, qs, dev));
      fargs.set("lse", TensorRef::contiguous(lse.data(), DType::kF32, {sh.B, sh.H, sh.S}, dev));
      rt.op("bsa_fwd", cfg).run(fargs, nullptr);
    } catch (const Error& e) {
      o_note = "o random, lse = 10 (bsa_fwd unavailable)";
    }
    args.set("o", TensorRef::contiguous(o.data(), DType::kBF16, qs, dev));
    args.set("do", TensorRef::contiguous(dout.data(), DType::kBF16, qs, dev));
    args.set("lse", TensorRef::contiguous(lse.data(), DType::kF32, {sh.B, sh.H, sh.S}, dev));
    args.set("dq", TensorRef::contiguous(dq.data(), DType::kBF16, qs, dev));
    args.set("dk", TensorRef::contiguous(dk.data(), DType::kBF16, qs, dev));
    args.set("dv", TensorRef::contiguous(dv.data(), DType::kBF16, qs, dev));
    const std::string what = fmt::format("bsa_bwd bf16 B{} H{} S{} D{} bs{} K{}/{}", sh.B, sh.H, sh.S, sh.D, sh.bs, sh.K, N);
    Plan plan;
    try {
      plan = rt.op("bsa_bwd", cfg).plan(args);
    } catch (const Error& e) {
      rows.push_back({what, "error", e.what()});
      continue;
    }
    const double ms = time_ms(3, a.reps, [&] { plan.execute(args, nullptr); });
    const double pairs = double(sh.B) * sh.H * sh.S * sh.K * sh.bs;
    const double tflops = 2.5 * 4.0 * pairs * sh.D / (ms * 1e-3) / 1e12;
    rows.push_back({what, fmt::format("{:.1f} TF/s", tflops), fmt::format("{:.3f} ms, {}", ms, o_note)});
    out["bsa_bwd"][what] = tflops;
  }
}

// gqa_bwd on the gqa suite's D 128 shapes: bf16 BSHD, H 32 / H_kv 8, B x S = 16384 for S 1024, 4096
// and 16384, causal and not; backend auto, portable, and auto with deterministic. o and lse come from
// gqa_fwd when this build serves the call (else o random and lse = 10, which only changes the values,
// not the work). TFLOP/s counted as FlashAttention does: 2.5 x the forward's 4 B H D x visible pairs.
void gqa_bwd_bench(std::vector<Row>& rows, Runtime& rt, const BenchArgs& a, nlohmann::json& out) {
  struct Shape {
    int64_t B, S, H, H_kv, D;
  };
  const Shape shapes[] = {{16, 1024, 32, 8, 128}, {4, 4096, 32, 8, 128}, {1, 16384, 32, 8, 128}};
  const Device dev{DeviceKind::kCUDA, 0};
  for (const auto& sh : shapes) {
    const size_t q_bytes = static_cast<size_t>(sh.B * sh.S * sh.H * sh.D * 2);
    const size_t kv_bytes = static_cast<size_t>(sh.B * sh.S * sh.H_kv * sh.D * 2);
    DeviceBuffer q(q_bytes), k(kv_bytes), v(kv_bytes), o(q_bytes), dout(q_bytes), dq(q_bytes), dk(kv_bytes),
        dv(kv_bytes);
    DeviceBuffer lse(static_cast<size_t>(sh.B * sh.H * sh.S * 4));
    std::mt19937_64 rng(17);
    std::normal_distribution<float> nd(0.f, 1.f);
    const std::vector<uint8_t> pattern = bf16_pattern(std::min<size_t>(q_bytes, 32ull << 20), rng, nd);
    for (DeviceBuffer* b : {&q, &k, &v, &o, &dout}) KvWriteProblem::fill(*b, pattern);
    const std::vector<int64_t> qs = {sh.B, sh.S, sh.H, sh.D}, kvs = {sh.B, sh.S, sh.H_kv, sh.D};
    TensorArgs args;
    args.set("q", TensorRef::contiguous(q.data(), DType::kBF16, qs, dev));
    args.set("k", TensorRef::contiguous(k.data(), DType::kBF16, kvs, dev));
    args.set("v", TensorRef::contiguous(v.data(), DType::kBF16, kvs, dev));
    args.set("o", TensorRef::contiguous(o.data(), DType::kBF16, qs, dev));
    args.set("lse", TensorRef::contiguous(lse.data(), DType::kF32, {sh.B, sh.H, sh.S}, dev));
    for (bool causal : {true, false}) {
      std::string o_note = "o, lse from gqa_fwd";
      try {
        rt.op("gqa_fwd", {{"is_causal", causal}}).run(args, nullptr);
      } catch (const Error& e) {
        o_note = "o random, lse = 10 (gqa_fwd unavailable)";
        KvWriteProblem::fill(o, pattern);
        std::vector<float> lse_host(static_cast<size_t>(sh.B * sh.H * sh.S), 10.f);
        upload(lse, lse_host);
      }
      TensorArgs bargs = args;
      bargs.set("do", TensorRef::contiguous(dout.data(), DType::kBF16, qs, dev));
      bargs.set("dq", TensorRef::contiguous(dq.data(), DType::kBF16, qs, dev));
      bargs.set("dk", TensorRef::contiguous(dk.data(), DType::kBF16, kvs, dev));
      bargs.set("dv", TensorRef::contiguous(dv.data(), DType::kBF16, kvs, dev));
      const double pairs = causal ? sh.S * (sh.S + 1) / 2.0 : double(sh.S) * sh.S;
      const double flops = 2.5 * 4.0 * sh.B * sh.H * pairs * sh.D;
      for (const char* variant : {"auto", "portable", "deterministic"}) {
        const std::string what = fmt::format("gqa_bwd bf16 B{} S{} H{}/{} D{} {} {}", sh.B, sh.S, sh.H, sh.H_kv,
                                             sh.D, causal ? "causal" : "full", variant);
        Config cfg = {{"is_causal", causal}};
        if (std::string(variant) == "portable") cfg.set("backend", std::string("portable"));
        if (std::string(variant) == "deterministic") cfg.set("deterministic", true);
        Plan plan;
        try {
          plan = rt.op("gqa_bwd", cfg).plan(bargs);
        } catch (const Error& e) {
          rows.push_back({what, "error", e.what()});
          continue;
        }
        const double ms = time_ms(3, a.reps, [&] { plan.execute(bargs, nullptr); });
        const double tflops = flops / (ms * 1e-3) / 1e12;
        rows.push_back({what, fmt::format("{:.1f} TF/s", tflops),
                        fmt::format("{:.3f} ms, {}; {}", ms, o_note,
                                    plan.describe().substr(plan.describe().find(": ") + 2))});
        out["gqa_bwd"][what] = tflops;
      }
    }
  }
}

// lightning_indexer on the shapes: bf16, B = 1, H = 64, D = 128, topk = 2048, T = S, causal
// (and one full shape; topk 512 and 16 at 32k show what the selection costs). TFLOP/s of the score MMAs (2 T S H D, halved for causal) and the fraction of the
// 801 TFLOP/s bf16 dense ceiling (GPU.md).
void lightning_indexer_bench(std::vector<Row>& rows, Runtime& rt, const BenchArgs& a, nlohmann::json& out) {
  struct Shape {
    int64_t T, H, D, topk;
    bool causal;
  };
  const Shape shapes[] = {{8192, 64, 128, 2048, true}, {32768, 64, 128, 2048, true}, {8192, 64, 128, 2048, false},
                          {32768, 64, 128, 512, true}, {32768, 64, 128, 16, true}};
  const Device dev{DeviceKind::kCUDA, 0};
  for (const auto& sh : shapes) {
    const int64_t T = sh.T, S = sh.T;
    const size_t q_bytes = static_cast<size_t>(T * sh.H * sh.D * 2), k_bytes = static_cast<size_t>(S * sh.D * 2);
    const size_t w_bytes = static_cast<size_t>(T * sh.H * 2), o_bytes = static_cast<size_t>(T * sh.topk * 4);
    DeviceBuffer q(q_bytes), k(k_bytes), w(w_bytes), o(o_bytes);
    std::mt19937_64 rng(11);
    std::normal_distribution<float> nd(0.f, 1.f);
    const std::vector<uint8_t> pattern = bf16_pattern(std::min<size_t>(q_bytes, 32ull << 20), rng, nd);
    KvWriteProblem::fill(q, pattern);
    KvWriteProblem::fill(k, pattern);
    KvWriteProblem::fill(w, pattern);
    TensorArgs args;
    args.set("q", TensorRef::contiguous(q.data(), DType::kBF16, {1, T, sh.H, sh.D}, dev));
    args.set("k", TensorRef::contiguous(k.data(), DType::kBF16, {1, S, sh.D}, dev));
    args.set("weights", TensorRef::contiguous(w.data(), DType::kBF16, {1, T, sh.H}, dev));
    args.set("indices", TensorRef::contiguous(o.data(), DType::kI32, {1, T, sh.topk}, dev));
    const std::string what = fmt::format("lightning_indexer bf16 T{} H{} D{} topk{} {}", T, sh.H, sh.D, sh.topk,
                                         sh.causal ? "causal" : "full");
    Plan plan;
    try {
      plan = rt.op("lightning_indexer", {{"topk", sh.topk}, {"causal", sh.causal}}).plan(args);
    } catch (const Error& e) {
      rows.push_back({what, "error", e.what()});
      continue;
    }
    const double ms = time_ms(2, a.reps, [&] { plan.execute(args, nullptr); });
    const double pairs = sh.causal ? T * (T + 1) / 2.0 : double(T) * S;
    const double tflops = 2.0 * pairs * sh.H * sh.D / (ms * 1e-3) / 1e12;
    rows.push_back({what, fmt::format("{:.3f} ms", ms),
                    fmt::format("{:.1f} TF/s score MMAs, {:.1f}% of 801; {}", tflops, 100 * tflops / 801,
                                plan.describe().substr(plan.describe().find(": ") + 2))});
    out["lightning_indexer"][what] = {{"ms", ms}, {"tflops", tflops}};
  }
}

// bsa_fwd / bsa_fp8_fwd on the block-sparse issue shapes: bf16 BHSD, B=1, H=32 (MHA), S=16384, D=128,
// every query block attending to 16 of 128 key blocks of 128 tokens, or 32 of 256 blocks of 64 (random
// distinct blocks per row, fixed count). TFLOP/s effective: 4 * visible pairs * D (bs 128 and 64 give
// the same 2048 visible keys per row).
void bsa_bench(std::vector<Row>& rows, Runtime& rt, const BenchArgs& a, nlohmann::json& out) {
  struct Shape {
    int64_t B, H, S, D, bs, K;
  };
  const Shape shapes[] = {{1, 32, 16384, 128, 128, 16}, {1, 32, 16384, 128, 64, 32}};
  const Device dev{DeviceKind::kCUDA, 0};
  for (const auto& sh : shapes) {
    const int64_t N = sh.S / sh.bs;
    const size_t t_bytes = static_cast<size_t>(sh.B * sh.H * sh.S * sh.D * 2);
    DeviceBuffer q(t_bytes), k(t_bytes), v(t_bytes), o(t_bytes);
    DeviceBuffer lse(static_cast<size_t>(sh.B * sh.H * sh.S * 4)), index(static_cast<size_t>(sh.B * sh.H * N * sh.K * 4));
    std::mt19937_64 rng(13);
    std::normal_distribution<float> nd(0.f, 1.f);
    const std::vector<uint8_t> pattern = bf16_pattern(std::min<size_t>(t_bytes, 32ull << 20), rng, nd);
    for (DeviceBuffer* b : {&q, &k, &v}) KvWriteProblem::fill(*b, pattern);
    upload(index, random_block_index(rng, sh.B * sh.H * N, N, sh.K));
    const std::vector<int64_t> qs = {sh.B, sh.H, sh.S, sh.D};
    TensorArgs args;
    args.set("q", TensorRef::contiguous(q.data(), DType::kBF16, qs, dev));
    args.set("k", TensorRef::contiguous(k.data(), DType::kBF16, qs, dev));
    args.set("v", TensorRef::contiguous(v.data(), DType::kBF16, qs, dev));
    args.set("q2k_block_index", TensorRef::contiguous(index.data(), DType::kI32, {sh.B, sh.H, N, sh.K}, dev));
    args.set("o", TensorRef::contiguous(o.data(), DType::kBF16, qs, dev));
    const double pairs = double(sh.B) * sh.H * sh.S * sh.K * sh.bs;
    double bf16_ms = 0;  // bsa_fwd's time on this shape, for bsa_fp8_fwd's speed-up row
    for (const char* op : {"bsa_fwd", "bsa_fp8_fwd"}) {
      const bool fp8 = std::string(op) == "bsa_fp8_fwd";
      if (fp8 && sh.bs != 64) continue;  // bsa_fp8_fwd is blk64 only
      TensorArgs call = args;
      if (!fp8) call.set("lse", TensorRef::contiguous(lse.data(), DType::kF32, {sh.B, sh.H, sh.S}, dev));
      Config cfg = {{"block_sparse_num", std::int64_t(sh.K)}};
      if (!fp8) cfg.set("sparse_block_size", std::int64_t(sh.bs));
      const std::string what = fmt::format("{} bf16 B{} H{} S{} D{} bs{} K{}/{}", op, sh.B, sh.H, sh.S, sh.D, sh.bs, sh.K, N);
      Plan plan;
      try {
        plan = rt.op(op, cfg).plan(call);
      } catch (const Error& e) {
        rows.push_back({what, "error", e.what()});
        continue;
      }
      const double ms = time_ms(3, a.reps, [&] { plan.execute(call, nullptr); });
      const double tflops = 4.0 * pairs * sh.D / (ms * 1e-3) / 1e12;
      rows.push_back({what, fmt::format("{:.1f} TF/s", tflops),
                      fmt::format("{:.3f} ms, {}", ms, plan.describe().substr(plan.describe().find(": ") + 2))});
      out["bsa"][what] = tflops;
      if (!fp8) bf16_ms = ms;
      if (fp8 && bf16_ms > 0) {
        const std::string su = fmt::format("bsa_fp8_fwd speed-up over bsa_fwd B{} H{} S{} D{} bs{} K{}/{}", sh.B, sh.H,
                                           sh.S, sh.D, sh.bs, sh.K, N);
        rows.push_back({su, fmt::format("{:.2f}x", bf16_ms / ms),
                        fmt::format("{:.3f} ms (bf16) / {:.3f} ms (fp8, quantisation pre-pass included)", bf16_ms, ms)});
        out["bsa"][su] = bf16_ms / ms;
      }
    }
  }
}

bool wants(const BenchArgs& a, const char* suite) {
  return a.suites.empty() || std::find(a.suites.begin(), a.suites.end(), suite) != a.suites.end();
}

}  // namespace

// tools/cli/bench_fp8_indexer.cpp: the fp8_lightning_indexer and topk_select suites.
void indexer_benches(Runtime& rt, int reps, bool fp8, bool topk, std::vector<std::array<std::string, 3>>& rows,
                     nlohmann::json& out);
// tools/cli/bench_mla.cpp: the mla_decode and dsa_decode suites (rt == nullptr: no GPU, rows "skipped").
void mla_benches(Runtime* rt, int reps, bool mla, bool dsa, const std::string& no_gpu,
                 std::vector<std::array<std::string, 3>>& rows, nlohmann::json& out);

namespace {

int run_bench(const BenchArgs& a) {
  if (!a.probe.empty()) return probe(a.probe);
  std::vector<Row> rows;
  nlohmann::json out;
  const auto& drv = jit::CudaDriver::get();
  const bool gpu = drv.available() && drv.device_count() > 0;
  if (wants(a, "runtime")) {
    cold_compile(rows);
    {
      // Make sure the probe's kernels are cached, then measure a fresh process loading one.
      Runtime rt;
      for (const auto& spec : tools::warmup_matrix("paged_kv_write", tools::default_arch(rt)))
        tools::compile(rt, spec);
    }
    fresh_process_load(rows, gpu);
  }
  if (gpu) {
    drv.bind_device(0);
    Runtime rt;
    if (wants(a, "runtime")) {
      KvWriteProblem small(64, 8, DType::kBF16);
      plan_hit(rows, rt, small.args, Config{});
      execute_overhead(rows, rt);
    }
    if (wants(a, "paged_kv_write")) kv_write_bandwidth(rows, rt, a, out);
    if (wants(a, "gqa")) gqa_bench(rows, rt, a, out);
    if (wants(a, "lightning_indexer")) lightning_indexer_bench(rows, rt, a, out);
    if (wants(a, "gqa_bwd")) gqa_bwd_bench(rows, rt, a, out);
    if (wants(a, "bsa_bwd")) bsa_bwd_bench(rows, rt, a, out);
    if (wants(a, "bsa")) bsa_bench(rows, rt, a, out);
    if (wants(a, "fp8_lightning_indexer") || wants(a, "topk_select")) {
      std::vector<std::array<std::string, 3>> r3;
      indexer_benches(rt, a.reps, wants(a, "fp8_lightning_indexer"), wants(a, "topk_select"), r3, out);
      for (auto& r : r3) rows.push_back({r[0], r[1], r[2]});
    }
    if (wants(a, "mla_decode") || wants(a, "dsa_decode")) {
      std::vector<std::array<std::string, 3>> r3;
      mla_benches(&rt, a.reps, wants(a, "mla_decode"), wants(a, "dsa_decode"), "", r3, out);
      for (auto& r : r3) rows.push_back({r[0], r[1], r[2]});
    }
  } else if (!a.suites.empty() && (wants(a, "mla_decode") || wants(a, "dsa_decode"))) {
    // Asked for by name without a GPU: each case a "skipped" row with its FLOP and byte counts.
    std::vector<std::array<std::string, 3>> r3;
    mla_benches(nullptr, a.reps, wants(a, "mla_decode"), wants(a, "dsa_decode"),
                drv.available() ? "no device" : drv.unavailable_reason(), r3, out);
    for (auto& r : r3) rows.push_back({r[0], r[1], r[2]});
  }
  if (!gpu && wants(a, "runtime")) {
    // Without a GPU, plan() on the reference path still measures validation + signature + lookup.
    Runtime rt;
    std::vector<uint16_t> k(64 * 8 * 128), pool(8 * 16 * 8 * 128);
    std::vector<int64_t> slots(64);
    std::iota(slots.begin(), slots.end(), 0);
    TensorArgs args;
    args.set("k", TensorRef::contiguous(k.data(), DType::kBF16, {64, 8, 128}, {}));
    args.set("v", TensorRef::contiguous(k.data(), DType::kBF16, {64, 8, 128}, {}));
    args.set("k_pages", TensorRef::contiguous(pool.data(), DType::kBF16, {8, 16, 8, 128}, {}));
    args.set("v_pages", TensorRef::contiguous(pool.data(), DType::kBF16, {8, 16, 8, 128}, {}));
    args.set("slot_mapping", TensorRef::contiguous(slots.data(), DType::kI64, {64}, {}));
    plan_hit(rows, rt, args, Config{{"impl", "reference"}});
    rows.push_back({"GPU figures", "skipped", drv.available() ? "no device" : drv.unavailable_reason()});
  }
  size_t w0 = 0, w1 = 0;
  for (const auto& r : rows) w0 = std::max(w0, r.what.size()), w1 = std::max(w1, r.value.size());
  fmt::print("\n{:<{}}  {:>{}}  {}\n", "measure", w0, "value", w1, "note");
  for (const auto& r : rows) {
    fmt::print("{:<{}}  {:>{}}  {}\n", r.what, w0, r.value, w1, r.note);
    out["rows"].push_back({{"what", r.what}, {"value", r.value}, {"note", r.note}});
  }
  if (!a.json_out.empty()) std::ofstream(a.json_out) << out.dump(2) << "\n";
  return 0;
}

}  // namespace

void add_bench_command(CLI::App& app) {
  auto args = std::make_shared<BenchArgs>();
  auto* cmd = app.add_subcommand("bench", "Measure compile/load/plan/execute costs and op bandwidth (GPU figures need a GPU)");
  cmd->add_option("--suite", args->suites, "runtime, paged_kv_write, gqa, gqa_bwd, bsa, bsa_bwd, lightning_indexer, fp8_lightning_indexer, topk_select, mla_decode, dsa_decode (repeatable; default: all)")
      ->check(CLI::IsMember({"runtime", "paged_kv_write", "gqa", "gqa_bwd", "bsa", "bsa_bwd", "lightning_indexer",
                                 "fp8_lightning_indexer", "topk_select", "mla_decode", "dsa_decode"}));
  cmd->add_option("--json", args->json_out, "Also write the figures as JSON here");
  add_cache_dir_option(cmd);
  cmd->add_option("--reps", args->reps, "Timed repetitions (median reported)");
  cmd->add_option("--gib", args->gib, "GiB of k+v tokens for the paged_kv_write bandwidth run");
  cmd->add_option("--backend", args->backend, "backend of the gqa suite's plans (auto, portable, hopper; default auto)")
      ->check(CLI::IsMember({"auto", "portable", "hopper"}));
  cmd->add_option("--probe", args->probe, "(internal) fresh-process load probe: disk or gpu")->group("");
  cmd->callback([args] {
    int rc = run_bench(*args);
    if (rc) throw CLI::RuntimeError(rc);
  });
}

}  // namespace attnjit::cli
