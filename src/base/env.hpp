// Reading ATTNJIT_* environment variables: the parsers RuntimeOptions::from_env (src/runtime/options.cpp)
// and the tuning map (src/ops/base/tuning.cpp) share. Bad values raise InvalidArgument naming the
// variable, the rule and the value ("environment: NAME: expected ..., got '...'").
#pragma once
#include <cstdint>

namespace attnjit::env {

// The variable's value, or nullptr when it is unset or empty.
const char* get(const char* name);
// 1/true/yes/on or 0/false/no/off.
bool parse_bool(const char* name, const char* v);
// An integer in [0, 86400000].
int parse_nonneg_int(const char* name, const char* v);
// A non-negative byte count, optionally with a K/M/G (KiB/MiB/GiB) suffix, powers of 1024.
std::uint64_t parse_bytes(const char* name, const char* v);

}  // namespace attnjit::env
