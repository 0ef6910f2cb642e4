// `attnjit test FILES...`: run JSON test cases. On a GPU: the kernel and the CPU reference on the same
// random inputs, compared; without one: the case's kernels compiled with NVRTC and the reference
// checked against golden values where the case carries them.
#include <fmt/format.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <fstream>
#include <limits>
#include <optional>
#include <algorithm>
#include <set>
#include <thread>

#include "attnjit/runtime.hpp"
#include "cli_commands.hpp"
#include "device_buffer.hpp"
#include "runtime/tools_facade.hpp"
#include "test_case.hpp"
#include "topk_check.hpp"

namespace attnjit::cli {

namespace {

enum class Verdict { kPass, kFail, kSkip };

struct Outcome {
  Verdict verdict = Verdict::kPass;
  std::string detail;
  double worst_rel = 0;  // largest rel_l2 seen in the case
};

struct TestArgs {
  std::vector<std::string> files;
  std::string filter;
  bool no_gpu = false;
  bool verbose = false;
  int jobs = 0;
  std::string json_out;   // --json FILE: every case's verdict and detail, and the totals
  std::string junit_out;  // --junit FILE: JUnit XML for CI dashboards
};

// Characters XML text and attributes cannot hold as they are.
std::string xml_escape(std::string_view s) {
  std::string out;
  for (char ch : s) {
    switch (ch) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default:
        if (static_cast<unsigned char>(ch) < 0x20 && ch != '\n' && ch != '\t') out += ' ';
        else out += ch;
    }
  }
  return out;
}

// The public API takes a Config; the cases hold nlohmann JSON.
Config as_config(const nlohmann::json& j) { return Config::parse(j.dump()); }

// Compiles every kernel the cases select, `jobs` at a time, before any case runs (cases then find
// them in memory). A case whose call is invalid is skipped here; its own run reports it.
void precompile(Runtime& rt, const std::vector<TestCase>& cases, const std::string& arch, int jobs) {
  std::vector<jit::KernelSpec> specs;
  std::set<std::string> seen;
  for (const auto& c : cases) {
    if (c.expect_error) continue;
    try {
      for (auto& s : tools::kernels_for(rt, c.op, with_impl(c.config, "kernel"), descriptor_args(c), arch))
        if (seen.insert(s.describe()).second) specs.push_back(std::move(s));
    } catch (const std::exception&) {
    }
  }
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t i = next++; i < specs.size(); i = next++) {
      try {
        tools::compile(rt, specs[i]);
      } catch (const std::exception&) {
      }
    }
  };
  std::vector<std::thread> threads;
  for (int j = 0; j < std::max(1, jobs); ++j) threads.emplace_back(worker);
  for (auto& t : threads) t.join();
}

// Checks a raised error against the case's expectation; returns an empty string on a match.
std::string match_error(const TestCase& c, const std::exception* e, bool is_unsupported) {
  const ExpectedError& x = *c.expect_error;
  if (!e) return fmt::format("expected a '{}' error, got success", x.category);
  const std::string msg = e->what();
  // SPEC.md §1.11: every rejection of an op call starts with "<op>: ".
  if (msg.rfind(c.op + ": ", 0) != 0) return fmt::format("expected the message to start with '{}: ', got: {}", c.op, msg);
  if (x.category == "unsupported") {
    if (!is_unsupported) return fmt::format("expected Unsupported, got: {}", msg);
  } else if (msg.find(fmt::format(": {}: ", x.category)) == std::string::npos) {
    return fmt::format("expected category '{}', got: {}", x.category, msg);
  }
  if (!x.contains.empty() && msg.find(x.contains) == std::string::npos)
    return fmt::format("expected the message to contain '{}', got: {}", x.contains, msg);
  return {};
}

template <typename F>
std::string expect_rejection(const TestCase& c, F&& call) {
  try {
    call();
  } catch (const Unsupported& e) {
    return match_error(c, &e, true);
  } catch (const InvalidArgument& e) {
    return match_error(c, &e, false);
  }
  return match_error(c, nullptr, false);
}

