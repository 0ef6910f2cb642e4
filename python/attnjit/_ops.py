"""One function per op of SPEC.md, named as the op.

Every function takes the op's input tensors (torch tensors, objects with __dlpack__, numpy arrays;
attnjit.bf16()/attnjit.e4m3() for numpy storage of those dtypes), allocates the outputs with the
contract's shapes and dtypes next to the first input (or writes into `out=`), and returns them. The
keyword parameters are the contract's, with its names and defaults; None means "unset" (the meaning
SPEC.md gives, e.g. sm_scale = 1/sqrt(D)). Common keywords:

    impl     "kernel" (CUDA tensors) or "reference" (host tensors, the CPU reference); None picks by
             where the first input lives
    backend  "auto", "portable" or "hopper"
    stream   a CUDA stream (torch.cuda.Stream or a CUstream handle); None: torch's current stream
    runtime  an attnjit.Runtime; None: the default one (attnjit.configure)

Errors: ValueError (an argument breaks a rule; the message names the op, the rule, the argument and
the value), NotImplementedError (a well-formed call this build or backend does not serve),
attnjit.CompileError / CudaError / CacheError (RuntimeError subclasses).
"""
from __future__ import annotations

from typing import Any, Optional, Sequence, Tuple, Union

from ._core import Runtime, call, dtype_of, empty

Tensor = Any  # torch.Tensor, numpy.ndarray, attnjit.HostView, or any object with __dlpack__


def _out(out: Any, n: int, op: str) -> Tuple[Any, ...]:
    if out is None:
        return (None,) * n
    if n == 1:
        return (out,)
    if not isinstance(out, (tuple, list)) or len(out) != n:
        raise ValueError(f"{op}: out: expected a tuple of {n} tensors, got {out!r}")
    return tuple(out)


def _gqa_params(is_causal, window_size_left, window_size_right, sm_scale, softcap, pos_encoding_mode, rotary_dim,
                rope_layout, out_dtype, validate_inputs, window_size, softmax_scale):
    if window_size is not None:
        window_size_left, window_size_right = window_size
    if softmax_scale is not None:
        sm_scale = softmax_scale
    return (("is_causal", is_causal), ("window_size_left", window_size_left),
            ("window_size_right", window_size_right), ("sm_scale", sm_scale), ("softcap", softcap),
            ("pos_encoding_mode", pos_encoding_mode), ("rotary_dim", rotary_dim), ("rope_layout", rope_layout),
            ("out_dtype", out_dtype), ("validate_inputs", validate_inputs))


def _compute_dtype(q: Tensor, out_dtype: Optional[str]) -> str:
    dt = dtype_of(q)
    return out_dtype if dt == "e4m3" and out_dtype else dt


def paged_kv_write(k: Tensor, v: Tensor, k_pages: Tensor, v_pages: Tensor, slot_mapping: Tensor,
                   k_scale: Optional[Tensor] = None, v_scale: Optional[Tensor] = None, *,
                   validate_inputs: bool = False, impl: Optional[str] = None, backend: str = "auto",
                   stream: Any = None, runtime: Optional[Runtime] = None) -> None:
    """Scatters the rows of k, v [N, H_kv, D] into the page pools k_pages, v_pages [NP, PS, H_kv, D]
    (in place) at slot_mapping [N] int64 (page * PS + offset; -1 skips). An e4m3 pool takes
    k_scale, v_scale [1] fp32 (divisors). SPEC.md 2.19. Returns None."""
    call("paged_kv_write", (("k", k), ("v", v), ("k_pages", k_pages), ("v_pages", v_pages),
                            ("slot_mapping", slot_mapping), ("k_scale", k_scale), ("v_scale", v_scale)),
         (("validate_inputs", validate_inputs),), impl, backend, (), stream, runtime)


