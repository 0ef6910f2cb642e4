// bsa_bwd, portable backend (mma.sync, sm_80+): the block-sparse attention backward of SPEC.md §2.5 as
// a FlashAttention-2-style key-block-parallel backward over an inverted (key block -> query blocks) map.
//
// Launch sequence on one stream (bsa_bwd.cpp), all scratch in the plan workspace:
//   1. memset counts = 0
//   2. bsa_bwd_prep<T, D>     per query row: lse2 = lse * log2(e) (+inf where lse = -inf, so P = 0),
//                             delta = sum_d o * do, and the row's fp32 dq accumulator zeroed
//   3. bsa_bwd_route(count)   per active (row block, u): counts[b, kv head, key block] += 1
//   4. bsa_bwd_scan           one CTA: offsets = exclusive prefix sums of counts (and fill cursors)
//   5. bsa_bwd_route(fill)    per active (row block, u): list[cursor++] = (head in group, query block)
//   6. bsa_bwd_main<..>       one CTA per (key block, kv head, batch): K and V stay in shared memory;
//                             for every query block (of every query head of the group) that selects the
//                             key block, in sub-tiles of BM rows: S^T = K Q^T, dP^T = V dO^T,
//                             P^T = exp2(S^T scale log2(e) - lse2), dS^T = P^T (dP^T - delta),
//                             dV += P^T dO, dK += dS^T Q (registers), dQ_acc += dS K (fp32 red.add);
//                             at the end dK * scale and dV are stored (zeros for unselected keys).
//   7. bsa_bwd_dq<T, D>       dq = rnd(scale * dq_acc) for every row (rows no block reaches: exact 0).
// dQ accumulates with fp32 atomics and the list order comes from atomic cursors: results are not
// bitwise deterministic (SPEC.md §2.5 allows it).
#pragma once
#include "bsa/bsa_bwd_params.cuh"
#include "common/mma.cuh"
#include "common/numeric.cuh"
#include "dense/gqa_fwd.cuh"  // load_tile_affine (cp.async tile loads with zero-filled tails)

namespace attnjit::kernels {

constexpr float kBsaLog2e = 1.44269504088896340736f;

// Row-wise preprocessing over [B, H, s_pad] rows, D / 8 threads per row (one 16-byte chunk each).
template <typename T, int D>
__global__ void __launch_bounds__(256) bsa_bwd_prep(const __grid_constant__ BsaBwdParams p) {
  constexpr int kChunks = D / 8;
  static_assert(32 % kChunks == 0, "bsa_bwd_prep: a row's threads share one warp");
  const long long rows = static_cast<long long>(p.batch) * p.h_q * p.s_pad;
  const long long gid = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  const long long row = gid / kChunks;
  const int ch = static_cast<int>(gid % kChunks);
  const bool valid = row < rows;
  float dot = 0.f;
  int b = 0, h = 0, i = 0;
  if (valid) {
    i = static_cast<int>(row % p.s_pad);
    const long long bh = row / p.s_pad;
    h = static_cast<int>(bh % p.h_q);
    b = static_cast<int>(bh / p.h_q);
    if (i < p.s_q) {
      const T* o = static_cast<const T*>(p.o) + b * p.o_sb + h * p.o_sh + i * p.o_ss + ch * 8;
      const T* d = static_cast<const T*>(p.dout) + b * p.do_sb + h * p.do_sh + i * p.do_ss + ch * 8;
      const uint4 ov = *reinterpret_cast<const uint4*>(o);
      const uint4 dv = *reinterpret_cast<const uint4*>(d);
      const unsigned ow[4] = {ov.x, ov.y, ov.z, ov.w}, dw[4] = {dv.x, dv.y, dv.z, dv.w};
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const float2 x = Float16Traits<T>::to_float2(ow[e]), y = Float16Traits<T>::to_float2(dw[e]);
        dot = fmaf(x.x, y.x, dot);
        dot = fmaf(x.y, y.y, dot);
      }
    }
    float4* acc = reinterpret_cast<float4*>(p.dq_acc + row * D + ch * 8);
    acc[0] = make_float4(0.f, 0.f, 0.f, 0.f);
    acc[1] = make_float4(0.f, 0.f, 0.f, 0.f);
  }
#pragma unroll
  for (int off = kChunks / 2; off > 0; off >>= 1) dot += __shfl_xor_sync(0xffffffffu, dot, off);
  if (valid && ch == 0) {
    float l2 = kInf(), dl = 0.f;
    if (i < p.s_q) {
      const float l = p.lse[b * p.lse_sb + h * p.lse_sh + static_cast<long long>(i) * p.lse_ss];
      l2 = l == -kInf() ? kInf() : l * kBsaLog2e;
      dl = dot;
    }
    p.lse2[row] = l2;
    p.delta[row] = dl;
  }
}

