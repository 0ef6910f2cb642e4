#include "base/logging.hpp"

#include <spdlog/sinks/stdout_color_sinks.h>

#include <cstdlib>
#include <string_view>

#include "attnjit/error.hpp"

namespace attnjit {

spdlog::logger& logger() {
  static std::shared_ptr<spdlog::logger> instance = [] {
    auto existing = spdlog::get("attnjit");
    if (existing) return existing;
    auto l = spdlog::stderr_color_mt("attnjit");
    l->set_pattern("[attnjit %L] %v");
    // NOTE: an unknown value keeps warnings on here; RuntimeOptions::from_env() rejects it by name.
    const char* env = std::getenv("ATTNJIT_LOG_LEVEL");
    const auto level = env ? spdlog::level::from_str(env) : spdlog::level::warn;
    const bool known_off = env && std::string_view(env) == "off";
    l->set_level(level == spdlog::level::off && !known_off ? spdlog::level::warn : level);
    return l;
  }();
  return *instance;
}

void set_log_level(std::string_view level) {
  const auto parsed = spdlog::level::from_str(std::string(level));
  if (parsed == spdlog::level::off && level != "off")
    throw InvalidArgument(fmt::format("options: param: log_level: expected one of trace, debug, info, warn, error, "
                                      "critical, off, got '{}'", level));
  logger().set_level(parsed);
}

}  // namespace attnjit
