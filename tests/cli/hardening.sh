#!/bin/sh
# CLI checks of the hardened paths: malformed case files fail cleanly; cache commands survive corrupt
# manifests, symlinks and FIFOs; read-only mode never claims a change; a warm-up that persisted nothing
# exits non-zero saying so; an unknown ATTNJIT_LOG_LEVEL is an error.
# Usage: hardening.sh <attnjit binary> <scratch dir> <tests/cli dir>
set -u
BIN=$1
WORK=$2
HERE=$3
fails=0
ok() { echo "PASS: $1"; }
bad() { echo "FAIL: $1"; fails=$((fails + 1)); }
rm -rf "$WORK"
mkdir -p "$WORK"
export ATTNJIT_LOG_LEVEL=error

# ---- JSON case files: a rejected file exits 1 with a FAIL line (a crash would be >= 128).
export ATTNJIT_CACHE_DIR="$WORK/cases-cache"
if "$BIN" test "$HERE/good_case.json" >"$WORK/out" 2>&1; then ok "good case passes"; else bad "good case: $(tail -3 "$WORK/out")"; fi
for f in "$HERE"/malformed_cases/*.json; do
  "$BIN" test "$f" >"$WORK/out" 2>&1
  rc=$?
  if [ "$rc" -eq 1 ] && grep -q "^FAIL" "$WORK/out"; then ok "rejects $(basename "$f")"
  else bad "$(basename "$f"): rc $rc: $(tail -2 "$WORK/out")"; fi
done

# ---- A small real cache to corrupt.
C="$WORK/cache"
export ATTNJIT_CACHE_DIR="$C"
"$BIN" warmup --op paged_kv_write --jobs 2 >"$WORK/out" 2>&1 || bad "warm-up of paged_kv_write: $(tail -3 "$WORK/out")"
set -- "$C"/v1/*/manifest.json
[ -f "$1" ] || { bad "no cache entries"; exit 1; }
M1=$1 M2=$2 M3=$3 M4=$4
python3 - "$M1" "$M2" "$M3" <<'PY'
import json, sys
for path, field, value in zip(sys.argv[1:], ["describe", "key", "cubin_bytes"], [5, 12345, "1000"]):
    m = json.load(open(path))
    m[field] = value
    json.dump(m, open(path, "w"))
PY
D4=$(dirname "$M4")
rm -f "$D4/kernel.cubin" && mkfifo "$D4/kernel.cubin"
ln -s "$C/nowhere" "$C/v1/$(printf 'a%.0s' $(seq 64))"
ln -s "$C/v1/$(printf 'b%.0s' $(seq 64))" "$C/v1/$(printf 'b%.0s' $(seq 64))"
mkdir -p "$C/v1/.staging-1-old" "$C/v1/.doomed-2-old"
touch -d '2 hours ago' "$C/v1/.staging-1-old" "$C/v1/.doomed-2-old"

for cmd in "cache ls" "info" "cache verify"; do
  timeout 60 "$BIN" $cmd >"$WORK/out" 2>&1
  rc=$?
  if [ "$rc" -le 1 ]; then ok "$cmd survives corruption (rc $rc)"; else bad "$cmd: rc $rc: $(tail -3 "$WORK/out")"; fi
done
grep -q "6 bad" "$WORK/out" && ok "verify counts the 6 bad entries" || bad "verify: $(tail -8 "$WORK/out")"
"$BIN" cache ls 2>&1 | grep -q "2 stale" && ok "ls counts stale directories" || bad "ls does not count stale directories"

# ---- Read-only: verify --fix, clear and prune change nothing and say so, exiting non-zero.
for cmd in "cache verify --fix" "cache clear" "cache prune --max-bytes 1"; do
  ATTNJIT_CACHE_READONLY=1 timeout 60 "$BIN" $cmd >"$WORK/out" 2>&1
  rc=$?
  if [ "$rc" -ne 0 ] && grep -q "changed nothing" "$WORK/out"; then ok "read-only $cmd says it changed nothing"
  else bad "read-only $cmd: rc $rc: $(tail -3 "$WORK/out")"; fi
done
[ -d "$C/v1/.staging-1-old" ] && ok "read-only left the cache alone" || bad "read-only removed a directory"

# ---- The warm-up rebuilds every untrusted entry, sweeps stale directories, and verify is then clean.
timeout 300 "$BIN" warmup --op paged_kv_write --jobs 2 >"$WORK/out" 2>&1 && ok "warm-up over the corrupt cache" || bad "warm-up: $(tail -5 "$WORK/out")"
[ ! -e "$C/v1/.staging-1-old" ] && [ ! -e "$C/v1/.doomed-2-old" ] && ok "warm-up swept stale directories" || bad "stale directories remain"
"$BIN" cache verify --fix >"$WORK/out" 2>&1 && ok "verify --fix" || bad "verify --fix: $(tail -3 "$WORK/out")"
"$BIN" cache verify >"$WORK/out" 2>&1 && ok "verify clean after the fix" || bad "verify: $(tail -3 "$WORK/out")"
"$BIN" cache prune --max-bytes 1 >/dev/null 2>&1 && "$BIN" cache clear >/dev/null 2>&1 && ok "prune and clear" || bad "prune/clear"

# ---- A warm-up that persists nothing exits non-zero and says how many it could not persist.
E="$WORK/empty-ro"
mkdir -p "$E/v1"
ATTNJIT_CACHE_DIR="$E" ATTNJIT_CACHE_READONLY=1 "$BIN" warmup --op paged_kv_write --jobs 2 >"$WORK/out" 2>&1
rc=$?
if [ "$rc" -ne 0 ] && grep -q "could not persist 20 of 20" "$WORK/out"; then ok "read-only warm-up exits non-zero naming the count"
else bad "read-only warm-up: rc $rc: $(tail -3 "$WORK/out")"; fi

# ---- ATTNJIT_LOG_LEVEL.
ATTNJIT_LOG_LEVEL=WARN "$BIN" info >"$WORK/out" 2>&1
rc=$?
if [ "$rc" -ne 0 ] && grep -q "ATTNJIT_LOG_LEVEL" "$WORK/out"; then ok "ATTNJIT_LOG_LEVEL=WARN is an error"; else bad "ATTNJIT_LOG_LEVEL=WARN: rc $rc"; fi

echo "$fails failed"
[ "$fails" -eq 0 ]
