#include "attnjit/config.hpp"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "attnjit/error.hpp"

namespace attnjit {

namespace {

nlohmann::json to_json(const Config::Value& v) {
  return std::visit([](const auto& x) { return nlohmann::json(x); }, v);
}

}  // namespace

Config::Config(std::initializer_list<std::pair<std::string_view, Value>> items) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [k, v] : items) j[std::string(k)] = to_json(v);
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
  j[std::string(key)] = to_json(value);
  json_ = j.dump();
  return *this;
}

}  // namespace attnjit
