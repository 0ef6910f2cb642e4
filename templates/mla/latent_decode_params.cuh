// Launch parameters of the latent-decode kernels (mla/latent_decode.cuh, mla/latent_decode_hopper.cuh),
// shared by the host planners of mla_decode and dsa_decode and the device code (plain types only).
//
// Both ops attend a block of query rows of one KV head to a list of key slots whose rows are both keys
// and values: a key row is a main part of D elements (which is also the value row) and a tail of TAIL
// elements (mla_decode: the rope part k_pe; dsa_decode: kv[..., D:]). Queries likewise have a main part
// and a tail. Strides are in elements along the logical axes; the innermost stride is 1.
#pragma once
#include "common/host_device.cuh"

namespace attnjit::kernels {

// How a CTA's key slots map to cache rows (the kernels' MODE).
constexpr int kLatentDense = 0;    // mla_decode, contiguous cache: slot j is position j of request b
constexpr int kLatentPaged = 1;    // mla_decode, paged cache: position j is slot j % PS of page block_table[b, j / PS]
constexpr int kLatentIndexed = 2;  // dsa_decode: slot u is row indices[b, s, r, u] (invalid rows masked)

// Geometry of the portable kernel: 64 query rows and 32 key slots per tile, 8 warps (4 row groups x 2
// halves: of the QK depth, then of the value columns).
constexpr int kLatentBM = 64;
constexpr int kLatentBN = 32;
constexpr int kLatentWarps = 8;
ATTNJIT_HD constexpr int latent_pitch(int dqk) { return dqk % 64 == 0 ? dqk : dqk + 8; }
// Shared memory of the portable kernel with STAGES key-tile buffers (the planner takes 3 where the
// device allows it, else 2).
ATTNJIT_HD constexpr int latent_smem_bytes(int dqk, int stages) {
  return (kLatentBM + stages * kLatentBN) * latent_pitch(dqk) * 2  // Q, key ring (16-bit)
         + kLatentWarps * 16 * kLatentBN * 4                       // the QK halves' exchange (fp32)
         + stages * kLatentBN * 4;                                 // slot validity flags
}

// Geometry of the hopper kernel: 64 query rows and BN (48 by default, or 32) key slots per tile, two
// warpgroups (the halves of the QK depth, then of the value columns); rows padded to whole 64-column
// (128-byte) swizzle blocks.
constexpr int kLatentHopperBN = 48;
constexpr int kLatentHopperThreads = 256;
ATTNJIT_HD constexpr int latent_hopper_depth(int dqk) { return (dqk + 63) / 64 * 64; }
ATTNJIT_HD constexpr int latent_hopper_smem_bytes(int dqk, int stages, int bn) {
  return 1024                                                  // 1024-byte alignment slack
         + (kLatentBM + stages * bn) * latent_hopper_depth(dqk) * 2  // Q, key ring
         + 2 * (bn / 2) * 128 * 4                              // the S halves' exchange
         + stages * bn * 4;                                    // slot validity flags
}

// Geometry of the seesaw hopper kernel (mla/latent_decode_seesaw.cuh): 64 query rows, 64-key tiles in
// pairs, two consumer warpgroups and a producer warpgroup, one buffer per tile of a pair. Registers after
// setmaxnreg: setmaxnreg.inc only redistributes what the CTA was launched with (ptxas's 168 a thread at 384
// threads), so a larger total blocks the consumers' inc forever. 224 / 56: the producer's coalesced copies
// spilled up to 156 bytes at 40 registers; the consumers need no more than 224.
constexpr int kLatentSeesawBN = 64;
constexpr int kLatentSeesawThreads = 384;
constexpr int kLatentSeesawProducerRegs = 56;
constexpr int kLatentSeesawConsumerRegs = 224;
static_assert(256 * kLatentSeesawConsumerRegs + 128 * kLatentSeesawProducerRegs <=
                  kLatentSeesawThreads * (65536 / kLatentSeesawThreads / 8 * 8),
              "latent seesaw: the registers after setmaxnreg exceed the CTA's launch allocation");
ATTNJIT_HD constexpr int latent_seesaw_smem_bytes(int d, int dqk) {
  return 1024                                                             // 1024-byte alignment slack
         + (kLatentBM + 2 * kLatentSeesawBN) * latent_hopper_depth(dqk) * 2  // Q, the two key tiles
         + (latent_hopper_depth(dqk) > d ? 0 : 2 * kLatentBM * 128)       // P tiles without a tail block
         + 3 * 2 * 64 * 4                                                  // m0 / m1, row sums, slot flags
         + (2 * (latent_hopper_depth(dqk) / 64) + 4) * 8;                  // mbarriers
}

struct LatentDecodeParams {
  // Query rows (b, t, h): main part q + b q_sb + t q_ss + h q_sh (D elements) and tail part from q_tail.
  const void* q;
  long long q_sb, q_ss, q_sh;
  const void* q_tail;
  long long qt_sb, qt_ss, qt_sh;
  // Key rows: main part (D elements, also the value row) and tail. k_sb is the batch stride (dense,
  // indexed) or the page stride (paged); k_ss the position (slot) stride; k_sh the KV-head stride.
  const void* k;
  long long k_sb, k_ss, k_sh;
  const void* k_tail;
  long long kt_sb, kt_ss, kt_sh;
  // mla_decode: per-request lengths (null: every request holds n_kv positions), block table (paged).
  const int* seqlens;
  long long seqlens_s;
  const int* block_table;
  long long bt_sb, bt_sp;
  int page_size;
  // dsa_decode: indices [B, S, H_kv, K].
  const int* indices;
  long long idx_sb, idx_ss, idx_sh, idx_su;
  // Output rows (b, t, h), D elements, the compute dtype.
  void* o;
  long long o_sb, o_ss, o_sh;
  // Split-KV: normalised fp32 partials [n_splits, part_rows, D] and log2-domain LSEs [n_splits,
  // part_rows], row (b * s_q + t) * h + h_index (gqa_split_combine's layout).
  float* o_part;
  float* lse_part;
  long long part_rows;
  int batch, s_q, h, h_kv, group;
  int n_kv;      // mla_decode: positions per request without seqlens (contiguous); dsa_decode: S_kv
  int n_slots;   // dsa_decode: K index slots per row
  int n_splits;  // 1 without splitting
  int causal;    // dsa_decode's is_causal
  int stride_kv, q_start;
  float scale_log2;  // logit scale * log2(e)
};

}  // namespace attnjit::kernels
