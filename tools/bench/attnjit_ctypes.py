"""attnjit_ctypes: a small ctypes wrapper around attnjit's C ABI (include/attnjit/attnjit.h).

    import attnjit_ctypes as aj
    rt = aj.Runtime()                                   # options dict -> JSON (RuntimeOptions names)
    plan = rt.plan("gqa_fwd", {"is_causal": True}, {"q": q, "k": k, "v": v, "o": o})
    plan.execute({"q": q, "k": k, "v": v, "o": o})      # stream: torch's current stream by default
    rt.run("paged_kv_write", {"impl": "reference"}, {...numpy arrays...})

Tensors are passed as a dict name -> tensor, named by SPEC.md's argument names. A value may be
  * a torch.Tensor (cpu or cuda; fp16, bf16, fp32, int32, int64, float8_e4m3fn),
  * a numpy.ndarray (host memory; float16, float32, int32, int64; a uint16 array is bf16 and a
    uint8 array is e4m3 only when tagged explicitly),
  * a tuple (array_or_tensor, dtype) with dtype one of "fp16", "bf16", "e4m3", "fp32", "int32",
    "int64" (or a (code, bits) pair): reinterpret the element type, e.g. (np_uint16_array, "bf16"),
  * a DLTensorArg (from as_dltensor()),
  * None: the optional argument is absent (left out of the call).
Config values that are None are left out (unset), so {"sm_scale": None} means "default scale".

Failures raise AttnjitError carrying the status name and attnjit_last_error()'s message.

The DLPack structs follow DLPack 0.6 (Debian's /usr/include/dlpack/dlpack.h, what the library is built
against): DLDevice {int32 device_type; int32 device_id} (8 bytes), DLDataType {uint8 code; uint8 bits;
uint16 lanes} (4 bytes), DLTensor {void* data; DLDevice device; int32 ndim; DLDataType dtype;
int64* shape; int64* strides; uint64 byte_offset} (48 bytes on 64-bit). `python3 attnjit_ctypes.py
--self-test [--lib PATH]` checks the layout and, with numpy and the library, runs paged_kv_write's CPU
reference end to end.
"""
from __future__ import annotations

import ctypes
import json
import os
import sys
from typing import Any, Dict, Mapping, Optional

__all__ = [
    "kDLCPU", "kDLCUDA", "kDLInt", "kDLUInt", "kDLFloat", "kDLBfloat", "kDLFloat8E4M3FN",
    "DLDevice", "DLDataType", "DLTensor", "DLTensorArg", "AttnjitError", "STATUS_NAMES",
    "find_library", "load_library", "as_dltensor", "from_torch", "from_numpy",
    "Runtime", "Plan", "BoundCall", "run",
]

# ---- DLPack constants (DLPack 0.6; e4m3 is DLPack 1.1's kDLFloat8_e4m3fn, SPEC.md §1.13) ----
kDLCPU = 1
kDLCUDA = 2
kDLCUDAHost = 3
kDLInt = 0
kDLUInt = 1
kDLFloat = 2
kDLBfloat = 4
kDLFloat8E4M3FN = 10


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


# The layout this module assumes (checked by _check_layout and by the self-test).
EXPECTED_LAYOUT = {
    "DLDevice": (8, {"device_type": 0, "device_id": 4}),
    "DLDataType": (4, {"code": 0, "bits": 1, "lanes": 2}),
    "DLTensor": (48, {"data": 0, "device": 8, "ndim": 16, "dtype": 20, "shape": 24, "strides": 32,
                      "byte_offset": 40}),
}

STATUS_NAMES = {
    0: "ATTNJIT_OK",
    1: "ATTNJIT_INVALID_ARGUMENT",
    2: "ATTNJIT_UNSUPPORTED",
    3: "ATTNJIT_COMPILE_ERROR",
    4: "ATTNJIT_CUDA_ERROR",
    5: "ATTNJIT_CACHE_ERROR",
    6: "ATTNJIT_INTERNAL",
}

# dtype name -> (DLPack code, bits)
DTYPES = {
    "fp16": (kDLFloat, 16),
    "bf16": (kDLBfloat, 16),
    "fp32": (kDLFloat, 32),
    "int32": (kDLInt, 32),
    "int64": (kDLInt, 64),
    "e4m3": (kDLFloat8E4M3FN, 8),
}
_DTYPE_ALIASES = {
    "float16": "fp16", "half": "fp16", "bfloat16": "bf16", "float32": "fp32", "float": "fp32",
    "float8_e4m3fn": "e4m3", "fp8_e4m3": "e4m3",
}


