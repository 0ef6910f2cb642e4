// The library's logger: spdlog logger named "attnjit" (a host can fetch it with spdlog::get and
// redirect its sinks). Never printf.
#pragma once
#include <spdlog/spdlog.h>

#include <string_view>

namespace attnjit {
spdlog::logger& logger();
void set_log_level(std::string_view level);
}  // namespace attnjit
