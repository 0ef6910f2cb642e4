// The contract's argument table of every op (SPEC.md section 2): for each tensor its name, role
// ("in", "out", or "inout" for buffers written in place), rank, dtypes, shape and whether it may be
// absent; for each construction-time parameter its name, type and default (null: unset, with the
// meaning SPEC.md gives; "required": no default). "impl" and "backend" are appended to every op.
// Served by attnjit_op_info(), `attnjit info --op NAME` and the Python package's signatures.
#include "runtime/op_signatures.hpp"

#include <fmt/format.h>

#include "attnjit/error.hpp"
#include "ops/registry.hpp"

namespace attnjit::detail {

namespace {

// NOTE: one literal rather than a struct per op: the Python package and the C ABI both hand the
// JSON on unchanged, and the unit of review is SPEC.md's table.
constexpr const char* kSignatures = R"json(
[
 {"name": "paged_kv_write", "spec": "2.19",
  "tensors": [
   {"name": "k", "role": "in", "rank": 3, "shape": "[N, H_kv, D]", "dtypes": ["fp16", "bf16"]},
   {"name": "v", "role": "in", "rank": 3, "shape": "[N, H_kv, D]", "dtypes": ["fp16", "bf16"]},
   {"name": "k_pages", "role": "inout", "rank": 4, "shape": "[NP, PS, H_kv, D]", "dtypes": ["fp16", "bf16", "e4m3"]},
   {"name": "v_pages", "role": "inout", "rank": 4, "shape": "[NP, PS, H_kv, D]", "dtypes": ["fp16", "bf16", "e4m3"]},
   {"name": "slot_mapping", "role": "in", "rank": 1, "shape": "[N]", "dtypes": ["int64"]},
   {"name": "k_scale", "role": "in", "rank": 1, "shape": "[1]", "dtypes": ["fp32"], "optional": true},
   {"name": "v_scale", "role": "in", "rank": 1, "shape": "[1]", "dtypes": ["fp32"], "optional": true}],
  "params": [
   {"name": "validate_inputs", "type": "bool", "default": false}]},
 {"name": "gqa_fwd", "spec": "2.7", "lse": "lse",
  "tensors": [
   {"name": "q", "role": "in", "rank": 4, "shape": "[B, S_q, H, D]", "dtypes": ["fp16", "bf16", "e4m3"]},
   {"name": "k", "role": "in", "rank": 4, "shape": "[B, S_kv, H_kv, D]", "dtypes": ["fp16", "bf16", "e4m3"]},
   {"name": "v", "role": "in", "rank": 4, "shape": "[B, S_kv, H_kv, D]", "dtypes": ["fp16", "bf16", "e4m3"]},
   {"name": "q_scale", "role": "in", "rank": 2, "shape": "[B, H_kv]", "dtypes": ["fp32"], "optional": true},
   {"name": "k_scale", "role": "in", "rank": 2, "shape": "[B, H_kv]", "dtypes": ["fp32"], "optional": true},
   {"name": "v_scale", "role": "in", "rank": 2, "shape": "[B, H_kv]", "dtypes": ["fp32"], "optional": true},
   {"name": "rope_cos", "role": "in", "rank": 2, "shape": "[P, R/2]", "dtypes": ["fp16", "bf16"], "optional": true},
   {"name": "rope_sin", "role": "in", "rank": 2, "shape": "[P, R/2]", "dtypes": ["fp16", "bf16"], "optional": true},
   {"name": "o", "role": "out", "rank": 4, "shape": "[B, S_q, H, D]", "dtypes": ["fp16", "bf16"]},
   {"name": "lse", "role": "out", "rank": 3, "shape": "[B, H, S_q]", "dtypes": ["fp32"], "optional": true}],
  "params": "gqa"},
 {"name": "gqa_varlen_fwd", "spec": "2.8", "lse": "lse",
  "tensors": [
   {"name": "q", "role": "in", "rank": 3, "shape": "[T_q, H, D]", "dtypes": ["fp16", "bf16", "e4m3"]},
   {"name": "k", "role": "in", "rank": 3, "shape": "[T_kv, H_kv, D]", "dtypes": ["fp16", "bf16", "e4m3"]},
   {"name": "v", "role": "in", "rank": 3, "shape": "[T_kv, H_kv, D]", "dtypes": ["fp16", "bf16", "e4m3"]},
   {"name": "cu_seqlens_q", "role": "in", "rank": 1, "shape": "[B + 1]", "dtypes": ["int32"]},
   {"name": "cu_seqlens_kv", "role": "in", "rank": 1, "shape": "[B + 1]", "dtypes": ["int32"]},
   {"name": "q_scale", "role": "in", "rank": 2, "shape": "[B, H_kv]", "dtypes": ["fp32"], "optional": true},
   {"name": "k_scale", "role": "in", "rank": 2, "shape": "[B, H_kv]", "dtypes": ["fp32"], "optional": true},
   {"name": "v_scale", "role": "in", "rank": 2, "shape": "[B, H_kv]", "dtypes": ["fp32"], "optional": true},
   {"name": "rope_cos", "role": "in", "rank": 2, "shape": "[P, R/2]", "dtypes": ["fp16", "bf16"], "optional": true},
   {"name": "rope_sin", "role": "in", "rank": 2, "shape": "[P, R/2]", "dtypes": ["fp16", "bf16"], "optional": true},
   {"name": "sinks", "role": "in", "rank": 1, "shape": "[H]", "dtypes": ["fp32"], "optional": true},
   {"name": "o", "role": "out", "rank": 3, "shape": "[T_q, H, D]", "dtypes": ["fp16", "bf16"]},
   {"name": "lse", "role": "out", "rank": 2, "shape": "[T_q, H]", "dtypes": ["fp32"], "optional": true}],
  "params": "gqa"},
 {"name": "gqa_paged_fwd", "spec": "2.9",
  "tensors": [
   {"name": "q", "role": "in", "rank": 3, "shape": "[T_q, H, D]", "dtypes": ["fp16", "bf16", "e4m3"]},
   {"name": "k_pages", "role": "in", "rank": 4, "shape": "[NP, PS, H_kv, D]", "dtypes": ["fp16", "bf16", "e4m3"]},
   {"name": "v_pages", "role": "in", "rank": 4, "shape": "[NP, PS, H_kv, D]", "dtypes": ["fp16", "bf16", "e4m3"]},
   {"name": "page_table", "role": "in", "rank": 2, "shape": "[B, W]", "dtypes": ["int32"]},
   {"name": "cache_seqlens", "role": "in", "rank": 1, "shape": "[B]", "dtypes": ["int32"]},
   {"name": "cu_seqlens_q", "role": "in", "rank": 1, "shape": "[B + 1]", "dtypes": ["int32"]},
   {"name": "q_scale", "role": "in", "rank": 2, "shape": "[B, H_kv]", "dtypes": ["fp32"], "optional": true},
   {"name": "k_scale", "role": "in", "rank": 2, "shape": "[B, H_kv]", "dtypes": ["fp32"], "optional": true},
   {"name": "v_scale", "role": "in", "rank": 2, "shape": "[B, H_kv]", "dtypes": ["fp32"], "optional": true},
   {"name": "rope_cos", "role": "in", "rank": 2, "shape": "[P, R/2]", "dtypes": ["fp16", "bf16"], "optional": true},
   {"name": "rope_sin", "role": "in", "rank": 2, "shape": "[P, R/2]", "dtypes": ["fp16", "bf16"], "optional": true},
   {"name": "sinks", "role": "in", "rank": 1, "shape": "[H]", "dtypes": ["fp32"], "optional": true},
   {"name": "o", "role": "out", "rank": 3, "shape": "[T_q, H, D]", "dtypes": ["fp16", "bf16"]}],
  "params": "gqa"},
 {"name": "mha_decode_paged", "spec": "2.11",
  "tensors": [
   {"name": "q", "role": "in", "rank": 4, "shape": "[B, S_q, H, D]", "dtypes": ["fp16", "bf16"]},
   {"name": "k", "role": "in", "rank": 3, "shape": "[N_kv, H, D]", "dtypes": ["fp16", "bf16"]},
   {"name": "v", "role": "in", "rank": 3, "shape": "[N_kv, H, D]", "dtypes": ["fp16", "bf16"]},
   {"name": "real_seqlen_kv", "role": "in", "rank": 1, "shape": "[B]", "dtypes": ["int32"]},
   {"name": "block_table", "role": "in", "rank": 2, "shape": "[B, W]", "dtypes": ["int32"]},
   {"name": "o", "role": "out", "rank": 4, "shape": "[B, S_q, H, D]", "dtypes": ["fp16", "bf16"]}],
  "params": [
   {"name": "page_size", "type": "int", "default": null, "required": true},
   {"name": "is_causal", "type": "bool", "default": false},
   {"name": "validate_inputs", "type": "bool", "default": false}]},
 {"name": "gqa_prefill_paged_append", "spec": "2.10",
  "tensors": [
   {"name": "q", "role": "in", "rank": 3, "shape": "[T_q, H, D]", "dtypes": ["fp16", "bf16"]},
   {"name": "k_new", "role": "in", "rank": 3, "shape": "[T_q, H_kv, D]", "dtypes": ["fp16", "bf16"]},
   {"name": "v_new", "role": "in", "rank": 3, "shape": "[T_q, H_kv, D]", "dtypes": ["fp16", "bf16"]},
   {"name": "k_pages", "role": "inout", "rank": 3, "shape": "[PT, H_kv, D]", "dtypes": ["fp16", "bf16", "e4m3"]},
   {"name": "v_pages", "role": "inout", "rank": 3, "shape": "[PT, H_kv, D]", "dtypes": ["fp16", "bf16", "e4m3"]},
   {"name": "k_scale", "role": "in", "rank": 1, "shape": "[1]", "dtypes": ["fp32"]},
   {"name": "v_scale", "role": "in", "rank": 1, "shape": "[1]", "dtypes": ["fp32"]},
   {"name": "cu_seqlens_q", "role": "in", "rank": 1, "shape": "[B + 1]", "dtypes": ["int32"]},
   {"name": "cache_seqlens", "role": "in", "rank": 1, "shape": "[B]", "dtypes": ["int32"]},
   {"name": "block_table", "role": "in", "rank": 2, "shape": "[B, W]", "dtypes": ["int32"]},
   {"name": "o", "role": "out", "rank": 3, "shape": "[T_q, H, D]", "dtypes": ["fp16", "bf16"]}],
  "params": [
   {"name": "page_size", "type": "int", "default": null, "required": true},
   {"name": "max_seqlen_q", "type": "int", "default": null, "required": true},
   {"name": "is_causal", "type": "bool", "default": true},
   {"name": "cache_dtype", "type": "dtype", "default": null, "choices": ["fp16", "bf16", "e4m3"]},
   {"name": "sm_scale", "type": "float", "default": null},
   {"name": "softcap", "type": "float", "default": null},
   {"name": "fuse_rope", "type": "bool", "default": false},
   {"name": "rope_base", "type": "float", "default": 10000.0},
   {"name": "max_position", "type": "int", "default": null},
   {"name": "rotary_dim", "type": "int", "default": null},
   {"name": "validate_inputs", "type": "bool", "default": false}]},
 {"name": "fp8_lightning_indexer", "spec": "2.3",
  "tensors": [
   {"name": "index_q", "role": "in", "rank": 4, "shape": "[B, S, H, D]", "dtypes": ["bf16", "e4m3"]},
   {"name": "index_k", "role": "in", "rank": 4, "shape": "[B, S_kv, G, D]", "dtypes": ["bf16", "e4m3"]},
   {"name": "weights", "role": "in", "rank": 2, "shape": "[S, H]", "dtypes": ["fp32"]},
   {"name": "cu_seqlen_ks", "role": "in", "rank": 1, "shape": "[S]", "dtypes": ["int32"]},
   {"name": "cu_seqlen_ke", "role": "in", "rank": 1, "shape": "[S]", "dtypes": ["int32"]},
   {"name": "index_k_scale", "role": "in", "rank": 3, "shape": "[B, S_kv, G]", "dtypes": ["fp32"], "optional": true},
   {"name": "logits", "role": "out", "rank": 4, "shape": "[B, S, S_kv, G]", "dtypes": ["fp32"]}],
  "params": [
   {"name": "clean_logits", "type": "bool", "default": true},
   {"name": "validate_inputs", "type": "bool", "default": false}]},
 {"name": "topk_select", "spec": "2.2",
  "tensors": [
   {"name": "index_score", "role": "in", "rank": 4, "shape": "[B, S, S_kv, G]", "dtypes": ["fp32"]},
   {"name": "starts", "role": "in", "rank": 2, "shape": "[B, S]", "dtypes": ["int32"], "optional": true},
   {"name": "ends", "role": "in", "rank": 2, "shape": "[B, S]", "dtypes": ["int32"], "optional": true},
   {"name": "indexes", "role": "out", "rank": 4, "shape": "[B, S, G, topk]", "dtypes": ["int32"]}],
  "params": [
   {"name": "topk", "type": "int", "default": null, "required": true}]},
 {"name": "lightning_indexer", "spec": "2.1",
  "tensors": [
   {"name": "q", "role": "in", "rank": 4, "shape": "[B, T, H, D]", "dtypes": ["fp16", "bf16", "fp32"]},
   {"name": "k", "role": "in", "rank": 3, "shape": "[B, S, D]", "dtypes": ["fp16", "bf16", "fp32"]},
   {"name": "weights", "role": "in", "rank": 3, "shape": "[B, T, H]", "dtypes": ["fp16", "bf16", "fp32"]},
   {"name": "cu_seqlens", "role": "in", "rank": 1, "shape": "[N + 1]", "dtypes": ["int32"], "optional": true},
   {"name": "cu_seqlens_k", "role": "in", "rank": 1, "shape": "[N + 1]", "dtypes": ["int32"], "optional": true},
   {"name": "indices", "role": "out", "rank": 3, "shape": "[B, T, topk]", "dtypes": ["int32"]}],
  "params": [
   {"name": "topk", "type": "int", "default": null, "required": true},
   {"name": "causal", "type": "bool", "default": false},
   {"name": "compress_ratio", "type": "int", "default": 1},
   {"name": "deterministic", "type": "bool", "default": false},
   {"name": "validate_inputs", "type": "bool", "default": false}]},
 {"name": "gqa_bwd", "spec": "2.12",
  "tensors": [
   {"name": "q", "role": "in", "rank": 4, "shape": "[B, S, H, D]", "dtypes": ["fp16", "bf16"]},
   {"name": "k", "role": "in", "rank": 4, "shape": "[B, S, H_kv, D]", "dtypes": ["fp16", "bf16"]},
   {"name": "v", "role": "in", "rank": 4, "shape": "[B, S, H_kv, D]", "dtypes": ["fp16", "bf16"]},
   {"name": "o", "role": "in", "rank": 4, "shape": "q's shape", "dtypes": ["fp16", "bf16"]},
   {"name": "do", "role": "in", "rank": 4, "shape": "q's shape", "dtypes": ["fp16", "bf16"]},
   {"name": "lse", "role": "in", "rank": 3, "shape": "[B, H, S]", "dtypes": ["fp32"]},
   {"name": "dq", "role": "out", "rank": 4, "shape": "q's shape", "dtypes": ["fp16", "bf16"]},
   {"name": "dk", "role": "out", "rank": 4, "shape": "k's shape", "dtypes": ["fp16", "bf16"]},
   {"name": "dv", "role": "out", "rank": 4, "shape": "v's shape", "dtypes": ["fp16", "bf16"]}],
  "params": [
   {"name": "is_causal", "type": "bool", "default": true},
   {"name": "sm_scale", "type": "float", "default": null},
   {"name": "deterministic", "type": "bool", "default": false},
   {"name": "window_size_left", "type": "int", "default": -1},
   {"name": "window_size_right", "type": "int", "default": -1}]},
 {"name": "mla_decode", "spec": "2.13",
  "tensors": [
   {"name": "q", "role": "in", "rank": [3, 4], "shape": "[B, H, D] or [B, S_q, H, D]", "dtypes": ["fp16", "bf16"]},
   {"name": "q_pe", "role": "in", "rank": [3, 4], "shape": "q's shape with PE = 64", "dtypes": ["fp16", "bf16"]},
   {"name": "k", "role": "in", "rank": 4, "shape": "[B, N_kv, H_kv, D], or [NP, PS, H_kv, D] with block_table", "dtypes": ["fp16", "bf16"]},
   {"name": "k_pe", "role": "in", "rank": 4, "shape": "[B, N_kv, H_kv, PE], or [NP, PS, H_kv, PE] with block_table", "dtypes": ["fp16", "bf16"]},
   {"name": "cache_seqlens", "role": "in", "rank": 1, "shape": "[B] (required with block_table)", "dtypes": ["int32"], "optional": true},
   {"name": "block_table", "role": "in", "rank": 2, "shape": "[B, W]", "dtypes": ["int32"], "optional": true},
   {"name": "o", "role": "out", "rank": [3, 4], "shape": "q's shape", "dtypes": ["fp16", "bf16"]}],
  "params": [
   {"name": "validate_inputs", "type": "bool", "default": false}]},
 {"name": "dsa_decode", "spec": "2.18",
  "tensors": [
   {"name": "q", "role": "in", "rank": 4, "shape": "[B, S, H, D + dim_tail]", "dtypes": ["fp16", "bf16"]},
   {"name": "kv", "role": "in", "rank": 4, "shape": "[B, S_kv, H_kv, D + dim_tail]", "dtypes": ["fp16", "bf16"]},
   {"name": "indices", "role": "in", "rank": 4, "shape": "[B, S, H_kv, K]", "dtypes": ["int32"]},
   {"name": "o", "role": "out", "rank": 4, "shape": "[B, S, H, D]", "dtypes": ["fp16", "bf16"]}],
  "params": [
   {"name": "dim_tail", "type": "int", "default": null, "required": true},
   {"name": "stride_kv", "type": "int", "default": null, "required": true},
   {"name": "q_start_index_s", "type": "int", "default": null, "required": true},
   {"name": "sm_scale", "type": "float", "default": null},
   {"name": "is_causal", "type": "bool", "default": true}]},
 {"name": "bsa_bwd", "spec": "2.5",
  "tensors": [
   {"name": "do", "role": "in", "rank": 4, "shape": "q's shape", "dtypes": ["fp16", "bf16"]},
   {"name": "q", "role": "in", "rank": 4, "shape": "[B, H_q, S_q, D] (bhsd) / [B, S_q, H_q, D] (bshd)", "dtypes": ["fp16", "bf16"]},
   {"name": "k", "role": "in", "rank": 4, "shape": "[B, H_kv, S_kv, D] (bhsd) / [B, S_kv, H_kv, D] (bshd)", "dtypes": ["fp16", "bf16"]},
   {"name": "v", "role": "in", "rank": 4, "shape": "[B, H_kv, S_kv, D] (bhsd) / [B, S_kv, H_kv, D] (bshd)", "dtypes": ["fp16", "bf16"]},
   {"name": "o", "role": "in", "rank": 4, "shape": "q's shape", "dtypes": ["fp16", "bf16"]},
   {"name": "lse", "role": "in", "rank": 3, "shape": "[B, H_q, S_q]", "dtypes": ["fp32"]},
   {"name": "q2k_block_index", "role": "in", "rank": 4, "shape": "[B, H_q, N_q, K_max]", "dtypes": ["int32"]},
   {"name": "q2k_block_nums", "role": "in", "rank": 3, "shape": "[B, H_q, N_q]", "dtypes": ["int32"], "optional": true},
   {"name": "block_sizes", "role": "in", "rank": [1, 2, 3], "shape": "[N_kv], [B, N_kv] or [B, H_q, N_kv]", "dtypes": ["int32"], "optional": true},
   {"name": "dq", "role": "out", "rank": 4, "shape": "q's shape", "dtypes": ["fp16", "bf16"]},
   {"name": "dk", "role": "out", "rank": 4, "shape": "k's shape", "dtypes": ["fp16", "bf16"]},
   {"name": "dv", "role": "out", "rank": 4, "shape": "v's shape", "dtypes": ["fp16", "bf16"]}],
  "params": [
   {"name": "layout", "type": "string", "default": "bhsd", "choices": ["bhsd", "bshd"]},
   {"name": "sparse_block_size", "type": "int", "default": 64, "choices": [64, 128]},
   {"name": "scale", "type": "float", "default": null},
   {"name": "block_sparse_num", "type": "int", "default": null},
   {"name": "bucket_size_blocks", "type": "int", "default": null},
   {"name": "validate_inputs", "type": "bool", "default": false}]},
 {"name": "bsa_fwd", "spec": "2.4", "lse": "lse",
  "tensors": [
   {"name": "q", "role": "in", "rank": 4, "shape": "[B, H_q, S_q, D] (bhsd) / [B, S_q, H_q, D] (bshd)", "dtypes": ["fp16", "bf16"]},
   {"name": "k", "role": "in", "rank": 4, "shape": "[B, H_kv, S_kv, D] (bhsd) / [B, S_kv, H_kv, D] (bshd)", "dtypes": ["fp16", "bf16"]},
   {"name": "v", "role": "in", "rank": 4, "shape": "[B, H_kv, S_kv, D_v] (bhsd) / [B, S_kv, H_kv, D_v] (bshd)", "dtypes": ["fp16", "bf16"]},
   {"name": "q2k_block_index", "role": "in", "rank": 4, "shape": "[B, H_q, N_q, K_max]", "dtypes": ["int32"]},
   {"name": "q2k_block_nums", "role": "in", "rank": 3, "shape": "[B, H_q, N_q]", "dtypes": ["int32"], "optional": true},
   {"name": "block_sizes", "role": "in", "rank": [1, 2, 3], "shape": "[N_kv], [B, N_kv] or [B, H_q, N_kv]", "dtypes": ["int32"], "optional": true},
   {"name": "o", "role": "out", "rank": 4, "shape": "q's layout with head dim D_v", "dtypes": ["fp16", "bf16"]},
   {"name": "lse", "role": "out", "rank": 3, "shape": "[B, H_q, S_q]", "dtypes": ["fp32"], "optional": true}],
  "params": [
   {"name": "layout", "type": "string", "default": "bhsd", "choices": ["bhsd", "bshd"]},
   {"name": "sparse_block_size", "type": "int", "default": 64, "choices": [64, 128]},
   {"name": "scale", "type": "float", "default": null},
   {"name": "block_sparse_num", "type": "int", "default": null},
   {"name": "allow_empty_block_nums", "type": "bool", "default": false},
   {"name": "kv_splits", "type": "int", "default": 1},
   {"name": "validate_inputs", "type": "bool", "default": false}]},
 {"name": "bsa_fp8_fwd", "spec": "2.6",
  "tensors": [
   {"name": "q", "role": "in", "rank": 4, "shape": "[B, H, S_q, 128]", "dtypes": ["bf16"]},
   {"name": "k", "role": "in", "rank": 4, "shape": "[B, H, S_kv, 128]", "dtypes": ["bf16"]},
   {"name": "v", "role": "in", "rank": 4, "shape": "[B, H, S_kv, 128]", "dtypes": ["bf16"]},
   {"name": "q2k_block_index", "role": "in", "rank": 4, "shape": "[B, H, N_q, K_max]", "dtypes": ["int32"]},
   {"name": "q2k_block_nums", "role": "in", "rank": 3, "shape": "[B, H, N_q]", "dtypes": ["int32"], "optional": true},
   {"name": "block_sizes", "role": "in", "rank": [1, 2, 3], "shape": "[N_kv], [B, N_kv] or [B, H, N_kv]", "dtypes": ["int32"], "optional": true},
   {"name": "o", "role": "out", "rank": 4, "shape": "[B, H, S_q, 128]", "dtypes": ["bf16"]}],
  "params": [
   {"name": "scale", "type": "float", "default": null},
   {"name": "block_sparse_num", "type": "int", "default": null},
   {"name": "allow_empty_block_nums", "type": "bool", "default": false},
   {"name": "validate_inputs", "type": "bool", "default": false}]},
 {"name": "nsa_compressed_fwd", "spec": "2.15", "lse": "lse",
  "tensors": [
   {"name": "q", "role": "in", "rank": 3, "shape": "[T, H, DK]", "dtypes": ["fp16", "bf16"]},
   {"name": "k_cmp", "role": "in", "rank": 3, "shape": "[C, H_kv, DK]", "dtypes": ["fp16", "bf16"]},
   {"name": "v_cmp", "role": "in", "rank": 3, "shape": "[C, H_kv, DV]", "dtypes": ["fp16", "bf16"]},
   {"name": "offsets", "role": "in", "rank": 1, "shape": "[N + 1]", "dtypes": ["int32"]},
   {"name": "chunk_offsets", "role": "in", "rank": 1, "shape": "[N + 1]", "dtypes": ["int32"]},
   {"name": "token_indices", "role": "in", "rank": 2, "shape": "[T, 2]", "dtypes": ["int32"]},
   {"name": "o", "role": "out", "rank": 3, "shape": "[T, H, DV]", "dtypes": ["fp16", "bf16"]},
   {"name": "lse", "role": "out", "rank": 2, "shape": "[T, H]", "dtypes": ["fp32"], "optional": true}],
  "params": [
   {"name": "scale", "type": "float", "default": null, "required": true},
   {"name": "bs", "type": "int", "default": null, "required": true},
   {"name": "validate_inputs", "type": "bool", "default": false}]},
 {"name": "nsa_topk", "spec": "2.16",
  "tensors": [
   {"name": "q", "role": "in", "rank": 3, "shape": "[T, H, D]", "dtypes": ["fp16", "bf16"]},
   {"name": "k_cmp", "role": "in", "rank": 3, "shape": "[C, H_kv, D]", "dtypes": ["fp16", "bf16"]},
   {"name": "offsets", "role": "in", "rank": 1, "shape": "[N + 1]", "dtypes": ["int32"]},
   {"name": "chunk_offsets", "role": "in", "rank": 1, "shape": "[N + 1]", "dtypes": ["int32"]},
   {"name": "token_indices", "role": "in", "rank": 2, "shape": "[T, 2]", "dtypes": ["int32"]},
   {"name": "block_indices", "role": "out", "rank": 3, "shape": "[T, H_kv, S]", "dtypes": ["int32"]}],
  "params": [
   {"name": "scale", "type": "float", "default": null, "required": true},
   {"name": "selected_block_num", "type": "int", "default": null, "required": true},
   {"name": "bs", "type": "int", "default": null, "required": true},
   {"name": "validate_inputs", "type": "bool", "default": false}]},
 {"name": "nsa_selected_fwd", "spec": "2.17",
  "tensors": [
   {"name": "q", "role": "in", "rank": 3, "shape": "[T, H, D]", "dtypes": ["fp16", "bf16"]},
   {"name": "k", "role": "in", "rank": 3, "shape": "[T, H_kv, D]", "dtypes": ["fp16", "bf16"]},
   {"name": "v", "role": "in", "rank": 3, "shape": "[T, H_kv, D]", "dtypes": ["fp16", "bf16"]},
   {"name": "block_indices", "role": "in", "rank": 3, "shape": "[T, H_kv, SEL]", "dtypes": ["int32"]},
   {"name": "block_counts", "role": "in", "rank": 2, "shape": "[T, H_kv]", "dtypes": ["int32"]},
   {"name": "offsets", "role": "in", "rank": 1, "shape": "[N + 1]", "dtypes": ["int32"]},
   {"name": "token_indices", "role": "in", "rank": 2, "shape": "[T, 2]", "dtypes": ["int32"]},
   {"name": "o", "role": "out", "rank": 3, "shape": "[T, H, D]", "dtypes": ["fp16", "bf16"]}],
  "params": [
   {"name": "is_causal", "type": "bool", "default": null, "required": true},
   {"name": "scale", "type": "float", "default": null, "required": true},
   {"name": "block_size", "type": "int", "default": null, "required": true},
   {"name": "validate_inputs", "type": "bool", "default": false}]}
]
)json";

nlohmann::json gqa_params() {
  return nlohmann::json::parse(R"json([
   {"name": "is_causal", "type": "bool", "default": true},
   {"name": "window_size_left", "type": "int", "default": -1},
   {"name": "window_size_right", "type": "int", "default": -1},
   {"name": "sm_scale", "type": "float", "default": null},
   {"name": "softcap", "type": "float", "default": null},
   {"name": "pos_encoding_mode", "type": "string", "default": "none", "choices": ["none", "rope"]},
   {"name": "rotary_dim", "type": "int", "default": null},
   {"name": "rope_layout", "type": "string", "default": "neox", "choices": ["neox", "interleaved"]},
   {"name": "out_dtype", "type": "dtype", "default": null, "choices": ["fp16", "bf16"]},
   {"name": "validate_inputs", "type": "bool", "default": false}])json");
}

