"""The package around the ops: signatures against the C ABI's argument tables, errors, plans,
warm-up, info and the log callback."""
import inspect

import numpy as np
import pytest

import attnjit


def test_version_and_listing():
    assert attnjit.__version__.count(".") == 2
    ops = attnjit.list_ops()
    assert "gqa_fwd" in ops and "paged_kv_write" in ops and len(ops) == len(attnjit._ops.OPS)
    assert set(ops) == set(attnjit._ops.OPS)


@pytest.mark.parametrize("op", attnjit._ops.OPS)
def test_signature_matches_the_argument_table(op):
    """Every tensor and parameter of the contract is an argument of the op function, with the
    contract's default (None where the contract says unset)."""
    sig = inspect.signature(getattr(attnjit, op))
    table = attnjit.op_info(op)
    for t in table["tensors"]:
        if t["role"] == "out":
            continue
        assert t["name"] in sig.parameters, f"{op}: tensor {t['name']} missing"
        if t["optional"]:
            assert sig.parameters[t["name"]].default is None
    for p in table["params"]:
        name = p["name"]
        assert name in sig.parameters, f"{op}: parameter {name} missing"
        param = sig.parameters[name]
        assert param.kind == param.KEYWORD_ONLY, f"{op}: {name} should be keyword-only"
        if p["required"]:
            assert param.default is inspect.Parameter.empty, f"{op}: {name} is required"
        elif name == "impl":
            assert param.default is None  # by placement: "reference" on host tensors
        else:
            assert param.default == p["default"], f"{op}: {name} defaults to {param.default!r}, contract {p['default']!r}"


def test_is_causal_default_is_visible():
    assert inspect.signature(attnjit.gqa_fwd).parameters["is_causal"].default is True
    assert "is_causal defaults to True" in attnjit.gqa_fwd.__doc__
    assert inspect.signature(attnjit.mha_decode_paged).parameters["is_causal"].default is False


def _kv_call(slot_dtype=np.int64):
    k = np.ones((2, 1, 16), np.float16)
    pools = np.zeros((1, 4, 1, 16), np.float16), np.zeros((1, 4, 1, 16), np.float16)
    return k, k.copy(), pools[0], pools[1], np.array([0, 1], slot_dtype)


def test_invalid_argument_is_value_error_with_the_library_message():
    with pytest.raises(ValueError, match=r"^paged_kv_write: dtype: slot_mapping: "):
        attnjit.paged_kv_write(*_kv_call(np.int32))
    with pytest.raises(ValueError, match="impl"):
        attnjit.paged_kv_write(*_kv_call(), impl="bogus")
    with pytest.raises(ValueError, match="device"):
        attnjit.paged_kv_write(*_kv_call(), impl="kernel")  # host tensors need the reference
    with pytest.raises(TypeError):
        attnjit.paged_kv_write(*_kv_call(), bogus=1)


def test_status_to_exception_mapping():
    # Unsupported calls need a kernel plan (a GPU); the mapping itself is checked here.
    expect = {1: ValueError, 2: NotImplementedError, 3: attnjit.CompileError, 4: attnjit.CudaError,
              5: attnjit.CacheError, 6: attnjit.InternalError}
    for status, exc in expect.items():
        assert attnjit._attnjit._exception_for_status(status) is exc
        assert issubclass(exc, (ValueError, NotImplementedError, RuntimeError))
    for exc in (attnjit.CompileError, attnjit.CudaError, attnjit.CacheError, attnjit.InternalError):
        assert issubclass(exc, RuntimeError)


def test_compile_error_from_warmup(tmp_path):
    rt = attnjit.Runtime(cache_dir=str(tmp_path))
    with pytest.raises(attnjit.CompileError, match="sm_70"):
        attnjit.warmup(["paged_kv_write"], arch="sm_70", jobs=2, runtime=rt)


