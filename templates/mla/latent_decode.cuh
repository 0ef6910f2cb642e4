// mla_decode / dsa_decode, portable backend: latent-cache decode attention on warp-level mma.sync.
//
// A CTA attends kLatentBM (64) query rows of one KV head to a run of key slots: mla_decode's rows are
// (token t, head-in-group) pairs of request b (row m = t * g + hh), dsa_decode's the g heads of one
// query token. Every key row is both key (D + TAIL elements: main part and tail) and value (its main
// part, D elements), so one shared-memory tile serves Q K^T and P V: the cache is read once per CTA.
//
// 8 warps: warp w owns rows 16 (w % 4) .. + 16 and half h = w / 4. For S = Q K^T each half takes half
// of the k16 steps of the D + TAIL depth; the two halves of a row group swap their partial S through
// shared memory (a named barrier per pair) and both hold the full S (the same sum in both: IEEE
// addition commutes). Both run the same online softmax (common/online_softmax.cuh); for O += P V half
// h owns value columns [h D / 2, (h + 1) D / 2), so a thread holds D / 16 fp32 accumulators (128 at
// D = 512) rather than D / 8.
//
// Key tiles of kLatentBN (32) slots stream through a STAGES-deep cp.async ring; eight threads load a
// row (one address computation per row and tile: a position, a page-table entry or an index). Slots
// outside the CTA's rows' view (mla: past the cache length or, with S_q > 1, past the token's own
// position; dsa: index -1, >= S_kv or in the future under causality) are zero-filled and masked to -inf.
// Split-KV (SPLIT) divides the tiles into p.n_splits runs and writes fp32 partials for
// gqa_split_combine (dense/gqa_combine.cuh).
#pragma once
#include "common/mma.cuh"
#include "common/numeric.cuh"
#include "common/online_softmax.cuh"
#include "common/tile_loader.cuh"
#include "mla/latent_decode_params.cuh"
#include "mla/latent_slots.cuh"