// One thread per (b, h, query block, u): fill = 0 counts the active (query block, key block) pairs per
// (b, kv head, key block); fill = 1 appends each pair to its key block's list. Indices outside
// [0, N_kv) (outside the caller contract) are skipped.
__global__ void __launch_bounds__(256) bsa_bwd_route(const __grid_constant__ BsaBwdParams p, int fill) {
  const long long gid = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  const long long total = static_cast<long long>(p.batch) * p.h_q * p.n_q * p.k_max;
  if (gid >= total) return;
  const int u = static_cast<int>(gid % p.k_max);
  long long rest = gid / p.k_max;
  const int m = static_cast<int>(rest % p.n_q);
  rest /= p.n_q;
  const int h = static_cast<int>(rest % p.h_q);
  const int b = static_cast<int>(rest / p.h_q);
  const int n = p.nums ? p.nums[b * p.nums_sb + h * p.nums_sh + m * p.nums_sm] : p.fixed_count;
  if (u >= n) return;
  const int kb = p.index[b * p.idx_sb + h * p.idx_sh + m * p.idx_sm + u * p.idx_su];
  if (kb < 0 || kb >= p.n_kv) return;
  const int r = h / p.group;
  const long long seg = (static_cast<long long>(b) * p.h_kv + r) * p.n_kv + kb;
  if (!fill) {
    atomicAdd(p.counts + seg, 1);
  } else {
    const int pos = atomicAdd(p.cursor + seg, 1);
    p.list[pos] = (h - r * p.group) * p.n_q + m;
  }
}

// One CTA of 1024 threads: offsets = exclusive prefix sums of counts (offsets[n] = total), cursor = offsets.
__global__ void __launch_bounds__(1024) bsa_bwd_scan(const __grid_constant__ BsaBwdParams p) {
  __shared__ int warp_excl[32];
  __shared__ int chunk_total;
  const long long n = static_cast<long long>(p.batch) * p.h_kv * p.n_kv;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  int carry = 0;
  for (long long base = 0; base < n; base += 4 * 1024) {
    const long long i0 = base + threadIdx.x * 4;
    int v[4], sum = 0;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      v[j] = i0 + j < n ? p.counts[i0 + j] : 0;
      sum += v[j];
    }
    int incl = sum;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const int t = __shfl_up_sync(0xffffffffu, incl, o);
      if (lane >= o) incl += t;
    }
    if (lane == 31) warp_excl[warp] = incl;
    __syncthreads();
    if (warp == 0) {
      const int w = warp_excl[lane];
      int wi = w;
#pragma unroll
      for (int o = 1; o < 32; o <<= 1) {
        const int t = __shfl_up_sync(0xffffffffu, wi, o);
        if (lane >= o) wi += t;
      }
      warp_excl[lane] = wi - w;
      if (lane == 31) chunk_total = wi;
    }
    __syncthreads();
    int excl = carry + warp_excl[warp] + incl - sum;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      if (i0 + j < n) {
        p.offsets[i0 + j] = excl;
        p.cursor[i0 + j] = excl;
      }
      excl += v[j];
    }
    carry += chunk_total;
    __syncthreads();  // warp_excl and chunk_total are rewritten by the next chunk
  }
  if (threadIdx.x == 0) p.offsets[n] = carry;
}