std::string unchanged(const TestCase& c, const std::vector<HostTensor>& before, const std::vector<HostTensor>& after,
                      const char* where) {
  for (size_t i = 0; i < before.size(); ++i) {
    std::string diff;
    if (c.tensors[i].output && !bitwise_equal(after[i], before[i], &diff))
      return fmt::format("{}: rejected call wrote {}: {}", where, c.tensors[i].name, diff);
  }
  return {};
}

std::vector<HostTensor> make_inputs(const TestCase& c) {
  std::vector<HostTensor> host;
  for (const auto& t : c.tensors) host.push_back(make_host_tensor(t, c.seed));
  return host;
}

// The case's "setup" entries: another op's CPU reference run on (and writing into) the case's tensors.
void apply_setup(Runtime& rt, const TestCase& c, std::vector<HostTensor>& host) {
  if (c.setup.is_null()) return;
  for (const auto& s : c.setup) {
    TensorArgs args;
    for (const auto& [arg, tn] : s["tensors"].items())
      for (size_t i = 0; i < c.tensors.size(); ++i)
        if (c.tensors[i].name == tn.get<std::string>()) args.set(arg, host[i].ref(host[i].bytes.data(), {}));
    rt.op(s["op"].get<std::string>(), as_config(with_impl(s.value("config", nlohmann::json::object()), "reference"))).run(args);
  }
}

TensorArgs host_args(const TestCase& c, std::vector<HostTensor>& host) {
  TensorArgs args;
  for (size_t i = 0; i < host.size(); ++i) args.set(c.tensors[i].name, host[i].ref(host[i].bytes.data(), {}));
  return args;
}

// Compares `got` against `want` for every compared tensor; appends to `o` and returns false on a miss.
// `inputs` are the case's host inputs (for the top-k scorers).
bool compare_outputs(const TestCase& c, const std::vector<HostTensor>& inputs, const std::vector<HostTensor>& got,
                     const std::vector<HostTensor>& want, const char* what, Outcome& o,
                     const std::vector<HostTensor>* want_abs = nullptr) {
  for (size_t i = 0; i < c.tensors.size(); ++i) {
    auto it = c.compare.find(c.tensors[i].name);
    if (it == c.compare.end()) continue;
    if (it->second.mode == "topk") {
      // SPEC.md §1.9: both sides must satisfy the rule against the op's scorer (raw order and tie
      // choices may differ between them).
      auto scorer = make_topk_scorer(c, inputs, c.tensors[i].name);
      TopkCheckOptions opts;
      opts.ascending = it->second.ascending;
      const TopkCheckResult g = check_topk(*scorer, got[i], opts);
      if (!g.ok) {
        o.detail = fmt::format("{}: top-k rule: {}", what, g.detail);
        return false;
      }
      const TopkCheckResult w = check_topk(*scorer, want[i], opts);
      if (!w.ok) {
        o.detail = fmt::format("{}: top-k rule (expected side): {}", what, w.detail);
        return false;
      }
      continue;
    }
    if (it->second.mode == "bitwise") {
      std::string diff;
      if (!bitwise_equal(got[i], want[i], &diff)) {
        o.detail = fmt::format("{}: {} not bitwise equal: {}", what, c.tensors[i].name, diff);
        return false;
      }
    } else if (it->second.mode == "ulp") {
      std::string where;
      const double err = ulp_error(got[i], want[i], &where);
      if (!(err <= it->second.max_ulp)) {
        o.detail = fmt::format("{}: {} ulp error {:.3g} > max_ulp {:g} ({})", what, c.tensors[i].name, err,
                               it->second.max_ulp, where);
        return false;
      }
    } else if (it->second.mode == "masked_nse") {
      std::string where;
      const double nse = masked_nse(got[i], want[i], &where);
      o.worst_rel = std::max(o.worst_rel, std::sqrt(nse));
      if (!(nse <= it->second.tol)) {
        o.detail = fmt::format("{}: {} normalised squared error {:.3e} > tol {:.1e}{}", what, c.tensors[i].name, nse,
                               it->second.tol, where.empty() ? "" : " (" + where + ")");
        return false;
      }
    } else if (it->second.mode == "grad") {
      if (!want_abs) throw std::runtime_error(fmt::format("{}: compare mode grad: no absolute-value reference", c.op));
      const double err = grad_rel_l2(got[i], want[i], (*want_abs)[i]);
      o.worst_rel = std::max(o.worst_rel, err);
      if (!(err <= it->second.tol)) {
        o.detail = fmt::format("{}: {} gradient error {:.3e} > tol {:.1e}", what, c.tensors[i].name, err, it->second.tol);
        return false;
      }
    } else if (it->second.mode == "lse") {
      std::string where;
      const double err = lse_error(got[i], want[i], &where);
      if (!(err <= 2e-3)) {
        o.detail = fmt::format("{}: {} lse error {:.3e} > 2e-3 ({})", what, c.tensors[i].name, err, where);
        return false;
      }
    } else {
      const double err = rel_l2(got[i], want[i]);
      o.worst_rel = std::max(o.worst_rel, err);
      if (!(err <= it->second.tol)) {
        o.detail = fmt::format("{}: {} rel_l2 {:.3e} > tol {:.1e}", what, c.tensors[i].name, err, it->second.tol);
        return false;
      }
      std::string where;
      if (!zeros_match(got[i], want[i], &where)) {
        o.detail = fmt::format("{}: {}: {}", what, c.tensors[i].name, where);
        return false;
      }
    }
  }
  return true;
}

