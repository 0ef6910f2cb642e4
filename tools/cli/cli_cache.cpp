// `attnjit cache ls|verify|prune|clear` and `attnjit info`.
#include <fmt/format.h>
#include <nvrtc.h>

#include <chrono>

#include "attnjit/attnjit.h"
#include "attnjit/runtime.hpp"
#include "cli_commands.hpp"
#include "runtime/tools_facade.hpp"

namespace attnjit::cli {

namespace {

jit::DiskCache& disk_of(Runtime& rt) {
  auto* disk = tools::disk_cache(rt);
  if (!disk) throw CacheError("the disk cache is disabled (ATTNJIT_CACHE_DISABLE)");
  return *disk;
}

std::string human_bytes(std::uint64_t b) {
  if (b >= (1ull << 30)) return fmt::format("{:.2f} GiB", b / double(1ull << 30));
  if (b >= (1ull << 20)) return fmt::format("{:.2f} MiB", b / double(1ull << 20));
  if (b >= (1ull << 10)) return fmt::format("{:.1f} KiB", b / double(1ull << 10));
  return fmt::format("{} B", b);
}

std::string age(std::filesystem::file_time_type t) {
  auto secs = std::chrono::duration_cast<std::chrono::seconds>(std::filesystem::file_time_type::clock::now() - t).count();
  if (secs < 120) return fmt::format("{} s ago", secs);
  if (secs < 7200) return fmt::format("{} min ago", secs / 60);
  if (secs < 172800) return fmt::format("{} h ago", secs / 3600);
  return fmt::format("{} d ago", secs / 86400);
}

std::int64_t age_seconds(std::filesystem::file_time_type t) {
  return std::chrono::duration_cast<std::chrono::seconds>(std::filesystem::file_time_type::clock::now() - t).count();
}

int cache_ls(bool json) {
  Runtime rt;
  auto& disk = disk_of(rt);
  auto entries = disk.list(false);
  std::uint64_t total = 0;
  if (json) {
    nlohmann::json j = {{"dir", disk.dir().string()}, {"entries", nlohmann::json::array()}};
    for (const auto& e : entries) {
      j["entries"].push_back({{"kernel", e.describe.empty() ? nullptr : nlohmann::json(e.describe)},
                              {"key", e.key},
                              {"bytes", e.bytes},
                              {"last_used_seconds_ago", age_seconds(e.last_used)}});
      total += e.bytes;
    }
    j["total_bytes"] = total;
    j["stale_directories"] = disk.count_stale();
    fmt::print("{}\n", j.dump(1));
    return 0;
  }
  fmt::print("{:<64}  {:<16}  {:>10}  {}\n", "kernel", "key", "size", "last used");
  for (const auto& e : entries) {
    fmt::print("{:<64}  {:<16}  {:>10}  {}\n", e.describe.empty() ? "(no manifest)" : e.describe, e.key.substr(0, 16),
               human_bytes(e.bytes), age(e.last_used));
    total += e.bytes;
  }
  fmt::print("{} entries, {} in {}\n", entries.size(), human_bytes(total), disk.dir().string());
  if (const auto stale = disk.count_stale())
    fmt::print("{} stale staging or doomed directories (older than {} s; warm-up, prune and clear remove them)\n",
               stale, jit::DiskCache::kStaleGrace.count());
  return 0;
}

int cache_verify(bool fix) {
  Runtime rt;
  auto& disk = disk_of(rt);
  int bad = 0;
  auto entries = disk.list(true);
  for (const auto& e : entries) {
    if (e.problem.empty()) continue;
    ++bad;
    const bool removing = fix && disk.writable();
    fmt::print("BAD {} ({}): {}{}\n", e.key.substr(0, 16), e.describe, e.problem, removing ? " -> removed" : "");
    if (removing) disk.remove_listed(e);
  }
  fmt::print("verified {} entries: {} ok, {} bad\n", entries.size(), entries.size() - bad, bad);
  if (fix && !disk.writable()) {
    fmt::print(stderr, "cache {} is read-only: verify --fix changed nothing\n", disk.dir().string());
    return 1;
  }
  return bad && !fix ? 1 : 0;
}

int cache_prune(std::uint64_t max_bytes) {
  Runtime rt;
  auto& disk = disk_of(rt);
  const std::uint64_t cap = max_bytes ? max_bytes : rt.options().cache_max_bytes;
  if (!disk.writable()) {
    fmt::print(stderr, "cache {} is read-only: prune changed nothing\n", disk.dir().string());
    return 1;
  }
  const std::size_t removed = disk.prune(cap);
  fmt::print("pruned {} entries; {} remain under the cap of {}\n", removed, human_bytes(disk.total_bytes()), human_bytes(cap));
  return 0;
}

int cache_clear() {
  Runtime rt;
  auto& disk = disk_of(rt);
  if (!disk.writable()) {
    fmt::print(stderr, "cache {} is read-only: clear changed nothing\n", disk.dir().string());
    return 1;
  }
  fmt::print("removed {} entries from {}\n", disk.clear(), disk.dir().string());
  return 0;
}

// `info --json`: the same facts as info(), as one JSON object.
int info_json() {
  Runtime rt;
  const auto& o = rt.options();
  nlohmann::json j = {{"version", version()},
                      {"nvrtc", jit::NvrtcCompiler::version()},
                      {"templates_sha256", std::string(jit::embedded_templates_sha256())},
                      {"templates", jit::embedded_templates().size()}};
  const auto& drv = jit::CudaDriver::get();
  j["driver"] = nlohmann::json::object();
  j["devices"] = nlohmann::json::array();
  if (!drv.available()) {
    j["driver"] = {{"available", false}, {"reason", drv.unavailable_reason()}};
  } else {
    j["driver"] = {{"available", true}, {"version", drv.driver_version()}};
    for (int i = 0; i < drv.device_count(); ++i) {
      CUdevice dev{};
      drv.check(drv.cuDeviceGet(&dev, i), "cuDeviceGet");
      char name[256] = {};
      drv.cuDeviceGetName(name, sizeof name, dev);
      size_t mem = 0;
      drv.cuDeviceTotalMem(&mem, dev);
      int sms = 0;
      drv.cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev);
      j["devices"].push_back({{"index", i}, {"name", name}, {"arch", drv.device_arch(i)}, {"sms", sms}, {"bytes", mem}});
    }
  }
  j["default_arch"] = tools::default_arch(rt);
  if (auto* disk = tools::disk_cache(rt)) {
    auto entries = disk->list(false);
    std::uint64_t total = 0;
    for (const auto& e : entries) total += e.bytes;
    j["cache"] = {{"dir", disk->dir().string()}, {"writable", disk->writable()}, {"no_jit", o.no_jit},
                  {"entries", entries.size()}, {"bytes", total}, {"max_bytes", o.cache_max_bytes},
                  {"stale_directories", disk->count_stale()}};
  } else {
    j["cache"] = nullptr;
  }
  j["ops"] = Runtime::op_names();
  fmt::print("{}\n", j.dump(1));
  return 0;
}

int info() {
  Runtime rt;
  const auto& o = rt.options();
  fmt::print("attnjit {}\n", version());
  fmt::print("NVRTC {}\n", jit::NvrtcCompiler::version());
  fmt::print("templates sha256 {} ({} files)\n", jit::embedded_templates_sha256(), jit::embedded_templates().size());
  const auto& drv = jit::CudaDriver::get();
  if (!drv.available()) {
    fmt::print("CUDA driver: none ({})\n", drv.unavailable_reason());
  } else {
    fmt::print("CUDA driver: {}.{}, {} device(s)\n", drv.driver_version() / 1000, (drv.driver_version() % 1000) / 10,
               drv.device_count());
    for (int i = 0; i < drv.device_count(); ++i) {
      CUdevice dev{};
      drv.check(drv.cuDeviceGet(&dev, i), "cuDeviceGet");
      char name[256] = {};
      drv.cuDeviceGetName(name, sizeof name, dev);
      size_t mem = 0;
      drv.cuDeviceTotalMem(&mem, dev);
      int sms = 0;
      drv.cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev);
      fmt::print("  device {}: {}, {}, {} SMs, {}\n", i, name, drv.device_arch(i), sms, human_bytes(mem));
    }
  }
  fmt::print("default target arch: {}\n", tools::default_arch(rt));
  if (auto* disk = tools::disk_cache(rt)) {
    auto entries = disk->list(false);
    std::uint64_t total = 0;
    for (const auto& e : entries) total += e.bytes;
    fmt::print("cache: {} ({}{}), {} entries, {}, cap {}\n", disk->dir().string(), disk->writable() ? "writable" : "read-only",
               o.no_jit ? ", no-JIT" : "", entries.size(), human_bytes(total),
               o.cache_max_bytes ? human_bytes(o.cache_max_bytes) : std::string("none"));
    if (const auto stale = disk->count_stale()) fmt::print("cache: {} stale staging or doomed directories\n", stale);
  } else {
    fmt::print("cache: disabled (memory only)\n");
  }
  std::string ops;
  for (const auto& n : Runtime::op_names()) ops += (ops.empty() ? "" : ", ") + n;
  fmt::print("ops: {}\n", ops);
  return 0;
}

