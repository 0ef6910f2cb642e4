#!/bin/sh
# `attnjit warmup --list`: the kernels the warm-up would compile, printed and not compiled. Checked: the count
# and a known line of paged_kv_write's matrix, the order (sorted, the same on a second run), one list per arch,
# and that the cache directory holds no file afterwards.
# Usage: warmup_list.sh ATTNJIT_CLI WORK_DIR
set -eu
cli=$1
dir=$2
rm -rf "$dir" "$dir.list" "$dir.again"
"$cli" warmup --list --op paged_kv_write --arch sm_90a --cache-dir "$dir" >"$dir.list"
n=$(wc -l <"$dir.list")
# fp16 / bf16 x {same, e4m3} cache x D in {64, 128, 256, 512, 576}
[ "$n" -eq 20 ] || { echo "warmup_list: $n lines, expected 20" >&2; cat "$dir.list" >&2; exit 1; }
tab=$(printf '\t')
line="paged_kv_write.portable.bf16.e4m3.d128.sm_90a${tab}kv_cache/paged_kv_write.cuh${tab}attnjit::kernels::paged_kv_write<__nv_bfloat16, __nv_fp8_e4m3, 128>${tab}backend=portable dtype=bf16 cache_dtype=e4m3 head_dim=128"
grep -qxF "$line" "$dir.list" || { echo "warmup_list: no line '$line'" >&2; cat "$dir.list" >&2; exit 1; }
LC_ALL=C sort -c "$dir.list"
"$cli" warmup --list --op paged_kv_write --arch sm_90a --cache-dir "$dir" >"$dir.again"
cmp "$dir.list" "$dir.again"
# One sorted list per arch, in the order given.
"$cli" warmup --list --op paged_kv_write --arch sm_80,sm_90a --cache-dir "$dir" >"$dir.again"
[ "$(wc -l <"$dir.again")" -eq 40 ] && [ "$(grep -c '\.sm_80	' "$dir.again")" -eq 20 ]
head -n 20 "$dir.again" | grep -q '\.sm_80	' && tail -n 20 "$dir.again" | cmp - "$dir.list"
# Nothing compiled: no cache entry (no file at all) under the cache directory.
if [ -e "$dir" ] && [ -n "$(find "$dir" -type f)" ]; then
  echo "warmup_list: --list wrote into the cache:" >&2
  find "$dir" -type f >&2
  exit 1
fi
# An unknown op is an error, as for a compiling warm-up.
if "$cli" warmup --list --op no_such_op --arch sm_90a --cache-dir "$dir" >/dev/null 2>&1; then
  echo "warmup_list: an unknown op did not fail" >&2
  exit 1
fi
echo "warmup_list: $n kernels listed for paged_kv_write on sm_90a, none compiled"