def gqa_fwd(q: Tensor, k: Tensor, v: Tensor, *, q_scale: Optional[Tensor] = None, k_scale: Optional[Tensor] = None,
            v_scale: Optional[Tensor] = None, rope_cos: Optional[Tensor] = None, rope_sin: Optional[Tensor] = None,
            is_causal: bool = True, window_size_left: int = -1, window_size_right: int = -1,
            sm_scale: Optional[float] = None, softcap: Optional[float] = None, pos_encoding_mode: str = "none",
            rotary_dim: Optional[int] = None, rope_layout: str = "neox", out_dtype: Optional[str] = None,
            validate_inputs: bool = False, return_lse: bool = False, out: Any = None,
            window_size: Optional[Tuple[int, int]] = None, softmax_scale: Optional[float] = None,
            impl: Optional[str] = None, backend: str = "auto", stream: Any = None,
            runtime: Optional[Runtime] = None) -> Union[Tensor, Tuple[Tensor, Tensor]]:
    """Dense GQA attention, BSHD: q [B, S_q, H, D], k, v [B, S_kv, H_kv, D] -> o [B, S_q, H, D]
    (and lse [B, H, S_q] fp32, natural log, with return_lse=True). SPEC.md 2.7.

    is_causal defaults to True (bottom-right aligned), as the contract says; flash-attn and
    FlashInfer default to False. flash-attn spellings accepted: window_size=(left, right),
    softmax_scale (= sm_scale). FP8 (e4m3) q/k/v need out_dtype and q_scale, k_scale, v_scale
    [B, H_kv] fp32; pos_encoding_mode="rope" needs rope_cos, rope_sin [P, R/2].
    out: o, or (o, lse) with return_lse."""
    params = _gqa_params(is_causal, window_size_left, window_size_right, sm_scale, softcap, pos_encoding_mode,
                         rotary_dim, rope_layout, out_dtype, validate_inputs, window_size, softmax_scale)
    o, lse = _out(out, 2, "gqa_fwd") if return_lse else (_out(out, 1, "gqa_fwd")[0], None)
    B, S_q, H, _D = q.shape
    if o is None:
        o = empty(q, q.shape, _compute_dtype(q, out_dtype))
    if return_lse and lse is None:
        lse = empty(q, (B, H, S_q), "fp32")
    call("gqa_fwd", (("q", q), ("k", k), ("v", v), ("q_scale", q_scale), ("k_scale", k_scale),
                     ("v_scale", v_scale), ("rope_cos", rope_cos), ("rope_sin", rope_sin)),
         params, impl, backend, (("o", o), ("lse", lse)), stream, runtime)
    return (o, lse) if return_lse else o


def gqa_varlen_fwd(q: Tensor, k: Tensor, v: Tensor, cu_seqlens_q: Tensor, cu_seqlens_kv: Tensor, *,
                   q_scale: Optional[Tensor] = None, k_scale: Optional[Tensor] = None,
                   v_scale: Optional[Tensor] = None, rope_cos: Optional[Tensor] = None,
                   rope_sin: Optional[Tensor] = None, sinks: Optional[Tensor] = None, is_causal: bool = True,
                   window_size_left: int = -1, window_size_right: int = -1, sm_scale: Optional[float] = None,
                   softcap: Optional[float] = None, pos_encoding_mode: str = "none", rotary_dim: Optional[int] = None,
                   rope_layout: str = "neox", out_dtype: Optional[str] = None, validate_inputs: bool = False,
                   return_lse: bool = False, out: Any = None, window_size: Optional[Tuple[int, int]] = None,
                   softmax_scale: Optional[float] = None, impl: Optional[str] = None, backend: str = "auto",
                   stream: Any = None, runtime: Optional[Runtime] = None) -> Union[Tensor, Tuple[Tensor, Tensor]]:
    """Packed (THD) variable-length GQA: q [T_q, H, D], k, v [T_kv, H_kv, D], cu_seqlens_q,
    cu_seqlens_kv [B + 1] int32, optional sinks [H] fp32 -> o [T_q, H, D] (and lse [T_q, H] fp32
    with return_lse=True). is_causal defaults to True (flash-attn: False). SPEC.md 2.8."""
    params = _gqa_params(is_causal, window_size_left, window_size_right, sm_scale, softcap, pos_encoding_mode,
                         rotary_dim, rope_layout, out_dtype, validate_inputs, window_size, softmax_scale)
    o, lse = _out(out, 2, "gqa_varlen_fwd") if return_lse else (_out(out, 1, "gqa_varlen_fwd")[0], None)
    T_q, H, _D = q.shape
    if o is None:
        o = empty(q, q.shape, _compute_dtype(q, out_dtype))
    if return_lse and lse is None:
        lse = empty(q, (T_q, H), "fp32")
    call("gqa_varlen_fwd", (("q", q), ("k", k), ("v", v), ("cu_seqlens_q", cu_seqlens_q),
                            ("cu_seqlens_kv", cu_seqlens_kv), ("q_scale", q_scale), ("k_scale", k_scale),
                            ("v_scale", v_scale), ("rope_cos", rope_cos), ("rope_sin", rope_sin), ("sinks", sinks)),
         params, impl, backend, (("o", o), ("lse", lse)), stream, runtime)
    return (o, lse) if return_lse else o


