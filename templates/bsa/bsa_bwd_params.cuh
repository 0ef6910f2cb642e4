// Launch geometry of the bsa_bwd kernels (templates/bsa/bsa_bwd.cuh); the parameters are the shared
// attention backward's (templates/common/attention_bwd_params.cuh).
#pragma once
#include "common/attention_bwd_params.cuh"

#define ATTNJIT_BSA_BWD_HD ATTNJIT_ATTN_BWD_HD

namespace attnjit::kernels {

// Query rows per item of bsa_bwd_main for a sparse block size: 64 (bs 128: half a query block) or 128
// (bs 64: two list entries).
ATTNJIT_BSA_BWD_HD constexpr int bsa_bwd_block_m(int bs) { return bs == 64 ? 128 : 64; }

}  // namespace attnjit::kernels
