// bsa_fwd, portable backend: block-sparse attention forward on warp-level mma.sync (sm_80+).
//
// One CTA computes one query block (BM = sparse_block_size rows) of one query head: the metadata is per
// query head, so heads never share a K/V tile. The CTA walks the active key blocks of its row
// (q2k_block_index[b, h, m, :n]) as a flat stream of BN-key tiles: a block of length len(kb) =
// min(bsz(kb), S_kv - kb * bs) gives ceil(len / BN) tiles, the last one predicated. K and V tiles are
// double-buffered with cp.async and the stream crosses block boundaries without draining: the load of
// tile t + 2 is issued as soon as every warp is done with tile t, whichever blocks they belong to. The
// block list itself is prefetched two blocks ahead in registers (index) and one ahead (block length),
// so no tile waits on a metadata load.
//
// Math: S = Q K^T and O += P V on m16n8k16 MMAs with fp32 accumulation, Q fragments in registers where
// they fit, online softmax in the log2 domain with the scale folded into one FFMA before exp2, and
// lazy rescaling (the reference maximum moves only when a tile's maximum exceeds it by 2^8). Empty rows
// (no tile) write O = 0 and LSE = -inf.
//
// SPLIT (kv_splits > 1): CTA (m, split) handles the active positions [split * n / S, (split + 1) * n / S)
// of the row's list and writes its normalised fp32 partial O and natural-log partial LSE (-inf for an
// empty split); bsa_combine.cuh merges them.
#pragma once
#include "bsa/bsa_fwd_params.cuh"
#include "common/mma.cuh"
#include "common/numeric.cuh"
#include "common/online_softmax.cuh"
#include "common/tile_loader.cuh"

namespace attnjit::kernels {

template <typename T_, int D_, int DV_, int BM_, int BN_, int WARPS_, bool HAS_NUMS_, int BSZ_RANK_>
struct BsaFwdConfig {
  using T = T_;
  static constexpr int D = D_, DV = DV_, BM = BM_, BN = BN_, WARPS = WARPS_, kBszRank = BSZ_RANK_;
  static constexpr bool kHasNums = HAS_NUMS_;
  static_assert(sizeof(T) == 2, "bsa_fwd: 16-bit operands");
  static_assert(D % 32 == 0 && D >= 32 && D <= 256, "bsa_fwd: D must be a multiple of 32 in [32, 256]");
  static_assert(DV % 16 == 0 && DV >= 16 && DV <= 256, "bsa_fwd: D_v must be a multiple of 16 in [16, 256]");
  static_assert(BN % 16 == 0 && BN <= BM, "bsa_fwd: BN must be a multiple of 16");
  static_assert(BM == 64 || BM == 128, "bsa_fwd: BM is the sparse block size, 64 or 128");
  static_assert(BM % BN == 0, "bsa_fwd: a key block holds a whole number of tiles");
  static_assert(BM % (16 * WARPS) == 0, "bsa_fwd: each warp owns a multiple of 16 rows");
  static_assert(kBszRank >= 0 && kBszRank <= 3, "bsa_fwd: block_sizes rank is 0 (absent), 1, 2 or 3");
  static constexpr int BS = BM;  // one CTA = one query block
  static constexpr int kThreads = WARPS * 32;
  static constexpr int kWarpRows = BM / WARPS;
  static constexpr int kMT = kWarpRows / 16;
  static constexpr int kNT = BN / 8;
  static constexpr int kDT = DV / 8;
  static constexpr int kKS = D / 16;
  static constexpr int kPitchK = D + 8;   // shared-memory row pitches (elements): conflict-free ldmatrix
  static constexpr int kPitchV = DV + 8;
  static constexpr bool kQInRegs = D <= 96 || kMT == 1;
  static constexpr int kSmemBytes = (BM * kPitchK + 2 * BN * kPitchK + 2 * BN * kPitchV) * 2;
  static_assert(kSmemBytes == bsa_fwd_smem_bytes(D, DV, BM, BN) && kThreads == bsa_fwd_threads(WARPS),
                "bsa_fwd: the host's launch geometry (bsa_fwd_params.cuh) matches the kernel's layout");
};

// The stream of key tiles of one row's active blocks [u_begin, u_end): (n0, valid) per tile, valid = 0
// after the last. Uniform across the CTA. Block indices are prefetched two blocks ahead, block lengths
// one ahead, so that next() never waits on a fresh global load.
template <int BS, int BN, int BSZ_RANK>
struct BsaTileStream {
  const int* idx;  // the row's q2k_block_index entries, stride idx_su
  long long idx_su;
  const int* bsz;  // block_sizes of this (b, h) slice (rank-dependent), stride bsz_sk
  long long bsz_sk;
  int s_kv, n_kv, u_end;
  int u_next2;        // position of kb2
  int kb, len, sub;   // current block
  int kb1, len1;      // next block
  int kb2;            // the one after

