"""The machinery under the op functions: tensor kinds, output allocation, configs, runtimes, plans."""
from __future__ import annotations

import json
import threading
from typing import Any, Callable, Dict, Optional, Sequence, Tuple

from . import _attnjit

try:  # numpy is optional for torch users, required for host arrays
    import numpy as _np
except ImportError:  # pragma: no cover - exercised only without numpy
    _np = None

CompileError = _attnjit.CompileError
CudaError = _attnjit.CudaError
CacheError = _attnjit.CacheError
InternalError = _attnjit.InternalError

# DLPack type codes and sizes of attnjit's dtypes.
_DL_CODES = {"fp16": (2, 16), "bf16": (4, 16), "fp32": (2, 32), "int32": (0, 32), "int64": (0, 64), "e4m3": (10, 8)}
_NP_NAMES = {"float16": "fp16", "float32": "fp32", "int32": "int32", "int64": "int64"}
_TORCH_NAMES = {"torch.float16": "fp16", "torch.bfloat16": "bf16", "torch.float32": "fp32", "torch.int32": "int32",
                "torch.int64": "int64", "torch.float8_e4m3fn": "e4m3"}


class HostView:
    """A host array whose elements are bf16 or e4m3, which numpy has no dtype for: the storage is a
    numpy uint16 (bf16) or uint8 (e4m3) array, handed to the library as that dtype through DLPack.

    Outputs of those dtypes computed from numpy inputs come back as HostView too; `.array` is the
    storage (raw bits).
    """

    __slots__ = ("array", "dtype")

    def __init__(self, array: Any, dtype: str):
        if dtype not in ("bf16", "e4m3"):
            raise ValueError(f"HostView: expected dtype 'bf16' or 'e4m3', got {dtype!r}")
        want = _np.uint16 if dtype == "bf16" else _np.uint8
        if array.dtype != want:
            raise ValueError(f"HostView: a {dtype} view needs {_np.dtype(want).name} storage, got {array.dtype}")
        self.array = array
        self.dtype = dtype

    @property
    def shape(self) -> Tuple[int, ...]:
        return tuple(self.array.shape)

    def __dlpack__(self, stream: Any = None, **_: Any):
        code, bits = _DL_CODES[self.dtype]
        return _attnjit.retype(self.array.__dlpack__(), code, bits)

    def __dlpack_device__(self):
        return (1, 0)

    def __repr__(self) -> str:
        return f"HostView({self.dtype}, shape={self.shape})"


def bf16(array: Any) -> HostView:
    """Marks a numpy uint16 array as holding bfloat16 bits."""
    return HostView(array, "bf16")


def e4m3(array: Any) -> HostView:
    """Marks a numpy uint8 array as holding float8_e4m3fn bits."""
    return HostView(array, "e4m3")


def _is_torch(x: Any) -> bool:
    return type(x).__module__.startswith("torch")


def dtype_of(x: Any) -> str:
    """attnjit's dtype name of a tensor argument ("fp16", "bf16", ...)."""
    if isinstance(x, HostView):
        return x.dtype
    if _is_torch(x):
        name = _TORCH_NAMES.get(str(x.dtype))
    else:
        name = _NP_NAMES.get(getattr(getattr(x, "dtype", None), "name", str(getattr(x, "dtype", ""))))
    if name is None:
        raise ValueError(f"dtype: expected one of fp16, bf16, e4m3, fp32, int32, int64, got {getattr(x, 'dtype', x)!r}"
                         " (numpy bf16 / e4m3 data: wrap the uint16 / uint8 storage with attnjit.bf16() / attnjit.e4m3())")
    return name


def is_host(x: Any) -> bool:
    if _is_torch(x):
        return x.device.type == "cpu"
    if isinstance(x, HostView) or (_np is not None and isinstance(x, _np.ndarray)):
        return True
    dev = getattr(x, "__dlpack_device__", None)
    return dev is None or dev()[0] in (1, 3)  # kDLCPU, kDLCUDAHost


