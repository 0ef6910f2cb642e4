// `attnjit warmup`: compile the default kernel matrix of every op into the cache, in parallel; with
// `--from FILE...`, exactly the kernels the calls of those JSON case files select instead (a cache
// directory for a fleet that serves those calls with ATTNJIT_NO_JIT=1). With `--list`, print those kernels
// instead of compiling them.
#include <fmt/format.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include "attnjit/runtime.hpp"
#include "cli_commands.hpp"
#include "runtime/tools_facade.hpp"
#include "test_case.hpp"

namespace attnjit::cli {

namespace {

struct WarmupArgs {
  std::string arch;
  int jobs = 0;
  std::vector<std::string> ops;
  std::vector<std::string> from;  // JSON case files: warm the kernels of their calls
  bool list = false;              // print the kernels, compile nothing
};

// The distinct kernels the calls of the case files select on `arch` (cases that expect an error, or that the
// kernel impl must refuse, are not calls to serve). A file that does not load or a call the kernel impl
// cannot serve is printed (to `log`) and counted in `failed`.
std::vector<jit::KernelSpec> kernels_of_cases(Runtime& rt, const WarmupArgs& a, const std::string& arch, int& failed,
                                              std::FILE* log) {
  std::vector<jit::KernelSpec> specs;
  std::set<std::string> seen;
  size_t calls = 0;
  for (const auto& file : a.from) {
    std::vector<TestCase> cases;
    try {
      cases = load_test_cases(file);
    } catch (const std::exception& e) {
      fmt::print(log, "FAILED {}: {}\n", file, e.what());
      ++failed;
      continue;
    }
    for (const auto& c : cases) {
      if (c.expect_error || !c.kernel_unsupported.empty()) continue;
      if (!a.ops.empty() && std::find(a.ops.begin(), a.ops.end(), c.op) == a.ops.end()) continue;
      ++calls;
      try {
        for (auto& s : tools::kernels_for(rt, c.op, with_impl(c.config, "kernel"), descriptor_args(c), arch))
          if (seen.insert(s.describe()).second) specs.push_back(std::move(s));
      } catch (const std::exception& e) {
        fmt::print(log, "FAILED {}: {}\n", c.name, e.what());
        ++failed;
      }
    }
  }
  fmt::print(log, "warm-up: {} calls in {} files select {} kernels\n", calls, a.from.size(), specs.size());
  return specs;
}

// The default matrices of the ops `--op` names (all ops when it names none) for `arch`.
std::vector<jit::KernelSpec> matrix_kernels(const WarmupArgs& a, const std::string& arch) {
  for (const auto& name : a.ops) tools::warmup_matrix(name, arch);  // unknown names are an error
  std::vector<jit::KernelSpec> specs;
  for (auto& m : tools::warmup_matrices(arch)) {
    if (!a.ops.empty() && std::find(a.ops.begin(), a.ops.end(), m.op) == a.ops.end()) continue;
    for (auto& s : m.kernels) specs.push_back(std::move(s));
  }
  return specs;
}

// One `--list` line, tab-separated: the readable name with arch, the template file, the name expression and
// the static fields as key=value in the spec's order (what the cache key hashes besides op and versions).
std::string list_line(const jit::KernelSpec& s) {
  std::string line = fmt::format("{}\t{}\t{}\t", s.describe(), s.template_file, s.entry);
  for (size_t i = 0; i < s.fields.size(); ++i)
    line += fmt::format("{}{}={}", i ? " " : "", s.fields[i].first, s.fields[i].second);
  return line;
}

// `--list`: the kernels one arch's warm-up would compile, sorted, one a line on stdout; nothing is compiled.
// A runtime (which opens the cache directory) is made only where --from's calls or the default arch need one.
int list_warmup(const WarmupArgs& a) {
  std::optional<Runtime> rt;
  auto runtime = [&rt]() -> Runtime& {
    if (!rt) rt.emplace();
    return *rt;
  };
  const std::string arch = a.arch.empty() ? tools::default_arch(runtime()) : a.arch;
  int failed_calls = 0;
  const auto specs = a.from.empty() ? matrix_kernels(a, arch) : kernels_of_cases(runtime(), a, arch, failed_calls, stderr);
  std::vector<std::string> lines;
  for (const auto& s : specs) lines.push_back(list_line(s));
  std::sort(lines.begin(), lines.end());
  for (const auto& line : lines) fmt::print("{}\n", line);
  return failed_calls ? 1 : 0;
}

int run_warmup(const WarmupArgs& a) {
  if (a.list) return list_warmup(a);
  Runtime rt;
  const std::string arch = a.arch.empty() ? tools::default_arch(rt) : a.arch;
  int failed_calls = 0;
  auto specs = a.from.empty() ? matrix_kernels(a, arch) : kernels_of_cases(rt, a, arch, failed_calls, stdout);
  const int jobs = a.jobs > 0 ? a.jobs : std::max(1u, std::thread::hardware_concurrency());
  fmt::print("warm-up: {} kernels for {} with {} jobs into {}\n", specs.size(), arch, jobs,
             rt.options().cache_disabled ? std::string("(memory only)") : rt.options().resolved_cache_dir());
  jit::DiskCache* disk = tools::disk_cache(rt);
  if (disk) disk->sweep_stale();
  std::atomic<size_t> next{0};
  std::atomic<int> compiled{0}, hits{0}, failed{failed_calls}, not_persisted{0};
  std::atomic<size_t> done{0};
  std::mutex print_mutex;
  const auto t0 = std::chrono::steady_clock::now();
  auto worker = [&] {
    for (size_t i = next++; i < specs.size(); i = next++) {
      const auto k0 = std::chrono::steady_clock::now();
      std::string status, detail;
      try {
        auto k = tools::compile(rt, specs[i]);
        status = k->from_disk ? "hit" : "compiled";
        (k->from_disk ? hits : compiled)++;
        if (!k->from_disk && disk) {
          // NOTE: a publish that failed (read-only, full disk, a symlink in the way) only warns; the
          // warm-up's purpose is the entry on disk, so it counts what is missing there.
          std::error_code ec;
          const auto st = std::filesystem::symlink_status(disk->entry_dir(k->key.hex) / "manifest.json", ec);
          if (ec || !std::filesystem::is_regular_file(st)) {
            status = "compiled, NOT PERSISTED";
            not_persisted++;
          }
        }
      } catch (const std::exception& e) {
        status = "FAILED";
        detail = e.what();
        failed++;
      }
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - k0).count();
      std::lock_guard<std::mutex> g(print_mutex);
      fmt::print("[{:>4}/{}] {:<8} {:6.2f} s  {}\n", ++done, specs.size(), status, s, specs[i].describe());
      if (!detail.empty()) fmt::print("{}\n", detail);
    }
  };
  std::vector<std::thread> threads;
  for (int j = 0; j < jobs; ++j) threads.emplace_back(worker);
  for (auto& t : threads) t.join();
  const double total = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  fmt::print("\n  {:<12}{:>8}\n", "compiled", compiled.load());
  fmt::print("  {:<12}{:>8}\n", "cache hits", hits.load());
  fmt::print("  {:<12}{:>8}\n", "failed", failed.load());
  if (not_persisted.load())
    fmt::print("  {:<12}{:>8}\n", "not persisted", not_persisted.load());
  fmt::print("  {:<12}{:>8.2f}\n", "seconds", total);
  fmt::print("warmup {}: {} kernels, compiled {}, cache hits {}, failed {}, {:.2f} s\n", arch, specs.size(),
             compiled.load(), hits.load(), failed.load(), total);
  if (not_persisted.load()) {
    fmt::print(stderr, "warmup: could not persist {} of {} compiled kernels to {}{}; see the warnings above\n",
               not_persisted.load(), compiled.load(), disk->dir().string(), disk->writable() ? "" : " (read-only)");
  }
  return failed.load() || not_persisted.load() ? 1 : 0;
}

}  // namespace