namespace attnjit::kernels {

// tile_loader.cuh's layout struct for rows of D + TAIL elements.
template <typename T_, int DQK>
struct LatentTileCfg {
  using T = T_;
  using TKV = T_;
  static constexpr int D = DQK;
  static constexpr int kPitch = latent_pitch(DQK);
  static constexpr bool kSwizzle = DQK % 64 == 0;
  static constexpr int kThreads = kLatentWarps * 32;
  static constexpr bool kFp8KV = false;
};

// The two halves run different instantiations of the body (different code addresses), so their barriers
// are the non-aligned forms: bar.sync (= barrier.sync.aligned, what __syncthreads compiles to) requires
// every thread to execute the same instruction.
__device__ __forceinline__ void latent_pair_barrier(int id) { asm volatile("barrier.sync %0, 64;\n" ::"r"(id) : "memory"); }
__device__ __forceinline__ void latent_cta_barrier() { asm volatile("barrier.sync 0;\n" ::: "memory"); }

// The kernel body of the warps of half DH (templated so that every shared-memory offset of the half's
// depth and value columns is an immediate).
template <int DH, typename T, int D, int TAIL, int MODE, int STAGES, bool SPLIT>
__device__ __forceinline__ void latent_decode_body(const LatentDecodeParams& p, unsigned char* smem_raw) {
  using Cfg = LatentTileCfg<T, D + TAIL>;
  using Mma = MmaOp<T>;
  constexpr int DQK = D + TAIL, kPitch = Cfg::kPitch, BM = kLatentBM, BN = kLatentBN;
  constexpr int KS = DQK / 16, KS0 = KS / 2;               // k16 steps; half 0 takes the first KS0
  constexpr int kKsBegin = DH == 0 ? 0 : KS0, kKsEnd = DH == 0 ? KS0 : KS;
  constexpr int kNT = BN / 8, kDT = D / 16;                // n8 tiles of S; of this half's value columns
  constexpr int kColBase = DH * (D / 2);                   // this half's first value column
  constexpr int kCh = DQK / 8;                             // 16-byte chunks per row
  constexpr unsigned kRows16 = 16 * kPitch * sizeof(T);    // bytes of 16 tile rows

  T* sQ = reinterpret_cast<T*>(smem_raw);
  T* sK = sQ + BM * kPitch;
  float4* sX = reinterpret_cast<float4*>(sK + STAGES * BN * kPitch);
  int* sValid = reinterpret_cast<int*>(sX + kLatentWarps * kNT * 32);

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, rw = warp % 4;
  const LatentCoords c = latent_coords<MODE, BM>(p);
  const int b = c.b, s_tok = c.s_tok, r = c.r, g = c.g, rows = c.rows, m_base = c.m_base;
  const LatentRun<T, MODE, BM, BN, SPLIT> run(p, c);
  const auto& slots = run.slots;
  const int vis_base = run.vis_base, num_tiles = run.num_tiles, n_first = run.n_first;

  // Q: rows m_base .. + BM, eight threads a row, two passes of 32 rows.
  {
    const T* qb = static_cast<const T*>(p.q) + b * p.q_sb + s_tok * p.q_ss;
    const T* qtb = static_cast<const T*>(p.q_tail) + b * p.qt_sb + s_tok * p.qt_ss;
#pragma unroll
    for (int pass = 0; pass < BM / 32; ++pass) {
      const int row = tid / 8 + 32 * pass, gm = m_base + row;
      const bool ok = gm < rows;
      const int t = MODE == kLatentIndexed ? 0 : gm / g;
      const int h = r * g + (MODE == kLatentIndexed ? gm : gm - t * g);
      const T* main = qb + t * p.q_ss + h * p.q_sh;
      const T* tail = qtb + t * p.qt_ss + h * p.qt_sh;
#pragma unroll
      for (int i = 0; i < (kCh + 7) / 8; ++i) {
        const int c = tid % 8 + 8 * i;
        if (kCh % 8 != 0 && c >= kCh) break;
        const T* src = c < D / 8 ? main + c * 8 : tail + (c * 8 - D);
        cp_async_16(sQ + tile_at<Cfg>(row, c * 8), ok ? src : nullptr, ok);
      }
    }
  }
  // Key tile t into ring buffer t % STAGES (and, indexed, its slots' validity); commits a group, an
  // empty one past the last tile, so that group t always holds tile t.
  auto issue = [&](int t) {
    if (t < num_tiles) {
      const int row = tid / 8;
      const T* main = nullptr;
      const T* tail = nullptr;
      const bool ok = slots.resolve(p, n_first + t * BN + row, main, tail);
      T* dst = sK + (t % STAGES) * BN * kPitch;
#pragma unroll
      for (int i = 0; i < (kCh + 7) / 8; ++i) {
        const int c = tid % 8 + 8 * i;
        if (kCh % 8 != 0 && c >= kCh) break;
        const T* src = c < D / 8 ? main + c * 8 : tail + (c * 8 - D);
        cp_async_16(dst + tile_at<Cfg>(row, c * 8), ok ? src : nullptr, ok);
      }
      if (MODE == kLatentIndexed && tid % 8 == 0) sValid[(t % STAGES) * BN + row] = ok;
    }
    cp_async_commit();
  };
#pragma unroll
  for (int t = 0; t < STAGES - 1; ++t) issue(t);  // group 0 also holds Q

  // This lane's ldmatrix rows: Q (A operand) chunk lane / 16 of its row, K (B operand) chunk
  // (lane / 8) % 2, V (B operand, transposed) chunk lane / 16; all block offsets are multiples of 8 rows.
  const unsigned q_lane = lane_addr<Cfg>(sQ, rw * 16 + lane % 16, lane / 16);
  const int k_row = lane % 8 + (lane / 16) * 8, v_row = lane % 8 + ((lane / 8) % 2) * 8;
  const float score_scale = p.scale_log2;
  // This thread's rows (hf): mla_decode's view ends.
  int vis_end[2];
#pragma unroll
  for (int hf = 0; hf < 2; ++hf) vis_end[hf] = vis_base + (m_base + rw * 16 + lane / 4 + hf * 8) / g;
  const int vis_min = vis_base + m_base / g;

  float o_acc[1][kDT][4];
  float m_i[1][2], l_i[1][2];
#pragma unroll
  for (int dt = 0; dt < kDT; ++dt)
#pragma unroll
    for (int e = 0; e < 4; ++e) o_acc[0][dt][e] = 0.f;
  m_i[0][0] = m_i[0][1] = -kInf();
  l_i[0][0] = l_i[0][1] = 0.f;

  for (int t = 0; t < num_tiles; ++t) {
    cp_async_wait<STAGES - 2>();
    latent_cta_barrier();  // tile t landed; every warp is done with tile t - 1
    issue(t + STAGES - 1);  // into tile t - 1's buffer
    const int n0 = n_first + t * BN, stage = t % STAGES;
    const T* sKt = sK + stage * BN * kPitch;
    const unsigned k_lane = lane_addr<Cfg>(sKt, k_row, (lane / 8) % 2);
    const unsigned v_lane = lane_addr<Cfg>(sKt, v_row, lane / 16);

    // This half's part of S = Q K^T.
    float s[1][kNT][4];
#pragma unroll
    for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) s[0][nt][e] = 0.f;
#pragma unroll
    for (int ks = kKsBegin; ks < kKsEnd; ++ks) {
      unsigned a[4];
      ldmatrix_x4_at(a, chunk_addr<Cfg>(q_lane, 2 * ks));
#pragma unroll
      for (int np = 0; np < kNT / 2; ++np) {
        unsigned bk[4];
        ldmatrix_x4_at(bk, chunk_addr<Cfg>(k_lane, 2 * ks) + np * kRows16);
        Mma::run(s[0][2 * np], a, bk[0], bk[1]);
        Mma::run(s[0][2 * np + 1], a, bk[2], bk[3]);
      }
    }
    // Swap partial sums with the other half of this row group.
#pragma unroll
    for (int nt = 0; nt < kNT; ++nt)
      sX[(warp * kNT + nt) * 32 + lane] = make_float4(s[0][nt][0], s[0][nt][1], s[0][nt][2], s[0][nt][3]);
    latent_pair_barrier(1 + rw);
#pragma unroll
    for (int nt = 0; nt < kNT; ++nt) {
      const float4 o = sX[((warp ^ 4) * kNT + nt) * 32 + lane];
      s[0][nt][0] += o.x;
      s[0][nt][1] += o.y;
      s[0][nt][2] += o.z;
      s[0][nt][3] += o.w;
    }

    // Mask the slots outside each row's view.
    if constexpr (MODE == kLatentIndexed) {
#pragma unroll
      for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e)
          if (!sValid[stage * BN + nt * 8 + 2 * (lane % 4) + (e & 1)]) s[0][nt][e] = -kInf();
    } else if (n0 + BN > vis_min) {
#pragma unroll
      for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int j = n0 + nt * 8 + 2 * (lane % 4) + (e & 1);
          if (j >= vis_end[e >> 1] || j >= slots.n_keys) s[0][nt][e] = -kInf();
        }
    }

    float tile_max[1][2];
    bool moved = false;
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
      tile_max[0][hf] = softmax_quad_max(softmax_thread_max(s[0], hf));
      moved = moved || softmax_moves(tile_max[0][hf], m_i[0][hf], score_scale);
    }
    online_softmax_step(
        s, tile_max, moved, m_i, l_i, o_acc, [&](int, int) { return score_scale; },
        [&](int, int, int) { return score_scale; });

    // O[:, this half's columns] += P V.
