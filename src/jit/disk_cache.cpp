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

// Reads a regular file (never through a symlink, never blocking on a FIFO or device); false otherwise.
bool read_file(const fs::path& p, std::string* out) {
  struct stat st{};
  if (::lstat(p.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return false;
  int fd = ::open(p.c_str(), O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return false;
  // NOTE: the file may have been swapped between lstat and open; fstat checks what was opened.
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return false;
  }
  std::string data;
  data.reserve(static_cast<size_t>(st.st_size));
  char buf[65536];
  while (true) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      ::close(fd);
      return false;
    }
    if (n == 0) break;
    data.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  *out = std::move(data);
  return true;
}

// A manifest string field, or `fallback` when it is absent or not a string (never throws).
std::string string_field(const nlohmann::json& m, const char* name, const std::string& fallback = {}) {
  if (!m.is_object()) return fallback;
  auto it = m.find(name);
  return it != m.end() && it->is_string() ? it->get<std::string>() : fallback;
}

bool is_stale_name(const std::string& name) { return name.rfind(".staging-", 0) == 0 || name.rfind(".doomed-", 0) == 0; }

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
  struct stat st{};
  if (::lstat(dir.c_str(), &st) != 0) return "entry missing";
  if (!S_ISDIR(st.st_mode)) return S_ISLNK(st.st_mode) ? "entry is a symlink" : "entry is not a directory";
  std::string manifest_text, cubin;
  if (!read_file(dir / kManifestFile, &manifest_text)) return "manifest missing or not a regular file";
  nlohmann::json manifest = nlohmann::json::parse(manifest_text, nullptr, false);
  if (manifest.is_discarded() || !manifest.is_object()) return "manifest is not valid JSON";
  // Every field read later must have its type, so that nothing downstream can throw on this entry.
  const auto field = [&](const char* name) { return manifest.find(name); };
  if (field("key") == manifest.end() || !field("key")->is_string()) return "manifest key is not a string";
  if (field("key")->get<std::string>() != key) return "manifest key does not match the directory";
  if (field("key_serialisation") != manifest.end()) {
    if (!field("key_serialisation")->is_string()) return "manifest key_serialisation is not a string";
    if (sha256_hex(field("key_serialisation")->get<std::string>()) != key)
      return "manifest key_serialisation does not hash to the directory's key";
  }
  for (const char* name : {"describe", "lowered_name", "entry", "nvrtc_log", "created"})
    if (field(name) != manifest.end() && !field(name)->is_string()) return fmt::format("manifest {} is not a string", name);
  if (field("cubin_bytes") == manifest.end() || !field("cubin_bytes")->is_number_unsigned())
    return "manifest cubin_bytes is not an unsigned integer";
  if (field("cubin_sha256") == manifest.end() || !field("cubin_sha256")->is_string())
    return "manifest cubin_sha256 is not a string";
  if (!read_file(dir / kCubinFile, &cubin)) return "cubin missing or not a regular file";
  if (cubin.size() != field("cubin_bytes")->get<std::uint64_t>()) return "cubin size differs from manifest";
  if (sha256_hex(cubin) != field("cubin_sha256")->get<std::string>()) return "cubin checksum differs from manifest";
  if (out) *out = CacheEntry{key, std::move(cubin), std::move(manifest)};
  return {};
}

namespace {

// Whether the key's path `dir` still holds what `before` (its lstat) described: a read of an entry that a
// concurrent prune, clear or remove moved aside (or replaced with a new publish) fails without the entry
// being corrupt. A symlink or file at the key compares as itself.
bool same_dir(const fs::path& dir, const struct stat& before) {
  struct stat now{};
  return ::lstat(dir.c_str(), &now) == 0 && now.st_dev == before.st_dev && now.st_ino == before.st_ino;
}

}  // namespace

std::optional<CacheEntry> DiskCache::load(const std::string& key) {
  fs::path dir = entry_dir(key);
  struct stat st{};
  if (!is_key(key) || ::lstat(dir.c_str(), &st) != 0) return std::nullopt;
  CacheEntry entry;
  std::string problem = verify_entry(dir, key, &entry);
  if (!problem.empty()) {
    if (!same_dir(dir, st)) return std::nullopt;  // removed or replaced meanwhile: a plain miss
    logger().warn("kernel cache entry {} is unusable ({}); it will be rebuilt", key, problem);
    const std::pair<std::uint64_t, std::uint64_t> id{st.st_dev, st.st_ino};
    remove_dir(key, &id);
    return std::nullopt;
  }
  if (writable_) {
    // NOTE: the LRU stamp is the mtime of last_used; a failure to touch it is harmless.
    int fd = ::open((dir / kStampFile).c_str(), O_WRONLY | O_CREAT | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd >= 0) {
      ::futimens(fd, nullptr);
      ::close(fd);
    }
  }
  return entry;
}

