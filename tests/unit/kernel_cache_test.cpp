// KernelCache (src/jit/kernel_cache.hpp): processes racing on one key, in-process single flight,
// no-JIT mode.
#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <latch>
#include <thread>

#include "attnjit/error.hpp"
#include "jit/kernel_cache.hpp"
#include "test_util.hpp"

namespace {

namespace fs = std::filesystem;
namespace test = attnjit::test;
using attnjit::jit::CompiledKernel;
using attnjit::jit::DiskCache;
using attnjit::jit::KernelCache;
using attnjit::jit::KernelCacheSettings;

KernelCacheSettings disk_settings(const fs::path& dir, const fs::path& lock_dir = {}) {
  KernelCacheSettings s;
  DiskCache::Settings d;
  d.dir = dir;
  d.lock_dir = lock_dir;
  s.disk = d;
  return s;
}

struct RaceResult {
  std::vector<int> exit_codes;
  std::string reports;  // one byte per successful child: 'C' compiled, 'D' loaded from disk
};

// Forks `n` children that each build a KernelCache on `settings` and ask for `spec`; they start
// together (a pipe that the parent closes) and report how they got their kernel.
RaceResult race(int n, const KernelCacheSettings& settings, const attnjit::jit::KernelSpec& spec) {
  int go[2], report[2];
  REQUIRE(::pipe(go) == 0);
  REQUIRE(::pipe(report) == 0);
  std::vector<pid_t> pids;
  for (int i = 0; i < n; ++i) {
    pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      ::close(go[1]);
      ::close(report[0]);
      char c;
      while (::read(go[0], &c, 1) > 0) {
      }
      int code = 1;
      try {
        KernelCache cache(settings);
        auto k = cache.compiled(spec);
        if (k && !k->cubin.empty() && !k->lowered_name.empty()) {
          const char r = k->from_disk ? 'D' : 'C';
          code = ::write(report[1], &r, 1) == 1 ? 0 : 2;
        } else {
          code = 3;
        }
      } catch (...) {
        code = 4;
      }
      ::_exit(code);  // NOTE: never return into the test runner from a child
    }
    pids.push_back(pid);
  }
  ::close(go[0]);
  ::close(go[1]);  // start
  ::close(report[1]);
  RaceResult r;
  for (pid_t pid : pids) {
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    r.exit_codes.push_back(WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
  }
  char buf[64];
  ssize_t got;
  while ((got = ::read(report[0], buf, sizeof buf)) > 0) r.reports.append(buf, static_cast<size_t>(got));
  ::close(report[0]);
  return r;
}

void check_one_clean_entry(const fs::path& dir, const std::string& key) {
  DiskCache disk(DiskCache::Settings{dir});
  auto entries = disk.list(true);
  REQUIRE(entries.size() == 1);
  CHECK(entries[0].key == key);
  CHECK(entries[0].problem.empty());
  CHECK(entries[0].describe == test::real_spec().describe());
  for (const auto& e : fs::directory_iterator(dir / "v1")) {
    const std::string name = e.path().filename().string();
    INFO(name);
    CHECK(!test::starts_with(name, ".staging-"));
    CHECK(!test::starts_with(name, ".doomed-"));
  }
}

}  // namespace

