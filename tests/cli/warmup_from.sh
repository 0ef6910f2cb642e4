#!/bin/sh
# `attnjit warmup --from`: it warms exactly the kernels a set of calls selects. Checked: the count is that
# of the distinct kernels the calls select (fewer than the ops' default matrix), the calls then run with JIT
# off and find every kernel in that cache, and a second warm-up is all cache hits.
# Usage: warmup_from.sh ATTNJIT_CLI WORK_DIR CASES.json
set -eu
cli=$1
dir=$2
cases=$3
rm -rf "$dir" "$dir.log"
"$cli" warmup --from "$cases" --arch sm_90a --jobs 2 --cache-dir "$dir" >"$dir.log"
cat "$dir.log"
n=$(sed -n 's/^warm-up: [0-9]* calls in 1 files select \([0-9]*\) kernels$/\1/p' "$dir.log")
[ -n "$n" ] && [ "$n" -gt 0 ] || { echo "warmup_from: no kernel count in the output" >&2; exit 1; }
op=$(sed -n 's/.*"op": *"\([a-z0-9_]*\)".*/\1/p' "$cases" | head -n 1)
all=$("$cli" warmup --op "$op" --arch sm_90a --jobs 2 --cache-dir "$dir.matrix" | sed -n 's/^warmup sm_90a: \([0-9]*\) kernels.*/\1/p')
rm -rf "$dir.matrix"
[ "$n" -lt "$all" ] || { echo "warmup_from: $n kernels is not fewer than $op's default matrix ($all)" >&2; exit 1; }
grep -q "compiled $n, cache hits 0, failed 0" "$dir.log"
ATTNJIT_NO_JIT=1 "$cli" test --no-gpu --cache-dir "$dir" "$cases"
"$cli" warmup --from "$cases" --arch sm_90a --cache-dir "$dir" | grep -q "compiled 0, cache hits $n, failed 0"
# A call the kernel impl cannot serve is a failure of the warm-up, named.
python3 - "$cases" "$dir.bad.json" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
case = (doc["cases"] if "cases" in doc else [doc])[0]
case.update(name="bad", config={"no_such_key": 1})  # the first call with a config the op rejects
json.dump({"cases": [case]}, open(sys.argv[2], "w"))
PY
if "$cli" warmup --from "$dir.bad.json" --arch sm_90a --cache-dir "$dir" >"$dir.bad.log" 2>&1; then
  echo "warmup_from: a bad call did not fail the warm-up" >&2
  exit 1
fi
grep -q "FAILED bad: paged_kv_write: param" "$dir.bad.log"
echo "warmup_from: $n kernels (the op's default matrix: $all); JIT-off run and second warm-up pass"