def gqa_paged_fwd(q: Tensor, k_pages: Tensor, v_pages: Tensor, page_table: Tensor, cache_seqlens: Tensor,
                  cu_seqlens_q: Tensor, *, q_scale: Optional[Tensor] = None, k_scale: Optional[Tensor] = None,
                  v_scale: Optional[Tensor] = None, rope_cos: Optional[Tensor] = None,
                  rope_sin: Optional[Tensor] = None, sinks: Optional[Tensor] = None, is_causal: bool = True,
                  window_size_left: int = -1, window_size_right: int = -1, sm_scale: Optional[float] = None,
                  softcap: Optional[float] = None, pos_encoding_mode: str = "none", rotary_dim: Optional[int] = None,
                  rope_layout: str = "neox", out_dtype: Optional[str] = None, validate_inputs: bool = False,
                  out: Any = None, window_size: Optional[Tuple[int, int]] = None,
                  softmax_scale: Optional[float] = None, impl: Optional[str] = None, backend: str = "auto",
                  stream: Any = None, runtime: Optional[Runtime] = None) -> Tensor:
    """GQA over a caller-owned paged KV cache (read only): q [T_q, H, D], k_pages, v_pages
    [NP, PS, H_kv, D], page_table [B, W], cache_seqlens [B] (this call's tokens included),
    cu_seqlens_q [B + 1] int32 -> o [T_q, H, D]. is_causal defaults to True. SPEC.md 2.9."""
    params = _gqa_params(is_causal, window_size_left, window_size_right, sm_scale, softcap, pos_encoding_mode,
                         rotary_dim, rope_layout, out_dtype, validate_inputs, window_size, softmax_scale)
    o = _out(out, 1, "gqa_paged_fwd")[0]
    if o is None:
        o = empty(q, q.shape, _compute_dtype(q, out_dtype))
    call("gqa_paged_fwd", (("q", q), ("k_pages", k_pages), ("v_pages", v_pages), ("page_table", page_table),
                           ("cache_seqlens", cache_seqlens), ("cu_seqlens_q", cu_seqlens_q), ("q_scale", q_scale),
                           ("k_scale", k_scale), ("v_scale", v_scale), ("rope_cos", rope_cos),
                           ("rope_sin", rope_sin), ("sinks", sinks)),
         params, impl, backend, (("o", o),), stream, runtime)
    return o


def mha_decode_paged(q: Tensor, k: Tensor, v: Tensor, real_seqlen_kv: Tensor, block_table: Tensor, *,
                     page_size: int, is_causal: bool = False, validate_inputs: bool = False, out: Any = None,
                     impl: Optional[str] = None, backend: str = "auto", stream: Any = None,
                     runtime: Optional[Runtime] = None) -> Tensor:
    """MHA over one shared paged pool: q [B, S_q, H, D], k, v [N_kv, H, D], real_seqlen_kv [B],
    block_table [B, W] int32 -> o [B, S_q, H, D]. page_size is required; is_causal defaults to
    False here. SPEC.md 2.11."""
    o = _out(out, 1, "mha_decode_paged")[0]
    if o is None:
        o = empty(q, q.shape, dtype_of(q))
    call("mha_decode_paged", (("q", q), ("k", k), ("v", v), ("real_seqlen_kv", real_seqlen_kv),
                              ("block_table", block_table)),
         (("page_size", page_size), ("is_causal", is_causal), ("validate_inputs", validate_inputs)),
         impl, backend, (("o", o),), stream, runtime)
    return o