Outcome run_error_case(Runtime& rt, const TestCase& c, bool gpu) {
  Outcome o;
  // Reference path, on host tensors.
  auto host = make_inputs(c);
  auto before = host;
  auto args = host_args(c, host);
  if (!c.gpu_only) {
    if (auto m = expect_rejection(c, [&] { rt.op(c.op, as_config(with_impl(c.config, "reference"))).run(args); }); !m.empty())
      return {Verdict::kFail, "reference: " + m};
    if (auto m = unchanged(c, before, host, "reference"); !m.empty()) return {Verdict::kFail, m};
  }
  if (gpu) {
    std::vector<DeviceBuffer> bufs;
    TensorArgs dargs;
    for (size_t i = 0; i < host.size(); ++i) {
      bufs.emplace_back(before[i].bytes.size());
      bufs.back().upload(before[i].bytes);
      dargs.set(c.tensors[i].name, before[i].ref(bufs.back().data(), {DeviceKind::kCUDA, 0}));
    }
    if (auto m = expect_rejection(c, [&] { rt.op(c.op, as_config(with_impl(c.config, "kernel"))).run(dargs); }); !m.empty())
      return {Verdict::kFail, "kernel: " + m};
    std::vector<HostTensor> after = before;
    for (size_t i = 0; i < host.size(); ++i) after[i].bytes = bufs[i].download(), after[i].bytes.resize(before[i].bytes.size());
    if (auto m = unchanged(c, before, after, "kernel"); !m.empty()) return {Verdict::kFail, m};
    o.detail = c.gpu_only ? "rejected by the kernel path" : "rejected by reference and kernel";
  } else if (c.expect_error->category != "content") {
    // Without a GPU the kernel path's descriptor checks still run (content checks need device data).
    auto dargs = descriptor_args(c);
    if (auto m = expect_rejection(c, [&] {
          tools::kernels_for(rt, c.op, with_impl(c.config, "kernel"), dargs, tools::default_arch(rt));
        });
        !m.empty())
      return {Verdict::kFail, "kernel descriptors: " + m};
    o.detail = c.gpu_only ? "rejected by kernel descriptors" : "rejected by reference and kernel descriptors";
  } else if (c.gpu_only) {
    return {Verdict::kSkip, "no GPU: a content check of the kernel path needs device data"};
  } else {
    o.detail = "rejected by reference";
  }
  return o;
}

