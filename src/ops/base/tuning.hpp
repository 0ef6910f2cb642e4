// Tuning overrides of the planners' choices, for measurement and tests: one map, read in one place
// (Tuning::read), from the ATTNJIT_TUNE_* environment variables and then the "tune" object of the
// runtime options (RuntimeOptions::tune, the C ABI's options_json). Nothing else reads them.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

namespace attnjit::ops {

struct Tuning {
  // ATTNJIT_TUNE_GQA_TILE / "gqa_tile": the gqa kernels' tile "BMxBNxWARPS" (e.g. "128x32x4"); empty =
  // the planner's choice.
  std::string gqa_tile;
  // ATTNJIT_TUNE_DECODE_TILE / "decode_tile": the split-KV decode tile of the paged ops, "BNxWARPS"
  // (BM = 16 * WARPS), e.g. "64x1".
  std::string decode_tile;
  // ATTNJIT_TUNE_DECODE_SPLITS / "decode_splits": split-KV splits per request of the paged ops' decode
  // (clamped to one key tile each); 0 = the planner's.
  int decode_splits = 0;
  // ATTNJIT_TUNE_LI_FORCE_SLAB / "li_force_slab": tests only; lightning_indexer plans take the two-kernel
  // slab path even where the fused kernel fits.
  bool li_force_slab = false;
  // ATTNJIT_TUNE_LATENT_TILE / "latent_tile": the key slots per tile of mla_decode's and dsa_decode's
  // hopper kernel: 64 (the seesaw kernel), 48 or 32; 0 = the planner's (64 where its shared memory fits, else
  // 48).
  int latent_tile = 0;
  // ATTNJIT_TUNE_NSA_SELECTED_TILE / "nsa_selected_tile": nsa_selected_fwd's "BNxSTAGES" (key slots per
  // tile, ring depth), e.g. "16x2"; empty = the planner's.
  std::string nsa_selected_tile;
  // ATTNJIT_TUNE_NSA_TOPK_TILE / "nsa_topk_tile": nsa_topk's "BNxSTAGES[xWINDOW]" (k_cmp chunks per
  // tile, ring depth, candidates per on-chip window), e.g. "32x2"; empty = the planner's.
  std::string nsa_topk_tile;
  // ATTNJIT_TUNE_GQA_BWD_BAND / "gqa_bwd_band": the key blocks of a (batch, KV head) group that the
  // deterministic causal gqa_bwd grid launches side by side (gqa_bwd_det_causal_band); 0 = the planner's.
  int gqa_bwd_band = 0;
  // ATTNJIT_TUNE_GQA_FWD_PERSISTENT / "gqa_fwd_persistent": gqa_fwd and gqa_varlen_fwd on the hopper backend
  // take the persistent kernel (one CTA per SM walking the work tiles); false: one CTA per work tile. Off by
  // default: validated on an H100, it measured within 0-7% of the one-tile kernel.
  bool gqa_fwd_persistent = false;
  // ATTNJIT_TUNE_GQA_FWD_Q_TMA / "gqa_fwd_q_tma": gqa_fwd and gqa_varlen_fwd on the hopper backend take the
  // one-tile kernel whose producer loads Q by TMA (where the group size and q allow; else its consumers copy
  // Q) and whose k-steps make wgmma descriptors by one add. On by default (validated on an H100 2026-12-08:
  // +2-3% at S 1k, +15% at D 64 causal); false: the kernel whose consumers copy Q with cp.async.
  bool gqa_fwd_q_tma = true;
  // ATTNJIT_TUNE_GQA_BWD_HOPPER_D256 / "gqa_bwd_hopper_d256": gqa_bwd's hopper backend serves D 256 (its kernel
  // splitting D over the two consumer warpgroups; not deterministic), for `auto` and `hopper` alike. On by
  // default (validated on an H100 2026-12-08: 1.3x the portable kernel); false: D 256 runs on the portable
  // kernel, and `backend: hopper` fails naming this switch.
  bool gqa_bwd_hopper_d256 = true;

  // The environment's values, then `tune`'s keys over them (null or an object). Throws InvalidArgument
  // naming the variable or key for a malformed value or an unknown key.
  static Tuning read(const nlohmann::json& tune) { return apply(tune, from_env()); }
  // RuntimeOptions::tune (JSON object text) as JSON; "" is an empty object.
  static nlohmann::json parse_text(const std::string& text) {
    return text.empty() ? nlohmann::json::object() : nlohmann::json::parse(text);
  }
  static Tuning from_env();
  static Tuning apply(const nlohmann::json& tune, Tuning base);
};

}  // namespace attnjit::ops
