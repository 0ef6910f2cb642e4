// sm_90a building blocks of the hopper backend: mbarriers, TMA tile loads, wgmma shared-memory matrix
// descriptors for the 128-byte-swizzled layouts, and the warpgroup fences. Everything here is PTX that
// only sm_90a accepts; the portable kernels never include it.
#pragma once
#include "common/mma.cuh"
#include "hopper/wgmma_ops.cuh"

namespace attnjit::kernels {

// --- shared memory ---
// raw advanced to the next 1024-byte boundary of the shared window (128-byte-swizzled TMA boxes and wgmma
// operands need it). Pointer arithmetic on the shared array keeps the compiler's knowledge that pointers
// derived from the result address shared memory, so their accesses compile to LDS / STS / ATOMS; rounding
// the address through an integer loses it, and every access becomes a generic LD / ST / ATOM (slower,
// and on the long-scoreboard path).
__device__ __forceinline__ unsigned char* align_smem_1024(unsigned char* raw) {
  return raw + ((1024u - (smem_addr(raw) & 1023u)) & 1023u);
}

// --- mbarriers (shared::cta) ---
__device__ __forceinline__ void mbar_init(unsigned bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
// Makes barrier initialisation visible to the async proxy (TMA completes transactions there).
__device__ __forceinline__ void mbar_init_fence() {
  asm volatile("fence.mbarrier_init.release.cluster;\nfence.proxy.async.shared::cta;\n" ::: "memory");
}
__device__ __forceinline__ void mbar_arrive(unsigned bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
// One arrival that also announces `bytes` of TMA transactions for the current phase.
__device__ __forceinline__ void mbar_arrive_expect_tx(unsigned bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
// Waits until the phase of parity `parity` has completed (a fresh barrier counts parity 1 as completed).
__device__ __forceinline__ void mbar_wait(unsigned bar, unsigned parity) {
  unsigned done;
  do {
    asm volatile(
        "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
  } while (!done);
}

// Whether the phase of parity `parity` has completed, without waiting.
__device__ __forceinline__ bool mbar_test(unsigned bar, unsigned parity) {
  unsigned done;
  asm volatile(
      "{\n.reg .pred p;\nmbarrier.test_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
      : "=r"(done)
      : "r"(bar), "r"(parity)
      : "memory");
  return done != 0;
}

// --- TMA ---
// A CUtensorMap as the kernel sees it (128 bytes, 64-byte aligned, filled by cuTensorMapEncodeTiled).
struct alignas(64) TmaMap {
  unsigned long long words[16];
};
// Loads the box at coordinates (c0 innermost .. c3) of the 4-d tensor map into shared memory at `dst`,
// completing its bytes on barrier `bar`.
__device__ __forceinline__ void tma_load_4d(unsigned dst, const TmaMap* map, int c0, int c1, int c2, int c3,
                                            unsigned bar) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, %5}], "
      "[%6];\n" ::"r"(dst),
      "l"(reinterpret_cast<unsigned long long>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(bar)
      : "memory");
}
// The same for a 3-d tensor map (c0 innermost .. c2).
__device__ __forceinline__ void tma_load_3d(unsigned dst, const TmaMap* map, int c0, int c1, int c2, unsigned bar) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], [%5];\n" ::"r"(
          dst),
      "l"(reinterpret_cast<unsigned long long>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(bar)
      : "memory");
}
// Adds (fp32 add, elementwise) the box at shared-memory `src` into the 2-d tensor map's box at
// coordinates (c0 innermost, c1); completes in the issuing thread's bulk group.
__device__ __forceinline__ void tma_reduce_add_2d(const TmaMap* map, int c0, int c1, unsigned src) {
  asm volatile("cp.reduce.async.bulk.tensor.2d.global.shared::cta.add.tile.bulk_group [%0, {%1, %2}], [%3];\n" ::"l"(
                   reinterpret_cast<unsigned long long>(map)),
               "r"(c0), "r"(c1), "r"(src)
               : "memory");
}
__device__ __forceinline__ void bulk_commit() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }
// Waits until this thread's bulk groups but the newest N have finished reading their shared memory.
template <int N>
__device__ __forceinline__ void bulk_wait_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(N) : "memory");
}
// Waits until this thread's bulk groups but the newest N have completed (their writes performed).
template <int N>
__device__ __forceinline__ void bulk_wait() {
  asm volatile("cp.async.bulk.wait_group %0;\n" ::"n"(N) : "memory");
}
__device__ __forceinline__ void tma_prefetch_map(const TmaMap* map) {
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<unsigned long long>(map)) : "memory");
}

