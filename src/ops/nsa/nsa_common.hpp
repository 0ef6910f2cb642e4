// The NSA family (SPEC.md §2.14-2.17): the construction-time configurations and validated calls of
// nsa_compressed_fwd, nsa_topk and nsa_selected_fwd, and the checks they share: the packed metadata
// (offsets, token_indices, chunk_offsets) as descriptors and, under validate_inputs, as values; the head
// rules ((H / H_kv) % 16 == 0, head dims 64 and 128); the required scale and integer parameters.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "attnjit/tensor.hpp"
#include "ops/base/op.hpp"
#include "ops/base/validation.hpp"

namespace attnjit::ops::nsa {

// ---- parameters ----------------------------------------------------------------------------------

// `scale`: required, finite, > 0 (param error otherwise).
double parse_scale(const char* op, const detail::ConfigReader& r);
// A required integer parameter in [lo, hi] (param error otherwise, naming the key and the range).
int64_t parse_int(const char* op, const detail::ConfigReader& r, const char* key, int64_t lo, int64_t hi);

struct CompressedConfig {
  double scale = 0;
  int64_t bs = 1;
  bool validate_inputs = false;
};
struct TopkConfig {
  double scale = 0;
  int64_t selected_block_num = 1;  // S of SPEC.md §2.16, 1..128
  int64_t bs = 1;
  bool validate_inputs = false;
};
struct SelectedConfig {
  bool is_causal = false;
  double scale = 0;
  int64_t block_size = 1;
  bool validate_inputs = false;
};

CompressedConfig parse_compressed_config(const detail::ConfigReader& r);
TopkConfig parse_topk_config(const detail::ConfigReader& r);
SelectedConfig parse_selected_config(const detail::ConfigReader& r);
const std::vector<std::string>& compressed_config_keys();
const std::vector<std::string>& topk_config_keys();
const std::vector<std::string>& selected_config_keys();

// ---- the packed metadata (SPEC.md §2.14) ------------------------------------------------------------

struct Meta {
  const TensorRef* offsets = nullptr;        // [N + 1] int32, class C
  const TensorRef* token_indices = nullptr;  // [T, 2] int32, class M: (request id, position in the request)
  const TensorRef* chunk_offsets = nullptr;  // [N + 1] int32, class C (nsa_compressed_fwd, nsa_topk only)
  int64_t N = 0;                             // requests
};

// Dtype, rank, extent and layout checks of the metadata of a call with T packed tokens (chunk_offsets
// only when `chunks`). The tensors must already be fetched from the checker by name.
Meta check_meta(detail::ArgChecker& c, int64_t T, bool chunks);
// H >= 1, H_kv >= 1, H % H_kv == 0 and (H / H_kv) % 16 == 0 (reported on `kv_name`).
void check_heads(const detail::ArgChecker& c, const char* kv_name, int64_t H, int64_t H_kv);
// A head dim in {64, 128} (reported on `name`, `what` naming the dim, e.g. "DK").
void check_head_dim(const detail::ArgChecker& c, const char* name, const char* what, int64_t D);

// The metadata values as host vectors (token_indices flattened (n, p) pairs), read through the strides.
struct HostMeta {
  std::vector<int32_t> offsets, token_indices, chunk_offsets;
};
// Copies the metadata to the host (device calls: after prepare_content_checks).
HostMeta read_meta(const Meta& m);
// validate_inputs (SPEC.md §1.10, §2.14): synchronises a device stream (refusing capture), then checks
// offsets[0] = 0, non-decreasing, offsets[N] = T; every token's (n, p) with 0 <= n < N,
// offsets[n] <= t < offsets[n+1], p = t - offsets[n]; and, when `bs` > 0 (the ops with chunks),
// chunk_offsets[0] = 0, chunk_offsets[n+1] - chunk_offsets[n] = ceil(len_n / bs), chunk_offsets[N] = C.
// Raises `content` naming the tensor, the first offending element and the rule.
void check_meta_contents(const char* op, const Meta& m, int64_t T, int64_t bs, int64_t C, Device device, void* stream);

// ---- validated calls ----------------------------------------------------------------------------

// nsa_compressed_fwd: q [T, H, DK], k_cmp [C, H_kv, DK], v_cmp [C, H_kv, DV], o [T, H, DV], lse [T, H] opt.
struct CompressedCall {
  const TensorRef *q = nullptr, *k_cmp = nullptr, *v_cmp = nullptr, *o = nullptr, *lse = nullptr;
  Meta meta;
  DType dtype = DType::kBF16;
  int64_t T = 0, C = 0, H = 0, H_kv = 0, DK = 0, DV = 0;
  Device device{};
  int64_t group() const { return H / H_kv; }
};

// nsa_topk: q [T, H, D], k_cmp [C, H_kv, D], block_indices [T, H_kv, S] int32.
struct TopkCall {
  const TensorRef *q = nullptr, *k_cmp = nullptr, *block_indices = nullptr;
  Meta meta;
  DType dtype = DType::kBF16;
  int64_t T = 0, C = 0, H = 0, H_kv = 0, D = 0;
  Device device{};
  int64_t group() const { return H / H_kv; }
};

// nsa_selected_fwd: q [T, H, D], k, v [T, H_kv, D], block_indices [T, H_kv, SEL], block_counts [T, H_kv],
// o [T, H, D].
struct SelectedCall {
  const TensorRef *q = nullptr, *k = nullptr, *v = nullptr, *block_indices = nullptr, *block_counts = nullptr,
                  *o = nullptr;
  Meta meta;
  DType dtype = DType::kBF16;
  int64_t T = 0, H = 0, H_kv = 0, D = 0, SEL = 0;
  Device device{};
  int64_t group() const { return H / H_kv; }
};

// Descriptor checks of each op (placement: host for the reference, device for the kernels). Throw
// InvalidArgument in SPEC.md §1.11's format; never read tensor contents.
CompressedCall validate_compressed_call(const TensorArgs& args, detail::Placement placement);
TopkCall validate_topk_call(const TopkConfig& cfg, const TensorArgs& args, detail::Placement placement);
SelectedCall validate_selected_call(const TensorArgs& args, detail::Placement placement);

// validate_inputs of nsa_selected_fwd beyond the metadata: block_counts in [0, SEL].
void check_block_counts(const char* op, const SelectedCall& call);

// Why impl 'kernel' cannot serve any call of `op` in this build.
[[noreturn]] void no_kernel(const char* op, detail::Backend backend);

}  // namespace attnjit::ops::nsa
