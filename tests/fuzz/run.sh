#!/bin/sh
# Builds the libFuzzer targets of tests/fuzz with clang, AddressSanitizer and UBSan in their own build
# folder, replays each committed seed corpus (tests/fuzz/corpus/<target>/), then fuzzes each target for a
# fixed budget. Exits non-zero on any finding (crash, sanitizer report, timeout). Findings land in
# <build>/findings/<target>/.
# Usage: tests/fuzz/run.sh [seconds per target, default 20] [build folder, default build-fuzz]
set -eu
BUDGET=${1:-20}
SRC=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${2:-$SRC/build-fuzz}
JOBS=${JOBS:-2}
SAN="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
LAUNCHER=""
command -v ccache >/dev/null 2>&1 && LAUNCHER="-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache"
# NOTE: --as-needed keeps the toolkit's libcuda.so stub out of NEEDED, so the sanitized library loads on
# a machine without a driver (the library dlopens libcuda itself).
cmake -S "$SRC" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ $LAUNCHER \
  -DCMAKE_C_FLAGS="$SAN" -DCMAKE_CXX_FLAGS="$SAN -fsanitize=fuzzer-no-link" \
  -DCMAKE_SHARED_LINKER_FLAGS="-Wl,--as-needed" -DCMAKE_EXE_LINKER_FLAGS="-Wl,--as-needed" \
  -DATTNJIT_BUILD_TESTS=OFF -DATTNJIT_BUILD_FUZZERS=ON >/dev/null
nice cmake --build "$BUILD" -j"$JOBS" --target fuzz_c_api fuzz_cache fuzz_case_file

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export ATTNJIT_LOG_LEVEL=off
status=0
for t in fuzz_c_api fuzz_cache fuzz_case_file; do
  corpus="$SRC/tests/fuzz/corpus/$t"
  work="$BUILD/corpus/$t"
  findings="$BUILD/findings/$t"
  mkdir -p "$work" "$findings"
  echo "== $t: replaying $(ls "$corpus" | wc -l) seeds"
  if ! "$BUILD/fuzz/$t" -runs=0 -timeout=20 -artifact_prefix="$findings/" "$corpus"; then status=1; continue; fi
  echo "== $t: fuzzing for $BUDGET s"
  # NOTE: new inputs go to a scratch corpus; the committed seeds are only read.
  if ! "$BUILD/fuzz/$t" -max_total_time="$BUDGET" -timeout=20 -rss_limit_mb=4096 -max_len=8192 \
      -artifact_prefix="$findings/" "$work" "$corpus"; then status=1; fi
done
[ "$status" -eq 0 ] && echo "fuzz: no findings" || echo "fuzz: FINDINGS under $BUILD/findings"
exit $status
