// The argument table of every op, as JSON (op_signatures.cpp says what each entry holds).
#pragma once
#include <nlohmann/json.hpp>
#include <string_view>

namespace attnjit::detail {
// An array with one object per op.
const nlohmann::json& op_signatures();
// One op's entry; throws InvalidArgument naming the known ops for an unknown name.
const nlohmann::json& op_signature(std::string_view op);
}  // namespace attnjit::detail
