// The attention mainloop of the hopper backend, shared by its kernels (gqa_fwd_hopper.cuh,
// bsa_fwd_hopper.cuh): a CTA of one to three consumer warpgroups (64 query rows each) and one producer
// warpgroup,
// K/V tiles of BN keys in a two-stage shared-memory ring filled by TMA (64-column boxes, 128-byte
// swizzle) and guarded by mbarriers, S = Q K^T and O += P V on wgmma, online softmax in registers. For
// D <= 128 a warpgroup overlaps tile t + 1's S = Q K^T and softmax with tile t's P V (FlashAttention-3's
// intra-warpgroup pipelining).
#pragma once
#include "hopper/ring_params.cuh"
#include "hopper/sm90.cuh"

namespace attnjit::kernels {

// Shared memory of a CTA: Q [NWG warpgroups][D / 64][64 rows][128 B], then K and V rings
// [2 stages][D / 64][BN rows][128 B], then the ring's mbarriers (full_k, full_v, empty_k, empty_v per
// stage), a per-stage tile record (key start, valid keys) the producer writes for the consumers, and one
// mbarrier per consumer warpgroup (q_full) for kernels whose producer loads Q by TMA (produce_q).
template <int D, int BN, int NWG = 2>
struct HopperRing {
  static constexpr int kDB = D / 64;
  static constexpr int kWarpgroups = NWG;  // consumer warpgroups (64 query rows each)
  static constexpr int kQBytes = NWG * 64 * D * 2;
  static constexpr int kStageBytes = BN * D * 2;
  static constexpr int kStages = 2;
  static constexpr int kSmemBytes = kQBytes + 2 * kStages * kStageBytes + 8 * 8 + kStages * 8 + 3 * 8 + 1024;
  static_assert(D % 64 == 0 && D <= 256, "HopperRing: D is 64, 128 or 256");
  static_assert(NWG >= 1 && NWG <= 3, "HopperRing: one to three consumer warpgroups");
  static_assert(kSmemBytes == hopper_ring_smem_bytes(D, BN, NWG), "HopperRing: the host's geometry (ring_params.cuh)");

  unsigned char* q;
  unsigned char* k;
  unsigned char* v;
  int* records;  // [stage][2]: n0, valid
  unsigned bar0;

