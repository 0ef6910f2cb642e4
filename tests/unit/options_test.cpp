// RuntimeOptions (include/attnjit/runtime.hpp, src/runtime/options.cpp): the ATTNJIT_* variables,
// the JSON form and the cache directory defaults. Every test restores the environment.
#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "attnjit/runtime.hpp"
#include "ops/base/tuning.hpp"
#include "test_util.hpp"

namespace {
// RuntimeOptions::from_json takes JSON text; these tests write the objects inline.
attnjit::RuntimeOptions options_from(const nlohmann::json& j,
                                     attnjit::RuntimeOptions base = attnjit::RuntimeOptions::from_env()) {
  return attnjit::RuntimeOptions::from_json(j.dump(), std::move(base));
}
}  // namespace

namespace {

namespace test = attnjit::test;
using attnjit::RuntimeOptions;

// The library's baked-in default directory (empty unless configured).
const std::string kBakedDefault = ATTNJIT_DEFAULT_CACHE_DIR;

}  // namespace

TEST_CASE("options: from_env with nothing set gives the defaults") {
  test::EnvGuard env(test::attnjit_env_names());
  env.unset_all();
  const RuntimeOptions o = RuntimeOptions::from_env();
  const RuntimeOptions d;
  CHECK(o.cache_dir.empty());
  CHECK(o.cache_read_only == false);
  CHECK(o.cache_disabled == false);
  CHECK(o.cache_max_bytes == (4ull << 30));
  CHECK(o.lock_dir.empty());
  CHECK(o.lock_timeout_ms == 60000);
  CHECK(o.no_jit == false);
  CHECK(o.dump_sources_dir.empty());
  CHECK(o.lineinfo == false);
  CHECK(o.log_level == "warn");
  CHECK(o.arch.empty());
  CHECK(o.tune == "{}");
  const auto t = attnjit::ops::Tuning::read(attnjit::ops::Tuning::parse_text(o.tune));
  CHECK(t.gqa_tile.empty());
  CHECK(t.decode_tile.empty());
  CHECK(t.decode_splits == 0);
  CHECK(t.li_force_slab == false);
  CHECK(t.gqa_fwd_persistent == false);
  CHECK(d.cache_max_bytes == o.cache_max_bytes);
}

