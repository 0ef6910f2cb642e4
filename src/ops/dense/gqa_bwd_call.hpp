// gqa_bwd (SPEC.md §2.12): the construction-time configuration and a validated call, shared by the
// op (ops/dense/gqa_bwd.cpp) and its CPU reference (ops/dense/reference_bwd.cpp).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "attnjit/tensor.hpp"
#include "ops/base/op.hpp"
#include "ops/base/validation.hpp"

namespace attnjit::ops {

struct GqaBwdConfig {
  bool is_causal = true;           // square: key j is visible to query i iff j <= i
  std::optional<double> sm_scale;  // unset: 1/sqrt(D) per call
  bool deterministic = false;      // kernels: dQ added in a fixed order, so repeated calls return identical bytes
  // gqa_fwd's sliding window (beyond the contract): key j visible to query i also needs
  // j >= i - window_left (window_left >= 0) and j <= i + window_right (window_right >= 0); -1 = unlimited.
  int64_t window_left = -1, window_right = -1;
  // Whether the window hides any key the causal flag alone would show.
  bool windowed() const { return window_left >= 0 || (window_right >= 0 && !is_causal); }
};

// A validated call: q, o, do, dq [B, S, H, D]; k, v, dk, dv [B, S, H_kv, D]; lse [B, H, S] fp32.
struct GqaBwdCall {
  const TensorRef* q = nullptr;
  const TensorRef* k = nullptr;
  const TensorRef* v = nullptr;
  const TensorRef* o = nullptr;
  const TensorRef* dout = nullptr;  // "do"
  const TensorRef* lse = nullptr;
  const TensorRef* dq = nullptr;
  const TensorRef* dk = nullptr;
  const TensorRef* dv = nullptr;

  DType dtype = DType::kBF16;  // of every tensor but lse
  int64_t B = 0, S = 0, H = 0, H_kv = 0, D = 0;
  double scale = 0;  // resolved sm_scale
  Device device{};

  int64_t group() const { return H / H_kv; }
};

// Reads §2.12's parameters; raises `param` errors (unknown keys included).
GqaBwdConfig parse_gqa_bwd_config(const detail::ConfigReader& r);
const std::vector<std::string>& gqa_bwd_config_keys();

// Validates a call's tensors (placement: host for the reference, device for the kernels). Throws
// InvalidArgument in SPEC.md §1.11's format; never reads tensor contents.
GqaBwdCall validate_gqa_bwd_call(const GqaBwdConfig& cfg, const TensorArgs& args, detail::Placement placement);

// The deterministic causal launch grid (templates/common/attention_bwd.cuh, DenseSlots): how many key
// blocks of one (batch, KV head) group are launched together, given the groups, the key blocks and the
// device's SMs, or `forced` (ATTNJIT_TUNE_GQA_BWD_BAND) when positive; 1 <= band <= max(1, n_kv).
int gqa_bwd_det_causal_band(int groups, int n_kv, int sm_count, int forced = 0);

// Test support (the `attnjit test` runner's "grad" comparison): parses `config` as the op does, validates
// the host tensors `args` and writes the absolute-value reference (reference::gqa_backward_abs) into
// their dq, dk, dv.
void gqa_bwd_reference_abs(const nlohmann::json& config, const TensorArgs& args);

}  // namespace attnjit::ops
