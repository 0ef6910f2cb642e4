#include "ops/mla/reference.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "base/host_numeric.hpp"
#include "ops/attention/attention_math.hpp"

namespace attnjit::ops::reference {

namespace {

void load(const TensorRef& t, int64_t off, int64_t chan, int64_t n, double* out) {
  math::load_row(t, off, chan, n, 1.0, out);
}

void store(const TensorRef& t, int64_t off, int64_t chan, int64_t n, const double* row) {
  for (int64_t d = 0; d < n; ++d) numeric::store_from_double(t.data, t.dtype, off + d * chan, row[d]);
}

int64_t int_at(const TensorRef& t, int64_t off) { return static_cast<const int32_t*>(t.data)[off]; }

// The row softmax of SPEC.md §1.6 without sink or cap: `logit` holds one logit per visible member
// (repeats included), row j of `V` (Dv doubles) its value. o = sum_j exp(l_j - M) V_j / Z; zeros when
// the row has no member.
void softmax_combine(const std::vector<double>& logit, const std::vector<const double*>& V, int64_t Dv, double* o) {
  std::fill(o, o + Dv, 0.0);
  if (logit.empty()) return;
  const double M = *std::max_element(logit.begin(), logit.end());
  double Z = 0;
  for (size_t j = 0; j < logit.size(); ++j) {
    const double w = std::exp(logit[j] - M);
    Z += w;
    for (int64_t d = 0; d < Dv; ++d) o[d] += w * V[j][d];
  }
  for (int64_t d = 0; d < Dv; ++d) o[d] /= Z;
}

}  // namespace

void mla_decode(const MlaDecodeCall& call) {
  const TensorRef &q = *call.q, &q_pe = *call.q_pe, &k = *call.k, &k_pe = *call.k_pe, &o = *call.o;
  const int64_t D = call.D, PE = call.PE, g = call.group(), rk = call.q_rank;
  const int chan_q = rk - 1;  // the innermost axis of q, q_pe, o
  std::vector<double> qv(D), qpe(PE), out(D), logit;
  std::vector<const double*> vals;
  for (int64_t b = 0; b < call.B; ++b) {
    const int64_t len = call.cache_seqlens ? int_at(*call.cache_seqlens, b * call.cache_seqlens->strides[0]) : call.N_kv;
    for (int64_t r = 0; r < call.H_kv; ++r) {
      // The latent rows (keys and values) and rope rows of positions n < len, for KV head r.
      std::vector<double> K(static_cast<size_t>(len * D)), KP(static_cast<size_t>(len * PE));
      for (int64_t n = 0; n < len; ++n) {
        int64_t ko, po;
        if (call.paged()) {
          const TensorRef& bt = *call.block_table;
          const int64_t page = int_at(bt, b * bt.strides[0] + (n / call.PS) * bt.strides[1]), slot = n % call.PS;
          ko = page * k.strides[0] + slot * k.strides[1] + r * k.strides[2];
          po = page * k_pe.strides[0] + slot * k_pe.strides[1] + r * k_pe.strides[2];
        } else {
          ko = b * k.strides[0] + n * k.strides[1] + r * k.strides[2];
          po = b * k_pe.strides[0] + n * k_pe.strides[1] + r * k_pe.strides[2];
        }
        load(k, ko, k.strides[3], D, &K[n * D]);
        load(k_pe, po, k_pe.strides[3], PE, &KP[n * PE]);
      }
      for (int64_t t = 0; t < call.S_q; ++t) {
        // Query token t is cache position len - S_q + t: it sees the positions up to and including its own.
        const int64_t visible = std::max<int64_t>(0, std::min(len, len - call.S_q + 1 + t));
        for (int64_t h = r * g; h < (r + 1) * g; ++h) {
          load(q, MlaDecodeCall::row(q, rk, b, t, h), q.strides[chan_q], D, qv.data());
          load(q_pe, MlaDecodeCall::row(q_pe, rk, b, t, h), q_pe.strides[chan_q], PE, qpe.data());
          logit.clear();
          vals.clear();
          for (int64_t n = 0; n < visible; ++n) {
            logit.push_back((math::dot(qv.data(), &K[n * D], D) + math::dot(qpe.data(), &KP[n * PE], PE)) * call.scale);
            vals.push_back(&K[n * D]);
          }
          softmax_combine(logit, vals, D, out.data());
          store(o, MlaDecodeCall::row(o, rk, b, t, h), o.strides[chan_q], D, out.data());
        }
      }
    }
  }
}

void dsa_decode(const DsaDecodeConfig& cfg, const DsaDecodeCall& call) {
  const TensorRef &q = *call.q, &kv = *call.kv, &idx = *call.indices, &o = *call.o;
  const int64_t D = call.D, Dqk = call.D_qk, g = call.group();
  std::vector<double> qv(Dqk), out(D), logit;
  std::vector<std::vector<double>> rows;  // the key/value rows of one (b, s, r), one per valid slot
  std::vector<const double*> vals;
  for (int64_t b = 0; b < call.B; ++b)
    for (int64_t s = 0; s < call.S; ++s) {
      const int64_t q_pos = cfg.q_start_index_s + s;
      for (int64_t r = 0; r < call.H_kv; ++r) {
        rows.clear();
        for (int64_t u = 0; u < call.K; ++u) {
          const int64_t x = int_at(idx, b * idx.strides[0] + s * idx.strides[1] + r * idx.strides[2] + u * idx.strides[3]);
          if (x < 0 || x >= call.S_kv) continue;                                // -1 padding, S_kv, out of range
          if (cfg.is_causal && (x + 1) * cfg.stride_kv > q_pos + 1) continue;  // covers raw tokens past q_pos
          rows.emplace_back(static_cast<size_t>(Dqk));
          load(kv, b * kv.strides[0] + x * kv.strides[1] + r * kv.strides[2], kv.strides[3], Dqk, rows.back().data());
        }
        vals.clear();
        for (const auto& row : rows) vals.push_back(row.data());
        for (int64_t h = r * g; h < (r + 1) * g; ++h) {
          load(q, b * q.strides[0] + s * q.strides[1] + h * q.strides[2], q.strides[3], Dqk, qv.data());
          logit.clear();
          for (const auto& row : rows) logit.push_back(call.scale * math::dot(qv.data(), row.data(), Dqk));
          softmax_combine(logit, vals, D, out.data());
          store(o, b * o.strides[0] + s * o.strides[1] + h * o.strides[2], o.strides[3], D, out.data());
        }
      }
    }
}

}  // namespace attnjit::ops::reference
