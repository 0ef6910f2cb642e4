#include "attnjit/config.hpp"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include <cmath>

#include "attnjit/error.hpp"

namespace attnjit {

namespace {

// NOTE: JSON text cannot hold inf or NaN (they would dump as null, i.e. "unset"), so a non-finite
// number is refused here, naming the key; the op's own range checks see every finite value.
nlohmann::json to_json(std::string_view key, const Config::Value& v) {
  if (const double* d = std::get_if<double>(&v); d && !std::isfinite(*d))
    throw InvalidArgument(fmt::format("config: param: {}: expected a finite number, got {}", key, *d));
  return std::visit([](const auto& x) { return nlohmann::json(x); }, v);
}

}  // namespace

Config::Config(std::initializer_list<std::pair<std::string_view, Value>> items) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [k, v] : items) j[std::string(k)] = to_json(k, v);
  json_ = j.dump();
}

Config Config::parse(std::string_view text) {
  Config c;
  if (text.empty()) return c;
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded()) throw InvalidArgument(fmt::format("config_json: expected valid JSON, got '{}'", text));
  if (j.is_null()) return c;
  // NOTE: a value that is not an object is kept: the op refuses it, naming itself ("<op>: param: config").
  c.json_ = j.dump();
  return c;
}

Config& Config::set(std::string_view key, Value value) {
  auto j = nlohmann::json::parse(json_);
  j[std::string(key)] = to_json(key, value);
  json_ = j.dump();
  return *this;
}

}  // namespace attnjit
