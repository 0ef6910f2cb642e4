"""attnjit: JIT-compiled attention kernels (CUDA, NVRTC) with CPU references, for PyTorch and any
DLPack tensor library. One function per op (attnjit.gqa_fwd, attnjit.bsa_fwd, ...), plans for
serving loops (attnjit.plan), warm-up of the kernel cache, and torch.library custom ops
(torch.ops.attnjit.*) with fake implementations and autograd where torch is installed.

    import numpy as np, attnjit
    q = np.random.randn(1, 4, 2, 64).astype(np.float16)          # [B, S_q, H, D]
    k = v = np.random.randn(1, 4, 2, 64).astype(np.float16)
    o, lse = attnjit.gqa_fwd(q, k, v, is_causal=False, return_lse=True)   # host arrays: CPU reference
"""
from __future__ import annotations

import json as _json
from typing import Any, Callable, Dict, List, Optional, Sequence

from ._cuda_wheels import configure_environment as _configure_cuda_wheels

_configure_cuda_wheels()  # before the library reads the environment (first runtime, first compile)

from . import _attnjit  # noqa: E402
from ._core import (CacheError, CompileError, CudaError, HostView, InternalError, Plan, Runtime, bf16, configure,
                    e4m3, plan, runtime)
from ._ops import (OPS, bsa_bwd, bsa_fp8_fwd, bsa_fwd, dsa_decode, fp8_lightning_indexer, gqa_bwd, gqa_fwd, gqa_paged_fwd,
                   gqa_prefill_paged_append, gqa_varlen_fwd, lightning_indexer, mha_decode_paged, mla_decode,
                   nsa_compressed_fwd, nsa_selected_fwd, nsa_topk, paged_kv_write, topk_select)

__version__ = _attnjit.version()

__all__ = ["CacheError", "CompileError", "CudaError", "HostView", "InternalError", "Plan", "Runtime", "bf16",
           "configure", "e4m3", "plan", "runtime", "warmup", "info", "op_info", "list_ops", "set_log_level",
           "set_log_callback", "__version__", *OPS]


def list_ops() -> List[str]:
    """The ops this build serves, by SPEC.md name."""
    return _json.loads(_attnjit.list_ops())


def op_info(op: str) -> Dict[str, Any]:
    """One op's argument table: tensors (name, role in/out/inout, rank, dtypes, shape, optional) and
    parameters (name, type, default, required, choices), as the C ABI's attnjit_op_info gives it."""
    return _json.loads(_attnjit.op_info(op))


def warmup(ops: Optional[Sequence[str]] = None, arch: Optional[str] = None, jobs: int = 0,
           runtime: Optional[Runtime] = None) -> Dict[str, int]:
    """Compiles every kernel the listed ops (default: all) can select for `arch` (default: the GPU's,
    else sm_90a) into the runtime's cache, as `attnjit warmup`. Returns the counts (kernels,
    compiled, cache_hits, failed); raises CompileError when any kernel fails."""
    from ._core import runtime as _default

    return (runtime or _default()).warmup(ops, arch, jobs)


def info(runtime: Optional[Runtime] = None) -> Dict[str, Any]:
    """Versions, the options in effect and the cache."""
    import os

    from ._core import runtime as _default

    rt = runtime or _default()
    env = {k: v for k, v in os.environ.items() if k.startswith("ATTNJIT_") or k == "CUDA_HOME"}
    out: Dict[str, Any] = {"version": __version__, "ops": list_ops(), "options": dict(rt.options),
                           "environment": env}
    try:
        import torch

        out["torch"] = torch.__version__
    except ImportError:
        out["torch"] = None
    return out


def set_log_level(level: str) -> None:
    """"trace", "debug", "info", "warn", "error", "critical" or "off"."""
    _attnjit.set_log_level(level)


def set_log_callback(callback: Optional[Callable[[int, str], None]]) -> None:
    """Sends the library's log records to callback(level, message) (level: 0 trace .. 5 critical)
    instead of stderr; None restores stderr. The logging module, for instance:
        attnjit.set_log_callback(lambda lvl, msg: logging.getLogger("attnjit").log(10 * (lvl + 1), msg))"""
    _attnjit.set_log_callback(callback)


try:  # torch.library custom ops, fake implementations and autograd, when torch is importable
    import torch as _torch  # noqa: F401
except ImportError:
    _torch = None
if _torch is not None:
    from . import _torch_ops  # noqa: F401,E402
