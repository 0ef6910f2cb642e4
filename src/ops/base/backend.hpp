// Backend selection: the gap reasons ("why backend X cannot serve this call") and the one message an
// explicit backend request that cannot be served raises.
#pragma once
#include <fmt/format.h>

#include <string>
#include <string_view>

#include "attnjit/error.hpp"
#include "ops/base/arch.hpp"
#include "ops/base/op.hpp"

namespace attnjit::ops {

// "" when `arch` runs the hopper kernels, else "it needs sm_90a (<needs>), the device is <arch>".
inline std::string hopper_arch_gap(const std::string& arch, std::string_view needs = "wgmma, TMA") {
  if (has_hopper_kernels(arch)) return "";
  return fmt::format("it needs {} ({}), the device is {}", kHopperArch, needs, arch);
}

// Throws Unsupported "<op>: unsupported: backend '<backend>': <gap>".
[[noreturn]] inline void throw_backend_gap(std::string_view op, std::string_view backend, std::string_view gap) {
  throw Unsupported(fmt::format("{}: unsupported: backend '{}': {}", op, backend, gap));
}
// The hopper backend was asked for and `gap` says why it cannot serve the call.
[[noreturn]] inline void throw_hopper_gap(std::string_view op, std::string_view gap) { throw_backend_gap(op, "hopper", gap); }

// Throws Unsupported "<op>: backend 'portable' needs sm_80 or newer, got <arch>" below sm_80.
inline void require_portable_arch(std::string_view op, const std::string& arch) {
  if (!arch_facts(arch).portable)
    throw Unsupported(fmt::format("{}: backend 'portable' needs sm_80 or newer, got {}", op, arch));
}

// Whether a call takes the hopper kernel of an op that has both backends: 'portable' never does;
// 'hopper' does, or throws naming `static_gap()` (why the hopper kernel cannot serve the call's static
// properties, "" when it can); 'auto' does when the static gap is empty and `auto_ok()` holds (per-call
// conditions 'auto' checks quietly, e.g. TMA-able strides).
template <class StaticGap, class AutoOk>
bool pick_hopper(std::string_view op, detail::Backend backend, StaticGap static_gap, AutoOk auto_ok) {
  if (backend == detail::Backend::kPortable) return false;
  const std::string gap = static_gap();
  if (backend == detail::Backend::kHopper) {
    if (!gap.empty()) throw_hopper_gap(op, gap);
    return true;
  }
  return gap.empty() && auto_ok();
}

}  // namespace attnjit::ops
