// The on-disk cubin cache. Layout: <dir>/v1/<key>/{kernel.cubin, manifest.json, last_used}; the
// manifest holds the full key serialisation, describe(), the NVRTC log, resource usage, compile time
// and the cubin's sha256. Publishing stages in a private directory, fsyncs and renames; a lost race
// keeps the winner's entry. Any entry that cannot be fully parsed or trusted (wrong JSON types, a key
// that differs from the directory or from the hash of its stored serialisation, a file that is not a
// regular file, a symlink) is a miss (dropped, with a warning) and never throws. A directory unwritable
// from the start degrades to read-only with one warning; a later failed publish only affects its key. An optional cap evicts the least
// recently used entries by their last_used stamp.
#pragma once
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace attnjit::jit {

struct CacheEntry {
  std::string key;
  std::string cubin;
  nlohmann::json manifest;  // see header comment
};

struct CacheEntryInfo {
  std::string key;
  std::string describe;
  std::uint64_t bytes = 0;
  std::filesystem::file_time_type last_used{};
  std::string problem;  // empty when the entry verifies
  // The directory listed (st_dev, st_ino): remove_listed() removes that directory only, never an entry
  // published at the same key since.
  std::uint64_t dev = 0, ino = 0;
};

// A held per-key lock (flock on a file under the lock directory); released on destruction.
class KeyLock {
 public:
  explicit KeyLock(int fd) : fd_(fd) {}
  ~KeyLock();
  KeyLock(const KeyLock&) = delete;
  KeyLock& operator=(const KeyLock&) = delete;

 private:
  int fd_;
};

class DiskCache {
 public:
  struct Settings {
    std::filesystem::path dir;
    bool read_only = false;
    std::uint64_t max_bytes = 0;  // 0: unlimited
    std::filesystem::path lock_dir;  // empty: no locks
    int lock_timeout_ms = 60000;
  };
  explicit DiskCache(Settings settings);

  const std::filesystem::path& dir() const { return settings_.dir; }
  bool writable() const { return writable_; }

  // A verified entry, or nullopt. A corrupt entry is removed (when writable) and logged.
  std::optional<CacheEntry> load(const std::string& key);
  // Atomic publish. Returns false (after one warning per cache) when the directory is unwritable.
  bool publish(const CacheEntry& entry);
  // Drop an entry (e.g. its cubin failed to load on a device).
  void remove(const std::string& key);
  // Drop the entry `list` gave, if the key's path still holds that directory (not one published since).
  void remove_listed(const CacheEntryInfo& info);
  // Waits up to lock_timeout_ms for the per-key lock; nullptr when locking is off or timed out.
  std::unique_ptr<KeyLock> lock(const std::string& key) const;

  std::vector<CacheEntryInfo> list(bool verify_cubins) const;
  std::uint64_t total_bytes() const;
  // Evicts least recently used entries until at most max_bytes remain. Returns the count removed.
  std::size_t prune(std::uint64_t max_bytes);
  std::size_t clear();

  // Staging and doomed directories left by killed processes: those older than kStaleGrace (by mtime)
  // are removed by sweep_stale() (warm-up, prune and clear call it) and counted by count_stale().
  static constexpr std::chrono::seconds kStaleGrace{3600};
  std::size_t sweep_stale();
  std::size_t count_stale() const;

  std::filesystem::path entry_dir(const std::string& key) const;

 private:
  // Moves the key's directory aside and deletes it; with `only` (st_dev, st_ino), only if it is that directory.
  void remove_dir(const std::string& key, const std::pair<std::uint64_t, std::uint64_t>* only);
  std::string verify_entry(const std::filesystem::path& dir, const std::string& key, CacheEntry* out) const;
  void warn_unwritable(const std::string& why);
  // A publish that failed for one key (ENOSPC, a symlink in the way): one warning per key; the next
  // publish tries again, and other keys are unaffected.
  void warn_publish_failed(const std::string& key, const std::string& why);

  Settings settings_;
  bool writable_ = true;
  std::once_flag warned_;
  std::mutex warn_mutex_;
  std::vector<std::string> warned_keys_;
};

}  // namespace attnjit::jit
