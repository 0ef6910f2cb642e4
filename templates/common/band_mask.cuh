// The causal / window band of the attention kernels (SPEC.md: bottom-right aligned, query i sits at
// key position i + kv_len - q_len): which keys a row sees, which keys a tile of rows can see, and
// whether a key tile crosses the band's edges (only those tiles are masked key by key).
// window_left / window_right < 0: unlimited on that side. CAUSAL and WINDOW are compile-time, so a
// kernel without them keeps none of the tests.
#pragma once

namespace attnjit::kernels {

// Narrows the keys [lo, hi) (all keys: [0, kv_len)) to those some row at key positions [p_min, p_max]
// can see.
template <bool CAUSAL, bool WINDOW>
__device__ __forceinline__ void band_keys(int p_min, int p_max, int window_left, int window_right, int& lo, int& hi) {
  if constexpr (CAUSAL) hi = min(hi, p_max + 1);
  if constexpr (WINDOW) {
    if (window_left >= 0) lo = max(lo, p_min - window_left);
    if (window_right >= 0) hi = min(hi, p_max + window_right + 1);
  }
}

// need_mask (the caller's "some key of [n0, n0 + N) is past kv_len"), or whether the keys [n0, n0 + N)
// hold one that some row at key positions [p_min, p_max] does not see because of the band. Only such
// tiles are masked key by key.
// NOTE: dense/gqa_fwd.cuh and dense/gqa_fwd_hopper.cuh write this test out: every function form of it
// tried there (this one, the kv_len edge inside, need_mask by reference) moved the causal kernels'
// instruction schedule (same instruction counts, different registers and order).
template <bool CAUSAL, bool WINDOW, int N>
__device__ __forceinline__ bool band_edge(bool need_mask, int n0, int p_min, int p_max, int window_left, int window_right) {
  if constexpr (CAUSAL) need_mask = need_mask || n0 + N - 1 > p_min;
  if constexpr (WINDOW) {
    need_mask = need_mask || (window_left >= 0 && n0 < p_max - window_left) ||
                (window_right >= 0 && n0 + N - 1 > p_min + window_right);
  }
  return need_mask;
}

// Whether the row at key position pos sees key j (j < kv_len, inside its band).
template <bool CAUSAL, bool WINDOW>
__device__ __forceinline__ bool key_visible(int j, int pos, int kv_len, int window_left, int window_right) {
  bool visible = j < kv_len;
  if constexpr (CAUSAL) visible = visible && j <= pos;
  if constexpr (WINDOW) {
    visible = visible && (window_left < 0 || j >= pos - window_left) && (window_right < 0 || j <= pos + window_right);
  }
  return visible;
}

}  // namespace attnjit::kernels
