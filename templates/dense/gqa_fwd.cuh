// gqa_fwd / gqa_varlen_fwd, portable backend: a FlashAttention-2-style forward on warp-level mma.sync.
//
// One CTA computes one tile of BM packed query rows of one KV head: packed row m is (query position
// i = m / g, head-in-group m % g), so the g query heads of a GQA group share every K/V tile the CTA
// loads. Q, K and V tiles live in shared memory (tile_at: XOR-swizzled rows of D elements when D is a
// multiple of 128, else rows padded to D + 8); S = Q K^T and O += P V run on m16n8k16 MMAs with fp32
// accumulation; the softmax is online in registers (log2 domain). Tiles wholly outside the causal/window band are
// skipped; only tiles crossing a boundary are masked. e4m3 inputs are dequantised (and RoPE applied) on
// the way into shared memory, in the compute dtype.
//
// Pipeline: K and V tiles are double-buffered; the loads of tile t + 2 are issued as soon as every warp
// is done with tile t, so each load has a whole tile of compute to land.
#pragma once
#include "common/band_mask.cuh"
#include "common/kv_rows.cuh"
#include "common/mma.cuh"
#include "common/numeric.cuh"
#include "common/online_softmax.cuh"
#include "common/tile_loader.cuh"
#include "dense/gqa_fwd_params.cuh"
#include "dense/varlen_tile.cuh"