TEST_CASE("options: from_env reads every ATTNJIT_* variable") {
  test::EnvGuard env(test::attnjit_env_names());
  env.unset_all();
  SUBCASE("ATTNJIT_CACHE_DIR") {
    env.set("ATTNJIT_CACHE_DIR", "/some/cache");
    CHECK(RuntimeOptions::from_env().cache_dir == "/some/cache");
  }
  SUBCASE("ATTNJIT_CACHE_READONLY") {
    for (const char* v : {"1", "true", "yes", "on"}) {
      env.set("ATTNJIT_CACHE_READONLY", v);
      CHECK(RuntimeOptions::from_env().cache_read_only);
    }
    for (const char* v : {"0", "false", "no", "off"}) {
      env.set("ATTNJIT_CACHE_READONLY", v);
      CHECK(!RuntimeOptions::from_env().cache_read_only);
    }
  }
  SUBCASE("ATTNJIT_CACHE_DISABLE") {
    env.set("ATTNJIT_CACHE_DISABLE", "1");
    CHECK(RuntimeOptions::from_env().cache_disabled);
  }
  SUBCASE("ATTNJIT_CACHE_MAX_BYTES") {
    env.set("ATTNJIT_CACHE_MAX_BYTES", "12345");
    CHECK(RuntimeOptions::from_env().cache_max_bytes == 12345);
    env.set("ATTNJIT_CACHE_MAX_BYTES", "0");
    CHECK(RuntimeOptions::from_env().cache_max_bytes == 0);
    env.set("ATTNJIT_CACHE_MAX_BYTES", "16K");
    CHECK(RuntimeOptions::from_env().cache_max_bytes == 16 * 1024);
    env.set("ATTNJIT_CACHE_MAX_BYTES", "3M");
    CHECK(RuntimeOptions::from_env().cache_max_bytes == 3ull << 20);
    env.set("ATTNJIT_CACHE_MAX_BYTES", "4G");
    CHECK(RuntimeOptions::from_env().cache_max_bytes == 4ull << 30);
    env.set("ATTNJIT_CACHE_MAX_BYTES", "2GiB");
    CHECK(RuntimeOptions::from_env().cache_max_bytes == 2ull << 30);
  }
  SUBCASE("ATTNJIT_LOCK_DIR") {
    env.set("ATTNJIT_LOCK_DIR", "/tmp/locks");
    CHECK(RuntimeOptions::from_env().lock_dir == "/tmp/locks");
  }
  SUBCASE("ATTNJIT_LOCK_TIMEOUT_MS") {
    env.set("ATTNJIT_LOCK_TIMEOUT_MS", "250");
    CHECK(RuntimeOptions::from_env().lock_timeout_ms == 250);
  }
  SUBCASE("ATTNJIT_NO_JIT") {
    env.set("ATTNJIT_NO_JIT", "true");
    CHECK(RuntimeOptions::from_env().no_jit);
  }
  SUBCASE("ATTNJIT_DUMP_SOURCES") {
    env.set("ATTNJIT_DUMP_SOURCES", "/tmp/dump");
    CHECK(RuntimeOptions::from_env().dump_sources_dir == "/tmp/dump");
  }
  SUBCASE("ATTNJIT_LINEINFO") {
    env.set("ATTNJIT_LINEINFO", "1");
    CHECK(RuntimeOptions::from_env().lineinfo);
  }
  SUBCASE("ATTNJIT_LOG_LEVEL") {
    env.set("ATTNJIT_LOG_LEVEL", "debug");
    CHECK(RuntimeOptions::from_env().log_level == "debug");
  }
  SUBCASE("ATTNJIT_ARCH") {
    env.set("ATTNJIT_ARCH", "sm_80");
    CHECK(RuntimeOptions::from_env().arch == "sm_80");
  }
  SUBCASE("ATTNJIT_TUNE_GQA_TILE, ATTNJIT_TUNE_DECODE_TILE") {
    env.set("ATTNJIT_TUNE_GQA_TILE", "128x64x4");
    env.set("ATTNJIT_TUNE_DECODE_TILE", "128x8");
    CHECK(attnjit::ops::Tuning::read(nullptr).gqa_tile == "128x64x4");
    CHECK(attnjit::ops::Tuning::read(nullptr).decode_tile == "128x8");
    // the options' "tune" object goes over the environment
    CHECK(attnjit::ops::Tuning::read({{"gqa_tile", "64x32x4"}}).gqa_tile == "64x32x4");
    CHECK(attnjit::ops::Tuning::read({{"gqa_tile", "64x32x4"}}).decode_tile == "128x8");
  }
  SUBCASE("ATTNJIT_TUNE_DECODE_SPLITS") {
    env.set("ATTNJIT_TUNE_DECODE_SPLITS", "96");
    CHECK(attnjit::ops::Tuning::read(nullptr).decode_splits == 96);
  }
  SUBCASE("ATTNJIT_TUNE_LI_FORCE_SLAB") {
    env.set("ATTNJIT_TUNE_LI_FORCE_SLAB", "1");
    CHECK(attnjit::ops::Tuning::read(nullptr).li_force_slab);
    env.set("ATTNJIT_TUNE_LI_FORCE_SLAB", "0");
    CHECK(!attnjit::ops::Tuning::read(nullptr).li_force_slab);
    const auto o = options_from({{"tune", {{"li_force_slab", true}}}}, RuntimeOptions::from_env());
    CHECK(attnjit::ops::Tuning::read(attnjit::ops::Tuning::parse_text(o.tune)).li_force_slab);
  }
  SUBCASE("ATTNJIT_TUNE_LATENT_TILE") {
    env.set("ATTNJIT_TUNE_LATENT_TILE", "48");
    CHECK(attnjit::ops::Tuning::read(nullptr).latent_tile == 48);
    CHECK(attnjit::ops::Tuning::read({{"latent_tile", 32}}).latent_tile == 32);
    CHECK_THROWS_AS(attnjit::ops::Tuning::read({{"latent_tile", "wide"}}), attnjit::InvalidArgument);
  }
  SUBCASE("ATTNJIT_TUNE_NSA_SELECTED_TILE") {
    env.set("ATTNJIT_TUNE_NSA_SELECTED_TILE", "16x2");
    CHECK(attnjit::ops::Tuning::read(nullptr).nsa_selected_tile == "16x2");
    CHECK(attnjit::ops::Tuning::read({{"nsa_selected_tile", "64x2x4"}}).nsa_selected_tile == "64x2x4");
    CHECK_THROWS_AS(attnjit::ops::Tuning::read({{"nsa_selected_tile", 16}}), attnjit::InvalidArgument);
  }
  SUBCASE("ATTNJIT_TUNE_NSA_TOPK_TILE") {
    env.set("ATTNJIT_TUNE_NSA_TOPK_TILE", "32x2");
    CHECK(attnjit::ops::Tuning::read(nullptr).nsa_topk_tile == "32x2");
    CHECK(attnjit::ops::Tuning::read({{"nsa_topk_tile", "128x3"}}).nsa_topk_tile == "128x3");
    CHECK_THROWS_AS(attnjit::ops::Tuning::read({{"nsa_topk_tile", 64}}), attnjit::InvalidArgument);
  }
  SUBCASE("ATTNJIT_TUNE_GQA_BWD_BAND") {
    CHECK(attnjit::ops::Tuning::read(nullptr).gqa_bwd_band == 0);
    env.set("ATTNJIT_TUNE_GQA_BWD_BAND", "3");
    CHECK(attnjit::ops::Tuning::read(nullptr).gqa_bwd_band == 3);
    CHECK(attnjit::ops::Tuning::read({{"gqa_bwd_band", 8}}).gqa_bwd_band == 8);
    CHECK_THROWS_AS(attnjit::ops::Tuning::read({{"gqa_bwd_band", -1}}), attnjit::InvalidArgument);
    CHECK_THROWS_AS(attnjit::ops::Tuning::read({{"gqa_bwd_band", "wide"}}), attnjit::InvalidArgument);
  }
  SUBCASE("ATTNJIT_TUNE_GQA_FWD_PERSISTENT") {
    CHECK(!attnjit::ops::Tuning::read(nullptr).gqa_fwd_persistent);  // off by default (0-7% on an H100)
    env.set("ATTNJIT_TUNE_GQA_FWD_PERSISTENT", "0");
    CHECK(!attnjit::ops::Tuning::read(nullptr).gqa_fwd_persistent);
    CHECK(attnjit::ops::Tuning::read({{"gqa_fwd_persistent", true}}).gqa_fwd_persistent);
    env.set("ATTNJIT_TUNE_GQA_FWD_PERSISTENT", "1");
    CHECK(attnjit::ops::Tuning::read(nullptr).gqa_fwd_persistent);
    CHECK(!attnjit::ops::Tuning::read({{"gqa_fwd_persistent", false}}).gqa_fwd_persistent);
    CHECK_THROWS_AS(attnjit::ops::Tuning::read({{"gqa_fwd_persistent", 1}}), attnjit::InvalidArgument);
  }
  SUBCASE("ATTNJIT_TUNE_GQA_FWD_Q_TMA") {
    CHECK(attnjit::ops::Tuning::read(nullptr).gqa_fwd_q_tma);  // on by default (validated on an H100)
    env.set("ATTNJIT_TUNE_GQA_FWD_Q_TMA", "0");
    CHECK(!attnjit::ops::Tuning::read(nullptr).gqa_fwd_q_tma);
    env.set("ATTNJIT_TUNE_GQA_FWD_Q_TMA", "1");
    CHECK(attnjit::ops::Tuning::read(nullptr).gqa_fwd_q_tma);
    CHECK(!attnjit::ops::Tuning::read({{"gqa_fwd_q_tma", false}}).gqa_fwd_q_tma);
    env.set("ATTNJIT_TUNE_GQA_FWD_Q_TMA", "0");
    CHECK(attnjit::ops::Tuning::read({{"gqa_fwd_q_tma", true}}).gqa_fwd_q_tma);
    CHECK_THROWS_AS(attnjit::ops::Tuning::read({{"gqa_fwd_q_tma", "yes"}}), attnjit::InvalidArgument);
  }
  SUBCASE("ATTNJIT_TUNE_GQA_BWD_HOPPER_D256") {
    CHECK(attnjit::ops::Tuning::read(nullptr).gqa_bwd_hopper_d256);  // on by default (validated on an H100)
    env.set("ATTNJIT_TUNE_GQA_BWD_HOPPER_D256", "0");
    CHECK(!attnjit::ops::Tuning::read(nullptr).gqa_bwd_hopper_d256);
    env.set("ATTNJIT_TUNE_GQA_BWD_HOPPER_D256", "1");
    CHECK(attnjit::ops::Tuning::read(nullptr).gqa_bwd_hopper_d256);
    CHECK(!attnjit::ops::Tuning::read({{"gqa_bwd_hopper_d256", false}}).gqa_bwd_hopper_d256);
    env.set("ATTNJIT_TUNE_GQA_BWD_HOPPER_D256", "0");
    CHECK(attnjit::ops::Tuning::read({{"gqa_bwd_hopper_d256", true}}).gqa_bwd_hopper_d256);
    CHECK_THROWS_AS(attnjit::ops::Tuning::read({{"gqa_bwd_hopper_d256", 1}}), attnjit::InvalidArgument);
  }
  SUBCASE("an empty value counts as unset") {
    env.set("ATTNJIT_CACHE_DIR", "");
    env.set("ATTNJIT_NO_JIT", "");
    CHECK(RuntimeOptions::from_env().cache_dir.empty());
    CHECK(!RuntimeOptions::from_env().no_jit);
  }
}

