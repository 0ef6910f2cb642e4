// DiskCache (src/jit/disk_cache.hpp) and its use by KernelCache (src/jit/kernel_cache.hpp): round
// trips, corrupt entries as misses that are rebuilt, read-only and unwritable directories, LRU
// eviction, prune/clear/list.
#include <doctest/doctest.h>
#include <sys/stat.h>

#include <chrono>
#include <set>

#include "attnjit/error.hpp"
#include "jit/disk_cache.hpp"
#include "jit/kernel_cache.hpp"
#include "jit/sha256.hpp"
#include "test_util.hpp"

namespace {

namespace fs = std::filesystem;
namespace test = attnjit::test;
using attnjit::jit::CacheEntry;
using attnjit::jit::CompiledKernel;
using attnjit::jit::DiskCache;
using attnjit::jit::KernelCache;
using attnjit::jit::KernelCacheSettings;

// A well-formed entry with a cubin of `bytes` bytes (content derived from `name`).
CacheEntry fake_entry(const std::string& name, size_t bytes = 1000) {
  CacheEntry e;
  e.key = attnjit::jit::sha256_hex("fake-key-" + name);
  e.cubin.resize(bytes);
  for (size_t i = 0; i < bytes; ++i) e.cubin[i] = static_cast<char>((i * 131 + name.size() * 7 + name[0]) & 0xFF);
  e.manifest = {{"key", e.key},
                {"describe", "fake." + name},
                {"lowered_name", "_Z4fakev"},
                {"cubin_bytes", e.cubin.size()},
                {"cubin_sha256", attnjit::jit::sha256_hex(e.cubin)}};
  return e;
}

DiskCache::Settings settings_for(const fs::path& dir) {
  DiskCache::Settings s;
  s.dir = dir;
  return s;
}

KernelCacheSettings kernel_settings(const fs::path& dir) {
  KernelCacheSettings s;
  s.disk = settings_for(dir);
  return s;
}

// One real compile of the first warm-up kernel, shared by the tests of this file.
std::shared_ptr<const CompiledKernel> compiled_once() {
  static std::shared_ptr<const CompiledKernel> k = [] {
    KernelCache cache(KernelCacheSettings{});
    return cache.compiled(test::real_spec());
  }();
  return k;
}

void set_last_used(DiskCache& cache, const std::string& key, fs::file_time_type t) {
  const fs::path stamp = cache.entry_dir(key) / "last_used";
  REQUIRE(fs::exists(stamp));
  fs::last_write_time(stamp, t);
}

std::set<std::string> keys_in(const DiskCache& cache) {
  std::set<std::string> keys;
  for (const auto& e : cache.list(false)) keys.insert(e.key);
  return keys;
}

// Names in <dir>/v1 that are not entries (staging or doomed directories, stray files).
std::vector<std::string> leftovers(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir / "v1")) {
    const std::string n = e.path().filename().string();
    if (n.size() != 64) out.push_back(n);
  }
  return out;
}

}  // namespace

TEST_CASE("disk cache: publish then load round-trips bytes and manifest") {
  test::TempDir dir("dc-rt");
  DiskCache cache(settings_for(dir.path()));
  CHECK(cache.writable());
  const CacheEntry e = fake_entry("a", 4097);
  CHECK(!cache.load(e.key).has_value());  // miss before publish
  REQUIRE(cache.publish(e));
  CHECK(fs::is_regular_file(cache.entry_dir(e.key) / "kernel.cubin"));
  CHECK(fs::is_regular_file(cache.entry_dir(e.key) / "manifest.json"));
  CHECK(cache.entry_dir(e.key) == dir.path() / "v1" / e.key);
  auto back = cache.load(e.key);
  REQUIRE(back.has_value());
  CHECK(back->key == e.key);
  CHECK(back->cubin == e.cubin);
  CHECK(back->manifest == e.manifest);
  // A second publish of the same key keeps the entry and succeeds.
  CHECK(cache.publish(e));
  CHECK(cache.list(false).size() == 1);
  CHECK(leftovers(dir.path()).empty());
  // Another DiskCache on the same directory (another process, in effect) sees it.
  DiskCache other(settings_for(dir.path()));
  auto again = other.load(e.key);
  REQUIRE(again.has_value());
  CHECK(again->cubin == e.cubin);
}

