// Block-sparse attention (SPEC.md §2.4-§2.6): what bsa_fwd, bsa_bwd and bsa_fp8_fwd share.
//
// STABLE API (used by bsa_fwd.cpp, bsa_fp8_fwd.cpp, bsa_bwd*.cpp; extend, do not change):
//
//   1. Config.   BsaSharedConfig parse_bsa_shared_config(op, reader)
//                  reads "layout", "sparse_block_size", "scale", "block_sparse_num" (each only if the op's
//                  ConfigReader key list admits it: a key outside the list is already rejected as unknown,
//                  so bsa_fp8_fwd simply leaves "layout"/"sparse_block_size" out of its list and gets the
//                  defaults BHSD / 64). Raises `param` for values outside their sets.
//                bsa_shared_config_keys(): {"layout", "sparse_block_size", "scale", "block_sparse_num"}.
//
//   2. Inputs.   BsaCall check_bsa_inputs(ArgChecker& c, const BsaSharedConfig&, const BsaInputRules&)
//                  checks q, k, v, q2k_block_index, q2k_block_nums (opt), block_sizes (opt, rank 1/2/3):
//                  dtypes, ranks, extents and extent relations, accepted head dims/counts, the metadata
//                  shapes, block_sparse_num in [1, K_max] when counts are fixed, layout classes (F or,
//                  with rules.contiguous, C 16-byte aligned; metadata M) and devices (it calls c.device on
//                  each tensor, so the op checks its own outputs afterwards with the same checker).
//                  It does not call c.only_known (the op lists its own tensor names) and never reads
//                  tensor contents. Order: dtypes, shapes, metadata shapes, counts, layouts, devices.
//                check_bsa_qshaped(c, name, t, call, last_dim): a tensor shaped like q in the call's
//                  layout with head dim last_dim (o, do, dq, ...): rank and extents only.
//                check_bsa_lse_shape(c, name, t, call): [B, H_q, S_q] rank and extents only.
//
//   3. Contents. BsaMetadataHost: host-readable copies of the metadata of a call
//                  BsaMetadataHost::load(op, call, stream): for device calls refuses under stream capture
//                  (`unsupported`), synchronises the stream and copies; for host calls copies.
//                  .check_contents(op, allow_zero_counts): SPEC.md §2.4's caller contract -> `content`
//                  errors naming the tensor, the first offending element [b, h, m(, u)] and the rule:
//                  counts in [1 or 0, K_max]; active indices in [0, N_kv) and unique per row; block_sizes
//                  of every referenced block (in each (b, h) slice for rank 2/3) in [1, bs].
//                  Fixed counts (block_sparse_num) are checked at call time by check_bsa_inputs instead.
//
//   4. Visible keys (for the CPU references).
//                  md.count(b, h, m): the row's active count (q2k_block_nums or block_sparse_num).
//                  md.index(b, h, m, u): q2k_block_index[b, h, m, u].
//                  md.block_len(b, h, kb) = min(bsz(kb), S_kv - kb * bs), bsz by block_sizes rank or bs.
//                  md.visible_ranges(b, h, m): the key ranges [begin, end) of the active blocks, in active
//                  order, a block listed twice counted once (the reference's mask semantics, §2.4), empty
//                  ranges dropped. Assumes the contents are within the contract (call check_contents
//                  first when validate_inputs is set; out-of-range indices are skipped, never read past).
//
// Tensor shapes (layout bhsd / bshd):  q [B, H_q, S_q, D] / [B, S_q, H_q, D];  k [.., H_kv, S_kv, D];
// v [.., H_kv, S_kv, D_v];  q2k_block_index [B, H_q, N_q, K_max];  q2k_block_nums [B, H_q, N_q];
// block_sizes [N_kv] | [B, N_kv] | [B, H_q, N_kv];  N_q = ceil(S_q / bs), N_kv = ceil(S_kv / bs).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "attnjit/tensor.hpp"
#include "ops/base/host_copy.hpp"
#include "ops/base/op.hpp"
#include "ops/base/validation.hpp"