def empty(like: Any, shape: Sequence[int], dtype: str) -> Any:
    """An uninitialised output of `dtype` in the same library and on the same device as `like`."""
    shape = tuple(int(s) for s in shape)
    if _is_torch(like):
        import torch

        td = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32, "int32": torch.int32,
              "int64": torch.int64, "e4m3": torch.float8_e4m3fn}[dtype]
        return torch.empty(shape, dtype=td, device=like.device)
    if not is_host(like):
        raise ValueError("out: cannot allocate outputs next to a device tensor that is neither torch nor numpy; "
                         "pass out=")
    if dtype == "bf16":
        return HostView(_np.empty(shape, _np.uint16), "bf16")
    if dtype == "e4m3":
        return HostView(_np.empty(shape, _np.uint8), "e4m3")
    return _np.empty(shape, {"fp16": _np.float16, "fp32": _np.float32, "int32": _np.int32, "int64": _np.int64}[dtype])


_config_cache: Dict[Tuple, str] = {}


def config_json(params: Tuple[Tuple[str, Any], ...]) -> str:
    """The config JSON of (name, value) pairs, unset (None) values left out; cached by value."""
    try:
        return _config_cache[params]
    except KeyError:
        pass
    except TypeError:  # an unhashable value: not cached
        return json.dumps({k: v for k, v in params if v is not None}, sort_keys=True)
    text = json.dumps({k: v for k, v in params if v is not None}, sort_keys=True)
    if len(_config_cache) < 4096:
        _config_cache[params] = text
    return text


# ---- Runtimes ---------------------------------------------------------------------------------

_runtime_lock = threading.Lock()
_default_runtime: Optional["Runtime"] = None


class Runtime:
    """A runtime with its own options (cache directory, no-JIT mode, ...): the keyword arguments are
    RuntimeOptions' field names (README), read over the ATTNJIT_* environment variables."""

    def __init__(self, **options: Any):
        self.options = dict(options)
        self._rt = _attnjit.Runtime(json.dumps(options) if options else "")

    def warmup(self, ops: Optional[Sequence[str]] = None, arch: Optional[str] = None, jobs: int = 0) -> dict:
        names = ",".join([ops] if isinstance(ops, str) else (ops or []))
        return self._rt.warmup(names, arch or "", jobs)


def runtime() -> Runtime:
    """The process-wide default runtime (options from the environment), made on first use."""
    global _default_runtime
    if _default_runtime is None:
        with _runtime_lock:
            if _default_runtime is None:
                _default_runtime = Runtime()
    return _default_runtime


def configure(**options: Any) -> Runtime:
    """Replaces the default runtime with one made from these options (RuntimeOptions' field names)."""
    global _default_runtime
    rt = Runtime(**options)
    with _runtime_lock:
        _default_runtime = rt
    return rt


# ---- Calls and plans --------------------------------------------------------------------------

_state = threading.local()  # .planning: dict of plan arguments; .plan: the Plan being run
_torch_dispatch = None  # set by _torch_ops: calls torch.ops.attnjit.<op>
_torch_eager_direct = None  # set by _torch_ops: whether a call on these torch tensors may skip the dispatcher
_torch_bsa_autograd = None  # set by _torch_ops: bsa_fwd with bsa_bwd as its backward
_torch_current_stream = None  # set by _torch_ops: device index -> torch's current CUstream handle (int)


def _stream_handle(stream: Any, tensors: Sequence[Any]) -> int:
    if stream is None:
        # NOTE: one device per call (the contract), so the first tensor decides.
        t = tensors[0]
        if _is_torch(t) and t.is_cuda:
            return _torch_current_stream(t.get_device())
        return 0
    if isinstance(stream, int):
        return stream
    return int(getattr(stream, "cuda_stream", stream))


