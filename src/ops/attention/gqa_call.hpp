// gqa_fwd and gqa_varlen_fwd (SPEC.md §2.7, §2.8): the construction-time configuration and a
// validated call, shared by the planner, the kernel plans and the CPU reference.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "attnjit/tensor.hpp"
#include "ops/base/op.hpp"
#include "ops/base/validation.hpp"

namespace attnjit::ops {

enum class RopeLayout { kNone, kNeox, kInterleaved };

struct GqaConfig {
  bool varlen = false;            // gqa_varlen_fwd (THD) rather than gqa_fwd (BSHD)
  bool is_causal = true;          // bottom-right aligned
  int64_t window_left = -1;       // -1 = unlimited
  int64_t window_right = -1;      // -1 = unlimited
  std::optional<double> sm_scale; // unset: 1/sqrt(D) per call
  double softcap = 0;             // 0 = off
  RopeLayout rope = RopeLayout::kNone;
  std::optional<int64_t> rotary_dim;  // with rope; unset = D
  std::optional<DType> out_dtype;
  bool validate_inputs = false;

  bool has_window() const { return window_left >= 0 || window_right >= 0; }
  const char* op_name() const { return varlen ? "gqa_varlen_fwd" : "gqa_fwd"; }
};

// A validated call. Dense (gqa_fwd): q [B, S_q, H, D], k/v [B, S_kv, H_kv, D], o like q,
// lse [B, H, S_q]. Packed (gqa_varlen_fwd): q [T_q, H, D], k/v [T_kv, H_kv, D], o like q,
// lse [T_q, H], cu_seqlens_q/kv [B + 1], sinks [H].
struct GqaCall {
  const TensorRef* q = nullptr;
  const TensorRef* k = nullptr;
  const TensorRef* v = nullptr;
  const TensorRef* o = nullptr;
  const TensorRef* lse = nullptr;       // optional output
  const TensorRef* q_scale = nullptr;   // [B, H_kv] fp32, iff e4m3 input
  const TensorRef* k_scale = nullptr;
  const TensorRef* v_scale = nullptr;
  const TensorRef* rope_cos = nullptr;  // [P, R/2] compute dtype, iff rope
  const TensorRef* rope_sin = nullptr;
  const TensorRef* sinks = nullptr;     // [H] fp32, varlen only, optional
  const TensorRef* cu_seqlens_q = nullptr;   // varlen only
  const TensorRef* cu_seqlens_kv = nullptr;  // varlen only

  DType in_dtype = DType::kBF16;       // q/k/v dtype: fp16, bf16 or e4m3
  DType compute_dtype = DType::kBF16;  // c: the input dtype, or out_dtype for e4m3 input
  int64_t B = 0;      // batch (dense) or requests (varlen: len(cu_seqlens) - 1)
  int64_t S_q = 0;    // dense only
  int64_t S_kv = 0;   // dense only
  int64_t T_q = 0;    // varlen only
  int64_t T_kv = 0;   // varlen only
  int64_t H = 0, H_kv = 0, D = 0;
  int64_t R = 0;      // rotated width (rope), 0 without rope
  int64_t P = 0;      // rope table positions, 0 without rope
  float scale = 0;    // resolved sm_scale
  Device device{};
};

// Reads §2.7's parameters (shared by gqa_varlen_fwd and gqa_paged_fwd); raises `param` errors.
GqaConfig parse_gqa_config(bool varlen, const detail::ConfigReader& r);
const std::vector<std::string>& gqa_config_keys();

// Validates a call's tensors against the config (placement: host for the reference, device for the
// kernels). Throws InvalidArgument in SPEC.md §1.11's format; never reads tensor contents.
GqaCall validate_gqa_call(const GqaConfig& cfg, const TensorArgs& args, detail::Placement placement);

// The optional inputs gqa_fwd, gqa_varlen_fwd and gqa_paged_fwd share, checked the same way by each:
// an e4m3 dequantisation scale `name` of shape [B, H_kv] (fp32, class M);
void check_kv_head_scale(detail::ArgChecker& c, const char* name, const TensorRef& t, int64_t B, int64_t H_kv);
// the RoPE tables rope_cos / rope_sin [P, R/2] in the compute dtype, present iff cfg has rope (R is
// rotary_dim or D; 0 and P = 0 without rope);
struct RopeTables {
  const TensorRef* cos = nullptr;
  const TensorRef* sin = nullptr;
  int64_t R = 0, P = 0;
};
RopeTables check_rope_tables(detail::ArgChecker& c, const GqaConfig& cfg, int64_t D, DType compute_dtype);
// the optional sinks [H] (fp32, class M).
const TensorRef* check_sinks(detail::ArgChecker& c, int64_t H);

}  // namespace attnjit::ops
