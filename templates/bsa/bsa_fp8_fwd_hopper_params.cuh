// Launch parameters of the hopper bsa_fp8_fwd attention kernel: the portable kernels' parameters (the
// pre-pass is shared, with V written as fp16 values) plus 3-d TMA maps of the workspace's operands, all with
// 64-row boxes and the 128-byte swizzle: q8 and k8 as (128 bytes, row, b * H + h), v16 as (128 fp16 channels,
// key, b * H + h) loaded as two 64-channel boxes.
#pragma once
#include "bsa/bsa_fp8_fwd_params.cuh"

namespace attnjit::kernels {

constexpr int kBsa8HopperThreads = 160;  // one consumer warpgroup (64 query rows) and one producer warp
// Two schedules (see bsa_fp8_fwd_hopper.cuh): overlapped (tile t + 1's S = Q K^T and softmax during tile t's
// P V; two CTAs per SM, a four-stage ring) or serial (three CTAs per SM interleave instead; two stages).
constexpr bool kBsa8HopperOverlap = true;
constexpr int kBsa8HopperCtasPerSm = kBsa8HopperOverlap ? 2 : 3;
constexpr int kBsa8HopperStages = kBsa8HopperOverlap ? 4 : 2;  // K8 / V16 tiles of 64 keys in flight
// Q8 8 KB, then per stage K8 8 KB and V16 16 KB, the mbarriers and tile records, and 1 KB of alignment slack.
constexpr int kBsa8HopperSmemBytes = 8192 + kBsa8HopperStages * 24576 + 1024 + 1024;

struct alignas(64) BsaFp8HopperParams {
  unsigned long long q_map[16];  // CUtensorMap bytes
  unsigned long long k_map[16];
  unsigned long long v_map[16];
  BsaFp8Params p;
};

}  // namespace attnjit::kernels