namespace attnjit::ops::bsa {

enum class BsaLayout { kBHSD = 0, kBSHD = 1 };
const char* layout_name(BsaLayout l);  // "bhsd" / "bshd"

struct BsaSharedConfig {
  BsaLayout layout = BsaLayout::kBHSD;
  int block_size = 64;                      // sparse_block_size (bs): 64 or 128
  std::optional<double> scale;              // unset: 1/sqrt(D) of the call
  std::optional<int64_t> block_sparse_num;  // unset: K_max; used only without q2k_block_nums
};

const std::vector<std::string>& bsa_shared_config_keys();
BsaSharedConfig parse_bsa_shared_config(const char* op, const detail::ConfigReader& r);

// What an op accepts beyond §2.4's common rules.
struct BsaInputRules {
  std::vector<DType> dtypes{DType::kF16, DType::kBF16};
  std::vector<int64_t> head_dims{64, 96, 128};   // accepted D
  std::vector<int64_t> value_dims{64, 96, 128};  // accepted D_v
  bool equal_dims = false;   // D_v must equal D (bsa_bwd)
  bool equal_heads = false;  // H_kv must equal H_q (bsa_fp8_fwd)
  bool contiguous = false;   // q/k/v class C with a 16-byte aligned base instead of class F (bsa_fp8_fwd)
};

// Strides (elements) of a q/k/v-like tensor along the logical axes batch, head, sequence (the head-dim
// stride is 1), whatever the layout.
struct BhsStrides {
  int64_t b = 0, h = 0, s = 0;
};

// A validated call's shared part.
struct BsaCall {
  const TensorRef* q = nullptr;
  const TensorRef* k = nullptr;
  const TensorRef* v = nullptr;
  const TensorRef* index = nullptr;        // q2k_block_index
  const TensorRef* nums = nullptr;         // q2k_block_nums, optional
  const TensorRef* block_sizes = nullptr;  // optional
  BsaLayout layout = BsaLayout::kBHSD;
  DType dtype = DType::kBF16;
  int64_t B = 0, H_q = 0, H_kv = 0, S_q = 0, S_kv = 0, D = 0, D_v = 0;
  int64_t bs = 64, N_q = 0, N_kv = 0, K_max = 0;
  int block_sizes_rank = 0;  // 0 = absent, else 1, 2 or 3
  int64_t fixed_count = 0;   // block_sparse_num (or K_max) when q2k_block_nums is absent, else 0
  float scale = 0;           // resolved logit scale
  BhsStrides q_st, k_st, v_st;
  Device device{};

  int64_t group() const { return H_q / H_kv; }
  // The shape of a q-like tensor of this call with `heads`, `seq`, `dim` in the call's layout.
  std::vector<int64_t> shape_like(int64_t heads, int64_t seq, int64_t dim) const;
  BhsStrides strides_of(const TensorRef& t) const;  // t laid out in the call's layout
};

BsaCall check_bsa_inputs(detail::ArgChecker& c, const BsaSharedConfig& cfg, const BsaInputRules& rules);
void check_bsa_qshaped(const detail::ArgChecker& c, std::string_view name, const TensorRef& t, const BsaCall& call,
                       int64_t last_dim);
void check_bsa_lse_shape(const detail::ArgChecker& c, std::string_view name, const TensorRef& t, const BsaCall& call);

struct KeyRange {
  int64_t begin = 0, end = 0;  // [begin, end)
};

class BsaMetadataHost {
 public:
  static BsaMetadataHost load(const char* op, const BsaCall& call, void* stream);

  int64_t count(int64_t b, int64_t h, int64_t m) const;
  int32_t index(int64_t b, int64_t h, int64_t m, int64_t u) const;
  int64_t raw_block_size(int64_t b, int64_t h, int64_t kb) const;  // bsz(kb): block_sizes entry or bs
  int64_t block_len(int64_t b, int64_t h, int64_t kb) const;       // min(bsz(kb), S_kv - kb * bs)
  std::vector<KeyRange> visible_ranges(int64_t b, int64_t h, int64_t m) const;
  void check_contents(const char* op, bool allow_zero_counts) const;

 private:
  BsaCall call_;
  detail::HostView index_, nums_, sizes_;
};

}  // namespace attnjit::ops::bsa
