#include "jit/disk_cache.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include <fmt/format.h>

#include "jit/sha256.hpp"
#include "base/logging.hpp"

namespace fs = std::filesystem;

namespace attnjit::jit {

namespace {

constexpr const char* kLayout = "v1";
constexpr const char* kCubinFile = "kernel.cubin";
constexpr const char* kManifestFile = "manifest.json";
constexpr const char* kStampFile = "last_used";

bool read_file(const fs::path& p, std::string* out) {
  std::ifstream in(p, std::ios::binary);
  if (!in) return false;
  std::ostringstream ss;
  ss << in.rdbuf();
  *out = std::move(ss).str();
  return true;
}

// Writes and fsyncs one file; false on any failure.
bool write_file_synced(const fs::path& p, std::string_view data) {
  int fd = ::open(p.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return false;
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n <= 0) {
      ::close(fd);
      return false;
    }
    done += static_cast<size_t>(n);
  }
  bool ok = ::fsync(fd) == 0;
  return ::close(fd) == 0 && ok;
}

void fsync_dir(const fs::path& p) {
  int fd = ::open(p.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

bool is_key(const std::string& name) {
  return name.size() == 64 && std::all_of(name.begin(), name.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

}  // namespace

KeyLock::~KeyLock() {
  if (fd_ >= 0) {
    ::flock(fd_, LOCK_UN);
    ::close(fd_);
  }
}

DiskCache::DiskCache(Settings settings) : settings_(std::move(settings)) {
  writable_ = !settings_.read_only;
  if (writable_) {
    std::error_code ec;
    fs::create_directories(settings_.dir / kLayout, ec);
    if (ec || ::access((settings_.dir / kLayout).c_str(), W_OK) != 0)
      warn_unwritable(ec ? ec.message() : "no write permission");
  }
}

void DiskCache::warn_unwritable(const std::string& why) {
  writable_ = false;
  std::call_once(warned_, [&] {
    logger().warn("kernel cache {} is not writable ({}); compiled kernels stay in memory only",
                  settings_.dir.string(), why);
  });
}

fs::path DiskCache::entry_dir(const std::string& key) const { return settings_.dir / kLayout / key; }

std::string DiskCache::verify_entry(const fs::path& dir, const std::string& key, CacheEntry* out) const {
  std::string manifest_text, cubin;
  if (!read_file(dir / kManifestFile, &manifest_text)) return "manifest missing";
  nlohmann::json manifest = nlohmann::json::parse(manifest_text, nullptr, false);
  if (manifest.is_discarded() || !manifest.is_object()) return "manifest is not valid JSON";
  if (manifest.value("key", "") != key) return "manifest key does not match the directory";
  if (!read_file(dir / kCubinFile, &cubin)) return "cubin missing";
  if (cubin.size() != manifest.value("cubin_bytes", std::uint64_t{0})) return "cubin size differs from manifest";
  if (sha256_hex(cubin) != manifest.value("cubin_sha256", "")) return "cubin checksum differs from manifest";
  if (out) *out = CacheEntry{key, std::move(cubin), std::move(manifest)};
  return {};
}

std::optional<CacheEntry> DiskCache::load(const std::string& key) {
  fs::path dir = entry_dir(key);
  std::error_code ec;
  if (!fs::exists(dir, ec)) return std::nullopt;
  CacheEntry entry;
  std::string problem = verify_entry(dir, key, &entry);
  if (!problem.empty()) {
    logger().warn("kernel cache entry {} is unusable ({}); it will be rebuilt", key, problem);
    remove(key);
    return std::nullopt;
  }
  if (writable_) {
    // NOTE: the LRU stamp is the mtime of last_used; a failure to touch it is harmless.
    int fd = ::open((dir / kStampFile).c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    if (fd >= 0) {
      ::futimens(fd, nullptr);
      ::close(fd);
    }
  }
  return entry;
}

bool DiskCache::publish(const CacheEntry& entry) {
  if (!writable_) return false;
  const fs::path root = settings_.dir / kLayout;
  const fs::path final_dir = entry_dir(entry.key);
  std::error_code ec;
  if (fs::exists(final_dir / kManifestFile, ec)) return true;  // already there (another process won)
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  const fs::path staging = root / fmt::format(".staging-{}-{:016x}", ::getpid(), rng());
  if (!fs::create_directory(staging, ec) || ec) {
    warn_unwritable(ec ? ec.message() : "cannot create a staging directory");
    return false;
  }
  bool ok = write_file_synced(staging / kCubinFile, entry.cubin) &&
            write_file_synced(staging / kManifestFile, entry.manifest.dump(2)) &&
            write_file_synced(staging / kStampFile, "");
  if (!ok) {
    fs::remove_all(staging, ec);
    warn_unwritable("writing the entry failed");
    return false;
  }
  fsync_dir(staging);
  if (::rename(staging.c_str(), final_dir.c_str()) != 0) {
    const int err = errno;
    // NOTE: a lost race (the directory exists, non-empty): keep the winner's entry; the caller
    // already holds its own cubin in memory.
    fs::remove_all(staging, ec);
    if (err != EEXIST && err != ENOTEMPTY) {
      warn_unwritable(std::strerror(err));
      return false;
    }
    return true;
  }
  fsync_dir(root);
  if (settings_.max_bytes > 0) prune(settings_.max_bytes);
  return true;
}

void DiskCache::remove(const std::string& key) {
  if (!writable_ || !is_key(key)) return;
  // Rename first so that a concurrent reader never sees a half-deleted entry.
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  fs::path doomed = settings_.dir / kLayout / fmt::format(".doomed-{}-{:016x}", ::getpid(), rng());
  std::error_code ec;
  if (::rename(entry_dir(key).c_str(), doomed.c_str()) == 0) fs::remove_all(doomed, ec);
}

std::unique_ptr<KeyLock> DiskCache::lock(const std::string& key) const {
  if (settings_.lock_dir.empty()) return nullptr;
  std::error_code ec;
  fs::create_directories(settings_.lock_dir, ec);
  int fd = ::open((settings_.lock_dir / (key + ".lock")).c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return nullptr;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(settings_.lock_timeout_ms);
  while (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    if (std::chrono::steady_clock::now() >= deadline) {
      logger().warn("timed out after {} ms waiting for the compile lock of {}; compiling anyway",
                    settings_.lock_timeout_ms, key);
      ::close(fd);
      return nullptr;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return std::make_unique<KeyLock>(fd);
}

std::vector<CacheEntryInfo> DiskCache::list(bool verify_cubins) const {
  // NOTE: other processes may publish, prune or clear concurrently: every filesystem call here uses
  // the error_code overloads and an entry that vanishes mid-scan is skipped.
  std::vector<CacheEntryInfo> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(settings_.dir / kLayout, ec)) {
    const std::string name = e.path().filename().string();
    std::error_code fe;
    if (!e.is_directory(fe) || fe || !is_key(name)) continue;
    CacheEntryInfo info;
    info.key = name;
    bool vanished = false;
    for (const auto& f : fs::directory_iterator(e.path(), fe)) {
      std::error_code se;
      if (!f.is_regular_file(se)) continue;
      const auto size = f.file_size(se);
      if (se) {
        vanished = true;
        break;
      }
      info.bytes += size;
    }
    if (fe || vanished) continue;
    info.last_used = fs::last_write_time(e.path() / kStampFile, fe);
    if (fe) info.last_used = fs::last_write_time(e.path(), fe);
    if (fe) continue;
    std::string text;
    if (read_file(e.path() / kManifestFile, &text)) {
      auto m = nlohmann::json::parse(text, nullptr, false);
      if (m.is_object()) info.describe = m.value("describe", "");
    }
    if (verify_cubins) info.problem = verify_entry(e.path(), name, nullptr);
    out.push_back(std::move(info));
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.describe < b.describe; });
  return out;
}

std::uint64_t DiskCache::total_bytes() const {
  std::uint64_t total = 0;
  for (const auto& e : list(false)) total += e.bytes;
  return total;
}

std::size_t DiskCache::prune(std::uint64_t max_bytes) {
  if (!writable_) return 0;
  auto entries = list(false);
  std::uint64_t total = 0;
  for (const auto& e : entries) total += e.bytes;
  std::sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) { return a.last_used < b.last_used; });
  std::size_t removed = 0;
  for (const auto& e : entries) {
    if (total <= max_bytes) break;
    remove(e.key);
    total -= e.bytes;
    ++removed;
  }
  if (removed) logger().info("kernel cache: evicted {} entries to stay under {} bytes", removed, max_bytes);
  return removed;
}

std::size_t DiskCache::clear() {
  if (!writable_) return 0;
  std::size_t removed = 0;
  for (const auto& e : list(false)) {
    remove(e.key);
    ++removed;
  }
  return removed;
}

}  // namespace attnjit::jit