void DiskCache::warn_publish_failed(const std::string& key, const std::string& why) {
  std::lock_guard<std::mutex> g(warn_mutex_);
  if (std::find(warned_keys_.begin(), warned_keys_.end(), key) != warned_keys_.end()) return;
  warned_keys_.push_back(key);
  logger().warn("kernel cache {}: could not persist entry {} ({}); the kernel stays in memory and the next "
                "publish tries again", settings_.dir.string(), key, why);
}

bool DiskCache::publish(const CacheEntry& entry) {
  if (!writable_ || !is_key(entry.key)) return false;
  const fs::path root = settings_.dir / kLayout;
  const fs::path final_dir = entry_dir(entry.key);
  std::error_code ec;
  struct stat st{};
  if (::lstat(final_dir.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode) && verify_entry(final_dir, entry.key, nullptr).empty()) return true;  // another process won
    // NOTE: something untrusted holds the key's path (a symlink, a file, a corrupt entry): move it
    // aside, so that this key (and only it) can be published; an entry that a concurrent prune moved
    // aside meanwhile needs nothing, and one published meanwhile stays.
    const std::pair<std::uint64_t, std::uint64_t> id{st.st_dev, st.st_ino};
    remove_dir(entry.key, &id);
  }
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  const fs::path staging = root / fmt::format(".staging-{}-{:016x}", ::getpid(), rng());
  if (!fs::create_directory(staging, ec) || ec) {
    warn_publish_failed(entry.key, ec ? ec.message() : "cannot create a staging directory");
    return false;
  }
  int err = 0;
  const auto write_one = [&](const char* name, std::string_view data) {
    if (err) return;
    errno = 0;
    if (!write_file_synced(staging / name, data)) err = errno ? errno : EIO;
  };
  write_one(kCubinFile, entry.cubin);
  write_one(kManifestFile, entry.manifest.dump(2));
  write_one(kStampFile, "");
  if (err) {
    fs::remove_all(staging, ec);
    warn_publish_failed(entry.key, fmt::format("writing the entry failed: {}", std::strerror(err)));
    return false;
  }
  fsync_dir(staging);
  if (::rename(staging.c_str(), final_dir.c_str()) != 0) {
    const int rename_err = errno;
    // NOTE: a lost race (the directory exists, non-empty): keep the winner's entry; the caller
    // already holds its own cubin in memory.
    fs::remove_all(staging, ec);
    if (rename_err != EEXIST && rename_err != ENOTEMPTY) {
      warn_publish_failed(entry.key, std::strerror(rename_err));
      return false;
    }
    return true;
  }
  fsync_dir(root);
  if (settings_.max_bytes > 0) prune(settings_.max_bytes);
  return true;
}

void DiskCache::remove(const std::string& key) { remove_dir(key, nullptr); }

void DiskCache::remove_listed(const CacheEntryInfo& info) {
  const std::pair<std::uint64_t, std::uint64_t> id{info.dev, info.ino};
  remove_dir(info.key, &id);
}

