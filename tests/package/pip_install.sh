#!/bin/sh
# `pip install .` as a new user runs it: the repository into a fresh virtual environment (scikit-build-core
# builds the project's CMake; the build requirements and numpy come from PyPI), then the README's Python
# example on numpy arrays (the CPU reference), checked against a direct numpy attention, from outside the
# source tree so that only the installed package can be imported.
# Usage: pip_install.sh SOURCE_DIR WORK_DIR
set -eu
src=$1
work=$2
rm -rf "$work"
mkdir -p "$work"
python3 -m venv "$work/venv"
# The wheel's CMake build goes to WORK_DIR, not into the source tree; two compile jobs (CI's cores).
CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-2} "$work/venv/bin/python" -m pip install -q \
  --config-settings=build-dir="$work/skbuild" "$src"
cd "$work"
ATTNJIT_CACHE_DIR="$work/cache" "$work/venv/bin/python" - "$work/venv" <<'PY'
import sys

import numpy as np
import attnjit

venv = sys.argv[1]
assert attnjit.__file__.startswith(venv), f"imported {attnjit.__file__}, not the installed package under {venv}"
# The README's example.
q = np.random.randn(1, 4, 4, 64).astype(np.float16)
k = np.random.randn(1, 6, 2, 64).astype(np.float16)
v = np.random.randn(1, 6, 2, 64).astype(np.float16)
o, lse = attnjit.gqa_fwd(q, k, v, is_causal=False, return_lse=True)   # is_causal defaults to True
assert o.shape == (1, 4, 4, 64) and o.dtype == np.float16 and lse.shape == (1, 4, 4) and lse.dtype == np.float32
# Query head h reads KV head h // 2 (GQA); softmax(q k^T / sqrt(D)) v in float64.
for h in range(4):
    qh, kh, vh = (x[0, :, i].astype(np.float64) for x, i in ((q, h), (k, h // 2), (v, h // 2)))
    s = qh @ kh.T / 8.0
    m = s.max(axis=1, keepdims=True)
    p = np.exp(s - m)
    ref = (p / p.sum(axis=1, keepdims=True)) @ vh
    err = np.linalg.norm(o[0, :, h].astype(np.float64) - ref) / np.linalg.norm(ref)
    assert err < 2e-3, f"head {h}: rel L2 {err}"
    assert np.allclose(lse[0, h], (m[:, 0] + np.log(p.sum(axis=1))), atol=1e-4)
print(f"pip install: attnjit {attnjit.__version__} from {attnjit.__file__}: the README example matches numpy")
PY
