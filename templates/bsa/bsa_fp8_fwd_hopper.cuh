// bsa_fp8_fwd, hopper backend (sm_90a): the attention over the pre-pass's quantised operands (the pre-pass
// kernels of bsa/bsa_fp8_fwd.cuh, shared with the portable backend; V comes as fp16 values) with
// S = Q8 K8^T on FP8 wgmma (m64n64k32.e4m3, both operands K-major in shared memory) and O += P V on fp16
// wgmma (m64n128k16, P from registers in fp16, V N-major).
//
// Why P V is not FP8: rounding P to e4m3 (3 mantissa bits) adds about 3e-2 of relative error to O on
// random inputs (measured at the issue shape: 3.9e-2 against the bf16 forward for N(0, 0.5^2) inputs, 2.8e-2
// with fp16 P), and this kernel is bound by instruction issue (the softmax), not by the tensor cores.
//
// One CTA computes one 64-row query block of one head: one consumer warpgroup and one producer warp (no
// setmaxnreg: ptxas allocates the whole kernel within the launch bound's registers). Two schedules
// (kBsa8HopperOverlap): two CTAs per SM, each overlapping a tile's softmax with the previous tile's P V
// (four-stage ring), or three CTAs per SM (128 registers: too few to keep S, P and O of two tiles in
// flight) running each tile serially (two-stage ring). The producer's thread 0 loads Q8 once and walks the row's active key blocks
// (BsaTileStream: one 64-key tile per block of nonzero length), loading K8 [64 keys][128 B] and V16
// [2 x 64 channels][64 keys][128 B] (128-byte swizzle) by TMA into the ring, and writes each tile's
// record: its valid key count and the four s_k of its 16-key groups.
//
// NUMERICS (SPEC.md §2.6, the same operands as the portable kernel): z = (q8 . k8) * s_k(group), logits in
// the log2 domain z * (s_q * scale * log2 e); the online softmax in the log2 domain with lazy rescaling as in
// hopper_softmax (a row's reference maximum moves only when a tile exceeds it by more than 2^8, so P <= 256
// in fp16); O = (sum_j P_j v8_j) * s_v(d) / l. Empty rows write 0.
#pragma once
#include "bsa/bsa_fp8_fwd.cuh"
#include "hopper/attention_core.cuh"  // hold_regs
#include "bsa/bsa_fp8_fwd_hopper_params.cuh"
#include "hopper/sm90.cuh"

