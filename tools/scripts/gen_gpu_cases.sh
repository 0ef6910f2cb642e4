#!/usr/bin/env bash
# Writes the GPU case files (random grids and small compute-sanitizer sets, read by gpu_check.sh and
# gpu_suite.sh from tests/cases/gpu/) into OUTDIR: every tests/gen/*_cases.py, the portable ones first
# (the *_hopper_cases.py ones derive their cases from those files). The generators are deterministic and
# use the Python standard library only; the whole set takes seconds. The error files the same generators
# write (tests/cases/*_errors.json, committed) are left out.
# --if-stale: only when OUTDIR has no stamp from an earlier run or a generator is newer than that stamp.
# Usage: tools/scripts/gen_gpu_cases.sh [--if-stale] OUTDIR   (PYTHON=... picks the interpreter, default python3)
set -euo pipefail
if_stale=0
[ "${1:-}" = --if-stale ] && { if_stale=1; shift; }
[ $# -eq 1 ] || { echo "usage: $0 [--if-stale] OUTDIR" >&2; exit 2; }
out=$1
gen="$(cd "$(dirname "$0")/../../tests/gen" && pwd)"
stamp="$out/.generated"
if [ $if_stale = 1 ] && [ -f "$stamp" ] && [ -z "$(find "$gen" -name '*.py' -newer "$stamp")" ]; then
  exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
gens=()
for g in "$gen"/*_cases.py; do [[ $g == *_hopper_cases.py ]] || gens+=("$g"); done
gens+=("$gen"/*_hopper_cases.py)
for g in "${gens[@]}"; do
  "${PYTHON:-python3}" "$g" --out-dir "$tmp" >"$tmp/log" 2>&1 || { cat "$tmp/log" >&2; echo "gen_gpu_cases: $g failed" >&2; exit 1; }
done
mkdir -p "$out"
# Every file must parse and hold at least one case.
"${PYTHON:-python3}" -c 'import json, sys
for f in sys.argv[1:]:
    with open(f) as fh:
        if not json.load(fh)["cases"]:
            sys.exit(f"gen_gpu_cases: {f}: no cases")' "$tmp"/gpu/*.json
mv "$tmp"/gpu/*.json "$out"/
touch "$stamp"
echo "gen_gpu_cases: ${#gens[@]} generators, $(ls "$out"/*.json | wc -l) files in $out"