Outcome run_compare_case(Runtime& rt, const TestCase& c, bool gpu) {
  Outcome o;
  auto inputs = make_inputs(c);
  apply_setup(rt, c, inputs);
  // 1. Compile the kernels the call selects (this also runs the kernel path's descriptor checks).
  auto dargs = descriptor_args(c);
  const std::string arch = gpu ? tools::arch_for_device(rt, 0) : tools::default_arch(rt);
  std::vector<jit::KernelSpec> specs;
  std::vector<std::string> checks;
  if (!c.kernel_unsupported.empty()) {
    // A configuration only the reference serves: the kernel impl must say so, naming the rule.
    try {
      tools::kernels_for(rt, c.op, with_impl(c.config, "kernel"), dargs, arch);
      return {Verdict::kFail, fmt::format("expected the kernel impl to refuse the call (Unsupported containing \"{}\"), "
                                          "but it selected kernels", c.kernel_unsupported)};
    } catch (const Unsupported& e) {
      if (std::string(e.what()).find(c.kernel_unsupported) == std::string::npos)
        return {Verdict::kFail, fmt::format("the kernel impl's Unsupported error lacks \"{}\": {}", c.kernel_unsupported,
                                            e.what())};
    }
    checks.push_back("kernel impl refuses it (Unsupported)");
  } else {
    specs = tools::kernels_for(rt, c.op, with_impl(c.config, "kernel"), dargs, arch);
  }
  for (const auto& s : specs) tools::compile(rt, s);
  // 2. The CPU reference.
  auto ref = inputs;
  auto rargs = host_args(c, ref);
  rt.op(c.op, as_config(with_impl(c.config, "reference"))).run(rargs);
  // Compare mode "grad" measures against the reference on absolute values (SPEC.md §1.12).
  std::optional<std::vector<HostTensor>> ref_abs;
  if (std::any_of(c.compare.begin(), c.compare.end(), [](const auto& kv) { return kv.second.mode == "grad"; })) {
    if (c.op != "gqa_bwd")
      throw std::runtime_error(fmt::format("{}: compare mode grad: the op has no absolute-value reference", c.op));
    ref_abs = inputs;
    tools::gqa_bwd_reference_abs(c.config, host_args(c, *ref_abs));
  }
  const std::vector<HostTensor>* want_abs = ref_abs ? &*ref_abs : nullptr;
  if (!c.golden.is_null()) {
    std::vector<HostTensor> golden = ref;
    for (size_t i = 0; i < c.tensors.size(); ++i)
      if (c.golden.contains(c.tensors[i].name)) golden[i] = golden_tensor(c.tensors[i], c.golden[c.tensors[i].name]);
    if (!compare_outputs(c, inputs, ref, golden, "reference vs golden", o, want_abs)) return {Verdict::kFail, o.detail};
    checks.push_back("reference = golden");
  }
  if (c.repeat && !gpu) {
    auto again = inputs;
    auto aargs = host_args(c, again);
    rt.op(c.op, as_config(with_impl(c.config, "reference"))).run(aargs);
    for (size_t i = 0; i < c.tensors.size(); ++i) {
      std::string diff;
      if (c.tensors[i].output && !bitwise_equal(again[i], ref[i], &diff))
        return {Verdict::kFail, fmt::format("reference: a repeated call changed {}: {}", c.tensors[i].name, diff)};
    }
    checks.push_back("repeated reference call byte-identical");
  }
  // 3. The kernel, on the GPU, on the same inputs.
  if (gpu && c.kernel_unsupported.empty()) {
    std::vector<DeviceBuffer> bufs;
    TensorArgs args;
    for (size_t i = 0; i < inputs.size(); ++i) {
      bufs.emplace_back(inputs[i].bytes.size());
      bufs.back().upload(inputs[i].bytes);
      args.set(c.tensors[i].name, inputs[i].ref(bufs.back().data(), {DeviceKind::kCUDA, 0}));
    }
    const auto& drv = jit::CudaDriver::get();
    try {
      rt.op(c.op, as_config(with_impl(c.config, "kernel"))).run(args, nullptr);
    } catch (const Unsupported& e) {
      // An op with only its CPU reference so far: the case is reported, not passed.
      if (std::string(e.what()).find("no GPU kernel is built yet") != std::string::npos)
        return {Verdict::kSkip, fmt::format("no kernel to compare: {}", e.what())};
      throw;
    }
    drv.check(drv.cuStreamSynchronize(nullptr), "cuStreamSynchronize after the kernel");
    std::vector<HostTensor> got = inputs;
    for (size_t i = 0; i < inputs.size(); ++i) {
      got[i].bytes = bufs[i].download();
      got[i].bytes.resize(inputs[i].bytes.size());
    }
    if (!compare_outputs(c, inputs, got, ref, "kernel vs reference", o, want_abs)) return {Verdict::kFail, o.detail};
    if (c.repeat) {
      // Outputs poisoned again, the same inputs, a second call: byte-identical outputs.
      for (size_t i = 0; i < inputs.size(); ++i)
        if (c.tensors[i].output) bufs[i].upload(inputs[i].bytes);
      rt.op(c.op, as_config(with_impl(c.config, "kernel"))).run(args, nullptr);
      drv.check(drv.cuStreamSynchronize(nullptr), "cuStreamSynchronize after the repeated kernel");
      for (size_t i = 0; i < inputs.size(); ++i) {
        if (!c.tensors[i].output) continue;
        HostTensor again = got[i];
        again.bytes = bufs[i].download();
        again.bytes.resize(inputs[i].bytes.size());
        std::string diff;
        if (!bitwise_equal(again, got[i], &diff))
          return {Verdict::kFail, fmt::format("kernel: a repeated call changed {}: {}", c.tensors[i].name, diff)};
      }
      checks.push_back("repeated kernel call byte-identical");
    }
    checks.push_back(fmt::format("kernel = reference{}", o.worst_rel > 0 ? fmt::format(" (rel_l2 {:.2e})", o.worst_rel) : ""));
  } else if (c.golden.is_null()) {
    return {Verdict::kSkip, fmt::format("no GPU: {} kernel(s) compiled and the reference ran; the comparison needs a GPU",
                                        specs.size())};
  }
  for (const auto& s : checks) o.detail += (o.detail.empty() ? "" : "; ") + s;
  return o;
}

