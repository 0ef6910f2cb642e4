// RuntimeOptions: the one place that reads the ATTNJIT_* environment variables, but for the
// ATTNJIT_TUNE_* ones (ops/base/tuning.cpp).
#include <fmt/format.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "attnjit/runtime.hpp"
#include "base/env.hpp"
#include "ops/base/tuning.hpp"

namespace attnjit {

namespace {

// The levels spdlog knows by these names; anything else (WARN, verbose) would silently turn logging off.
std::string checked_log_level(std::string_view where, const std::string& v) {
  for (const char* level : {"trace", "debug", "info", "warn", "error", "critical", "off"})
    if (v == level) return v;
  throw InvalidArgument(
      fmt::format("{}: expected one of trace, debug, info, warn, error, critical, off, got '{}'", where, v));
}

}  // namespace

RuntimeOptions RuntimeOptions::from_env() {
  RuntimeOptions o;
  if (auto v = env::get("ATTNJIT_CACHE_DIR")) o.cache_dir = v;
  if (auto v = env::get("ATTNJIT_CACHE_READONLY")) o.cache_read_only = env::parse_bool("ATTNJIT_CACHE_READONLY", v);
  if (auto v = env::get("ATTNJIT_CACHE_DISABLE")) o.cache_disabled = env::parse_bool("ATTNJIT_CACHE_DISABLE", v);
  if (auto v = env::get("ATTNJIT_CACHE_MAX_BYTES")) o.cache_max_bytes = env::parse_bytes("ATTNJIT_CACHE_MAX_BYTES", v);
  if (auto v = env::get("ATTNJIT_LOCK_DIR")) o.lock_dir = v;
  if (auto v = env::get("ATTNJIT_LOCK_TIMEOUT_MS")) o.lock_timeout_ms = env::parse_nonneg_int("ATTNJIT_LOCK_TIMEOUT_MS", v);
  if (auto v = env::get("ATTNJIT_NO_JIT")) o.no_jit = env::parse_bool("ATTNJIT_NO_JIT", v);
  if (auto v = env::get("ATTNJIT_DUMP_SOURCES")) o.dump_sources_dir = v;
  if (auto v = env::get("ATTNJIT_LINEINFO")) o.lineinfo = env::parse_bool("ATTNJIT_LINEINFO", v);
  if (auto v = env::get("ATTNJIT_LOG_LEVEL")) o.log_level = checked_log_level("environment: ATTNJIT_LOG_LEVEL", v);
  if (auto v = env::get("ATTNJIT_ARCH")) o.arch = v;
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
  if (auto v = env::get("XDG_CACHE_HOME")) return (std::filesystem::path(v) / "attnjit").string();
  if (auto v = env::get("HOME")) return (std::filesystem::path(v) / ".cache" / "attnjit").string();
  return (std::filesystem::temp_directory_path() / "attnjit-cache").string();
}

}  // namespace attnjit
