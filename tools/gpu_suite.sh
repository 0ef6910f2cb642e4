#!/usr/bin/env bash
# The GPU run, on a machine with a CUDA GPU: environment report, warm-up, the whole GPU test grid
# (kernels against the CPU reference), compute-sanitizer memcheck and racecheck over the small cases,
# the benchmarks (`attnjit bench`, and tools/bench_torch.py beside PyTorch's kernels when torch is
# importable). Logs go to $OUT (or /tmp/attnjit-gpu-suite); a short table is printed last.
# Usage: tools/gpu_suite.sh [BUILD_DIR]   (default: build)
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
BIN=$BUILD/bin/attnjit
LOG=${OUT:-/tmp/attnjit-gpu-suite}
mkdir -p "$LOG"
export ATTNJIT_CACHE_DIR=${ATTNJIT_CACHE_DIR:-/tmp/attnjit-gpu-suite-cache}
rows=()
status=0

step() {
  local name=$1
  shift
  local t0 t1 rc
  t0=$(date +%s.%N)
  "$@" >"$LOG/$name.log" 2>&1
  rc=$?
  t1=$(date +%s.%N)
  [ $rc -eq 0 ] || status=1
  rows+=("$(printf '%-10s %-4s %7.1f s  %s' "$name" "$([ $rc -eq 0 ] && echo ok || echo FAIL)" \
    "$(awk "BEGIN{print $t1 - $t0}")" "$(grep -E 'passed|ERROR SUMMARY|warmup |CUDA driver' "$LOG/$name.log" | tail -n1)")")
}

small_cases=(tests/cases/gpu/*_small.json)
# Each case file in its own process: a kernel fault (a sticky CUDA error) then fails only its file.
per_file() {
  local rc=0 f
  for f in "$@"; do
    echo "== $f"
    "${PREFIX[@]}" "$BIN" test "$f" || rc=1
  done
  return $rc
}
step info "$BIN" info
step warmup "$BIN" warmup
PREFIX=()
step tests per_file tests/cases/*.json tests/cases/gpu/*_grid.json
# lightning_indexer's slab path (topk beyond the fused kernel's buffers) over the regular grid's shapes.
step li_slab env ATTNJIT_TUNE_LI_FORCE_SLAB=1 "$BIN" test tests/cases/gpu/lightning_indexer_grid.json \
  tests/cases/gpu/lightning_indexer_small.json tests/cases/gpu/lightning_indexer_bigtopk_small.json
if command -v compute-sanitizer >/dev/null; then
  PREFIX=(compute-sanitizer --tool memcheck --error-exitcode 1)
  step memcheck per_file "${small_cases[@]}" tests/cases/*_errors.json
  step li_slab_memcheck env ATTNJIT_TUNE_LI_FORCE_SLAB=1 compute-sanitizer --tool memcheck --error-exitcode 1 "$BIN" test \
    tests/cases/gpu/lightning_indexer_bigtopk_small.json
  PREFIX=(compute-sanitizer --tool racecheck --error-exitcode 1)
  step racecheck per_file "${small_cases[@]}"
else
  rows+=("sanitizer  SKIP compute-sanitizer not found")
fi
step bench "$BIN" bench --json "$LOG/bench.json"
if python3 -c 'import torch' 2>/dev/null; then
  step torch env PYTHONUNBUFFERED=1 python3 tools/bench_torch.py --lib "$BUILD/libattnjit.so" --suite all --no-ref \
    --json "$LOG/torch.json"
fi

grep -E '^(FAIL|SKIP)' "$LOG/tests.log" | head -20
echo
sed -n '/^measure/,$p' "$LOG/bench.log"
[ -f "$LOG/torch.log" ] && grep -E 'attnjit|plan_execute|FLASH|CUDNN|flex|torch composition|index_copy_|d2d' "$LOG/torch.log" | grep -v '^  ' 
echo
printf '%s\n' "${rows[@]}"
exit $status
