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

}  // namespace attnjit::kernels
