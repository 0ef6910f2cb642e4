#include "ops/attention/split_kv.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "jit/spec_builder.hpp"
#include "ops/attention/attention_kernel.hpp"  // device_type_name
#include "ops/base/launch.hpp"

namespace attnjit::ops {

jit::KernelSpec combine_kernel_spec(const char* op, DType dt, int D, const std::string& arch) {
  jit::SpecBuilder b(op, "dense/gqa_combine.cuh", "attnjit::kernels::gqa_split_combine", arch);
  b.field("backend", "portable").name("{}").name("combine");
  b.field("dtype", dtype_name(dt)).arg(device_type_name(dt)).name("{}");
  b.field("head_dim", D).arg().name("d{}");
  return b.build();
}

int choose_splits(int64_t ctas, int64_t max_keys, int BN, int sms, int per_sm, int64_t batch_z) {
  // Each split keeps at least two key tiles; at most 128 splits; a batched grid keeps B * n <= 65535.
  int64_t n_max = std::max<int64_t>(1, (max_keys + 2 * BN - 1) / (2 * BN));
  n_max = std::min<int64_t>(n_max, 128);
  if (batch_z > 0) n_max = std::min<int64_t>(n_max, std::max<int64_t>(1, 65535 / batch_z));
  if (ctas <= 0) return 1;
  // NOTE: a model of the time: waves of CTAs (a last wave a third full costs a whole wave) times the
  // key tiles of one split plus about two tiles of pipeline fill and epilogue per CTA.
  const int64_t slots = static_cast<int64_t>(sms) * std::max(1, per_sm);
  const int64_t tiles = std::max<int64_t>(1, (max_keys + BN - 1) / BN);
  int best = 1;
  int64_t best_time = -1;
  for (int64_t n = 1; n <= n_max; ++n) {
    const int64_t time = (ctas * n + slots - 1) / slots * ((tiles + n - 1) / n + 2);
    if (best_time < 0 || time < best_time) {
      best_time = time;
      best = static_cast<int>(n);
    }
  }
  return best;
}

void launch_combine(const char* op, const jit::LoadedKernel& kernel, const kernels::GqaCombineParams& p, void* stream,
                    bool dependent) {
  if (p.rows == 0) return;
  kernels::GqaCombineParams params = p;
  params.warps_per_row = kernels::gqa_combine_warps(p.n_splits);
  const int64_t rows_per_cta = kernels::kGqaCombineWarps / params.warps_per_row;
  Launch lc;
  lc.grid_x = static_cast<unsigned>((p.rows + rows_per_cta - 1) / rows_per_cta);
  lc.threads = kernels::kGqaCombineWarps * 32;
  lc.stream = stream;
  lc.dependent = dependent;
  void* args[] = {&params};
  launch_kernel(kernel.function, lc, args, fmt::format("{}: cuLaunchKernelEx (combine)", op));
}

}  // namespace attnjit::ops
