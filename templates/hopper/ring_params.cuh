// Geometry of the hopper attention mainloop's shared memory (HopperRing, hopper/attention_core.cuh),
// for the host planners of its kernels (plain constexpr arithmetic).
#pragma once
#include "common/host_device.cuh"

namespace attnjit::kernels {

// Q [nwg warpgroups][64 rows][D], K and V rings [2 stages][BN rows][D] (16-bit), the ring's 8 mbarriers,
// a record (key start, valid keys) per stage, an mbarrier per consumer warpgroup for its Q rows loaded by
// TMA (up to three), and 1024 bytes of alignment slack.
ATTNJIT_HD constexpr int hopper_ring_smem_bytes(int D, int BN, int nwg) {
  return nwg * 64 * D * 2 + 2 * 2 * BN * D * 2 + 8 * 8 + 2 * 8 + 3 * 8 + 1024;
}
// Threads of a CTA: nwg consumer warpgroups and one producer warpgroup.
ATTNJIT_HD constexpr int hopper_ring_threads(int nwg) { return (nwg + 1) * 128; }

}  // namespace attnjit::kernels