namespace attnjit::kernels {

template <typename T_, typename TQ_, typename TKV_, int D_, int BM_, int BN_, int WARPS_, bool CAUSAL_, bool WINDOW_,
          bool SOFTCAP_, int ROPE_, bool VARLEN_, int KV_MODE_, bool SINKS_, bool SPLIT_>
struct GqaFwdConfig {
  using T = T_;      // compute dtype (MMA operands, output)
  using TQ = TQ_;    // q's dtype: T or __nv_fp8_e4m3
  using TKV = TKV_;  // k's and v's dtype: T or __nv_fp8_e4m3
  static constexpr int D = D_, BM = BM_, BN = BN_, WARPS = WARPS_;
  static constexpr bool kCausal = CAUSAL_, kWindow = WINDOW_, kSoftcap = SOFTCAP_, kVarlen = VARLEN_, kSinks = SINKS_;
  static constexpr bool kSplit = SPLIT_;
  static constexpr int kKvMode = KV_MODE_;
  static constexpr int kRope = ROPE_;  // 0 none, 1 neox, 2 interleaved
  static_assert(sizeof(T) == 2, "gqa_fwd: the compute dtype is 16-bit");
  static_assert((sizeof(TQ) == 2 || sizeof(TQ) == 1) && (sizeof(TKV) == 2 || sizeof(TKV) == 1),
                "gqa_fwd: inputs are 16-bit or e4m3");
  static_assert(KV_MODE_ >= kKvDense && KV_MODE_ <= kKvCompressed,
                "gqa_fwd: KV mode is dense, packed, paged, append or compressed");
  static_assert(KV_MODE_ != kKvCompressed || (VARLEN_ && CAUSAL_ && !WINDOW_ && ROPE_ == 0 && !SPLIT_ && sizeof(TQ_) == 2 &&
                                              sizeof(TKV_) == 2),
                "gqa_fwd: compressed keys come with packed 16-bit queries, causal, without window, RoPE or split");
  static_assert((KV_MODE_ != kKvPacked && KV_MODE_ != kKvPagedAppend) || VARLEN_,
                "gqa_fwd: packed and appended keys come with packed queries");
  static_assert(KV_MODE_ != kKvPagedAppend || (sizeof(TQ_) == 2 && ROPE_ == 0 && !SINKS_),
                "gqa_fwd: the append mode takes 16-bit queries, pre-rotated, without sinks");
  static_assert(!SPLIT_ || !SINKS_, "gqa_fwd: split-KV applies sinks in the combine step");
  static_assert(D % 32 == 0 && D >= 32 && D <= 256, "gqa_fwd: D must be a multiple of 32 in [32, 256]");
  static_assert(BN % 16 == 0, "gqa_fwd: BN must be a multiple of 16");
  static_assert(BM % (16 * WARPS) == 0 || (SPLIT_ && BM % 16 == 0), "gqa_fwd: each warp owns a multiple of 16 rows");
  static_assert(kRope >= 0 && kRope <= 2, "gqa_fwd: rope mode is 0, 1 or 2");
  static_assert(!kSinks || kVarlen, "gqa_fwd: sinks come with packed queries");
  static constexpr bool kFp8Q = sizeof(TQ) == 1;
  static constexpr bool kFp8KV = sizeof(TKV) == 1;
  static constexpr int kThreads = WARPS * 32;
  // Split-KV decode tiles with several warps split the keys, not the rows: every warp owns all BM rows
  // and BN / WARPS keys of each tile, and the warps' softmax states merge at the end.
  static constexpr bool kWarpSplit = SPLIT_ && WARPS_ > 1;
  static constexpr int kWarpRows = kWarpSplit ? BM : BM / WARPS;
  static constexpr int kWarpKeys = kWarpSplit ? BN / WARPS : BN;
  static_assert(kWarpKeys % 16 == 0, "gqa_fwd: each warp takes a multiple of 16 keys of a tile");
  static constexpr int kMT = kWarpRows / 16;  // m16 tiles per warp
  static constexpr int kNT = kWarpKeys / 8;   // n8 tiles of S (this warp's keys)
  static constexpr int kDT = D / 8;           // n8 tiles of O
  static constexpr int kKS = D / 16;          // k16 steps of Q K^T
  // Shared-memory rows (see tile_at): D elements, swizzled, when D % 128 == 0; else D + 8, padded (H200,
  // H200, 2026-12-01: swizzling D = 64's 128-byte rows cost 4%, while D = 128 gained 5-8% and D = 256 6-12%).
  static constexpr bool kSwizzle = D % 128 == 0;
  static constexpr int kPitch = kSwizzle ? D : D + 8;  // shared-memory row pitch, elements
  // RoPE keeps each rotated Q/K value as hi + lo in two 16-bit tiles (see rope_rotate).
  // Q, then K and V double-buffered (tile t + 2 loads while tile t + 1 waits and tile t is computed).
  static constexpr int kSmemRows = BM + 4 * BN + (kRope != 0 ? BM + 2 * BN : 0);
  // Q's A fragments stay in registers for the whole key loop (saving a third of the shared-memory
  // reads, the limiting resource of mma.sync attention) where the register budget allows it.
  static constexpr bool kQInRegs = kRope == 0 && (D <= 96 || kMT == 1);
  static constexpr int kSmemBytes = kSmemRows * kPitch * static_cast<int>(sizeof(T));
  static_assert(kSmemBytes == gqa_fwd_smem_bytes(D, BM, BN, kRope != 0) && kThreads == gqa_fwd_threads(WARPS),
                "gqa_fwd: the host's launch geometry (gqa_fwd_params.cuh) matches the kernel's layout");
};

// Rotates the first R channels of ROWS shared-memory rows (SPEC.md §1.7) in fp32. The rotated value
// is stored as hi = rnd(x) in `smem` and lo = rnd(x - hi) in `lo_tile`, so that the S = Q K^T products
// hi*hi + hi*lo + lo*hi recover fp32 accuracy (rounding the rotated operands to 16 bits once would cost
// about 2^-9 of every logit). lo columns in [R, R rounded up to 16) and lo of rows outside the problem
// (pos_of(row) < 0) are zero.
template <typename Cfg, int ROWS, typename PosOf>
__device__ __forceinline__ void rope_rotate(typename Cfg::T* smem, typename Cfg::T* lo_tile, PosOf pos_of,
                                            const GqaFwdParams& p) {
  using T = typename Cfg::T;
  const int half = p.rotary_dim / 2;
  const int cols16 = (p.rotary_dim + 15) / 16 * 16;
  const T* cos_t = static_cast<const T*>(p.rope_cos);
  const T* sin_t = static_cast<const T*>(p.rope_sin);
  for (int idx = threadIdx.x; idx < ROWS * half; idx += Cfg::kThreads) {
    const int row = idx / half, c = idx % half;
    const int pos = pos_of(row);
    const int a = Cfg::kRope == 1 ? c : 2 * c;
    const int b = Cfg::kRope == 1 ? c + half : 2 * c + 1;
    const int at_a = tile_at<Cfg>(row, a), at_b = tile_at<Cfg>(row, b);
    if (pos < 0) {
      lo_tile[at_a] = from_float<T>(0.f);
      lo_tile[at_b] = from_float<T>(0.f);
      continue;
    }
    const float cs = to_float(cos_t[pos * p.cos_sp + c * p.cos_sc]);
    const float sn = to_float(sin_t[pos * p.sin_sp + c * p.sin_sc]);
    const float xa = to_float(smem[at_a]), xb = to_float(smem[at_b]);
    const float ya = xa * cs - xb * sn, yb = xb * cs + xa * sn;
    const T ha = from_float<T>(ya), hb = from_float<T>(yb);
    smem[at_a] = ha;
    smem[at_b] = hb;
    lo_tile[at_a] = from_float<T>(ya - to_float(ha));
    lo_tile[at_b] = from_float<T>(yb - to_float(hb));
  }
  const int pad = cols16 - p.rotary_dim;
  for (int idx = threadIdx.x; idx < ROWS * pad; idx += Cfg::kThreads)
    lo_tile[tile_at<Cfg>(idx / pad, p.rotary_dim + idx % pad)] = from_float<T>(0.f);
}

template <typename T, typename TQ, typename TKV, int D, int BM, int BN, int WARPS, bool CAUSAL, bool WINDOW, bool SOFTCAP,
          int ROPE, bool VARLEN, int KV_MODE, bool SINKS, bool SPLIT>
__global__ void __launch_bounds__(WARPS * 32) gqa_fwd(const __grid_constant__ GqaFwdParams p) {
  using Cfg = GqaFwdConfig<T, TQ, TKV, D, BM, BN, WARPS, CAUSAL, WINDOW, SOFTCAP, ROPE, VARLEN, KV_MODE, SINKS, SPLIT>;
  using Mma = MmaOp<T>;
  constexpr int kPitch = Cfg::kPitch, kMT = Cfg::kMT, kNT = Cfg::kNT, kDT = Cfg::kDT;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  T* sQ = reinterpret_cast<T*>(smem_raw);
  T* sKbuf = sQ + BM * kPitch;       // [2][BN][kPitch]
  T* sVbuf = sKbuf + 2 * BN * kPitch;  // [2][BN][kPitch]
  T* sQlo = sVbuf + 2 * BN * kPitch;   // RoPE only: low parts of the rotated Q and K ([2][BN] for K)
  T* sKlobuf = sQlo + BM * kPitch;
  const int rope_cols = ROPE != 0 ? (p.rotary_dim + 15) / 16 * 16 : 0;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  // The combine (gqa_combine.cuh) may be scheduled from now on; it waits for this grid's writes.
  if constexpr (SPLIT) asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif

  const int r = blockIdx.y;  // KV head
  const int g = p.group;
  int b, tile, q_off = 0, kv_off = 0, q_len, kv_len, kv_old = 0;
  // Split-KV: z = split (packed queries) or b * n_splits + split.
  const int split = SPLIT ? (VARLEN ? static_cast<int>(blockIdx.z) : static_cast<int>(blockIdx.z) % p.n_splits) : 0;
  if constexpr (VARLEN) {
    if (!find_varlen_tile<BM>(p, b, tile)) return;
    q_off = p.cu_q[b];
    q_len = p.cu_q[b + 1] - q_off;
  } else {
    b = SPLIT ? static_cast<int>(blockIdx.z) / p.n_splits : static_cast<int>(blockIdx.z);
    // Causal: the longest tiles (last query rows, most keys) first, so the grid's tail is short work.
    tile = CAUSAL && !SPLIT ? static_cast<int>(gridDim.x - 1 - blockIdx.x) : static_cast<int>(blockIdx.x);
    q_len = p.s_q;
  }
  kv_extent<KV_MODE>(p, b, q_len, kv_off, kv_len, kv_old);
  const int m_base = tile * BM;
  if (m_base >= q_len * g) return;

  const TQ* qb = static_cast<const TQ*>(p.q) + (VARLEN ? q_off * p.q_ss : b * p.q_sb) + static_cast<long long>(r) * g * p.q_sh;
  // Paged: kb/vb point at KV head r of pool row 0; otherwise at the request's first key.
  constexpr bool kPool = KV_MODE == kKvPaged || KV_MODE == kKvPagedAppend;
  constexpr bool kPackedKeys = KV_MODE == kKvPacked || KV_MODE == kKvCompressed;
  const long long k_base = kPool ? 0 : kPackedKeys ? kv_off * p.k_ss : b * p.k_sb;
  const long long v_base = kPool ? 0 : kPackedKeys ? kv_off * p.v_ss : b * p.v_sb;
  const TKV* kb = static_cast<const TKV*>(p.k) + k_base + r * p.k_sh;
  const TKV* vb = static_cast<const TKV*>(p.v) + v_base + r * p.v_sh;
  T* ob = static_cast<T*>(p.o) + (VARLEN ? q_off * p.o_ss : b * p.o_sb) + static_cast<long long>(r) * g * p.o_sh;
  // Logit scales (log2 domain) and the output scale; e4m3 dequantisation folds in here.
  // score_scale turns a score into a log2-domain logit: sm_scale * log2(e) for raw dot products, 1 for
  // softcapped scores (already logits).
  float score_scale = SOFTCAP ? 1.f : p.scale_log2, softcap_inv_scale = p.softcap_inv_scale, out_scale_v = 1.f;
  if constexpr (KV_MODE != kKvPagedAppend && (Cfg::kFp8Q || Cfg::kFp8KV)) {
    float qk = 1.f;
    if constexpr (Cfg::kFp8Q) qk *= p.q_scale[b * p.qsc_sb + r * p.qsc_sr];
    if constexpr (Cfg::kFp8KV) {
      qk *= p.k_scale[b * p.ksc_sb + r * p.ksc_sr];
      out_scale_v = p.v_scale[b * p.vsc_sb + r * p.vsc_sr];
    }
    if constexpr (SOFTCAP) softcap_inv_scale *= qk;
    else score_scale *= qk;
  }

  // The band of keys any row of this tile can see, and the tiles that cover it.
  const int shift = kv_len - q_len;  // bottom-right alignment: p_i = i + shift (key_position)
  const int i_min = m_base / g;
  const int i_max = min(q_len - 1, (m_base + BM - 1) / g);
  const int p_min = key_position<KV_MODE>(i_min, shift, p.cmp_bs), p_max = key_position<KV_MODE>(i_max, shift, p.cmp_bs);
  int lo = 0, hi = kv_len;
  band_keys<CAUSAL, WINDOW>(p_min, p_max, p.window_left, p.window_right, lo, hi);
  int n_first = lo / BN * BN;
  int num_tiles = hi > n_first ? (hi - n_first + BN - 1) / BN : 0;
  if constexpr (SPLIT) {
    // This CTA's run of tiles: the split-th of n_splits runs of (nearly) equal length.
    const int per = (num_tiles + p.n_splits - 1) / p.n_splits;
    const int first = min(num_tiles, split * per);
    num_tiles = min(num_tiles, first + per) - first;
    n_first += first * BN;
  }

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int warp_row0 = Cfg::kWarpSplit ? 0 : warp * Cfg::kWarpRows;
  const int wk0 = Cfg::kWarpSplit ? warp * Cfg::kWarpKeys : 0;  // this warp's first key of each tile
  constexpr unsigned kRows16 = 16 * kPitch * sizeof(T);  // bytes of 16 tile rows
  // This lane's ldmatrix rows in the warp's first m16 / key block: Q's (and Q's low parts), K's, V's. Q
  // (A operand) and V (trans) lanes read chunk lane / 16 of their row, K lanes chunk (lane / 8) % 2; every
  // block offset is a multiple of 8 rows, so a lane's row % 8 (its swizzle) is lane % 8 throughout.
  const unsigned q_lane = lane_addr<Cfg>(sQ, warp_row0 + lane % 16, lane / 16);
  const unsigned qlo_lane = lane_addr<Cfg>(sQlo, warp_row0 + lane % 16, lane / 16);
  const int k_row = wk0 + lane % 8 + (lane / 16) * 8, v_row = wk0 + lane % 8 + ((lane / 8) % 2) * 8;
  // This thread's rows: (mt, hf) -> tile row warp_row0 + mt * 16 + lane / 4 + hf * 8, at key position
  // row_pos (query index + shift).
  int row_pos[kMT][2];
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
    for (int hf = 0; hf < 2; ++hf)
      row_pos[mt][hf] = key_position<KV_MODE>((m_base + warp_row0 + mt * 16 + lane / 4 + hf * 8) / g, shift, p.cmp_bs);

  auto q_row = [&](int row) -> const TQ* {
    const int gm = m_base + row, i = gm / g;
    return i < q_len ? qb + i * p.q_ss + (gm - i * g) * p.q_sh : nullptr;
  };
  auto q_pos = [&](int row) -> int {
    const int i = (m_base + row) / g;
    return i < q_len ? i + shift : -1;
  };
  auto k_pos = [&](int n0) {
    return [=](int row) -> int { return n0 + row < kv_len ? n0 + row : -1; };
  };

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

  // Loads K/V tile t into buffer t % 2 and commits a cp.async group (an empty one past the last tile,
  // so that group t always holds tile t).
  // Paged 16-bit keys: the page-table entries of tile t + 1 are looked up when tile t is issued.
  constexpr bool kPagedRows = (KV_MODE == kKvPaged || KV_MODE == kKvPagedAppend) && !Cfg::kFp8KV;
  PagedRows<Cfg, BN> pg_next;
  const int pool_keys = KV_MODE == kKvPagedAppend ? kv_old : kv_len;  // keys held by the pool
  const int* page_row = kPool ? p.page_table + b * p.pt_sb : nullptr;
  auto lookup_pages = [&](int t) {
    if constexpr (kPagedRows) {
      if (t < num_tiles) pg_next.lookup(n_first + t * BN, pool_keys, page_row, p.pt_sp, p.page_size);
    }
  };
  auto issue_kv = [&](int t) {
    if (t < num_tiles) {
      const int n0 = n_first + t * BN;
      if constexpr (kPagedRows) {
        const T* kn = KV_MODE == kKvPagedAppend ? static_cast<const T*>(p.k_new) + q_off * p.kn_ss + r * p.kn_sh : nullptr;
        const T* vn = KV_MODE == kKvPagedAppend ? static_cast<const T*>(p.v_new) + q_off * p.vn_ss + r * p.vn_sh : nullptr;
        if (pg_next.mode == 1) {  // one page: the dense kernel's affine loads
          const long long off_k = static_cast<long long>(pg_next.tile_page) * p.k_sp + pg_next.tile_slot * p.k_ss;
          const long long off_v = static_cast<long long>(pg_next.tile_page) * p.v_sp + pg_next.tile_slot * p.v_ss;
          load_tile_affine<Cfg, BN>(sKbuf + (t & 1) * BN * kPitch, kb + off_k, p.k_ss, BN);
          load_tile_affine<Cfg, BN>(sVbuf + (t & 1) * BN * kPitch, vb + off_v, p.v_ss, BN);
        } else if (KV_MODE == kKvPagedAppend && pg_next.mode == 2) {  // new rows only
          load_tile_affine<Cfg, BN>(sKbuf + (t & 1) * BN * kPitch, reinterpret_cast<const TKV*>(kn) + (n0 - pool_keys) * p.kn_ss,
                                    p.kn_ss, kv_len - n0);
          load_tile_affine<Cfg, BN>(sVbuf + (t & 1) * BN * kPitch, reinterpret_cast<const TKV*>(vn) + (n0 - pool_keys) * p.vn_ss,
                                    p.vn_ss, kv_len - n0);
        } else {
          load_paged_kv_tile<Cfg, BN>(sKbuf + (t & 1) * BN * kPitch, sVbuf + (t & 1) * BN * kPitch, pg_next, n0, pool_keys,
                                      kv_len, reinterpret_cast<const T*>(kb), reinterpret_cast<const T*>(vb), p.k_ss,
                                      p.k_sp, p.v_ss, p.v_sp, kn, p.kn_ss, vn, p.vn_ss);
        }
      } else if constexpr (KV_MODE == kKvPagedAppend) {
        // e4m3 pool: dequantised on load (16-bit pools take the PagedRows path above).
        const T* kn = static_cast<const T*>(p.k_new) + q_off * p.kn_ss + r * p.kn_sh;
        const T* vn = static_cast<const T*>(p.v_new) + q_off * p.vn_ss + r * p.vn_sh;
        const float kdeq = p.k_scale[0], vdeq = p.v_scale[0];
        load_append_tile<Cfg, BN>(sKbuf + (t & 1) * BN * kPitch, n0, kv_old, kv_len, kb, p.k_ss, p.k_sp, page_row,
                                  p.pt_sp, p.page_size, kn, p.kn_ss, kdeq);
        load_append_tile<Cfg, BN>(sVbuf + (t & 1) * BN * kPitch, n0, kv_old, kv_len, vb, p.v_ss, p.v_sp, page_row,
                                  p.pt_sp, p.page_size, vn, p.vn_ss, vdeq);
      } else if constexpr (KV_MODE == kKvPaged) {
        // NOTE: page-table entries are read only for keys < kv_len (SPEC.md §2.9: later entries may hold
        // anything).
        auto paged_row = [&](const TKV* base, long long slot_stride, long long page_stride) {
          return [=](int row) -> const TKV* {
            const int j = n0 + row;
            if (j >= kv_len) return nullptr;
            const int page = p.page_table[b * p.pt_sb + (j / p.page_size) * p.pt_sp];
            return base + page * page_stride + (j % p.page_size) * slot_stride;
          };
        };
        load_tile<Cfg, TKV, BN>(sKbuf + (t & 1) * BN * kPitch, paged_row(kb, p.k_ss, p.k_sp));
        load_tile<Cfg, TKV, BN>(sVbuf + (t & 1) * BN * kPitch, paged_row(vb, p.v_ss, p.v_sp));
      } else {
        load_tile_affine<Cfg, BN>(sKbuf + (t & 1) * BN * kPitch, kb + n0 * p.k_ss, p.k_ss, kv_len - n0);
        load_tile_affine<Cfg, BN>(sVbuf + (t & 1) * BN * kPitch, vb + n0 * p.v_ss, p.v_ss, kv_len - n0);
      }
    }
    cp_async_commit();
  };
  load_tile<Cfg, TQ, BM>(sQ, q_row);
  lookup_pages(0);
  issue_kv(0);  // group 0: Q and tile 0
  lookup_pages(1);
  issue_kv(1);
  lookup_pages(2);
  cp_async_wait<1>();
  __syncthreads();
  if constexpr (ROPE != 0) {
    rope_rotate<Cfg, BM>(sQ, sQlo, q_pos, p);
    if (num_tiles > 0) rope_rotate<Cfg, BN>(sKbuf, sKlobuf, k_pos(n_first), p);
    __syncthreads();
  }

  unsigned q_frag[Cfg::kQInRegs ? Cfg::kKS : 1][kMT][4];
  if constexpr (Cfg::kQInRegs) {
#pragma unroll
    for (int ks16 = 0; ks16 < Cfg::kKS; ++ks16)
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt)
        ldmatrix_x4_at(q_frag[ks16][mt], chunk_addr<Cfg>(q_lane, 2 * ks16) + mt * kRows16);
  }

