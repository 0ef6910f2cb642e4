#!/usr/bin/env bash
# Installs the Debian 12 packages attnjit builds against, if any is missing (the CUDA 13 toolkit is
# expected in /usr/local/cuda). Needs root (or sudo). Quiet and quick when everything is present.
set -euo pipefail
packages=(cmake ninja-build g++ pkg-config libfmt-dev libspdlog-dev nlohmann-json3-dev doctest-dev
          libdlpack-dev libcli11-dev libssl-dev python3-numpy python3-dev python3-pip python3-venv
          clang libclang-rt-14-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "install-deps: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
# The Python package: nanobind builds the extension, pytest and numpy run its tests, all for the
# python3 first on PATH (the one CMake finds).
if ! python3 -c "import nanobind, pytest, numpy" >/dev/null 2>&1; then
  echo "install-deps: pip install nanobind pytest numpy"
  python3 -m pip install -q nanobind pytest numpy 2>/dev/null ||
    python3 -m pip install -q --break-system-packages nanobind pytest numpy
fi
if [ ! -f /usr/local/cuda/include/nvrtc.h ] && ! command -v nvcc >/dev/null; then
  echo "install-deps: the CUDA 13 toolkit (NVRTC, headers) was not found under /usr/local/cuda" >&2
  exit 1
fi