  __device__ __forceinline__ explicit HopperRing(unsigned char* smem_raw) {
    unsigned char* base = align_smem_1024(smem_raw);
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
  // After the 8 ring barriers (64 bytes) and the records (kStages * 8 bytes).
  __device__ __forceinline__ unsigned q_full(int wg) const { return bar0 + 64u + kStages * 8u + 8u * wg; }
  // One thread, before the CTA's first barrier. full_arrivals: arrivals that complete a full barrier's
  // phase (1 for a TMA producer, whose bytes complete it; the copying threads for cp.async producers).
  // q_barriers: also the consumer warpgroups' q_full barriers (one arrival: produce_q's, with its bytes).
  __device__ __forceinline__ void init(unsigned full_arrivals = 1, bool q_barriers = false) const {
    for (int s = 0; s < kStages; ++s) {
      mbar_init(full_k(s), full_arrivals);
      mbar_init(full_v(s), full_arrivals);
      mbar_init(empty_k(s), 4 * NWG);  // one arrival per consumer warp
      mbar_init(empty_v(s), 4 * NWG);
    }
    if (q_barriers)
      for (int w = 0; w < NWG; ++w) mbar_init(q_full(w), 1);
    mbar_init_fence();
  }

  // Producer (one thread): consumer warpgroup wg's 64 rows of Q by TMA, D / 64 boxes of 64 rows at
  // (head c1, row c2, batch c3) of the 4-d map (64 columns x 64 rows of 128 bytes each, as load_q lays
  // them out), completing on q_full(wg) (phase 0: one load per CTA). The consumers wait with wait_q_tma.
  __device__ __forceinline__ void produce_q(const TmaMap* qmap, int wg, int c1, int c2, int c3) const {
    mbar_arrive_expect_tx(q_full(wg), 64 * D * 2);
#pragma unroll
    for (int c = 0; c < kDB; ++c)
      tma_load_4d(smem_addr(q + wg * (64 * D * 2) + c * (64 * 128)), qmap, c * 64, c1, c2, c3, q_full(wg));
  }
  // Consumer warpgroup wg: its Q rows from produce_q have landed (TMA writes are visible to wgmma once the
  // barrier's phase completes).
  __device__ __forceinline__ void wait_q_tma(int wg) const { mbar_wait(q_full(wg), 0); }

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
    issue_q<T>(wg, row_ptr);
    wait_q(wg);
  }
  // load_q in two halves, so that a persistent kernel's warpgroup can copy the next work tile's Q while it
  // stores this one's O (from registers). issue_q: the cp.async copies, one group; every wgmma of the
  // warpgroup that reads its Q must have completed in all four of its warps (named barrier 1 + wg after
  // their last wgmma wait). wait_q: the copies landed and are visible to wgmma (the async proxy).
  template <typename T, typename RowPtr>
  __device__ __forceinline__ void issue_q(int wg, RowPtr row_ptr) const {
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
  }
  __device__ __forceinline__ void wait_q(int wg) const {
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

// Consumer warpgroup: issues S = Q K^T for tile t (stage t % 2) once its K landed; both operands are
// K-major in shared memory (k16 step ks is 32 bytes into a 64-column block). Does not wait. DESC_ADD:
// each k-step's descriptors are the operands' base descriptors plus a constant (wgmma_desc_plus), instead
// of being rebuilt from the address (three or four uniform instructions a step).
template <typename T, int D, int BN, int NWG, bool DESC_ADD = false>
__device__ __forceinline__ void hopper_issue_qk(const HopperRing<D, BN, NWG>& ring, int wg, int t, float (&sc)[BN / 2]) {
  const unsigned char* sQw = ring.q + wg * (64 * D * 2);
  const unsigned char* sKs = ring.k + (t & 1) * HopperRing<D, BN, NWG>::kStageBytes;
  if constexpr (DESC_ADD) {
    const unsigned long long qa = wgmma_desc_at(smem_addr(sQw), 16, 1024), ka = wgmma_desc_at(smem_addr(sKs), 16, 1024);
    wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < D / 16; ++ks)
      Wgmma<T, BN>::template ss<0>(sc, wgmma_desc_plus(qa, (ks / 4) * (64 * 128) + (ks % 4) * 32),
                                   wgmma_desc_plus(ka, (ks / 4) * (BN * 128) + (ks % 4) * 32), ks > 0 ? 1 : 0);
  } else {
    wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < D / 16; ++ks) {
      const unsigned long long da = wgmma_desc_at(smem_addr(sQw) + (ks / 4) * (64 * 128) + (ks % 4) * 32, 16, 1024);
      const unsigned long long db = wgmma_desc_at(smem_addr(sKs) + (ks / 4) * (BN * 128) + (ks % 4) * 32, 16, 1024);
      Wgmma<T, BN>::template ss<0>(sc, da, db, ks > 0 ? 1 : 0);
    }
  }
  wgmma_commit();
}

// Consumer warpgroup: issues O += P V for tile t once its V landed (V N-major: 64-column blocks BN * 128
// bytes apart, 8-key groups 1024 bytes apart). P stays in registers until the group completes.
template <typename T, int D, int BN, int NWG, bool DESC_ADD = false>
__device__ __forceinline__ void hopper_issue_pv(const HopperRing<D, BN, NWG>& ring, int t, const unsigned (&pa)[BN / 16][4],
                                                float (&o)[D / 2]) {
  const unsigned char* sVs = ring.v + (t & 1) * HopperRing<D, BN, NWG>::kStageBytes;
  if constexpr (DESC_ADD) {
    const unsigned long long va = wgmma_desc_at(smem_addr(sVs), BN * 128, 1024);
    mbar_wait(ring.full_v(t & 1), (t >> 1) & 1);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < BN / 16; ++kk) Wgmma<T, D>::template rs<1>(o, pa[kk], wgmma_desc_plus(va, kk * 2048));
  } else {
    mbar_wait(ring.full_v(t & 1), (t >> 1) & 1);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < BN / 16; ++kk) {
      const unsigned long long db = wgmma_desc_at(smem_addr(sVs) + kk * 2048, BN * 128, 1024);
      Wgmma<T, D>::template rs<1>(o, pa[kk], db);
    }
  }
  wgmma_commit();
}

