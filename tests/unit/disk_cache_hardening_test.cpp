// DiskCache (src/jit/disk_cache.hpp) against entries it cannot trust: manifests of the wrong JSON types,
// keys that do not match, FIFOs and symlinks, failed publishes, and stale staging directories. Each is a
// miss (rebuilt) or a listed problem, never an exception, and never disables the cache for other keys.
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>

#include "jit/disk_cache.hpp"
#include "jit/kernel_cache.hpp"
#include "jit/sha256.hpp"
#include "test_util.hpp"

namespace {

namespace fs = std::filesystem;
namespace test = attnjit::test;
using attnjit::jit::CacheEntry;
using attnjit::jit::DiskCache;
using attnjit::jit::KernelCache;
using attnjit::jit::KernelCacheSettings;
using attnjit::jit::sha256_hex;

CacheEntry entry(const std::string& name, size_t bytes = 1000) {
  CacheEntry e;
  const std::string ser = "hardening-key-" + name;
  e.key = sha256_hex(ser);
  e.cubin.assign(bytes, static_cast<char>(name[0]));
  e.manifest = {{"key", e.key},
                {"key_serialisation", ser},
                {"describe", "fake." + name},
                {"lowered_name", "_Z4fakev"},
                {"cubin_bytes", e.cubin.size()},
                {"cubin_sha256", sha256_hex(e.cubin)}};
  return e;
}

DiskCache::Settings in(const fs::path& dir, std::uint64_t max_bytes = 0) {
  DiskCache::Settings s;
  s.dir = dir;
  s.max_bytes = max_bytes;
  return s;
}

void rewrite_manifest(const DiskCache& disk, const std::string& key, const char* field, const nlohmann::json& v) {
  const fs::path m = disk.entry_dir(key) / "manifest.json";
  auto j = nlohmann::json::parse(test::read_all(m));
  j[field] = v;
  test::write_all(m, j.dump());
}

// Every command path over the cache must survive whatever is in it.
void exercise_everything(DiskCache& disk) {
  CHECK_NOTHROW(disk.list(false));
  CHECK_NOTHROW(disk.list(true));
  CHECK_NOTHROW(disk.total_bytes());
  CHECK_NOTHROW(disk.count_stale());
  CHECK_NOTHROW(disk.sweep_stale());
}

}  // namespace

TEST_CASE("disk cache hardening: manifests with wrong JSON types are misses, never exceptions") {
  struct Bad {
    const char* field;
    nlohmann::json value;
  };
  const Bad bads[] = {{"key", 12345},           {"cubin_bytes", "1000"},   {"describe", 5},
                      {"lowered_name", nullptr}, {"cubin_sha256", {1, 2}}, {"key_serialisation", false},
                      {"cubin_bytes", -5},       {"cubin_bytes", 1000.5}};
  for (const auto& bad : bads) {
    CAPTURE(bad.field);
    CAPTURE(bad.value.dump());
    test::TempDir dir("dch-types");
    DiskCache disk(in(dir.path(), /*max_bytes=*/1 << 20));
    const auto a = entry("a"), b = entry("b");
    REQUIRE(disk.publish(a));
    rewrite_manifest(disk, a.key, bad.field, bad.value);
    exercise_everything(disk);
    bool found = false;
    for (const auto& e : disk.list(true)) {
      if (e.key != a.key) continue;
      found = true;
      CHECK(!e.problem.empty());
    }
    CHECK(found);
    // Publishing others (with a size cap: publish prunes, which lists) still works.
    CHECK(disk.publish(b));
    CHECK(disk.load(b.key).has_value());
    // The bad entry is a miss, dropped, and can be published again.
    CHECK_NOTHROW(CHECK(!disk.load(a.key).has_value()));
    CHECK(disk.publish(a));
    CHECK(disk.load(a.key).has_value());
    rewrite_manifest(disk, a.key, bad.field, bad.value);
    CHECK_NOTHROW(disk.prune(1));
    CHECK(disk.writable());
    REQUIRE(disk.publish(a));
    rewrite_manifest(disk, a.key, bad.field, bad.value);
    CHECK_NOTHROW(disk.clear());
    CHECK(disk.list(false).empty());
  }
}

TEST_CASE("disk cache hardening: an entry copied under another key is rejected by its stored serialisation") {
  test::TempDir dir("dch-copy");
  DiskCache disk(in(dir.path()));
  const auto a = entry("a"), b = entry("b");
  REQUIRE(disk.publish(a));
  // b's key directory holding a's files, with the key field rewritten to match the directory.
  fs::copy(disk.entry_dir(a.key), disk.entry_dir(b.key));
  rewrite_manifest(disk, b.key, "key", b.key);
  bool flagged = false;
  for (const auto& e : disk.list(true))
    if (e.key == b.key) flagged = test::contains(e.problem, "key_serialisation");
  CHECK(flagged);
  CHECK(!disk.load(b.key).has_value());
  CHECK(disk.load(a.key).has_value());
}

TEST_CASE("disk cache hardening: a FIFO as the cubin or the manifest never blocks") {
  for (const char* file : {"kernel.cubin", "manifest.json"}) {
    CAPTURE(file);
    test::TempDir dir("dch-fifo");
    DiskCache disk(in(dir.path()));
    const auto a = entry("a");
    REQUIRE(disk.publish(a));
    const fs::path p = disk.entry_dir(a.key) / file;
    fs::remove(p);
    REQUIRE(::mkfifo(p.c_str(), 0644) == 0);
    const auto t0 = std::chrono::steady_clock::now();
    exercise_everything(disk);
    CHECK(!disk.load(a.key).has_value());
    CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(10));
    CHECK(disk.publish(a));
    CHECK(disk.load(a.key).has_value());
  }
}

