"""torch.library custom ops (torch.ops.attnjit.<op>), imported by attnjit when torch is installed.

Every op is registered once, generically from its argument table (attnjit.op_info): the op takes
its tensors in table order with the outputs pre-allocated and marked as mutated (Tensor(a!)),
plus the config JSON, and returns nothing. The fake implementation does nothing (the outputs already
have their shapes), so torch.compile(fullgraph=True) and torch.export trace the op functions
(attnjit.gqa_fwd, ...) straight through: they allocate with torch.empty and call the custom op.

Autograd: attnjit::bsa_fwd_autograd is a functional op returning (o, lse) whose backward is bsa_bwd;
attnjit.bsa_fwd uses it when an input requires grad. Likewise attnjit::gqa_fwd_autograd, backward
gqa_bwd: attnjit.gqa_fwd uses it (through `dispatch`) when an input requires grad and the call is one
gqa_bwd serves (16-bit q/k/v, S_q = S_kv, no RoPE, no softcap); another call with an input that requires
grad raises NotImplementedError (never a silent gradient-free result). The LSE outputs carry no gradient.
"""

import json
from typing import Any, Dict, List, Optional, Tuple

import torch

from . import _core

_LIB = "attnjit"

# torch tensors reach the library through torch._C._to_dlpack (the extension's fast export): torch's
# __dlpack__ records and waits on a CUDA event per tensor and refuses tensors that require grad (inside a
# custom op the autograd layer is already past). The library launches on the stream the call names.
if not hasattr(torch._C, "_to_dlpack"):
    raise ImportError(f"attnjit: torch {torch.__version__} has no torch._C._to_dlpack; attnjit needs torch >= 2.4")
_core._attnjit._set_fast_export(torch.Tensor, torch._C._to_dlpack)
_ARGS: Dict[str, List[Tuple[str, str, bool]]] = {}  # op -> [(tensor name, role, optional)]


def _py_name(name: str) -> str:
    return "do_" if name == "do" else name


def _schema(op: str, table: Dict[str, Any]) -> Tuple[str, List[str]]:
    args = []
    mutated = []
    alias = 0
    for t in table["tensors"]:
        name = _py_name(t["name"])
        opt = "?" if t["optional"] else ""
        if t["role"] in ("out", "inout"):
            args.append(f"Tensor(a{alias}!){opt} {name}")
            mutated.append(name)
            alias += 1
        else:
            args.append(f"Tensor{opt} {name}")
    args.append("str config")
    return "(" + ", ".join(args) + ") -> ()", mutated


def _make_impl(op: str):
    entries = _ARGS[op]

    def impl(*args: Any) -> None:
        *tensors, config = args
        names = tuple(n for (n, _r, _o), t in zip(entries, tensors) if t is not None)
        values = tuple(t for t in tensors if t is not None)
        stream = _core._stream_handle(None, values)
        _core.runtime()._rt.run(op, config, names, values, stream)

    return impl


def _register(op: str) -> None:
    from . import op_info

    table = op_info(op)
    _ARGS[op] = [(t["name"], t["role"], t["optional"]) for t in table["tensors"]]
    schema, mutated = _schema(op, table)
    impl = _make_impl(op)
    custom = torch.library.custom_op(f"{_LIB}::{op}", impl, mutates_args=tuple(mutated), schema=schema)
    custom.register_fake(lambda *args: None)


def dispatch(op: str, named: Dict[str, Any], config: str) -> None:
    """Calls torch.ops.attnjit.<op> with the named tensors (absent ones None); gqa_fwd with an input
    that requires grad goes through attnjit::gqa_fwd_autograd where gqa_bwd serves the call."""
    if op == "gqa_fwd" and _core._needs_grad([t for t in named.values() if t is not None]):
        if not _gqa_autograd_serves(named, config):
            raise NotImplementedError("gqa_fwd: unsupported: autograd: gqa_bwd differentiates 16-bit q/k/v with "
                                      "S_q = S_kv and no RoPE, scales or softcap; call it under torch.no_grad() "
                                      "or detach the inputs")
        o, lse = _gqa_fwd_autograd(named["q"], named["k"], named["v"], config)
        named["o"].copy_(o)
        if named.get("lse") is not None:
            named["lse"].copy_(lse)
        return
    args = [named.get(n) for n, _r, _o in _ARGS[op]]
    getattr(torch.ops.attnjit, op)(*args, config)