  for (int t = 0; t < num_tiles; ++t) {
    const int n0 = n_first + t * BN;
    const T* sK = sKbuf + (t & 1) * BN * kPitch;
    const T* sV = sVbuf + (t & 1) * BN * kPitch;
    const T* sKlo = sKlobuf + (t & 1) * BN * kPitch;
    const unsigned k_lane = lane_addr<Cfg>(sK, k_row, (lane / 8) % 2);
    const unsigned klo_lane = lane_addr<Cfg>(sKlo, k_row, (lane / 8) % 2);
    const unsigned v_lane = lane_addr<Cfg>(sV, v_row, lane / 16);
    if (t > 0) {
      cp_async_wait<1>();
      __syncthreads();  // tile t landed (tile t + 1 may still be in flight)
      if constexpr (ROPE != 0) {
        rope_rotate<Cfg, BN>(sKbuf + (t & 1) * BN * kPitch, sKlobuf + (t & 1) * BN * kPitch, k_pos(n0), p);
        __syncthreads();
      }
    }

    // S = Q K^T for this warp's rows.
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
          ldmatrix_x4_at(a[mt], chunk_addr<Cfg>(q_lane, 2 * ks16) + mt * kRows16);
        }
      }
#pragma unroll
      for (int np = 0; np < kNT / 2; ++np) {
        unsigned bk[4];
        ldmatrix_x4_at(bk, chunk_addr<Cfg>(k_lane, 2 * ks16) + np * kRows16);
#pragma unroll
        for (int mt = 0; mt < kMT; ++mt) {
          Mma::run(s[mt][2 * np], a[mt], bk[0], bk[1]);
          Mma::run(s[mt][2 * np + 1], a[mt], bk[2], bk[3]);
        }
      }
      if constexpr (ROPE != 0) {
        // The rotated channels' correction terms: Q_lo K_hi + Q_hi K_lo.
        if (ks16 * 16 < rope_cols) {
          unsigned alo[kMT][4];
#pragma unroll
          for (int mt = 0; mt < kMT; ++mt)
            ldmatrix_x4_at(alo[mt], chunk_addr<Cfg>(qlo_lane, 2 * ks16) + mt * kRows16);
#pragma unroll
          for (int np = 0; np < kNT / 2; ++np) {
            unsigned bk[4], bklo[4];
            ldmatrix_x4_at(bk, chunk_addr<Cfg>(k_lane, 2 * ks16) + np * kRows16);
            ldmatrix_x4_at(bklo, chunk_addr<Cfg>(klo_lane, 2 * ks16) + np * kRows16);
#pragma unroll
            for (int mt = 0; mt < kMT; ++mt) {
              Mma::run(s[mt][2 * np], alo[mt], bk[0], bk[1]);
              Mma::run(s[mt][2 * np + 1], alo[mt], bk[2], bk[3]);
              Mma::run(s[mt][2 * np], a[mt], bklo[0], bklo[1]);
              Mma::run(s[mt][2 * np + 1], a[mt], bklo[2], bklo[3]);
            }
          }
        }
      }
    }

    // Scores: raw dot products (the logit scale is applied inside exp2 below), or with softcap already
    // capped logits in the log2 domain. Masking only on tiles that cross the band's edges or kv_len.
    // The band's edges as band_edge (common/band_mask.cuh) computes them, written out (see there).
    bool need_mask = n0 + BN > kv_len;
    if constexpr (CAUSAL) need_mask = need_mask || n0 + BN - 1 > p_min;
    if constexpr (WINDOW) {
      need_mask = need_mask || (p.window_left >= 0 && n0 < p_max - p.window_left) ||
                  (p.window_right >= 0 && n0 + BN - 1 > p_min + p.window_right);
    }
    if (SOFTCAP || need_mask) {
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
        for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            float x = s[mt][nt][e];
            if constexpr (SOFTCAP) x = p.softcap_log2 * fast_tanh(x * softcap_inv_scale);
            if (need_mask) {
              const int j = n0 + wk0 + nt * 8 + 2 * (lane % 4) + (e & 1);
              const int pos = row_pos[mt][e >> 1];
              if (!key_visible<CAUSAL, WINDOW>(j, pos, kv_len, p.window_left, p.window_right)) x = -kInf();
            }
            s[mt][nt][e] = x;
          }
    }

    // Online softmax with lazy rescaling (common/online_softmax.cuh).
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
    for (int kk = 0; kk < Cfg::kWarpKeys / 16; ++kk) {
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
        ldmatrix_x4_trans_at(bv, chunk_addr<Cfg>(v_lane, 2 * dp) + kk * kRows16);
#pragma unroll
        for (int mt = 0; mt < kMT; ++mt) {
          Mma::run(o_acc[mt][2 * dp], a[mt], bv[0], bv[1]);
          Mma::run(o_acc[mt][2 * dp + 1], a[mt], bv[2], bv[3]);
        }
      }
    }

    __syncthreads();  // every warp is done with buffer t % 2
    issue_kv(t + 2);
    lookup_pages(t + 3);
  }
  cp_async_wait<0>();  // no cp.async may be pending at exit

  if constexpr (Cfg::kWarpSplit) {
    // Merge the warps' states (same rows, disjoint keys) into warp 0 through shared memory (the K/V
    // buffers are free now): per lane, its fragments' m, l and O.
    constexpr int kPer = kMT * 4 + kMT * kDT * 4;
    float* red = reinterpret_cast<float*>(smem_raw);
    __syncthreads();
    if (warp != 0) {
      float* dst = red + ((warp - 1) * 32 + lane) * kPer;
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt) {
#pragma unroll
        for (int hf = 0; hf < 2; ++hf) {
          dst[mt * 4 + hf] = m_i[mt][hf];
          dst[mt * 4 + 2 + hf] = l_i[mt][hf];
        }
#pragma unroll
        for (int dt = 0; dt < kDT; ++dt)
#pragma unroll
          for (int e = 0; e < 4; ++e) dst[kMT * 4 + (mt * kDT + dt) * 4 + e] = o_acc[mt][dt][e];
      }
    }
    __syncthreads();
    if (warp != 0) return;
    for (int w = 1; w < WARPS; ++w) {
      const float* src = red + ((w - 1) * 32 + lane) * kPer;
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
        for (int hf = 0; hf < 2; ++hf) {
          const float mw = src[mt * 4 + hf], lw = src[mt * 4 + 2 + hf];
          const float M = fmaxf(m_i[mt][hf], mw);
          const float a0 = m_i[mt][hf] == -kInf() ? 0.f : fast_exp2((m_i[mt][hf] - M) * score_scale);
          const float aw = mw == -kInf() ? 0.f : fast_exp2((mw - M) * score_scale);
          m_i[mt][hf] = M;
          l_i[mt][hf] = l_i[mt][hf] * a0 + lw * aw;
#pragma unroll
          for (int dt = 0; dt < kDT; ++dt)
#pragma unroll
            for (int e = 0; e < 2; ++e) {
              const int k = 2 * hf + e;
              o_acc[mt][dt][k] = o_acc[mt][dt][k] * a0 + src[kMT * 4 + (mt * kDT + dt) * 4 + k] * aw;
            }
        }
    }
  }

  // Normalise, fold in the sink, write O and the natural-log LSE.
  constexpr float kLn2 = 0.69314718055994530942f;
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
      float l = l_i[mt][hf];
      l += __shfl_xor_sync(0xffffffffu, l, 1);
      l += __shfl_xor_sync(0xffffffffu, l, 2);
      float m = m_i[mt][hf] * score_scale;  // log2 domain (-inf stays -inf)
      const int gm = m_base + warp_row0 + mt * 16 + lane / 4 + hf * 8;
      const int i = gm / g, hg = gm - i * g;
      const int h = r * g + hg;
      float empty_lse = -kInf();
      float out_scale = out_scale_v;
      if constexpr (SINKS) fold_sink(i < q_len ? p.sinks[h * p.sinks_s] : -kInf(), m, l, out_scale, empty_lse);
      const float inv = l > 0.f ? out_scale / l : 0.f;
      if constexpr (SPLIT) {
        if (i < q_len) {
          const long long row = (VARLEN ? q_off + i : static_cast<long long>(b) * p.s_q + i) * (p.h_kv * g) + h;
          const long long at = static_cast<long long>(split) * p.part_rows + row;
          float* orow = p.o_part + at * D + 2 * (lane % 4);
#pragma unroll
          for (int dt = 0; dt < kDT; ++dt)
            *reinterpret_cast<float2*>(orow + dt * 8) =
                make_float2(o_acc[mt][dt][2 * hf] * inv, o_acc[mt][dt][2 * hf + 1] * inv);
          if (lane % 4 == 0) p.lse_part[at] = l > 0.f ? m + log2f(l) : -kInf();
        }
        continue;
      }
      if (i < q_len) {
        T* orow = ob + static_cast<long long>(i) * p.o_ss + hg * p.o_sh + 2 * (lane % 4);
#pragma unroll
        for (int dt = 0; dt < kDT; ++dt)
          *reinterpret_cast<unsigned*>(orow + dt * 8) =
              Mma::pack(o_acc[mt][dt][2 * hf] * inv, o_acc[mt][dt][2 * hf + 1] * inv);
        if (p.lse && lane % 4 == 0) {
          const float lse = l > 0.f ? (m + log2f(l)) * kLn2 : empty_lse;
          if constexpr (VARLEN) p.lse[static_cast<long long>(q_off + i) * p.lse_ss + h * p.lse_sh] = lse;
          else p.lse[b * p.lse_sb + h * p.lse_sh + static_cast<long long>(i) * p.lse_ss] = lse;
        }
      }
    }
}

}  // namespace attnjit::kernels
