#include "ops/base/tuning.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>

#include "attnjit/error.hpp"
#include "base/env.hpp"
#include "base/logging.hpp"

namespace attnjit::ops {

Tuning Tuning::from_env() {
  // A script that sets a name without TUNE_ would otherwise measure the planner's default unawares.
  for (const char* old : {"ATTNJIT_GQA_TILE", "ATTNJIT_DECODE_TILE", "ATTNJIT_DECODE_SPLITS", "ATTNJIT_LI_FORCE_SLAB"})
    if (env::get(old)) logger().warn("{} is no longer read; set ATTNJIT_TUNE_{} instead", old, old + 8);
  Tuning t;
  if (auto v = env::get("ATTNJIT_TUNE_GQA_TILE")) t.gqa_tile = v;
  if (auto v = env::get("ATTNJIT_TUNE_DECODE_TILE")) t.decode_tile = v;
  if (auto v = env::get("ATTNJIT_TUNE_DECODE_SPLITS")) t.decode_splits = env::parse_nonneg_int("ATTNJIT_TUNE_DECODE_SPLITS", v);
  if (auto v = env::get("ATTNJIT_TUNE_LI_FORCE_SLAB")) t.li_force_slab = env::parse_bool("ATTNJIT_TUNE_LI_FORCE_SLAB", v);
  if (auto v = env::get("ATTNJIT_TUNE_LATENT_TILE")) t.latent_tile = env::parse_nonneg_int("ATTNJIT_TUNE_LATENT_TILE", v);
  if (auto v = env::get("ATTNJIT_TUNE_NSA_SELECTED_TILE")) t.nsa_selected_tile = v;
  if (auto v = env::get("ATTNJIT_TUNE_NSA_TOPK_TILE")) t.nsa_topk_tile = v;
  if (auto v = env::get("ATTNJIT_TUNE_GQA_BWD_BAND")) t.gqa_bwd_band = env::parse_nonneg_int("ATTNJIT_TUNE_GQA_BWD_BAND", v);
  if (auto v = env::get("ATTNJIT_TUNE_GQA_FWD_PERSISTENT"))
    t.gqa_fwd_persistent = env::parse_bool("ATTNJIT_TUNE_GQA_FWD_PERSISTENT", v);
  if (auto v = env::get("ATTNJIT_TUNE_GQA_FWD_Q_TMA")) t.gqa_fwd_q_tma = env::parse_bool("ATTNJIT_TUNE_GQA_FWD_Q_TMA", v);
  if (auto v = env::get("ATTNJIT_TUNE_GQA_BWD_HOPPER_D256"))
    t.gqa_bwd_hopper_d256 = env::parse_bool("ATTNJIT_TUNE_GQA_BWD_HOPPER_D256", v);
  return t;
}

namespace {

// A count key's value: a JSON integer in [0, hi]; anything else is the "wrong type" error of apply().
int count_in(const nlohmann::json& v, std::int64_t hi) {
  if (!v.is_number_integer() || v.get<std::int64_t>() < 0 || v.get<std::int64_t>() > hi)
    throw nlohmann::json::type_error::create(302, "expected a count", nullptr);
  return v.get<int>();
}

}  // namespace

Tuning Tuning::apply(const nlohmann::json& tune, Tuning t) {
  if (tune.is_null()) return t;
  if (!tune.is_object()) throw InvalidArgument(fmt::format("options: param: tune: expected a JSON object, got {}", tune.dump()));
  for (const auto& [k, v] : tune.items()) {
    try {
      if (k == "gqa_tile") t.gqa_tile = v.get<std::string>();
      else if (k == "decode_tile") t.decode_tile = v.get<std::string>();
      else if (k == "decode_splits") t.decode_splits = count_in(v, 65535);
      else if (k == "li_force_slab") t.li_force_slab = v.get<bool>();
      else if (k == "latent_tile") t.latent_tile = count_in(v, 1024);
      else if (k == "nsa_selected_tile") t.nsa_selected_tile = v.get<std::string>();
      else if (k == "nsa_topk_tile") t.nsa_topk_tile = v.get<std::string>();
      else if (k == "gqa_bwd_band") t.gqa_bwd_band = count_in(v, 65535);
      else if (k == "gqa_fwd_persistent") t.gqa_fwd_persistent = v.get<bool>();
      else if (k == "gqa_fwd_q_tma") t.gqa_fwd_q_tma = v.get<bool>();
      else if (k == "gqa_bwd_hopper_d256") t.gqa_bwd_hopper_d256 = v.get<bool>();
      else
        throw InvalidArgument(fmt::format("options: param: tune.{}: expected one of gqa_tile, decode_tile, "
                                          "decode_splits, li_force_slab, latent_tile, nsa_selected_tile, nsa_topk_tile, gqa_bwd_band, "
                                          "gqa_fwd_persistent, gqa_fwd_q_tma, gqa_bwd_hopper_d256, got an unknown key", k));
    } catch (const nlohmann::json::exception&) {
      throw InvalidArgument(fmt::format("options: param: tune.{}: wrong type, got {}", k, v.dump()));
    }
  }
  return t;
}

}  // namespace attnjit::ops
