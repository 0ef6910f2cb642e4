// gqa_paged_fwd's split-KV decode path on the hopper backend (sm_90a; SPEC.md §2.9): the portable decode
// tile's math (16 rows of (query, head-in-group) pairs, mma.sync, online softmax, fp32 partials for the
// combine) fed by TMA boxes of whole page rows for all KV heads at once.
//
// Why: decode is a stream of K/V bytes. The portable tile (one KV head per CTA) issues a cp.async per
// 16 bytes with per-row page arithmetic, and its eight heads' CTAs read 256-byte pieces of each pool row
// at different times. Here a CTA owns one query tile of a request for up to eight of its KV heads (all
// of them when H_kv <= 8; grid z = groups of eight otherwise) and one split of its keys: a 16-key chunk
// of one page is one contiguous run of those heads per slot, and one TMA box (64 columns x 16 slots x
// the group's heads) per 64 columns brings it in, 16 x heads x 128 bytes at a time.
//
// Roles (288 threads, one CTA per SM):
//   warp 8      producer: looks up a stage's pages (one page-table entry per chunk, a stage ahead) and
//               issues its boxes into a ring of pdh_halves(D) slots, K and V of a stage in consecutive
//               slots (full: TMA bytes, empty: 8 arrivals). A warp frees K's slot as soon as its scores
//               are computed, so the producer refills it while V is still in use. The ring is shallow
//               on purpose (pdh_halves): fewer bytes in flight streamed faster on the H200.
//   warps 0-7   consumers: warp w owns the group's head w % n and chunk w / n of every stage (n = the
//               group's heads; a stage holds 8 / n chunks of 16 keys). S = Q K^T (m16n8k16, Q fragments in registers, K by
//               ldmatrix from the swizzled box), masks, online softmax with lazy rescaling (as the portable
//               kernel), O += P V (V by ldmatrix.trans). Rows past a request's keys in a chunk's page are
//               garbage: their scores are masked and their V rows zeroed in shared memory before use.
//   end         the warps of one head merge (m, l, O) through shared memory; warp j = 0 of each head writes
//               the normalised fp32 partial and its log2-domain LSE for the combine (dense/gqa_combine.cuh).
//
// Queries: packed by cu_seqlens_q (gqa_paged_fwd) or batched [B, S_q, H, D] (BATCHED: mha_decode_paged).
// Served (the planner checks): fp16/bf16 pools in q's dtype, D 64 or 128, H_kv 1, 2, 4 or a multiple of 8,
// H / H_kv <= 16, page size a multiple of 16, TMA-able pools; causal, windows and softcap (sinks: in the
// combine).
#pragma once
#include "common/band_mask.cuh"
#include "common/mma.cuh"
#include "common/online_softmax.cuh"
#include "dense/varlen_tile.cuh"
#include "hopper/sm90.cuh"
#include "paged/paged_decode_hopper_params.cuh"

