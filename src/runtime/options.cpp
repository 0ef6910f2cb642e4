// RuntimeOptions: the one place that reads the ATTNJIT_* environment variables, but for the
// ATTNJIT_TUNE_* ones (ops/base/tuning.cpp).
#include <fmt/format.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "attnjit/runtime.hpp"
#include "ops/base/tuning.hpp"

namespace attnjit {

namespace {

const char* env(const char* name) {
  const char* v = std::getenv(name);
  return (v && *v) ? v : nullptr;
}

bool parse_bool(const char* name, const char* v) {
  std::string s(v);
  if (s == "1" || s == "true" || s == "yes" || s == "on") return true;
  if (s == "0" || s == "false" || s == "no" || s == "off") return false;
  throw InvalidArgument(fmt::format("environment: {}: expected 0/1/true/false, got '{}'", name, s));
}

std::uint64_t parse_bytes(const char* name, const char* v) {
  // Accepts a plain non-negative integer or one with a K/M/G suffix (powers of 1024).
  auto bad = [&] {
    return InvalidArgument(
        fmt::format("environment: {}: expected a byte count such as 4294967296 or 4G, got '{}'", name, v));
  };
  if (!(*v >= '0' && *v <= '9')) throw bad();
  errno = 0;
  char* end = nullptr;
  unsigned long long n = std::strtoull(v, &end, 10);
  if (errno == ERANGE) throw bad();
  std::string suffix(end ? end : "");
  std::uint64_t mul = 1;
  if (suffix == "K" || suffix == "KiB") mul = 1ull << 10;
  else if (suffix == "M" || suffix == "MiB") mul = 1ull << 20;
  else if (suffix == "G" || suffix == "GiB") mul = 1ull << 30;
  else if (!suffix.empty()) throw bad();
  if (n > UINT64_MAX / mul) throw bad();
  return n * mul;
}

// The levels spdlog knows by these names; anything else (WARN, verbose) would silently turn logging off.
std::string checked_log_level(std::string_view where, const std::string& v) {
  for (const char* level : {"trace", "debug", "info", "warn", "error", "critical", "off"})
    if (v == level) return v;
  throw InvalidArgument(
      fmt::format("{}: expected one of trace, debug, info, warn, error, critical, off, got '{}'", where, v));
}

int parse_nonneg_int(const char* name, const char* v) {
  errno = 0;
  char* end = nullptr;
  long n = std::strtol(v, &end, 10);
  if (errno == ERANGE || end == v || *end != '\0' || n < 0 || n > 86400000)
    throw InvalidArgument(fmt::format("environment: {}: expected an integer in [0, 86400000], got '{}'", name, v));
  return static_cast<int>(n);
}

}  // namespace

RuntimeOptions RuntimeOptions::from_env() {
  RuntimeOptions o;
  if (auto v = env("ATTNJIT_CACHE_DIR")) o.cache_dir = v;
  if (auto v = env("ATTNJIT_CACHE_READONLY")) o.cache_read_only = parse_bool("ATTNJIT_CACHE_READONLY", v);
  if (auto v = env("ATTNJIT_CACHE_DISABLE")) o.cache_disabled = parse_bool("ATTNJIT_CACHE_DISABLE", v);
  if (auto v = env("ATTNJIT_CACHE_MAX_BYTES")) o.cache_max_bytes = parse_bytes("ATTNJIT_CACHE_MAX_BYTES", v);
  if (auto v = env("ATTNJIT_LOCK_DIR")) o.lock_dir = v;
  if (auto v = env("ATTNJIT_LOCK_TIMEOUT_MS")) o.lock_timeout_ms = parse_nonneg_int("ATTNJIT_LOCK_TIMEOUT_MS", v);
  if (auto v = env("ATTNJIT_NO_JIT")) o.no_jit = parse_bool("ATTNJIT_NO_JIT", v);
  if (auto v = env("ATTNJIT_DUMP_SOURCES")) o.dump_sources_dir = v;
  if (auto v = env("ATTNJIT_LINEINFO")) o.lineinfo = parse_bool("ATTNJIT_LINEINFO", v);
  if (auto v = env("ATTNJIT_LOG_LEVEL")) o.log_level = checked_log_level("environment: ATTNJIT_LOG_LEVEL", v);
  if (auto v = env("ATTNJIT_ARCH")) o.arch = v;
  return o;
}

RuntimeOptions RuntimeOptions::from_json(std::string_view text, RuntimeOptions o) {
  if (text.empty()) return o;
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded()) throw InvalidArgument(fmt::format("options_json: expected valid JSON, got '{}'", text));
  if (j.is_null()) return o;
  if (!j.is_object()) throw InvalidArgument(fmt::format("options: expected a JSON object, got {}", j.dump()));
  for (const auto& [k, v] : j.items()) {
    try {
      if (k == "cache_dir") o.cache_dir = v.get<std::string>();
      else if (k == "cache_read_only") o.cache_read_only = v.get<bool>();
      else if (k == "cache_disabled") o.cache_disabled = v.get<bool>();
      else if (k == "cache_max_bytes") {
        if (!v.is_number_integer() || v.get<std::int64_t>() < 0)
          throw nlohmann::json::type_error::create(302, "unsigned", nullptr);
        o.cache_max_bytes = v.get<std::uint64_t>();
      }
      else if (k == "lock_dir") o.lock_dir = v.get<std::string>();
      else if (k == "lock_timeout_ms") {
        if (!v.is_number_integer() || v.get<std::int64_t>() < 0 || v.get<std::int64_t>() > 86400000)
          throw nlohmann::json::type_error::create(302, "milliseconds", nullptr);
        o.lock_timeout_ms = v.get<int>();
      }
      else if (k == "no_jit") o.no_jit = v.get<bool>();
      else if (k == "dump_sources_dir") o.dump_sources_dir = v.get<std::string>();
      else if (k == "lineinfo") o.lineinfo = v.get<bool>();
      else if (k == "log_level") o.log_level = checked_log_level("options: param: log_level", v.get<std::string>());
      else if (k == "arch") o.arch = v.get<std::string>();
      else if (k == "tune") {
        // Checked here (keys, types) so a bad options_json fails where it is given; applied over the
        // ATTNJIT_TUNE_* variables when the runtime is created.
        ops::Tuning::apply(v, ops::Tuning{});
        {
          nlohmann::json merged = nlohmann::json::parse(o.tune.empty() ? std::string("{}") : o.tune);
          for (const auto& [tk, tv] : v.items()) merged[tk] = tv;
          o.tune = merged.dump();
        }
      }
      else
        throw InvalidArgument(fmt::format("options: param: {}: expected one of cache_dir, cache_read_only, "
                                          "cache_disabled, cache_max_bytes, lock_dir, lock_timeout_ms, no_jit, "
                                          "dump_sources_dir, lineinfo, log_level, arch, tune, got an "
                                          "unknown key", k));
    } catch (const nlohmann::json::exception&) {
      throw InvalidArgument(fmt::format("options: param: {}: wrong type, got {}", k, v.dump()));
    }
  }
  return o;
}

std::string RuntimeOptions::resolved_cache_dir() const {
  if (!cache_dir.empty()) return cache_dir;
  if (std::string(ATTNJIT_DEFAULT_CACHE_DIR).size()) return ATTNJIT_DEFAULT_CACHE_DIR;
  if (auto v = env("XDG_CACHE_HOME")) return (std::filesystem::path(v) / "attnjit").string();
  if (auto v = env("HOME")) return (std::filesystem::path(v) / ".cache" / "attnjit").string();
  return (std::filesystem::temp_directory_path() / "attnjit-cache").string();
}

}  // namespace attnjit
