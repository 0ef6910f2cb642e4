// Split-KV attention, shared by every family whose planner splits the keys of a call (dense decode,
// paged decode, prefill-append): how many splits a call gets, and the combine kernel that merges the
// fp32 partials of the splits.
#pragma once
#include <cstdint>
#include <string>

#include "attnjit/tensor.hpp"
#include "dense/gqa_combine_params.cuh"
#include "jit/kernel_cache.hpp"
#include "jit/kernel_spec.hpp"

namespace attnjit::ops {

// The combine kernel of split-KV plans for compute dtype `dt` and head dim D.
jit::KernelSpec combine_kernel_spec(const char* op, DType dt, int D, const std::string& arch);

// Split-KV sizing from shapes only (SPEC.md §1.3): how many splits a call with `ctas` CTAs per split and
// at most `max_keys` keys per request gets on a GPU with `sms` SMs holding `per_sm` CTAs each (1..128):
// the count whose waves are fullest, less 0.5% per split.
int choose_splits(int64_t ctas, int64_t max_keys, int BN, int sms, int per_sm, int64_t batch_z);
// Launches gqa_split_combine over `p.rows` rows (it sets p.warps_per_row from p.n_splits). `dependent`
// (sm_90+): launch it as a programmatic dependent of the split kernel just launched on `stream`.
void launch_combine(const char* op, const jit::LoadedKernel& kernel, const kernels::GqaCombineParams& p, void* stream,
                    bool dependent);

}  // namespace attnjit::ops
