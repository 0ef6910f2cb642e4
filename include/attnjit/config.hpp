// attnjit: an op's construction-time parameters (SPEC.md's parameter table, plus "impl" and
// "backend"), without exposing a JSON library in the public API. Build one from a brace list,
//   rt.op("topk_select", {{"topk", 64}});   rt.op("gqa_fwd", {{"is_causal", false}, {"impl", "reference"}});
// or from JSON text (Config::parse), which also carries values a brace list cannot (null).
#pragma once
#include <attnjit/export.hpp>

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace attnjit {

class ATTNJIT_API Config {
 public:
  using Value = std::variant<bool, std::int64_t, double, std::string>;

  Config() = default;
  Config(std::initializer_list<std::pair<std::string_view, Value>> items);
  // JSON text of an object; "" is the empty config. Throws InvalidArgument for anything else.
  static Config parse(std::string_view json);

  // Adds or replaces one key.
  Config& set(std::string_view key, Value value);
  // Canonical JSON text (keys sorted): what op instances are cached by.
  const std::string& json() const { return json_; }
  bool empty() const { return json_ == "{}"; }

 private:
  std::string json_ = "{}";
};

}  // namespace attnjit