// dq = rnd(scale * dq_acc) for every row i < S_q, one 16-byte chunk per thread.
template <typename T, int D>
__global__ void __launch_bounds__(256) bsa_bwd_dq(const __grid_constant__ BsaBwdParams p) {
  constexpr int kChunks = D / 8;
  const long long gid = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  const long long total = static_cast<long long>(p.batch) * p.h_q * p.s_q * kChunks;
  if (gid >= total) return;
  const int ch = static_cast<int>(gid % kChunks);
  const long long row = gid / kChunks;
  const int i = static_cast<int>(row % p.s_q);
  const long long bh = row / p.s_q;
  const int h = static_cast<int>(bh % p.h_q), b = static_cast<int>(bh / p.h_q);
  const float4* src = reinterpret_cast<const float4*>(p.dq_acc + (bh * p.s_pad + i) * D + ch * 8);
  const float4 x = src[0], y = src[1];
  const float s = p.scale;
  uint4 out;
  out.x = MmaOp<T>::pack(x.x * s, x.y * s);
  out.y = MmaOp<T>::pack(x.z * s, x.w * s);
  out.z = MmaOp<T>::pack(y.x * s, y.y * s);
  out.w = MmaOp<T>::pack(y.z * s, y.w * s);
  *reinterpret_cast<uint4*>(static_cast<T*>(p.dq) + b * p.dq_sb + h * p.dq_sh + static_cast<long long>(i) * p.dq_ss +
                            ch * 8) = out;
}

// fp32 dQ accumulation: two adjacent columns per instruction on sm_90 (red.global.add.v2.f32).
__device__ __forceinline__ void red_add_f32x2(float* addr, float x, float y) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("red.global.add.v2.f32 [%0], {%1, %2};\n" ::"l"(addr), "f"(x), "f"(y) : "memory");
#else
  atomicAdd(addr, x);
  atomicAdd(addr + 1, y);
#endif
}

template <typename T_, int D_, int BS_, int BM_>
struct BsaBwdConfig {
  using T = T_;
  using TKV = T_;  // the names load_tile_affine reads
  static constexpr bool kFp8KV = false;
  static constexpr int D = D_, BS = BS_, BM = BM_;
  static constexpr int BN = BS;                           // keys per CTA: one key block
  static constexpr int kRowWarps = BN / 16;               // warps along the keys (16 key rows each)
  static constexpr int kMSplit = BN == 64 ? 2 : 1;        // warps along the query columns of S^T
  static constexpr int WARPS = kRowWarps * kMSplit;       // 8
  static constexpr int kThreads = WARPS * 32;
  static constexpr int kWM = BM / kMSplit;                // query columns of a warp's S^T tile
  static constexpr int kNT = kWM / 8;                     // n8 tiles of S^T per warp
  static constexpr int kDT = D / 8;                       // n8 tiles of dK / dV per warp
  static constexpr int kKS = D / 16;                      // k16 steps over the head dim
  static constexpr int kPitch = D + 8;                    // shared row pitch (elements) of K, V, Q, dO
  static constexpr int kDsPitch = BM + 8;                 // shared row pitch of dS^T
  static constexpr int kSubs = BS / BM;                   // sub-tiles per query block
  static constexpr int kDqRowGroups = BM / 16;            // dQ = dS K: warps along rows ...
  static constexpr int kDqColGroups = WARPS / kDqRowGroups;  // ... and along the head dim
  static constexpr int kDqCols = D / kDqColGroups;
  static constexpr int kDqChunk = kDqCols > 64 ? 64 : kDqCols;  // columns accumulated per pass
  static constexpr int kSmemBytes = bsa_bwd_smem_bytes(D, BN, BM);
  static_assert(sizeof(T) == 2, "bsa_bwd: 16-bit inputs");
  static_assert(D == 64 || D == 128, "bsa_bwd: D is 64 or 128");
  static_assert(BS == 64 || BS == 128, "bsa_bwd: the sparse block size is 64 or 128");
  static_assert(BS % BM == 0 && kWM % 16 == 0, "bsa_bwd: BM divides the block, a warp owns k16 query steps");
  static_assert(WARPS % kDqRowGroups == 0 && kDqCols % 16 == 0 && kDqCols % kDqChunk == 0,
                "bsa_bwd: the dQ tile splits evenly over the warps");
  // The end-of-CTA dK/dV reduction across the kMSplit warps reuses the Q/dO buffers.
  static_assert(kMSplit == 1 || kRowWarps * 32 * kDT * 8 * 4 <= 4 * BM * kPitch * 2,
                "bsa_bwd: the dK/dV reduction fits the Q/dO buffers");
};

