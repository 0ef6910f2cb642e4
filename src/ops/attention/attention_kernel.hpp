// The portable attention kernel (templates/dense/gqa_fwd.cuh) as the planners of gqa_fwd,
// gqa_varlen_fwd, gqa_paged_fwd and mha_decode_paged see it: the static choice that selects an
// instantiation, its KernelSpec, loading it with its shared memory, and launching it.
#pragma once
#include <initializer_list>
#include <memory>
#include <string>
#include <utility>

#include "attnjit/tensor.hpp"
#include "dense/gqa_fwd_params.cuh"
#include "dense/gqa_fwd_hopper_params.cuh"
#include "jit/kernel_cache.hpp"
#include "jit/kernel_spec.hpp"
#include "ops/attention/gqa_call.hpp"
#include "ops/attention/split_kv.hpp"
#include "ops/base/tma.hpp"
#include "ops/base/op.hpp"

namespace attnjit::ops {

// = the kernel's KV_MODE (common/kv_rows.cuh); kCompressed: NSA's compressed chunks (nsa_compressed_fwd).
enum class KvMode { kDense = 0, kPacked = 1, kPaged = 2, kPagedAppend = 3, kCompressed = 4 };

// The CUDA type of a dtype in kernel entry names ("__half", "__nv_bfloat16", "__nv_fp8_e4m3").
std::string_view device_type_name(DType dt);

// Everything that selects a template instantiation.
struct AttentionKernelChoice {
  DType q_dtype = DType::kBF16, kv_dtype = DType::kBF16, compute_dtype = DType::kBF16;
  int D = 0, BM = 0, BN = 0, warps = 0;
  bool causal = false, window = false, softcap = false, q_packed = false, sinks = false;
  bool split = false;  // split-KV: writes fp32 partials for gqa_split_combine
  KvMode kv_mode = KvMode::kDense;
  RopeLayout rope = RopeLayout::kNone;
  std::string arch;

