#include "base/logging.hpp"

#include <spdlog/sinks/stdout_color_sinks.h>

#include <cstdlib>

namespace attnjit {

spdlog::logger& logger() {
  static std::shared_ptr<spdlog::logger> instance = [] {
    auto existing = spdlog::get("attnjit");
    if (existing) return existing;
    auto l = spdlog::stderr_color_mt("attnjit");
    l->set_pattern("[attnjit %L] %v");
    const char* env = std::getenv("ATTNJIT_LOG_LEVEL");
    l->set_level(env ? spdlog::level::from_str(env) : spdlog::level::warn);
    return l;
  }();
  return *instance;
}

void set_log_level(std::string_view level) {
  logger().set_level(spdlog::level::from_str(std::string(level)));
}

}  // namespace attnjit
