#!/bin/sh
# The CLI's conventions (README, "The CLI"): --version; usage errors exit 2 naming the problem;
# --cache-dir on every subcommand; --op a,b; --arch validated and a list accepted; --max-bytes with
# byte suffixes; a test --filter that selects nothing fails; --json on info, cache ls and test, and
# JUnit XML from test.
# Usage: conventions.sh ATTNJIT_BIN WORK_DIR CASES_DIR
set -u
bin=$1
work=$2
cases=$3
rm -rf "$work"
mkdir -p "$work"
fails=0
check() {  # check NAME EXPECTED_RC GREP_PATTERN -- COMMAND...
  name=$1 want=$2 pat=$3
  shift 4
  "$@" >"$work/out" 2>&1
  rc=$?
  if [ "$rc" != "$want" ] || ! grep -q -- "$pat" "$work/out"; then
    echo "FAIL $name: exit $rc (want $want), output:"
    sed 's/^/    /' "$work/out" | head -20
    fails=$((fails + 1))
  else
    echo "ok   $name"
  fi
}
check version 0 "^attnjit [0-9]*\.[0-9]*\.[0-9]*" -- "$bin" --version
check no-subcommand 2 "A subcommand is required" -- "$bin"
check unknown-subcommand 2 "subcommand" -- "$bin" bogus
check unknown-option 2 "--no-such-option" -- "$bin" warmup --no-such-option
check arch-bad 2 "expected sm_<NN> or sm_<NN>a with NN >= 80 (e.g. sm_90a), got 'bogus'" -- "$bin" warmup --arch bogus
check arch-too-old 2 "got 'sm_75'" -- "$bin" warmup --arch sm_75 --op paged_kv_write
check arch-list-bad 2 "got 'sm90'" -- "$bin" warmup --arch sm_90a,sm90 --op paged_kv_write
# --cache-dir on warmup, with --op a,b and a list of archs: both archs' kernels land in the named folder.
check warmup-cache-dir 0 "warmup sm_80: " -- "$bin" warmup --cache-dir "$work/c1" --arch sm_90a,sm_80 \
  --op paged_kv_write,topk_select --jobs 2
cp "$work/out" "$work/warmup.out"
check warmup-both-archs 0 "warmup sm_90a: " -- cat "$work/warmup.out"
check cache-ls-cache-dir 0 "paged_kv_write" -- "$bin" cache ls --cache-dir "$work/c1"
check cache-ls-two-ops 0 "topk_select" -- "$bin" cache ls --cache-dir "$work/c1"
check info-cache-dir 0 "$work/c1" -- "$bin" info --cache-dir "$work/c1"
check warmup-unknown-op 2 "unknown op 'nope'" -- "$bin" warmup --cache-dir "$work/c1" --op paged_kv_write,nope
# --max-bytes suffixes: 1K keeps nothing of entries of several KB; a bad suffix is a usage error.
check prune-suffix 0 "pruned" -- "$bin" cache prune --cache-dir "$work/c1" --max-bytes 1K
check prune-bad-suffix 2 "max-bytes" -- "$bin" cache prune --cache-dir "$work/c1" --max-bytes 12Q
check prune-emptied 0 "^0 entries" -- "$bin" cache ls --cache-dir "$work/c1"
# test --filter selecting nothing fails; one that selects cases runs them.
check filter-none 1 "selects none of" -- "$bin" test --no-gpu --cache-dir "$work/c2" --filter '#no such case#' \
  "$cases/paged_kv_write_errors.json"
check filter-some 0 "0 failed" -- "$bin" test --no-gpu --cache-dir "$work/c2" --filter pkw-error/ \
  "$cases/paged_kv_write_errors.json"
# --json on info, cache ls and test (valid JSON holding the facts), JUnit XML from test.
check info-json 0 '"default_arch"' -- "$bin" info --json --cache-dir "$work/c2"
"$bin" info --json --cache-dir "$work/c2" >"$work/info.json" 2>/dev/null
check info-json-parses 0 "gqa_bwd" -- python3 -c 'import json, sys; j = json.load(open(sys.argv[1])); assert j["default_arch"].startswith("sm_"); print(j["ops"])' "$work/info.json"
"$bin" cache ls --json --cache-dir "$work/c2" >"$work/ls.json" 2>/dev/null
check cache-ls-json 0 "entries" -- python3 -c 'import json, sys; j = json.load(open(sys.argv[1])); print("entries", len(j["entries"]), j["total_bytes"])' "$work/ls.json"
check info-op-json 0 '"window_size_left"' -- "$bin" info --op gqa_bwd --json
check test-json-junit 0 "0 failed" -- "$bin" test --no-gpu --cache-dir "$work/c2" --filter pkw-error/dtype \
  --json "$work/t.json" --junit "$work/t.xml" "$cases/paged_kv_write_errors.json"
check test-json-parses 0 "pass" -- python3 -c 'import json, sys; j = json.load(open(sys.argv[1])); assert j["failed"] == 0 and j["passed"] == len(j["cases"]) > 0; print(j["cases"][0]["verdict"])' "$work/t.json"
check test-junit-parses 0 "testcase" -- python3 -c 'import sys, xml.etree.ElementTree as E; r = E.parse(sys.argv[1]).getroot(); assert r.tag == "testsuite" and int(r.get("tests")) == len(r) > 0 and r.get("failures") == "0"; print(r[0].tag)' "$work/t.xml"
echo "conventions: $fails failed"
[ "$fails" = 0 ]
