// bsa_fwd, hopper backend (sm_90a): block-sparse attention forward on wgmma with TMA loads, for
// sparse block sizes 64 and 128 and D = D_v in {64, 128}.
//
// One CTA computes one query block (BS rows) of one query head (the metadata is per query head). The
// producer warpgroup walks the row's active key blocks (BsaTileStream of bsa_fwd.cuh: one BS-key tile
// per block of nonzero length, in list order) and loads each with TMA into the two-stage ring of
// hopper/attention_core.cuh, recording the tile's valid key count; after the last it records an empty
// tile. BS / 64 consumer warpgroups (64 rows each) run the shared mainloop, masking keys past a short
// block's valid count. Block size 64 runs two CTAs per SM (one consumer warpgroup each, 232 registers). Empty rows (no tile) write O = 0 and LSE = -inf. No kv_splits: one CTA takes the
// whole row.
#pragma once
#include "bsa/bsa_fwd.cuh"
#include "hopper/attention_core.cuh"
#include "bsa/bsa_fwd_hopper_params.cuh"

namespace attnjit::kernels {

template <typename T, int D, int BS, bool HAS_NUMS, int BSZ_RANK>
__global__ void __launch_bounds__((BS / 64 + 1) * 128, BS == 64 ? 2 : 1)
    bsa_fwd_hopper(const __grid_constant__ BsaFwdHopperParams hp) {
  static_assert(sizeof(T) == 2, "bsa_fwd_hopper: 16-bit operands");
  static_assert(BS == 64 || BS == 128, "bsa_fwd_hopper: block size 64 or 128");
  constexpr int BM = BS, BN = BS, NWG = BS / 64, kDT = D / 8;
  using Mma = MmaOp<T>;
  const BsaFwdParams& p = hp.p;
  extern __shared__ unsigned char smem_raw[];
  static_assert(HopperRing<D, BN, NWG>::kSmemBytes == bsa_fwd_hopper_smem_bytes(D, BS) &&
                    (BS / 64 + 1) * 128 == bsa_fwd_hopper_threads(BS),
                "bsa_fwd_hopper: the host's launch geometry (bsa_fwd_hopper_params.cuh)");
  const HopperRing<D, BN, NWG> ring(smem_raw);

  const int m = blockIdx.x, h = blockIdx.y, b = blockIdx.z;
  const int r = h / p.group;
  const int i0 = m * BM;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (threadIdx.x == 0) ring.init();
  __syncthreads();

  if (warp >= 4 * NWG) {
    setmaxnreg_dec<24>();
    if (warp == 4 * NWG && lane == 0) {
      BsaTileStream<BM, BN, BSZ_RANK> ts;
      ts.open(p, b, h, m, 0, bsa_row_count<HAS_NUMS>(p, b, h, m));
      const TmaMap* kmap = reinterpret_cast<const TmaMap*>(hp.k_map);
      const TmaMap* vmap = reinterpret_cast<const TmaMap*>(hp.v_map);
      tma_prefetch_map(kmap);
      tma_prefetch_map(vmap);
      for (int t = 0;; ++t) {
        int n0, valid;
        ts.next(n0, valid);
        if (valid == 0) {
          ring.produce_end(t);
          break;
        }
        ring.produce(t, kmap, vmap, r, n0, b, n0, valid);
      }
    }
    return;
  }

  // Two CTAs of 256 threads share the register file at block size 64 (128 each at launch).
  setmaxnreg_inc<NWG == 2 ? 240 : 232>();
  const int wg = warp / 4, wq = warp % 4;
  const T* qb = static_cast<const T*>(p.q) + b * p.q_sb + h * p.q_sh;
  ring.template load_q<T>(wg, [&](int lr) -> const T* {
    const int i = i0 + wg * 64 + lr;
    return i < p.s_q ? qb + static_cast<long long>(i) * p.q_ss : nullptr;
  });

  const float score_scale = p.scale_log2;
  HopperSoftmaxState<D> st;
  st.init();
  hopper_mainloop<T, D, BN, false, NWG, (NWG == 2 && D <= 128)>(
      ring, wg, -1, [](int, int valid) { return valid < BN; }, [](int, int valid, int, int jl) { return jl < valid; },
      score_scale, 0.f, 0.f, st);

  constexpr float kLn2 = 0.69314718055994530942f;
  T* ob = static_cast<T*>(p.o) + b * p.o_sb + h * p.o_sh;
#pragma unroll
  for (int hf = 0; hf < 2; ++hf) {
    float l = st.l[hf];
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    const float m2 = st.m[hf] * score_scale;
    const int i = i0 + wg * 64 + wq * 16 + lane / 4 + hf * 8;
    if (i >= p.s_q) continue;
    // An empty row (no tile) has l = 0: O = 0, LSE = -inf.
    const bool nonempty = l > 0.f;
    const float inv = nonempty ? 1.f / l : 0.f;
    T* orow = ob + static_cast<long long>(i) * p.o_ss + 2 * (lane % 4);
#pragma unroll
    for (int dt = 0; dt < kDT; ++dt)
      *reinterpret_cast<unsigned*>(orow + dt * 8) = Mma::pack(st.o[dt * 4 + 2 * hf] * inv, st.o[dt * 4 + 2 * hf + 1] * inv);
    if (p.lse && lane % 4 == 0)
      p.lse[b * p.lse_sb + h * p.lse_sh + static_cast<long long>(i) * p.lse_ss] = nonempty ? (m2 + log2f(l)) * kLn2 : -kInf();
  }
}

}  // namespace attnjit::kernels
