// Which shared-memory hand-offs compute-sanitizer's racecheck can follow (docs/testing.md, "racecheck and
// barrier hand-offs"). Three kernels, each correct under the PTX memory model:
//   k_named       warpgroup 0 writes, bar.arrive 1; warpgroup 1 bar.sync 1, reads, bar.arrive 2;
//                 warpgroup 0 bar.sync 2 before it writes again (the seesaw latent kernel's m0 / m1)
//   k_named_sync  the same with bar.sync on both sides
//   k_mbar        one thread writes, mbarrier.arrive; a warp waits, reads, __syncwarp, one lane arrives
//                 on an "empty" mbarrier the writer waits on before rewriting (the hopper ring's tile
//                 records)
// Build and run on the GPU host:
//   nvcc -arch=sm_90a -O2 -lineinfo -I templates -o /tmp/racecheck_handoffs tools/probes/racecheck_handoffs.cu
//   compute-sanitizer --tool racecheck /tmp/racecheck_handoffs
// CUDA 13.0, driver 580, H100 (2026-12-07): hazards in k_named and k_mbar, none in k_named_sync. That run
// used hand-written copies of the same PTX (bar.sync / bar.arrive, mbarrier.arrive / try_wait.parity);
// this form on hopper/sm90.cuh's helpers compiles, not yet run on a GPU.
#include <cstdio>

#include "hopper/sm90.cuh"  // the barrier primitives the kernels use

using namespace attnjit::kernels;

__global__ void k_named(int* out, int iters) {
  __shared__ int x[128];
  const int t = threadIdx.x, wg = t / 128, l = t % 128;
  int acc = 0;
  for (int i = 0; i < iters; ++i) {
    if (wg == 0) {
      if (i > 0) named_barrier(2, 256);
      x[l] = i + l;
      named_barrier_arrive(1, 256);
    } else {
      named_barrier(1, 256);
      acc += x[127 - l];
      named_barrier_arrive(2, 256);
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
    named_barrier(1, 256);
    if (wg == 1) acc += x[127 - l];
    named_barrier(2, 256);
  }
  out[t] = acc;
}
__global__ void k_mbar(int* out, int iters) {  // warp 0 lane 0 writes rec; warp 1 reads it
  __shared__ int rec[2];
  __shared__ __align__(8) unsigned long long bars[2];
  const int t = threadIdx.x, lane = t % 32;
  const unsigned full = smem_addr(&bars[0]), empty = smem_addr(&bars[1]);
  if (t == 0) { mbar_init(full, 1); mbar_init(empty, 1); mbar_init_fence(); }
  __syncthreads();
  int acc = 0;
  for (int i = 0; i < iters; ++i) {
    if (t / 32 == 0) {
      if (lane == 0) {
        if (i > 0) mbar_wait(empty, (i - 1) & 1);
        rec[0] = i; rec[1] = 2 * i;
        mbar_arrive(full);
      }
    } else if (t / 32 == 1) {
      mbar_wait(full, i & 1);
      acc += rec[lane & 1];
      __syncwarp();
      if (lane == 0) mbar_arrive(empty);
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