TEST_CASE("kernel cache: 4 processes racing on one key all succeed and leave one entry") {
  constexpr int kProcs = 4;
  const auto spec = test::real_spec();
  test::TempDir dir("race");
  const std::string key = KernelCache(KernelCacheSettings{}).key_of(spec).hex;

  SUBCASE("without locks") {
    const auto r = race(kProcs, disk_settings(dir.path()), spec);
    for (int code : r.exit_codes) CHECK(code == 0);
    CHECK(r.reports.size() == kProcs);
    CHECK(r.reports.find('C') != std::string::npos);  // somebody compiled
    check_one_clean_entry(dir.path(), key);
  }
  SUBCASE("with a per-key lock directory") {
    const fs::path locks = dir.path() / "locks";
    const auto r = race(kProcs, disk_settings(dir.path() / "cache", locks), spec);
    for (int code : r.exit_codes) CHECK(code == 0);
    REQUIRE(r.reports.size() == kProcs);
    // With the lock held across compile and publish, exactly one process compiles; the others wait
    // and then load its entry.
    CHECK(std::count(r.reports.begin(), r.reports.end(), 'C') == 1);
    CHECK(std::count(r.reports.begin(), r.reports.end(), 'D') == kProcs - 1);
    check_one_clean_entry(dir.path() / "cache", key);
    CHECK(fs::exists(locks / (key + ".lock")));
  }
  // A later process loads the entry the race left.
  const fs::path cache_dir = fs::exists(dir.path() / "cache") ? dir.path() / "cache" : dir.path();
  KernelCache later(disk_settings(cache_dir));
  CHECK(later.compiled(spec)->from_disk);
}

TEST_CASE("kernel cache: 8 threads asking for one kernel share a single compile") {
  const auto spec = test::real_spec();
  test::TempDir dir("flight");
  bool with_disk = false;
  SUBCASE("memory only") { with_disk = false; }
  SUBCASE("with a disk cache") { with_disk = true; }
  KernelCache cache(with_disk ? disk_settings(dir.path()) : KernelCacheSettings{});
  constexpr int kThreads = 8;
  std::vector<std::shared_ptr<const CompiledKernel>> got(kThreads);
  std::vector<std::string> errors(kThreads);
  std::latch start(kThreads);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      start.arrive_and_wait();
      try {
        got[i] = cache.compiled(spec);
      } catch (const std::exception& e) {
        errors[i] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int i = 0; i < kThreads; ++i) {
    INFO("thread " << i << ": " << errors[i]);
    CHECK(errors[i].empty());
    REQUIRE(got[i]);
    CHECK(got[i].get() == got[0].get());  // one object: one compile
  }
  CHECK(!got[0]->from_disk);
  CHECK(got[0]->compile_seconds > 0);
  CHECK(cache.compiled(spec).get() == got[0].get());
  if (with_disk) CHECK(cache.disk()->list(true).size() == 1);
}

TEST_CASE("kernel cache: no-JIT mode fails on a miss naming the warm-up, then serves a filled cache") {
  const auto spec = test::real_spec();
  test::TempDir dir("nojit");
  auto settings = disk_settings(dir.path());
  settings.no_jit = true;
  {
    KernelCache nojit(settings);
    try {
      nojit.compiled(spec);
      FAIL("no-JIT compiled() on an empty cache did not throw");
    } catch (const attnjit::CacheError& e) {
      const std::string m = e.what();
      CHECK(test::contains(m, "attnjit warmup"));
      CHECK(test::contains(m, spec.describe()));
      CHECK(test::contains(m, "--arch sm_90a"));
      CHECK(e.status() == attnjit::Status::kCacheError);
    }
    // The failure is not cached as a kernel, and nothing was written.
    CHECK_THROWS_AS(nojit.compiled(spec), attnjit::CacheError);
    CHECK(nojit.disk()->list(false).empty());
  }
  {
    KernelCache filler(disk_settings(dir.path()));
    CHECK(!filler.compiled(spec)->from_disk);
  }
  KernelCache nojit(settings);
  std::shared_ptr<const CompiledKernel> k;
  CHECK_NOTHROW(k = nojit.compiled(spec));
  REQUIRE(k);
  CHECK(k->from_disk);
  CHECK(!k->cubin.empty());

  // Without any disk cache, no-JIT can never serve a kernel.
  KernelCacheSettings memory_only;
  memory_only.no_jit = true;
  KernelCache nothing(memory_only);
  CHECK_THROWS_AS(nothing.compiled(spec), attnjit::CacheError);
}
