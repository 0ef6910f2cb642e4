#!/bin/sh
# The disk cache under stress, with real processes:
#   1a. N processes warming the same empty cache at once, no compile locks (the raw publish race): all exit
#       0, one entry per key, `cache verify` clean, no staging/doomed directory left, a second warm-up is
#       all cache hits.
#   1b. The same with ATTNJIT_LOCK_DIR: additionally each kernel is compiled exactly once over all processes.
#   2.  kill -9 at random moments during warm-ups: after every kill `cache verify` is clean (no half-written
#       entry accepted). Killed publishes may leave .staging-*/.doomed-* directories; the cache promises
#       (DiskCache::kStaleGrace, 3600 s, no knob) that warm-up, prune and clear remove those older than the
#       grace period and leave younger ones alone. So the leftovers are aged past the grace (touch -d),
#       planted old half-written ones and one young one are added, and a final complete warm-up must remove
#       every old one, keep the young one, leave verify clean and every key present.
#   3.  A full file system (a tiny tmpfs as the cache dir; SKIP when mount is not permitted): the warm-up
#       warns, still compiles every kernel (served from memory), exits 1 saying how many it could not
#       persist; nothing corrupt or staged is left; once space returns a warm-up publishes again.
#   4.  The size cap under concurrent processes: warm-ups of different ops (two of them with
#       ATTNJIT_CACHE_MAX_BYTES) racing with two loops of `cache prune --max-bytes X`; after one final prune
#       the total is <= X, verify is clean and nothing is left staged.
#   5.  Readers racing evictions: `cache verify` and loading warm-ups (ATTNJIT_NO_JIT) run in loops while
#       `cache prune` evicts and evicted entries are renamed back in as publish does: an entry that vanishes
#       mid-read is a miss (DiskCache's contract: only an entry that cannot be parsed or trusted is dropped
#       with a warning), so no verify run may report BAD and no load may warn "unusable".
# Every step also checks the entries independently of the CLI (manifest parses, its key and the sha256 of
# its key_serialisation match the directory, the cubin's size and sha256 match the manifest).
# Usage: cache_stress.sh ATTNJIT_CLI WORK_DIR
# Environment: CACHE_STRESS_SEED (reproduce the kill times), CACHE_STRESS_PROCS (step 1, default 6),
# CACHE_STRESS_KILLS (step 2 rounds, default 10), CACHE_STRESS_RACE_SECONDS (step 5, default 12),
# CACHE_STRESS_STEPS (the steps to run, default "1a 1b 2 3 4 5"). Needs python3, GNU coreutils (timeout,
# sleep with fractions, mv -T, touch -d) and root for step 3's tmpfs (skipped otherwise).
set -u
if [ $# -ne 2 ]; then
  echo "usage: $0 ATTNJIT_CLI WORK_DIR" >&2
  exit 2
fi
CLI=$1
WORK=$2
NPROC=${CACHE_STRESS_PROCS:-6}
KILLS=${CACHE_STRESS_KILLS:-10}
RACE_SECONDS=${CACHE_STRESS_RACE_SECONDS:-12}
STEPS=${CACHE_STRESS_STEPS:-1a 1b 2 3 4 5}
# (Below 2^31: mawk's srand clamps larger seeds, and its rand() then repeats a few values.)
SEED=$(( ${CACHE_STRESS_SEED:-$(od -An -N4 -tu4 /dev/urandom | tr -d ' \n')} % 2147483646 ))
OP=paged_kv_write
ARCH=sm_90a

# Nothing from the caller's environment may change where or how the cache works.
unset ATTNJIT_CACHE_DIR ATTNJIT_CACHE_READONLY ATTNJIT_CACHE_DISABLE ATTNJIT_CACHE_MAX_BYTES ATTNJIT_LOCK_DIR \
  ATTNJIT_LOCK_TIMEOUT_MS ATTNJIT_NO_JIT ATTNJIT_ARCH ATTNJIT_DUMP_SOURCES ATTNJIT_LINEINFO
export ATTNJIT_LOG_LEVEL=warn  # the cache's warnings are part of what is checked

MNT="$WORK/s3-tmpfs"
MOUNTED=0
cleanup() {
  if [ "$MOUNTED" = 1 ]; then umount "$MNT" 2>/dev/null || umount -l "$MNT" 2>/dev/null; MOUNTED=0; fi
}
trap cleanup EXIT
trap 'cleanup; exit 130' INT
trap 'cleanup; exit 143' TERM

if mountpoint -q "$MNT" 2>/dev/null; then umount "$MNT" 2>/dev/null || umount -l "$MNT"; fi
rm -rf "$WORK"
mkdir -p "$WORK" || exit 2
command -v python3 >/dev/null || { echo "cache_stress: python3 is required" >&2; exit 2; }
[ -x "$CLI" ] || { echo "cache_stress: $CLI is not executable" >&2; exit 2; }

T0=$(date +%s)
FAILS=0
SUMMARY=""
STEP=""
STEP_FAILED=0
say() { printf '%s\n' "$*"; }
want() { case " $STEPS " in *" $1 "*) return 0 ;; esac; return 1; }
ok() { say "  ok: $*"; }
fail() { say "  FAIL [$STEP]: $*"; STEP_FAILED=1; }
begin() { STEP=$1; STEP_FAILED=0; say ""; say "=== step $1: $2"; }
finish() {  # finish [SKIP reason]
  if [ $# -gt 0 ]; then
    say "SKIP step $STEP: $1"
    SUMMARY="$SUMMARY
  SKIP $STEP ($1)"
  elif [ "$STEP_FAILED" = 0 ]; then
    say "PASS step $STEP"
    SUMMARY="$SUMMARY
  PASS $STEP"
  else
    say "FAIL step $STEP"
    SUMMARY="$SUMMARY
  FAIL $STEP"
    FAILS=$((FAILS + 1))
  fi
}
show() { sed 's/^/      | /' "$1" | tail -n "${2:-15}"; }

# An independent check of a cache directory: sets IE (entries), IB (bytes of the entries' regular files, as
# the cache counts them), IL (.staging-*/.doomed-* directories), IP (problems); details in $WORK/inspect.txt.
cat >"$WORK/inspect.py" <<'PY'
import hashlib, json, os, re, stat, sys
root = os.path.join(sys.argv[1], "v1")
entries = total = 0
problems, leftovers = [], []
names = sorted(os.listdir(root)) if os.path.isdir(root) else []
for name in names:
    p = os.path.join(root, name)
    if name.startswith(".staging-") or name.startswith(".doomed-"):
        leftovers.append(name)
        continue
    if not re.fullmatch(r"[0-9a-f]{64}", name):
        problems.append(f"{name}: not a key")
        continue
    try:
        st = os.lstat(p)
        if not stat.S_ISDIR(st.st_mode):
            problems.append(f"{name[:16]}: not a directory")
            continue
        with open(os.path.join(p, "manifest.json")) as f:
            m = json.load(f)
        with open(os.path.join(p, "kernel.cubin"), "rb") as f:
            cubin = f.read()
        why = []
        if m.get("key") != name: why.append("key field differs")
        ser = m.get("key_serialisation")
        if not isinstance(ser, str) or hashlib.sha256(ser.encode()).hexdigest() != name:
            why.append("key_serialisation does not hash to the key")
        if m.get("cubin_bytes") != len(cubin): why.append(f"cubin has {len(cubin)} bytes, manifest says {m.get('cubin_bytes')}")
        if m.get("cubin_sha256") != hashlib.sha256(cubin).hexdigest(): why.append("cubin sha256 differs")
        if why:
            problems.append(f"{name[:16]}: " + "; ".join(why))
            continue
        for f in os.listdir(p):
            fst = os.lstat(os.path.join(p, f))
            if stat.S_ISREG(fst.st_mode): total += fst.st_size
        entries += 1
    except Exception as e:
        problems.append(f"{name[:16]}: {type(e).__name__}: {e}")
print(entries, total, len(leftovers), len(problems))
with open(sys.argv[2], "w") as out:
    for l in leftovers: out.write(f"leftover {l}\n")
    for pr in problems: out.write(f"problem {pr}\n")
PY
inspect() {
  read -r IE IB IL IP <<EOF
$(python3 "$WORK/inspect.py" "$1" "$WORK/inspect.txt" || echo "x x x x")
EOF
  [ "$IE" != x ]
}

# `cache ls --json`: sets LE (entries), LB (total_bytes), LS (stale_directories), LK (distinct keys), LD
# (distinct kernel names); the sorted keys go to FILE when given.
cat >"$WORK/lsjson.py" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
keys = [e["key"] for e in j["entries"]]
kernels = {e["kernel"] for e in j["entries"]}
print(len(j["entries"]), j["total_bytes"], j["stale_directories"], len(set(keys)), len(kernels))
if len(sys.argv) > 2:
    open(sys.argv[2], "w").write("".join(k + "\n" for k in sorted(keys)))
PY
lsjson() {  # lsjson DIR [KEYS_FILE]
  LE=x
  "$CLI" cache ls --json --cache-dir "$1" >"$WORK/ls.json" 2>"$WORK/ls.err" || { show "$WORK/ls.err"; return 1; }
  read -r LE LB LS LK LD <<EOF
$(python3 "$WORK/lsjson.py" "$WORK/ls.json" ${2:+"$2"} || echo "x x x x x")
EOF
  [ "$LE" != x ]
}

# `cache verify` exits 0 with "0 bad", and the independent inspection finds no problem.
verify_clean() {  # verify_clean DIR WHAT
  timeout 120 "$CLI" cache verify --cache-dir "$1" >"$WORK/verify.out" 2>&1
  vrc=$?
  if [ "$vrc" != 0 ] || ! grep -q ", 0 bad$" "$WORK/verify.out"; then
    fail "$2: cache verify exited $vrc:"
    show "$WORK/verify.out"
    return 1
  fi
  if ! inspect "$1"; then fail "$2: inspecting $1 failed"; return 1; fi
  if [ "$IP" != 0 ]; then
    fail "$2: cache verify passed, but $IP entries fail the independent check:"
    show "$WORK/inspect.txt"
    return 1
  fi
  return 0
}

# The summary line of a warm-up log: sets WK (kernels), WC (compiled), WH (hits), WF (failed).
summary_of() {
  line=$(sed -n 's/^warmup [a-z0-9_]*: \([0-9]*\) kernels, compiled \([0-9]*\), cache hits \([0-9]*\), failed \([0-9]*\),.*/\1 \2 \3 \4/p' "$1" | tail -n 1)
  [ -n "$line" ] || return 1
  read -r WK WC WH WF <<EOF
$line
EOF
}

warm() {  # warm CACHE_DIR LOG [extra warmup args]: a foreground warm-up of $OP; returns its exit status
  wd=$1 wl=$2
  shift 2
  timeout 300 "$CLI" warmup --op "$OP" --arch "$ARCH" --jobs 1 --cache-dir "$wd" "$@" >"$wl" 2>&1
}

say "cache_stress: $CLI into $WORK (seed $SEED, $NPROC processes, $KILLS kill rounds)"
K=""          # kernels of one warm-up of $OP
REF_KEYS=""   # their keys, from step 1a

# ---------------------------------------------------------------------------------------------------------
race() {  # race NAME DIR [env assignments for the processes...]
  rd=$2
  name=$1
  shift 2
  pids=""
  i=1
  while [ "$i" -le "$NPROC" ]; do
    env "$@" timeout 300 "$CLI" warmup --op "$OP" --arch "$ARCH" --jobs 1 --cache-dir "$rd" >"$WORK/$name.$i.log" 2>&1 &
    pids="$pids $!"
    i=$((i + 1))
  done
  i=1
  sum_compiled=0
  for p in $pids; do
    wait "$p"
    prc=$?
    log="$WORK/$name.$i.log"
    if [ "$prc" != 0 ]; then fail "process $i exited $prc:"; show "$log"; fi
    if ! summary_of "$log"; then
      fail "process $i printed no warm-up summary"
    else
      [ -n "$K" ] || K=$WK
      [ "$WK" = "$K" ] || fail "process $i warmed $WK kernels, expected $K"
      [ "$WF" = 0 ] || fail "process $i: failed $WF"
      [ $((WC + WH)) = "$WK" ] || fail "process $i: compiled $WC + hits $WH != $WK kernels"
      sum_compiled=$((sum_compiled + WC))
    fi
    if grep -q "unusable\|could not persist\|NOT PERSISTED" "$log"; then
      fail "process $i saw an unusable entry or could not persist:"
      grep "unusable\|could not persist\|NOT PERSISTED" "$log" | head -5 | sed 's/^/      | /'
    fi
    i=$((i + 1))
  done
  [ "$STEP_FAILED" = 0 ] && ok "$NPROC processes exited 0, each with $K kernels (compiled + cache hits), failed 0; compiled $sum_compiled in all"
}

after_race() {  # after_race DIR
  ad=$1
  verify_clean "$ad" "after the race" || return 1
  ok "cache verify clean ($IE entries), independent check clean"
  lsjson "$ad" "$WORK/keys.$STEP" || { fail "cache ls --json failed"; return 1; }
  if [ "$LE" != "$K" ] || [ "$LK" != "$K" ] || [ "$LD" != "$K" ] || [ "$IE" != "$K" ]; then
    fail "expected exactly one entry per key ($K): ls --json has $LE entries, $LK keys, $LD kernels; on disk $IE"
    return 1
  fi
  ok "cache ls --json: exactly $K entries, $K distinct keys, $K distinct kernels"
  if [ "$IL" != 0 ]; then fail "$IL staging/doomed directories left by processes that were not killed:"; show "$WORK/inspect.txt"; return 1; fi
  ok "no .staging-*/.doomed-* directory left"
  warm "$ad" "$WORK/$STEP.again.log"
  arc=$?
  summary_of "$WORK/$STEP.again.log" || WC=x
  if [ "$arc" != 0 ] || [ "$WC" != 0 ] || [ "$WH" != "$K" ]; then
    fail "a second warm-up is not all cache hits (exit $arc):"
    show "$WORK/$STEP.again.log" 4
    return 1
  fi
  ok "a second warm-up: compiled 0, cache hits $K"
}

step1a() {
  begin 1a "$NPROC processes warm the same empty cache at once (no compile locks: they race to publish)"
  d="$WORK/s1a-cache"
  race s1a "$d" || return 1
  [ "$STEP_FAILED" = 0 ] || return 1
  after_race "$d" || return 1
  REF_KEYS="$WORK/keys.1a"
}
if want 1a; then step1a; finish; fi

step1b() {
  begin 1b "$NPROC processes warm the same empty cache at once with ATTNJIT_LOCK_DIR (each key compiled once)"
  d="$WORK/s1b-cache"
  race s1b "$d" "ATTNJIT_LOCK_DIR=$WORK/s1b-locks" "ATTNJIT_LOCK_TIMEOUT_MS=240000"
  [ "$STEP_FAILED" = 0 ] || return 1
  if [ "$sum_compiled" != "$K" ]; then
    fail "with compile locks the $NPROC processes compiled $sum_compiled kernels in all, expected each of the $K once"
    return 1
  fi
  ok "with compile locks the $K kernels were compiled exactly once in all"
  after_race "$d" || return 1
  if [ -n "$REF_KEYS" ] && ! cmp -s "$REF_KEYS" "$WORK/keys.1b"; then fail "the keys differ from step 1a's"; return 1; fi
}
if want 1b; then step1b; finish; fi

# ---------------------------------------------------------------------------------------------------------
step2() {
  begin 2 "kill -9 at random moments during warm-ups ($KILLS rounds, seed $SEED)"
  d="$WORK/s2-cache"
  times=$(awk -v seed="$SEED" -v n="$KILLS" 'BEGIN { srand(seed); for (i = 0; i < n; i++) printf "%.2f\n", 0.05 + rand() * 1.45 }')
  r=1
  killed=0
  for t in $times; do
    # Rounds 1 and 1 + KILLS/2 start from an empty cache; the others continue the partly filled one.
    if [ "$r" = 1 ] || [ "$r" = $((1 + KILLS / 2)) ]; then rm -rf "$d"; fresh="fresh"; else fresh="partial"; fi
    "$CLI" warmup --op "$OP" --arch "$ARCH" --jobs 1 --cache-dir "$d" >"$WORK/s2.$r.log" 2>&1 &
    pid=$!
    sleep "$t"
    kill -9 "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null  # (no "Killed" notice from the shell)
    krc=$?
    case $krc in
      137) killed=$((killed + 1)) ;;
      0) ;;  # it finished before the kill
      *) fail "round $r: the warm-up exited $krc (neither killed nor finished):"; show "$WORK/s2.$r.log"; return 1 ;;
    esac
    verify_clean "$d" "round $r (killed after $t s)" || return 1
    say "  round $r: $fresh cache, kill -9 after $t s (exit $krc): verify clean, $IE entries, $IL staging/doomed dirs"
    r=$((r + 1))
  done
  ok "$killed of $KILLS warm-ups killed mid-way; cache verify and the independent check were clean after every round"

  # What the kills left: directories still within the grace period are neither counted nor removed.
  v1="$d/v1"
  mkdir -p "$v1"
  real=$(cd "$v1" && ls -A | grep -c '^\.\(staging\|doomed\)-')
  lsjson "$d" || { fail "cache ls --json failed"; return 1; }
  [ "$LS" = 0 ] || { fail "ls --json counts $LS stale directories among $real that are younger than the grace period"; return 1; }
  ok "the kills left $real staging/doomed directories; none is counted stale within the grace period"

  # Plant old half-written ones beside them, and a young one that must survive (a publish in progress).
  any=$(cd "$v1" && ls | head -n 1)
  mkdir "$v1/.staging-999999-00000000deadbeef" "$v1/.doomed-999999-00000000cafef00d" "$v1/.staging-999998-0000000000000001"
  if [ -n "$any" ]; then
    head -c 1000 "$v1/$any/kernel.cubin" >"$v1/.staging-999999-00000000deadbeef/kernel.cubin"
    cp "$v1/$any/manifest.json" "$v1/$any/kernel.cubin" "$v1/.doomed-999999-00000000cafef00d/"
  fi
  printf '{"key": ' >"$v1/.staging-999999-00000000deadbeef/manifest.json"
  printf '{"key": ' >"$v1/.staging-999998-0000000000000001/manifest.json"
  # Age every old one past DiskCache::kStaleGrace (3600 s), the real leftovers included.
  for s in "$v1"/.staging-* "$v1"/.doomed-*; do
    [ -e "$s" ] || continue
    case $s in *.staging-999998-0000000000000001) ;; *) touch -d '2 hours ago' "$s" ;; esac
  done
  lsjson "$d" || { fail "cache ls --json failed"; return 1; }
  [ "$LS" = $((real + 2)) ] || { fail "ls --json counts $LS stale directories, expected $((real + 2)) (aged past the grace)"; return 1; }
  verify_clean "$d" "with stale directories present" || return 1
  ok "aged past the grace: ls --json counts all $LS old ones; verify clean beside them"

  warm "$d" "$WORK/s2.final.log"
  frc=$?
  summary_of "$WORK/s2.final.log" || WF=x
  if [ "$frc" != 0 ] || [ "$WF" != 0 ]; then fail "the final warm-up exited $frc:"; show "$WORK/s2.final.log"; return 1; fi
  if grep -q "unusable" "$WORK/s2.final.log"; then
    fail "the final warm-up found unusable entries left by the kills:"
    grep "unusable" "$WORK/s2.final.log" | head -5 | sed 's/^/      | /'
    return 1
  fi
  ok "final complete warm-up: exit 0, compiled $WC, cache hits $WH, no unusable entry met"
  verify_clean "$d" "after the final warm-up" || return 1
  left=$(cd "$v1" && ls -A | grep '^\.\(staging\|doomed\)-')
  if [ "$left" != ".staging-999998-0000000000000001" ]; then
    fail "after the final warm-up the staging/doomed directories are [$(echo $left)], expected only the young planted one"
    return 1
  fi
  ok "the final warm-up removed all $((real + 2)) old staging/doomed directories and kept the young one"
  rm -rf "$v1/.staging-999998-0000000000000001"
  lsjson "$d" "$WORK/keys.2" || { fail "cache ls --json failed"; return 1; }
  [ "$LS" = 0 ] || { fail "ls --json still counts $LS stale directories"; return 1; }
  if [ "$LE" != "$WK" ] || [ "$IE" != "$WK" ]; then fail "$LE entries listed ($IE on disk), expected every one of the $WK keys"; return 1; fi
  if [ -n "$REF_KEYS" ] && ! cmp -s "$REF_KEYS" "$WORK/keys.2"; then fail "the keys differ from step 1a's"; return 1; fi
  ok "verify clean, every key present ($LE entries${REF_KEYS:+, the same keys as step 1a})"
}
if want 2; then step2; finish; fi