def gqa_prefill_paged_append(q: Tensor, k_new: Tensor, v_new: Tensor, k_pages: Tensor, v_pages: Tensor,
                             k_scale: Tensor, v_scale: Tensor, cu_seqlens_q: Tensor, cache_seqlens: Tensor,
                             block_table: Tensor, *, page_size: int, max_seqlen_q: int, is_causal: bool = True,
                             cache_dtype: Optional[str] = None, sm_scale: Optional[float] = None,
                             softcap: Optional[float] = None, fuse_rope: bool = False, rope_base: float = 10000.0,
                             max_position: Optional[int] = None, rotary_dim: Optional[int] = None,
                             validate_inputs: bool = False, out: Any = None, impl: Optional[str] = None,
                             backend: str = "auto", stream: Any = None,
                             runtime: Optional[Runtime] = None) -> Tensor:
    """Chunked prefill over a paged cache that appends the chunk: q [T_q, H, D], k_new, v_new
    [T_q, H_kv, D], pools k_pages, v_pages [PT, H_kv, D] (written in place), k_scale, v_scale [1]
    fp32, cu_seqlens_q [B + 1], cache_seqlens [B] (before the append), block_table [B, W] int32 ->
    o [T_q, H, D]. page_size and max_seqlen_q are required; is_causal defaults to True. SPEC.md 2.10."""
    o = _out(out, 1, "gqa_prefill_paged_append")[0]
    if o is None:
        o = empty(q, q.shape, dtype_of(q))
    call("gqa_prefill_paged_append",
         (("q", q), ("k_new", k_new), ("v_new", v_new), ("k_pages", k_pages), ("v_pages", v_pages),
          ("k_scale", k_scale), ("v_scale", v_scale), ("cu_seqlens_q", cu_seqlens_q),
          ("cache_seqlens", cache_seqlens), ("block_table", block_table)),
         (("page_size", page_size), ("max_seqlen_q", max_seqlen_q), ("is_causal", is_causal),
          ("cache_dtype", cache_dtype), ("sm_scale", sm_scale), ("softcap", softcap), ("fuse_rope", fuse_rope),
          ("rope_base", rope_base), ("max_position", max_position), ("rotary_dim", rotary_dim),
          ("validate_inputs", validate_inputs)),
         impl, backend, (("o", o),), stream, runtime)
    return o


def fp8_lightning_indexer(index_q: Tensor, index_k: Tensor, weights: Tensor, cu_seqlen_ks: Tensor,
                          cu_seqlen_ke: Tensor, index_k_scale: Optional[Tensor] = None, *, clean_logits: bool = True,
                          validate_inputs: bool = False, out: Any = None, impl: Optional[str] = None,
                          backend: str = "auto", stream: Any = None, runtime: Optional[Runtime] = None) -> Tensor:
    """Indexer logits over FP8 keys: index_q [B, S, H, D], index_k [B, S_kv, G, D] (bf16 or e4m3),
    weights [S, H] fp32, windows cu_seqlen_ks, cu_seqlen_ke [S] int32, optional index_k_scale
    [B, S_kv, G] fp32 -> logits [B, S, S_kv, G] fp32. SPEC.md 2.3."""
    logits = _out(out, 1, "fp8_lightning_indexer")[0]
    if logits is None:
        B, S = index_q.shape[0], index_q.shape[1]
        S_kv, G = index_k.shape[1], index_k.shape[2]
        logits = empty(index_q, (B, S, S_kv, G), "fp32")
    call("fp8_lightning_indexer", (("index_q", index_q), ("index_k", index_k), ("weights", weights),
                                   ("cu_seqlen_ks", cu_seqlen_ks), ("cu_seqlen_ke", cu_seqlen_ke),
                                   ("index_k_scale", index_k_scale)),
         (("clean_logits", clean_logits), ("validate_inputs", validate_inputs)),
         impl, backend, (("logits", logits),), stream, runtime)
    return logits


