// bsa_fwd inside the op: what bsa_fwd.cpp (the op) and the kernel plans of bsa_fwd_portable.cpp and
// bsa_fwd_hopper.cpp share. Not for other ops.
#pragma once
#include <memory>
#include <string>

#include "ops/base/context.hpp"
#include "ops/base/op.hpp"
#include "ops/base/validation.hpp"
#include "ops/bsa/bsa_common.hpp"
#include "ops/bsa/bsa_fwd_kernel.hpp"

namespace attnjit::ops::bsa {

constexpr const char* kOp = "bsa_fwd";
constexpr int kAutoSplits = 0;  // kv_splits "auto"

struct BsaFwdConfig {
  BsaSharedConfig shared;
  bool allow_empty = false;
  int kv_splits = 1;  // 1..256, or kAutoSplits
  bool validate_inputs = false;
};

// A validated call.
struct FwdCall {
  BsaCall in;
  const TensorRef* o = nullptr;
  const TensorRef* lse = nullptr;
};

FwdCall validate_fwd_call(const BsaFwdConfig& cfg, const TensorArgs& args, detail::Placement placement);
// The portable kernel of a validated call, single-pass or split.
BsaFwdKernelChoice choose_fwd_kernel(const BsaCall& in, bool split, const std::string& arch);

// The portable backend's plan of a validated device call on `arch`: the single-pass kernel, or the split
// kernel and the combine, as kv_splits asks.
std::shared_ptr<const detail::PlanImpl> make_fwd_portable_plan(OpContext& ctx, const BsaFwdConfig& cfg,
                                                               const FwdCall& call, const std::string& arch);
// The hopper backend's plan of a validated device call on `arch`.
std::shared_ptr<const detail::PlanImpl> make_fwd_hopper_plan(OpContext& ctx, const BsaFwdConfig& cfg,
                                                             const FwdCall& call, const std::string& arch);

}  // namespace attnjit::ops::bsa
