"""pytest setup for the attnjit package: the package comes from PYTHONPATH (the build tree's python/
folder under CTest) or from an installed wheel. numpy is required (a missing numpy must fail, not skip)."""
import os
import tempfile

import numpy as np
import pytest

os.environ.setdefault("ATTNJIT_CACHE_DIR", os.path.join(tempfile.gettempdir(), "attnjit-pytest-cache"))
os.environ.setdefault("ATTNJIT_LOG_LEVEL", "error")

import attnjit  # noqa: E402


def pytest_report_header(config):
    return f"attnjit {attnjit.__version__} from {os.path.dirname(attnjit.__file__)}"


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


def to_bf16_bits(x):
    """float32 -> bfloat16 bits (round to nearest even), as numpy uint16."""
    u = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    return u.astype(np.uint16)


def from_bf16_bits(b):
    return (np.asarray(b, np.uint16).astype(np.uint32) << 16).view(np.float32)


def attention(q, k, v, causal=False, scale=None):
    """Reference softmax attention in float64: q [S_q, D], k, v [S_kv, D]; bottom-right causal."""
    q, k, v = (np.asarray(a, np.float64) for a in (q, k, v))
    s = q @ k.T * (scale if scale is not None else 1 / np.sqrt(q.shape[-1]))
    if causal:
        S_q, S_kv = s.shape
        i = np.arange(S_q)[:, None] + S_kv - S_q
        s = np.where(np.arange(S_kv)[None, :] <= i, s, -np.inf)
    m = s.max(-1, keepdims=True)
    p = np.exp(s - m)
    lse = np.log(p.sum(-1)) + m[:, 0]
    return (p / p.sum(-1, keepdims=True)) @ v, lse


def torch_or_skip():
    try:
        import torch  # noqa: F401
    except ImportError:
        pytest.skip("torch is not installed (CI runs the numpy-only subset; see docs/python.md)")
    import torch

    return torch
