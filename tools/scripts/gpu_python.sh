#!/usr/bin/env bash
# The Python package on a GPU host, one command from the repository root, without network: builds only the
# extension attnjit._attnjit for the host's python3, against the prebuilt library carried from the
# development machine (BUILD/libattnjit.so.*), then warms the kernel cache, runs the package's tests
# (tests/python: the CPU ones, then test_cuda.py) and the overhead benchmarks.
#
# Nothing is downloaded: nanobind comes from the wheel carried in .whl/ (a pure-Python wheel holding its C++
# sources), and so do pytest and its dependencies where the host has no pytest; the DLPack header comes from
# .whl/include/ where the host has no /usr/include/dlpack, the Python headers from .whl/include/pythonX.Y/
# where the host's are missing. Prepare .whl/ on the development machine (docs/python.md, "On a GPU host").
# The extension is built by a small CMake project (written into PYBUILD/src) that imports the prebuilt
# library and includes python/CMakeLists.txt; should CMake fail, by g++ directly (nanobind's documented
# recipe). The library is copied next to the extension (found through $ORIGIN), as in the wheel.
#
# Logs go to $OUT (default /tmp/attnjit-gpu-python): env, build, warmup, pytest, cuda, bench (.log) and
# summary.txt; the summary table is printed last.
# Usage: tools/scripts/gpu_python.sh
#   environment: BUILD (default build), PYTHON (default python3), PYBUILD (default build-python, git-ignored),
#   STEPS (default "env build warmup pytest cuda bench"), ATTNJIT_CACHE_DIR (default /tmp/attnjit-gpu-python-cache),
#   FORCE_GXX=1 (skip CMake, build with g++ directly), BUDGET_S (default 570: the steps' time in all; a step
#   is cut to what is left)
# Exit status: 0 when the build and every test passed and the benchmarks ran.
set -uo pipefail
cd "$(dirname "$0")/../.."
ROOT=$(pwd)
BUILD=${BUILD:-build}
PY=${PYTHON:-python3}
PYB=${PYBUILD:-$ROOT/build-python}
LOG=${OUT:-/tmp/attnjit-gpu-python}
STEPS=${STEPS:-env build warmup pytest cuda bench}
JOBS=$(nproc 2>/dev/null || echo 4)
mkdir -p "$LOG" "$PYB"
PYB=$(cd "$PYB" && pwd)
export ATTNJIT_CACHE_DIR=${ATTNJIT_CACHE_DIR:-/tmp/attnjit-gpu-python-cache}
export ATTNJIT_LOG_LEVEL=${ATTNJIT_LOG_LEVEL:-error}

# The prebuilt library: the regular file among BUILD/libattnjit.so* (symlinks may not survive a copy).
LIB=""
for f in "$BUILD"/libattnjit.so*; do
  if [ -f "$f" ] && [ ! -L "$f" ]; then LIB="$(cd "$(dirname "$f")" && pwd)/$(basename "$f")"; fi
done
SONAME=""
if [ -n "$LIB" ]; then
  SONAME=$(readelf -d "$LIB" 2>/dev/null | sed -n 's/.*(SONAME).*\[\(.*\)\].*/\1/p')
  [ -n "$SONAME" ] || SONAME=$(basename "$LIB" | sed -E 's/^(libattnjit\.so\.[0-9]+\.[0-9]+)\..*$/\1/')
fi
export ROOT BUILD PY PYB LOG JOBS LIB SONAME