  __device__ __forceinline__ int load_kb(int u) const { return u < u_end ? __ldg(idx + u * idx_su) : -1; }
  __device__ __forceinline__ int block_len(int b) const {
    if (b < 0 || b >= n_kv) return b < 0 ? -1 : 0;  // -1: past the list; 0: outside the contract, skipped
    int l = s_kv - b * BS;
    if constexpr (BSZ_RANK > 0) l = min(l, __ldg(bsz + b * bsz_sk));
    else l = min(l, BS);
    return l;
  }
  // The stream of query block m of (b, h): positions [u_begin, u_end_) of its list, block lengths from
  // the block_sizes slice of the call's rank. P: the kernel's parameters (index, block_sizes, sizes).
  template <typename P>
  __device__ __forceinline__ void open(const P& p, int b, int h, int m, int u_begin, int u_end_) {
    idx = p.index + b * p.idx_sb + h * p.idx_sh + m * p.idx_sm;
    idx_su = p.idx_su;
    bsz = p.bsz;
    if constexpr (BSZ_RANK >= 2) bsz += b * p.bsz_sb;
    if constexpr (BSZ_RANK == 3) bsz += h * p.bsz_sh;
    bsz_sk = p.bsz_sk;
    s_kv = p.s_kv;
    n_kv = p.n_kv;
    u_end = u_end_;
    init(u_begin);
  }
  __device__ __forceinline__ void init(int u_begin) {
    kb = load_kb(u_begin);
    kb1 = load_kb(u_begin + 1);
    kb2 = load_kb(u_begin + 2);
    u_next2 = u_begin + 2;
    len = block_len(kb);
    len1 = block_len(kb1);
    sub = 0;
  }
  // Next tile: key start n0 and valid keys (1..BN), or valid = 0 at the end.
  __device__ __forceinline__ void next(int& n0, int& valid) {
    while (true) {
      if (len < 0) {
        n0 = 0;
        valid = 0;
        return;
      }
      if (sub * BN < len) {
        n0 = kb * BS + sub * BN;
        valid = min(BN, len - sub * BN);
        ++sub;
        return;
      }
      kb = kb1;
      len = len1;
      sub = 0;
      kb1 = kb2;
      len1 = block_len(kb2);
      kb2 = load_kb(++u_next2);
    }
  }
};

// The active count of query block m of (b, h): q2k_block_nums, or the fixed count, clamped to [0, K_max].
template <bool HAS_NUMS, typename P>
__device__ __forceinline__ int bsa_row_count(const P& p, int b, int h, int m) {
  const int n = HAS_NUMS ? __ldg(p.nums + b * p.nums_sb + h * p.nums_sh + m * p.nums_sm) : p.fixed_count;
  return min(max(n, 0), p.k_max);
}

template <typename T, int D, int DV, int BM, int BN, int WARPS, bool HAS_NUMS, int BSZ_RANK, bool SPLIT>
__global__ void __launch_bounds__(WARPS * 32) bsa_fwd(const __grid_constant__ BsaFwdParams p) {
  using Cfg = BsaFwdConfig<T, D, DV, BM, BN, WARPS, HAS_NUMS, BSZ_RANK>;
  using Mma = MmaOp<T>;
  constexpr int kPK = Cfg::kPitchK, kPV = Cfg::kPitchV, kMT = Cfg::kMT, kNT = Cfg::kNT, kDT = Cfg::kDT;
  constexpr int kThreads = Cfg::kThreads;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  T* sQ = reinterpret_cast<T*>(smem_raw);
  T* sKbuf = sQ + BM * kPK;           // [2][BN][kPK]
  T* sVbuf = sKbuf + 2 * BN * kPK;    // [2][BN][kPV]

  const int split = SPLIT ? static_cast<int>(blockIdx.x % p.splits) : 0;
  const int m = SPLIT ? static_cast<int>(blockIdx.x / p.splits) : static_cast<int>(blockIdx.x);
  const int h = blockIdx.y, b = blockIdx.z;
  const int r = h / p.group;
  const int i0 = m * BM;

  // The row's active positions (this split's share).
  const int n = bsa_row_count<HAS_NUMS>(p, b, h, m);
  int u_begin = 0, u_end = n;
  if constexpr (SPLIT) {
    u_begin = static_cast<int>(static_cast<long long>(split) * n / p.splits);
    u_end = static_cast<int>(static_cast<long long>(split + 1) * n / p.splits);
  }
  BsaTileStream<BM, BN, BSZ_RANK> ts;
  ts.open(p, b, h, m, u_begin, u_end);

  const T* qb = static_cast<const T*>(p.q) + b * p.q_sb + h * p.q_sh + static_cast<long long>(i0) * p.q_ss;
  const T* kb = static_cast<const T*>(p.k) + b * p.k_sb + r * p.k_sh;
  const T* vb = static_cast<const T*>(p.v) + b * p.v_sb + r * p.v_sh;
  const float score_scale = p.scale_log2;

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int warp_row0 = warp * Cfg::kWarpRows;

  float o_acc[kMT][kDT][4];
  float m_i[kMT][2], l_i[kMT][2];
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt) {
#pragma unroll
    for (int dt = 0; dt < kDT; ++dt)
#pragma unroll
      for (int e = 0; e < 4; ++e) o_acc[mt][dt][e] = 0.f;
    m_i[mt][0] = m_i[mt][1] = -kInf();
    l_i[mt][0] = l_i[mt][1] = 0.f;
  }

