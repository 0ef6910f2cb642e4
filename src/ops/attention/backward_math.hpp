// The attention backward of one query row, shared by the CPU references of the backward ops (dense:
// ops/dense/reference_bwd.cpp for gqa_bwd, SPEC.md §2.12; block-sparse: ops/bsa/reference_bwd.cpp for
// bsa_bwd, §2.5). They differ only in which keys a row sees; the math per (row, key) is this. All in
// double. Not part of any interface.
#pragma once
#include <cmath>
#include <cstdint>

#include "ops/attention/attention_math.hpp"

namespace attnjit::ops::reference::math {

// One query row: q, o and dout (its upstream gradient) as D doubles, the forward's natural-log lse
// of the row and the logit scale. `for_each_key(visit)` calls visit(k, v, dk, dv) once per visible key
// with that key's rows (D doubles each) and its dk / dv accumulators. With
//   P = exp(scale <q, k> - lse), Delta = <o, dout>, dS = P (<dout, v> - Delta),
// adds scale dS k to dq, scale dS q to dk and P dout to dv for every visible key. A row with lse = -inf
// (nothing visible in the forward) contributes nothing.
// NOTE: Delta and <dout, v> are the same dot over the same products, so a row whose only key has
// v = o (a single visible key: causal row 0, every row at S = 1) gets dS = 0 exactly, and its dq, as
// the contract says, exact zeros.
// kAbs: the same sums over the absolute values of every product (|Delta| = sum |o| |dout|, dS_abs =
// P (sum |dout| |v| + |Delta|), dq_abs += scale dS_abs |k|, ...): the scale SPEC.md §1.12 measures a
// gradient's error against where the gradient itself cancels to (almost) zero.
template <bool kAbs = false, class ForEachKey>
void backward_row(const double* q, const double* o, const double* dout, double lse, double scale, int64_t D,
                  double* dq, ForEachKey&& for_each_key) {
  if (lse == -kInf) return;
  auto dot_of = [D](const double* a, const double* b) {
    if constexpr (!kAbs) {
      return dot(a, b, D);
    } else {
      double s = 0;
      for (int64_t d = 0; d < D; ++d) s += std::fabs(a[d] * b[d]);
      return s;
    }
  };
  auto mag = [](double x) { return kAbs ? std::fabs(x) : x; };
  const double delta = dot_of(o, dout);
  for_each_key([&](const double* k, const double* v, double* dk, double* dv) {
    const double p = std::exp(scale * dot(q, k, D) - lse);
    const double ds = kAbs ? p * (dot_of(dout, v) + delta) : p * (dot(dout, v, D) - delta);
    for (int64_t d = 0; d < D; ++d) {
      dq[d] += scale * ds * mag(k[d]);
      dk[d] += scale * ds * mag(q[d]);
      dv[d] += p * mag(dout[d]);
    }
  });
}

}  // namespace attnjit::ops::reference::math