pypath() {  # the PYTHONPATH of the test and benchmark steps (written by the build step)
  local pp ver
  ver=$("$PY" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
  pp=$(cat "$PYB/pythonpath-$ver" 2>/dev/null) || { echo "no extension built for $PY (run the build step)" >&2; return 1; }
  echo "$pp${PYTHONPATH:+:$PYTHONPATH}"
}

do_env() {
  echo "== $(date -u '+%F %T') UTC, $(hostname), $(nproc) cores"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>&1 | head -3
  echo "== $PY = $(command -v "$PY")"
  "$PY" -VV
  "$PY" - <<'EOF'
import importlib
for m in ("numpy", "pytest", "torch", "triton", "nanobind"):
    try:
        print(f"{m} {getattr(importlib.import_module(m), '__version__', '?')}")
    except Exception as e:  # noqa: BLE001
        print(f"{m}: not importable ({type(e).__name__}: {e})")
try:
    import torch
    print("torch cuda", torch.version.cuda, "available", torch.cuda.is_available(),
          torch.cuda.get_device_name() if torch.cuda.is_available() else "")
except Exception:  # noqa: BLE001
    pass
EOF
  cmake --version 2>&1 | head -1
  g++ --version 2>&1 | head -1
  nvcc --version 2>&1 | tail -1
  echo "ninja $(ninja --version 2>&1)"
  echo "== library $LIB (soname $SONAME)"
  ls -la "$BUILD"/libattnjit.so* "$BUILD/bin" 2>&1
  [ -n "$LIB" ] && ldd "$LIB" 2>&1 | grep -E "not found|crypto|stdc\+\+|cuda"
  [ -x "$BUILD/bin/attnjit" ] && timeout 60 "$BUILD/bin/attnjit" info 2>&1 | head -30
  return 0
}

unzip_wheel() {  # wheel-name-glob dest: extracts the newest carried wheel of that name
  local whl
  whl=$(ls "$ROOT"/.whl/$1-*.whl 2>/dev/null | tail -n1)
  [ -n "$whl" ] || { echo "no .whl/$1-*.whl carried" >&2; return 1; }
  echo "extracting $(basename "$whl") into $2"
  "$PY" -m zipfile -e "$whl" "$2"
}

build_cmake() {  # pkg_root_var: prints nothing; leaves the package in $PYB/cmake/python
  local gen=() inc=()
  command -v ninja >/dev/null 2>&1 && gen=(-G Ninja)
  [ "$PYINC" != "$PYINC_HOST" ] && inc=(-DPython_INCLUDE_DIR="$PYINC")
  mkdir -p "$PYB/src"
  cat >"$PYB/src/CMakeLists.txt" <<'EOF'
# Written by tools/scripts/gpu_python.sh: the Python extension alone, against a prebuilt libattnjit.so.
cmake_minimum_required(VERSION 3.25)
project(attnjit_python LANGUAGES CXX)
set(CMAKE_CXX_STANDARD 20)
set(CMAKE_CXX_STANDARD_REQUIRED ON)
set(CMAKE_POSITION_INDEPENDENT_CODE ON)
add_library(attnjit SHARED IMPORTED)
set_target_properties(attnjit PROPERTIES IMPORTED_LOCATION "${ATTNJIT_LIBRARY}"
  INTERFACE_INCLUDE_DIRECTORIES "${ATTNJIT_SOURCE_DIR}/include;${ATTNJIT_DLPACK_INCLUDE}")
add_subdirectory("${ATTNJIT_SOURCE_DIR}/python" python)
# The library is copied next to the extension (as in the wheel).
set_target_properties(_attnjit PROPERTIES BUILD_RPATH "$ORIGIN")
EOF
  rm -rf "$PYB/cmake"
  PYTHONPATH="$NBPATH${PYTHONPATH:+:$PYTHONPATH}" cmake -S "$PYB/src" -B "$PYB/cmake" "${gen[@]}" \
    -DCMAKE_BUILD_TYPE=Release -DPython_EXECUTABLE="$PYEXE" "${inc[@]}" -DATTNJIT_LIBRARY="$LIB" \
    -DATTNJIT_SOURCE_DIR="$ROOT" -DATTNJIT_DLPACK_INCLUDE="$DLINC" || return 1
  cmake --build "$PYB/cmake" -j "$JOBS" || return 1
  PKG="$PYB/cmake/python"
}

build_gxx() {  # nanobind's recipe without CMake (src/nb_combined.cpp)
  local out=$PYB/gxx p1 p2
  rm -rf "$out"
  mkdir -p "$out/python/attnjit"
  cp "$ROOT"/python/attnjit/*.py "$ROOT/python/attnjit/py.typed" "$out/python/attnjit/"
  local flags=(-std=c++20 -fPIC -fvisibility=hidden -DNDEBUG -DNB_COMPACT_ASSERTIONS -I"$PYINC"
               -I"$NBDIR/include" -I"$NBDIR/ext/robin_map/include")
  g++ "${flags[@]}" -O3 -fno-strict-aliasing -ffunction-sections -fdata-sections -c "$NBDIR/src/nb_combined.cpp" \
    -o "$out/nb.o" & p1=$!
  g++ "${flags[@]}" -O2 -I"$ROOT/include" -I"$DLINC" -c "$ROOT/python/src/attnjit_ext.cpp" -o "$out/ext.o" & p2=$!
  wait $p1 || return 1
  wait $p2 || return 1
  g++ -shared -Wl,--gc-sections -o "$out/python/attnjit/_attnjit$EXT_SUFFIX" "$out/ext.o" "$out/nb.o" "$LIB" \
    -Wl,-rpath,'$ORIGIN' || return 1
  PKG="$out/python"
}

do_build() {
  [ -n "$LIB" ] || { echo "no prebuilt library: $BUILD/libattnjit.so* (carry it from the development machine)"; return 1; }
  local facts
  facts=$("$PY" -c 'import shlex, sys, sysconfig
print("PYEXE=" + shlex.quote(sys.executable))
print("PYVER=%d.%d" % sys.version_info[:2])
print("PYINC_HOST=" + shlex.quote(sysconfig.get_paths()["include"]))
print("EXT_SUFFIX=" + shlex.quote(sysconfig.get_config_var("EXT_SUFFIX")))') || return 1
  eval "$facts"
  PYINC=${ATTNJIT_PY_INCLUDE:-$PYINC_HOST}
  if [ ! -f "$PYINC/Python.h" ]; then
    echo "no Python.h in $PYINC: using the carried headers .whl/include/python$PYVER"
    PYINC=$ROOT/.whl/include/python$PYVER
    [ -f "$PYINC/Python.h" ] || { echo "no Python $PYVER headers (install python$PYVER-dev, or carry them in .whl/include)"; return 1; }
  fi
  DLINC=/usr/include
  [ -f "$DLINC/dlpack/dlpack.h" ] || DLINC=$ROOT/.whl/include
  [ -f "$DLINC/dlpack/dlpack.h" ] || { echo "no dlpack/dlpack.h in /usr/include or .whl/include"; return 1; }
  NBPATH=""
  if ! "$PY" -m nanobind --cmake_dir >/dev/null 2>&1; then
    rm -rf "$PYB/nb"
    unzip_wheel nanobind "$PYB/nb" || return 1
    NBPATH=$PYB/nb
  fi
  NBDIR=$(PYTHONPATH="$NBPATH${PYTHONPATH:+:$PYTHONPATH}" "$PY" -c 'import nanobind, os; print(os.path.dirname(nanobind.__file__))') || return 1
  # Test dependencies the host may lack (pure-Python wheels; numpy only if a wheel for this Python is carried).
  SITE=$PYB/site-$PYVER
  rm -rf "$SITE" "$PYB/pythonpath-$PYVER"
  mkdir -p "$SITE"
  if ! "$PY" -c "import pytest" >/dev/null 2>&1; then
    for w in pytest pluggy iniconfig packaging pygments; do unzip_wheel "$w" "$SITE" || return 1; done
  fi
  if ! "$PY" -c "import numpy" >/dev/null 2>&1; then
    unzip_wheel "numpy-*-cp${PYVER/./}" "$SITE" || { echo "numpy is missing (the tests need it)"; return 1; }
  fi
  echo "python $PYEXE ($PYVER, headers $PYINC), nanobind $NBDIR, dlpack $DLINC, library $LIB ($SONAME)"
  PKG=""
  if [ "${FORCE_GXX:-0}" != 1 ]; then
    build_cmake || { echo "== CMake build failed: building with g++ directly"; PKG=""; }
  fi
  if [ -z "$PKG" ]; then
    build_gxx || return 1
  fi
  cp -f "$LIB" "$PKG/attnjit/$SONAME" || return 1
  ls -la "$PKG/attnjit"
  PYTHONPATH="$PKG:$SITE" "$PY" -c 'import attnjit, os
print("imported attnjit", attnjit.__version__, "from", os.path.dirname(attnjit.__file__))
print("ops:", len(attnjit.list_ops()))' || return 1
  echo "$PKG:$SITE" >"$PYB/pythonpath-$PYVER"
}

do_warmup() {
  local pp
  pp=$(pypath) || return 1
  PYTHONPATH="$pp" "$PY" - <<EOF
import time
import attnjit
t0 = time.time()
try:
    r = attnjit.warmup(jobs=$JOBS)
    print(f"warmup {r} in {time.time() - t0:.1f} s")
except attnjit.CompileError as e:
    print(f"warmup failed after {time.time() - t0:.1f} s: {e}")
    raise SystemExit(1)
EOF
}

do_pytest() {
  local pp
  pp=$(pypath) || return 1
  PYTHONPATH="$pp" "$PY" -m pytest -q -rfEs -p no:cacheprovider tests/python --ignore=tests/python/test_cuda.py
}

do_cuda() {
  local pp
  pp=$(pypath) || return 1
  PYTHONPATH="$pp" "$PY" -m pytest -v -rfEs -p no:cacheprovider --durations=10 tests/python/test_cuda.py
}

do_bench() {
  local pp rc=0
  pp=$(pypath) || return 1
  echo "== tools/bench/python_overhead_cuda.py"
  PYTHONPATH="$pp" "$PY" tools/bench/python_overhead_cuda.py || rc=1
  echo "== tools/bench/python_plan_hit.py (host arrays, CPU reference)"
  PYTHONPATH="$pp" "$PY" tools/bench/python_plan_hit.py || rc=1
  return $rc
}
export -f pypath do_env unzip_wheel build_cmake build_gxx do_build do_warmup do_pytest do_cuda do_bench

rows=()
status=0
START=$(date +%s)
BUDGET=${BUDGET_S:-570}  # the whole run's seconds (the device tool stops a command at 600)
step() {  # name timeout_s summary-pattern
  local name=$1 tmo=$2 pat=$3 t0 t1 rc word left
  left=$((BUDGET - ($(date +%s) - START) - 15))
  [ $left -lt $tmo ] && tmo=$left
  if [ $tmo -lt 20 ]; then
    rows+=("$(printf '%-7s %-8s %6s    %s' "$name" SKIPPED - "no time left of BUDGET_S=$BUDGET")")
    status=1
    return 1
  fi
  t0=$(date +%s.%N)
  timeout "$tmo" bash -c "do_$name" >"$LOG/$name.log" 2>&1
  rc=$?
  t1=$(date +%s.%N)
  case $rc in 0) word=ok ;; 124) word=TIMEOUT; status=1 ;; *) word="FAIL($rc)"; status=1 ;; esac
  rows+=("$(printf '%-7s %-8s %6.1f s  %s' "$name" "$word" "$(awk "BEGIN{print $t1 - $t0}")" \
    "$(grep -E "$pat" "$LOG/$name.log" | tail -n1 | cut -c1-120)")")
  return $rc
}

for s in $STEPS; do
  case $s in
    env) step env 120 "^torch cuda" ;;
    build) step build 420 "imported attnjit|rror" || break ;;
    warmup) step warmup 240 "warmup" ;;
    pytest) step pytest 300 "passed|failed|error" ;;
    cuda) step cuda 420 "passed|failed|error" ;;
    bench) step bench 180 "^op_call .* (yes|NO) |python_overhead_cuda:|Error" ;;
    *) echo "unknown step $s" >&2; status=1 ;;
  esac
done

{
  echo
  echo "== gpu_python.sh summary ($(date -u '+%F %T') UTC; logs in $LOG)"
  printf '%s\n' "${rows[@]}"
  if [ -f "$LOG/bench.log" ] && grep -q '^path ' "$LOG/bench.log"; then
    echo "-- python_overhead_cuda.py (us per call):"
    sed -n '/^path /,/^(us per call/p' "$LOG/bench.log"
  fi
  if [ -f "$LOG/cuda.log" ]; then
    grep -E "^(FAILED|ERROR) " "$LOG/cuda.log" | head -20
  fi
  echo "gpu_python.sh: $([ $status -eq 0 ] && echo PASS || echo FAIL)"
} | tee "$LOG/summary.txt"
exit $status
