// mla_decode (SPEC.md §2.13, with the extensions of docs/ops/mla_decode.md) and dsa_decode (SPEC.md
// §2.18): the construction-time configurations and the validated calls, shared by the ops
// (ops/mla/mla_decode.cpp, ops/mla/dsa_decode.cpp) and their CPU references (ops/mla/reference.cpp).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "attnjit/tensor.hpp"
#include "ops/base/op.hpp"
#include "ops/base/validation.hpp"

namespace attnjit::ops {

// ---- mla_decode

struct MlaDecodeConfig {
  // Checks cache_seqlens / block_table values (the caller contract of the extensions) on every call.
  // The CPU reference checks them whatever this says: it never reads out of bounds.
  bool validate_inputs = false;
  int kv_splits = 0;  // 1..128, or 0 for "auto" (ops/mla/latent_kernel.hpp)
};

// A validated call. q [B, H, D] (S_q = 1, `q_rank` 3) or [B, S_q, H, D] (`q_rank` 4); q_pe likewise with
// PE; o q's shape. Without block_table: k [B, N_kv, H_kv, D], k_pe [B, N_kv, H_kv, PE]. With block_table
// [B, W] (paged): k [NP, PS, H_kv, D], k_pe [NP, PS, H_kv, PE] page pools. cache_seqlens [B] int32,
// optional without block_table (absent: every request holds N_kv positions), required with it.
struct MlaDecodeCall {
  const TensorRef* q = nullptr;
  const TensorRef* q_pe = nullptr;
  const TensorRef* k = nullptr;
  const TensorRef* k_pe = nullptr;
  const TensorRef* cache_seqlens = nullptr;  // may be null
  const TensorRef* block_table = nullptr;    // may be null
  const TensorRef* o = nullptr;

  DType dtype = DType::kBF16;
  int q_rank = 3;
  int64_t B = 0, S_q = 1, H = 0, H_kv = 0, D = 0, PE = 0;
  int64_t N_kv = 0;         // contiguous cache: positions per request (k.shape[1])
  int64_t NP = 0, PS = 0, W = 0;  // paged cache: pool pages, page size, block_table width
  double scale = 0;         // 1 / sqrt(D + PE)
  Device device{};

  bool paged() const { return block_table != nullptr; }
  int64_t group() const { return H / H_kv; }
  // Element offset of q / q_pe / o row (b, s, h) (s = 0 for rank 3).
  static int64_t row(const TensorRef& t, int rank, int64_t b, int64_t s, int64_t h) {
    return rank == 3 ? b * t.strides[0] + h * t.strides[1] : b * t.strides[0] + s * t.strides[1] + h * t.strides[2];
  }
};

MlaDecodeConfig parse_mla_decode_config(const detail::ConfigReader& r);
const std::vector<std::string>& mla_decode_config_keys();
// Descriptor checks (never reads tensor contents). Throws InvalidArgument in SPEC.md §1.11's format.
MlaDecodeCall validate_mla_decode_call(const MlaDecodeConfig& cfg, const TensorArgs& args, detail::Placement placement);
// The caller contract on values: 0 <= cache_seqlens[b] <= N_kv (contiguous) or <= W * PS (paged), and
// block_table entries of the used pages (ceil(len / PS) of each request) in [0, NP). Raises `content`
// naming the tensor, the element and the rule. Host tensors are read directly; device tensors through
// host copies (after synchronising `stream`; refused under capture).
void check_mla_decode_contents(const MlaDecodeCall& call, void* stream);

// ---- dsa_decode

struct DsaDecodeConfig {
  int64_t dim_tail = 0;            // 0 or a power of two in [16, 128]
  int64_t stride_kv = 1;           // >= 1
  int64_t q_start_index_s = 0;     // >= 0: position of query row 0
  std::optional<double> sm_scale;  // unset: 1/sqrt(D + dim_tail) per call
  bool is_causal = true;
  int kv_splits = 0;  // 1..128, or 0 for "auto" (ops/mla/latent_kernel.hpp)
};

// A validated call: q [B, S, H, D + dim_tail], kv [B, S_kv, H_kv, D + dim_tail], indices [B, S, H_kv, K]
// int32, o [B, S, H, D].
struct DsaDecodeCall {
  const TensorRef* q = nullptr;
  const TensorRef* kv = nullptr;
  const TensorRef* indices = nullptr;
  const TensorRef* o = nullptr;

  DType dtype = DType::kBF16;
  int64_t B = 0, S = 0, H = 0, H_kv = 0, S_kv = 0, K = 0, D = 0, D_qk = 0;  // D_qk = D + dim_tail
  double scale = 0;  // resolved sm_scale
  Device device{};

  int64_t group() const { return H / H_kv; }
};

DsaDecodeConfig parse_dsa_decode_config(const detail::ConfigReader& r);
const std::vector<std::string>& dsa_decode_config_keys();
DsaDecodeCall validate_dsa_decode_call(const DsaDecodeConfig& cfg, const TensorArgs& args, detail::Placement placement);

}  // namespace attnjit::ops
