#!/usr/bin/env bash
# Regenerates the committed CPU case files (tests/cases/*.json: golden files and error files) from their
# generators, tests/gen/*_golden.py (numpy) and tests/gen/*_cases.py (standard library), into OUTDIR; with
# --check, into a temporary folder, then compares each with the committed file byte for byte and names
# the committed files no generator writes (written by hand). Deterministic; about half a minute.
# The committed golden files are those of Debian 12's numpy 1.24 (/usr/bin/python3, the default here):
# numpy 2 changes the last bit of some float64 lse values (gqa_fwd, gqa_varlen_fwd, bsa_fwd goldens).
# --check accepts a file whose only differences are float64 values within a relative 1e-13 (json_close.py):
# numpy's vectorised exp / log round differently on CPUs with and without AVX-512.
# Usage: tools/scripts/gen_cpu_cases.sh OUTDIR | --check   (PYTHON=... picks another interpreter with numpy)
set -euo pipefail
if [ -z "${PYTHON:-}" ]; then
  PYTHON=python3
  [ -x /usr/bin/python3 ] && PYTHON=/usr/bin/python3
fi
[ $# -eq 1 ] || { echo "usage: $0 OUTDIR | --check" >&2; exit 2; }
root="$(cd "$(dirname "$0")/../.." && pwd)"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
out=$1
[ "$out" = --check ] && out="$tmp/out"
gens=()
for g in "$root"/tests/gen/*_cases.py; do [[ $g == *_hopper_cases.py ]] || gens+=("$g"); done
gens+=("$root"/tests/gen/*_hopper_cases.py "$root"/tests/gen/*_golden.py)
mkdir -p "$out"
for g in "${gens[@]}"; do
  "${PYTHON:-python3}" "$g" --out-dir "$out" >"$tmp/log" 2>&1 || { cat "$tmp/log" >&2; echo "gen_cpu_cases: $g failed" >&2; exit 1; }
done
rm -rf "$out/gpu"
[ "$1" = --check ] || { echo "gen_cpu_cases: ${#gens[@]} generators, $(ls "$out"/*.json | wc -l) files in $out"; exit 0; }
status=0 same=0
for f in "$root"/tests/cases/*.json; do
  n=$(basename "$f")
  if [ ! -f "$out/$n" ]; then
    echo "gen_cpu_cases: $n: no generator writes it (hand-written)"
  elif cmp -s "$f" "$out/$n"; then
    same=$((same + 1))
  elif "$PYTHON" "$root/tools/scripts/json_close.py" "$f" "$out/$n"; then
    # numpy's float64 exp / log differ in the last bit between SIMD paths (AVX-512 or not): such files
    # are the same cases with the same values to 1e-13.
    same=$((same + 1))
    echo "gen_cpu_cases: $n equal to its generator's output within 1e-13 (last-bit float64 differences)"
  else
    echo "gen_cpu_cases: $n differs from what its generator writes" >&2
    status=1
  fi
done
for f in "$out"/*.json; do
  [ -f "$root/tests/cases/$(basename "$f")" ] || { echo "gen_cpu_cases: $(basename "$f") is generated but not committed" >&2; status=1; }
done
echo "gen_cpu_cases: $same committed files identical to their generators' output"
exit $status