def topk_select(index_score: Tensor, starts: Optional[Tensor] = None, ends: Optional[Tensor] = None, *, topk: int,
                out: Any = None, impl: Optional[str] = None, backend: str = "auto", stream: Any = None,
                runtime: Optional[Runtime] = None) -> Tensor:
    """Top-k positions per (b, s, g) row of index_score [B, S, S_kv, G] fp32 within the windows
    [starts, ends) [B, S] int32 -> indexes [B, S, G, topk] int32 (-1 padded). SPEC.md 2.2."""
    indexes = _out(out, 1, "topk_select")[0]
    if indexes is None:
        B, S, _S_kv, G = index_score.shape
        indexes = empty(index_score, (B, S, G, topk), "int32")
    call("topk_select", (("index_score", index_score), ("starts", starts), ("ends", ends)), (("topk", topk),),
         impl, backend, (("indexes", indexes),), stream, runtime)
    return indexes


def lightning_indexer(q: Tensor, k: Tensor, weights: Tensor, cu_seqlens: Optional[Tensor] = None,
                      cu_seqlens_k: Optional[Tensor] = None, *, topk: int, causal: bool = False,
                      compress_ratio: int = 1, deterministic: bool = False, validate_inputs: bool = False,
                      out: Any = None, impl: Optional[str] = None, backend: str = "auto", stream: Any = None,
                      runtime: Optional[Runtime] = None) -> Tensor:
    """Top-k key positions per query row under the weighted-ReLU score: q [B, T, H, D], k [B, S, D],
    weights [B, T, H], optional cu_seqlens, cu_seqlens_k [N + 1] int32 -> indices [B, T, topk]
    int32. causal defaults to False. SPEC.md 2.1."""
    indices = _out(out, 1, "lightning_indexer")[0]
    if indices is None:
        indices = empty(q, (q.shape[0], q.shape[1], topk), "int32")
    call("lightning_indexer", (("q", q), ("k", k), ("weights", weights), ("cu_seqlens", cu_seqlens),
                               ("cu_seqlens_k", cu_seqlens_k)),
         (("topk", topk), ("causal", causal), ("compress_ratio", compress_ratio), ("deterministic", deterministic),
          ("validate_inputs", validate_inputs)),
         impl, backend, (("indices", indices),), stream, runtime)
    return indices


def _bsa_lse_shape(q: Tensor, layout: str) -> Tuple[int, int, int]:
    B, a, b, _D = q.shape
    return (B, a, b) if layout == "bhsd" else (B, b, a)


def bsa_fwd(q: Tensor, k: Tensor, v: Tensor, q2k_block_index: Tensor, q2k_block_nums: Optional[Tensor] = None,
            block_sizes: Optional[Tensor] = None, *, layout: str = "bhsd", sparse_block_size: int = 64,
            scale: Optional[float] = None, block_sparse_num: Optional[int] = None,
            allow_empty_block_nums: bool = False, kv_splits: int = 1, validate_inputs: bool = False,
            return_lse: bool = False, out: Any = None, impl: Optional[str] = None, backend: str = "auto",
            stream: Any = None, runtime: Optional[Runtime] = None) -> Union[Tensor, Tuple[Tensor, Tensor]]:
    """Block-sparse attention (non-causal) over the key blocks listed per query block:
    q [B, H_q, S_q, D] (layout "bhsd") or [B, S_q, H_q, D] ("bshd"), k, v likewise with H_kv, S_kv,
    q2k_block_index [B, H_q, N_q, K_max] int32, optional q2k_block_nums [B, H_q, N_q], block_sizes
    -> o (q's layout, head dim D_v) and, with return_lse=True, lse [B, H_q, S_q] fp32. SPEC.md 2.4."""
    o, lse = _out(out, 2, "bsa_fwd") if return_lse else (_out(out, 1, "bsa_fwd")[0], None)
    if o is None:
        o = empty(q, tuple(q.shape[:-1]) + (v.shape[-1],), dtype_of(q))
    if return_lse and lse is None:
        lse = empty(q, _bsa_lse_shape(q, layout), "fp32")
    call("bsa_fwd", (("q", q), ("k", k), ("v", v), ("q2k_block_index", q2k_block_index),
                     ("q2k_block_nums", q2k_block_nums), ("block_sizes", block_sizes)),
         (("layout", layout), ("sparse_block_size", sparse_block_size), ("scale", scale),
          ("block_sparse_num", block_sparse_num), ("allow_empty_block_nums", allow_empty_block_nums),
          ("kv_splits", kv_splits), ("validate_inputs", validate_inputs)),
         impl, backend, (("o", o), ("lse", lse)), stream, runtime)
    return (o, lse) if return_lse else o