// The softmax step of one tile's scores sc (complete in registers): masks (visible(hf, j) for key column
// j of the tile, consulted only when need_mask) and softcap, the new reference maxima, l rescaled and
// increased, and P in the A-fragment layout of m64nNk16 (per warp that of mma.sync m16n8k16: for keys
// kk * 16 .., regs 0 / 1 are rows g / g + 8 at keys 2t, regs 2 / 3 the same at keys 2t + 8). Returns
// whether O must be multiplied by alpha[hf] before P V is added (lazy rescaling: a row's reference
// maximum moves only when the tile's maximum exceeds it by more than 2^8; warp-uniform). PACK = false
// leaves P in sc (fp32) for hopper_pack_p, so that P's 16-bit registers can still be read by an
// in-flight P V meanwhile.
template <typename T, int D, int BN, bool SOFTCAP, bool PACK = true, typename Visible>
__device__ __forceinline__ bool hopper_softmax(float (&sc)[BN / 2], bool need_mask, Visible visible, float score_scale,
                                               float softcap_log2, float softcap_inv_scale, HopperSoftmaxState<D>& st,
                                               unsigned (&pa)[BN / 16][4], float (&alpha)[2]) {
  using Mma = MmaOp<T>;
  constexpr int kNT = BN / 8;
  const int lane = threadIdx.x % 32;
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
  moved = __any_sync(0xffffffffu, moved);
#pragma unroll
  for (int hf = 0; hf < 2; ++hf) {
    alpha[hf] = 1.f;
    if (moved) {
      const float m_new = fmaxf(st.m[hf], tile_max[hf]);
      alpha[hf] = m_new == -kInf() ? 1.f : fast_exp2((st.m[hf] - m_new) * score_scale);
      st.m[hf] = m_new;
      st.l[hf] *= alpha[hf];
    }
    const float m_scaled = st.m[hf] == -kInf() ? 0.f : st.m[hf] * score_scale;
    float rs = 0.f;
#pragma unroll
    for (int nt = 0; nt < kNT; ++nt) {
      const float p0 = fast_exp2(fmaf(sc[nt * 4 + 2 * hf], score_scale, -m_scaled));
      const float p1 = fast_exp2(fmaf(sc[nt * 4 + 2 * hf + 1], score_scale, -m_scaled));
      rs += p0 + p1;
      if constexpr (PACK) {
        pa[nt / 2][(nt % 2) * 2 + hf] = Mma::pack(p0, p1);
      } else {
        sc[nt * 4 + 2 * hf] = p0;
        sc[nt * 4 + 2 * hf + 1] = p1;
      }
    }
    st.l[hf] += rs;
  }
  return moved;
}

// P left in sc by hopper_softmax<..., PACK = false>, into the A-fragment layout (as hopper_softmax packs it).
template <typename T, int BN>
__device__ __forceinline__ void hopper_pack_p(const float (&sc)[BN / 2], unsigned (&pa)[BN / 16][4]) {
#pragma unroll
  for (int nt = 0; nt < BN / 8; ++nt)
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) pa[nt / 2][(nt % 2) * 2 + hf] = MmaOp<T>::pack(sc[nt * 4 + 2 * hf], sc[nt * 4 + 2 * hf + 1]);
}

// Keeps P's registers allocated (and unmodified) until the P V group that reads them has completed.
template <int N>
__device__ __forceinline__ void hold_regs(unsigned (&pa)[N][4]) {
#pragma unroll
  for (int i = 0; i < N; ++i)
#pragma unroll
    for (int e = 0; e < 4; ++e) asm volatile("" : "+r"(pa[i][e])::"memory");
}

// Ping-pong of two consumer warpgroups (FlashAttention-3's inter-warpgroup overlap): they take turns to
// issue their wgmmas, so that one warpgroup's softmax runs while the other's GEMMs hold the tensor
// cores, instead of both issuing at once and then both doing exp at once. Named barrier 3 + wg (256
// threads) is warpgroup wg's turn: it waits there before an issue and arrives on the other's after.
// Warpgroup 1 grants the first turn; warpgroup 0 takes the last arrival at the end, so both barriers are
// balanced when the warpgroups issue equally often (they walk the same tiles of one ring). A persistent
// kernel starts once before its first work tile and finishes once after its last: each key loop takes
// num_tiles + 1 turns in each warpgroup, so the alternation carries on across work tiles. Ids 1 to NWG are
// the Q loads' (HopperRing::load_q, issue_q / wait_q); ping-pong runs with two warpgroups only.
template <bool ON>
struct HopperPingPong {
  int wg;
  __device__ __forceinline__ void start() const {
    if (ON && wg == 1) named_barrier_arrive(3, 256);
  }
  __device__ __forceinline__ void take() const {
    if (ON) named_barrier(3 + wg, 256);
  }
  __device__ __forceinline__ void pass() const {
    if (ON) named_barrier_arrive(3 + (wg ^ 1), 256);
  }
  __device__ __forceinline__ void finish() const {
    if (ON && wg == 0) named_barrier(3, 256);
  }
};