namespace attnjit::kernels {

__device__ __forceinline__ void pdh_ldsm_x4(unsigned (&r)[4], unsigned addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ void pdh_ldsm_x4_trans(unsigned (&r)[4], unsigned addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

template <typename T, int D, bool CAUSAL, bool WINDOW, bool SOFTCAP, bool BATCHED>
__global__ void __launch_bounds__(kPdhThreads, 1) paged_decode_hopper(const __grid_constant__ PagedDecodeHopperParams hp) {
  static_assert(D == 64 || D == 128, "paged_decode_hopper: D is 64 or 128");
  using Mma = MmaOp<T>;
  constexpr int kSlots = pdh_halves(D), kSlotBytes = pdh_half_bytes(D);
  constexpr int kCB = D / 64;   // 64-column blocks (one box each)
  constexpr int kKS = D / 16;   // k16 steps of Q K^T
  constexpr int kDT = D / 8;    // n8 tiles of O
  const GqaFwdParams& p = hp.p;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  unsigned char* base = align_smem_1024(smem_raw);
  const unsigned sbase = smem_addr(base);
  const unsigned bar0 = sbase + kSlots * kSlotBytes;
  auto full = [&](int s) { return bar0 + 8u * s; };
  auto empty = [&](int s) { return bar0 + 8u * (kSlots + s); };
  // Half n of the stream (n = 2 st for stage st's K, 2 st + 1 for its V): its slot and the parity of
  // its use of that slot.
  auto slot_of = [](int n) { return n % kSlots; };
  auto phase_of = [](int n) { return (n / kSlots) & 1; };

  const int G = p.group, PS = p.page_size;
  const int HKV = min(p.h_kv, kPdhConsumerWarps);   // this CTA's KV heads: [h0, h0 + HKV)
  const int h0 = blockIdx.z * kPdhConsumerWarps;
  const int nsb = kPdhConsumerWarps / HKV;          // chunks per stage
  const int chunk_bytes = kPdhChunk * HKV * D * 2;  // one chunk of K (or V), the CTA's heads
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  // The combine may be scheduled from now on; it waits for this grid's writes (griddepcontrol.wait).
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");

  int b, tile, q_off, q_len;
  if constexpr (BATCHED) {  // q [B, S_q, H, D]: ceil(S_q G / 16) tiles per request; token b * S_q + i
    const int per = (p.s_q * G + kPdhRows - 1) / kPdhRows;
    b = blockIdx.x / per;
    tile = blockIdx.x - b * per;
    if (b >= p.batch) return;
    q_off = b * p.s_q;
    q_len = p.s_q;
  } else {
    if (!find_varlen_tile<kPdhRows>(p, b, tile)) return;
    q_off = p.cu_q[b];
    q_len = p.cu_q[b + 1] - q_off;
  }
  const int kv_len = p.kv_lens[b * p.kv_lens_s];
  const int shift = kv_len - q_len;  // query i sits at key position i + shift
  const int m_base = tile * kPdhRows;
  const int i_min = m_base / G, i_max = min(q_len - 1, (m_base + kPdhRows - 1) / G);
  // The keys any row of the tile can see, in whole chunks, and this split's run of them.
  int lo = 0, hi = kv_len;
  band_keys<CAUSAL, WINDOW>(i_min + shift, i_max + shift, p.window_left, p.window_right, lo, hi);
  int c_first = lo / kPdhChunk, n_chunks = hi > c_first * kPdhChunk ? (hi - c_first * kPdhChunk + kPdhChunk - 1) / kPdhChunk : 0;
  {
    const int split = blockIdx.y, per = (n_chunks + p.n_splits - 1) / p.n_splits;
    const int first = min(n_chunks, split * per);
    n_chunks = min(n_chunks, first + per) - first;
    c_first += first;
  }
  const int n_stages = (n_chunks + nsb - 1) / nsb;

  if (tid == 0) {
    for (int s = 0; s < kSlots; ++s) {
      mbar_init(full(s), 1);
      mbar_init(empty(s), kPdhConsumerWarps);
    }
    mbar_init_fence();
  }
  __syncthreads();

  if (warp == kPdhConsumerWarps) {
    // Producer: lane c < nsb looks up chunk c of a stage one stage ahead of its use.
    const TmaMap* kmap = reinterpret_cast<const TmaMap*>(hp.k_map);
    const TmaMap* vmap = reinterpret_cast<const TmaMap*>(hp.v_map);
    if (lane == 0) {
      tma_prefetch_map(kmap);
      tma_prefetch_map(vmap);
    }
    const int* pt = p.page_table + static_cast<long long>(b) * p.pt_sb;
    auto lookup = [&](int st, int& page, int& slot) {
      const int c = st * nsb + lane;
      page = -1;
      slot = 0;
      if (lane < nsb && c < n_chunks) {
        const int key0 = (c_first + c) * kPdhChunk;
        page = __ldg(pt + static_cast<long long>(key0 / PS) * p.pt_sp);
        slot = key0 % PS;
      }
    };
    int page, slot;
    lookup(0, page, slot);
    for (int st = 0; st < n_stages; ++st) {
      int page_n, slot_n;
      lookup(st + 1, page_n, slot_n);  // in flight while this stage waits for its slot
      const unsigned tx = static_cast<unsigned>(__popc(__ballot_sync(0xffffffffu, page >= 0)) * chunk_bytes);
#pragma unroll
      for (int kv = 0; kv < 2; ++kv) {
        const int n = 2 * st + kv, s = slot_of(n);
        mbar_wait(empty(s), phase_of(n) ^ 1);
        if (lane == 0) mbar_arrive_expect_tx(full(s), tx);
        __syncwarp();
        if (page >= 0) {
          const unsigned dst = sbase + s * kSlotBytes + lane * chunk_bytes;
#pragma unroll
          for (int cb = 0; cb < kCB; ++cb)
            tma_load_4d(dst + cb * (HKV * kPdhChunk * 128), kv == 0 ? kmap : vmap, cb * 64, slot, h0, page, full(s));
        }
      }
      page = page_n;
      slot = slot_n;
    }
    return;
  }

  // Consumers. This warp's head and chunk of each stage; its rows: (mt-free) grp and grp + 8.
  const int hl = warp % HKV, j = warp / HKV;  // local head (shared-memory block) and chunk
  const int h = h0 + hl;                      // KV head
  const int grp = lane >> 2, tq = lane & 3;
  int row_pos[2];
  bool row_ok[2];
#pragma unroll
  for (int hf = 0; hf < 2; ++hf) {
    const int gm = m_base + grp + 8 * hf;
    const int i = gm / G;
    row_ok[hf] = i < q_len;
    row_pos[hf] = i + shift;
  }
  // Q fragments (A of m16n8k16): rows (i, hg) -> q[token][h * G + hg], zero for rows past q_len.
  unsigned qa[kKS][4];
  {
    const T* qb = static_cast<const T*>(p.q) + (BATCHED ? static_cast<long long>(b) * p.q_sb - static_cast<long long>(q_off) * p.q_ss : 0);
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
      const int gm = m_base + grp + 8 * hf;
      const int i = gm / G, hg = gm - i * G;
      const T* src = qb + static_cast<long long>(q_off + i) * p.q_ss + static_cast<long long>(h * G + hg) * p.q_sh + 2 * tq;
#pragma unroll
      for (int ks = 0; ks < kKS; ++ks) {
        qa[ks][hf] = row_ok[hf] ? *reinterpret_cast<const unsigned*>(src + ks * 16) : 0u;
        qa[ks][2 + hf] = row_ok[hf] ? *reinterpret_cast<const unsigned*>(src + ks * 16 + 8) : 0u;
      }
    }
  }
  const float score_scale = SOFTCAP ? 1.f : p.scale_log2;
  float m_i[2] = {-kInf(), -kInf()}, l_i[2] = {0.f, 0.f};
  float o_acc[kDT][4];
#pragma unroll
  for (int dt = 0; dt < kDT; ++dt)
#pragma unroll
    for (int e = 0; e < 4; ++e) o_acc[dt][e] = 0.f;

  // ldmatrix lane addresses inside a head's [16 slots][128 B] block of a 64-column block: K (x4: keys
  // 0-7 / 8-15 x columns lo / hi of a k16 step) and V (x4.trans: keys 0-7 / 8-15 x two n8 tiles).
  const int k_row = (lane & 7) + ((lane >> 4) << 3), k_hi = (lane >> 3) & 1;
  const int v_row = (lane & 7) + (((lane >> 3) & 1) << 3), v_hi = lane >> 4;

  for (int st = 0; st < n_stages; ++st) {
    const int sk = slot_of(2 * st), sv = slot_of(2 * st + 1);
    const int c = st * nsb + j;
    const int key0 = (c_first + c) * kPdhChunk;
    const int valid = kv_len - key0;  // keys of the chunk inside the request (rows past it: garbage)
    const unsigned off = j * chunk_bytes + hl * (kPdhChunk * 128);
    const unsigned kb = sbase + sk * kSlotBytes + off, vb = sbase + sv * kSlotBytes + off;
    mbar_wait(full(sk), phase_of(2 * st));
    if (c >= n_chunks) {  // no chunk for this warp in the stage: free both slots
      __syncwarp();
      if (lane == 0) mbar_arrive(empty(sk));
      mbar_wait(full(sv), phase_of(2 * st + 1));
      __syncwarp();
      if (lane == 0) mbar_arrive(empty(sv));
      continue;
    }
    // S = Q K^T: two n8 tiles (keys 0-7, 8-15).
    float sc[2][4];
#pragma unroll
    for (int nt = 0; nt < 2; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) sc[nt][e] = 0.f;
#pragma unroll
    for (int ks = 0; ks < kKS; ++ks) {
      const int ch = (ks % 4) * 2 + k_hi;
      unsigned bk[4];
      pdh_ldsm_x4(bk, kb + (ks / 4) * (HKV * kPdhChunk * 128) + k_row * 128 + ((ch ^ (k_row & 7)) << 4));
      Mma::run(sc[0], qa[ks], bk[0], bk[1]);
      Mma::run(sc[1], qa[ks], bk[2], bk[3]);
    }
    // Softcap, masks (key inside the request and the row's causal / window band).
    const bool need_mask =
        band_edge<CAUSAL, WINDOW, kPdhChunk>(valid < kPdhChunk, key0, i_min + shift, i_max + shift, p.window_left, p.window_right);
#pragma unroll
    for (int nt = 0; nt < 2; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        float x = sc[nt][e];
        if constexpr (SOFTCAP) x = p.softcap_log2 * fast_tanh(x * p.softcap_inv_scale);
        if (need_mask) {
          const int key = key0 + nt * 8 + 2 * tq + (e & 1);
          const int pos = row_pos[e >> 1];
          if (!key_visible<CAUSAL, WINDOW>(key, pos, kv_len, p.window_left, p.window_right)) x = -kInf();
        }
        sc[nt][e] = x;
      }
    // K is in registers (consumed by the MMAs above): free its slot for the producer.
    __syncwarp();
    if (lane == 0) mbar_arrive(empty(sk));
    // Online softmax with lazy rescaling (common/online_softmax.cuh); l sums straight into l_i.
    float tmax[2];
    bool moved = false;
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
      // NOTE: the two key tiles' maximum without the -inf start of softmax_thread_max.
      tmax[hf] = softmax_quad_max(fmaxf(fmaxf(sc[0][2 * hf], sc[0][2 * hf + 1]), fmaxf(sc[1][2 * hf], sc[1][2 * hf + 1])));
      moved = moved || softmax_moves(tmax[hf], m_i[hf], score_scale);
    }
    if (__any_sync(0xffffffffu, moved)) {
#pragma unroll
      for (int hf = 0; hf < 2; ++hf) softmax_rescale(m_i[hf], l_i[hf], o_acc, hf, tmax[hf], score_scale);
    }
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) softmax_exp(sc, hf, m_i[hf], score_scale, [&](int) { return score_scale; }, l_i[hf]);
    mbar_wait(full(sv), phase_of(2 * st + 1));
    if (valid < kPdhChunk) {
      // Zero V's garbage rows of this head (P is 0 there, but 0 * NaN is not).
      unsigned char* vz = base + (vb - sbase);
      for (int e = lane; e < (kPdhChunk - valid) * kCB * 8; e += 32) {
        const int r = valid + e / (kCB * 8), rest = e % (kCB * 8);
        *reinterpret_cast<uint4*>(vz + (rest / 8) * (HKV * kPdhChunk * 128) + r * 128 + (rest % 8) * 16) =
            make_uint4(0u, 0u, 0u, 0u);
      }
      fence_proxy_async();  // before the slot's next TMA write
      __syncwarp();
    }
    // O += P V.
    unsigned pa[4];
    pa[0] = Mma::pack(sc[0][0], sc[0][1]);
    pa[1] = Mma::pack(sc[0][2], sc[0][3]);
    pa[2] = Mma::pack(sc[1][0], sc[1][1]);
    pa[3] = Mma::pack(sc[1][2], sc[1][3]);
#pragma unroll
    for (int dp = 0; dp < kDT / 2; ++dp) {
      const int ch = (dp % 4) * 2 + v_hi;
      unsigned bv[4];
      pdh_ldsm_x4_trans(bv, vb + (dp / 4) * (HKV * kPdhChunk * 128) + v_row * 128 + ((ch ^ (v_row & 7)) << 4));
      Mma::run(o_acc[2 * dp], pa, bv[0], bv[1]);
      Mma::run(o_acc[2 * dp + 1], pa, bv[2], bv[3]);
    }
    __syncwarp();
    if (lane == 0) mbar_arrive(empty(sv));
  }

