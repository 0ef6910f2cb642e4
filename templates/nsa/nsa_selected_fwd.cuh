// nsa_selected_fwd, portable backend: the selected branch of Native Sparse Attention on warp-level
// mma.sync.
//
// A CTA attends the query rows of one (token t, KV head r) pair (its g = H / H_kv heads; tiles of 64 rows
// when g > 64) to the token's selected keys: the slot list block_indices[t, r, 0 .. count) in units of
// block_size tokens of t's request, flattened so that key slot j is offset j % E of listed block j / E,
// E = min(block_size, limit) (no block holds more visible keys than that). All rows of the CTA share one
// slot list, so a slot's validity is one flag per tile row.
//
// WARPS warps, warp w owns rows 16 w .. + 16 with the full QK depth and all D value columns (D <= 128:
// D / 2 fp32 accumulators a thread). K and V tiles of BN slots stream through a STAGES-deep
// cp.async ring; eight threads load a row of each (one slot resolution per row and tile, shared by the K
// and the V row). Invalid slots (past the count, a negative id, a key at or past the row's limit, a row
// outside the packed batch) are zero-filled and masked to -inf; the online softmax is
// common/online_softmax.cuh's. A row with no visible key writes zeros.
#pragma once
#include "common/mma.cuh"
#include "common/numeric.cuh"
#include "common/online_softmax.cuh"
#include "common/tile_loader.cuh"
#include "nsa/nsa_selected_fwd_params.cuh"

namespace attnjit::kernels {

// tile_loader.cuh's layout struct: rows of D 16-bit elements, 128-byte swizzled (D is 64 or 128).
template <typename T_, int D_, int WARPS>
struct NsaSelTileCfg {
  using T = T_;
  using TKV = T_;
  static constexpr int D = D_;
  static constexpr int kPitch = D_;
  static constexpr bool kSwizzle = true;
  static constexpr int kThreads = WARPS * 32;
  static constexpr bool kFp8KV = false;
};

// The key slots of a CTA: key slot j resolves to a packed token row, or -1 (invalid).
struct NsaSelSlots {
  const int* idx = nullptr;  // block_indices row (t, r)
  long long row0 = 0;        // the request's first packed row
  int limit = 0;             // keys x < limit are visible (causal: the token's position + 1)
  int ebs = 0;               // slots per listed block: min(block_size, limit)
  int n_keys = 0;            // count * ebs