#pragma unroll
    for (int kk = 0; kk < BN / 16; ++kk) {
      unsigned a[4];
      a[0] = Mma::pack(s[0][2 * kk][0], s[0][2 * kk][1]);
      a[1] = Mma::pack(s[0][2 * kk][2], s[0][2 * kk][3]);
      a[2] = Mma::pack(s[0][2 * kk + 1][0], s[0][2 * kk + 1][1]);
      a[3] = Mma::pack(s[0][2 * kk + 1][2], s[0][2 * kk + 1][3]);
#pragma unroll
      for (int dp = 0; dp < kDT / 2; ++dp) {
        unsigned bv[4];
        ldmatrix_x4_trans_at(bv, chunk_addr<Cfg>(v_lane, 2 * dp + kColBase / 8) + kk * kRows16);
        Mma::run(o_acc[0][2 * dp], a, bv[0], bv[1]);
        Mma::run(o_acc[0][2 * dp + 1], a, bv[2], bv[3]);
      }
    }
  }
  cp_async_wait<0>();  // no cp.async may be pending at exit

  // Normalise and write this half's columns (or the split's partials). The block's coordinates are
  // recomputed from blockIdx and the parameters (free to read): keeping them live across the loop costs
  // registers the main loop needs at D 512.
  {
    const LatentCoords c = latent_coords<MODE, BM>(p);
    const int b = c.b, s_tok = c.s_tok, r = c.r, g = c.g, rows = c.rows, split = c.split, m_base = c.m_base;
#pragma unroll
  for (int hf = 0; hf < 2; ++hf) {
    float l = l_i[0][hf];
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    const float m = m_i[0][hf] * score_scale;  // log2 domain
    const int gm = m_base + rw * 16 + lane / 4 + hf * 8;
    if (gm >= rows) continue;
    const int t = MODE == kLatentIndexed ? s_tok : gm / g;
    const int h = r * g + (MODE == kLatentIndexed ? gm : gm - (gm / g) * g);
    const float inv = l > 0.f ? 1.f / l : 0.f;
    if constexpr (SPLIT) {
      const long long row = (static_cast<long long>(b) * p.s_q + t) * p.h + h;
      const long long at = static_cast<long long>(split) * p.part_rows + row;
      float* orow = p.o_part + at * D + kColBase + 2 * (lane % 4);
#pragma unroll
      for (int dt = 0; dt < kDT; ++dt)
        *reinterpret_cast<float2*>(orow + dt * 8) = make_float2(o_acc[0][dt][2 * hf] * inv, o_acc[0][dt][2 * hf + 1] * inv);
      if (DH == 0 && lane % 4 == 0) p.lse_part[at] = l > 0.f ? m + log2f(l) : -kInf();
    } else {
      T* orow = static_cast<T*>(p.o) + b * p.o_sb + static_cast<long long>(t) * p.o_ss + h * p.o_sh + kColBase +
                2 * (lane % 4);
#pragma unroll
      for (int dt = 0; dt < kDT; ++dt)
        *reinterpret_cast<unsigned*>(orow + dt * 8) = Mma::pack(o_acc[0][dt][2 * hf] * inv, o_acc[0][dt][2 * hf + 1] * inv);
    }
  }
  }
}