void DiskCache::remove_dir(const std::string& key, const std::pair<std::uint64_t, std::uint64_t>* only) {
  if (!writable_ || !is_key(key)) return;
  // Rename first so that a concurrent reader never sees a half-deleted entry.
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  fs::path doomed = settings_.dir / kLayout / fmt::format(".doomed-{}-{:016x}", ::getpid(), rng());
  std::error_code ec;
  if (::rename(entry_dir(key).c_str(), doomed.c_str()) != 0) return;
  struct stat now{};
  if (only && (::lstat(doomed.c_str(), &now) != 0 || static_cast<std::uint64_t>(now.st_dev) != only->first ||
               static_cast<std::uint64_t>(now.st_ino) != only->second)) {
    // NOTE: another process published this key after `only` was read: put the new entry back (should a
    // third publish have taken the path meanwhile, the moved one goes: a rebuild, never a wrong kernel).
    if (::rename(doomed.c_str(), entry_dir(key).c_str()) == 0) return;
  }
  fs::remove_all(doomed, ec);
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
  // the error_code overloads and an entry that vanishes mid-scan is skipped. Nothing here follows a
  // symlink or throws on a malformed manifest: such entries are listed with their problem.
  std::vector<CacheEntryInfo> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(settings_.dir / kLayout, ec)) {
    const std::string name = e.path().filename().string();
    if (!is_key(name)) continue;
    struct stat st{};
    if (::lstat(e.path().c_str(), &st) != 0) continue;  // vanished
    CacheEntryInfo info;
    info.key = name;
    info.dev = static_cast<std::uint64_t>(st.st_dev);  // lstat's: a symlink at the key is itself the entry
    info.ino = static_cast<std::uint64_t>(st.st_ino);
    std::error_code fe;
    if (!S_ISDIR(st.st_mode)) {
      // A symlink (dangling or a loop), a file or a FIFO at a key's path: a bad entry, never followed.
      info.last_used = fs::file_time_type::clock::now();
      if (verify_cubins) info.problem = S_ISLNK(st.st_mode) ? "entry is a symlink" : "entry is not a directory";
      out.push_back(std::move(info));
      continue;
    }
    bool vanished = false;
    for (const auto& f : fs::directory_iterator(e.path(), fe)) {
      struct stat fst{};
      if (::lstat(f.path().c_str(), &fst) != 0) {
        vanished = true;
        break;
      }
      if (S_ISREG(fst.st_mode)) info.bytes += static_cast<std::uint64_t>(fst.st_size);
    }
    if (fe || vanished) continue;
    info.last_used = fs::last_write_time(e.path() / kStampFile, fe);
    if (fe) info.last_used = fs::last_write_time(e.path(), fe);
    if (fe) continue;
    std::string text;
    if (read_file(e.path() / kManifestFile, &text)) info.describe = string_field(nlohmann::json::parse(text, nullptr, false), "describe");
    if (verify_cubins) {
      info.problem = verify_entry(e.path(), name, nullptr);
      if (!info.problem.empty() && !same_dir(e.path(), st)) continue;  // moved aside or replaced mid-read
    }
    out.push_back(std::move(info));
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.describe < b.describe; });
  return out;
}

std::size_t DiskCache::sweep_stale() {
  if (!writable_) return 0;
  std::size_t removed = 0;
  std::error_code ec;
  const auto now = std::chrono::system_clock::now();
  for (const auto& e : fs::directory_iterator(settings_.dir / kLayout, ec)) {
    const std::string name = e.path().filename().string();
    struct stat st{};
    if (!is_stale_name(name) || ::lstat(e.path().c_str(), &st) != 0) continue;
    const auto mtime = std::chrono::system_clock::from_time_t(st.st_mtime);
    if (now - mtime < kStaleGrace) continue;  // may belong to a publish still in progress
    std::error_code re;
    fs::remove_all(e.path(), re);
    if (!re) ++removed;
  }
  if (removed) logger().info("kernel cache: removed {} stale staging or doomed directories", removed);
  return removed;
}

std::size_t DiskCache::count_stale() const {
  std::size_t n = 0;
  std::error_code ec;
  const auto now = std::chrono::system_clock::now();
  for (const auto& e : fs::directory_iterator(settings_.dir / kLayout, ec)) {
    struct stat st{};
    if (!is_stale_name(e.path().filename().string()) || ::lstat(e.path().c_str(), &st) != 0) continue;
    if (now - std::chrono::system_clock::from_time_t(st.st_mtime) >= kStaleGrace) ++n;
  }
  return n;
}

std::uint64_t DiskCache::total_bytes() const {
  std::uint64_t total = 0;
  for (const auto& e : list(false)) total += e.bytes;
  return total;
}

std::size_t DiskCache::prune(std::uint64_t max_bytes) {
  if (!writable_) return 0;
  sweep_stale();
  auto entries = list(false);
  std::uint64_t total = 0;
  for (const auto& e : entries) total += e.bytes;
  std::sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) { return a.last_used < b.last_used; });
  std::size_t removed = 0;
  for (const auto& e : entries) {
    if (total <= max_bytes) break;
    remove_listed(e);  // the listed (least recently used) directory, not one published at its key since
    total -= e.bytes;
    ++removed;
  }
  if (removed) logger().info("kernel cache: evicted {} entries to stay under {} bytes", removed, max_bytes);
  return removed;
}

std::size_t DiskCache::clear() {
  if (!writable_) return 0;
  sweep_stale();
  std::size_t removed = 0;
  for (const auto& e : list(false)) {
    remove(e.key);
    ++removed;
  }
  return removed;
}

}  // namespace attnjit::jit
