// The attention mainloop of the hopper backend, shared by its kernels (gqa_fwd_hopper.cuh,
// bsa_fwd_hopper.cuh): a CTA of two consumer warpgroups (64 query rows each) and one producer warpgroup,
// K/V tiles of BN keys in a two-stage shared-memory ring filled by TMA (64-column boxes, 128-byte
// swizzle) and guarded by mbarriers, S = Q K^T and O += P V on wgmma, online softmax in registers.
#pragma once
#include "hopper/sm90.cuh"

namespace attnjit::kernels {

// Shared memory of a CTA: Q [2 warpgroups][D / 64][64 rows][128 B], then K and V rings
// [2 stages][D / 64][BN rows][128 B], then the ring's mbarriers (full_k, full_v, empty_k, empty_v per
// stage) and a per-stage tile record (key start, valid keys) the producer writes for the consumers.
template <int D, int BN>
struct HopperRing {
  static constexpr int kDB = D / 64;
  static constexpr int kQBytes = 128 * D * 2;
  static constexpr int kStageBytes = BN * D * 2;
  static constexpr int kStages = 2;
  static constexpr int kSmemBytes = kQBytes + 2 * kStages * kStageBytes + 8 * 8 + kStages * 8 + 1024;
  static_assert(D % 64 == 0 && D <= 256, "HopperRing: D is 64, 128 or 256");

  unsigned char* q;
  unsigned char* k;
  unsigned char* v;
  int* records;  // [stage][2]: n0, valid
  unsigned bar0;

  __device__ __forceinline__ explicit HopperRing(unsigned char* smem_raw) {
    unsigned char* base = reinterpret_cast<unsigned char*>((reinterpret_cast<unsigned long long>(smem_raw) + 1023) & ~1023ull);
    q = base;
    k = q + kQBytes;
    v = k + kStages * kStageBytes;
    bar0 = smem_addr(v + kStages * kStageBytes);
    records = reinterpret_cast<int*>(v + kStages * kStageBytes + 64);
  }
  __device__ __forceinline__ unsigned full_k(int s) const { return bar0 + 8u * s; }
  __device__ __forceinline__ unsigned full_v(int s) const { return bar0 + 8u * (2 + s); }
  __device__ __forceinline__ unsigned empty_k(int s) const { return bar0 + 8u * (4 + s); }
  __device__ __forceinline__ unsigned empty_v(int s) const { return bar0 + 8u * (6 + s); }
  // One thread, before the CTA's first barrier.
  __device__ __forceinline__ void init() const {
    for (int s = 0; s < kStages; ++s) {
      mbar_init(full_k(s), 1);
      mbar_init(full_v(s), 1);
      mbar_init(empty_k(s), 8);  // one arrival per consumer warp
      mbar_init(empty_v(s), 8);
    }
    mbar_init_fence();
  }

  // Producer (one thread): tile t = the BN rows from key row c2 (of KV head c1, batch c3) into stage
  // t % 2, K then V, each after the consumers released the stage; records (n0, valid) for them.
  __device__ __forceinline__ void produce(int t, const TmaMap* kmap, const TmaMap* vmap, int c1, int c2, int c3, int n0,
                                          int valid) const {
    const int s = t & 1;
    const unsigned ph = (t >> 1) & 1;
    mbar_wait(empty_k(s), ph ^ 1);
    records[2 * s] = n0;
    records[2 * s + 1] = valid;
    mbar_arrive_expect_tx(full_k(s), kStageBytes);
#pragma unroll
    for (int c = 0; c < kDB; ++c) tma_load_4d(smem_addr(k + s * kStageBytes + c * BN * 128), kmap, c * 64, c1, c2, c3, full_k(s));
    mbar_wait(empty_v(s), ph ^ 1);
    mbar_arrive_expect_tx(full_v(s), kStageBytes);
#pragma unroll
    for (int c = 0; c < kDB; ++c) tma_load_4d(smem_addr(v + s * kStageBytes + c * BN * 128), vmap, c * 64, c1, c2, c3, full_v(s));
  }
  // Producer: the end of a stream whose length the consumers do not know (valid = 0 in tile t's record).
  __device__ __forceinline__ void produce_end(int t) const {
    const int s = t & 1;
    mbar_wait(empty_k(s), ((t >> 1) & 1) ^ 1);
    records[2 * s + 1] = 0;
    mbar_arrive(full_k(s));
  }