def call(op: str, tensors: Sequence[Tuple[str, Any]], params: Tuple[Tuple[str, Any], ...], impl: Optional[str],
         backend: str, outputs: Sequence[Tuple[str, Any]], stream: Any, rt: Optional[Runtime]) -> None:
    """Runs `op` (or plans it, or runs the current plan) on the given named tensors; None tensors are
    absent optional arguments. `impl` None picks "reference" for host tensors and "kernel" otherwise."""
    names = []
    values = []
    for name, t in tensors:
        if t is not None:
            names.append(name)
            values.append(t)
    for name, t in outputs:
        if t is not None:
            names.append(name)
            values.append(t)
    if impl is None:
        impl = "reference" if is_host(values[0]) else "kernel"
    cfg = config_json(params + (("impl", impl), ("backend", None if backend == "auto" else backend)))
    planning = getattr(_state, "planning", None)
    current = getattr(_state, "plan", None)
    if (_torch_dispatch is not None and planning is None and current is None and stream is None and _is_torch(values[0])
            and not _torch_eager_direct(values)):
        named = dict(tensors)
        named.update(outputs)
        if op == "bsa_fwd" and _torch_bsa_autograd is not None and _needs_grad(values):
            o, lse = _torch_bsa_autograd(named, cfg)
            named["o"].copy_(o)
            if named.get("lse") is not None:
                named["lse"].copy_(lse)
            return
        _torch_dispatch(op, named, cfg)
        return
    names_t = tuple(names)
    values_t = tuple(values)
    if planning is not None:
        r = (rt or runtime())._rt
        ws = planning.get("workspace")
        if planning.get("caller_workspace"):
            ptr, nbytes = _workspace_pointer(ws)
            p = r.plan(op, cfg, names_t, values_t, True, ptr, nbytes)
        else:
            p = r.plan(op, cfg, names_t, values_t)
        planning["result"] = (p, op, cfg, ws, names_t)
        return
    if current is not None:
        if current.op != op or current.config != cfg:
            raise ValueError(f"plan: expected a call of {current.op} with the planned parameters {current.config}, "
                             f"got {op} with {cfg}")
        current._p.run(names_t, values_t, _stream_handle(stream, values_t))
        return
    (rt or runtime())._rt.run(op, cfg, names_t, values_t, _stream_handle(stream, values_t))


def _needs_grad(values: Sequence[Any]) -> bool:
    import torch

    return torch.is_grad_enabled() and any(getattr(t, "requires_grad", False) for t in values)


def _workspace_pointer(ws: Any) -> Tuple[int, int]:
    if ws is None:
        return 0, 0
    if _is_torch(ws):
        return ws.data_ptr(), ws.numel() * ws.element_size()
    if isinstance(ws, tuple) and len(ws) == 2:
        return int(ws[0]), int(ws[1])
    iface = getattr(ws, "__cuda_array_interface__", None)
    if iface is not None:
        import math

        itemsize = int(iface["typestr"][2:])
        return int(iface["data"][0]), itemsize * math.prod(iface["shape"])
    raise ValueError("workspace: expected a torch tensor, an object with __cuda_array_interface__, or (ptr, bytes)")


class Plan:
    """A plan for one op, its parameters and its static signature: plan once (for the largest shapes
    the serving loop will see), then run many times. `run` takes the op function's arguments, never
    compiles or allocates device memory in the library, and is safe inside CUDA-graph capture when the
    plan was made before the capture began (outputs: pass out= so nothing is allocated either).

    `workspace`: caller-provided device scratch (a torch uint8 tensor, say); the library then makes
    no cuMemAlloc of its own. With workspace=True the plan is made without scratch and one must be
    bound with set_workspace() before run(); `workspace_size` says how many bytes.
    """

    def __init__(self, fn: Callable[..., Any], *args: Any, workspace: Any = None, **kwargs: Any):
        planning = {"workspace": None if workspace is True else workspace,
                    "caller_workspace": workspace is not None}
        _state.planning = planning
        try:
            fn(*args, **kwargs)
        finally:
            _state.planning = None
        self._p, self.op, self.config, self._workspace, self.names = planning["result"]
        self._fn = fn
        self._run = self._p.run

    @property
    def workspace_size(self) -> int:
        return self._p.workspace_size

    def set_workspace(self, workspace: Any) -> None:
        ptr, nbytes = _workspace_pointer(workspace)
        self._p.set_workspace(ptr, nbytes)
        self._workspace = workspace  # kept alive as long as the plan

    def run(self, *args: Any, **kwargs: Any) -> Any:
        _state.plan = self
        try:
            return self._fn(*args, **kwargs)
        finally:
            _state.plan = None

    __call__ = run

    def execute(self, *tensors: Any, stream: int = 0) -> None:
        """The cheapest call: the tensors in `names` order (inputs, then outputs, absent optional
        ones left out), outputs pre-allocated; nothing is bound, allocated or looked up in Python.
        `stream` is a CUstream handle (int)."""
        self._run(self.names, tensors, stream)


def plan(fn: Callable[..., Any], *args: Any, workspace: Any = None, **kwargs: Any) -> Plan:
    """attnjit.plan(attnjit.gqa_fwd, q, k, v, is_causal=False) -> Plan; see Plan."""
    return Plan(fn, *args, workspace=workspace, **kwargs)
