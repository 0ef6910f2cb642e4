#include "ops/base/op.hpp"

#include <fmt/format.h>

#include <cmath>

#include "attnjit/error.hpp"
#include "runtime/tensor_checks.hpp"

namespace attnjit::detail {

std::string_view backend_name(Backend b) {
  switch (b) {
    case Backend::kAuto: return "auto";
    case Backend::kPortable: return "portable";
    case Backend::kHopper: return "hopper";
  }
  return "?";
}

ConfigReader::ConfigReader(std::string_view op, const nlohmann::json& config, std::vector<std::string> keys)
    : op_(op), config_(config) {
  if (!config.is_object()) throw InvalidArgument(fmt::format("{}: param: config: expected a JSON object, got {}", op, config.dump()));
  keys.push_back("impl");
  keys.push_back("backend");
  for (const auto& [k, v] : config.items()) {
    bool known = false;
    for (const auto& allowed : keys) known = known || allowed == k;
    if (!known) {
      std::string list;
      for (const auto& allowed : keys) list += (list.empty() ? "" : ", ") + allowed;
      throw InvalidArgument(fmt::format("{}: param: {}: expected one of {}, got an unknown parameter", op, k, list));
    }
  }
  std::string impl = get_string("impl", "kernel");
  if (impl == "kernel") impl_ = Impl::kKernel;
  else if (impl == "reference") impl_ = Impl::kReference;
  else throw InvalidArgument(fmt::format("{}: param: impl: expected \"kernel\" or \"reference\", got \"{}\"", op, impl));
  std::string backend = get_string("backend", "auto");
  if (backend == "auto") backend_ = Backend::kAuto;
  else if (backend == "portable") backend_ = Backend::kPortable;
  else if (backend == "hopper") backend_ = Backend::kHopper;
  else
    throw InvalidArgument(
        fmt::format("{}: param: backend: expected \"auto\", \"portable\" or \"hopper\", got \"{}\"", op, backend));
}

bool ConfigReader::get_bool(const std::string& key, bool fallback) const {
  if (!has(key)) return fallback;
  if (!config_[key].is_boolean())
    throw InvalidArgument(fmt::format("{}: param: {}: expected a boolean, got {}", op_, key, config_[key].dump()));
  return config_[key].get<bool>();
}

double ConfigReader::get_number(const std::string& key, double fallback) const {
  if (!has(key)) return fallback;
  if (!config_[key].is_number())
    throw InvalidArgument(fmt::format("{}: param: {}: expected a number, got {}", op_, key, config_[key].dump()));
  // NOTE: every numeric parameter is an integer or a scale far inside 2^53; past that the ops' casts to
  // integers would overflow (UB), so the bound is checked once here.
  const double v = config_[key].get<double>();
  if (!(std::fabs(v) <= 9007199254740992.0))
    throw InvalidArgument(fmt::format("{}: param: {}: expected a finite number of magnitude at most 2^53, got {}", op_,
                                      key, v));
  return v;
}

std::string ConfigReader::get_string(const std::string& key, const std::string& fallback) const {
  if (!has(key)) return fallback;
  if (!config_[key].is_string())
    throw InvalidArgument(fmt::format("{}: param: {}: expected a string, got {}", op_, key, config_[key].dump()));
  return config_[key].get<std::string>();
}

Plan OpInstance::plan(const TensorArgs& tensors) {
  check_tensor_args(tensors, name_);
  try {
    return plan_for(tensors);
  } catch (const std::bad_alloc&) {
    throw_allocation_failure(tensors, name_);
  } catch (const Error&) {
    rethrow_with_op(name_);
  }
}

}  // namespace attnjit::detail