template <typename T, int D, int BS, int BM>
__global__ void __launch_bounds__(BsaBwdConfig<T, D, BS, BM>::kThreads, 1)
    bsa_bwd_main(const __grid_constant__ BsaBwdParams p) {
  using Cfg = BsaBwdConfig<T, D, BS, BM>;
  using Mma = MmaOp<T>;
  constexpr int BN = Cfg::BN, kPitch = Cfg::kPitch, kDsPitch = Cfg::kDsPitch, kNT = Cfg::kNT, kDT = Cfg::kDT;
  constexpr int kSubs = Cfg::kSubs;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  T* sK = reinterpret_cast<T*>(smem_raw);
  T* sV = sK + BN * kPitch;
  T* sQbuf = sV + BN * kPitch;         // [2][BM][kPitch]
  T* sdObuf = sQbuf + 2 * BM * kPitch;  // [2][BM][kPitch]
  T* sdS = sdObuf + 2 * BM * kPitch;    // [BN][kDsPitch]: dS^T of the current sub-tile
  float* sLse = reinterpret_cast<float*>(sdS + BN * kDsPitch);  // [2][BM]
  float* sDelta = sLse + 2 * BM;                                // [2][BM]

  const int kb = blockIdx.x, r = blockIdx.y, b = blockIdx.z;
  const long long seg = (static_cast<long long>(b) * p.h_kv + r) * p.n_kv + kb;
  const int first = p.offsets[seg];
  const int n_items = (p.offsets[seg + 1] - first) * kSubs;
  const int key0 = kb * BS;
  const int kv_valid = min(BS, p.s_kv - key0);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int wn = warp % Cfg::kRowWarps, wm = warp / Cfg::kRowWarps;
  const int n_row0 = wn * 16;      // the warp's key rows in the block
  const int m_col0 = wm * Cfg::kWM;  // the warp's query columns in the sub-tile

  // Keys of this block visible to query head h: min(bsz, S_kv - key0), clamped to [0, BS].
  auto block_len = [&](int h) -> int {
    int sz = BS;
    if (p.bsz_rank == 1) sz = p.block_sizes[kb * p.bsz_s0];
    else if (p.bsz_rank == 2) sz = p.block_sizes[b * p.bsz_s0 + kb * p.bsz_s1];
    else if (p.bsz_rank == 3) sz = p.block_sizes[b * p.bsz_s0 + h * p.bsz_s1 + kb * p.bsz_s2];
    return max(0, min(sz, kv_valid));
  };
  auto item_of = [&](int t, int& h, int& m0) {
    const int e = t / kSubs, sub = t - e * kSubs;
    const int ent = p.list[first + e];
    const int hg = ent / p.n_q, qb = ent - hg * p.n_q;
    h = r * p.group + hg;
    m0 = qb * BS + sub * BM;
  };

  float dk[kDT][4], dv[kDT][4];
#pragma unroll
  for (int dt = 0; dt < kDT; ++dt)
#pragma unroll
    for (int e = 0; e < 4; ++e) dk[dt][e] = dv[dt][e] = 0.f;

  if (n_items > 0) {
    load_tile_affine<Cfg, BN>(sK, static_cast<const T*>(p.k) + b * p.k_sb + r * p.k_sh + static_cast<long long>(key0) * p.k_ss,
                              p.k_ss, kv_valid);
    load_tile_affine<Cfg, BN>(sV, static_cast<const T*>(p.v) + b * p.v_sb + r * p.v_sh + static_cast<long long>(key0) * p.v_ss,
                              p.v_ss, kv_valid);
    // Loads sub-tile t's Q, dO, lse2 and delta into buffer t % 2 and commits a group (an empty one past
    // the last item, so that group t always holds item t; group 0 also holds K and V).
    auto issue = [&](int t) {
      if (t < n_items) {
        int h, m0;
        item_of(t, h, m0);
        const int buf = t & 1;
        const int valid = p.s_q - m0;
        if (valid > 0) {  // a sub-tile wholly past S_q is skipped (its rows' addresses may lie past q's end)
          load_tile_affine<Cfg, BM>(sQbuf + buf * BM * kPitch,
                                    static_cast<const T*>(p.q) + b * p.q_sb + h * p.q_sh + static_cast<long long>(m0) * p.q_ss,
                                    p.q_ss, valid);
          load_tile_affine<Cfg, BM>(sdObuf + buf * BM * kPitch,
                                    static_cast<const T*>(p.dout) + b * p.do_sb + h * p.do_sh +
                                        static_cast<long long>(m0) * p.do_ss,
                                    p.do_ss, valid);
        }
        const long long row0 = (static_cast<long long>(b) * p.h_q + h) * p.s_pad + m0;
        for (int c = threadIdx.x; c < BM / 2; c += Cfg::kThreads) {
          const bool is_delta = c >= BM / 4;
          const int cc = is_delta ? c - BM / 4 : c;
          cp_async_16((is_delta ? sDelta : sLse) + buf * BM + cc * 4, (is_delta ? p.delta : p.lse2) + row0 + cc * 4, true);
        }
      }
      cp_async_commit();
    };
    issue(0);
    issue(1);

    for (int t = 0; t < n_items; ++t) {
      cp_async_wait<1>();
      __syncthreads();  // item t (and K, V) landed; every warp is done with item t - 1
      const int buf = t & 1;
      const T* sQ = sQbuf + buf * BM * kPitch;
      const T* sdO = sdObuf + buf * BM * kPitch;
      const float* lse2 = sLse + buf * BM;
      const float* delta = sDelta + buf * BM;
      int h, m0;
      item_of(t, h, m0);
      const bool active = m0 < p.s_q;  // uniform: a sub-tile wholly past S_q contributes nothing
      if (active) {
        const int len = block_len(h);
        // S^T = K Q^T and dP^T = V dO^T for the warp's 16 keys x kWM queries.
        float st[kNT][4], dpt[kNT][4];
#pragma unroll
        for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
          for (int e = 0; e < 4; ++e) st[nt][e] = dpt[nt][e] = 0.f;
#pragma unroll
        for (int ks = 0; ks < Cfg::kKS; ++ks) {
          unsigned ak[4], av[4];
          ldmatrix_x4(ak, sK + (n_row0 + lane % 16) * kPitch + ks * 16 + (lane / 16) * 8);
          ldmatrix_x4(av, sV + (n_row0 + lane % 16) * kPitch + ks * 16 + (lane / 16) * 8);
#pragma unroll
          for (int np = 0; np < kNT / 2; ++np) {
            const int off = (m_col0 + np * 16 + (lane % 8) + (lane / 16) * 8) * kPitch + ks * 16 + ((lane / 8) % 2) * 8;
            unsigned bq[4], bo[4];
            ldmatrix_x4(bq, sQ + off);
            ldmatrix_x4(bo, sdO + off);
            Mma::run(st[2 * np], ak, bq[0], bq[1]);
            Mma::run(st[2 * np + 1], ak, bq[2], bq[3]);
            Mma::run(dpt[2 * np], av, bo[0], bo[1]);
            Mma::run(dpt[2 * np + 1], av, bo[2], bo[3]);
          }
        }
        // P^T = exp2(S^T scale log2(e) - lse2) (0 for hidden keys and lse = -inf rows); dS^T = P^T (dP^T - delta).
        const bool mask = len < BN;
#pragma unroll
        for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int col = m_col0 + nt * 8 + 2 * (lane % 4) + (e & 1);
            float pv = fast_exp2(fmaf(st[nt][e], p.scale_log2, -lse2[col]));
            if (mask && n_row0 + lane / 4 + (e >> 1) * 8 >= len) pv = 0.f;
            st[nt][e] = pv;
            dpt[nt][e] = pv * (dpt[nt][e] - delta[col]);
          }
        // dV += P^T dO, dK += dS^T Q (k = the warp's query columns).
#pragma unroll
        for (int kk = 0; kk < kNT / 2; ++kk) {
          unsigned ap[4], as[4];
          ap[0] = Mma::pack(st[2 * kk][0], st[2 * kk][1]);
          ap[1] = Mma::pack(st[2 * kk][2], st[2 * kk][3]);
          ap[2] = Mma::pack(st[2 * kk + 1][0], st[2 * kk + 1][1]);
          ap[3] = Mma::pack(st[2 * kk + 1][2], st[2 * kk + 1][3]);
          as[0] = Mma::pack(dpt[2 * kk][0], dpt[2 * kk][1]);
          as[1] = Mma::pack(dpt[2 * kk][2], dpt[2 * kk][3]);
          as[2] = Mma::pack(dpt[2 * kk + 1][0], dpt[2 * kk + 1][1]);
          as[3] = Mma::pack(dpt[2 * kk + 1][2], dpt[2 * kk + 1][3]);
          // dS^T to shared memory for dQ (the same 16-bit values dK uses).
          T* ds_row = sdS + (n_row0 + lane / 4) * kDsPitch + m_col0 + kk * 16 + 2 * (lane % 4);
          *reinterpret_cast<unsigned*>(ds_row) = as[0];
          *reinterpret_cast<unsigned*>(ds_row + 8 * kDsPitch) = as[1];
          *reinterpret_cast<unsigned*>(ds_row + 8) = as[2];
          *reinterpret_cast<unsigned*>(ds_row + 8 * kDsPitch + 8) = as[3];
#pragma unroll
          for (int dp = 0; dp < kDT / 2; ++dp) {
            const int off = (m_col0 + kk * 16 + (lane % 8) + ((lane / 8) % 2) * 8) * kPitch + dp * 16 + (lane / 16) * 8;
            unsigned bo[4], bq[4];
            ldmatrix_x4_trans(bo, sdO + off);
            ldmatrix_x4_trans(bq, sQ + off);
            Mma::run(dv[2 * dp], ap, bo[0], bo[1]);
            Mma::run(dv[2 * dp + 1], ap, bo[2], bo[3]);
            Mma::run(dk[2 * dp], as, bq[0], bq[1]);
            Mma::run(dk[2 * dp + 1], as, bq[2], bq[3]);
          }
        }
      }
      __syncthreads();  // dS^T complete; buffer t % 2 free
      issue(t + 2);
      if (active) {
        // dQ_acc[m0 + m, :] += dS[m, :] K over the block's keys.
        const int qrow0 = (warp % Cfg::kDqRowGroups) * 16;
        const int dcol0 = (warp / Cfg::kDqRowGroups) * Cfg::kDqCols;
        float* acc = p.dq_acc + ((static_cast<long long>(b) * p.h_q + h) * p.s_pad + m0 + qrow0 + lane / 4) * D;
#pragma unroll
        for (int c0 = 0; c0 < Cfg::kDqCols; c0 += Cfg::kDqChunk) {
          float dqf[Cfg::kDqChunk / 8][4];
#pragma unroll
          for (int nt = 0; nt < Cfg::kDqChunk / 8; ++nt)
#pragma unroll
            for (int e = 0; e < 4; ++e) dqf[nt][e] = 0.f;
#pragma unroll
          for (int ks = 0; ks < BN / 16; ++ks) {
            unsigned a[4];
            ldmatrix_x4_trans(a, sdS + (ks * 16 + (lane % 8) + (lane / 16) * 8) * kDsPitch + qrow0 + ((lane / 8) % 2) * 8);
#pragma unroll
            for (int dp = 0; dp < Cfg::kDqChunk / 16; ++dp) {
              unsigned bk[4];
              ldmatrix_x4_trans(bk, sK + (ks * 16 + (lane % 8) + ((lane / 8) % 2) * 8) * kPitch + dcol0 + c0 + dp * 16 +
                                        (lane / 16) * 8);
              Mma::run(dqf[2 * dp], a, bk[0], bk[1]);
              Mma::run(dqf[2 * dp + 1], a, bk[2], bk[3]);
            }
          }
#pragma unroll
          for (int nt = 0; nt < Cfg::kDqChunk / 8; ++nt) {
            const int col = dcol0 + c0 + nt * 8 + 2 * (lane % 4);
            red_add_f32x2(acc + col, dqf[nt][0], dqf[nt][1]);
            red_add_f32x2(acc + 8 * D + col, dqf[nt][2], dqf[nt][3]);
          }
        }
      }
    }
    cp_async_wait<0>();  // no cp.async may be pending past here
    if constexpr (Cfg::kMSplit > 1) {
      // The two warps of a key row group hold partial sums over halves of the query columns.
      __syncthreads();
      float* red = reinterpret_cast<float*>(sQbuf) + wn * (kDT * 8 * 32);
      if (wm == 1) {
#pragma unroll
        for (int dt = 0; dt < kDT; ++dt)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            red[(dt * 8 + e) * 32 + lane] = dk[dt][e];
            red[(dt * 8 + 4 + e) * 32 + lane] = dv[dt][e];
          }
      }
      __syncthreads();
      if (wm == 0) {
#pragma unroll
        for (int dt = 0; dt < kDT; ++dt)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            dk[dt][e] += red[(dt * 8 + e) * 32 + lane];
            dv[dt][e] += red[(dt * 8 + 4 + e) * 32 + lane];
          }
      }
    }
  }

  // dK = scale * sum dS^T q, dV = sum P^T do: every key row < S_kv of the block (zeros when unselected).
  if (wm == 0) {
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
      const int j = key0 + n_row0 + lane / 4 + hf * 8;
      if (j >= p.s_kv) continue;
      T* dk_row = static_cast<T*>(p.dk) + b * p.dk_sb + r * p.dk_sh + static_cast<long long>(j) * p.dk_ss + 2 * (lane % 4);
      T* dv_row = static_cast<T*>(p.dv) + b * p.dv_sb + r * p.dv_sh + static_cast<long long>(j) * p.dv_ss + 2 * (lane % 4);
#pragma unroll
      for (int dt = 0; dt < kDT; ++dt) {
        *reinterpret_cast<unsigned*>(dk_row + dt * 8) = Mma::pack(dk[dt][2 * hf] * p.scale, dk[dt][2 * hf + 1] * p.scale);
        *reinterpret_cast<unsigned*>(dv_row + dt * 8) = Mma::pack(dv[dt][2 * hf], dv[dt][2 * hf + 1]);
      }
    }
  }
}

}  // namespace attnjit::kernels