# ---------------------------------------------------------------------------------------------------------
step3() {
  begin 3 "a full file system: a 160 KiB tmpfs as the cache dir"
  mkdir -p "$MNT"
  if ! mount -t tmpfs -o size=160k,mode=0755 tmpfs "$MNT" 2>"$WORK/mount.err"; then
    SKIP_WHY="mount -t tmpfs is not permitted here: $(head -n 1 "$WORK/mount.err")"
    return 2
  fi
  MOUNTED=1
  warm "$MNT" "$WORK/s3.full.log"
  frc=$?
  if ! summary_of "$WORK/s3.full.log"; then fail "no warm-up summary (exit $frc):"; show "$WORK/s3.full.log"; return 1; fi
  if [ "$frc" != 1 ]; then fail "the warm-up into a full cache exited $frc, expected 1 (kernels not persisted):"; show "$WORK/s3.full.log"; return 1; fi
  np=$(sed -n 's/^warmup: could not persist \([0-9]*\) of \([0-9]*\) compiled kernels.*/\1/p' "$WORK/s3.full.log")
  if [ -z "$np" ] || [ "$np" -lt 1 ]; then fail "no 'could not persist N of M' message:"; show "$WORK/s3.full.log"; return 1; fi
  if ! grep -q "could not persist entry.*No space left on device" "$WORK/s3.full.log"; then
    fail "no warning naming ENOSPC (No space left on device):"; show "$WORK/s3.full.log"; return 1
  fi
  nl=$(grep -c "NOT PERSISTED" "$WORK/s3.full.log")
  [ "$nl" = "$np" ] || { fail "$nl NOT PERSISTED lines, but the message says $np"; return 1; }
  if [ "$WF" != 0 ] || [ "$WC" != "$WK" ]; then fail "not every kernel was compiled and served from memory: compiled $WC of $WK, failed $WF"; return 1; fi
  ok "exit 1, ENOSPC warning, 'could not persist $np of $WC compiled kernels', compiled $WC (served from memory), failed 0"
  verify_clean "$MNT" "on the full file system" || return 1
  [ "$IL" = 0 ] || { fail "$IL staging directories left by failed publishes:"; show "$WORK/inspect.txt"; return 1; }
  if [ $((IE + np)) != "$WK" ]; then fail "$IE entries on disk + $np not persisted != $WK"; return 1; fi
  ok "nothing corrupt or staged left: verify clean, $IE entries persisted + $np not = $WK"
  persisted=$IE
  # (Informational: whether a kernel was persisted after an earlier one hit ENOSPC, in the same process.)
  if awk '/NOT PERSISTED/ { full = 1 } full && /\] compiled  / { found = 1 } END { exit !found }' "$WORK/s3.full.log"; then
    say "  (publishing resumed in the same process after ENOSPC: a smaller kernel persisted after a NOT PERSISTED one)"
  fi
  df -k "$MNT" | tail -n 1 | sed 's/^/      | /'

  if mount -o remount,size=16m "$MNT" 2>"$WORK/mount.err"; then
    how="remounted at 16 MiB"
  else
    umount "$MNT"
    MOUNTED=0
    mount -t tmpfs -o size=16m,mode=0755 tmpfs "$MNT" || { fail "cannot remount the tmpfs bigger"; return 1; }
    MOUNTED=1
    how="mounted afresh at 16 MiB"
    persisted=0
  fi
  warm "$MNT" "$WORK/s3.room.log"
  frc=$?
  summary_of "$WORK/s3.room.log" || WC=x
  if [ "$frc" != 0 ] || [ "$WC" != $((WK - persisted)) ] || [ "$WH" != "$persisted" ]; then
    fail "after space returned ($how) the warm-up exited $frc, expected 0 with compiled $((WK - persisted)), hits $persisted:"
    show "$WORK/s3.room.log"
    return 1
  fi
  verify_clean "$MNT" "after space returned" || return 1
  [ "$IE" = "$WK" ] || { fail "$IE entries after space returned, expected $WK"; return 1; }
  ok "space returned ($how): the warm-up published the other $WC, exit 0, $IE entries, verify clean"
  cleanup
}
if want 3; then
  step3
  case $? in 2) finish "$SKIP_WHY" ;; *) cleanup; finish ;; esac
