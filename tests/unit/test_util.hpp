// Helpers shared by the unit tests: temporary directories, environment save/restore, the spec of a
// real kernel, and checks on error messages.
#pragma once
#include <doctest/doctest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "attnjit/runtime.hpp"
#include "jit/kernel_spec.hpp"
#include "ops/registry.hpp"

namespace attnjit::test {

namespace fs = std::filesystem;

// A fresh, empty directory under the system temp dir; removed (recursively) on destruction.
class TempDir {
 public:
  explicit TempDir(const std::string& tag = "t") {
    static std::atomic<int> counter{0};
    std::random_device rd;
    for (int attempt = 0; attempt < 100; ++attempt) {
      fs::path p = fs::temp_directory_path() /
                   ("attnjit-test-" + tag + "-" + std::to_string(::getpid()) + "-" + std::to_string(counter++) + "-" +
                    std::to_string(rd() % 1000000));
      std::error_code ec;
      if (fs::create_directory(p, ec) && !ec) {
        path_ = p;
        return;
      }
    }
    FAIL("could not create a temporary directory");
  }
  ~TempDir() {
    std::error_code ec;
    // NOTE: a test may leave read-only directories behind; make them writable before removing.
    for (auto it = fs::recursive_directory_iterator(path_, ec); !ec && it != fs::recursive_directory_iterator();
         it.increment(ec)) {
      if (it->is_directory(ec)) ::chmod(it->path().c_str(), 0755);
    }
    ::chmod(path_.c_str(), 0755);
    fs::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const fs::path& path() const { return path_; }
  fs::path operator/(const std::string& s) const { return path_ / s; }

 private:
  fs::path path_;
};

// Saves the listed environment variables, and restores them (set or unset) on destruction.
class EnvGuard {
 public:
  explicit EnvGuard(std::vector<std::string> names) {
    for (auto& n : names) {
      const char* v = std::getenv(n.c_str());
      saved_[n] = v ? std::optional<std::string>(v) : std::nullopt;
    }
  }
  ~EnvGuard() {
    for (const auto& [n, v] : saved_) {
      if (v) ::setenv(n.c_str(), v->c_str(), 1);
      else ::unsetenv(n.c_str());
    }
  }
  void set(const std::string& n, const std::string& v) {
    REQUIRE(saved_.count(n));
    ::setenv(n.c_str(), v.c_str(), 1);
  }
  void unset(const std::string& n) {
    REQUIRE(saved_.count(n));
    ::unsetenv(n.c_str());
  }
  void unset_all() {
    for (const auto& [n, v] : saved_) ::unsetenv(n.c_str());
  }

 private:
  std::map<std::string, std::optional<std::string>> saved_;
};

inline const std::vector<std::string>& attnjit_env_names() {
  static const std::vector<std::string> names = {
      "ATTNJIT_CACHE_DIR",       "ATTNJIT_CACHE_READONLY", "ATTNJIT_CACHE_DISABLE", "ATTNJIT_CACHE_MAX_BYTES",
      "ATTNJIT_LOCK_DIR",        "ATTNJIT_LOCK_TIMEOUT_MS", "ATTNJIT_NO_JIT",       "ATTNJIT_DUMP_SOURCES",
      "ATTNJIT_LINEINFO",        "ATTNJIT_LOG_LEVEL",       "ATTNJIT_ARCH",         "ATTNJIT_TUNE_GQA_TILE",
      "ATTNJIT_TUNE_DECODE_TILE", "ATTNJIT_TUNE_DECODE_SPLITS", "ATTNJIT_TUNE_LI_FORCE_SLAB", "ATTNJIT_TUNE_LATENT_TILE", "ATTNJIT_TUNE_NSA_SELECTED_TILE",
      "ATTNJIT_TUNE_NSA_TOPK_TILE",
      "ATTNJIT_TUNE_GQA_BWD_BAND",
      "ATTNJIT_TUNE_GQA_FWD_PERSISTENT",
      "ATTNJIT_TUNE_GQA_FWD_Q_TMA",
      "ATTNJIT_TUNE_GQA_BWD_HOPPER_D256",
      "XDG_CACHE_HOME",
      "HOME"};
  return names;
}

// Options pinned by a test (not from_env): the disk cache under dir/cache, errors-only logging.
inline RuntimeOptions options_in(const TempDir& dir) {
  RuntimeOptions o;
  o.cache_dir = (dir / "cache").string();
  o.log_level = "error";
  return o;
}

// Distinct, 256-aligned fake device addresses for descriptors only (kernels_for never dereferences them).
inline void* fake_addr(int i) { return reinterpret_cast<void*>(static_cast<uintptr_t>(i + 1) << 32); }

// The first kernel of the first op's warm-up matrix: a real, compilable spec.
inline jit::KernelSpec real_spec() { return detail::op_definitions()[0].default_matrix("sm_90a")[0]; }

inline bool starts_with(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }
inline bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

inline std::string read_all(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline void write_all(const fs::path& p, const std::string& data) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out << data;
  REQUIRE(out.good());
}

}  // namespace attnjit::test