void add_warmup_command(CLI::App& app) {
  auto args = std::make_shared<WarmupArgs>();
  auto* cmd = app.add_subcommand("warmup", "Compile every kernel the shipped ops can select into the cache");
  cmd->add_option("--arch", args->arch, "Target arch, or a comma-separated list (default: the GPU's, else sm_90a)")
      ->check([](const std::string& v) {
        parse_arch_list(v);
        return std::string();
      });
  cmd->add_option("-j,--jobs", args->jobs, "Parallel compiles (default: number of cores)");
  cmd->add_option("--op", args->ops, "Only these ops (repeatable, or comma-separated)")->delimiter(',');
  cmd->add_option("--from", args->from,
                  "JSON case files (the `attnjit test` format): warm exactly the kernels their calls select, "
                  "instead of the default matrix (repeatable)")
      ->check(CLI::ExistingFile);
  cmd->add_flag("--list", args->list,
                "Print the kernels instead of compiling them, sorted, one a line: name with arch, template file, "
                "name expression, fields as key=value (tab-separated)");
  add_cache_dir_option(cmd);
  cmd->callback([args] {
    int rc = 0;
    if (args->arch.empty()) {
      rc = run_warmup(*args);
    } else {
      for (const std::string& arch : parse_arch_list(args->arch)) {
        WarmupArgs one = *args;
        one.arch = arch;
        rc = std::max(rc, run_warmup(one));
      }
    }
    if (rc) throw CLI::RuntimeError(rc);
  });
}

}  // namespace attnjit::cli