TEST_CASE("options: bad environment values throw InvalidArgument naming the variable") {
  test::EnvGuard env(test::attnjit_env_names());
  env.unset_all();
  std::string var, value;
  SUBCASE("max bytes: letters") { var = "ATTNJIT_CACHE_MAX_BYTES", value = "abc"; }
  SUBCASE("max bytes: unknown suffix") { var = "ATTNJIT_CACHE_MAX_BYTES", value = "4X"; }
  SUBCASE("max bytes: trailing junk") { var = "ATTNJIT_CACHE_MAX_BYTES", value = "12 34"; }
  SUBCASE("read-only: not a boolean") { var = "ATTNJIT_CACHE_READONLY", value = "maybe"; }
  SUBCASE("disable: not a boolean") { var = "ATTNJIT_CACHE_DISABLE", value = "2"; }
  SUBCASE("no-JIT: not a boolean") { var = "ATTNJIT_NO_JIT", value = "TRUEISH"; }
  SUBCASE("lineinfo: not a boolean") { var = "ATTNJIT_LINEINFO", value = "y"; }
  SUBCASE("li force slab: not a boolean") { var = "ATTNJIT_TUNE_LI_FORCE_SLAB", value = "yes please"; }
  SUBCASE("decode splits: not a count") { var = "ATTNJIT_TUNE_DECODE_SPLITS", value = "-3"; }
  SUBCASE("gqa_bwd band: not a count") { var = "ATTNJIT_TUNE_GQA_BWD_BAND", value = "two"; }
  SUBCASE("gqa_fwd persistent: not a boolean") { var = "ATTNJIT_TUNE_GQA_FWD_PERSISTENT", value = "sometimes"; }
  SUBCASE("gqa_fwd Q by TMA: not a boolean") { var = "ATTNJIT_TUNE_GQA_FWD_Q_TMA", value = "maybe"; }
  SUBCASE("gqa_bwd hopper D 256: not a boolean") { var = "ATTNJIT_TUNE_GQA_BWD_HOPPER_D256", value = "enabled"; }
  CAPTURE(var);
  CAPTURE(value);
  env.set(var, value);
  try {
    // the tuning variables are read where the runtime is created (ops/base/tuning.cpp)
    if (var.rfind("ATTNJIT_TUNE_", 0) == 0) attnjit::ops::Tuning::read(nullptr);
    else RuntimeOptions::from_env();
    FAIL("from_env accepted a bad value");
  } catch (const attnjit::InvalidArgument& e) {
    CHECK(test::contains(e.what(), var));
    CHECK(test::contains(e.what(), value));
  }
}