def bsa_bwd(do: Tensor, q: Tensor, k: Tensor, v: Tensor, o: Tensor, lse: Tensor, q2k_block_index: Tensor,
            q2k_block_nums: Optional[Tensor] = None, block_sizes: Optional[Tensor] = None, *, layout: str = "bhsd",
            sparse_block_size: int = 64, scale: Optional[float] = None, block_sparse_num: Optional[int] = None,
            bucket_size_blocks: Optional[int] = None, validate_inputs: bool = False, out: Any = None,
            impl: Optional[str] = None, backend: str = "auto", stream: Any = None,
            runtime: Optional[Runtime] = None) -> Tuple[Tensor, Tensor, Tensor]:
    """Gradients of bsa_fwd from its o and lse: returns (dq, dk, dv) with the shapes of q, k, v.
    SPEC.md 2.5."""
    dq, dk, dv = _out(out, 3, "bsa_bwd")
    dt = dtype_of(q)
    dq = empty(q, q.shape, dt) if dq is None else dq
    dk = empty(q, k.shape, dt) if dk is None else dk
    dv = empty(q, v.shape, dt) if dv is None else dv
    call("bsa_bwd", (("do", do), ("q", q), ("k", k), ("v", v), ("o", o), ("lse", lse),
                     ("q2k_block_index", q2k_block_index), ("q2k_block_nums", q2k_block_nums),
                     ("block_sizes", block_sizes)),
         (("layout", layout), ("sparse_block_size", sparse_block_size), ("scale", scale),
          ("block_sparse_num", block_sparse_num), ("bucket_size_blocks", bucket_size_blocks),
          ("validate_inputs", validate_inputs)),
         impl, backend, (("dq", dq), ("dk", dk), ("dv", dv)), stream, runtime)
    return dq, dk, dv


def bsa_fp8_fwd(q: Tensor, k: Tensor, v: Tensor, q2k_block_index: Tensor, q2k_block_nums: Optional[Tensor] = None,
                block_sizes: Optional[Tensor] = None, *, scale: Optional[float] = None,
                block_sparse_num: Optional[int] = None, allow_empty_block_nums: bool = False,
                validate_inputs: bool = False, out: Any = None, impl: Optional[str] = None, backend: str = "auto",
                stream: Any = None, runtime: Optional[Runtime] = None) -> Tensor:
    """Block-sparse attention with internal FP8 quantisation ("Sage"): bf16 q [B, H, S_q, 128],
    k, v [B, H, S_kv, 128] (BHSD, block size 64) -> o [B, H, S_q, 128] bf16. SPEC.md 2.6."""
    o = _out(out, 1, "bsa_fp8_fwd")[0]
    if o is None:
        o = empty(q, q.shape, "bf16")
    call("bsa_fp8_fwd", (("q", q), ("k", k), ("v", v), ("q2k_block_index", q2k_block_index),
                         ("q2k_block_nums", q2k_block_nums), ("block_sizes", block_sizes)),
         (("scale", scale), ("block_sparse_num", block_sparse_num),
          ("allow_empty_block_nums", allow_empty_block_nums), ("validate_inputs", validate_inputs)),
         impl, backend, (("o", o),), stream, runtime)
    return o


def gqa_bwd(q: Tensor, k: Tensor, v: Tensor, o: Tensor, do: Tensor, lse: Tensor, *, is_causal: bool = True,
            sm_scale: Optional[float] = None, deterministic: bool = False, window_size_left: int = -1,
            window_size_right: int = -1, out: Any = None,
            impl: Optional[str] = None, backend: str = "auto", stream: Any = None,
            runtime: Optional[Runtime] = None) -> Tuple[Tensor, Tensor, Tensor]:
    """Gradients of gqa_fwd (BSHD, S_q = S_kv) from its o and lse: returns (dq, dk, dv) with the shapes of
    q, k, v. is_causal defaults to True, as the contract says; deterministic (beyond the contract) makes
    the kernels add dq in a fixed order, so repeated calls return identical bytes; window_size_left /
    window_size_right (beyond the contract) are gqa_fwd's sliding window. SPEC.md 2.12."""
    dq, dk, dv = _out(out, 3, "gqa_bwd")
    dt = dtype_of(q)
    dq = empty(q, q.shape, dt) if dq is None else dq
    dk = empty(q, k.shape, dt) if dk is None else dk
    dv = empty(q, v.shape, dt) if dv is None else dv
    call("gqa_bwd", (("q", q), ("k", k), ("v", v), ("o", o), ("do", do), ("lse", lse)),
         (("is_causal", is_causal), ("sm_scale", sm_scale), ("deterministic", deterministic),
          ("window_size_left", window_size_left), ("window_size_right", window_size_right)),
         impl, backend, (("dq", dq), ("dk", dk), ("dv", dv)), stream, runtime)
    return dq, dk, dv