  int smem_bytes() const { return kernels::gqa_fwd_smem_bytes(D, BM, BN, rope != RopeLayout::kNone); }
  int threads() const { return kernels::gqa_fwd_threads(warps); }
};

// Picks tiles for head dim D (or applies the "BMxBNxWARPS" tuning override) and records the flags of
// `cfg` (causal, window, softcap, rope).
AttentionKernelChoice choose_attention_kernel(const char* op, const GqaConfig& cfg, DType q_dtype, DType kv_dtype,
                                              DType compute_dtype, int64_t D, bool q_packed, KvMode kv_mode, bool sinks,
                                              const std::string& arch, const std::string& tile_override);

jit::KernelSpec attention_kernel_spec(const char* op, const AttentionKernelChoice& k);

// The split-KV decode variant of `k`: BM = 16 * warps query rows per CTA (decode rows are few), BN
// keys per tile, partial outputs for the combine kernel. `tile_override` is "BNxWARPS" (ATTNJIT_TUNE_DECODE_TILE).
AttentionKernelChoice decode_variant(const char* op, AttentionKernelChoice k, const std::string& tile_override);

// How many CTAs of kernel `k` fit on one SM (shared memory, a register estimate, threads).
int ctas_per_sm(const AttentionKernelChoice& k);

// The portable backend serves sm_80+; 'hopper' is served by gqa_fwd / gqa_varlen_fwd only (their
// planners check hopper_attention_gap); every other caller gets Unsupported for it, naming the op.
void check_attention_backend(const char* op, detail::Backend backend, const std::string& arch);

// ---- hopper backend (templates/dense/gqa_fwd_hopper.cuh): gqa_fwd and gqa_varlen_fwd on sm_90a ----
struct HopperAttentionChoice {
  DType dtype = DType::kBF16;
  int D = 0, BN = 0;
  int warpgroups = 2;  // consumer warpgroups: BM = 64 * warpgroups query rows a CTA
  bool causal = false, window = false, softcap = false, varlen = false, sinks = false;
  KvMode kv_mode = KvMode::kDense;  // dense, packed (varlen) or paged (gqa_paged_fwd's prefill path)
  // The persistent kernel (dense and packed TMA keys only): at most one CTA per SM walks the work tiles of
  // a static order (longest first under a causal mask) over one K/V ring; launch_hopper_attention's
  // max_ctas caps its grid.
  bool persistent = false;
  // The one-tile kernel whose producer loads Q by TMA where it can (encode_hopper_q_map) and whose k-steps
  // make wgmma descriptors by one add (tune.gqa_fwd_q_tma; not with paged keys or the persistent kernel).
  bool q_tma = false;
  std::string arch;
  int block_m() const { return 64 * warpgroups; }
  int smem_bytes() const { return kernels::gqa_fwd_hopper_smem_bytes(D, BN, warpgroups); }
  int threads() const { return kernels::gqa_fwd_hopper_threads(warpgroups); }
};
// Why the hopper kernel cannot serve a call with these static properties ("" when it can): sm_90a only,
// 16-bit q/k/v with the output in the same dtype, D 64/128/256, no RoPE.
std::string hopper_attention_gap(const GqaConfig& cfg, DType in_dtype, DType compute_dtype, int64_t D,
                                 const std::string& arch);
// paged: gqa_paged_fwd's prefill path (keys from pool pages; cfg.varlen must be set). persistent: the
// persistent kernel where it serves (not with paged keys; gqa_fwd / gqa_varlen_fwd pass the tuning knob
// gqa_fwd_persistent, off by default). q_tma: the Q-by-TMA one-tile kernel (tuning knob gqa_fwd_q_tma, on
// by default; not with paged keys, and the persistent kernel takes precedence).
HopperAttentionChoice choose_hopper_attention(const GqaConfig& cfg, DType dtype, int64_t D, bool sinks,
                                              const std::string& arch, bool paged = false, bool persistent = false,
                                              bool q_tma = false);
jit::KernelSpec hopper_attention_kernel_spec(const char* op, const HopperAttentionChoice& k);
std::shared_ptr<const jit::LoadedKernel> load_hopper_attention_kernel(OpContext& ctx, const char* op,
                                                                      const HopperAttentionChoice& k, int device);
// Why k and v cannot be TMA sources ("" when they can): 16-byte aligned base, head and token strides
// (and the batch stride when not packed) positive multiples of 16 bytes (no broadcast axes).
std::string hopper_kv_gap(const TensorRef& k, const TensorRef& v, bool packed);
// Encodes the K and V tensor maps of `hp` (4-d: D, KV head, key row, batch) with BN-row boxes.
void encode_hopper_kv_maps(const char* op, kernels::GqaFwdHopperParams& hp, const HopperAttentionChoice& k,
                           const TensorRef& key, const TensorRef& value, bool packed);
// The heads of a box of one warpgroup's 64 packed Q rows (min(g, 64) for g = H / H_kv), or 0 where g
// neither divides 64 nor is a multiple of it.
int hopper_q_box_heads(int64_t H, int64_t H_kv);
// Encodes hp.q_map and sets hp.q_tma where the Q_TMA kernel (k.q_tma) can load Q by TMA: such a box
// exists (hopper_q_box_heads) and q is a TMA source (tma_gap). Elsewhere q_tma stays 0 and the consumers
// copy Q. q: dense [B, S, H, D] or packed [T, H, D].
void encode_hopper_q_map(const char* op, kernels::GqaFwdHopperParams& hp, const HopperAttentionChoice& k,
                         const TensorRef& q, bool packed, int64_t H, int64_t H_kv);
// Launches on `stream`: grid as launch_attention (x = query tiles of k.block_m() rows, y = KV heads, z =
// batch); the persistent kernel: min(work tiles, max_ctas) CTAs in x (packed queries: an upper bound of the
// work tiles, as the one-tile grid's). max_ctas: the SM count (one CTA fits an SM); > 0 when k.persistent.
void launch_hopper_attention(const char* op, const jit::LoadedKernel& kernel, const HopperAttentionChoice& k,
                             const kernels::GqaFwdHopperParams& hp, int64_t batch, int64_t q_rows, int64_t H,
                             int64_t H_kv, void* stream, int max_ctas = 0);
// The persistent kernel's grid: min(work tiles (packed queries: their upper bound), max_ctas) CTAs.
int64_t hopper_persistent_ctas(const HopperAttentionChoice& k, int64_t batch, int64_t q_rows, int64_t H, int64_t H_kv,
                               int max_ctas);
// GqaFwdHopperParams::section_pairs for the persistent kernel with dense keys and a causal mask: the
// (batch, KV head) pairs whose K and V (s_kv keys each) fit a share of L2, at least 1; 0 elsewhere.
int hopper_section_pairs(const HopperAttentionChoice& k, int64_t s_kv);

// Loads (compiling if needed) the kernel on `device` and opts it into its dynamic shared memory.
std::shared_ptr<const jit::LoadedKernel> load_attention_kernel(OpContext& ctx, const char* op,
                                                               const AttentionKernelChoice& k, int device);

// Fills the parameters every mode shares: q/o (token and head strides; batch stride when not packed),
// the logit scales, softcap, windows, group size.
void fill_common_params(kernels::GqaFwdParams& p, const GqaConfig& cfg, const TensorRef& q, const TensorRef& o,
                        bool q_packed, float scale, int64_t H, int64_t H_kv);

// Fills the optional inputs every mode may have, each only when present: the e4m3 dequantisation
// scales [B, H_kv] (q's alone, k's and v's together), the RoPE tables [P, R/2] with the rotated width R,
// and the sinks [H].
void fill_optional_params(kernels::GqaFwdParams& p, const TensorRef* q_scale, const TensorRef* k_scale,
                          const TensorRef* v_scale, const TensorRef* rope_cos, const TensorRef* rope_sin, int64_t R,
                          const TensorRef* sinks);

// Launches on `stream`: grid x = query tiles (packed: an upper bound of ceil(T_q g / BM) + B, the kernel
// finds its request), y = KV heads, z = batch (not packed).
void launch_attention(const char* op, const jit::LoadedKernel& kernel, const AttentionKernelChoice& k,
                      const kernels::GqaFwdParams& p, int64_t batch, int64_t q_rows, int64_t H, int64_t H_kv,
                      void* stream, int n_splits = 1);

}  // namespace attnjit::ops
