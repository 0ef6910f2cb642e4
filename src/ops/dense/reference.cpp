#include "ops/dense/reference.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "attnjit/error.hpp"
#include "ops/attention/attention_math.hpp"
#include "base/host_numeric.hpp"

namespace attnjit::ops::reference {

namespace {

using math::kInf;
using math::load;
using math::load_row;

// Where the rows of one request live in a q/k/v/o-like tensor: dense [B, S, heads, D] (request = batch
// entry b) or packed [T, heads, D] (request = token range starting at `first`).
struct RowMap {
  int64_t base = 0, token = 0, head = 0, chan = 0;
  int64_t at(int64_t t, int64_t h) const { return base + t * token + h * head; }
};

RowMap row_map(const TensorRef& t, bool varlen, int64_t b, int64_t first) {
  if (varlen) return {first * t.strides[0], t.strides[0], t.strides[1], t.strides[2]};
  return {b * t.strides[0], t.strides[1], t.strides[2], t.strides[3]};
}

struct Request {
  int64_t q0 = 0, q_len = 0, k0 = 0, kv_len = 0;
};

[[noreturn]] void contract_violation(const GqaConfig& cfg, const char* arg, const std::string& what) {
  throw InvalidArgument(fmt::format("{}: content: {}: expected {} (caller contract; the reference refuses to read "
                                    "out of bounds)",
                                    cfg.op_name(), arg, what));
}

// The requests of the call. Packed offsets are read through their strides; the caller contract on
// them (SPEC.md §1.10) is not this function's business beyond what keeps the reads in bounds.
std::vector<Request> requests(const GqaConfig& cfg, const GqaCall& call) {
  std::vector<Request> reqs(static_cast<size_t>(call.B));
  if (!cfg.varlen) {
    for (auto& r : reqs) r = {0, call.S_q, 0, call.S_kv};
    return reqs;
  }
  auto offset = [](const TensorRef& cu, int64_t n) {
    return static_cast<int64_t>(static_cast<const int32_t*>(cu.data)[n * cu.strides[0]]);
  };
  for (int64_t b = 0; b < call.B; ++b) {
    Request& r = reqs[b];
    r.q0 = offset(*call.cu_seqlens_q, b);
    r.q_len = offset(*call.cu_seqlens_q, b + 1) - r.q0;
    r.k0 = offset(*call.cu_seqlens_kv, b);
    r.kv_len = offset(*call.cu_seqlens_kv, b + 1) - r.k0;
    if (r.q0 < 0 || r.q_len < 0 || r.q0 + r.q_len > call.T_q)
      contract_violation(cfg, "cu_seqlens_q", fmt::format("request {} within [0, T_q = {}], got rows [{}, {})", b,
                                                          call.T_q, r.q0, r.q0 + r.q_len));
    if (r.k0 < 0 || r.kv_len < 0 || r.k0 + r.kv_len > call.T_kv)
      contract_violation(cfg, "cu_seqlens_kv", fmt::format("request {} within [0, T_kv = {}], got rows [{}, {})", b,
                                                           call.T_kv, r.k0, r.k0 + r.kv_len));
  }
  return reqs;
}

// Rotates the first R channels of x (double, D channels) at table row `pos` (SPEC.md §1.7).
void rotate(const GqaConfig& cfg, const GqaCall& call, int64_t pos, double* x) {
  math::rotate(cfg.rope, *call.rope_cos, *call.rope_sin, call.R, pos, x);
}

}  // namespace

void gqa_forward(const GqaConfig& cfg, const GqaCall& call) {
  const bool varlen = cfg.varlen;
  const bool fp8 = call.in_dtype == DType::kE4M3;
  const bool rope = cfg.rope != RopeLayout::kNone;
  const int64_t D = call.D, H = call.H, H_kv = call.H_kv;
  const int64_t group = H / H_kv;
  const std::vector<Request> reqs = requests(cfg, call);
  if (rope) {  // positions: q at p_i in [0, kv_len), k at j in [0, kv_len); both need kv_len <= P
    for (size_t b = 0; b < reqs.size(); ++b) {
      const Request& r = reqs[b];
      if (r.q_len > 0 && r.q_len > r.kv_len)
        contract_violation(cfg, varlen ? "cu_seqlens_q" : "q",
                           fmt::format("q_len <= kv_len with rope, got {} > {} in request {}", r.q_len, r.kv_len, b));
      if (r.kv_len > call.P)
        contract_violation(cfg, "rope_cos",
                           fmt::format("P >= kv_len, got P = {} < {} in request {}", call.P, r.kv_len, b));
    }
  }

  const TensorRef& q = *call.q;
  const TensorRef& k = *call.k;
  const TensorRef& v = *call.v;
  const TensorRef& o = *call.o;
  const double scale = call.scale;
  const double cap = cfg.softcap;
  const int64_t wL = cfg.window_left, wR = cfg.window_right;

  std::vector<double> K, V, qrow(D), acc(D), logit;
  for (int64_t b = 0; b < call.B; ++b) {
    const Request& rq = reqs[b];
    if (rq.q_len == 0) continue;
    const int64_t q_len = rq.q_len, kv_len = rq.kv_len;
    const RowMap qm = row_map(q, varlen, b, rq.q0);
    const RowMap om = row_map(o, varlen, b, rq.q0);
    const RowMap km = row_map(k, varlen, b, rq.k0);
    const RowMap vm = row_map(v, varlen, b, rq.k0);
    K.assign(static_cast<size_t>(kv_len * D), 0.0);
    V.assign(static_cast<size_t>(kv_len * D), 0.0);
    logit.assign(static_cast<size_t>(std::max<int64_t>(kv_len, 1)), 0.0);
    for (int64_t r = 0; r < H_kv; ++r) {
      auto scale_of = [&](const TensorRef* s) {
        return fp8 ? load(*s, b * s->strides[0] + r * s->strides[1]) : 1.0;
      };
      const double qs = scale_of(call.q_scale), ks = scale_of(call.k_scale), vs = scale_of(call.v_scale);
      // Keys and values of (b, r): dequantised, keys rotated at their own position j.
      for (int64_t j = 0; j < kv_len; ++j) {
        load_row(k, km.at(j, r), km.chan, D, ks, &K[j * D]);
        load_row(v, vm.at(j, r), vm.chan, D, vs, &V[j * D]);
        if (rope) rotate(cfg, call, j, &K[j * D]);
      }
      for (int64_t h = r * group; h < (r + 1) * group; ++h) {
        const double sink = call.sinks ? load(*call.sinks, h * call.sinks->strides[0]) : -kInf;
        for (int64_t i = 0; i < q_len; ++i) {
          const int64_t p = i + kv_len - q_len;
          // Visible keys: a contiguous range [lo, hi] of [0, kv_len) (SPEC.md §1.6).
          int64_t lo = 0, hi = kv_len - 1;
          if (cfg.is_causal) hi = std::min(hi, p);
          if (wL >= 0) lo = std::max(lo, p - wL);
          if (wR >= 0) hi = std::min(hi, p + wR);

          const double lse = math::softmax_row(
              [&] {
                load_row(q, qm.at(i, h), qm.chan, D, qs, qrow.data());
                if (rope) rotate(cfg, call, p, qrow.data());
                return qrow.data();
              },
              K.data(), V.data(), lo, hi, D, scale, cap, sink, logit, acc.data());
          const int64_t orow = om.at(i, h);
          for (int64_t d = 0; d < D; ++d) numeric::store_from_double(o.data, o.dtype, orow + d * om.chan, acc[d]);
          if (call.lse) {
            const TensorRef& L = *call.lse;
            const int64_t off = varlen ? (rq.q0 + i) * L.strides[0] + h * L.strides[1]
                                       : b * L.strides[0] + h * L.strides[1] + i * L.strides[2];
            numeric::store_from_double(L.data, L.dtype, off, lse);
          }
        }
      }
    }
  }
}

}  // namespace attnjit::ops::reference