namespace attnjit::kernels {

// The CTA's shared memory: Q8 [64 rows][128 B], then kStages K8 tiles (8 KB) and kStages V16 tiles (16 KB),
// the mbarriers and the tile records.
struct Bsa8HopperSmem {
  static constexpr int kStages = kBsa8HopperStages;
  static constexpr int kTile = 64 * 128;
  static constexpr int kVTile = 2 * kTile;
  unsigned char* q;
  unsigned char* k;
  unsigned char* v;
  int* rec;  // [stage][8]: n0, valid, s_k of the tile's four 16-key groups (float bits)
  unsigned bar0;
  __device__ __forceinline__ explicit Bsa8HopperSmem(unsigned char* raw) {
    q = align_smem_1024(raw);
    k = q + kTile;
    v = k + kStages * kTile;
    bar0 = smem_addr(v + kStages * kVTile);
    rec = reinterpret_cast<int*>(v + kStages * kVTile + 256);
  }
  __device__ __forceinline__ unsigned full_k(int s) const { return bar0 + 8u * s; }
  __device__ __forceinline__ unsigned full_v(int s) const { return bar0 + 8u * (kStages + s); }
  __device__ __forceinline__ unsigned empty_k(int s) const { return bar0 + 8u * (2 * kStages + s); }
  __device__ __forceinline__ unsigned empty_v(int s) const { return bar0 + 8u * (3 * kStages + s); }
  __device__ __forceinline__ unsigned q_full() const { return bar0 + 8u * (4 * kStages); }
};
static_assert(64 * 128 + kBsa8HopperStages * 3 * 64 * 128 + 256 + kBsa8HopperStages * 32 + 1023 <= kBsa8HopperSmemBytes,
              "bsa8 hopper: shared memory budget");

template <bool HAS_NUMS, int BSZ_RANK>
__global__ void __launch_bounds__(kBsa8HopperThreads, kBsa8HopperCtasPerSm)
    bsa8_attention_hopper(const __grid_constant__ BsaFp8HopperParams hp) {
  constexpr int BM = 64, BN = 64, D = 128, kS = kBsa8HopperStages, kTile = Bsa8HopperSmem::kTile;
  constexpr int kVTile = Bsa8HopperSmem::kVTile;
  using Mma = MmaOp<__half>;
  const BsaFp8Params& p = hp.p;
  extern __shared__ unsigned char smem_raw[];
  const Bsa8HopperSmem sm(smem_raw);

  const int m = blockIdx.x, h = blockIdx.y, b = blockIdx.z;
  const int bh = b * p.heads + h;
  const int i0 = m * BM;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (threadIdx.x == 0) {
    for (int s = 0; s < kS; ++s) {
      mbar_init(sm.full_k(s), 1);
      mbar_init(sm.full_v(s), 1);
      mbar_init(sm.empty_k(s), 4);  // one arrival per consumer warp
      mbar_init(sm.empty_v(s), 4);
    }
    mbar_init(sm.q_full(), 1);
    mbar_init_fence();
  }
  __syncthreads();

  if (warp == 4) {
    if (lane == 0) {
      const TmaMap* qmap = reinterpret_cast<const TmaMap*>(hp.q_map);
      const TmaMap* kmap = reinterpret_cast<const TmaMap*>(hp.k_map);
      const TmaMap* vmap = reinterpret_cast<const TmaMap*>(hp.v_map);
      tma_prefetch_map(kmap);
      tma_prefetch_map(vmap);
      mbar_arrive_expect_tx(sm.q_full(), kTile);
      tma_load_3d(smem_addr(sm.q), qmap, 0, i0, bh, sm.q_full());  // rows past S_q are zero-filled
      BsaTileStream<BM, BN, BSZ_RANK> ts;
      ts.open(p, b, h, m, 0, bsa_row_count<HAS_NUMS>(p, b, h, m));
      const float* skb = p.sk + static_cast<long long>(bh) * p.n_groups;
      for (int t = 0;; ++t) {
        int n0, valid;
        ts.next(n0, valid);
        const int s = t % kS;
        const unsigned ph = (t / kS) & 1;
        mbar_wait(sm.empty_k(s), ph ^ 1);
        int* r = sm.rec + 8 * s;
        r[1] = valid;
        if (valid == 0) {  // the end of the row's stream
          mbar_arrive(sm.full_k(s));
          break;
        }
        r[0] = n0;
        // A group past S_kv (a short final block) takes the last group's scale: finite and > 0.
#pragma unroll
        for (int c = 0; c < 4; ++c) r[2 + c] = __float_as_int(__ldg(skb + min(n0 / 16 + c, p.n_groups - 1)));
        mbar_arrive_expect_tx(sm.full_k(s), kTile);
        tma_load_3d(smem_addr(sm.k + s * kTile), kmap, 0, n0, bh, sm.full_k(s));
        mbar_wait(sm.empty_v(s), ph ^ 1);
        mbar_arrive_expect_tx(sm.full_v(s), kVTile);
#pragma unroll
        for (int c = 0; c < 2; ++c) tma_load_3d(smem_addr(sm.v + s * kVTile + c * kTile), vmap, 128 * c, n0, bh, sm.full_v(s));
      }
    }
    return;
  }

  const int t4 = lane % 4;
  float rq[2];  // s_q * scale * log2(e) of the thread's two rows (rows past S_q: any finite value)
#pragma unroll
  for (int hf = 0; hf < 2; ++hf) {
    const int i = i0 + warp * 16 + lane / 4 + hf * 8;
    rq[hf] = (i < p.s_q ? __ldg(p.sq + static_cast<long long>(bh) * p.s_q + i) : 1.f) * p.scale_log2;
  }
  float o[D / 2];
#pragma unroll
  for (int i = 0; i < D / 2; ++i) o[i] = 0.f;
  float mrow[2] = {-kInf(), -kInf()}, lrow[2] = {0.f, 0.f};
  mbar_wait(sm.q_full(), 0);

  float sc[BN / 2];
  unsigned pa[BN / 16][4];
  float alpha[2];
  // Waits for tile t's K and returns its valid key count (0: the end of the stream).
  auto record = [&](int t) {
    const int s = t % kS;
    mbar_wait(sm.full_k(s), (t / kS) & 1);
    return sm.rec[8 * s + 1];
  };
  auto issue_qk = [&](int t) {
    const unsigned qa = smem_addr(sm.q), ka = smem_addr(sm.k + (t % kS) * kTile);
    wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < D / 32; ++ks)
      WgmmaE4m3<BN>::ss(sc, wgmma_desc_at(qa + ks * 32, 16, 1024), wgmma_desc_at(ka + ks * 32, 16, 1024), ks > 0 ? 1 : 0);
    wgmma_commit();
  };
  // V16 N-major: 64-channel blocks BN * 128 bytes apart, 8-key groups 1024 bytes apart, +2048 per k16 step.
  auto issue_pv = [&](int t) {
    const int s = t % kS;
    mbar_wait(sm.full_v(s), (t / kS) & 1);
    const unsigned va = smem_addr(sm.v + s * kVTile);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < BN / 16; ++kk) Wgmma<__half, D>::rs<1>(o, pa[kk], wgmma_desc_at(va + kk * 2048, BN * 128, 1024));
    wgmma_commit();
  };
  // Softmax of one tile's scores (complete in sc): masks keys past `valid`, moves the running maxima lazily
  // (returns whether O must be multiplied by alpha; warp-uniform), adds the row sums and leaves P in sc.
  // The tile's s_k are read from its record (the K stage is released only after the softmax).
  auto softmax = [&](int t, int valid) -> bool {
    const float* sk = reinterpret_cast<const float*>(sm.rec + 8 * (t % kS) + 2);
    if (valid < BN) {
#pragma unroll
      for (int nt = 0; nt < BN / 8; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e)
          if (nt * 8 + 2 * t4 + (e & 1) >= valid) sc[nt * 4 + e] = -kInf();
    }
    bool moved = false;
    float tile_max[2];
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
      float mx = -kInf();
#pragma unroll
      for (int g = 0; g < 4; ++g) {
        const float gm = fmaxf(fmaxf(sc[8 * g + 2 * hf], sc[8 * g + 2 * hf + 1]), fmaxf(sc[8 * g + 4 + 2 * hf], sc[8 * g + 5 + 2 * hf]));
        mx = fmaxf(mx, gm * sk[g]);  // s_k > 0: -inf stays -inf
      }
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      tile_max[hf] = mx;
      moved = moved || mx * rq[hf] > mrow[hf] * rq[hf] + 8.f;
    }
    moved = __any_sync(0xffffffffu, moved);
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
      alpha[hf] = 1.f;
      if (moved) {
        const float m_new = fmaxf(mrow[hf], tile_max[hf]);
        alpha[hf] = m_new == -kInf() ? 1.f : fast_exp2((mrow[hf] - m_new) * rq[hf]);
        mrow[hf] = m_new;
        lrow[hf] *= alpha[hf];
      }
      const float off = mrow[hf] == -kInf() ? 0.f : mrow[hf] * rq[hf];
      float rs = 0.f;