  // Row sums over the quad; then the warps of head h merge through shared memory (the slots are free:
  // every warp has consumed every half, so no TMA write is pending).
#pragma unroll
  for (int hf = 0; hf < 2; ++hf) {
    l_i[hf] += __shfl_xor_sync(0xffffffffu, l_i[hf], 1);
    l_i[hf] += __shfl_xor_sync(0xffffffffu, l_i[hf], 2);
  }
  float ms[2];
#pragma unroll
  for (int hf = 0; hf < 2; ++hf) ms[hf] = m_i[hf] == -kInf() ? -kInf() : m_i[hf] * score_scale;  // log2 domain
  if (nsb > 1) {
    constexpr int kVals = kDT * 4 + 4;
    float* mbuf = reinterpret_cast<float*>(base);  // [warp][value][lane]
    named_barrier(1, kPdhConsumerWarps * 32);
    if (j > 0) {
      float* w = mbuf + warp * kVals * 32 + lane;
#pragma unroll
      for (int dt = 0; dt < kDT; ++dt)
#pragma unroll
        for (int e = 0; e < 4; ++e) w[(dt * 4 + e) * 32] = o_acc[dt][e];
      w[(kDT * 4 + 0) * 32] = ms[0];
      w[(kDT * 4 + 1) * 32] = ms[1];
      w[(kDT * 4 + 2) * 32] = l_i[0];
      w[(kDT * 4 + 3) * 32] = l_i[1];
    }
    named_barrier(1, kPdhConsumerWarps * 32);
    if (j > 0) return;
    for (int jj = 1; jj < nsb; ++jj) {
      const float* w = mbuf + (jj * HKV + hl) * kVals * 32 + lane;
#pragma unroll
      for (int hf = 0; hf < 2; ++hf) {
        const float m2 = w[(kDT * 4 + hf) * 32], l2 = w[(kDT * 4 + 2 + hf) * 32];
        const float M = fmaxf(ms[hf], m2);
        const float a1 = M == -kInf() ? 0.f : fast_exp2(ms[hf] - M);
        const float a2 = M == -kInf() ? 0.f : fast_exp2(m2 - M);
        ms[hf] = M;
        l_i[hf] = l_i[hf] * a1 + l2 * a2;
#pragma unroll
        for (int dt = 0; dt < kDT; ++dt) {
          o_acc[dt][2 * hf] = o_acc[dt][2 * hf] * a1 + w[(dt * 4 + 2 * hf) * 32] * a2;
          o_acc[dt][2 * hf + 1] = o_acc[dt][2 * hf + 1] * a1 + w[(dt * 4 + 2 * hf + 1) * 32] * a2;
        }
      }
    }
  }
  // The partial of this split: normalised O and the log2-domain LSE (-inf: no key).
#pragma unroll
  for (int hf = 0; hf < 2; ++hf) {
    if (!row_ok[hf]) continue;
    const int gm = m_base + grp + 8 * hf;
    const int i = gm / G, hg = gm - i * G;
    const long long row = static_cast<long long>(q_off + i) * (p.h_kv * G) + h * G + hg;
    const long long at = static_cast<long long>(blockIdx.y) * p.part_rows + row;
    const float inv = l_i[hf] > 0.f ? 1.f / l_i[hf] : 0.f;
    float* orow = p.o_part + at * D + 2 * tq;
#pragma unroll
    for (int dt = 0; dt < kDT; ++dt)
      *reinterpret_cast<float2*>(orow + dt * 8) = make_float2(o_acc[dt][2 * hf] * inv, o_acc[dt][2 * hf + 1] * inv);
    if (tq == 0) p.lse_part[at] = l_i[hf] > 0.f ? ms[hf] + log2f(l_i[hf]) : -kInf();
  }
}

}  // namespace attnjit::kernels