TEST_CASE("options: from_json applies known keys and rejects unknown keys and wrong types") {
  RuntimeOptions base;
  base.cache_dir = "/from/base";
  base.lock_timeout_ms = 7;
  const auto o = options_from(
      {{"cache_dir", "/json/cache"}, {"cache_read_only", true}, {"cache_disabled", true},
       {"cache_max_bytes", 1024}, {"lock_dir", "/json/locks"}, {"no_jit", true}, {"dump_sources_dir", "/json/dump"},
       {"lineinfo", true}, {"log_level", "error"}, {"arch", "sm_80"}},
      base);
  CHECK(o.cache_dir == "/json/cache");
  CHECK(o.cache_read_only);
  CHECK(o.cache_disabled);
  CHECK(o.cache_max_bytes == 1024);
  CHECK(o.lock_dir == "/json/locks");
  CHECK(o.lock_timeout_ms == 7);  // untouched keys keep the base's value
  CHECK(o.no_jit);
  CHECK(o.dump_sources_dir == "/json/dump");
  CHECK(o.lineinfo);
  CHECK(o.log_level == "error");
  CHECK(o.arch == "sm_80");
  CHECK(options_from({{"lock_timeout_ms", 99}}, base).lock_timeout_ms == 99);
  CHECK(options_from(nullptr, base).cache_dir == "/from/base");
  CHECK(options_from(nlohmann::json::object(), base).cache_dir == "/from/base");

  try {
    options_from({{"cache_dirr", "/x"}}, base);
    FAIL("unknown key accepted");
  } catch (const attnjit::InvalidArgument& e) {
    CHECK(test::contains(e.what(), "cache_dirr"));
    CHECK(test::contains(e.what(), "unknown"));
  }
  try {
    options_from({{"cache_max_bytes", "lots"}}, base);
    FAIL("wrong type accepted");
  } catch (const attnjit::InvalidArgument& e) {
    CHECK(test::contains(e.what(), "cache_max_bytes"));
  }
  CHECK_THROWS_AS(options_from({{"no_jit", 1}}, base), attnjit::InvalidArgument);
  CHECK(options_from({{"tune", {{"decode_splits", 64}}}}, base).tune == R"({"decode_splits":64})");
  CHECK_THROWS_AS(options_from({{"tune", {{"decode_splits", -1}}}}, base), attnjit::InvalidArgument);
  CHECK_THROWS_AS(options_from({{"tune", {{"decode_split", 4}}}}, base), attnjit::InvalidArgument);
  CHECK_THROWS_AS(options_from({{"decode_splits", 64}}, base), attnjit::InvalidArgument);
  CHECK_THROWS_AS(options_from(nlohmann::json::array({1, 2}), base), attnjit::InvalidArgument);
  CHECK_THROWS_AS(options_from("cache_dir", base), attnjit::InvalidArgument);
}

