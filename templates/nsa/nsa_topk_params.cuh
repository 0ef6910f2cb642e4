// Launch parameters and geometry of the nsa_topk kernel (nsa/nsa_topk.cuh), shared by the host planner
// (src/ops/nsa/nsa_topk_kernel.cpp) and the device code (plain types only). Strides are in elements along
// the logical axes; the innermost stride of q and k_cmp is 1.
#pragma once
#include "common/host_device.cuh"

namespace attnjit::kernels {

// Geometry: a CTA of kNsaTopkWarps warps takes kNsaTopkRows query rows (token, head-in-group) of one KV
// head: TOK consecutive packed tokens of a group of G <= 64 heads (TOK = 64 / G: 4 at G 16, 2 at G 32,
// else 1; G > 64 loops over tiles of 64 heads). k_cmp streams in tiles of BN chunks through a
// STAGES-deep cp.async ring (the planner's default kNsaTopkBN x kNsaTopkStages). Each warp sums its 16
// rows' importances into its own slice of a window of WIN candidates (default kNsaTopkWindow); a token's slices are added into
// its first warp's slice, and that warp merges the window into the token's running top-kNsaTopkMaxS set
// (a radix select over a 256-bin histogram of its own). A longer candidate list goes through several
// windows, so shared memory is bounded for any sequence length.
constexpr int kNsaTopkWarps = 4;
constexpr int kNsaTopkRows = 16 * kNsaTopkWarps;
constexpr int kNsaTopkBN = 32;
constexpr int kNsaTopkStages = 2;
constexpr int kNsaTopkMaxS = 128;
constexpr int kNsaTopkWindow = 1024;       // portable
constexpr int kNsaTopkHopperWindow = 512;  // hopper: 4 CTAs an SM (see nsa_topk_kernel.cpp)
ATTNJIT_HD constexpr int nsa_topk_tokens(long long group) {
  return group <= 16 ? 4 : group <= 32 ? 2 : 1;
}
ATTNJIT_HD constexpr int nsa_topk_smem_bytes(int d, int tok, int bn, int stages, int win) {
  return (kNsaTopkRows + stages * bn) * d * 2                            // Q, the k_cmp ring (16-bit)
         + kNsaTopkWarps * win * 4                                       // per-warp window slices
         + tok * 4 * kNsaTopkMaxS * 4                                    // running keys and ids, staging keys and ids
         + kNsaTopkWarps * 256 * 4                                       // per-warp radix histograms
         + 256;                                                          // token records
}

struct NsaTopkParams {
  const void* q;  // [T, H, D]
  long long q_st, q_sh;
  const void* k_cmp;  // [C, H_kv, D]
  long long k_st, k_sh;
  int* out;  // block_indices [T, H_kv, S]
  long long o_st, o_sh, o_su;
  const int* chunk_offsets;  // [N + 1], contiguous
  const int* token_indices;  // [T, 2]: (request, position)
  long long ti_st, ti_sc;
  int T, C, n_req, group, sel, bs;
  int m_tiles;  // tiles of kNsaTopkRows heads per group: ceil(group / 64) when TOK is 1, else 1
  float scale;  // applied to q in fp32, then rounded to the input dtype
};

}  // namespace attnjit::kernels