// A consumer warpgroup's whole key loop over the ring: num_tiles tiles, or (num_tiles < 0) until the
// producer's empty record. Tile t + 1's
// S = Q K^T is issued before tile t's O += P V, so that the softmax of tile t + 1 runs while the tensor
// cores compute P V of tile t (O is rescaled after that group completes). need(n0, valid) says whether a
// tile needs masking; visible(n0, valid, hf, j) whether its key column j is visible to row hf. Every wgmma
// issue of the D <= 128 loop is a turn (HopperPingPong). ONE_P: P has one register set, packed from the
// fp32 scores after the previous tile's P V completed (32 registers fewer at BN 128, for three
// warpgroups' 160 registers a thread); otherwise the softmax packs P straight into the set the in-flight
// P V does not read. t0: the ring's count of tiles before this loop's first (a persistent kernel's
// warpgroups walk one ring across their work tiles, so stage and phase of the loop's tile t are those of
// ring tile t0 + t; the producer counts the same way).
template <typename T, int D, int BN, bool SOFTCAP, int NWG, bool ONE_P, bool DESC_ADD = false, typename Need,
          typename Visible, typename Turn>
__device__ __forceinline__ void hopper_key_loop(const HopperRing<D, BN, NWG>& ring, int wg, int num_tiles, Need need,
                                                Visible visible, float score_scale, float softcap_log2,
                                                float softcap_inv_scale, HopperSoftmaxState<D>& st, const Turn& turn,
                                                int t0 = 0) {
  const int lane = threadIdx.x % 32;
  float sc[BN / 2];
  unsigned pa[BN / 16][4], pa_next[BN / 16][4];
  float alpha[2];
  auto record = [&](int t, int& n0, int& valid) {
    if (num_tiles >= 0 && t >= num_tiles) {  // a known count: no end record to wait for
      n0 = valid = 0;
      return;
    }
    const int u = t0 + t;  // the ring's count
    mbar_wait(ring.full_k(u & 1), (u >> 1) & 1);
    n0 = ring.records[2 * (u & 1)];
    valid = ring.records[2 * (u & 1) + 1];
  };
  int n0, valid;
  auto rescale_o = [&](bool moved) {
    if (moved) {
#pragma unroll
      for (int dt = 0; dt < D / 8; ++dt) {
        st.o[dt * 4] *= alpha[0];
        st.o[dt * 4 + 1] *= alpha[0];
        st.o[dt * 4 + 2] *= alpha[1];
        st.o[dt * 4 + 3] *= alpha[1];
      }
    }
  };
  if constexpr (D > 128) {
    // NOTE: D = 256's O (128 registers) leaves no room for a second tile's scores and P: one tile at a
    // time (the overlapped loop spilled 116 bytes).
    for (int t = 0;; ++t) {
      record(t, n0, valid);
      if (valid == 0) return;
      hopper_issue_qk<T, D, BN, NWG, DESC_ADD>(ring, wg, t0 + t, sc);
      wgmma_wait<0>();
      fence_regs(sc);
      __syncwarp();  // every lane has read the tile's record
      if (lane == 0) mbar_arrive(ring.empty_k((t0 + t) & 1));
      rescale_o(hopper_softmax<T, D, BN, SOFTCAP>(
          sc, need(n0, valid), [&](int hf, int j) { return visible(n0, valid, hf, j); }, score_scale, softcap_log2,
          softcap_inv_scale, st, pa, alpha));
      hopper_issue_pv<T, D, BN, NWG, DESC_ADD>(ring, t0 + t, pa, st.o);
      wgmma_wait<0>();
      fence_regs(st.o);
      hold_regs(pa);
      if (lane == 0) mbar_arrive(ring.empty_v((t0 + t) & 1));
    }
  }
  record(0, n0, valid);
  if (valid == 0) return;
  turn.take();
  hopper_issue_qk<T, D, BN, NWG, DESC_ADD>(ring, wg, t0, sc);
  turn.pass();
  wgmma_wait<0>();
  fence_regs(sc);
  __syncwarp();  // every lane has read the tile's record
  if (lane == 0) mbar_arrive(ring.empty_k(t0 & 1));
  hopper_softmax<T, D, BN, SOFTCAP>(
      sc, need(n0, valid), [&](int hf, int j) { return visible(n0, valid, hf, j); }, score_scale, softcap_log2,
      softcap_inv_scale, st, pa, alpha);  // O is zero: no rescale
  // NOTE: the loop issues unconditionally and the last tile's P V is peeled off: with a conditional
  // S = Q K^T issue, ptxas serialised every wgmma (C7514, accumulators read inside a pipeline stage).
  // P alternates between two register sets (no copies) for the same reason (C7513).
  int t = 0, n1, valid1;
  record(1, n1, valid1);
  // One step: tile t's P V (P in cur) overlapped with tile t + 1's scores; tile t + 1's P into nxt.
  auto step = [&](unsigned (&cur)[BN / 16][4], unsigned (&nxt)[BN / 16][4]) {
    turn.take();
    hopper_issue_qk<T, D, BN, NWG, DESC_ADD>(ring, wg, t0 + t + 1, sc);
    hopper_issue_pv<T, D, BN, NWG, DESC_ADD>(ring, t0 + t, cur, st.o);
    turn.pass();
    wgmma_wait<1>();
    fence_regs(sc);
    __syncwarp();  // every lane has read the tile's record
    if (lane == 0) mbar_arrive(ring.empty_k((t0 + t + 1) & 1));
    const bool moved = hopper_softmax<T, D, BN, SOFTCAP, !ONE_P>(
        sc, need(n1, valid1), [&](int hf, int j) { return visible(n1, valid1, hf, j); }, score_scale, softcap_log2,
        softcap_inv_scale, st, nxt, alpha);
    wgmma_wait<0>();
    fence_regs(st.o);
    hold_regs(cur);
    if (lane == 0) mbar_arrive(ring.empty_v((t0 + t) & 1));
    rescale_o(moved);
    if constexpr (ONE_P) hopper_pack_p<T, BN>(sc, nxt);  // nxt is cur: its P V has completed
    ++t;
    record(t + 1, n1, valid1);
  };
  bool in_next = false;  // which set holds the P of tile t
  while (valid1 != 0) {
    if constexpr (ONE_P) {
      step(pa, pa);
      continue;
    }
    step(pa, pa_next);
    if (valid1 == 0) {
      in_next = true;
      break;
    }
    step(pa_next, pa);
  }
  turn.take();
  if (in_next) {
    hopper_issue_pv<T, D, BN, NWG, DESC_ADD>(ring, t0 + t, pa_next, st.o);
  } else {
    hopper_issue_pv<T, D, BN, NWG, DESC_ADD>(ring, t0 + t, pa, st.o);
  }
  turn.pass();
  wgmma_wait<0>();
  fence_regs(st.o);
  hold_regs(pa);
  if constexpr (!ONE_P) hold_regs(pa_next);
  if (lane == 0) mbar_arrive(ring.empty_v((t0 + t) & 1));
}

// A consumer warpgroup's key loop (hopper_key_loop), with ping-pong turns when PINGPONG (two warpgroups,
// D <= 128) and one P register set with three warpgroups; DESC_ADD as hopper_issue_qk's.
template <typename T, int D, int BN, bool SOFTCAP, int NWG, bool PINGPONG = false, bool DESC_ADD = false, typename Need,
          typename Visible>
__device__ __forceinline__ void hopper_mainloop(const HopperRing<D, BN, NWG>& ring, int wg, int num_tiles, Need need,
                                                Visible visible, float score_scale, float softcap_log2,
                                                float softcap_inv_scale, HopperSoftmaxState<D>& st) {
  static_assert(!PINGPONG || (NWG == 2 && D <= 128), "hopper_mainloop: ping-pong needs two warpgroups and D <= 128");
  const HopperPingPong<PINGPONG> turn{wg};
  turn.start();
  hopper_key_loop<T, D, BN, SOFTCAP, NWG, (NWG == 3), DESC_ADD>(ring, wg, num_tiles, need, visible, score_scale,
                                                                softcap_log2, softcap_inv_scale, st, turn);
  turn.finish();
}

}  // namespace attnjit::kernels
