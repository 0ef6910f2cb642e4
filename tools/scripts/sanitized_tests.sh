#!/usr/bin/env bash
# The unit tests and the C ABI test under AddressSanitizer and UndefinedBehaviorSanitizer: a second,
# instrumented build of the library and the two test programs in BUILD_DIR, then both programs with
# every finding fatal. CTest runs this as `sanitized_tests` (tests/CMakeLists.txt), so CI does.
# Two unit cases are left to the plain build: "every warm-up kernel compiles" (NVRTC itself is not
# instrumented, and the case takes minutes) and "shapes too large to allocate for" (it proves that a
# failed allocation becomes InvalidArgument, and ASan's operator new reports a failed allocation
# instead of throwing std::bad_alloc). Everything else runs.
# Usage: tools/scripts/sanitized_tests.sh SOURCE_DIR BUILD_DIR [CXX_COMPILER_LAUNCHER]
set -euo pipefail
src=$1
build=$2
launcher=${3:-}
flags="-O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined"
args=(-S "$src" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=None -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_C_FLAGS="$flags"
      -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" -DCMAKE_SHARED_LINKER_FLAGS="-fsanitize=address,undefined"
      -DATTNJIT_SANITIZED_TESTS=OFF)
[ -n "$launcher" ] && args+=(-DCMAKE_CXX_COMPILER_LAUNCHER="$launcher" -DCMAKE_C_COMPILER_LAUNCHER="$launcher")
mkdir -p "$build"
cmake "${args[@]}" >"$build/configure.log" 2>&1 || { cat "$build/configure.log"; exit 1; }
cmake --build "$build" -j2 --target attnjit_unit_tests attnjit_c_api_test
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
echo "sanitized_tests: unit tests and C test clean under ASan + UBSan"