def mla_decode(q: Tensor, q_pe: Tensor, k: Tensor, k_pe: Tensor, cache_seqlens: Optional[Tensor] = None,
               block_table: Optional[Tensor] = None, *, validate_inputs: bool = False,
               kv_splits: Union[int, str] = "auto", out: Any = None, impl: Optional[str] = None,
               backend: str = "auto", stream: Any = None, runtime: Optional[Runtime] = None) -> Tensor:
    """Multi-head latent attention decode: q [B, H, D] (or [B, S_q, H, D]), q_pe [..., H, 64], the latent
    cache k [B, N_kv, H_kv, D] (keys and values) and k_pe [B, N_kv, H_kv, 64] -> o with q's shape.
    Extensions (docs/ops/mla_decode.md): cache_seqlens [B] int32 per-request lengths; with block_table
    [B, W] int32, k and k_pe are page pools [NP, PS, H_kv, D / 64]; S_q > 1 query tokens are the last S_q
    cache positions (causal); kv_splits 1..128 or "auto" (split-KV). SPEC.md 2.13."""
    o = _out(out, 1, "mla_decode")[0]
    if o is None:
        o = empty(q, q.shape, dtype_of(q))
    call("mla_decode", (("q", q), ("q_pe", q_pe), ("k", k), ("k_pe", k_pe), ("cache_seqlens", cache_seqlens),
                        ("block_table", block_table)),
         (("validate_inputs", validate_inputs), ("kv_splits", kv_splits)), impl, backend, (("o", o),), stream,
         runtime)
    return o


def dsa_decode(q: Tensor, kv: Tensor, indices: Tensor, *, dim_tail: int, stride_kv: int, q_start_index_s: int,
               sm_scale: Optional[float] = None, is_causal: bool = True, kv_splits: Union[int, str] = "auto",
               out: Any = None, impl: Optional[str] = None, backend: str = "auto", stream: Any = None,
               runtime: Optional[Runtime] = None) -> Tensor:
    """DeepSeek sparse attention decode: q [B, S, H, D + dim_tail], kv [B, S_kv, H_kv, D + dim_tail],
    indices [B, S, H_kv, K] int32 (invalid entries, e.g. -1, are skipped) -> o [B, S, H, D]. dim_tail,
    stride_kv and q_start_index_s are required; is_causal defaults to True; kv_splits 1..128 or "auto"
    (split-KV over the index slots). SPEC.md 2.18."""
    o = _out(out, 1, "dsa_decode")[0]
    if o is None:
        o = empty(q, tuple(q.shape[:3]) + (q.shape[3] - dim_tail,), dtype_of(q))
    call("dsa_decode", (("q", q), ("kv", kv), ("indices", indices)),
         (("dim_tail", dim_tail), ("stride_kv", stride_kv), ("q_start_index_s", q_start_index_s),
          ("sm_scale", sm_scale), ("is_causal", is_causal), ("kv_splits", kv_splits)),
         impl, backend, (("o", o),), stream, runtime)
    return o


