#!/usr/bin/env bash
# The unit tests, the C ABI test and the fuzzers under AddressSanitizer and UndefinedBehaviorSanitizer: a
# second, instrumented clang build of the library, the two test programs and the libFuzzer targets of
# tests/fuzz in BUILD_DIR; then both programs with every finding fatal, then each fuzzer replays its
# committed seed corpus (tests/fuzz/corpus/<target>) and fuzzes for FUZZ_SECONDS (default 10) into a
# scratch corpus. CTest runs this as `sanitized_tests` (tests/CMakeLists.txt), so CI does. clang is
# needed for libFuzzer (tools/scripts/install-deps.sh installs it); tests/fuzz/run.sh fuzzes longer.
# Two unit cases are left to the plain build: "every warm-up kernel compiles" (NVRTC itself is not
# instrumented, and the case takes minutes) and "shapes too large to allocate for" (it proves that a
# failed allocation becomes InvalidArgument, and ASan's operator new reports a failed allocation
# instead of throwing std::bad_alloc). Everything else runs.
# Usage: tools/scripts/sanitized_tests.sh SOURCE_DIR BUILD_DIR [CXX_COMPILER_LAUNCHER]
set -euo pipefail
src=$1
build=$2
launcher=${3:-}
fuzz_seconds=${FUZZ_SECONDS:-10}
if ! command -v clang++ >/dev/null || ! command -v clang >/dev/null; then
  echo "sanitized_tests: clang and clang++ are needed (libFuzzer); run tools/scripts/install-deps.sh" >&2
  exit 1
fi
flags="-O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined"
# NOTE: fuzzer-no-link gives the fuzzers coverage of the library's code; --as-needed keeps the toolkit's
# libcuda.so stub out of NEEDED, so the instrumented library loads on a machine without a driver; the C
# test links UBSan's C++ runtime (the library's vptr and function checks) and libstdc++ through clang's C
# driver (libstdc++ named before the objects, so --as-needed must not drop it; CMake's compiler check
# links a C program with these flags too).
args=(-S "$src" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=None -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++
      -DCMAKE_CXX_FLAGS="$flags -fsanitize=fuzzer-no-link" -DCMAKE_C_FLAGS="$flags"
      -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined -fsanitize-link-c++-runtime -Wl,--no-as-needed -lstdc++ -Wl,--as-needed"
      -DCMAKE_SHARED_LINKER_FLAGS="-fsanitize=address,undefined -Wl,--as-needed"
      -DATTNJIT_SANITIZED_TESTS=OFF -DATTNJIT_BUILD_FUZZERS=ON -DATTNJIT_PYTHON=OFF)
[ -n "$launcher" ] && args+=(-DCMAKE_CXX_COMPILER_LAUNCHER="$launcher" -DCMAKE_C_COMPILER_LAUNCHER="$launcher")
mkdir -p "$build"
cmake "${args[@]}" >"$build/configure.log" 2>&1 || { cat "$build/configure.log"; exit 1; }
cmake --build "$build" -j2 --target attnjit_unit_tests attnjit_c_api_test fuzz_c_api fuzz_cache fuzz_case_file
cache=$(mktemp -d)
trap 'rm -rf "$cache"' EXIT
export ATTNJIT_CACHE_DIR=$cache ATTNJIT_LOG_LEVEL=error
# Leaks inside the (uninstrumented) NVRTC library and the dynamic loader are not ours.
supp="$build/lsan.supp"
printf 'leak:libnvrtc\nleak:libnvrtc-builtins\nleak:_dl_open\n' >"$supp"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:halt_on_error=1 LSAN_OPTIONS=suppressions=$supp
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
"$build/tests/attnjit_unit_tests" \
  -tce="nvrtc: every kernel of every op's warm-up matrix compiles for sm_90a,c abi hardening: shapes too large to allocate for are InvalidArgument naming the shape"
"$build/tests/attnjit_c_api_test"
# The fuzzers: leaks are not checked (a fuzz input that fails half-way may keep a cached plan alive).
export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 ATTNJIT_LOG_LEVEL=off
for t in fuzz_c_api fuzz_cache fuzz_case_file; do
  corpus="$src/tests/fuzz/corpus/$t"
  work="$build/fuzz-corpus/$t"
  findings="$build/fuzz-findings/$t"
  rm -rf "$work"
  mkdir -p "$work" "$findings"
  echo "== $t: replaying $(ls "$corpus" | wc -l) seeds, then fuzzing for $fuzz_seconds s"
  "$build/fuzz/$t" -runs=0 -timeout=20 -artifact_prefix="$findings/" "$corpus"
  # NOTE: new inputs go to the scratch corpus; the committed seeds are only read.
  "$build/fuzz/$t" -max_total_time="$fuzz_seconds" -timeout=20 -rss_limit_mb=4096 -max_len=8192 \
    -artifact_prefix="$findings/" "$work" "$corpus"
done
echo "sanitized_tests: unit tests, C test and fuzzers clean under ASan + UBSan"