TEST_CASE("disk cache hardening: a symlink at one key's path (dangling, a loop, to a file) disables nothing else") {
  for (int kind = 0; kind < 3; ++kind) {
    CAPTURE(kind);
    test::TempDir dir("dch-link");
    DiskCache disk(in(dir.path()));
    const auto a = entry("a"), b = entry("b");
    const fs::path link = disk.entry_dir(a.key);
    if (kind == 0) fs::create_symlink(dir / "nowhere", link);
    if (kind == 1) fs::create_symlink(link, link);  // a loop
    if (kind == 2) {
      test::write_all(dir / "file", "x");
      fs::create_symlink(dir / "file", link);
    }
    exercise_everything(disk);
    CHECK(!disk.load(a.key).has_value());
    CHECK(disk.publish(b));
    CHECK(disk.writable());
    CHECK(disk.load(b.key).has_value());
    // The key itself is republished in place of the link.
    CHECK(disk.publish(a));
    CHECK(disk.load(a.key).has_value());
    CHECK(fs::is_regular_file(dir / "file") == (kind == 2));
  }
  // A symlinked entry directory pointing at a valid entry is not trusted either.
  test::TempDir dir("dch-link-dir");
  DiskCache disk(in(dir.path()));
  const auto a = entry("a");
  REQUIRE(disk.publish(a));
  fs::rename(disk.entry_dir(a.key), dir / "elsewhere");
  fs::create_symlink(dir / "elsewhere", disk.entry_dir(a.key));
  CHECK(!disk.load(a.key).has_value());
  CHECK(fs::exists(dir / "elsewhere" / "kernel.cubin"));  // the target is never touched
}

TEST_CASE("disk cache hardening: a failed write (file size limit, like ENOSPC) only fails that publish") {
  test::TempDir dir("dch-full");
  DiskCache disk(in(dir.path()));
  const auto big = entry("big", 1 << 20), small = entry("small", 100);
  struct rlimit old{};
  REQUIRE(::getrlimit(RLIMIT_FSIZE, &old) == 0);
  auto* prev = ::signal(SIGXFSZ, SIG_IGN);
  struct rlimit lim = old;
  lim.rlim_cur = 64 * 1024;
  REQUIRE(::setrlimit(RLIMIT_FSIZE, &lim) == 0);
  const bool big_ok = disk.publish(big);
  const bool small_ok = disk.publish(small);
  ::setrlimit(RLIMIT_FSIZE, &old);
  ::signal(SIGXFSZ, prev);
  CHECK(!big_ok);
  CHECK(small_ok);
  CHECK(disk.writable());
  CHECK(disk.load(small.key).has_value());
  // Space is back: the same key publishes now, and nothing half-written was left behind.
  CHECK(disk.publish(big));
  CHECK(disk.load(big.key).has_value());
  for (const auto& e : fs::directory_iterator(dir.path() / "v1")) CHECK(e.path().filename().string()[0] != '.');
}

TEST_CASE("disk cache hardening: stale staging and doomed directories are counted and swept after the grace period") {
  test::TempDir dir("dch-stale");
  DiskCache disk(in(dir.path()));
  REQUIRE(disk.publish(entry("a")));
  const fs::path root = dir.path() / "v1";
  const auto old = fs::file_time_type::clock::now() - std::chrono::hours(2);
  for (const char* n : {".staging-1-00000000deadbeef", ".doomed-2-00000000deadbeef", ".staging-3-fresh"}) {
    fs::create_directories(root / n / "sub");
    test::write_all(root / n / "kernel.cubin", "partial");
  }
  fs::last_write_time(root / ".staging-1-00000000deadbeef", old);
  fs::last_write_time(root / ".doomed-2-00000000deadbeef", old);
  CHECK(disk.count_stale() == 2);
  SUBCASE("sweep") { CHECK(disk.sweep_stale() == 2); }
  SUBCASE("prune") { disk.prune(1u << 30); }
  SUBCASE("clear") { disk.clear(); }
  CHECK(disk.count_stale() == 0);
  CHECK(!fs::exists(root / ".staging-1-00000000deadbeef"));
  CHECK(!fs::exists(root / ".doomed-2-00000000deadbeef"));
  CHECK(fs::exists(root / ".staging-3-fresh"));  // may belong to a publish in progress
}

TEST_CASE("disk cache hardening: the kernel cache rebuilds a real entry whose manifest has wrong types") {
  test::TempDir dir("dch-kc");
  KernelCacheSettings s;
  s.disk = in(dir.path(), 1 << 30);
  std::string key;
  {
    KernelCache cache(s);
    auto k = cache.compiled(test::real_spec());
    key = k->key.hex;
    REQUIRE(fs::exists(cache.disk()->entry_dir(key) / "manifest.json"));
    rewrite_manifest(*cache.disk(), key, "describe", 5);
  }
  {
    KernelCache cache(s);
    std::shared_ptr<const attnjit::jit::CompiledKernel> k;
    CHECK_NOTHROW(k = cache.compiled(test::real_spec()));
    REQUIRE(k);
    CHECK(!k->from_disk);
    CHECK(cache.disk()->list(true).at(0).problem.empty());
  }
  {
    KernelCache cache(s);
    CHECK(cache.compiled(test::real_spec())->from_disk);
  }
}