# ---- bsa_fwd with autograd ---------------------------------------------------------------------


@torch.library.custom_op(f"{_LIB}::bsa_fwd_autograd", mutates_args=())
def _bsa_fwd_autograd(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, q2k_block_index: torch.Tensor,
                      q2k_block_nums: Optional[torch.Tensor], block_sizes: Optional[torch.Tensor],
                      config: str) -> Tuple[torch.Tensor, torch.Tensor]:
    layout = json.loads(config).get("layout", "bhsd")
    o = q.new_empty(tuple(q.shape[:-1]) + (v.shape[-1],))
    B, a, b, _ = q.shape
    lse = q.new_empty((B, a, b) if layout == "bhsd" else (B, b, a), dtype=torch.float32)
    named = {"q": q, "k": k, "v": v, "q2k_block_index": q2k_block_index, "q2k_block_nums": q2k_block_nums,
             "block_sizes": block_sizes, "o": o, "lse": lse}
    names = tuple(n for n, t in named.items() if t is not None)
    values = tuple(t for t in named.values() if t is not None)
    _core.runtime()._rt.run("bsa_fwd", config, names, values, _core._stream_handle(None, values))
    return o, lse


@_bsa_fwd_autograd.register_fake
def _(q, k, v, q2k_block_index, q2k_block_nums, block_sizes, config):
    layout = json.loads(config).get("layout", "bhsd")
    B, a, b, _ = q.shape
    return (q.new_empty(tuple(q.shape[:-1]) + (v.shape[-1],)),
            q.new_empty((B, a, b) if layout == "bhsd" else (B, b, a), dtype=torch.float32))


def _bsa_setup(ctx, inputs, output):
    q, k, v, idx, nums, sizes, config = inputs
    o, lse = output
    ctx.save_for_backward(q, k, v, o, lse, idx, *(t for t in (nums, sizes) if t is not None))
    ctx.has = (nums is not None, sizes is not None)
    ctx.config = config


def _bsa_backward(ctx, do, dlse):
    q, k, v, o, lse, idx, *rest = ctx.saved_tensors
    nums = rest.pop(0) if ctx.has[0] else None
    sizes = rest.pop(0) if ctx.has[1] else None
    cfg = json.loads(ctx.config)
    bwd = {k_: cfg[k_] for k_ in ("layout", "sparse_block_size", "scale", "block_sparse_num", "impl", "backend")
           if k_ in cfg}
    dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
    dispatch("bsa_bwd", {"do": do.contiguous(), "q": q, "k": k, "v": v, "o": o, "lse": lse, "q2k_block_index": idx,
                         "q2k_block_nums": nums, "block_sizes": sizes, "dq": dq, "dk": dk, "dv": dv},
             json.dumps(bwd, sort_keys=True))
    return dq, dk, dv, None, None, None, None


_bsa_fwd_autograd.register_autograd(_bsa_backward, setup_context=_bsa_setup)


def bsa_fwd_autograd(named: Dict[str, Any], config: str):
    return _bsa_fwd_autograd(named["q"], named["k"], named["v"], named["q2k_block_index"],
                             named.get("q2k_block_nums"), named.get("block_sizes"), config)


# ---- gqa_fwd with autograd ---------------------------------------------------------------------