void with_rc(CLI::App* cmd, std::function<int()> f) {
  cmd->callback([f] {
    int rc = f();
    if (rc) throw CLI::RuntimeError(rc);
  });
}

}  // namespace

void add_cache_command(CLI::App& app) {
  auto* cache = app.add_subcommand("cache", "Inspect and maintain the cubin cache");
  cache->require_subcommand(1);
  auto ls_json = std::make_shared<bool>(false);
  auto* ls = cache->add_subcommand("ls", "List cached kernels");
  ls->add_flag("--json", *ls_json, "Print the list as JSON");
  with_rc(ls, [ls_json] { return cache_ls(*ls_json); });
  auto fix = std::make_shared<bool>(false);
  auto* verify = cache->add_subcommand("verify", "Check every entry's manifest and cubin checksum");
  verify->add_flag("--fix", *fix, "Remove bad entries");
  with_rc(verify, [fix] { return cache_verify(*fix); });
  auto max_bytes = std::make_shared<std::uint64_t>(0);
  auto* prune = cache->add_subcommand("prune", "Evict least recently used entries down to the cap");
  prune->add_option("--max-bytes", *max_bytes, "Cap in bytes, or with a suffix: 512K, 64M, 2G (1024-based; default: ATTNJIT_CACHE_MAX_BYTES)")
      ->transform(CLI::AsSizeValue(false));
  with_rc(prune, [max_bytes] { return cache_prune(*max_bytes); });
  with_rc(cache->add_subcommand("clear", "Remove every entry"), cache_clear);
  for (CLI::App* sub : cache->get_subcommands({})) add_cache_dir_option(sub);
}