  // Consumer warpgroup wg: its 64 rows of Q, row lr (0..63) from row_ptr(lr) (nullptr: zeros), swizzled.
  template <typename T, typename RowPtr>
  __device__ __forceinline__ void load_q(int wg, RowPtr row_ptr) const {
    constexpr int kChunks = D / 8;
    unsigned char* sq = q + wg * (64 * D * 2);
    const int tid = threadIdx.x % 128;
#pragma unroll 4
    for (int idx = tid; idx < 64 * kChunks; idx += 128) {
      const int lr = idx / kChunks, ch = idx % kChunks;
      const T* src = row_ptr(lr);
      cp_async_16(sq + (ch / 8) * (64 * 128) + swizzle128(lr, ch % 8), src ? src + ch * 8 : nullptr, src != nullptr);
    }
    cp_async_commit();
    cp_async_wait<0>();
    fence_proxy_async();
    named_barrier(1 + wg, 128);
  }
};

// A consumer warpgroup's running softmax state: O [64 x D] as wgmma accumulators (per thread: rows
// lane / 4 and lane / 4 + 8 of its warp's 16, columns dt * 8 + 2 * (lane % 4) + {0, 1}), the reference
// maximum m (raw score units) and the partial sum l of each of its two rows.
template <int D>
struct HopperSoftmaxState {
  float o[D / 2];
  float m[2], l[2];
  __device__ __forceinline__ void init() {
#pragma unroll
    for (int i = 0; i < D / 2; ++i) o[i] = 0.f;
    m[0] = m[1] = -kInf();
    l[0] = l[1] = 0.f;
  }
};

// Consumer warpgroup: key tile t (stage t % 2) of the ring. visible(hf, j) says whether key column j
// (0..BN-1) of the tile is visible to this thread's row hf; it is consulted only when need_mask.
// score_scale turns raw scores (softcapped ones when SOFTCAP) into log2-domain logits.
template <typename T, int D, int BN, bool SOFTCAP, typename Visible>
__device__ __forceinline__ void hopper_attend_tile(const HopperRing<D, BN>& ring, int wg, int t, bool need_mask,
                                                   Visible visible, float score_scale, float softcap_log2,
                                                   float softcap_inv_scale, HopperSoftmaxState<D>& st) {
  using Mma = MmaOp<T>;
  constexpr int kNT = BN / 8, kDT = D / 8;
  const int s = t & 1;
  const unsigned ph = (t >> 1) & 1;
  const int lane = threadIdx.x % 32;
  const unsigned char* sQw = ring.q + wg * (64 * D * 2);
  const unsigned char* sKs = ring.k + s * HopperRing<D, BN>::kStageBytes;
  const unsigned char* sVs = ring.v + s * HopperRing<D, BN>::kStageBytes;

  // S = Q K^T (both K-major in shared memory; k16 step ks is 32 bytes into a 64-column block).
  float sc[kNT * 4];
  mbar_wait(ring.full_k(s), ph);
  wgmma_fence();
#pragma unroll
  for (int ks = 0; ks < D / 16; ++ks) {
    const unsigned long long da = wgmma_desc(sQw + (ks / 4) * (64 * 128) + (ks % 4) * 32, 16, 1024);
    const unsigned long long db = wgmma_desc(sKs + (ks / 4) * (BN * 128) + (ks % 4) * 32, 16, 1024);
    Wgmma<T, BN>::template ss<0>(sc, da, db, ks > 0 ? 1 : 0);
  }
  wgmma_commit();
  wgmma_wait<0>();
  fence_regs(sc);
  if (lane == 0) mbar_arrive(ring.empty_k(s));

  if (SOFTCAP || need_mask) {
#pragma unroll
    for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        float x = sc[nt * 4 + e];
        if constexpr (SOFTCAP) x = softcap_log2 * fast_tanh(x * softcap_inv_scale);
        if (need_mask && !visible(e >> 1, nt * 8 + 2 * (lane % 4) + (e & 1))) x = -kInf();
        sc[nt * 4 + e] = x;
      }
  }

  // Online softmax with lazy rescaling: a row's reference maximum moves only when the tile's maximum
  // exceeds it by more than 2^8, and O and l are rescaled only when some row of the warp moved.
  float tile_max[2];
  bool moved = false;
#pragma unroll
  for (int hf = 0; hf < 2; ++hf) {
    float mx = -kInf();
#pragma unroll
    for (int nt = 0; nt < kNT; ++nt) mx = fmaxf(mx, fmaxf(sc[nt * 4 + 2 * hf], sc[nt * 4 + 2 * hf + 1]));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
    tile_max[hf] = mx;
    moved = moved || mx * score_scale > st.m[hf] * score_scale + 8.f;
  }
  if (__any_sync(0xffffffffu, moved)) {
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
      const float m_new = fmaxf(st.m[hf], tile_max[hf]);
      const float alpha = m_new == -kInf() ? 1.f : fast_exp2((st.m[hf] - m_new) * score_scale);
      st.m[hf] = m_new;
      st.l[hf] *= alpha;
#pragma unroll
      for (int dt = 0; dt < kDT; ++dt) {
        st.o[dt * 4 + 2 * hf] *= alpha;
        st.o[dt * 4 + 2 * hf + 1] *= alpha;
      }
    }
  }
  // P in the A-fragment layout of m64nNk16 (per warp that of mma.sync m16n8k16): for keys kk * 16 ..,
  // regs 0 / 1 are rows g / g + 8 at keys 2t, regs 2 / 3 the same at keys 2t + 8.
  unsigned pa[BN / 16][4];
#pragma unroll
  for (int hf = 0; hf < 2; ++hf) {
    const float m_scaled = st.m[hf] == -kInf() ? 0.f : st.m[hf] * score_scale;
    float rs = 0.f;
#pragma unroll
    for (int nt = 0; nt < kNT; ++nt) {
      const float p0 = fast_exp2(fmaf(sc[nt * 4 + 2 * hf], score_scale, -m_scaled));
      const float p1 = fast_exp2(fmaf(sc[nt * 4 + 2 * hf + 1], score_scale, -m_scaled));
      rs += p0 + p1;
      pa[nt / 2][(nt % 2) * 2 + hf] = Mma::pack(p0, p1);
    }
    st.l[hf] += rs;
  }

  // O += P V (V N-major: 64-column blocks BN * 128 bytes apart, 8-key groups 1024 bytes apart).
  mbar_wait(ring.full_v(s), ph);
  wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < BN / 16; ++kk) {
    const unsigned long long db = wgmma_desc(sVs + kk * 2048, BN * 128, 1024);
    Wgmma<T, D>::template rs<1>(st.o, pa[kk], db);
  }
  wgmma_commit();
  wgmma_wait<0>();
  fence_regs(st.o);
  if (lane == 0) mbar_arrive(ring.empty_v(s));
}

}  // namespace attnjit::kernels