  // Tiles in flight: buffer 0 and 1 hold (n0, valid) of the tile loaded there.
  int n0_buf0 = 0, valid_buf0 = 0, n0_buf1 = 0, valid_buf1 = 0;
  auto issue_kv = [&](int slot) {
    int n0, valid;
    ts.next(n0, valid);
    if (valid > 0) {
      load_rows_affine<kThreads, BN, D, kPK>(sKbuf + slot * BN * kPK, kb + n0 * p.k_ss, p.k_ss, valid);
      load_rows_affine<kThreads, BN, DV, kPV>(sVbuf + slot * BN * kPV, vb + n0 * p.v_ss, p.v_ss, valid);
    }
    if (slot == 0) {
      n0_buf0 = n0;
      valid_buf0 = valid;
    } else {
      n0_buf1 = n0;
      valid_buf1 = valid;
    }
    cp_async_commit();
  };
  load_rows_affine<kThreads, BM, D, kPK>(sQ, qb, p.q_ss, p.s_q - i0);
  issue_kv(0);  // group 0: Q and tile 0
  issue_kv(1);
  cp_async_wait<1>();
  __syncthreads();

  unsigned q_frag[Cfg::kQInRegs ? Cfg::kKS : 1][kMT][4];
  if constexpr (Cfg::kQInRegs) {
#pragma unroll
    for (int ks16 = 0; ks16 < Cfg::kKS; ++ks16)
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt)
        ldmatrix_x4(q_frag[ks16][mt], sQ + (warp_row0 + mt * 16 + (lane % 16)) * kPK + ks16 * 16 + (lane / 16) * 8);
  }

  for (int t = 0;; ++t) {
    const int slot = t & 1;
    const int valid = slot ? valid_buf1 : valid_buf0;
    if (valid == 0) break;  // uniform: the stream ended
    const T* sK = sKbuf + slot * BN * kPK;
    const T* sV = sVbuf + slot * BN * kPV;
    if (t > 0) {
      cp_async_wait<1>();
      __syncthreads();  // tile t landed (tile t + 1 may still be in flight)
    }

    float s[kMT][kNT][4];
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
      for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) s[mt][nt][e] = 0.f;
#pragma unroll
    for (int ks16 = 0; ks16 < Cfg::kKS; ++ks16) {
      unsigned a[kMT][4];
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt) {
        if constexpr (Cfg::kQInRegs) {
#pragma unroll
          for (int e = 0; e < 4; ++e) a[mt][e] = q_frag[ks16][mt][e];
        } else {
          ldmatrix_x4(a[mt], sQ + (warp_row0 + mt * 16 + (lane % 16)) * kPK + ks16 * 16 + (lane / 16) * 8);
        }
      }
