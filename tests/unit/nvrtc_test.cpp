// NVRTC (src/jit/nvrtc_compiler.hpp): every warm-up kernel compiles; a template that does not compile
// raises CompileError carrying the kernel's describe() and the NVRTC log.
#include <doctest/doctest.h>

#include <atomic>
#include <latch>
#include <set>
#include <thread>

#include "attnjit/error.hpp"
#include "jit/kernel_cache.hpp"
#include "jit/nvrtc_compiler.hpp"
#include "test_util.hpp"

namespace {

namespace test = attnjit::test;
using attnjit::jit::CompileResult;
using attnjit::jit::KernelSpec;
using attnjit::jit::NvrtcCompiler;

KernelSpec bogus_spec(const std::string& entry, const std::string& template_file = "kv_cache/paged_kv_write.cuh") {
  KernelSpec s = test::real_spec();
  s.entry = entry;
  s.template_file = template_file;
  s.name = "paged_kv_write.bogus";
  return s;
}

}  // namespace

TEST_CASE("nvrtc: every kernel of every op's warm-up matrix compiles for sm_90a") {
  std::vector<KernelSpec> specs;
  for (const auto& def : attnjit::detail::op_definitions()) {
    auto m = def.default_matrix("sm_90a");
    // Every op has kernels, so every op contributes to the warm-up.
    INFO(def.name);
    CHECK(!m.empty());
    for (auto& s : m) {
      CHECK(s.op == def.name);
      CHECK(s.arch == "sm_90a");
      specs.push_back(std::move(s));
    }
  }
  REQUIRE(!specs.empty());
  std::set<std::string> names;
  for (const auto& s : specs) names.insert(s.describe());
  CHECK(names.size() == specs.size());  // describe() tells every kernel apart

  // Two workers (the machine has two cores); each compile is a fresh NVRTC program.
  NvrtcCompiler compiler;
  std::vector<CompileResult> results(specs.size());
  std::vector<std::string> errors(specs.size());
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i; (i = next++) < specs.size();) {
      try {
        results[i] = compiler.compile(specs[i]);
      } catch (const std::exception& e) {
        errors[i] = e.what();
      }
    }
  };
  std::thread t1(work), t2(work);
  t1.join();
  t2.join();
  for (size_t i = 0; i < specs.size(); ++i) {
    INFO(specs[i].describe() << ": " << errors[i]);
    CHECK(errors[i].empty());
    const auto& r = results[i];
    REQUIRE(r.cubin.size() > 4);
    CHECK(r.cubin.compare(0, 4, "\x7f" "ELF") == 0);
    CHECK(test::starts_with(r.lowered_name, "_Z"));
    // The mangled symbol names the template function of the entry ("...::gqa_fwd<...>" -> "gqa_fwd").
    const std::string& e = specs[i].entry;
    const size_t lt = e.find('<'), colons = e.rfind("::", lt);
    CHECK(test::contains(r.lowered_name, e.substr(colons + 2, lt - colons - 2)));
    CHECK(test::contains(r.log, "registers"));  // ptxas -v resource lines
    CHECK(r.seconds > 0);
  }
}

TEST_CASE("nvrtc: the compiled source includes the template, and dump_sources writes it") {
  test::TempDir dir("dump");
  const KernelSpec spec = test::real_spec();
  const std::string src = NvrtcCompiler::source_for(spec);
  CHECK(test::contains(src, "#include \"kv_cache/paged_kv_write.cuh\""));
  CHECK(test::contains(src, spec.describe()));
  attnjit::jit::KernelCacheSettings s;
  s.compile.dump_sources_dir = (dir / "sources").string();
  attnjit::jit::KernelCache cache(s);
  auto k = cache.compiled(spec);
  const auto dumped = dir / "sources" / (spec.describe() + ".cu");
  REQUIRE(std::filesystem::exists(dumped));
  const std::string text = test::read_all(dumped);
  CHECK(test::contains(text, src));
  CHECK(test::contains(text, spec.entry));
  // The manifest the cache writes describes the compile.
  CHECK(k->manifest["key"] == k->key.hex);
  CHECK(k->manifest["describe"] == spec.describe());
  CHECK(k->manifest["lowered_name"] == k->lowered_name);
  CHECK(k->manifest["cubin_bytes"] == k->cubin.size());
  CHECK(k->manifest["key_serialisation"] == k->key.serialisation);
  CHECK(k->manifest["resources"].value("registers", 0) > 0);
}

TEST_CASE("nvrtc: a template that fails to compile raises CompileError with describe() and the log") {
  NvrtcCompiler compiler;
  std::string entry, file = "kv_cache/paged_kv_write.cuh", expect_in_log;
  SUBCASE("static_assert in the template (D = 24)") {
    entry = "attnjit::kernels::paged_kv_write<__half, __half, 24>";
    expect_in_log = "multiple of 16";
  }
  SUBCASE("nonexistent template file") {
    entry = "attnjit::kernels::paged_kv_write<__half, __half, 128>";
    file = "kv_cache/no_such_template.cuh";
    expect_in_log = "no_such_template.cuh";
  }
  SUBCASE("name expression naming no kernel") {
    entry = "attnjit::kernels::no_such_kernel<__half>";
    expect_in_log = "no_such_kernel";
  }
  CAPTURE(entry);
  const KernelSpec spec = bogus_spec(entry, file);
  try {
    compiler.compile(spec);
    FAIL("compile() of a broken template did not throw");
  } catch (const attnjit::CompileError& e) {
    const std::string m = e.what();
    CHECK(test::contains(m, spec.describe()));
    CHECK(e.kernel() == spec.describe());
    CHECK(!e.log().empty());
    CHECK(test::contains(e.log(), expect_in_log));
    CHECK(test::contains(m, e.log()));
    CHECK(e.status() == attnjit::Status::kCompileError);
  }
}

TEST_CASE("nvrtc: a failed compile reaches every waiting thread and is not cached") {
  const KernelSpec spec = bogus_spec("attnjit::kernels::paged_kv_write<__half, __half, 24>");
  attnjit::jit::KernelCache cache(attnjit::jit::KernelCacheSettings{});
  constexpr int kThreads = 4;
  std::latch start(kThreads);
  std::atomic<int> compile_errors{0}, other{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&] {
      start.arrive_and_wait();
      try {
        cache.compiled(spec);
        ++other;
      } catch (const attnjit::CompileError& e) {
        if (e.kernel() == spec.describe()) ++compile_errors;
        else ++other;
      } catch (...) {
        ++other;
      }
    });
  }
  for (auto& t : threads) t.join();
  CHECK(compile_errors == kThreads);
  CHECK(other == 0);
  // A later call tries again (and fails again) instead of returning a cached failure or kernel.
  CHECK_THROWS_AS(cache.compiled(spec), attnjit::CompileError);
}