template <typename T, int D, int TAIL, int MODE, int STAGES, bool SPLIT>
__global__ void __launch_bounds__(kLatentWarps * 32, 1) latent_decode(const __grid_constant__ LatentDecodeParams p) {
  static_assert(sizeof(T) == 2, "latent_decode: 16-bit operands");
  static_assert(D % 64 == 0 && D >= 64 && D <= 512, "latent_decode: D is a multiple of 64 in [64, 512]");
  static_assert(TAIL % 16 == 0 && TAIL >= 0 && TAIL <= 128, "latent_decode: TAIL is a multiple of 16 in [0, 128]");
  static_assert(MODE >= kLatentDense && MODE <= kLatentIndexed, "latent_decode: MODE is dense, paged or indexed");
  static_assert(STAGES == 2 || STAGES == 3, "latent_decode: 2 or 3 key-tile stages");
  extern __shared__ __align__(128) unsigned char smem_raw[];
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  // The combine may be scheduled from now on; it waits for this grid's writes (griddepcontrol.wait).
  if constexpr (SPLIT) asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
  if (threadIdx.x < 4 * 32)
    latent_decode_body<0, T, D, TAIL, MODE, STAGES, SPLIT>(p, smem_raw);
  else
    latent_decode_body<1, T, D, TAIL, MODE, STAGES, SPLIT>(p, smem_raw);
}

}  // namespace attnjit::kernels
