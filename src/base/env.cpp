#include "base/env.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <cstdlib>
#include <string>

#include "attnjit/error.hpp"

namespace attnjit::env {

const char* get(const char* name) {
  const char* v = std::getenv(name);
  return (v && *v) ? v : nullptr;
}

bool parse_bool(const char* name, const char* v) {
  std::string s(v);
  if (s == "1" || s == "true" || s == "yes" || s == "on") return true;
  if (s == "0" || s == "false" || s == "no" || s == "off") return false;
  throw InvalidArgument(fmt::format("environment: {}: expected 0/1/true/false, got '{}'", name, s));
}

int parse_nonneg_int(const char* name, const char* v) {
  errno = 0;
  char* end = nullptr;
  long n = std::strtol(v, &end, 10);
  if (errno == ERANGE || end == v || *end != '\0' || n < 0 || n > 86400000)
    throw InvalidArgument(fmt::format("environment: {}: expected an integer in [0, 86400000], got '{}'", name, v));
  return static_cast<int>(n);
}

std::uint64_t parse_bytes(const char* name, const char* v) {
  auto bad = [&] {
    return InvalidArgument(
        fmt::format("environment: {}: expected a byte count such as 4294967296 or 4G, got '{}'", name, v));
  };
  if (!(*v >= '0' && *v <= '9')) throw bad();
  errno = 0;
  char* end = nullptr;
  unsigned long long n = std::strtoull(v, &end, 10);
  if (errno == ERANGE) throw bad();
  std::string suffix(end ? end : "");
  std::uint64_t mul = 1;
  if (suffix == "K" || suffix == "KiB") mul = 1ull << 10;
  else if (suffix == "M" || suffix == "MiB") mul = 1ull << 20;
  else if (suffix == "G" || suffix == "GiB") mul = 1ull << 30;
  else if (!suffix.empty()) throw bad();
  if (n > UINT64_MAX / mul) throw bad();
  return n * mul;
}

}  // namespace attnjit::env
