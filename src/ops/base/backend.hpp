// Backend selection: the gap reasons ("why backend X cannot serve this call") and the one message an
// explicit backend request that cannot be served raises.
#pragma once
#include <fmt/format.h>

#include <string>
#include <string_view>
#include <utility>

#include "attnjit/error.hpp"
#include "ops/base/arch.hpp"
#include "ops/base/context.hpp"
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

// The per-call backend pick in an op's plan_for(), for ops with both backends: 'auto' picks the backend
// per call (so the pick is part of the plan-cache signature: auto_hopper()); an explicit backend reads the
// arch and picks (which for 'hopper' may throw) only when a plan is built (hopper(), arch() in the build).
// `use_hopper(arch)` is the op's pick for the call, e.g. through pick_hopper().
template <class UseHopper>
class BackendPick {
 public:
  BackendPick(OpContext& ctx, detail::Backend backend, int device, UseHopper use_hopper)
      : ctx_(ctx), device_(device), per_call_(backend == detail::Backend::kAuto), use_hopper_(std::move(use_hopper)) {
    if (per_call_) {
      arch_ = ctx_.arch_for_device(device_);
      auto_hopper_ = use_hopper_(arch_);
    }
  }

  // For the signature: whether 'auto' took the hopper backend for this call (false for an explicit backend).
  bool auto_hopper() const { return auto_hopper_; }
  // When the plan is built: whether it takes the hopper backend, and the arch it compiles for.
  bool hopper() { return per_call_ ? auto_hopper_ : use_hopper_(arch()); }
  const std::string& arch() {
    if (arch_.empty()) arch_ = ctx_.arch_for_device(device_);
    return arch_;
  }

 private:
  OpContext& ctx_;
  int device_;
  bool per_call_;
  UseHopper use_hopper_;
  std::string arch_;
  bool auto_hopper_ = false;
};

}  // namespace attnjit::ops