#pragma unroll
      for (int g = 0; g < 4; ++g) {
        const float c = rq[hf] * sk[g];
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const int idx = 8 * g + (j >> 1) * 4 + 2 * hf + (j & 1);
          const float pv = fast_exp2(fmaf(sc[idx], c, -off));
          sc[idx] = pv;
          rs += pv;
        }
      }
      lrow[hf] += rs;
    }
    return moved;
  };
  // P (sc) to fp16 A fragments, the m16n8k16 A layout per warp: for keys 16 kk .., registers 0 / 1 are rows
  // g / g + 8 at keys 2 t, registers 2 / 3 the same at keys 2 t + 8.
  auto pack_p = [&] {
#pragma unroll
    for (int nt = 0; nt < BN / 8; ++nt)
#pragma unroll
      for (int hf = 0; hf < 2; ++hf) pa[nt / 2][(nt % 2) * 2 + hf] = Mma::pack(sc[nt * 4 + 2 * hf], sc[nt * 4 + 2 * hf + 1]);
  };
  auto rescale_o = [&](bool moved) {
    if (moved) {
#pragma unroll
      for (int dt = 0; dt < D / 8; ++dt) {
        o[dt * 4] *= alpha[0];
        o[dt * 4 + 1] *= alpha[0];
        o[dt * 4 + 2] *= alpha[1];
        o[dt * 4 + 3] *= alpha[1];
      }
    }
  };

  int valid = record(0);
  if constexpr (!kBsa8HopperOverlap) {
    // Serial: S, softmax and P V of one tile at a time (the other CTAs of the SM fill the gaps).
    for (int t = 0; valid != 0; valid = record(++t)) {
      issue_qk(t);
      wgmma_wait<0>();
      fence_regs(sc);
      const bool moved = softmax(t, valid);
      __syncwarp();  // every lane has read the tile's record
      if (lane == 0) mbar_arrive(sm.empty_k(t % kS));
      rescale_o(moved);
      pack_p();
      issue_pv(t);
      wgmma_wait<0>();
      fence_regs(o);
      hold_regs(pa);
      if (lane == 0) mbar_arrive(sm.empty_v(t % kS));
    }
  } else if (valid != 0) {
    // Overlapped: tile t + 1's S = Q K^T is issued before tile t's P V, so that its softmax runs while the
    // tensor cores compute P V (the structure of hopper_mainloop: unconditional issues, the last P V peeled
    // off). One set of P registers: tile t + 1's probabilities stay fp32 in sc until tile t's P V has
    // completed, then are packed.
    issue_qk(0);
    wgmma_wait<0>();
    fence_regs(sc);
    softmax(0, valid);  // O is zero: no rescale
    __syncwarp();  // every lane has read the tile's record
    if (lane == 0) mbar_arrive(sm.empty_k(0));
    pack_p();
    int t = 0;
    valid = record(1);
    while (valid != 0) {
      issue_qk(t + 1);
      issue_pv(t);
      wgmma_wait<1>();
      fence_regs(sc);
      const bool moved = softmax(t + 1, valid);
      __syncwarp();
      if (lane == 0) mbar_arrive(sm.empty_k((t + 1) % kS));
      wgmma_wait<0>();
      fence_regs(o);
      hold_regs(pa);
      if (lane == 0) mbar_arrive(sm.empty_v(t % kS));
      rescale_o(moved);
      pack_p();
      ++t;
      valid = record(t + 1);
    }
    issue_pv(t);
    wgmma_wait<0>();
    fence_regs(o);
    hold_regs(pa);
    if (lane == 0) mbar_arrive(sm.empty_v(t % kS));
  }

  // O = acc * s_v(d) / l (empty rows: l = 0, O = 0), bf16.
  const float* svh = p.sv + h * D + 2 * t4;
#pragma unroll
  for (int hf = 0; hf < 2; ++hf) {
    float l = lrow[hf];
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    const int i = i0 + warp * 16 + lane / 4 + hf * 8;
    if (i >= p.s_q) continue;
    const float inv = l > 0.f ? 1.f / l : 0.f;
    __nv_bfloat16* orow =
        static_cast<__nv_bfloat16*>(p.o) + b * p.o_sb + h * p.o_sh + static_cast<long long>(i) * p.o_ss + 2 * t4;
#pragma unroll
    for (int dt = 0; dt < D / 8; ++dt) {
      const float2 sv = __ldg(reinterpret_cast<const float2*>(svh + dt * 8));
      *reinterpret_cast<unsigned*>(orow + dt * 8) =
          MmaOp<__nv_bfloat16>::pack(o[dt * 4 + 2 * hf] * inv * sv.x, o[dt * 4 + 2 * hf + 1] * inv * sv.y);
    }
  }
}

}  // namespace attnjit::kernels
