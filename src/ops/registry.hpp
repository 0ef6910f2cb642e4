// The one list of ops this build knows. Each op file registers its OpDefinition with a static
// OpRegistrar, so adding an op edits no central list; `rank` keeps the order `attnjit info` and the
// warm-up print stable (static initialisation order across files is unspecified).
#pragma once
#include <string_view>
#include <vector>

#include "ops/base/op.hpp"

namespace attnjit::detail {

// Every registered op, by rank.
const std::vector<OpDefinition>& op_definitions();
// Throws InvalidArgument "unknown op '<name>'; known ops: ..." for a name the build does not know.
const OpDefinition& find_op(std::string_view name);

struct OpRegistrar {
  OpRegistrar(int rank, OpDefinition (*make)());
};

}  // namespace attnjit::detail
