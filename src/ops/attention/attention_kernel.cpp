#include "ops/attention/attention_kernel.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <sstream>
#include <stdexcept>

#include "jit/cuda_driver.hpp"
#include "jit/spec_builder.hpp"
#include "ops/base/arch.hpp"
#include "ops/base/op_helpers.hpp"
#include "ops/base/launch.hpp"
#include "ops/base/backend.hpp"
#include "ops/base/context.hpp"

namespace attnjit::ops {

std::string_view device_type_name(DType dt) {
  switch (dt) {
    case DType::kF16: return "__half";
    case DType::kBF16: return "__nv_bfloat16";
    case DType::kE4M3: return "__nv_fp8_e4m3";
    default: return "?";
  }
}

namespace {

// The tile override ("BMxBNxWARPS"), checked against what the kernel template accepts for head dim D.
struct TileOverride {
  int BM = 0, BN = 0, warps = 0;
};
TileOverride parse_tile(const char* op, const std::string& text, int64_t D) {
  TileOverride t;
  if (text.empty()) return t;
  char x1 = 0, x2 = 0;
  std::istringstream in(text);
  in >> t.BM >> x1 >> t.BN >> x2 >> t.warps;
  const int rows_per_warp = t.warps > 0 ? t.BM / t.warps : 0;
  const bool ok = in && in.peek() == EOF && x1 == 'x' && x2 == 'x' && (t.warps == 4 || t.warps == 8) &&
                  (t.BN == 16 || t.BN == 32 || t.BN == 48 || t.BN == 64) && t.BM % (16 * t.warps) == 0 &&
                  (rows_per_warp == 16 || (rows_per_warp == 32 && D <= 128));
  if (!ok)
    throw InvalidArgument(fmt::format("{}: param: ATTNJIT_TUNE_GQA_TILE: expected \"BMxBNxWARPS\" with WARPS 4 or 8, BN 16, 32, "
                                      "48 or 64, and 16 rows per warp (or 32 for D <= 128), got \"{}\"", op, text));
  return t;
}

}  // namespace

AttentionKernelChoice choose_attention_kernel(const char* op, const GqaConfig& cfg, DType q_dtype, DType kv_dtype,
                                              DType compute_dtype, int64_t D, bool q_packed, KvMode kv_mode, bool sinks,
                                              const std::string& arch, const std::string& tile_override) {
  AttentionKernelChoice k;
  k.q_dtype = q_dtype;
  k.kv_dtype = kv_dtype;
  k.compute_dtype = compute_dtype;
  k.D = static_cast<int>(D);
  // NOTE: 32 rows per warp (two m16 tiles) halves the shared-memory traffic per MMA. D = 256 keeps one
  // m16 tile per warp so the O accumulator (128 registers) fits, with 8 warps so that a CTA still covers
  // 128 rows: half the K/V traffic of BM = 64 (H200, 2026-11-30: 271/291 vs 246/244 TFLOP/s causal/full).
  // BN = 64 at D = 64 and, on dense and packed keys, at D = 128: since the swizzled shared-memory rows
  // (H200, 2026-12-01) the wider tile is the faster one there (H200, B4 S4096 causal / full: D 128 346 / 380
  // against 341-346 / 359 TFLOP/s for BN 32, D 64 302 / 319 against 297 / 308 for BN 48). Paged keys
  // keep BN = 32 at D >= 96 (validated there; 64 divides every power-of-two page, so a tile still stays
  // in one page at D = 64). D = 256 keeps BN = 32: its O accumulator leaves no registers for wider S.
  const bool dense_keys = kv_mode == KvMode::kDense || kv_mode == KvMode::kPacked || kv_mode == KvMode::kCompressed;
  k.BM = 128;
  k.BN = D == 64 || (D == 128 && dense_keys) ? 64 : 32;
  k.warps = D == 256 ? 8 : 4;
  if (D == 256 && cfg.rope != RopeLayout::kNone) {
    // RoPE's low-part tiles would take the 128-row D = 256 tile past the 227 KB of shared memory.
    k.BM = 64;
    k.warps = 4;
  }
  if (const TileOverride t = parse_tile(op, tile_override, D); t.BM) {
    k.BM = t.BM;
    k.BN = t.BN;
    k.warps = t.warps;
  }
  k.causal = cfg.is_causal;
  k.window = cfg.has_window();
  k.softcap = cfg.softcap > 0;
  k.q_packed = q_packed;
  k.kv_mode = kv_mode;
  k.sinks = sinks;
  k.rope = cfg.rope;
  k.arch = arch;
  return k;
}

jit::KernelSpec attention_kernel_spec(const char* op, const AttentionKernelChoice& k) {
  const int rope = k.rope == RopeLayout::kNone ? 0 : k.rope == RopeLayout::kNeox ? 1 : 2;
  const char* rope_name = rope == 0 ? "none" : rope == 1 ? "neox" : "interleaved";
  const char* kv_name = k.kv_mode == KvMode::kDense    ? "dense"
                        : k.kv_mode == KvMode::kPacked ? "packed"
                        : k.kv_mode == KvMode::kPaged  ? "paged"
                        : k.kv_mode == KvMode::kCompressed ? "compressed"
                                                       : "paged-append";
  jit::SpecBuilder b(op, "dense/gqa_fwd.cuh", "attnjit::kernels::gqa_fwd", k.arch);
  b.field("backend", "portable").name("{}");
  b.field("q_dtype", dtype_name(k.q_dtype)).arg(device_type_name(k.q_dtype)).name("{}");
  b.field("kv_dtype", dtype_name(k.kv_dtype)).arg(device_type_name(k.kv_dtype)).name_if(k.kv_dtype != k.q_dtype, "kv-{}");
  // The template takes the compute (output) dtype first.
  b.field("out_dtype", dtype_name(k.compute_dtype)).arg(device_type_name(k.compute_dtype)).before("q_dtype")
      .name_if(k.q_dtype != k.compute_dtype, "out-{}");
  b.field("head_dim", k.D).arg().name("d{}");
  b.field("block_m", k.BM).arg().name("bm{}");
  b.field("block_n", k.BN).arg().name("bn{}");
  b.field("warps", k.warps).arg().name_if(k.warps != 4, "w{}");
  b.field("causal", k.causal).arg().name_if(k.causal, "causal");
  b.field("window", k.window).arg().name_if(k.window, "window");
  b.field("softcap", k.softcap).arg().name_if(k.softcap, "softcap");
  b.field("rope", rope_name).arg(rope).name_if(rope != 0, "rope-{}");
  b.field("q_packed", k.q_packed).arg();
  b.field("kv_mode", kv_name).arg(static_cast<int>(k.kv_mode))
      .name_if(k.kv_mode == KvMode::kPagedAppend, "append").after("sinks");
  b.field("sinks", k.sinks).arg().name_if(k.sinks, "sinks");
  b.field("split_kv", k.split).arg().name_if(k.split, "split");
  return b.build();
}

AttentionKernelChoice decode_variant(const char* op, AttentionKernelChoice k, const std::string& tile_override) {
  // NOTE: decode is bound by K/V bandwidth. 16 query rows (a decode GQA group fits) keep the MMA work per
  // key byte low; the warps of a CTA split each key tile between them (all own the same rows) and merge
  // at the end. H200, 2026-11-30, B = 64 x 8k context: one warp per CTA read 811 GB/s, four warps with
  // their own (mostly empty) rows 1759 GB/s.
  k.BN = 64;
  k.warps = 4;
  if (!tile_override.empty()) {
    int bn = 0, warps = 0;
    char x = 0;
    std::istringstream in(tile_override);
    in >> bn >> x >> warps;
    if (!in || in.peek() != EOF || x != 'x' || (bn != 16 && bn != 32 && bn != 64 && bn != 128) ||
        (warps != 1 && warps != 2 && warps != 4 && warps != 8) || bn % (16 * warps) != 0)
      throw InvalidArgument(fmt::format("{}: param: ATTNJIT_TUNE_DECODE_TILE: expected \"BNxWARPS\" with BN 16, 32, 64 or 128, "
                                        "WARPS 1, 2, 4 or 8, and 16 keys per warp or a multiple, got \"{}\"", op,
                                        tile_override));
    k.BN = bn;
    k.warps = warps;
  }
  k.BM = 16;
  k.split = true;
  return k;
}

int ctas_per_sm(const AttentionKernelChoice& k) {
  // NOTE: 228 KB of shared memory per SM with 1 KB reserved per CTA; registers allow about four
  // 128-thread decode CTAs.
  const int by_smem = 233472 / (k.smem_bytes() + 1024);
  return std::max(1, std::min({by_smem, 4, 2048 / (32 * k.warps)}));
}

void check_attention_backend(const char* op, detail::Backend backend, const std::string& arch) {
  if (backend == detail::Backend::kHopper)
    throw Unsupported(fmt::format("{}: backend 'hopper' (wgmma/TMA) is not built yet for this op; use backend 'auto' or "
                                  "'portable'", op));
  require_portable_arch(op, arch);
}

std::string hopper_attention_gap(const GqaConfig& cfg, DType in_dtype, DType compute_dtype, int64_t D,
                                 const std::string& arch) {
  if (std::string gap = hopper_arch_gap(arch); !gap.empty()) return gap;
  if (in_dtype != DType::kF16 && in_dtype != DType::kBF16)
    return fmt::format("it takes fp16 or bf16 q/k/v, got {}", dtype_name(in_dtype));
  if (compute_dtype != in_dtype) return "it writes the output in the input dtype";
  if (D != 64 && D != 128 && D != 256) return fmt::format("it serves head dims 64, 128 and 256, got {}", D);
  if (cfg.rope != RopeLayout::kNone) return "fused RoPE is not built into it";
  return "";
}

HopperAttentionChoice choose_hopper_attention(const GqaConfig& cfg, DType dtype, int64_t D, bool sinks,
                                              const std::string& arch, bool paged, bool persistent, bool q_tma) {
  HopperAttentionChoice k;
  k.dtype = dtype;
  k.D = static_cast<int>(D);
  // NOTE: 128-key tiles keep each wgmma at N = 128; D = 256 takes 64-key tiles so that O (128 fp32
  // registers per thread) and S fit the 240 registers a consumer thread gets.
  k.BN = D == 256 ? 64 : 128;
  // D = 64: three consumer warpgroups (192-row tiles, 160 registers a thread) read each K/V tile from
  // shared memory for a third more rows than two; D 128 and 256 need two warpgroups' registers, and so
  // does the paged producer (its 128 copying threads leave the consumers 152, where they spill).
  k.warpgroups = D == 64 && !paged ? 3 : 2;
  k.causal = cfg.is_causal;
  k.window = cfg.has_window();
  k.softcap = cfg.softcap > 0;
  k.varlen = cfg.varlen;
  k.kv_mode = paged ? KvMode::kPaged : cfg.varlen ? KvMode::kPacked : KvMode::kDense;
  k.sinks = sinks;
  // NOTE: the persistent kernel's producer is one TMA thread; the paged producer's 128 copying threads keep
  // the one-tile grid.
  k.persistent = persistent && !paged;
  k.q_tma = q_tma && !paged && !k.persistent;
  k.arch = arch;
  return k;
}

jit::KernelSpec hopper_attention_kernel_spec(const char* op, const HopperAttentionChoice& k) {
  jit::SpecBuilder b(op, "dense/gqa_fwd_hopper.cuh", "attnjit::kernels::gqa_fwd_hopper", k.arch);
  b.field("backend", "hopper").name("{}");
  b.field("dtype", dtype_name(k.dtype)).arg(device_type_name(k.dtype)).name("{}");
  b.field("head_dim", k.D).arg().name("d{}");
  b.field("block_m", k.block_m()).name("bm{}");
  b.field("block_n", k.BN).arg().name("bn{}");
  b.field("warpgroups", k.warpgroups).arg();
  b.field("causal", k.causal).arg().name_if(k.causal, "causal");
  b.field("window", k.window).arg().name_if(k.window, "window");
  b.field("softcap", k.softcap).arg().name_if(k.softcap, "softcap");
  b.field("varlen", k.varlen).arg();
  b.field("kv_mode", k.kv_mode == KvMode::kPaged        ? "paged"
                     : k.kv_mode == KvMode::kPacked     ? "packed"
                     : k.kv_mode == KvMode::kCompressed ? "compressed"
                                                        : "dense")
      .arg(static_cast<int>(k.kv_mode))
      .name_if(k.kv_mode == KvMode::kPaged, "paged").after("sinks");
  b.field("sinks", k.sinks).arg().name_if(k.sinks, "sinks");
  b.field("persistent", k.persistent).arg().name_if(k.persistent, "persistent");
  b.field("q_tma", k.q_tma).arg().name_if(k.q_tma, "qtma");
  return b.build();
}

std::shared_ptr<const jit::LoadedKernel> load_hopper_attention_kernel(OpContext& ctx, const char* op,
                                                                      const HopperAttentionChoice& k, int device) {
  auto kernel = ctx.kernels().loaded(hopper_attention_kernel_spec(op, k), device);
  require_dynamic_smem(op, *kernel, kernel->compiled->spec, k.smem_bytes());
  return kernel;
}

namespace {

// A dense [B, S, H, D] tensor, or a packed [T, H, D] one as [1, T, H, D] (its token axis then has no batch
// stride): why it cannot be a TMA source ("" when it can), and its 4-d map (D, head, row, batch) with boxes
// of box_heads heads by box_rows rows.
std::string hopper_rows_gap(const char* name, const TensorRef& t, bool packed) {
  return packed ? tma_gap(name, t.data, {{t.shape[0], t.strides[0]}, {t.shape[1], t.strides[1]}})
                : tma_gap(name, t.data, {{t.shape[0], t.strides[0]}, {t.shape[1], t.strides[1]}, {t.shape[2], t.strides[2]}});
}
void encode_hopper_rows(const char* op, const char* name, unsigned long long (&map)[16], const HopperAttentionChoice& k,
                        const TensorRef& t, bool packed, int box_rows, int box_heads = 1) {
  if (packed)
    encode_tma_rows(op, name, map, k.dtype, t.data, k.D, t.shape[1], t.shape[0], 1, t.strides[1], t.strides[0],
                    t.strides[0] * std::max<int64_t>(1, t.shape[0]), box_rows, box_heads);
  else
    encode_tma_rows(op, name, map, k.dtype, t.data, k.D, t.shape[2], t.shape[1], t.shape[0], t.strides[2], t.strides[1],
                    t.strides[0], box_rows, box_heads);
}

}  // namespace

std::string hopper_kv_gap(const TensorRef& k, const TensorRef& v, bool packed) {
  if (std::string gap = hopper_rows_gap("k", k, packed); !gap.empty()) return gap;
  return hopper_rows_gap("v", v, packed);
}

void encode_hopper_kv_maps(const char* op, kernels::GqaFwdHopperParams& hp, const HopperAttentionChoice& k,
                           const TensorRef& key, const TensorRef& value, bool packed) {
  encode_hopper_rows(op, "k", hp.k_map, k, key, packed, k.BN);
  encode_hopper_rows(op, "v", hp.v_map, k, value, packed, k.BN);
}

int hopper_q_box_heads(int64_t H, int64_t H_kv) {
  if (H_kv <= 0 || H <= 0 || H % H_kv != 0) return 0;
  const int64_t g = H / H_kv;
  const int64_t box_heads = std::min<int64_t>(g, 64);
  return g % box_heads == 0 && 64 % box_heads == 0 ? static_cast<int>(box_heads) : 0;
}

void encode_hopper_q_map(const char* op, kernels::GqaFwdHopperParams& hp, const HopperAttentionChoice& k,
                         const TensorRef& q, bool packed, int64_t H, int64_t H_kv) {
  hp.q_tma = 0;
  const int box_heads = hopper_q_box_heads(H, H_kv);
  // No map for an empty q (nothing to load; its base may be null).
  if (!k.q_tma || box_heads == 0 || q.numel() == 0 || !hopper_rows_gap("q", q, packed).empty()) return;
  encode_hopper_rows(op, "q", hp.q_map, k, q, packed, 64 / box_heads, box_heads);
  hp.q_tma = 1;
}

namespace {

// The hopper kernel's work tiles (BM query rows of one KV head); packed queries: ceil(T_q g / BM) + B, an
// upper bound of the tiles of B requests over T_q tokens, per KV head.
int64_t hopper_work_tiles(const HopperAttentionChoice& k, int64_t batch, int64_t q_rows, int64_t H, int64_t H_kv) {
  const int64_t g = H / H_kv;
  const int64_t bm = k.block_m();
  return k.varlen ? ((q_rows * g + bm - 1) / bm + batch) * H_kv : (q_rows * g + bm - 1) / bm * H_kv * batch;
}

}  // namespace

int64_t hopper_persistent_ctas(const HopperAttentionChoice& k, int64_t batch, int64_t q_rows, int64_t H, int64_t H_kv,
                               int max_ctas) {
  return std::min<int64_t>(hopper_work_tiles(k, batch, q_rows, H, H_kv), max_ctas);
}

int hopper_section_pairs(const HopperAttentionChoice& k, int64_t s_kv) {
  if (!k.persistent || !k.causal || k.varlen) return 0;
  // NOTE: 32 MiB of the H100's / H200's 50 MB L2 for the K and V of the pairs in flight (a guess, not yet
  // measured; with the longest-first order a whole section's pairs are in flight at once).
  constexpr int64_t kL2Share = int64_t{32} << 20;
  const int64_t pair_bytes = std::max<int64_t>(1, s_kv) * k.D * 2 * 2;
  return static_cast<int>(std::clamp<int64_t>(kL2Share / pair_bytes, 1, std::numeric_limits<int>::max()));
}

void launch_hopper_attention(const char* op, const jit::LoadedKernel& kernel, const HopperAttentionChoice& k,
                             const kernels::GqaFwdHopperParams& hp, int64_t batch, int64_t q_rows, int64_t H,
                             int64_t H_kv, void* stream, int max_ctas) {
  const int64_t g = H / H_kv;
  if (batch == 0 || (!k.varlen && q_rows == 0)) return;
  Launch lc;
  const int64_t bm = k.block_m();
  if (k.persistent) {
    if (max_ctas <= 0) throw std::logic_error(fmt::format("{}: the persistent hopper kernel needs the SM count", op));
    // The kernel's linear work-tile index is an int (gqa_fwd_hopper_work), stepped by the grid.
    const int64_t tiles = hopper_work_tiles(k, batch, q_rows, H, H_kv);
    if (tiles > std::numeric_limits<int>::max() - static_cast<int64_t>(max_ctas))
      throw Unsupported(fmt::format("{}: {} work tiles exceed the {} this kernel counts", op, tiles,
                                    std::numeric_limits<int>::max() - max_ctas));
    lc.grid_x = static_cast<unsigned>(hopper_persistent_ctas(k, batch, q_rows, H, H_kv, max_ctas));
    lc.grid_y = 1;
    lc.grid_z = 1;
  } else {
    if (!k.varlen && batch > 65535)
      throw Unsupported(fmt::format("{}: batch {} exceeds the 65535 this kernel's grid takes", op, batch));
    lc.grid_x = static_cast<unsigned>((q_rows * g + bm - 1) / bm + (k.varlen ? batch : 0));
    lc.grid_y = static_cast<unsigned>(H_kv);
    lc.grid_z = k.varlen ? 1u : static_cast<unsigned>(batch);
  }
  lc.threads = static_cast<unsigned>(k.threads());
  lc.smem_bytes = static_cast<unsigned>(k.smem_bytes());
  lc.stream = stream;
  kernels::GqaFwdHopperParams params = hp;
  void* args[] = {&params};
  launch_kernel(kernel.function, lc, args, fmt::format("{}: cuLaunchKernelEx", op));
}

std::shared_ptr<const jit::LoadedKernel> load_attention_kernel(OpContext& ctx, const char* op,
                                                               const AttentionKernelChoice& k, int device) {
  auto kernel = ctx.kernels().loaded(attention_kernel_spec(op, k), device);
  require_dynamic_smem(op, *kernel, kernel->compiled->spec, k.smem_bytes());
  return kernel;
}

void fill_common_params(kernels::GqaFwdParams& p, const GqaConfig& cfg, const TensorRef& q, const TensorRef& o,
                        bool q_packed, float scale, int64_t H, int64_t H_kv) {
  const int sd = q_packed ? 0 : 1;  // the token axis
  p.q = q.data;
  p.o = o.data;
  p.q_sb = q_packed ? 0 : q.strides[0];
  p.q_ss = q.strides[sd];
  p.q_sh = q.strides[sd + 1];
  p.o_sb = q_packed ? 0 : o.strides[0];
  p.o_ss = o.strides[sd];
  p.o_sh = o.strides[sd + 1];
  p.h_kv = static_cast<int>(H_kv);
  p.group = static_cast<int>(H / H_kv);
  p.window_left = static_cast<int>(std::min<int64_t>(cfg.window_left, std::numeric_limits<int>::max()));
  p.window_right = static_cast<int>(std::min<int64_t>(cfg.window_right, std::numeric_limits<int>::max()));
  constexpr double kLog2e = 1.4426950408889634;
  p.scale_log2 = static_cast<float>(scale * kLog2e);
  p.softcap = static_cast<float>(cfg.softcap);
  if (cfg.softcap > 0) {
    p.softcap_inv_scale = static_cast<float>(scale / cfg.softcap);
    p.softcap_log2 = static_cast<float>(cfg.softcap * kLog2e);
  }
}

void fill_optional_params(kernels::GqaFwdParams& p, const TensorRef* q_scale, const TensorRef* k_scale,
                          const TensorRef* v_scale, const TensorRef* rope_cos, const TensorRef* rope_sin, int64_t R,
                          const TensorRef* sinks) {
  if (q_scale) {
    p.q_scale = static_cast<const float*>(q_scale->data);
    p.qsc_sb = q_scale->strides[0];
    p.qsc_sr = q_scale->strides[1];
  }
  if (k_scale) {
    p.k_scale = static_cast<const float*>(k_scale->data);
    p.v_scale = static_cast<const float*>(v_scale->data);
    p.ksc_sb = k_scale->strides[0];
    p.ksc_sr = k_scale->strides[1];
    p.vsc_sb = v_scale->strides[0];
    p.vsc_sr = v_scale->strides[1];
  }
  if (rope_cos) {
    p.rope_cos = rope_cos->data;
    p.rope_sin = rope_sin->data;
    p.cos_sp = rope_cos->strides[0];
    p.cos_sc = rope_cos->strides[1];
    p.sin_sp = rope_sin->strides[0];
    p.sin_sc = rope_sin->strides[1];
    p.rotary_dim = static_cast<int>(R);
  }
  if (sinks) {
    p.sinks = static_cast<const float*>(sinks->data);
    p.sinks_s = sinks->strides[0];
  }
}

void launch_attention(const char* op, const jit::LoadedKernel& kernel, const AttentionKernelChoice& k,
                      const kernels::GqaFwdParams& p, int64_t batch, int64_t q_rows, int64_t H, int64_t H_kv,
                      void* stream, int n_splits) {
  const int64_t g = H / H_kv;
  Launch lc;
  if (k.q_packed) {
    if (batch == 0) return;
    lc.grid_x = static_cast<unsigned>((q_rows * g + k.BM - 1) / k.BM + batch);
    lc.grid_z = static_cast<unsigned>(n_splits);
  } else {
    if (batch == 0 || q_rows == 0) return;
    if (batch * n_splits > 65535)
      throw Unsupported(fmt::format("{}: batch {} exceeds the {} this kernel's grid takes", op, batch, 65535 / n_splits));
    lc.grid_x = static_cast<unsigned>((q_rows * g + k.BM - 1) / k.BM);
    lc.grid_z = static_cast<unsigned>(batch * n_splits);
  }
  lc.grid_y = static_cast<unsigned>(H_kv);
  lc.threads = static_cast<unsigned>(k.threads());
  lc.smem_bytes = static_cast<unsigned>(k.smem_bytes());
  lc.stream = stream;
  kernels::GqaFwdParams params = p;
  void* args[] = {&params};
  launch_kernel(kernel.function, lc, args, fmt::format("{}: cuLaunchKernelEx", op));
}

}  // namespace attnjit::ops