fi

# ---------------------------------------------------------------------------------------------------------
step4() {
  CAP=393216
  begin 4 "the size cap ($CAP bytes) under concurrent warm-ups of different ops and concurrent prunes"
  d="$WORK/s4-cache"
  flag="$WORK/s4.running"
  : >"$flag"
  : >"$WORK/s4.prune-failures"
  for loop in 1 2; do
    (
      n=0
      while [ -e "$flag" ]; do
        "$CLI" cache prune --max-bytes "$CAP" --cache-dir "$d" >"$WORK/s4.prune.out.$loop" 2>&1
        prc=$?
        n=$((n + 1))
        if [ "$prc" != 0 ]; then { echo "prune loop $loop: exit $prc"; cat "$WORK/s4.prune.out.$loop"; } >>"$WORK/s4.prune-failures"; fi
        sleep 0.1
      done
      echo "$n" >"$WORK/s4.prunes.$loop"
    ) &
    eval "prune_pid_$loop=\$!"
  done
  ATTNJIT_CACHE_MAX_BYTES=$CAP timeout 300 "$CLI" warmup --op paged_kv_write --arch "$ARCH" --jobs 1 --cache-dir "$d" >"$WORK/s4.w1.log" 2>&1 &
  w1=$!
  timeout 300 "$CLI" warmup --op topk_select --arch "$ARCH" --jobs 1 --cache-dir "$d" >"$WORK/s4.w2.log" 2>&1 &
  w2=$!
  ATTNJIT_CACHE_MAX_BYTES=$CAP timeout 300 "$CLI" warmup --op topk_select,paged_kv_write --arch "$ARCH" --jobs 1 --cache-dir "$d" >"$WORK/s4.w3.log" 2>&1 &
  w3=$!
  for w in 1 2 3; do
    eval "wait \$w$w"
    wrc=$?
    log="$WORK/s4.w$w.log"
    # Exit 1 is allowed only for an entry evicted between its publish and the warm-up's check
    # (NOT PERSISTED); nothing may fail, crash or time out.
    if [ "$wrc" = 0 ] || { [ "$wrc" = 1 ] && grep -q "NOT PERSISTED" "$log" && ! grep -q "FAILED" "$log"; }; then
      summary_of "$log" && say "  warm-up $w: exit $wrc, $WK kernels, compiled $WC, cache hits $WH, failed $WF, not persisted $(grep -c 'NOT PERSISTED' "$log")"
    else
      fail "warm-up $w exited $wrc:"
      show "$log"
    fi
  done
  rm -f "$flag"
  wait "$prune_pid_1" "$prune_pid_2"
  nprunes=$(( $(cat "$WORK/s4.prunes.1" 2>/dev/null || echo 0) + $(cat "$WORK/s4.prunes.2" 2>/dev/null || echo 0) ))
  if [ -s "$WORK/s4.prune-failures" ]; then fail "concurrent prunes failed:"; show "$WORK/s4.prune-failures"; fi
  [ "$nprunes" -ge 2 ] || fail "only $nprunes prunes ran concurrently"
  [ "$STEP_FAILED" = 0 ] || return 1
  ok "3 warm-ups (2 with ATTNJIT_CACHE_MAX_BYTES=$CAP) and $nprunes concurrent prunes finished; no failure"
  lsjson "$d" || { fail "cache ls --json failed"; return 1; }
  say "  before the final prune: $LE entries, $LB bytes"
  "$CLI" cache prune --max-bytes "$CAP" --cache-dir "$d" >"$WORK/s4.final-prune.out" 2>&1 || {
    fail "the final prune failed:"; show "$WORK/s4.final-prune.out"; return 1; }
  lsjson "$d" || { fail "cache ls --json failed"; return 1; }
  verify_clean "$d" "after the final prune" || return 1
  if [ "$LB" -gt "$CAP" ] || [ "$IB" -gt "$CAP" ]; then fail "after the final prune the cache holds $LB bytes (on disk: $IB), over the cap of $CAP"; return 1; fi
  [ "$LE" -ge 1 ] || { fail "the prunes emptied the cache although entries fit under the cap"; return 1; }
  [ "$LE" = "$IE" ] || { fail "ls --json lists $LE entries, $IE on disk"; return 1; }
  [ "$IL" = 0 ] || { fail "$IL staging/doomed directories left:"; show "$WORK/inspect.txt"; return 1; }
  ok "after one final prune: $LE entries, $LB bytes <= $CAP (independently $IB), verify clean, nothing staged"
}
if want 4; then step4; finish; fi

