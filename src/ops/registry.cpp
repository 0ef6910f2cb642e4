#include "ops/registry.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <mutex>
#include <utility>

#include "attnjit/error.hpp"

namespace attnjit::detail {
namespace {

struct Entry {
  int rank;
  OpDefinition (*make)();
};

// NOTE: a function-local static, so registrars in other files may run before or after this file's
// own static initialisation.
std::vector<Entry>& entries() {
  static std::vector<Entry> e;
  return e;
}

}  // namespace

OpRegistrar::OpRegistrar(int rank, OpDefinition (*make)()) { entries().push_back({rank, make}); }

const std::vector<OpDefinition>& op_definitions() {
  static const std::vector<OpDefinition> defs = [] {
    std::vector<Entry> e = entries();
    std::stable_sort(e.begin(), e.end(), [](const Entry& a, const Entry& b) { return a.rank < b.rank; });
    std::vector<OpDefinition> d;
    d.reserve(e.size());
    for (const auto& x : e) d.push_back(x.make());
    return d;
  }();
  return defs;
}

const OpDefinition& find_op(std::string_view name) {
  for (const auto& d : op_definitions())
    if (d.name == name) return d;
  std::string known;
  for (const auto& d : op_definitions()) known += (known.empty() ? "" : ", ") + d.name;
  throw InvalidArgument(fmt::format("unknown op '{}'; known ops: {}", name, known));
}

}  // namespace attnjit::detail
