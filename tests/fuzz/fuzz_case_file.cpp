// libFuzzer target over JSON case files (tools/test_case.cpp): parse_test_cases on the input text, then
// every tensor's host storage (init kinds) and goldens for cases small enough to fill. Malformed input
// must be a std::exception, never a crash, a hang or an unbounded allocation.
#include <cstdint>
#include <exception>
#include <string>

#include "test_case.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    auto cases = attnjit::cli::parse_test_cases(text, "fuzz.json");
    for (const auto& c : cases) {
      for (const auto& t : c.tensors) {
        if (t.storage_elements() > (1 << 16)) continue;
        try {
          auto h = attnjit::cli::make_host_tensor(t, c.seed);
          if (c.golden.is_object() && c.golden.contains(t.name)) attnjit::cli::golden_tensor(t, c.golden[t.name]);
          (void)h;
        } catch (const std::exception&) {
        }
      }
    }
  } catch (const std::exception&) {
  }
  return 0;
}
