// Which shared-memory hand-offs compute-sanitizer's racecheck can follow (docs/testing.md, "racecheck and
// barrier hand-offs"). Three kernels, each correct under the PTX memory model:
//   k_named       warpgroup 0 writes, bar.arrive 1; warpgroup 1 bar.sync 1, reads, bar.arrive 2;
//                 warpgroup 0 bar.sync 2 before it writes again (the seesaw latent kernel's m0 / m1)
//   k_named_sync  the same with bar.sync on both sides
//   k_mbar        one thread writes, mbarrier.arrive; a warp waits, reads, __syncwarp, one lane arrives
//                 on an "empty" mbarrier the writer waits on before rewriting (the hopper ring's tile
//                 records)
// Build and run on the GPU host:
//   nvcc -arch=sm_90a -O2 -lineinfo -o /tmp/racecheck_handoffs tools/probes/racecheck_handoffs.cu
//   compute-sanitizer --tool racecheck /tmp/racecheck_handoffs
// CUDA 13.0, driver 580, H100 (2026-12-07): hazards in k_named and k_mbar, none in k_named_sync.
#include <cstdio>
__device__ __forceinline__ void bar_sync(int id, int n) { asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(n) : "memory"); }
__device__ __forceinline__ void bar_arrive(int id, int n) { asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(n) : "memory"); }
__device__ __forceinline__ unsigned sa(const void* p) { return (unsigned)__cvta_generic_to_shared(p); }
__device__ __forceinline__ void mb_init(unsigned a, int c) { asm volatile("mbarrier.init.shared.b64 [%0], %1;" ::"r"(a), "r"(c) : "memory"); }
__device__ __forceinline__ void mb_arrive(unsigned a) { asm volatile("{ .reg .b64 st; mbarrier.arrive.shared.b64 st, [%0]; }" ::"r"(a) : "memory"); }
__device__ __forceinline__ void mb_wait(unsigned a, unsigned ph) {
  asm volatile("{ .reg .pred p; W: mbarrier.try_wait.parity.shared.b64 p, [%0], %1; @!p bra W; }" ::"r"(a), "r"(ph) : "memory");
}
__global__ void k_named(int* out, int iters) {
  __shared__ int x[128];
  const int t = threadIdx.x, wg = t / 128, l = t % 128;
  int acc = 0;
  for (int i = 0; i < iters; ++i) {
    if (wg == 0) {
      if (i > 0) bar_sync(2, 256);
      x[l] = i + l;
      bar_arrive(1, 256);
    } else {
      bar_sync(1, 256);
      acc += x[127 - l];
      bar_arrive(2, 256);
    }
  }
  out[t] = acc;
}
__global__ void k_named_sync(int* out, int iters) {  // the same with bar.sync on both sides
  __shared__ int x[128];
  const int t = threadIdx.x, wg = t / 128, l = t % 128;
  int acc = 0;
  for (int i = 0; i < iters; ++i) {
    if (wg == 0) x[l] = i + l;
    bar_sync(1, 256);
    if (wg == 1) acc += x[127 - l];
    bar_sync(2, 256);
  }
  out[t] = acc;
}
__global__ void k_mbar(int* out, int iters) {  // warp 0 lane 0 writes rec; warp 1 reads it
  __shared__ int rec[2];
  __shared__ __align__(8) unsigned long long bars[2];
  const int t = threadIdx.x, lane = t % 32;
  const unsigned full = sa(&bars[0]), empty = sa(&bars[1]);
  if (t == 0) { mb_init(full, 1); mb_init(empty, 1); asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory"); }
  __syncthreads();
  int acc = 0;
  for (int i = 0; i < iters; ++i) {
    if (t / 32 == 0) {
      if (lane == 0) {
        if (i > 0) mb_wait(empty, (i - 1) & 1);
        rec[0] = i; rec[1] = 2 * i;
        mb_arrive(full);
      }
    } else if (t / 32 == 1) {
      mb_wait(full, i & 1);
      acc += rec[lane & 1];
      __syncwarp();
      if (lane == 0) mb_arrive(empty);
    }
  }
  out[t] = acc;
}
int main() {
  int* d; cudaMalloc(&d, 1024 * sizeof(int));
  k_named<<<1, 256>>>(d, 8); printf("k_named: %s\n", cudaGetErrorString(cudaDeviceSynchronize()));
  k_named_sync<<<1, 256>>>(d, 8); printf("k_named_sync: %s\n", cudaGetErrorString(cudaDeviceSynchronize()));
  k_mbar<<<1, 64>>>(d, 8); printf("k_mbar: %s\n", cudaGetErrorString(cudaDeviceSynchronize()));
  return 0;
}