TEST_CASE("disk cache: list, total_bytes, prune and clear") {
  test::TempDir dir("dc-list");
  DiskCache cache(settings_for(dir.path()));
  const CacheEntry a = fake_entry("a", 1000), b = fake_entry("b", 2000), c = fake_entry("c", 3000);
  for (const auto* e : {&a, &b, &c}) REQUIRE(cache.publish(*e));
  // Stray non-entry names in the layout dir are ignored by list().
  fs::create_directories(dir.path() / "v1" / "not-a-key");
  test::write_all(dir.path() / "v1" / "README", "x");

  auto list = cache.list(true);
  REQUIRE(list.size() == 3);
  // Sorted by describe().
  CHECK(list[0].describe == "fake.a");
  CHECK(list[1].describe == "fake.b");
  CHECK(list[2].describe == "fake.c");
  CHECK(list[0].key == a.key);
  CHECK(list[2].key == c.key);
  std::uint64_t sum = 0;
  for (const auto& info : list) {
    CHECK(info.problem.empty());
    sum += info.bytes;
  }
  // Each entry's size is its cubin plus its manifest file.
  CHECK(list[0].bytes == 1000 + fs::file_size(cache.entry_dir(a.key) / "manifest.json"));
  CHECK(list[2].bytes == 3000 + fs::file_size(cache.entry_dir(c.key) / "manifest.json"));
  CHECK(cache.total_bytes() == sum);

  // prune to a cap that holds only the newest entry.
  const auto now = fs::file_time_type::clock::now();
  set_last_used(cache, a.key, now - std::chrono::hours(3));
  set_last_used(cache, b.key, now - std::chrono::hours(2));
  set_last_used(cache, c.key, now - std::chrono::hours(1));
  CHECK(cache.prune(sum) == 0);  // already under the cap
  CHECK(cache.prune(list[2].bytes) == 2);
  CHECK(keys_in(cache) == std::set<std::string>{c.key});
  CHECK(cache.total_bytes() == list[2].bytes);

  REQUIRE(cache.publish(a));
  REQUIRE(cache.publish(b));
  CHECK(cache.clear() == 3);
  CHECK(cache.list(false).empty());
  CHECK(cache.total_bytes() == 0);
  CHECK(cache.clear() == 0);
  // The stray names are left alone.
  CHECK(fs::exists(dir.path() / "v1" / "README"));
}

TEST_CASE("disk cache: a size cap evicts the least recently used entries") {
  test::TempDir dir("dc-lru");
  std::uint64_t entry_bytes = 0;
  {
    DiskCache probe(settings_for(dir.path()));
    REQUIRE(probe.publish(fake_entry("a")));
    entry_bytes = probe.total_bytes();
    REQUIRE(probe.clear() == 1);
  }
  REQUIRE(entry_bytes > 1000);
  auto s = settings_for(dir.path());
  s.max_bytes = entry_bytes * 2 + entry_bytes / 2;  // room for two entries
  DiskCache cache(s);
  const CacheEntry a = fake_entry("a"), b = fake_entry("b"), c = fake_entry("c"), d = fake_entry("d"),
                   e = fake_entry("e");
  REQUIRE(cache.publish(a));
  REQUIRE(cache.publish(b));
  CHECK(cache.total_bytes() == 2 * entry_bytes);
  const auto now = fs::file_time_type::clock::now();
  set_last_used(cache, a.key, now - std::chrono::hours(2));
  set_last_used(cache, b.key, now - std::chrono::hours(1));

  // c does not fit with a and b: a, the least recently used, goes.
  REQUIRE(cache.publish(c));
  CHECK(cache.total_bytes() <= s.max_bytes);
  CHECK(keys_in(cache) == std::set<std::string>{b.key, c.key});

  // Now b is older than c, but a load() refreshes b, so c is the one to go.
  set_last_used(cache, b.key, now - std::chrono::hours(3));
  set_last_used(cache, c.key, now - std::chrono::hours(2));
  REQUIRE(cache.load(b.key).has_value());
  CHECK(fs::last_write_time(cache.entry_dir(b.key) / "last_used") > now - std::chrono::minutes(5));
  REQUIRE(cache.publish(d));
  CHECK(cache.total_bytes() <= s.max_bytes);
  CHECK(keys_in(cache) == std::set<std::string>{b.key, d.key});

  // Once more: the oldest (b, stamped earlier than d) goes, and only it.
  set_last_used(cache, b.key, now - std::chrono::hours(5));
  set_last_used(cache, d.key, now - std::chrono::hours(4));
  REQUIRE(cache.publish(e));
  CHECK(cache.total_bytes() <= s.max_bytes);
  CHECK(keys_in(cache) == std::set<std::string>{d.key, e.key});
  CHECK(leftovers(dir.path()).empty());
}

