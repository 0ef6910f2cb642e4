// The key slots of a latent-decode CTA (mla/latent_decode.cuh, mla/latent_decode_hopper.cuh): the request
// b, KV head r and (dsa_decode) query token it serves, resolved per slot to the main and tail parts of
// its cache row, or invalid (past the slots that may be valid; dsa_decode: index -1, >= S_kv or, under
// causality, (x + 1) stride_kv > q_pos + 1).
#pragma once
#include "mla/latent_decode_params.cuh"

namespace attnjit::kernels {

template <typename T, int MODE>
struct LatentSlots {
  const T* kb;   // main rows of (b, r) (paged: of head r in page 0)
  const T* ktb;  // tail rows
  const int* table = nullptr;  // paged: block_table row b
  const int* idx = nullptr;    // indexed: indices row (b, s, r)
  int n_keys = 0;              // slots [0, n_keys) may be valid
  long long q_pos1 = 0;        // indexed, causal: q_pos + 1

  __device__ __forceinline__ bool resolve(const LatentDecodeParams& p, int j, const T*& main, const T*& tail) const {
    if (j >= n_keys) return false;
    if constexpr (MODE == kLatentDense) {
      main = kb + j * p.k_ss;
      tail = ktb + j * p.kt_ss;
      return true;
    } else if constexpr (MODE == kLatentPaged) {
      const int pg = j / p.page_size, slot = j - pg * p.page_size;
      const long long page = table[pg * p.bt_sp];
      main = kb + page * p.k_sb + slot * p.k_ss;
      tail = ktb + page * p.kt_sb + slot * p.kt_ss;
      return true;
    } else {
      const long long x = idx[j * p.idx_su];
      if (x < 0 || x >= p.n_kv) return false;
      if (p.causal && (x + 1) * p.stride_kv > q_pos1) return false;
      main = kb + x * p.k_ss;
      tail = ktb + x * p.kt_ss;
      return true;
    }
  }
};

// A CTA's coordinates: request b, (dsa_decode) query token s_tok, KV head r, the group size g, the rows of
// its (b, r[, s]) row block (mla_decode: S_q g, row t g + hh; dsa_decode: g), its split and its first
// row. Grid: x = split * n_mt + m-tile (the m-tiles of a row block, which read the same rows, adjacent), y
// = KV head (dsa_decode: s H_kv + r), z = b.
struct LatentCoords {
  int b, s_tok, r, g, rows, split, m_base;
};
template <int MODE, int BM>
__device__ __forceinline__ LatentCoords latent_coords(const LatentDecodeParams& p) {
  LatentCoords c;
  c.b = blockIdx.z;
  c.s_tok = MODE == kLatentIndexed ? static_cast<int>(blockIdx.y) / p.h_kv : 0;
  c.r = MODE == kLatentIndexed ? static_cast<int>(blockIdx.y) - c.s_tok * p.h_kv : static_cast<int>(blockIdx.y);
  c.g = p.group;
  c.rows = MODE == kLatentIndexed ? c.g : p.s_q * c.g;
  const int n_mt = (c.rows + BM - 1) / BM;
  c.split = static_cast<int>(blockIdx.x) / n_mt;
  c.m_base = (static_cast<int>(blockIdx.x) - c.split * n_mt) * BM;
  return c;
}

// The key slots of the CTA at `c` and its run of BN-slot tiles [n_first, n_first + num_tiles BN) (SPLIT:
// the split-th of p.n_splits runs of nearly equal length). vis_base (mla_decode): token t sees positions
// < vis_base + t (cache position len - S_q + t is its own).
template <typename T, int MODE, int BM, int BN, bool SPLIT>
struct LatentRun {
  LatentSlots<T, MODE> slots;
  int vis_base = 0, num_tiles = 0, n_first = 0;

  __device__ __forceinline__ LatentRun(const LatentDecodeParams& p, const LatentCoords& c) {
    const T* kbase = static_cast<const T*>(p.k);
    const T* ktbase = static_cast<const T*>(p.k_tail);
    if constexpr (MODE == kLatentIndexed) {
      slots.n_keys = p.n_slots;
      slots.kb = kbase + c.b * p.k_sb + c.r * p.k_sh;
      slots.ktb = ktbase + c.b * p.kt_sb + c.r * p.kt_sh;
      slots.idx = p.indices + c.b * p.idx_sb + c.s_tok * p.idx_ss + c.r * p.idx_sh;
      slots.q_pos1 = static_cast<long long>(p.q_start) + c.s_tok + 1;
    } else {
      const int len = p.seqlens ? p.seqlens[c.b * p.seqlens_s] : p.n_kv;
      vis_base = len - p.s_q + 1;
      const int t_last = min(p.s_q - 1, (min(c.rows, c.m_base + BM) - 1) / c.g);
      slots.n_keys = max(0, min(len, vis_base + t_last));
      if constexpr (MODE == kLatentPaged) {
        slots.kb = kbase + c.r * p.k_sh;
        slots.ktb = ktbase + c.r * p.kt_sh;
        slots.table = p.block_table + c.b * p.bt_sb;
      } else {
        slots.kb = kbase + c.b * p.k_sb + c.r * p.k_sh;
        slots.ktb = ktbase + c.b * p.kt_sb + c.r * p.kt_sh;
      }
    }
    num_tiles = (slots.n_keys + BN - 1) / BN;
    if constexpr (SPLIT) {
      const int per = (num_tiles + p.n_splits - 1) / p.n_splits;
      const int first = min(num_tiles, c.split * per);
      num_tiles = min(num_tiles, first + per) - first;
      n_first = first * BN;
    }
  }
};

}  // namespace attnjit::kernels
