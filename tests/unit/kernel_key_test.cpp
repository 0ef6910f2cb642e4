// KernelKey (src/jit/kernel_key.hpp): every input that can change the binary changes the key; equal
// inputs give equal keys, in this process and in another one.
#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <set>

#include "jit/embedded_templates.hpp"
#include "jit/kernel_cache.hpp"
#include "jit/kernel_key.hpp"
#include "jit/nvrtc_compiler.hpp"
#include "test_util.hpp"

namespace {

using attnjit::jit::KernelSpec;
using attnjit::jit::make_kernel_key;
namespace test = attnjit::test;

KernelSpec base_spec() {
  KernelSpec s;
  s.op = "paged_kv_write";
  s.template_file = "kv_cache/paged_kv_write.cuh";
  s.entry = "attnjit::kernels::paged_kv_write<__half, __half, 128>";
  s.fields = {{"backend", "portable"}, {"dtype", "fp16"}, {"cache_dtype", "fp16"}, {"head_dim", "128"}};
  s.arch = "sm_90a";
  s.name = "paged_kv_write.portable.fp16.fp16.d128";
  return s;
}

std::vector<std::string> base_options() {
  return {"--gpu-architecture=sm_90a", "--std=c++17", "--ptxas-options=-v", "-DATTNJIT_NVRTC=1"};
}

const char* kNvrtc = "13.0";

bool is_lower_hex64(const std::string& h) {
  return h.size() == 64 && std::all_of(h.begin(), h.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

// The keys the cross-process test compares: one hand-made spec, and every warm-up kernel.
std::string keys_text() {
  std::string out = make_kernel_key(base_spec(), base_options(), kNvrtc).hex + "\n";
  attnjit::jit::NvrtcCompiler compiler;
  for (const auto& s : attnjit::detail::op_definitions()[0].default_matrix("sm_90a"))
    out += make_kernel_key(s, compiler.key_options(s), attnjit::jit::NvrtcCompiler::version()).hex + "\n";
  return out;
}

std::string self_exe() {
  char buf[4096];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  REQUIRE(n > 0);
  buf[n] = '\0';
  return buf;
}

}  // namespace

TEST_CASE("kernel key: 64 lowercase hex digits, deterministic, serialisation names every input") {
  auto a = make_kernel_key(base_spec(), base_options(), kNvrtc);
  auto b = make_kernel_key(base_spec(), base_options(), kNvrtc);
  CHECK(is_lower_hex64(a.hex));
  CHECK(a.hex == b.hex);
  CHECK(a.serialisation == b.serialisation);
  // The serialisation is the canonical text: each input appears in it.
  CHECK(test::starts_with(a.serialisation, "attnjit-kernel-key " + std::to_string(attnjit::jit::kKeySchemaVersion)));
  CHECK(test::contains(a.serialisation, "op paged_kv_write\n"));
  CHECK(test::contains(a.serialisation, "template kv_cache/paged_kv_write.cuh\n"));
  CHECK(test::contains(a.serialisation, "entry attnjit::kernels::paged_kv_write<__half, __half, 128>\n"));
  CHECK(test::contains(a.serialisation, "field head_dim=128\n"));
  CHECK(test::contains(a.serialisation, "arch sm_90a\n"));
  CHECK(test::contains(a.serialisation, "nvrtc 13.0\n"));
  CHECK(test::contains(a.serialisation, "option --std=c++17\n"));
  CHECK(test::contains(a.serialisation,
                       "templates " + attnjit::jit::template_closure_sha256("kv_cache/paged_kv_write.cuh") + "\n"));
  // The readable name is not an input of the binary: it does not enter the key.
  KernelSpec renamed = base_spec();
  renamed.name = "something.else";
  CHECK(make_kernel_key(renamed, base_options(), kNvrtc).hex == a.hex);
}

TEST_CASE("kernel key: changing any single input changes the key") {
  const std::string base = make_kernel_key(base_spec(), base_options(), kNvrtc).hex;
  std::set<std::string> seen{base};
  int variants = 0;
  auto expect_new = [&](const std::string& what, const KernelSpec& s, const std::vector<std::string>& opts,
                        const std::string& nvrtc, const std::string& templates = "") {
    INFO("variant: " << what);
    const std::string h = make_kernel_key(s, opts, nvrtc, templates).hex;
    CHECK(is_lower_hex64(h));
    CHECK(h != base);
    CHECK(seen.insert(h).second);  // and differs from every other variant too
    ++variants;
  };

  {
    KernelSpec s = base_spec();
    s.op = "paged_kv_write2";
    expect_new("op", s, base_options(), kNvrtc);
  }
  {
    KernelSpec s = base_spec();
    s.template_file = "kv_cache/other.cuh";
    expect_new("template_file", s, base_options(), kNvrtc);
  }
  {
    KernelSpec s = base_spec();
    s.entry = "attnjit::kernels::paged_kv_write<__half, __half, 64>";
    expect_new("entry", s, base_options(), kNvrtc);
  }
  for (size_t i = 0; i < base_spec().fields.size(); ++i) {
    KernelSpec s = base_spec();
    s.fields[i].second += "x";
    expect_new("value of field " + s.fields[i].first, s, base_options(), kNvrtc);
    KernelSpec n = base_spec();
    n.fields[i].first += "x";
    expect_new("name of field " + n.fields[i].first, n, base_options(), kNvrtc);
  }
  {
    KernelSpec s = base_spec();
    s.fields.emplace_back("causal", "true");
    expect_new("added field", s, base_options(), kNvrtc);
  }
  {
    KernelSpec s = base_spec();
    s.fields.pop_back();
    expect_new("removed field", s, base_options(), kNvrtc);
  }
  {
    KernelSpec s = base_spec();
    std::swap(s.fields[0], s.fields[1]);
    expect_new("field order", s, base_options(), kNvrtc);
  }
  {
    KernelSpec s = base_spec();
    s.arch = "sm_90";
    expect_new("arch sm_90", s, base_options(), kNvrtc);
    s.arch = "sm_80";
    expect_new("arch sm_80", s, base_options(), kNvrtc);
  }
  expect_new("nvrtc version", base_spec(), base_options(), "13.1");
  expect_new("nvrtc major", base_spec(), base_options(), "12.0");
  for (size_t i = 0; i < base_options().size(); ++i) {
    auto o = base_options();
    o[i] += "0";
    expect_new("option " + base_options()[i], base_spec(), o, kNvrtc);
    auto r = base_options();
    r.erase(r.begin() + static_cast<long>(i));
    expect_new("without option " + base_options()[i], base_spec(), r, kNvrtc);
  }
  {
    auto o = base_options();
    o.push_back("--generate-line-info");
    expect_new("added option", base_spec(), o, kNvrtc);
  }
  expect_new("templates hash", base_spec(), base_options(), kNvrtc, std::string(64, '0'));
  CHECK(variants == 28);

  // The default templates hash is the include closure's of the spec's template.
  CHECK(make_kernel_key(base_spec(), base_options(), kNvrtc,
                        attnjit::jit::template_closure_sha256(base_spec().template_file))
            .hex == base);
  CHECK(attnjit::jit::embedded_templates_sha256().size() == 64);
}

TEST_CASE("kernel key: the kernel cache's key uses the compiler's options, and lineinfo changes it") {
  const KernelSpec spec = test::real_spec();
  attnjit::jit::NvrtcCompiler plain;
  const auto opts = plain.key_options(spec);
  // No include paths or other machine facts in the key options.
  for (const auto& o : opts) {
    INFO(o);
    CHECK(!test::starts_with(o, "-I"));
    CHECK(!test::contains(o, "/"));
  }
  CHECK(std::find(opts.begin(), opts.end(), "--gpu-architecture=sm_90a") != opts.end());

  attnjit::jit::KernelCache cache({});
  attnjit::jit::KernelCacheSettings li;
  li.compile.lineinfo = true;
  attnjit::jit::KernelCache cache_li(li);
  const auto k = cache.key_of(spec);
  CHECK(k.hex == make_kernel_key(spec, opts, attnjit::jit::NvrtcCompiler::version()).hex);
  CHECK(cache_li.key_of(spec).hex != k.hex);
  CHECK(test::contains(cache_li.key_of(spec).serialisation, "option --generate-line-info\n"));
  // The cache directory is not part of the key.
  test::TempDir d1("key1"), d2("key2");
  attnjit::jit::KernelCacheSettings s1, s2;
  s1.disk = attnjit::jit::DiskCache::Settings{d1.path()};
  s2.disk = attnjit::jit::DiskCache::Settings{d2.path()};
  attnjit::jit::KernelCache c1(s1), c2(s2);
  CHECK(c1.key_of(spec).hex == k.hex);
  CHECK(c2.key_of(spec).hex == k.hex);

  // Every warm-up kernel has its own key.
  std::set<std::string> keys;
  const auto matrix = attnjit::detail::op_definitions()[0].default_matrix("sm_90a");
  for (const auto& s : matrix) keys.insert(cache.key_of(s).hex);
  CHECK(keys.size() == matrix.size());
}

// Helper for the cross-process test below: when ATTNJIT_TEST_KEY_OUT is set (by the parent), writes
// the keys to that file. Run on its own, it checks the same keys are well formed.
TEST_CASE("kernel key: subprocess helper") {
  const std::string text = keys_text();
  CHECK(text.size() == 65 * (1 + attnjit::detail::op_definitions()[0].default_matrix("sm_90a").size()));
  if (const char* out = std::getenv("ATTNJIT_TEST_KEY_OUT")) test::write_all(out, text);
}

TEST_CASE("kernel key: identical in a separate process") {
  test::TempDir dir("keyproc");
  const auto out = dir / "keys.txt";
  const std::string cmd = "ATTNJIT_TEST_KEY_OUT='" + out.string() + "' '" + self_exe() +
                          "' --test-case='kernel key: subprocess helper' --no-version --minimal >/dev/null 2>&1";
  const int rc = std::system(cmd.c_str());
  REQUIRE(WIFEXITED(rc));
  REQUIRE(WEXITSTATUS(rc) == 0);
  REQUIRE(std::filesystem::exists(out));
  const std::string child = test::read_all(out);
  CHECK(child == keys_text());
  CHECK(child.size() > 64);
}

// The key's templates line covers exactly the kernel's include closure: editing one family's template
// changes the keys of that family's kernels (and of the kernels that include it), not the others'; a
// shared header changes every key whose closure holds it.
TEST_CASE("kernel key: a template edit invalidates only the kernels whose include closure holds it") {
  using attnjit::jit::EmbeddedTemplate;
  const auto embedded = attnjit::jit::embedded_templates();
  const std::vector<std::string> paged = attnjit::jit::template_closure("kv_cache/paged_kv_write.cuh", embedded);
  const std::vector<std::string> bsa = attnjit::jit::template_closure("bsa/bsa_bwd_hopper.cuh", embedded);
  CHECK(std::is_sorted(paged.begin(), paged.end()));
  CHECK(std::find(paged.begin(), paged.end(), "common/numeric.cuh") != paged.end());
  CHECK(std::find(paged.begin(), paged.end(), "kv_cache/paged_kv_write.cuh") != paged.end());
  CHECK(std::find(paged.begin(), paged.end(), "kv_cache/paged_kv_write_params.cuh") != paged.end());
  CHECK(std::find(paged.begin(), paged.end(), "bsa/bsa_bwd.cuh") == paged.end());
  for (const char* f : {"bsa/bsa_bwd.cuh", "common/attention_bwd.cuh", "hopper/attention_bwd.cuh", "hopper/sm90.cuh"})
    CHECK(std::find(bsa.begin(), bsa.end(), f) != bsa.end());

  // A copy of the embedded set with one template's text edited.
  auto edited = [&](const std::string& path) {
    std::vector<EmbeddedTemplate> set(embedded.begin(), embedded.end());
    static std::vector<std::string> texts;  // keeps the edited texts alive
    for (auto& t : set)
      if (path == t.path) {
        texts.push_back(std::string(t.text) + "\n// edited\n");
        t.text = texts.back().c_str();
      }
    return set;
  };
  auto digest = [](const char* file, std::span<const EmbeddedTemplate> set) {
    return attnjit::jit::template_closure_sha256(file, set);
  };
  const std::string paged0 = digest("kv_cache/paged_kv_write.cuh", embedded);
  const std::string bsa0 = digest("bsa/bsa_bwd_hopper.cuh", embedded);
  const std::string dense0 = digest("dense/gqa_bwd.cuh", embedded);
  CHECK(paged0 == attnjit::jit::template_closure_sha256("kv_cache/paged_kv_write.cuh"));
  CHECK(paged0 != bsa0);

  const auto family = edited("bsa/bsa_bwd.cuh");  // one family's template
  CHECK(digest("bsa/bsa_bwd_hopper.cuh", family) != bsa0);
  CHECK(digest("kv_cache/paged_kv_write.cuh", family) == paged0);
  CHECK(digest("dense/gqa_bwd.cuh", family) == dense0);

  const auto shared = edited("common/attention_bwd.cuh");  // the backward core both backward ops include
  CHECK(digest("bsa/bsa_bwd_hopper.cuh", shared) != bsa0);
  CHECK(digest("dense/gqa_bwd.cuh", shared) != dense0);
  CHECK(digest("kv_cache/paged_kv_write.cuh", shared) == paged0);

  // Through the key: the same spec, another closure digest, another key.
  const auto key0 = make_kernel_key(base_spec(), base_options(), kNvrtc);
  CHECK(make_kernel_key(base_spec(), base_options(), kNvrtc, digest("kv_cache/paged_kv_write.cuh", family)).hex ==
        key0.hex);
  CHECK(make_kernel_key(base_spec(), base_options(), kNvrtc,
                        digest("kv_cache/paged_kv_write.cuh", edited("kv_cache/paged_kv_write_params.cuh")))
            .hex != key0.hex);
}