# ---------------------------------------------------------------------------------------------------------
step5() {
  begin 5 "cache verify and cache loads racing evictions (${RACE_SECONDS} s): an entry evicted mid-read is a miss, never a BAD or 'unusable' entry"
  saved="$WORK/s5-saved"
  d="$WORK/s5-cache"
  if [ -d "$WORK/s1a-cache/v1" ]; then
    cp -a "$WORK/s1a-cache" "$saved"
  else
    warm "$saved" "$WORK/s5.seed.log" || { fail "seeding warm-up failed:"; show "$WORK/s5.seed.log"; return 1; }
  fi
  cp -a "$saved" "$d"
  keys=$(cd "$saved/v1" && ls)
  end=$(( $(date +%s) + RACE_SECONDS ))
  # Refill: put evicted entries back the way publish does (a complete directory renamed into place).
  (
    n=0
    while [ "$(date +%s)" -lt "$end" ]; do
      for k in $keys; do
        [ -e "$d/v1/$k" ] && continue
        n=$((n + 1))
        cp -a "$saved/v1/$k" "$d/v1/.refill-$n" && mv -T "$d/v1/.refill-$n" "$d/v1/$k" 2>/dev/null || rm -rf "$d/v1/.refill-$n"
      done
    done
    echo "$n" >"$WORK/s5.refills"
  ) &
  refill_pid=$!
  (
    n=0
    while [ "$(date +%s)" -lt "$end" ]; do
      "$CLI" cache prune --max-bytes 64K --cache-dir "$d" >"$WORK/s5.prune.out" 2>&1 || { echo "prune exit $?"; cat "$WORK/s5.prune.out"; } >>"$WORK/s5.prune-failures"
      n=$((n + 1))
    done
    echo "$n" >"$WORK/s5.prunes"
  ) &
  prune_pid=$!
  (
    n=0
    while [ "$(date +%s)" -lt "$end" ]; do
      # ATTNJIT_NO_JIT: loads only (a miss fails that kernel, exit 1); a load must never call an entry unusable.
      ATTNJIT_NO_JIT=1 "$CLI" warmup --op "$OP" --arch "$ARCH" --jobs 1 --cache-dir "$d" >"$WORK/s5.load.out" 2>&1
      lrc=$?
      [ "$lrc" -le 1 ] || { echo "load warm-up exit $lrc"; tail -n 3 "$WORK/s5.load.out"; } >>"$WORK/s5.load-failures"
      grep "unusable" "$WORK/s5.load.out" >>"$WORK/s5.unusable"
      n=$((n + 1))
    done
    echo "$n" >"$WORK/s5.loads"
  ) &
  load_pid=$!
  nv=0
  nbad=0
  : >"$WORK/s5.bad"
  while [ "$(date +%s)" -lt "$end" ]; do
    "$CLI" cache verify --cache-dir "$d" >"$WORK/s5.verify.out" 2>&1
    vrc=$?
    nv=$((nv + 1))
    if [ "$vrc" != 0 ] || grep -q "^BAD" "$WORK/s5.verify.out"; then
      nbad=$((nbad + 1))
      grep "^BAD" "$WORK/s5.verify.out" >>"$WORK/s5.bad"
    fi
  done
  wait "$refill_pid" "$prune_pid" "$load_pid"
  say "  $nv cache verify runs, $(cat "$WORK/s5.loads") NO_JIT loading warm-ups, $(cat "$WORK/s5.prunes") prunes (--max-bytes 64K), $(cat "$WORK/s5.refills") entries renamed back in"
  if [ -s "$WORK/s5.prune-failures" ]; then fail "concurrent prunes failed:"; show "$WORK/s5.prune-failures"; fi
  if [ -s "$WORK/s5.load-failures" ]; then fail "loading warm-ups crashed or errored:"; show "$WORK/s5.load-failures"; fi
  if [ "$nbad" != 0 ]; then
    fail "$nbad of $nv cache verify runs reported entries BAD (exit 1) that were only being evicted by a concurrent prune; e.g.:"
    sed 's/^BAD [0-9a-f]* //' "$WORK/s5.bad" | sort | uniq -c | sort -rn | head -n 5 | sed 's/^/      | /'
  else
    ok "no cache verify run reported an entry BAD"
  fi
  nu=$( [ -f "$WORK/s5.unusable" ] && wc -l <"$WORK/s5.unusable" || echo 0)
  if [ "$nu" != 0 ]; then
    fail "$nu loads warned that an entry evicted under them is unusable (and then removed the key by name); e.g.:"
    head -n 3 "$WORK/s5.unusable" | sed 's/^/      | /'
  else
    ok "no load called an entry unusable"
  fi
  verify_clean "$d" "after the race" || return 1
  [ "$IL" = 0 ] || { fail "$IL staging/doomed directories left:"; show "$WORK/inspect.txt"; return 1; }
  ok "afterwards, with nothing running: verify clean, $IE entries, nothing staged (no entry was ever corrupt)"
}
if want 5; then step5; finish; fi

# ---------------------------------------------------------------------------------------------------------
cleanup
say ""
say "cache_stress summary ($(( $(date +%s) - T0 )) s, seed $SEED):$SUMMARY"
if [ "$FAILS" != 0 ]; then
  say "cache_stress: $FAILS step(s) FAILED; logs kept in $WORK"
  exit 1
fi
rm -rf "$WORK"
say "cache_stress: all steps passed"
