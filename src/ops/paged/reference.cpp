#include "ops/paged/reference.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "attnjit/error.hpp"
#include "ops/attention/attention_math.hpp"
#include "base/host_numeric.hpp"

namespace attnjit::ops::reference {

namespace {

using math::kInf;
using math::load;
using math::load_row;

const char* op_name(const PagedAttentionCall& call) { return call.mha_decode ? "mha_decode_paged" : "gqa_paged_fwd"; }

[[noreturn]] void contract_violation(const PagedAttentionCall& call, const char* arg, const std::string& what) {
  throw InvalidArgument(fmt::format("{}: content: {}: expected {} (caller contract; the reference refuses to read "
                                    "out of bounds)",
                                    op_name(call), arg, what));
}

int64_t int_at(const TensorRef& t, int64_t off) {
  return t.dtype == DType::kI64 ? static_cast<const int64_t*>(t.data)[off]
                                : static_cast<int64_t>(static_cast<const int32_t*>(t.data)[off]);
}

// Element strides of a key row of one pool: logical page, slot within the page, head, channel.
// gqa_paged_fwd pools are [NP, PS, H_kv, D]; mha_decode_paged's k / v are [N_kv, H, D], page p being
// rows [p * PS, (p + 1) * PS).
struct PoolMap {
  int64_t page = 0, slot = 0, head = 0, chan = 0;
  int64_t at(int64_t pg, int64_t s, int64_t h) const { return pg * page + s * slot + h * head; }
};

PoolMap pool_map(const PagedAttentionCall& call, const TensorRef& t) {
  if (call.mha_decode) return {call.PS * t.strides[0], t.strides[0], t.strides[1], t.strides[2]};
  return {t.strides[0], t.strides[1], t.strides[2], t.strides[3]};
}

// One request: query rows [q0, q0 + q_len) (packed) or batch entry b (mha), kv_len keys, their pages.
struct Request {
  int64_t q0 = 0, q_len = 0, kv_len = 0;
  std::vector<int64_t> pages;  // physical page of logical page p < ceil(kv_len / PS)
};

// The requests of the call, read through the strides of the metadata tensors, with the checks that keep
// the reference's reads in bounds (the op's caller contract, SPEC.md §2.9 / §2.11, is checked in full by
// validate_inputs; this is only what the reference needs).
std::vector<Request> requests(const PagedAttentionCall& call, bool rope) {
  const char* table_name = call.mha_decode ? "block_table" : "page_table";
  const char* lens_name = call.mha_decode ? "real_seqlen_kv" : "cache_seqlens";
  const TensorRef& table = *call.page_table;
  const TensorRef& lens = *call.kv_lens;
  std::vector<Request> reqs(static_cast<size_t>(call.B));
  for (int64_t b = 0; b < call.B; ++b) {
    Request& r = reqs[b];
    if (call.mha_decode) {
      r.q0 = 0;
      r.q_len = call.S_q;
    } else {
      const TensorRef& cu = *call.cu_seqlens_q;
      r.q0 = int_at(cu, b * cu.strides[0]);
      r.q_len = int_at(cu, (b + 1) * cu.strides[0]) - r.q0;
      if (r.q0 < 0 || r.q_len < 0 || r.q0 + r.q_len > call.T_q)
        contract_violation(call, "cu_seqlens_q", fmt::format("request {} within [0, T_q = {}], got rows [{}, {})", b,
                                                             call.T_q, r.q0, r.q0 + r.q_len));
    }
    r.kv_len = int_at(lens, b * lens.strides[0]);
    if (r.q_len == 0) continue;  // nothing is read for an empty request
    if (r.kv_len < 0 || r.kv_len > call.W * call.PS)
      contract_violation(call, lens_name,
                         fmt::format("0 <= kv_len <= W * PS = {} * {} in request {}, got {}", call.W, call.PS, b,
                                     r.kv_len));
    if (rope) {  // positions: q at p_i in [0, kv_len), k at j in [0, kv_len); both need kv_len <= P
      if (r.q_len > r.kv_len)
        contract_violation(call, "cu_seqlens_q",
                           fmt::format("q_len <= kv_len with rope, got {} > {} in request {}", r.q_len, r.kv_len, b));
      if (r.kv_len > call.P)
        contract_violation(call, "rope_cos",
                           fmt::format("P >= kv_len, got P = {} < {} in request {}", call.P, r.kv_len, b));
    }
    const int64_t used = (r.kv_len + call.PS - 1) / call.PS;
    r.pages.resize(static_cast<size_t>(used));
    for (int64_t p = 0; p < used; ++p) {
      const int64_t pg = int_at(table, b * table.strides[0] + p * table.strides[1]);
      if (pg < 0 || pg >= call.NP)
        contract_violation(call, table_name,
                           fmt::format("entries in [0, {}) for the used pages, got {} at [{}, {}]", call.NP, pg, b, p));
      r.pages[p] = pg;
    }
  }
  return reqs;
}

// The shared computation of both ops. Per request, KV head r and query head h of its group, query i at
// position p = i + kv_len - q_len, visible keys [lo, hi] (§1.6 for gqa_paged_fwd; mha_decode_paged's
// causal rule j <= i + L - S_q is the same bottom-right alignment).
struct Params {
  bool causal = false;
  int64_t wL = -1, wR = -1;
  double cap = 0;
  RopeLayout rope = RopeLayout::kNone;
};

void paged_attention(const Params& prm, const PagedAttentionCall& call) {
  const bool rope = prm.rope != RopeLayout::kNone;
  const std::vector<Request> reqs = requests(call, rope);  // may throw: before anything is written
  const int64_t D = call.D, H = call.H, H_kv = call.H_kv;
  const int64_t group = H / H_kv;
  const bool q_fp8 = call.q_dtype == DType::kE4M3;
  const bool kv_fp8 = call.kv_dtype == DType::kE4M3;
  const TensorRef& q = *call.q;
  const TensorRef& o = *call.o;
  const TensorRef& kp = *call.k_pages;
  const TensorRef& vp = *call.v_pages;
  const PoolMap km = pool_map(call, kp), vm = pool_map(call, vp);
  // mha_decode_paged has no scale parameter: alpha = 1/sqrt(D) (SPEC.md §2.11), taken in double.
  const double scale = call.mha_decode ? 1.0 / std::sqrt(static_cast<double>(D)) : static_cast<double>(call.scale);

  // q / o rows: gqa_paged_fwd [T_q, H, D] (token = q0 + i); mha_decode_paged [B, S_q, H, D].
  auto q_off = [&](const TensorRef& t, int64_t b, const Request& rq, int64_t i, int64_t h) {
    if (call.mha_decode) return b * t.strides[0] + i * t.strides[1] + h * t.strides[2];
    return (rq.q0 + i) * t.strides[0] + h * t.strides[1];
  };
  const int64_t q_chan = q.strides[q.ndim - 1], o_chan = o.strides[o.ndim - 1];
  auto scale_at = [](const TensorRef* s, int64_t b, int64_t r) {
    return load(*s, b * s->strides[0] + r * s->strides[1]);
  };

  std::vector<double> K, V, qrow(D), acc(D), logit;
  for (int64_t b = 0; b < call.B; ++b) {
    const Request& rq = reqs[b];
    if (rq.q_len == 0) continue;
    const int64_t q_len = rq.q_len, kv_len = rq.kv_len;
    K.assign(static_cast<size_t>(kv_len * D), 0.0);
    V.assign(static_cast<size_t>(kv_len * D), 0.0);
    logit.assign(static_cast<size_t>(std::max<int64_t>(kv_len, 1)), 0.0);
    for (int64_t r = 0; r < H_kv; ++r) {
      const double qs = q_fp8 ? scale_at(call.q_scale, b, r) : 1.0;
      const double ks = kv_fp8 ? scale_at(call.k_scale, b, r) : 1.0;
      const double vs = kv_fp8 ? scale_at(call.v_scale, b, r) : 1.0;
      // Keys and values of (b, r), gathered from the pages: dequantised, keys rotated at their position j.
      for (int64_t j = 0; j < kv_len; ++j) {
        const int64_t pg = rq.pages[j / call.PS], s = j % call.PS;
        load_row(kp, km.at(pg, s, r), km.chan, D, ks, &K[j * D]);
        load_row(vp, vm.at(pg, s, r), vm.chan, D, vs, &V[j * D]);
        if (rope) math::rotate(prm.rope, *call.rope_cos, *call.rope_sin, call.R, j, &K[j * D]);
      }
      for (int64_t h = r * group; h < (r + 1) * group; ++h) {
        const double sink = call.sinks ? load(*call.sinks, h * call.sinks->strides[0]) : -kInf;
        for (int64_t i = 0; i < q_len; ++i) {
          const int64_t p = i + kv_len - q_len;
          int64_t lo = 0, hi = kv_len - 1;
          if (prm.causal) hi = std::min(hi, p);
          if (prm.wL >= 0) lo = std::max(lo, p - prm.wL);
          if (prm.wR >= 0) hi = std::min(hi, p + prm.wR);
          math::softmax_row(
              [&] {
                load_row(q, q_off(q, b, rq, i, h), q_chan, D, qs, qrow.data());
                if (rope) math::rotate(prm.rope, *call.rope_cos, *call.rope_sin, call.R, p, qrow.data());
                return qrow.data();
              },
              K.data(), V.data(), lo, hi, D, scale, prm.cap, sink, logit, acc.data());
          const int64_t orow = q_off(o, b, rq, i, h);
          for (int64_t d = 0; d < D; ++d) numeric::store_from_double(o.data, o.dtype, orow + d * o_chan, acc[d]);
        }
      }
    }
  }
}

}  // namespace

void gqa_paged_fwd(const GqaConfig& cfg, const PagedAttentionCall& call) {
  Params prm;
  prm.causal = cfg.is_causal;
  prm.wL = cfg.window_left;
  prm.wR = cfg.window_right;
  prm.cap = cfg.softcap;
  prm.rope = cfg.rope;
  paged_attention(prm, call);
}

void mha_decode_paged(const MhaDecodePagedConfig& cfg, const PagedAttentionCall& call) {
  Params prm;
  prm.causal = cfg.is_causal;
  paged_attention(prm, call);
}

}  // namespace attnjit::ops::reference