class AttnjitError(RuntimeError):
    """A failed attnjit call: .status (int), .status_name, .message (attnjit_last_error()), .func."""

    def __init__(self, func: str, status: int, message: str):
        self.func = func
        self.status = status
        self.status_name = STATUS_NAMES.get(status, f"status {status}")
        self.message = message
        super().__init__(f"{func}: {self.status_name}: {message}")


def _check_layout() -> None:
    for cls in (DLDevice, DLDataType, DLTensor):
        size, offsets = EXPECTED_LAYOUT[cls.__name__]
        got = (ctypes.sizeof(cls), {f: getattr(cls, f).offset for f, _ in cls._fields_})
        if got != (size, offsets):
            raise AssertionError(f"{cls.__name__}: expected layout {(size, offsets)}, got {got}")


# ----------------------------------------------------------------------------------------------------
# Library loading

def _repo_root() -> str:
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def find_library(path: Optional[str] = None) -> str:
    """The path of libattnjit.so: `path`, else $ATTNJIT_LIB, else <repo>/build/libattnjit.so."""
    tried = []
    for cand in (path, os.environ.get("ATTNJIT_LIB"), os.path.join(_repo_root(), "build", "libattnjit.so")):
        if not cand:
            continue
        if os.path.isdir(cand):
            cand = os.path.join(cand, "libattnjit.so")
        if os.path.isfile(cand):
            return os.path.abspath(cand)
        tried.append(cand)
        if cand == path:  # an explicit path that does not exist is an error, not a fallback
            break
    raise FileNotFoundError(f"libattnjit.so not found (tried: {', '.join(tried) or 'nothing'}); "
                            "pass a path, set ATTNJIT_LIB, or build into <repo>/build")


_LIBS: Dict[str, ctypes.CDLL] = {}


def load_library(path: Optional[str] = None) -> ctypes.CDLL:
    """Loads (once per path) libattnjit.so and declares the C ABI's signatures."""
    resolved = find_library(path)
    lib = _LIBS.get(resolved)
    if lib is not None:
        return lib
    _check_layout()
    lib = ctypes.CDLL(resolved)
    vp, cp, i32 = ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int
    names_t, tensors_t = ctypes.POINTER(ctypes.c_char_p), ctypes.POINTER(DLTensor)
    lib.attnjit_runtime_create.argtypes = [cp, ctypes.POINTER(vp)]
    lib.attnjit_runtime_create.restype = i32
    lib.attnjit_runtime_destroy.argtypes = [vp]
    lib.attnjit_runtime_destroy.restype = None
    lib.attnjit_plan_create.argtypes = [vp, cp, cp, i32, names_t, tensors_t, ctypes.POINTER(vp)]
    lib.attnjit_plan_create.restype = i32
    lib.attnjit_plan_execute.argtypes = [vp, i32, names_t, tensors_t, vp]
    lib.attnjit_plan_execute.restype = i32
    lib.attnjit_plan_destroy.argtypes = [vp]
    lib.attnjit_plan_destroy.restype = None
    lib.attnjit_run.argtypes = [vp, cp, cp, i32, names_t, tensors_t, vp]
    lib.attnjit_run.restype = i32
    lib.attnjit_last_error.argtypes = []
    lib.attnjit_last_error.restype = cp
    lib._attnjit_path = resolved
    _LIBS[resolved] = lib
    return lib


def _check(lib: ctypes.CDLL, func: str, status: int) -> None:
    if status != 0:
        msg = lib.attnjit_last_error()
        raise AttnjitError(func, int(status), msg.decode("utf-8", "replace") if msg else "")


# ----------------------------------------------------------------------------------------------------
# Tensor adapters