int run_tests(const TestArgs& a) {
  Runtime rt;
  const auto& drv = jit::CudaDriver::get();
  const bool gpu = !a.no_gpu && drv.available() && drv.device_count() > 0;
  if (gpu) drv.bind_device(0);
  fmt::print("attnjit test: {} ({})\n", gpu ? "GPU run: kernels against the CPU reference" : "no GPU: compile + golden",
             gpu ? tools::arch_for_device(rt, 0) : (drv.available() ? "no device" : drv.unavailable_reason()));
  int passed = 0, failed = 0, skipped = 0;
  double worst = 0;
  std::string worst_case;
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<TestCase> cases;
  size_t loaded = 0;
  for (const auto& file : a.files) {
    try {
      for (auto& c : load_test_cases(file)) {
        ++loaded;
        if (a.filter.empty() || c.name.find(a.filter) != std::string::npos) cases.push_back(std::move(c));
      }
    } catch (const std::exception& e) {
      fmt::print("FAIL {}: {}\n", file, e.what());
      ++failed;
    }
  }
  if (!a.filter.empty() && cases.empty() && failed == 0) {
    // A filter that matches nothing is a mistake (a misspelt name), not a pass.
    fmt::print(stderr, "test: --filter '{}' selects none of the {} cases in the given files\n", a.filter, loaded);
    return 1;
  }
  const int jobs = a.jobs > 0 ? a.jobs : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  precompile(rt, cases, gpu ? tools::arch_for_device(rt, 0) : tools::default_arch(rt), jobs);
  struct Record {
    std::string name, verdict, detail;
    double seconds;
  };
  std::vector<Record> records;
  {
    for (const auto& c : cases) {
      Outcome o;
      const auto c0 = std::chrono::steady_clock::now();
      try {
        o = c.expect_error ? run_error_case(rt, c, gpu) : run_compare_case(rt, c, gpu);
      } catch (const std::exception& e) {
        o = {Verdict::kFail, fmt::format("unexpected error: {}", e.what())};
      }
      records.push_back({c.name, o.verdict == Verdict::kPass ? "pass" : o.verdict == Verdict::kFail ? "fail" : "skip",
                         o.detail, std::chrono::duration<double>(std::chrono::steady_clock::now() - c0).count()});
      if (o.worst_rel > worst) {
        worst = o.worst_rel;
        worst_case = c.name;
      }
      switch (o.verdict) {
        case Verdict::kPass:
          ++passed;
          if (a.verbose) fmt::print("PASS {}  {}\n", c.name, o.detail);
          break;
        case Verdict::kFail:
          ++failed;
          fmt::print("FAIL {}  {}\n", c.name, o.detail);
          break;
        case Verdict::kSkip:
          ++skipped;
          fmt::print("SKIP {}  {}\n", c.name, o.detail);
          break;
      }
    }
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!worst_case.empty()) fmt::print("worst rel_l2 error: {:.3e} ({})\n", worst, worst_case);
  fmt::print("time: {:.1f} s\n", secs);
  if (skipped) fmt::print("{} passed, {} failed, {} skipped\n", passed, failed, skipped);
  else fmt::print("{} passed, {} failed\n", passed, failed);
  // Files that did not load count as failures without a case record: they are named in the totals.
  const int file_failures = failed - static_cast<int>(std::count_if(records.begin(), records.end(),
                                                                   [](const Record& r) { return r.verdict == "fail"; }));
  if (!a.json_out.empty()) {
    nlohmann::json j = {{"gpu", gpu}, {"passed", passed}, {"failed", failed}, {"skipped", skipped},
                        {"files_not_loaded", file_failures}, {"seconds", secs}, {"cases", nlohmann::json::array()}};
    if (!worst_case.empty()) j["worst"] = {{"rel_l2", worst}, {"case", worst_case}};
    for (const auto& r : records)
      j["cases"].push_back({{"name", r.name}, {"verdict", r.verdict}, {"detail", r.detail}, {"seconds", r.seconds}});
    std::ofstream(a.json_out) << j.dump(1) << "\n";
  }
  if (!a.junit_out.empty()) {
    std::ofstream x(a.junit_out);
    x << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      << fmt::format("<testsuite name=\"attnjit test\" tests=\"{}\" failures=\"{}\" skipped=\"{}\" time=\"{:.3f}\">\n",
                     records.size() + file_failures, failed, skipped, secs);
    for (const auto& r : records) {
      x << fmt::format("  <testcase name=\"{}\" time=\"{:.3f}\"", xml_escape(r.name), r.seconds);
      if (r.verdict == "pass") {
        x << "/>\n";
      } else {
        x << fmt::format(">\n    <{} message=\"{}\"/>\n  </testcase>\n", r.verdict == "fail" ? "failure" : "skipped",
                         xml_escape(r.detail));
      }
    }
    for (int i = 0; i < file_failures; ++i)
      x << "  <testcase name=\"(a case file that did not load)\"><failure message=\"see the output\"/></testcase>\n";
    x << "</testsuite>\n";
  }
  return failed ? 1 : 0;
}

}  // namespace

void add_test_command(CLI::App& app) {
  auto args = std::make_shared<TestArgs>();
  auto* cmd = app.add_subcommand("test", "Run JSON test cases (kernel vs CPU reference on a GPU; compile + golden without)");
  cmd->add_option("files", args->files, "JSON test case files")->required();
  cmd->add_option("--filter", args->filter, "Only cases whose name contains this (selecting none is an error)");
  cmd->add_option("--json", args->json_out, "Also write every case's verdict and the totals as JSON to this file");
  cmd->add_option("--junit", args->junit_out, "Also write JUnit XML to this file");
  add_cache_dir_option(cmd);
  cmd->add_flag("--no-gpu", args->no_gpu, "Do not use a GPU even if one is present");
  cmd->add_flag("-v,--verbose", args->verbose, "Print passing cases too");
  cmd->add_option("-j,--jobs", args->jobs, "Parallel kernel compiles before the cases run (default: number of cores)");
  cmd->callback([args] {
    int rc = run_tests(*args);
    if (rc) throw CLI::RuntimeError(rc);
  });
}

}  // namespace attnjit::cli