@torch.library.custom_op(f"{_LIB}::gqa_fwd_autograd", mutates_args=())
def _gqa_fwd_autograd(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                      config: str) -> Tuple[torch.Tensor, torch.Tensor]:
    B, S_q, H, _ = q.shape
    o = q.new_empty(tuple(q.shape))
    lse = q.new_empty((B, H, S_q), dtype=torch.float32)
    values = (q, k, v, o, lse)
    _core.runtime()._rt.run("gqa_fwd", config, ("q", "k", "v", "o", "lse"), values,
                            _core._stream_handle(None, values))
    return o, lse


@_gqa_fwd_autograd.register_fake
def _(q, k, v, config):
    B, S_q, H, _ = q.shape
    return q.new_empty(tuple(q.shape)), q.new_empty((B, H, S_q), dtype=torch.float32)


def _gqa_setup(ctx, inputs, output):
    q, k, v, config = inputs
    o, lse = output
    ctx.save_for_backward(q, k, v, o, lse)
    ctx.config = config


# gqa_fwd's config keys that gqa_bwd takes (it refuses every other key).
_GQA_BWD_KEYS = ("is_causal", "sm_scale", "window_size_left", "window_size_right", "impl", "backend")


def _gqa_backward(ctx, do, dlse):
    q, k, v, o, lse = ctx.saved_tensors
    cfg = json.loads(ctx.config)
    bwd = {k_: cfg[k_] for k_ in _GQA_BWD_KEYS if k_ in cfg}
    if do is None:
        do = torch.zeros_like(o)
    # NOTE: outputs are class O (dense row-major), so not empty_like (which keeps a permuted input's strides).
    dq, dk, dv = q.new_empty(tuple(q.shape)), k.new_empty(tuple(k.shape)), v.new_empty(tuple(v.shape))
    dispatch("gqa_bwd", {"q": q, "k": k, "v": v, "o": o, "do": do.contiguous(), "lse": lse, "dq": dq, "dk": dk,
                         "dv": dv}, json.dumps(bwd, sort_keys=True))
    return dq, dk, dv, None


_gqa_fwd_autograd.register_autograd(_gqa_backward, setup_context=_gqa_setup)


def _gqa_autograd_serves(named: Dict[str, Any], config: str) -> bool:
    """Whether gqa_bwd can differentiate this gqa_fwd call: 16-bit q/k/v (no scales), no RoPE tables,
    S_q = S_kv, softcap unset or 0. Plain string tests on the config JSON (config_json's sorted keys
    and default separators), so torch.compile traces this without a graph break."""
    if any(named.get(n) is not None for n in ("q_scale", "k_scale", "v_scale", "rope_cos", "rope_sin")):
        return False
    q, k = named["q"], named["k"]
    if q.dtype not in (torch.float16, torch.bfloat16) or q.shape[1] != k.shape[1]:
        return False
    i = config.find('"softcap": ')
    if i >= 0 and config[i + 11:].split(",")[0].split("}")[0].strip() not in ("0", "0.0", "null"):
        return False
    return '"pos_encoding_mode": "rope"' not in config


def eager_direct(values) -> bool:
    """Whether an op call on these tensors may go straight to the library instead of through
    torch.ops.attnjit.<op>: in eager mode, on plain tensors (no FakeTensor, functional or other
    subclass), with no gradient to record. The dispatcher costs about 35 us a call (H100 host,
    2026-12-06) and adds nothing there; under torch.compile / export the custom op is what traces."""
    return (not torch.compiler.is_compiling() and all(type(t) is torch.Tensor for t in values)
            and not _core._needs_grad(values))


for _op in __import__("attnjit")._ops.OPS:
    _register(_op)
_core._torch_dispatch = dispatch
_core._torch_eager_direct = eager_direct
# torch's current stream as a handle: the raw getter costs well under a microsecond where
# torch.cuda.current_stream() builds a Stream object (about 7 us a call measured through the op functions).
_core._torch_current_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None) or (
    lambda index: torch.cuda.current_stream(index).cuda_stream)
_core._torch_bsa_autograd = bsa_fwd_autograd