// Orders this thread's generic-proxy shared-memory writes (st.shared, cp.async) before later async-proxy
// reads (wgmma operands, TMA).
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }
// Orders this thread's generic-proxy global accesses with its async-proxy ones (TMA reduce-adds).
__device__ __forceinline__ void fence_proxy_async_global() { asm volatile("fence.proxy.async.global;\n" ::: "memory"); }

// Warpgroup-wide register budget changes (every thread of the warpgroup executes them).
template <int N>
__device__ __forceinline__ void setmaxnreg_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(N));
}
template <int N>
__device__ __forceinline__ void setmaxnreg_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(N));
}

// Named barrier `id` (1..15) over `threads` threads.
__device__ __forceinline__ void named_barrier(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
// Arrives on named barrier `id` without waiting (the waiters' bar.sync counts these `threads` too).
__device__ __forceinline__ void named_barrier_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

// --- wgmma ---
// Shared-memory matrix descriptor of a 128-byte-swizzled operand (the layout TMA writes with
// CU_TENSOR_MAP_SWIZZLE_128B into a 1024-byte-aligned buffer: 128-byte rows, 16-byte chunk c of row r
// stored at chunk c ^ (r % 8)). K-major operands: sbo = 1024 (8-row groups), lbo unused. N-major
// operands: lbo = bytes between 64-element column blocks, sbo = 1024 (8-row groups along K).
// The address is made opaque to the compiler so that the descriptors of a loop body are rebuilt from it
// (a few integer adds) instead of being hoisted out of the loop and held in registers. `swizzle` is the
// descriptor's layout type: 1 = 128-byte swizzle (the default), 2 = 64-byte swizzle (64-byte rows, 16-byte
// chunks XOR-permuted within 512-byte atoms of 8 rows: what TMA writes with CU_TENSOR_MAP_SWIZZLE_64B into a
// 512-byte-aligned buffer; K-major sbo = 512).
__device__ __forceinline__ unsigned long long wgmma_desc_at(unsigned addr, unsigned lbo_bytes, unsigned sbo_bytes,
                                                            unsigned swizzle = 1) {
  asm volatile("" : "+r"(addr));
  const unsigned lo = ((addr & 0x3FFFFu) >> 4) | (((lbo_bytes >> 4) & 0x3FFFu) << 16);
  const unsigned hi = ((sbo_bytes >> 4) & 0x3FFFu) | (swizzle << 30);
  return (static_cast<unsigned long long>(hi) << 32) | lo;
}
// `desc` moved `bytes` (a multiple of 16) further into its operand. Only the start-address field (bits
// 0-13 of the low word, address / 16) changes, and it stays below 2^14 for any shared-memory address, so the
// high word is shared and one 32-bit add makes each k-step's descriptor from the operand's base descriptor
// (wgmma_desc_at per k-step rebuilds the fields from the address: three or four uniform instructions).
__device__ __forceinline__ unsigned long long wgmma_desc_plus(unsigned long long desc, unsigned bytes) {
  return (desc & 0xFFFFFFFF00000000ull) | (static_cast<unsigned>(desc) + (bytes >> 4));
}
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// Keeps the compiler from moving reads or writes of accumulator registers across a wgmma wait.
template <int N>
__device__ __forceinline__ void fence_regs(float (&r)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(r[i])::"memory");
}

// Byte offset of 16-byte chunk `c` (0..7) of row `row` in a 128-byte-swizzled block of 128-byte rows.
__device__ __forceinline__ unsigned swizzle128(int row, int c) { return row * 128 + ((c ^ (row & 7)) << 4); }

}  // namespace attnjit::kernels