// `info --op NAME`: the op's tensors and parameters, from the C ABI's argument table.
int op_info(const std::string& name, bool json) {
  char* text = nullptr;
  if (attnjit_op_info(name.c_str(), &text) != ATTNJIT_OK) {
    fmt::print(stderr, "error: {}\n", attnjit_last_error());
    return 2;
  }
  const auto j = nlohmann::json::parse(text);
  attnjit_free_string(text);
  if (json) {
    fmt::print("{}\n", j.dump(1));
    return 0;
  }
  fmt::print("{} (SPEC.md section {})\ntensors:\n", name, j["spec"].get<std::string>());
  for (const auto& t : j["tensors"]) {
    std::string dtypes;
    for (const auto& d : t["dtypes"]) {
      if (!dtypes.empty()) dtypes += '|';
      dtypes += d.get<std::string>();
    }
    fmt::print("  {:<16} {:<5} rank {:<7} {:<14} {}{}\n", t["name"].get<std::string>(), t["role"].get<std::string>(),
               t["rank"].dump(), dtypes, t["shape"].get<std::string>(), t["optional"].get<bool>() ? "  (optional)" : "");
  }
  fmt::print("parameters:\n");
  for (const auto& p : j["params"]) {
    const std::string def = p["required"].get<bool>() ? "required" : p["default"].is_null() ? "unset" : p["default"].dump();
    fmt::print("  {:<24} {:<7} {}{}\n", p["name"].get<std::string>(), p["type"].get<std::string>(), def,
               p.contains("choices") ? "  one of " + p["choices"].dump() : "");
  }
  return 0;
}

void add_info_command(CLI::App& app) {
  auto op = std::make_shared<std::string>();
  auto* cmd = app.add_subcommand("info", "Versions, NVRTC, driver, devices, cache location and size");
  auto json = std::make_shared<bool>(false);
  cmd->add_option("--op", *op, "Print this op's tensors and parameters instead");
  cmd->add_flag("--json", *json, "Print as JSON (with --op: the op's argument table as the C ABI gives it)");
  add_cache_dir_option(cmd);
  with_rc(cmd, [op, json] { return op->empty() ? (*json ? info_json() : info()) : op_info(*op, *json); });
}

}  // namespace attnjit::cli