class DLTensorArg:
    """One DLTensor plus everything it points into (shape and stride arrays, the source object), kept
    alive for as long as this object lives."""

    __slots__ = ("dl", "_shape", "_strides", "owner", "is_torch_cuda", "cuda_index")

    def __init__(self, data: int, device_type: int, device_id: int, code: int, bits: int, shape, strides,
                 owner: Any = None):
        ndim = len(shape)
        if len(strides) != ndim:
            raise ValueError(f"shape {tuple(shape)} and strides {tuple(strides)} differ in rank")
        self._shape = (ctypes.c_int64 * max(ndim, 1))(*[int(s) for s in shape])
        self._strides = (ctypes.c_int64 * max(ndim, 1))(*[int(s) for s in strides])
        self.dl = DLTensor()
        self.dl.data = ctypes.c_void_p(int(data)) if data else None
        self.dl.device = DLDevice(int(device_type), int(device_id))
        self.dl.ndim = ndim
        self.dl.dtype = DLDataType(int(code), int(bits), 1)
        self.dl.shape = ctypes.cast(self._shape, ctypes.POINTER(ctypes.c_int64))
        self.dl.strides = ctypes.cast(self._strides, ctypes.POINTER(ctypes.c_int64))
        self.dl.byte_offset = 0
        self.owner = owner
        self.is_torch_cuda = False
        self.cuda_index = device_id if device_type == kDLCUDA else None

    def __repr__(self) -> str:
        n = self.dl.ndim
        return (f"DLTensorArg(data=0x{self.dl.data or 0:x}, device=({self.dl.device.device_type}, "
                f"{self.dl.device.device_id}), dtype=({self.dl.dtype.code}, {self.dl.dtype.bits}), "
                f"shape={list(self._shape[:n])}, strides={list(self._strides[:n])})")


def _dtype_override(dtype) -> tuple:
    if isinstance(dtype, tuple):
        return int(dtype[0]), int(dtype[1])
    name = _DTYPE_ALIASES.get(str(dtype), str(dtype))
    if name not in DTYPES:
        raise ValueError(f"dtype override: expected one of {sorted(DTYPES)} or (code, bits), got {dtype!r}")
    return DTYPES[name]


def _torch_dtype_map(torch) -> dict:
    m = {
        torch.float16: DTYPES["fp16"],
        torch.bfloat16: DTYPES["bf16"],
        torch.float32: DTYPES["fp32"],
        torch.int32: DTYPES["int32"],
        torch.int64: DTYPES["int64"],
        torch.uint8: (kDLUInt, 8),
        torch.int16: (kDLInt, 16),
    }
    if hasattr(torch, "float8_e4m3fn"):
        m[torch.float8_e4m3fn] = DTYPES["e4m3"]
    return m


def from_torch(t, dtype=None) -> DLTensorArg:
    """A torch tensor (strided, any device cpu/cuda) as a DLTensor; `dtype` reinterprets the elements
    (same element size)."""
    import torch
    if t.layout != torch.strided:
        raise ValueError(f"from_torch: expected a strided tensor, got layout {t.layout}")
    if t.device.type == "cuda":
        dev_type, dev_id = kDLCUDA, t.device.index if t.device.index is not None else torch.cuda.current_device()
    elif t.device.type == "cpu":
        dev_type, dev_id = kDLCPU, 0
    else:
        raise ValueError(f"from_torch: expected a cpu or cuda tensor, got device {t.device}")
    if dtype is not None:
        code, bits = _dtype_override(dtype)
        if bits != 8 * t.element_size():
            raise ValueError(f"from_torch: dtype override {dtype!r} has {bits} bits, tensor elements have "
                             f"{8 * t.element_size()}")
    else:
        m = _torch_dtype_map(torch)
        if t.dtype not in m:
            raise ValueError(f"from_torch: unsupported dtype {t.dtype}")
        code, bits = m[t.dtype]
    # data_ptr() already includes the storage offset, so byte_offset stays 0.
    a = DLTensorArg(t.data_ptr(), dev_type, dev_id, code, bits, tuple(t.shape), tuple(t.stride()), owner=t)
    a.is_torch_cuda = dev_type == kDLCUDA
    return a