TEST_CASE("options: from_json's default base is the environment") {
  test::EnvGuard env(test::attnjit_env_names());
  env.unset_all();
  env.set("ATTNJIT_LOCK_DIR", "/env/locks");
  env.set("ATTNJIT_CACHE_DIR", "/env/cache");
  const auto o = options_from({{"cache_dir", "/json/cache"}});
  CHECK(o.lock_dir == "/env/locks");
  CHECK(o.cache_dir == "/json/cache");
}

TEST_CASE("options: resolved_cache_dir precedence") {
  test::EnvGuard env(test::attnjit_env_names());
  env.unset_all();
  env.set("HOME", "/home/someone");
  env.set("XDG_CACHE_HOME", "/xdg/cache");
  env.set("ATTNJIT_CACHE_DIR", "/explicit/cache");
  // 1. ATTNJIT_CACHE_DIR (through from_env) or the field set in code.
  CHECK(RuntimeOptions::from_env().resolved_cache_dir() == "/explicit/cache");
  RuntimeOptions code;
  code.cache_dir = "/from/code";
  CHECK(code.resolved_cache_dir() == "/from/code");
  env.unset("ATTNJIT_CACHE_DIR");
  if (!kBakedDefault.empty()) {
    // A build configured with ATTNJIT_DEFAULT_CACHE_DIR uses it before the XDG/home defaults.
    CHECK(RuntimeOptions::from_env().resolved_cache_dir() == kBakedDefault);
    return;
  }
  // 2. $XDG_CACHE_HOME/attnjit
  CHECK(RuntimeOptions::from_env().resolved_cache_dir() == "/xdg/cache/attnjit");
  // 3. $HOME/.cache/attnjit
  env.unset("XDG_CACHE_HOME");
  CHECK(RuntimeOptions::from_env().resolved_cache_dir() == "/home/someone/.cache/attnjit");
  env.set("XDG_CACHE_HOME", "");
  CHECK(RuntimeOptions::from_env().resolved_cache_dir() == "/home/someone/.cache/attnjit");
  // Last resort: somewhere under the temp dir, never the working directory.
  env.unset("HOME");
  const std::string last = RuntimeOptions::from_env().resolved_cache_dir();
  CHECK(!last.empty());
  CHECK(test::starts_with(last, std::filesystem::temp_directory_path().string()));
}
