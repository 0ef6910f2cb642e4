// Launch parameters and geometry of the nsa_topk kernel (nsa/nsa_topk.cuh), shared by the host planner
// (src/ops/nsa/nsa_topk_kernel.cpp) and the device code (plain types only). Strides are in elements along
// the logical axes; the innermost stride of q and k_cmp is 1.
#pragma once
#include "common/host_device.cuh"

namespace attnjit::kernels {

// Geometry: a CTA of kNsaTopkWarps warps takes kNsaTopkRows query rows (token, head-in-group) of one KV
// head: TOK consecutive packed tokens of a group of G <= 64 heads (TOK = 64 / G: 4 at G 16, 2 at G 32,
// else 1; G > 64 loops over tiles of 64 heads). k_cmp streams in tiles of kNsaTopkBN chunks through a
// kNsaTopkStages-deep cp.async ring. A token's importances live in a window of nsa_topk_window(TOK)
// candidates (kNsaTopkWindowTotal over the CTA's tokens) next to its running top-kNsaTopkMaxS set; a
// longer candidate list goes through several windows, each merged into the running set, so shared
// memory is bounded for any sequence length.
constexpr int kNsaTopkWarps = 4;
constexpr int kNsaTopkRows = 16 * kNsaTopkWarps;
constexpr int kNsaTopkBN = 32;
constexpr int kNsaTopkStages = 2;
constexpr int kNsaTopkMaxS = 128;
constexpr int kNsaTopkWindowTotal = 4096;
ATTNJIT_HD constexpr int nsa_topk_tokens(long long group) {
  return group <= 16 ? 4 : group <= 32 ? 2 : 1;
}
ATTNJIT_HD constexpr int nsa_topk_window(int tok) { return kNsaTopkWindowTotal / tok; }
ATTNJIT_HD constexpr int nsa_topk_smem_bytes(int d, int tok) {
  return (kNsaTopkRows + kNsaTopkStages * kNsaTopkBN) * d * 2            // Q, the k_cmp ring (16-bit)
         + tok * (kNsaTopkMaxS + nsa_topk_window(tok)) * 4              // keys: running set + window
         + tok * 3 * kNsaTopkMaxS * 4                                   // running ids, staging keys and ids
         + kNsaTopkWarps * kNsaTopkBN * 4                               // per-warp column sums
         + 256;                                                         // counters, token records
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