def test_rejects_non_tensors():
    k, v, kp, vp, s = _kv_call()
    with pytest.raises(TypeError, match="slot_mapping"):
        attnjit.paged_kv_write(k, v, kp, vp, [0, 1])


def test_dlpack_capsules_and_dlpack_objects():
    k, v, kp, vp, s = _kv_call()

    class Wrapped:
        def __init__(self, a):
            self.a = a
            self.shape = a.shape
            self.dtype = a.dtype

        def __dlpack__(self, **kw):
            return self.a.__dlpack__()

        def __dlpack_device__(self):
            return (1, 0)

    attnjit.paged_kv_write(Wrapped(k), k.__dlpack__(), kp, vp, s)
    assert np.array_equal(kp[0, :2], k)


def test_empty_tensors_with_any_strides():
    """A zero-element tensor is contiguous whatever its strides (torch gives [1000, 1, 1] for [1, 1000, 0])."""
    score = np.zeros((1, 2, 0, 1), np.float32)
    idx = attnjit.topk_select(score, topk=2)
    assert idx.shape == (1, 2, 1, 2) and (idx == -1).all()


def test_plan_once_run_many():
    k, v, kp, vp, s = _kv_call()
    p = attnjit.plan(attnjit.paged_kv_write, k, v, kp, vp, s)
    assert p.op == "paged_kv_write" and p.workspace_size == 0
    for i in range(3):
        kk = np.full_like(k, i)
        p.run(kk, kk, kp, vp, s)
        assert (kp[0, :2] == i).all()
    assert p.names == ("k", "v", "k_pages", "v_pages", "slot_mapping")
    kk = np.full_like(k, 9)
    p.execute(kk, kk, kp, vp, s)
    assert (kp[0, :2] == 9).all()
    with pytest.raises(ValueError, match="planned parameters"):
        p.run(k, v, kp, vp, s, validate_inputs=True)


def test_plan_with_caller_workspace():
    k, v, kp, vp, s = _kv_call()
    p = attnjit.plan(attnjit.paged_kv_write, k, v, kp, vp, s, workspace=True)
    assert p.workspace_size == 0
    p.run(k, v, kp, vp, s)
    with pytest.raises(ValueError, match="aligned"):
        p.set_workspace((0x101, 64))


def test_runtime_options_and_info(tmp_path):
    rt = attnjit.Runtime(cache_dir=str(tmp_path), no_jit=True)
    attnjit.paged_kv_write(*_kv_call(), runtime=rt)
    i = attnjit.info(rt)
    assert i["version"] == attnjit.__version__ and i["options"]["no_jit"] is True and "gqa_fwd" in i["ops"]
    with pytest.raises(ValueError, match="cache_dirr"):
        attnjit.Runtime(cache_dirr="/tmp")


def test_warmup_and_log_callback(tmp_path):
    records = []
    attnjit.set_log_callback(lambda level, msg: records.append((level, msg)))
    try:
        rt = attnjit.Runtime(cache_dir=str(tmp_path), log_level="info")
        r = attnjit.warmup(["paged_kv_write"], arch="sm_90a", jobs=2, runtime=rt)
        assert r["kernels"] > 0 and r["compiled"] == r["kernels"] and r["failed"] == 0
        assert sum(msg.startswith("compiled ") for _, msg in records) == r["kernels"]
        records.clear()
        again = attnjit.warmup("paged_kv_write", arch="sm_90a", runtime=rt)
        assert again["failed"] == 0 and not any(msg.startswith("compiled ") for _, msg in records)
        fresh = attnjit.Runtime(cache_dir=str(tmp_path), no_jit=True)
        hits = attnjit.warmup("paged_kv_write", arch="sm_90a", runtime=fresh)
        assert hits["cache_hits"] == r["kernels"] and hits["compiled"] == 0
    finally:
        attnjit.set_log_callback(None)
        attnjit.set_log_level("error")
    with pytest.raises(ValueError, match="unknown op"):
        attnjit.warmup(["nope"], runtime=rt)