TEST_CASE("disk cache: a corrupt entry is a miss, is dropped, and the kernel cache rebuilds it") {
  const auto original = compiled_once();
  REQUIRE(original);
  REQUIRE(!original->cubin.empty());
  const std::string key = original->key.hex;

  std::string kind;
  SUBCASE("cubin byte flipped") { kind = "flip"; }
  SUBCASE("cubin truncated") { kind = "short-cubin"; }
  SUBCASE("cubin missing") { kind = "no-cubin"; }
  SUBCASE("manifest truncated") { kind = "half-manifest"; }
  SUBCASE("manifest missing") { kind = "no-manifest"; }
  SUBCASE("manifest of another key") { kind = "wrong-key"; }
  CAPTURE(kind);

  test::TempDir dir("dc-corrupt");
  DiskCache disk(settings_for(dir.path()));
  REQUIRE(disk.publish(CacheEntry{key, original->cubin, original->manifest}));
  REQUIRE(disk.load(key).has_value());
  const fs::path entry = disk.entry_dir(key);
  const fs::path cubin = entry / "kernel.cubin", manifest = entry / "manifest.json";
  if (kind == "flip") {
    std::string bytes = test::read_all(cubin);
    bytes[bytes.size() / 2] = static_cast<char>(bytes[bytes.size() / 2] ^ 0x5A);
    test::write_all(cubin, bytes);
  } else if (kind == "short-cubin") {
    std::string bytes = test::read_all(cubin);
    test::write_all(cubin, bytes.substr(0, bytes.size() - 1));
  } else if (kind == "no-cubin") {
    fs::remove(cubin);
  } else if (kind == "half-manifest") {
    std::string text = test::read_all(manifest);
    test::write_all(manifest, text.substr(0, text.size() / 2));
  } else if (kind == "no-manifest") {
    fs::remove(manifest);
  } else if (kind == "wrong-key") {
    auto m = original->manifest;
    m["key"] = attnjit::jit::sha256_hex("another key");
    test::write_all(manifest, m.dump(2));
  }
  auto listed = disk.list(true);
  REQUIRE(listed.size() == 1);
  CHECK(!listed[0].problem.empty());

  CHECK(!disk.load(key).has_value());
  CHECK(!fs::exists(entry));  // dropped
  CHECK(disk.list(false).empty());
  CHECK(leftovers(dir.path()).empty());

  // Put the corrupt entry back and let a KernelCache find it: it recompiles and republishes.
  REQUIRE(disk.publish(CacheEntry{key, original->cubin, original->manifest}));
  if (kind == "flip") {
    std::string bytes = test::read_all(cubin);
    bytes[10] = static_cast<char>(bytes[10] ^ 0x01);
    test::write_all(cubin, bytes);
  } else {
    fs::remove(cubin);
  }
  {
    KernelCache rebuild(kernel_settings(dir.path()));
    auto k = rebuild.compiled(test::real_spec());
    REQUIRE(k);
    CHECK(!k->from_disk);
    CHECK(k->compile_seconds > 0);
    CHECK(k->key.hex == key);
    CHECK(!k->cubin.empty());
  }
  auto fixed = disk.list(true);
  REQUIRE(fixed.size() == 1);
  CHECK(fixed[0].problem.empty());
  {
    KernelCache fresh(kernel_settings(dir.path()));
    auto k = fresh.compiled(test::real_spec());
    REQUIRE(k);
    CHECK(k->from_disk);
    CHECK(k->compile_seconds == 0);
    CHECK(k->lowered_name == original->lowered_name);
    CHECK(k->cubin.size() == disk.load(key)->cubin.size());
  }
}

TEST_CASE("disk cache: an entry without a lowered name is dropped by the kernel cache and rebuilt") {
  const auto original = compiled_once();
  test::TempDir dir("dc-nolowered");
  DiskCache disk(settings_for(dir.path()));
  auto manifest = original->manifest;
  manifest.erase("lowered_name");
  REQUIRE(disk.publish(CacheEntry{original->key.hex, original->cubin, manifest}));
  REQUIRE(disk.load(original->key.hex).has_value());  // verifies as far as the disk cache knows
  KernelCache cache(kernel_settings(dir.path()));
  auto k = cache.compiled(test::real_spec());
  CHECK(!k->from_disk);
  CHECK(k->lowered_name == original->lowered_name);
  auto back = disk.load(original->key.hex);
  REQUIRE(back.has_value());
  CHECK(back->manifest.value("lowered_name", "") == original->lowered_name);
}

