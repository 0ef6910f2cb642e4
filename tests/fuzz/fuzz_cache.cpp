// libFuzzer target over cache directories: builds a cache of a few entries from the input (manifest
// text, cubin bytes, file kinds: regular, missing, FIFO, symlink, directory; stale staging directories)
// and runs every DiskCache operation a command runs: load, list with and without verification,
// publish (with a size cap, which prunes), remove, prune, clear, sweep_stale, count_stale. Nothing may
// throw, block or crash; an entry that loads must match what verification promises.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "jit/disk_cache.hpp"
#include "jit/sha256.hpp"

namespace fs = std::filesystem;
using attnjit::jit::CacheEntry;
using attnjit::jit::DiskCache;
using attnjit::jit::sha256_hex;

namespace {

struct Reader {
  const uint8_t* d;
  size_t n, i = 0;
  uint8_t u8() { return i < n ? d[i++] : 0; }
  std::string str(size_t max) {
    size_t len = u8() | (size_t{u8()} << 8);
    if (len > max) len = max;
    std::string s;
    while (len-- && i < n) s.push_back(static_cast<char>(d[i++]));
    return s;
  }
};

const fs::path& root() {
  static const fs::path p = [] {
    char tmpl[] = "/tmp/attnjit-fuzz-cache-XXXXXX";
    const char* made = ::mkdtemp(tmpl);
    return fs::path(made ? made : "/tmp/attnjit-fuzz-cache");
  }();
  // NOTE: registered after p is built, so it runs before p's destructor.
  static const bool cleanup = std::atexit([] {
    std::error_code ec;
    fs::remove_all(p, ec);
  }) == 0;
  (void)cleanup;
  return p;
}

void write(const fs::path& p, const std::string& s) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out << s;
}

// A manifest: either the fuzzer's own text, or a well-formed one with one field replaced by fuzz JSON.
std::string manifest_for(Reader& r, const std::string& key, const std::string& ser, const std::string& cubin) {
  const uint8_t how = r.u8();
  if (how % 3 == 0) return r.str(2048);
  nlohmann::json m = {{"key", key},        {"key_serialisation", ser}, {"describe", "fuzz"},
                      {"lowered_name", "_Z1fv"}, {"cubin_bytes", cubin.size()},
                      {"cubin_sha256", sha256_hex(cubin)}};
  if (how % 3 == 1) {
    static const char* const fields[] = {"key", "key_serialisation", "describe", "lowered_name", "cubin_bytes",
                                         "cubin_sha256", "created"};
    auto v = nlohmann::json::parse(r.str(256), nullptr, false);
    m[fields[r.u8() % 7]] = v.is_discarded() ? nlohmann::json(r.u8()) : v;
  }
  return m.dump();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Reader r{data, size};
  const fs::path dir = root() / "c";
  std::error_code ec;
  fs::remove_all(dir, ec);
  fs::create_directories(dir / "v1", ec);
  const int entries = 1 + r.u8() % 4;
  std::vector<CacheEntry> good;
  for (int e = 0; e < entries; ++e) {
    const std::string ser = "fuzz-" + std::to_string(e);
    const std::string key = (r.u8() & 1) ? sha256_hex(ser) : sha256_hex(ser + "-other");
    const fs::path kd = dir / "v1" / key;
    std::string cubin = r.str(512);
    const uint8_t kind = r.u8();
    switch (kind % 6) {
      case 0: fs::create_symlink(dir / "nowhere", kd, ec); break;
      case 1: fs::create_symlink(kd, kd, ec); break;
      case 2: write(kd, cubin); break;
      default: {
        fs::create_directories(kd, ec);
        const std::string m = manifest_for(r, key, ser, cubin);
        for (const char* file : {"manifest.json", "kernel.cubin", "last_used"}) {
          const uint8_t fk = r.u8() % 8;
          const fs::path p = kd / file;
          const std::string& body = std::string(file) == "manifest.json" ? m : cubin;
          if (fk == 0) continue;                                   // missing
          if (fk == 1) ::mkfifo(p.c_str(), 0644);                  // a FIFO
          else if (fk == 2) fs::create_symlink(dir / "nowhere", p, ec);
          else if (fk == 3) fs::create_directories(p, ec);
          else write(p, body);
        }
      }
    }
    CacheEntry g;
    g.key = sha256_hex(ser);
    g.cubin = cubin;
    g.manifest = {{"key", g.key}, {"key_serialisation", ser}, {"describe", "fuzz"}, {"lowered_name", "_Z1fv"},
                  {"cubin_bytes", cubin.size()}, {"cubin_sha256", sha256_hex(cubin)}};
    good.push_back(std::move(g));
  }
  if (r.u8() & 1) {
    fs::create_directories(dir / "v1" / ".staging-1-fuzz" / "x", ec);
    fs::last_write_time(dir / "v1" / ".staging-1-fuzz", fs::file_time_type::clock::now() - std::chrono::hours(3), ec);
  }
  DiskCache::Settings s;
  s.dir = dir;
  s.read_only = r.u8() % 4 == 0;
  s.max_bytes = r.u8() % 3 == 0 ? 600 : 0;
  DiskCache disk(s);
  disk.count_stale();
  disk.list(false);
  for (const auto& info : disk.list(true)) {
    auto loaded = disk.load(info.key);
    // A loaded entry is one that verified: its bytes hash to what its manifest says.
    if (loaded && sha256_hex(loaded->cubin) != loaded->manifest.at("cubin_sha256").get<std::string>()) std::abort();
    if (loaded && loaded->manifest.at("key").get<std::string>() != info.key) std::abort();
  }
  for (const auto& g : good) {
    disk.publish(g);
    auto back = disk.load(g.key);
    if (!s.read_only && s.max_bytes == 0 && disk.writable() && (!back || back->cubin != g.cubin)) std::abort();  // republished
  }
  const uint8_t last = r.u8() % 4;
  if (last == 0) disk.prune(r.u8());
  else if (last == 1) disk.clear();
  else if (last == 2) disk.sweep_stale();
  else if (!good.empty()) disk.remove(good[0].key);
  disk.total_bytes();
  return 0;
}