#pragma unroll
      for (int np = 0; np < kNT / 2; ++np) {
        unsigned bk[4];
        ldmatrix_x4(bk, sK + (np * 16 + (lane % 8) + (lane / 16) * 8) * kPK + ks16 * 16 + ((lane / 8) % 2) * 8);
#pragma unroll
        for (int mt = 0; mt < kMT; ++mt) {
          Mma::run(s[mt][2 * np], a[mt], bk[0], bk[1]);
          Mma::run(s[mt][2 * np + 1], a[mt], bk[2], bk[3]);
        }
      }
    }

    // Keys past the tile's valid count (a short block or the end of S_kv) are masked.
    if (valid < BN) {
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
        for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
          for (int e = 0; e < 4; ++e)
            if (nt * 8 + 2 * (lane % 4) + (e & 1) >= valid) s[mt][nt][e] = -kInf();
    }

    // Online softmax with lazy rescaling (common/online_softmax.cuh): every tile has a visible key in every row.
    float tile_max[kMT][2];
    bool moved = false;
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
      for (int hf = 0; hf < 2; ++hf) {
        tile_max[mt][hf] = softmax_quad_max(softmax_thread_max(s[mt], hf));
        moved = moved || softmax_moves(tile_max[mt][hf], m_i[mt][hf], score_scale);
      }
    online_softmax_step(
        s, tile_max, moved, m_i, l_i, o_acc, [&](int, int) { return score_scale; },
        [&](int, int, int) { return score_scale; });

    // O += P V.
#pragma unroll
    for (int kk = 0; kk < BN / 16; ++kk) {
      unsigned a[kMT][4];
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt) {
        a[mt][0] = Mma::pack(s[mt][2 * kk][0], s[mt][2 * kk][1]);
        a[mt][1] = Mma::pack(s[mt][2 * kk][2], s[mt][2 * kk][3]);
        a[mt][2] = Mma::pack(s[mt][2 * kk + 1][0], s[mt][2 * kk + 1][1]);
        a[mt][3] = Mma::pack(s[mt][2 * kk + 1][2], s[mt][2 * kk + 1][3]);
      }
#pragma unroll
      for (int dp = 0; dp < kDT / 2; ++dp) {
        unsigned bv[4];
        ldmatrix_x4_trans(bv, sV + (kk * 16 + (lane % 8) + ((lane / 8) % 2) * 8) * kPV + dp * 16 + (lane / 16) * 8);
#pragma unroll
        for (int mt = 0; mt < kMT; ++mt) {
          Mma::run(o_acc[mt][2 * dp], a[mt], bv[0], bv[1]);
          Mma::run(o_acc[mt][2 * dp + 1], a[mt], bv[2], bv[3]);
        }
      }
    }

    __syncthreads();  // every warp is done with buffer `slot`
    issue_kv(slot);   // tile t + 2
  }
  cp_async_wait<0>();  // no cp.async may be pending at exit

  // Normalise and write O and the natural-log LSE (or this split's partials).
  constexpr float kLn2 = 0.69314718055994530942f;
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
      float l = l_i[mt][hf];
      l += __shfl_xor_sync(0xffffffffu, l, 1);
      l += __shfl_xor_sync(0xffffffffu, l, 2);
      const float m2 = m_i[mt][hf] * score_scale;
      const int i = i0 + warp_row0 + mt * 16 + lane / 4 + hf * 8;
      // An empty row or split (no tile) has l = 0: O = 0, LSE = -inf. The predicate is free, so every
      // kernel serves allow_empty_block_nums.
      const bool nonempty = l > 0.f;
      const float inv = nonempty ? 1.f / l : 0.f;
      const float lse = nonempty ? (m2 + log2f(l)) * kLn2 : -kInf();
      if (i >= p.s_q) continue;
      if constexpr (SPLIT) {
        const long long row = ((static_cast<long long>(split) * p.batch + b) * p.h_q + h) * p.s_q + i;
        float* orow = p.part_o + row * DV + 2 * (lane % 4);
#pragma unroll
        for (int dt = 0; dt < kDT; ++dt)
          *reinterpret_cast<float2*>(orow + dt * 8) = make_float2(o_acc[mt][dt][2 * hf] * inv, o_acc[mt][dt][2 * hf + 1] * inv);
        if (lane % 4 == 0) p.part_lse[row] = lse;
      } else {
        T* orow = static_cast<T*>(p.o) + b * p.o_sb + h * p.o_sh + static_cast<long long>(i) * p.o_ss + 2 * (lane % 4);
#pragma unroll
        for (int dt = 0; dt < kDT; ++dt)
          *reinterpret_cast<unsigned*>(orow + dt * 8) = Mma::pack(o_acc[mt][dt][2 * hf] * inv, o_acc[mt][dt][2 * hf + 1] * inv);
        if (p.lse && lane % 4 == 0) p.lse[b * p.lse_sb + h * p.lse_sh + static_cast<long long>(i) * p.lse_ss] = lse;
      }
    }
}

}  // namespace attnjit::kernels