def nsa_compressed_fwd(q: Tensor, k_cmp: Tensor, v_cmp: Tensor, offsets: Tensor, chunk_offsets: Tensor,
                       token_indices: Tensor, *, scale: float, bs: int, validate_inputs: bool = False,
                       return_lse: bool = False, out: Any = None, impl: Optional[str] = None, backend: str = "auto",
                       stream: Any = None, runtime: Optional[Runtime] = None) -> Union[Tensor, Tuple[Tensor, Tensor]]:
    """NSA compressed attention (packed): q [T, H, DK], k_cmp [C, H_kv, DK], v_cmp [C, H_kv, DV], offsets and
    chunk_offsets [N + 1], token_indices [T, 2] int32 -> o [T, H, DV] (and lse [T, H] fp32 with
    return_lse=True); each token attends to the complete chunks of its request. SPEC.md 2.15. Only impl
    "reference" (CPU) is built so far."""
    o, lse = _out(out, 2, "nsa_compressed_fwd") if return_lse else (_out(out, 1, "nsa_compressed_fwd")[0], None)
    T, H, _DK = q.shape
    if o is None:
        o = empty(q, (T, H, v_cmp.shape[2]), dtype_of(q))
    if return_lse and lse is None:
        lse = empty(q, (T, H), "fp32")
    call("nsa_compressed_fwd", (("q", q), ("k_cmp", k_cmp), ("v_cmp", v_cmp), ("offsets", offsets),
                                ("chunk_offsets", chunk_offsets), ("token_indices", token_indices)),
         (("scale", scale), ("bs", bs), ("validate_inputs", validate_inputs)),
         impl, backend, (("o", o), ("lse", lse)), stream, runtime)
    return (o, lse) if return_lse else o


def nsa_topk(q: Tensor, k_cmp: Tensor, offsets: Tensor, chunk_offsets: Tensor, token_indices: Tensor, *,
             scale: float, selected_block_num: int, bs: int, validate_inputs: bool = False, out: Any = None,
             impl: Optional[str] = None, backend: str = "auto", stream: Any = None,
             runtime: Optional[Runtime] = None) -> Tensor:
    """NSA block selection: q [T, H, D], k_cmp [C, H_kv, D] and the packed metadata -> block_indices
    [T, H_kv, selected_block_num] int32, the chunk ids of highest group importance (chunks 0, cur - 1, cur
    forced), -1 padded. SPEC.md 2.16. Only impl "reference" (CPU) is built so far."""
    o = _out(out, 1, "nsa_topk")[0]
    if o is None:
        o = empty(q, (q.shape[0], k_cmp.shape[1], selected_block_num), "int32")
    call("nsa_topk", (("q", q), ("k_cmp", k_cmp), ("offsets", offsets), ("chunk_offsets", chunk_offsets),
                      ("token_indices", token_indices)),
         (("scale", scale), ("selected_block_num", selected_block_num), ("bs", bs),
          ("validate_inputs", validate_inputs)),
         impl, backend, (("block_indices", o),), stream, runtime)
    return o


def nsa_selected_fwd(q: Tensor, k: Tensor, v: Tensor, block_indices: Tensor, block_counts: Tensor, offsets: Tensor,
                     token_indices: Tensor, *, is_causal: bool, scale: float, block_size: int,
                     validate_inputs: bool = False, out: Any = None, impl: Optional[str] = None,
                     backend: str = "auto", stream: Any = None, runtime: Optional[Runtime] = None) -> Tensor:
    """NSA selected attention (packed): q [T, H, D], k, v [T, H_kv, D], block_indices [T, H_kv, SEL] and
    block_counts [T, H_kv] int32 (request-local block ids in units of block_size), offsets [N + 1],
    token_indices [T, 2] -> o [T, H, D]. SPEC.md 2.17. Only impl "reference" (CPU) is built so far."""
    o = _out(out, 1, "nsa_selected_fwd")[0]
    if o is None:
        o = empty(q, q.shape, dtype_of(q))
    call("nsa_selected_fwd", (("q", q), ("k", k), ("v", v), ("block_indices", block_indices),
                              ("block_counts", block_counts), ("offsets", offsets), ("token_indices", token_indices)),
         (("is_causal", is_causal), ("scale", scale), ("block_size", block_size),
          ("validate_inputs", validate_inputs)),
         impl, backend, (("o", o),), stream, runtime)
    return o


OPS = ("paged_kv_write", "gqa_fwd", "gqa_varlen_fwd", "gqa_paged_fwd", "mha_decode_paged", "gqa_prefill_paged_append",
       "fp8_lightning_indexer", "topk_select", "lightning_indexer", "bsa_bwd", "bsa_fwd", "bsa_fp8_fwd", "gqa_bwd",
       "mla_decode", "dsa_decode", "nsa_compressed_fwd", "nsa_topk", "nsa_selected_fwd")