  __device__ __forceinline__ long long resolve(const NsaSelectedParams& p, int j) const {
    return resolve_with(p, j, [&](int u) { return idx[u * p.bi_su]; });
  }
  // The same with the listed id of block u read by `id_of(u)` (the hopper kernel keeps a copy of the list
  // in shared memory).
  template <typename IdOf>
  __device__ __forceinline__ long long resolve_with(const NsaSelectedParams& p, int j, IdOf id_of) const {
    if (j >= n_keys) return -1;
    const int u = j / ebs, off = j - u * ebs;
    const long long beta = id_of(u);
    if (beta < 0) return -1;
    const long long x = beta * p.block_size + off;
    if (x >= limit) return -1;
    const long long row = row0 + x;
    return row >= 0 && row < p.T ? row : -1;
  }
};

// KSPLIT > 1: KSPLIT warps share each row group and split every key tile between them (warp w: row
// group w % WARPS, keys [(w / WARPS) BN / KSPLIT, + BN / KSPLIT) of each tile), each with its own online
// softmax; their states merge through shared memory at the end. More warps per SM for the small row
// counts of NSA's groups (16 heads: one row group).
template <typename T, int D, int WARPS, int BN, int STAGES, int KSPLIT>
__global__ void __launch_bounds__(WARPS * KSPLIT * 32) nsa_selected_fwd(const __grid_constant__ NsaSelectedParams p) {
  static_assert(sizeof(T) == 2, "nsa_selected_fwd: 16-bit operands");
  static_assert(D == 64 || D == 128, "nsa_selected_fwd: D is 64 or 128");
  static_assert(WARPS >= 1 && WARPS <= 4, "nsa_selected_fwd: 1 to 4 row groups");
  static_assert(BN % 16 == 0 && BN >= 16 && BN <= 64 && STAGES >= 2 && STAGES <= 4,
                "nsa_selected_fwd: BN 16 to 64 slots (a multiple of 16), 2 to 4 stages");
  static_assert((KSPLIT == 1 || KSPLIT == 2 || KSPLIT == 4) && (BN / KSPLIT) % 16 == 0 && WARPS * KSPLIT <= 8,
                "nsa_selected_fwd: 1, 2 or 4 key splits of 16 slots or more, at most 8 warps");
  using Cfg = NsaSelTileCfg<T, D, WARPS * KSPLIT>;
  using Mma = MmaOp<T>;
  constexpr int BM = 16 * WARPS, kThreads = WARPS * KSPLIT * 32;
  constexpr int kWarpKeys = BN / KSPLIT;               // this warp's slots of each tile
  constexpr int KS = D / 16;                           // k16 steps of the QK depth
  constexpr int kNT = kWarpKeys / 8, kDT = D / 8;      // n8 tiles of S; of the output columns
  constexpr int kCh = D / 8;                           // 16-byte chunks per row
  constexpr int kRowsPerPass = kThreads / 8;           // eight threads a row
  static_assert(nsa_selected_merge_bytes(D, WARPS, KSPLIT) <= (BM + 2 * STAGES * BN) * D * 2 &&
                    nsa_selected_threads(WARPS, KSPLIT) == kThreads &&
                    nsa_selected_smem_bytes(D, WARPS, BN, STAGES) == (BM + 2 * STAGES * BN) * D * 2 + STAGES * BN * 4,
                "nsa_selected_fwd: the host's geometry (nsa_selected_fwd_params.cuh); the merge fits Q and the rings");
  constexpr unsigned kRows16 = 16 * D * sizeof(T);     // bytes of 16 tile rows

  extern __shared__ __align__(128) unsigned char smem_raw[];
  T* sQ = reinterpret_cast<T*>(smem_raw);
  T* sK = sQ + BM * D;
  T* sV = sK + STAGES * BN * D;
  int* sValid = reinterpret_cast<int*>(sV + STAGES * BN * D);

  const int tid = threadIdx.x, lane = tid % 32;
  const int warp = (tid / 32) % WARPS, kpart = tid / 32 / WARPS;  // row group, key part
  const int wk0 = kpart * kWarpKeys;                                // this warp's first slot of each tile
  const int t = blockIdx.x;
  const int r = static_cast<int>(blockIdx.y) / p.m_tiles;
  const int m_base = (static_cast<int>(blockIdx.y) - r * p.m_tiles) * BM;
  const int g = p.group;

  // The token's request and view, its slot list.
  NsaSelSlots slots;
  {
    const int n = p.token_indices[t * p.ti_st], pos = p.token_indices[t * p.ti_st + p.ti_sc];
    long long limit = 0;
    if (n >= 0 && n < p.n_req && pos >= 0) {
      slots.row0 = p.offsets[n];
      const long long len = static_cast<long long>(p.offsets[n + 1]) - p.offsets[n];
      limit = p.causal ? min(static_cast<long long>(pos) + 1, len) : len;
      limit = min(limit, static_cast<long long>(p.T));  // no visible key lies past the packed batch
    }
    slots.limit = static_cast<int>(max(limit, 0ll));
    slots.ebs = min(p.block_size, slots.limit);
    const int count = min(max(p.block_counts[t * p.bc_st + r * p.bc_sh], 0), p.sel);
    slots.n_keys = count * slots.ebs;  // the host bounds SEL * min(block_size, T)
    slots.idx = p.block_indices + t * p.bi_st + r * p.bi_sh;
  }
  const int num_tiles = (slots.n_keys + BN - 1) / BN;

  // Q: rows m_base .. + BM (heads r g + m), eight threads a row.
  {
    const T* qb = static_cast<const T*>(p.q) + t * p.q_st;
#pragma unroll
    for (int pass = 0; pass < BM / kRowsPerPass; ++pass) {
      const int row = tid / 8 + kRowsPerPass * pass, gm = m_base + row;
      const bool ok = gm < g;
      const T* src = qb + static_cast<long long>(r * g + gm) * p.q_sh;
#pragma unroll
      for (int i = 0; i < kCh / 8; ++i) {
        const int c = tid % 8 + 8 * i;
        cp_async_16(sQ + tile_at<Cfg>(row, c * 8), ok ? src + c * 8 : nullptr, ok);
      }
    }
  }
  const T* kb = static_cast<const T*>(p.k) + r * p.k_sh;
  const T* vb = static_cast<const T*>(p.v) + r * p.v_sh;
  // K and V tile i into ring buffer i % STAGES, with its slots' validity; commits a group, an empty one
  // past the last tile, so that group i always holds tile i.
  auto issue = [&](int i) {
    if (i < num_tiles) {
      const int stage = i % STAGES;
      T* dk = sK + stage * BN * D;
      T* dv = sV + stage * BN * D;
#pragma unroll
      for (int pass = 0; pass < (BN + kRowsPerPass - 1) / kRowsPerPass; ++pass) {
        const int row = tid / 8 + kRowsPerPass * pass;
        if (BN % kRowsPerPass != 0 && row >= BN) break;
        const long long x = slots.resolve(p, i * BN + row);
        const bool ok = x >= 0;
        const T* ks = kb + (ok ? x : 0) * p.k_st;
        const T* vs = vb + (ok ? x : 0) * p.v_st;
#pragma unroll
        for (int c8 = 0; c8 < kCh / 8; ++c8) {
          const int c = tid % 8 + 8 * c8;
          cp_async_16(dk + tile_at<Cfg>(row, c * 8), ok ? ks + c * 8 : nullptr, ok);
          cp_async_16(dv + tile_at<Cfg>(row, c * 8), ok ? vs + c * 8 : nullptr, ok);
        }
        if (tid % 8 == 0) sValid[stage * BN + row] = ok;
      }
    }
    cp_async_commit();
  };
#pragma unroll
  for (int i = 0; i < STAGES - 1; ++i) issue(i);  // group 0 also holds Q

  // This lane's ldmatrix rows: Q (A operand) chunk lane / 16 of its row, K (B operand) chunk
  // (lane / 8) % 2, V (B operand, transposed) chunk lane / 16; all block offsets are multiples of 8 rows.
  const unsigned q_lane = lane_addr<Cfg>(sQ, warp * 16 + lane % 16, lane / 16);
  const int k_row = wk0 + lane % 8 + (lane / 16) * 8, v_row = wk0 + lane % 8 + ((lane / 8) % 2) * 8;
  const float score_scale = p.scale_log2;

  float o_acc[1][kDT][4];
  float m_i[1][2], l_i[1][2];
#pragma unroll
  for (int dt = 0; dt < kDT; ++dt)
#pragma unroll
    for (int e = 0; e < 4; ++e) o_acc[0][dt][e] = 0.f;
  m_i[0][0] = m_i[0][1] = -kInf();
  l_i[0][0] = l_i[0][1] = 0.f;

  for (int i = 0; i < num_tiles; ++i) {
    cp_async_wait<STAGES - 2>();
    __syncthreads();  // tile i landed; every warp is done with tile i - 1
    issue(i + STAGES - 1);  // into tile i - 1's buffer
    const int stage = i % STAGES;
    const unsigned k_lane = lane_addr<Cfg>(sK + stage * BN * D, k_row, (lane / 8) % 2);
    const unsigned v_lane = lane_addr<Cfg>(sV + stage * BN * D, v_row, lane / 16);

    // S = Q K^T.
    float s[1][kNT][4];
#pragma unroll
    for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) s[0][nt][e] = 0.f;
#pragma unroll
    for (int ks = 0; ks < KS; ++ks) {
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
    // Mask the invalid slots (the same for every row of the CTA).
#pragma unroll
    for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        if (!sValid[stage * BN + wk0 + nt * 8 + 2 * (lane % 4) + (e & 1)]) s[0][nt][e] = -kInf();

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

    // O += P V.
#pragma unroll
    for (int kk = 0; kk < kWarpKeys / 16; ++kk) {
      unsigned a[4];
      a[0] = Mma::pack(s[0][2 * kk][0], s[0][2 * kk][1]);
      a[1] = Mma::pack(s[0][2 * kk][2], s[0][2 * kk][3]);
      a[2] = Mma::pack(s[0][2 * kk + 1][0], s[0][2 * kk + 1][1]);
      a[3] = Mma::pack(s[0][2 * kk + 1][2], s[0][2 * kk + 1][3]);
#pragma unroll
      for (int dp = 0; dp < kDT / 2; ++dp) {
        unsigned bv[4];
        ldmatrix_x4_trans_at(bv, chunk_addr<Cfg>(v_lane, 2 * dp) + kk * kRows16);
        Mma::run(o_acc[0][2 * dp], a, bv[0], bv[1]);
        Mma::run(o_acc[0][2 * dp + 1], a, bv[2], bv[3]);
      }
    }
  }
  cp_async_wait<0>();  // no cp.async may be pending at exit

  if constexpr (KSPLIT > 1) {
    // Merge the key parts' states (same rows, disjoint keys) into key part 0 through shared memory (Q
    // and the rings are free once every warp is past the loop): per lane, its fragments' m, l and O.
    constexpr int kPer = 4 + kDT * 4;
    float* red = reinterpret_cast<float*>(smem_raw);
    __syncthreads();
    if (kpart != 0) {
      float* dst = red + (((kpart - 1) * WARPS + warp) * 32 + lane) * kPer;
#pragma unroll
      for (int hf = 0; hf < 2; ++hf) {
        dst[hf] = m_i[0][hf];
        dst[2 + hf] = l_i[0][hf];
      }
#pragma unroll
      for (int dt = 0; dt < kDT; ++dt)
#pragma unroll
        for (int e = 0; e < 4; ++e) dst[4 + dt * 4 + e] = o_acc[0][dt][e];
    }
    __syncthreads();
    if (kpart != 0) return;
    for (int kp = 1; kp < KSPLIT; ++kp) {
      const float* src = red + (((kp - 1) * WARPS + warp) * 32 + lane) * kPer;
#pragma unroll
      for (int hf = 0; hf < 2; ++hf) {
        const float mw = src[hf], lw = src[2 + hf];
        const float M = fmaxf(m_i[0][hf], mw);
        const float a0 = m_i[0][hf] == -kInf() ? 0.f : fast_exp2((m_i[0][hf] - M) * score_scale);
        const float aw = mw == -kInf() ? 0.f : fast_exp2((mw - M) * score_scale);
        m_i[0][hf] = M;
        l_i[0][hf] = l_i[0][hf] * a0 + lw * aw;
#pragma unroll
        for (int dt = 0; dt < kDT; ++dt)
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const int k = 2 * hf + e;
            o_acc[0][dt][k] = o_acc[0][dt][k] * a0 + src[4 + dt * 4 + k] * aw;
          }
      }
    }
  }

  // Normalise and write (rows without a visible key: l = 0, zeros).
#pragma unroll
  for (int hf = 0; hf < 2; ++hf) {
    float l = l_i[0][hf];
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    const int gm = m_base + warp * 16 + lane / 4 + hf * 8;
    if (gm >= g) continue;
    const float inv = l > 0.f ? 1.f / l : 0.f;
    T* orow = static_cast<T*>(p.o) + t * p.o_st + static_cast<long long>(r * g + gm) * p.o_sh + 2 * (lane % 4);
#pragma unroll
    for (int dt = 0; dt < kDT; ++dt)
      *reinterpret_cast<unsigned*>(orow + dt * 8) = Mma::pack(o_acc[0][dt][2 * hf] * inv, o_acc[0][dt][2 * hf + 1] * inv);
  }
}

}  // namespace attnjit::kernels