def from_numpy(a, dtype=None) -> DLTensorArg:
    """A numpy array (host memory) as a kDLCPU DLTensor. float16/float32/int32/int64 map directly;
    uint16 needs dtype="bf16" and uint8 dtype="e4m3" (bit patterns, numpy has neither type)."""
    import numpy as np
    if not isinstance(a, np.ndarray):
        raise TypeError(f"from_numpy: expected a numpy.ndarray, got {type(a).__name__}")
    natural = {
        np.dtype(np.float16): DTYPES["fp16"],
        np.dtype(np.float32): DTYPES["fp32"],
        np.dtype(np.int32): DTYPES["int32"],
        np.dtype(np.int64): DTYPES["int64"],
    }
    if dtype is not None:
        code, bits = _dtype_override(dtype)
        if bits != 8 * a.itemsize:
            raise ValueError(f"from_numpy: dtype override {dtype!r} has {bits} bits, array elements have "
                             f"{8 * a.itemsize}")
    else:
        if not a.dtype.isnative:
            raise ValueError(f"from_numpy: expected native byte order, got {a.dtype}")
        key = a.dtype
        if key not in natural:
            raise ValueError(f"from_numpy: unsupported dtype {a.dtype} (uint16 needs dtype='bf16', uint8 "
                             "needs dtype='e4m3')")
        code, bits = natural[key]
    strides = []
    for s in a.strides:
        if s % a.itemsize:
            raise ValueError(f"from_numpy: byte stride {s} is not a multiple of the element size {a.itemsize}")
        strides.append(s // a.itemsize)
    return DLTensorArg(a.ctypes.data, kDLCPU, 0, code, bits, a.shape, strides, owner=a)


def as_dltensor(x, dtype=None) -> DLTensorArg:
    """Dispatches on the object: DLTensorArg, (obj, dtype) tuple, torch tensor or numpy array."""
    if isinstance(x, DLTensorArg):
        if dtype is not None:
            raise ValueError("as_dltensor: a DLTensorArg takes no dtype override")
        return x
    if isinstance(x, tuple) and len(x) == 2 and dtype is None:
        return as_dltensor(x[0], x[1])
    mod = type(x).__module__ or ""
    if mod.startswith("torch"):
        return from_torch(x, dtype)
    if mod.startswith("numpy"):
        return from_numpy(x, dtype)
    raise TypeError(f"as_dltensor: expected a torch tensor, numpy array, (array, dtype) or DLTensorArg, "
                    f"got {type(x).__name__}")


class _Packed:
    """The (names, DLTensor[]) arrays of one call, plus the adapters that keep their memory alive."""

    __slots__ = ("n", "names", "tensors", "args", "_name_bytes")

    def __init__(self, tensors: Mapping[str, Any]):
        items = [(str(k), as_dltensor(v)) for k, v in tensors.items() if v is not None]
        self.n = len(items)
        self._name_bytes = [k.encode() for k, _ in items]
        self.names = (ctypes.c_char_p * max(self.n, 1))(*self._name_bytes)
        self.tensors = (DLTensor * max(self.n, 1))(*[a.dl for _, a in items])  # copies the structs
        self.args = [a for _, a in items]  # the copies point into these adapters' arrays

    def default_stream(self) -> int:
        for a in self.args:
            if a.is_torch_cuda:
                import torch
                return torch.cuda.current_stream(a.cuda_index).cuda_stream
        return 0


def _stream_value(stream, packed: _Packed) -> Optional[int]:
    if stream is None:
        stream = packed.default_stream()
    elif hasattr(stream, "cuda_stream"):  # a torch.cuda.Stream
        stream = stream.cuda_stream
    stream = int(stream)
    return stream or None


def _config_json(config) -> bytes:
    if config is None:
        return b"{}"
    if isinstance(config, (str, bytes)):
        return config.encode() if isinstance(config, str) else config
    return json.dumps({k: v for k, v in dict(config).items() if v is not None}).encode()


# ----------------------------------------------------------------------------------------------------
# Runtime, Plan, bound calls

class BoundCall:
    """A prepared call: the argument arrays are built once, so each __call__ costs one C call. Used to
    time plan execution (or attnjit_run) without Python packing overhead."""

    def __init__(self, lib, func_name: str, leading: tuple, packed: _Packed, stream, keepalive=None):
        self._lib = lib
        self._fn = getattr(lib, func_name)
        self._name = func_name
        self._args = leading + (packed.n, packed.names, packed.tensors, stream)
        self._packed = packed
        self._keepalive = keepalive

    def __call__(self) -> None:
        st = self._fn(*self._args)
        if st:
            _check(self._lib, self._name, st)


class Plan:
    """attnjit_plan_create / attnjit_plan_execute / attnjit_plan_destroy."""

    def __init__(self, runtime: "Runtime", op: str, config=None, tensors: Mapping[str, Any] = None):
        self._runtime = runtime  # keep the runtime alive while the plan lives
        self._lib = runtime._lib
        self.op = op
        packed = _Packed(tensors or {})
        handle = ctypes.c_void_p()
        _check(self._lib, "attnjit_plan_create",
               self._lib.attnjit_plan_create(runtime._handle, op.encode(), _config_json(config), packed.n,
                                             packed.names, packed.tensors, ctypes.byref(handle)))
        self._handle = handle

    def execute(self, tensors: Mapping[str, Any], stream=None) -> None:
        packed = _Packed(tensors)
        _check(self._lib, "attnjit_plan_execute",
               self._lib.attnjit_plan_execute(self._handle, packed.n, packed.names, packed.tensors,
                                              _stream_value(stream, packed)))

    def bind(self, tensors: Mapping[str, Any], stream=None) -> BoundCall:
        packed = _Packed(tensors)
        return BoundCall(self._lib, "attnjit_plan_execute", (self._handle,), packed, _stream_value(stream, packed),
                         keepalive=self)

    def close(self) -> None:
        h, self._handle = getattr(self, "_handle", None), None
        if h and h.value and self._lib is not None:
            self._lib.attnjit_plan_destroy(h)

    __del__ = close

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class Runtime:
    """attnjit_runtime_create (options dict -> JSON, RuntimeOptions field names) / destroy."""

    def __init__(self, options: Optional[Mapping[str, Any]] = None, lib: Optional[str] = None):
        self._lib = load_library(lib)
        opts = None if not options else json.dumps(dict(options)).encode()
        handle = ctypes.c_void_p()
        _check(self._lib, "attnjit_runtime_create", self._lib.attnjit_runtime_create(opts, ctypes.byref(handle)))
        self._handle = handle

    @property
    def library_path(self) -> str:
        return self._lib._attnjit_path

    def plan(self, op: str, config=None, tensors: Mapping[str, Any] = None) -> Plan:
        return Plan(self, op, config, tensors)

    def run(self, op: str, config=None, tensors: Mapping[str, Any] = None, stream=None) -> None:
        packed = _Packed(tensors or {})
        _check(self._lib, "attnjit_run",
               self._lib.attnjit_run(self._handle, op.encode(), _config_json(config), packed.n, packed.names,
                                     packed.tensors, _stream_value(stream, packed)))

    def bind_run(self, op: str, config, tensors: Mapping[str, Any], stream=None) -> BoundCall:
        packed = _Packed(tensors)
        return BoundCall(self._lib, "attnjit_run", (self._handle, op.encode(), _config_json(config)), packed,
                         _stream_value(stream, packed), keepalive=self)

    def close(self) -> None:
        h, self._handle = getattr(self, "_handle", None), None
        if h and h.value and getattr(self, "_lib", None) is not None:
            self._lib.attnjit_runtime_destroy(h)

    __del__ = close

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


_DEFAULT_RUNTIME: Optional[Runtime] = None


def run(op: str, config=None, tensors: Mapping[str, Any] = None, stream=None, lib: Optional[str] = None) -> None:
    """attnjit_run on a process-wide default Runtime (created on first use)."""
    global _DEFAULT_RUNTIME
    if _DEFAULT_RUNTIME is None:
        _DEFAULT_RUNTIME = Runtime(lib=lib)
    _DEFAULT_RUNTIME.run(op, config, tensors, stream)


# ----------------------------------------------------------------------------------------------------
# Self-test: layout, and paged_kv_write's CPU reference through the C ABI on numpy arrays.

def _self_test(lib_path: Optional[str]) -> int:
    _check_layout()
    print("layout: DLDevice 8, DLDataType 4, DLTensor 48 bytes with offsets", EXPECTED_LAYOUT["DLTensor"][1])
    import numpy as np

    rt = Runtime(lib=lib_path)
    print("library:", rt.library_path)
    rng = np.random.default_rng(7)
    N, H, D, NP, PS = 37, 3, 64, 5, 16
    perm = rng.permutation(NP * PS)[:N].astype(np.int64)
    perm[5] = -1  # a skipped row
    failures = 0

    # fp16 -> fp16 cache: a copy, checked bitwise; unwritten rows keep the poison.
    k = rng.standard_normal((N, H, D)).astype(np.float16)
    v = rng.standard_normal((N, H, D)).astype(np.float16)
    kp = np.full((NP, PS, H, D), np.nan, np.float16)
    vp = np.full((NP, PS, H, D), np.nan, np.float16)
    rt.run("paged_kv_write", {"impl": "reference"},
           {"k": k, "v": v, "k_pages": kp, "v_pages": vp, "slot_mapping": perm})
    ek = np.full_like(kp, np.nan).reshape(-1, H, D)
    ev = np.full_like(vp, np.nan).reshape(-1, H, D)
    ok = perm >= 0
    ek[perm[ok]] = k[ok]
    ev[perm[ok]] = v[ok]
    same = (np.array_equal(kp.reshape(-1, H, D).view(np.uint16), ek.view(np.uint16))
            and np.array_equal(vp.reshape(-1, H, D).view(np.uint16), ev.view(np.uint16)))
    print(f"paged_kv_write fp16->fp16 reference via run(): {'bitwise OK' if same else 'MISMATCH'}")
    failures += not same

    # bf16 (uint16 bit patterns) -> e4m3 cache (uint8), through a Plan (create + execute); checked
    # against tests/gen/paged_kv_write_golden.py's independent numpy encoder when it is importable.
    kf = rng.standard_normal((N, H, D)).astype(np.float32) * 40
    vf = rng.standard_normal((N, H, D)).astype(np.float32) * 40
    kb = (kf.view(np.uint32) >> 16).astype(np.uint16)  # truncation to bf16 bits: any bf16 value will do
    vb = (vf.view(np.uint32) >> 16).astype(np.uint16)
    k_scale = np.array([0.25], np.float32)
    v_scale = np.array([0.5], np.float32)
    kp8 = np.full((NP, PS, H, D), 0xAB, np.uint8)
    vp8 = np.full((NP, PS, H, D), 0xAB, np.uint8)
    tensors = {"k": (kb, "bf16"), "v": (vb, "bf16"), "k_pages": (kp8, "e4m3"), "v_pages": (vp8, "e4m3"),
               "slot_mapping": perm, "k_scale": k_scale, "v_scale": v_scale}
    with rt.plan("paged_kv_write", {"impl": "reference"}, tensors) as plan:
        plan.execute(tensors)
    untouched = np.ones(NP * PS, bool)
    untouched[perm[ok]] = False
    poison_ok = bool((kp8.reshape(-1, H, D)[untouched] == 0xAB).all() and (vp8.reshape(-1, H, D)[untouched] == 0xAB).all())
    try:
        sys.path.insert(0, os.path.join(_repo_root(), "tests", "gen"))
        import paged_kv_write_golden as golden
        k32 = (kb.astype(np.uint32) << 16).view(np.float32)
        v32 = (vb.astype(np.uint32) << 16).view(np.float32)
        ek8 = golden.e4m3_store(k32[ok], k_scale[0])
        ev8 = golden.e4m3_store(v32[ok], v_scale[0])
        same = (np.array_equal(kp8.reshape(-1, H, D)[perm[ok]], ek8.reshape(-1, H, D).astype(np.uint8))
                and np.array_equal(vp8.reshape(-1, H, D)[perm[ok]], ev8.reshape(-1, H, D).astype(np.uint8)))
        note = "bitwise vs paged_kv_write_golden.e4m3_store"
    except ImportError:
        same = not bool((kp8.reshape(-1, H, D)[perm[ok]] == 0xAB).all())
        note = "written (golden encoder not importable)"
    print(f"paged_kv_write bf16->e4m3 reference via Plan: {'OK' if same and poison_ok else 'MISMATCH'} "
          f"({note}; skipped/unmapped rows keep the poison: {poison_ok})")
    failures += not (same and poison_ok)

    # Errors come back as AttnjitError with the status name and the library's message.
    try:
        rt.run("paged_kv_write", {"impl": "reference"}, {**tensors, "slot_mapping": perm.astype(np.int32)})
        print("expected a dtype error, got success")
        failures += 1
    except AttnjitError as e:
        print(f"error path OK: {e}")
    try:
        rt.run("no_such_op", {}, {})
        failures += 1
    except AttnjitError as e:
        print(f"error path OK: {e.status_name}: {e.message[:80]}...")
    rt.close()
    print("self-test:", "PASS" if failures == 0 else f"FAIL ({failures})")
    return 1 if failures else 0


if __name__ == "__main__":
    import argparse
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lib", default=None, help="libattnjit.so (default: $ATTNJIT_LIB or <repo>/build)")
    ap.add_argument("--self-test", action="store_true", help="check the struct layout and run a CPU call")
    a = ap.parse_args()
    sys.exit(_self_test(a.lib))
