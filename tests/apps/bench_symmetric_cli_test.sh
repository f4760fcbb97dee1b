#!/usr/bin/env bash
# `wholestore bench configs/bench_symmetric.yaml` on 2 ranks with small sizes: a line per size x
# direction (get, put) x way (copy, kernel) with rates and the ceiling (every copy is checked
# byte for byte by the bench itself, which exits non-zero on a wrong byte); one rank: the note
# and exit 0; bad sizes and counts: an error naming the key.  The GPU machine gets the device
# heap (two ranks with their own GPUs), other machines the host heap.  No timing is checked.
# Usage: bench_symmetric_cli_test.sh <path-to-wholestore>
set -uo pipefail
bin=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
small=(--set sizes_kib=64,1024 --set cpu_sizes_kib=64,1024 --set repeats=2 --set warmup=1
  --set threads=2)

run() {
  local name=$1
  shift
  "$@" >"$work/$name.raw" 2>&1 || fail "$name: exited $?: $(tail -5 "$work/$name.raw")"
  sed 's/^\[rank 0\] //' "$work/$name.raw" >"$work/$name.log"
}
has() {
  grep -Eq -- "$2" "$work/$1.log" || fail "$1: no line matching '$2': $(tail -12 "$work/$1.log")"
}
refused() {  # refused NAME PATTERN ARGS...: exits non-zero with an error matching PATTERN
  local name=$1 pattern=$2
  shift 2
  if "$bin" bench configs/bench_symmetric.yaml "$@" >"$work/$name.log" 2>&1; then
    fail "$name: accepted $*"
  fi
  grep -Eq -- "$pattern" "$work/$name.log" || fail "$name: no '$pattern': $(cat "$work/$name.log")"
}

run two "$bin" launch -n 2 -- "$bin" bench configs/bench_symmetric.yaml "${small[@]}"
has two '^wholestore bench \(symmetric\): 2 rank\(s\), (host|device) heap'
for size in 64 1024; do
  for dir in get put; do
    for way in copy kernel; do
      has two "^$size KiB +$dir +$way +[0-9.]+ +[0-9.]+ +[0-9.]+%$"
    done
  done
done
has two '^summary: symmetric put/get, largest size 1024 KiB'

run one "$bin" bench configs/bench_symmetric.yaml "${small[@]}"
has one '^note: bench symmetric needs two ranks'

refused size0 'sizes_kib' --set sizes_kib=0 --set cpu_sizes_kib=0
refused odd 'not a multiple of 4 KiB' --set sizes_kib=6 --set cpu_sizes_kib=6
refused list 'sizes_kib' --set sizes_kib=1024,,x --set cpu_sizes_kib=1024,,x
refused repeats 'repeats' --set repeats=0
refused unknown 'size_kib' --set size_kib=4
# Sizes as a YAML list instead of the comma-separated string: refused naming the key.
printf 'suite: symmetric\nsizes_kib: [64, 1024]\ncpu_sizes_kib: [64, 1024]\n' >"$work/list.yaml"
if "$bin" bench "$work/list.yaml" >"$work/yaml_list.log" 2>&1; then
  fail "yaml_list: accepted a YAML list of sizes"
fi
grep -Eq "sizes_kib' must be a string, got a list" "$work/yaml_list.log" ||
  fail "yaml_list: no clear error: $(cat "$work/yaml_list.log")"

if [ "$failures" -ne 0 ]; then
  echo "$failures failure(s)"
  exit 1
fi
echo "bench_symmetric.cli: all checks passed"
