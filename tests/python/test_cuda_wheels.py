"""The CUDA toolkit from NVIDIA's pip wheels (attnjit/_cuda_wheels.py): found under nvidia/cu13 of an
import path when the environment names no toolkit, never over one it names."""
import os
import subprocess
import sys

import pytest

from attnjit import _cuda_wheels


def make_tree(root, headers=True, cccl=True, nvrtc=True):
    home = root / "nvidia" / "cu13"
    (home / "include" / "cccl" / "cuda").mkdir(parents=True)
    (home / "lib").mkdir()
    if headers:
        (home / "include" / "cuda_fp16.h").write_text("")
    if cccl:
        (home / "include" / "cccl" / "cuda" / "ptx").write_text("")
    if nvrtc:
        (home / "lib" / "libnvrtc.so.13").write_text("")
    return str(home)


def test_found_when_the_environment_names_no_toolkit(tmp_path):
    home = make_tree(tmp_path / "site")
    env = {"PATH": "/usr/bin"}
    assert _cuda_wheels.configure_environment(env, [str(tmp_path / "empty"), str(tmp_path / "site")]) == home
    assert env["ATTNJIT_CUDA_HOME"] == home
    assert env["ATTNJIT_NVRTC_PATH"] == os.path.join(home, "lib", "libnvrtc.so.13")


@pytest.mark.parametrize("var", ["ATTNJIT_CUDA_HOME", "CUDA_HOME", "ATTNJIT_NVRTC_PATH"])
def test_a_named_toolkit_wins(tmp_path, var):
    make_tree(tmp_path)
    env = {var: "/opt/cuda"}
    assert _cuda_wheels.configure_environment(env, [str(tmp_path)]) is None
    assert env == {var: "/opt/cuda"}


@pytest.mark.parametrize("missing", ["headers", "cccl", "nvrtc"])
def test_an_incomplete_tree_is_not_used(tmp_path, missing):
    make_tree(tmp_path, **{missing: False})
    env = {}
    assert _cuda_wheels.configure_environment(env, [str(tmp_path)]) is None
    assert env == {}


def test_import_attnjit_sets_the_variables(tmp_path):
    home = make_tree(tmp_path)
    env = {k: v for k, v in os.environ.items() if k not in ("ATTNJIT_CUDA_HOME", "CUDA_HOME", "ATTNJIT_NVRTC_PATH")}
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), env.get("PYTHONPATH", "")])
    out = subprocess.run([sys.executable, "-c", "import os, attnjit; print(os.environ['ATTNJIT_CUDA_HOME']); "
                          "print(os.environ['ATTNJIT_NVRTC_PATH'])"], env=env, capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == [home, os.path.join(home, "lib", "libnvrtc.so.13")]