TEST_CASE("disk cache: read_only loads entries but never writes") {
  const auto original = compiled_once();
  test::TempDir dir("dc-ro");
  const CacheEntry a = fake_entry("a");
  {
    DiskCache rw(settings_for(dir.path()));
    REQUIRE(rw.publish(a));
    REQUIRE(rw.publish(CacheEntry{original->key.hex, original->cubin, original->manifest}));
  }
  auto s = settings_for(dir.path());
  s.read_only = true;
  DiskCache ro(s);
  CHECK(!ro.writable());
  auto back = ro.load(a.key);
  REQUIRE(back.has_value());
  CHECK(back->cubin == a.cubin);
  CHECK(!ro.publish(fake_entry("b")));
  CHECK(!fs::exists(ro.entry_dir(fake_entry("b").key)));
  CHECK(ro.clear() == 0);
  CHECK(ro.prune(0) == 0);
  ro.remove(a.key);
  CHECK(fs::exists(ro.entry_dir(a.key)));
  // A corrupt entry is a miss, but a read-only cache leaves it in place.
  test::write_all(ro.entry_dir(a.key) / "kernel.cubin", "garbage");
  CHECK(!ro.load(a.key).has_value());
  CHECK(fs::exists(ro.entry_dir(a.key)));
  CHECK(ro.list(false).size() == 2);

  // A KernelCache over it serves what is there and compiles (in memory only) what is not.
  KernelCacheSettings ks;
  ks.disk = s;
  KernelCache cache(ks);
  auto hit = cache.compiled(test::real_spec());
  CHECK(hit->from_disk);
  const auto other = attnjit::detail::op_definitions()[0].default_matrix("sm_90a")[1];
  std::shared_ptr<const CompiledKernel> miss;
  CHECK_NOTHROW(miss = cache.compiled(other));
  REQUIRE(miss);
  CHECK(!miss->from_disk);
  CHECK(!miss->cubin.empty());
  CHECK(!fs::exists(ro.entry_dir(miss->key.hex)));
  CHECK(ro.list(false).size() == 2);
  CHECK(cache.compiled(other) == miss);  // kept in memory
}

TEST_CASE("disk cache: an unwritable directory degrades to memory only") {
  test::TempDir dir("dc-unwritable");
  // A path below a regular file: no directory can ever be created there, even by root.
  test::write_all(dir / "file", "not a directory");
  const fs::path bad = dir.path() / "file" / "cache";
  DiskCache disk(settings_for(bad));
  CHECK(!disk.writable());
  CHECK(!disk.publish(fake_entry("a")));
  CHECK(!disk.load(fake_entry("a").key).has_value());
  CHECK(disk.list(true).empty());
  CHECK(disk.total_bytes() == 0);
  CHECK(disk.clear() == 0);

  KernelCache cache(kernel_settings(bad));
  std::shared_ptr<const CompiledKernel> k;
  CHECK_NOTHROW(k = cache.compiled(test::real_spec()));
  REQUIRE(k);
  CHECK(!k->from_disk);
  CHECK(!k->cubin.empty());
  CHECK(cache.compiled(test::real_spec()) == k);
  CHECK(fs::is_regular_file(dir / "file"));
}

TEST_CASE("disk cache: a chmod 0555 directory is not fatal") {
  test::TempDir dir("dc-0555");
  const fs::path root = dir.path() / "cache";
  fs::create_directories(root);
  REQUIRE(::chmod(root.c_str(), 0555) == 0);
  KernelCache cache(kernel_settings(root));
  REQUIRE(cache.disk());
  std::shared_ptr<const CompiledKernel> k;
  CHECK_NOTHROW(k = cache.compiled(test::real_spec()));
  REQUIRE(k);
  CHECK(!k->cubin.empty());
  if (::geteuid() != 0) {
    // NOTE: root ignores the permission bits, so only an ordinary user sees the directory unwritable.
    CHECK(!cache.disk()->writable());
    CHECK(cache.disk()->list(false).empty());
  } else {
    CHECK(cache.disk()->list(true).size() == 1);
  }
  ::chmod(root.c_str(), 0755);
}