nlohmann::json build() {
  nlohmann::json all = nlohmann::json::parse(kSignatures);
  for (auto& op : all) {
    if (op["params"].is_string()) op["params"] = gqa_params();
    for (auto& t : op["tensors"]) {
      if (!t.contains("optional")) t["optional"] = false;
    }
    for (auto& p : op["params"]) {
      if (!p.contains("required")) p["required"] = false;
    }
    op["params"].push_back({{"name", "impl"}, {"type", "string"}, {"default", "kernel"}, {"required", false},
                            {"choices", {"kernel", "reference"}}});
    op["params"].push_back({{"name", "backend"}, {"type", "string"}, {"default", "auto"}, {"required", false},
                            {"choices", {"auto", "portable", "hopper"}}});
    if (!op.contains("lse")) op["lse"] = nullptr;
  }
  return all;
}

}  // namespace

const nlohmann::json& op_signatures() {
  static const nlohmann::json all = build();
  return all;
}

const nlohmann::json& op_signature(std::string_view op) {
  find_op(op);  // unknown names: the registry's message, listing the known ops
  for (const auto& s : op_signatures())
    if (s["name"] == op) return s;
  throw Error(Status::kInternal, fmt::format("{}: no argument table in op_signatures.cpp", op));
}

}  // namespace attnjit::detail
