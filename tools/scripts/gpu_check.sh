#!/usr/bin/env bash
# A fast GPU check for a session with little device time: the named case files in parallel (each in its
# own process, so a fault or a hang costs only that file), compute-sanitizer memcheck / racecheck /
# synccheck over the named small sets, logs tarred into $OUT/logs.tgz (the device tool brings back few
# loose files), and a one-line-per-log summary last. Long grids can be split with NAME=FILE:FILTER
# (`attnjit test --filter`), and every test runs with -v so a timed-out log still shows how far it got.
#
# Usage: tools/scripts/gpu_check.sh [-b BUILD_DIR] [-t TIMEOUT_S] [-j JOBS] [-s SMALL.json]... CASES.json[:FILTER]...
#   e.g. tools/scripts/gpu_check.sh -b .devbuild -s tests/cases/gpu/bsa_bwd_hopper_small.json \
#          tests/cases/gpu/bsa_bwd_hopper_grid.json tests/cases/gpu/paged_attention_grid.json:/d64/
# Exit status: 0 when every test and sanitizer run passed.
set -uo pipefail
cd "$(dirname "$0")/../.."
# The GPU case files are generated, not committed (tests/gen/*_cases.py, numpy-free, seconds).
tools/scripts/gen_gpu_cases.sh --if-stale tests/cases/gpu || exit 1
BUILD=build
TIMEOUT=300
JOBS=8
smalls=()
while getopts "b:t:j:s:" opt; do
  case $opt in
    b) BUILD=$OPTARG ;;
    t) TIMEOUT=$OPTARG ;;
    j) JOBS=$OPTARG ;;
    s) smalls+=("$OPTARG") ;;
    *) echo "usage: $0 [-b BUILD_DIR] [-t TIMEOUT_S] [-j JOBS] [-s SMALL.json]... CASES.json[:FILTER]..." >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
BIN=$BUILD/bin/attnjit
LOG=${OUT:-/tmp/attnjit-gpu-check}/logs
mkdir -p "$LOG"
: >"$LOG/rc.txt"
export ATTNJIT_CACHE_DIR=${ATTNJIT_CACHE_DIR:-/tmp/attnjit-gpu-check-cache}

# name of a log: the file's base name, plus the filter with '/' made '_'
log_name() {
  local spec=$1 file=${1%%:*} filter=""
  [[ $spec == *:* ]] && filter=${spec#*:}
  local n
  n=$(basename "$file" .json)
  [ -n "$filter" ] && n="${n}__$(echo "$filter" | tr '/ ' '__')"
  echo "$n"
}

run_one() {  # spec
  local spec=$1 file=${1%%:*} filter=() name
  [[ $spec == *:* ]] && filter=(--filter "${spec#*:}")
  name=$(log_name "$spec")
  timeout "$TIMEOUT" stdbuf -oL "$BIN" test -v "${filter[@]}" "$file" >"$LOG/$name.log" 2>&1
  echo "$? $name" >>"$LOG/rc.txt"
}
export -f run_one log_name
export BIN LOG TIMEOUT

for f in "${smalls[@]}"; do
  for tool in memcheck racecheck synccheck; do
    (timeout "$TIMEOUT" compute-sanitizer --tool "$tool" --error-exitcode 1 "$BIN" test "$f" \
       >"$LOG/$(basename "$f" .json)_$tool.log" 2>&1
     echo "$? $(basename "$f" .json)_$tool" >>"$LOG/rc.txt") &
  done
done
printf '%s\n' "$@" | xargs -P "$JOBS" -I{} bash -c 'run_one "$@"' _ {}
wait

(cd "$LOG" && tar czf ../logs.tgz .)
status=0
while read -r rc name; do
  [ "$rc" = 0 ] || status=1
  f="$LOG/$name.log"
  printf '%-4s %-60s %s %s\n' "$([ "$rc" = 0 ] && echo ok || echo "rc$rc")" "$name" \
    "$(grep -h -E 'passed, ' "$f" | tail -n1)" "$(grep -h -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$f" | tail -n1)"
  [ "$rc" = 124 ] && echo "     timed out after $(grep -c '^PASS' "$f") passing cases; last: $(grep '^PASS' "$f" | tail -n1 | cut -c1-100)"
done < <(sort -k2 "$LOG/rc.txt")
grep -h '^FAIL' "$LOG"/*.log | head -20
grep -h 'worst rel_l2' "$LOG"/*.log | sort -t: -k2 -g | tail -n1
exit $status
