#!/usr/bin/env bash
# `wholestore bench configs/bench_embedding.yaml` in a tiny configuration, on 1 and 2 ranks: the
# table's lines and the cache case.  With a GPU: the cache case's preamble, its host, cache and
# device rows per stream, the summary line (rows cached, hit rate, speed-ups, write-through
# cost), a power-law hit rate above the uniform one, the note that skips distributed tables and
# the report's cache_cases.  Without a GPU, or in a build without CUDA: the note that skips the
# case (naming which) and no cache rows.  `cache: false` prints neither; bad cache keys fail
# naming the key; a batch a bench cannot hold (sample, embedding and gather suites) is refused
# before anything is made, naming the key, the value and the bound, and runs at the bound.  No
# timing is checked.  Runs from the project root.
# Usage: bench_embedding_cli_test.sh <path-to-wholestore>
set -uo pipefail
bin=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
tiny=(--set rows=4096 --set cpu_rows=4096 --set dims=8 --set batches=512 --set cpu_batches=512
  --set optimizers=sgd --set repeats=1 --set warmup=0 --set threads=2)

# run NAME COMMAND...: output in $work/NAME.log, "[rank 0] " prefixes (launch) removed.
run() {
  local name=$1
  shift
  "$@" >"$work/$name.raw" 2>&1 || fail "$name: exited $?: $(tail -5 "$work/$name.raw")"
  sed 's/^\[rank 0\] //' "$work/$name.raw" >"$work/$name.log"
}
has() {
  grep -Eq -- "$2" "$work/$1.log" || fail "$1: no line matching '$2': $(tail -12 "$work/$1.log")"
}
lacks() {
  ! grep -Eq -- "$2" "$work/$1.log" ||
    fail "$1: a line matches '$2': $(grep -E -- "$2" "$work/$1.log" | head -3)"
}

run one "$bin" bench configs/bench_embedding.yaml "${tiny[@]}" --set types=continuous,distributed \
  --report "$work/report.yaml"
run two "$bin" launch -n 2 -- "$bin" bench configs/bench_embedding.yaml "${tiny[@]}"
has one '^wholestore bench \(embedding\): 1 rank\(s\), (CPU|GPU) path, 4096 rows'
has two '^wholestore bench \(embedding\): 2 rank\(s\), (CPU|GPU) path, 4096 rows'
for s in uniform powerlaw; do
  has one "^continuous/(host|device) float32 d8 sgd $s +512 +[0-9]+ \| "
done

if grep -q "GPU path" "$work/one.log"; then
  for log in one two; do
    has $log '^cache case: tables in pinned host memory, uncached \(host\), behind a device_cache'
    has $log '^  of 4096 indices per stream, drawn apart from the measured batches'
    has $log '^case +batch +unique \| +hit% \| lookup ms .* x host \| update ms .* \| +step ms$'
    # Columns: hit% | lookup ms, GB/s, ceil%, Mlookup/s, x host | update ms, GB/s, ceil% | step.
    num='[0-9]+\.[0-9]+'
    lookup="$num( +$num%?){3} +${num}x"
    update="$num +$num +$num% \| +$num"
    for s in uniform powerlaw; do
      row="^continuous/host float32 d8 $s"
      has $log "$row host +512 +[0-9]+ \| +- \| +$num( +$num%?){3} +1\.00x \| +$update$"
      has $log "$row cache10% +512 +[0-9]+ \| +$num \| +$lookup \| +$update$"
      has $log "^continuous/device float32 d8 $s device +512 +[0-9]+ \| +- \| +$lookup \| +- +- +- \| +-$"
      has $log "^  continuous/host float32 d8 $s cache10%: [0-9]+ of 4096 rows cached, hit rate $num%; \
lookups ${num}x the host table's \(device table ${num}x\), step ${num}x; write-through update [-+]$num ms"
    done
  done
  has one '^  continuous/host float32 d8 uniform cache10%: 410 of 4096 rows cached'
  has one '^note: cache case skipped: distributed tables \(device_cache refuses them'
  # The cache's hit rate is a property of the streams (fixed seeds), not a timing: the hot rows
  # of a power-law stream take more of its lookups than 10% of the rows of a uniform one.
  hit() { sed -nE "s/^  continuous\/host float32 d8 $1 cache10%: .* hit rate ([0-9.]+)%.*/\1/p" "$work/one.log"; }
  awk -v u="$(hit uniform)" -v p="$(hit powerlaw)" 'BEGIN { exit !(u > 2 && u < 30 && p > u) }' ||
    fail "hit rates: uniform $(hit uniform)%, power-law $(hit powerlaw)% (expected about 10% and more)"
  grep -q '^cache_cases:$' "$work/report.yaml" || fail "report lacks cache_cases"
  grep -Eq '^  - \{case: "continuous/host float32 d8 powerlaw cache10%", batch: 512, .*hit_rate: ' \
    "$work/report.yaml" || fail "report lacks the power-law cache case: $(grep -A3 cache_cases "$work/report.yaml")"
else
  # No GPU here: a build with CUDA says so; a build without it names the build.
  if grep -q '^  CUDA  *not compiled in' <<<"$("$bin" --version)"; then
    why='this build has no CUDA \(device_cache needs it: WHOLESTORE_WITH_CUDA=ON\)'
  else
    why='no GPU \(device_cache keeps its rows in device memory\)'
  fi
  for log in one two; do
    has $log "^note: cache case skipped: $why$"
    lacks $log '^cache case:'
    lacks $log 'cache10%'
  done
  grep -q '^cache_cases: \[\]$' "$work/report.yaml" || fail "report: cache_cases is not empty"
fi

# Switched off: neither the case nor its note.
run off "$bin" bench configs/bench_embedding.yaml "${tiny[@]}" --set cache=false
has off '^continuous/(host|device) float32 d8 sgd uniform '
lacks off 'cache case'

# Bad keys fail before anything runs, naming the key: cache keys, and sizes that are not
# positive counts (stoull would take '-1' as 2^64 - 1 and 'x' would escape as an exception).
for bad in cache_fractions=0 cache_fractions=1.5 cache_fractions=0.1,x cache_fractions= \
  cache_sample=0 cache_optimizer=nosuch dims=0 dims=-1 dims=8,x dims= dims=70000 batches=0 \
  batches=-5 batches=1e3 cpu_batches=0 cpu_batches=512,abc exchange=nccl exchange= \
  exchange=PEER; do
  "$bin" bench configs/bench_embedding.yaml "${tiny[@]}" --set "$bad" >"$work/bad.log" 2>&1
  rc=$?
  [ $rc -eq 1 ] && grep -q "error: ${bad%%=*}" "$work/bad.log" ||
    fail "--set $bad: exit $rc, expected 1 with an error naming ${bad%%=*}: $(head -3 "$work/bad.log")"
done
# WHOLESTORE_TIMEOUT bounds the bench's collectives as every command's: an invalid value is
# refused naming the variable.
WHOLESTORE_TIMEOUT=-3 "$bin" bench configs/bench_embedding.yaml "${tiny[@]}" >"$work/bad.log" 2>&1
rc=$?
[ $rc -eq 1 ] && grep -q "WHOLESTORE_TIMEOUT" "$work/bad.log" ||
  fail "WHOLESTORE_TIMEOUT=-3: exit $rc, expected 1 naming the variable: $(head -3 "$work/bad.log")"

# Issue 36: a batch a bench cannot hold (1e8 seeds or indices on 1,000 nodes or rows, more than
# 2^31, or more gathered bytes or gradient elements than a rank holds) is refused before
# anything is made, exit 1, naming the key, the value and the bound.
refused() {  # expected text, bench args...
  local text=$1
  shift
  out=$("$bin" bench "$@" 2>&1)
  rc=$?
  [ $rc -eq 1 ] && grep -qF -- "error: $text" <<<"$out" && ! grep -Eq '^wholestore bench( \(|: [0-9])' <<<"$out" ||
    fail "bench $* (exit $rc, expected 1 and '$text' before any header): $(head -3 <<<"$out")"
}
graph1k=(configs/bench_sample.yaml --set num_nodes=1000 --set num_edges=5000 --set cpu_num_nodes=1000
  --set cpu_num_edges=5000)
refused "batch_size must be at most 64000 (64 x " "${graph1k[@]}" --set batch_size=100000000
refused "batch_size must be at most 2147483648 (2^31: " configs/bench_sample.yaml \
  --set num_nodes=100000000 --set cpu_num_nodes=100000000 --set batch_size=2147483649
refused "walk_batch x (walk_length + 1) must be at most 2147483648 node ids per call" \
  configs/bench_sample.yaml --set walk_length=100000 --set walk_batch=30000
emb1k=(configs/bench_embedding.yaml "${tiny[@]}" --set rows=1000 --set cpu_rows=1000)
refused "cpu_batches: 100000000 is more than 64 x cpu_rows 1000 = 64000" "${emb1k[@]}" --set cpu_batches=100000000
refused "batches: 100000000 is more than 64 x rows 1000 = 64000" "${emb1k[@]}" --set batches=100000000
refused "cpu_batches: 262145 is more than 64 x cpu_rows 4096 = 262144" configs/bench_embedding.yaml \
  "${tiny[@]}" --set cpu_batches=262145
refused "batches: 268435457 x dims 8 is more than 2^31 gradient elements" configs/bench_embedding.yaml \
  "${tiny[@]}" --set rows=33554432 --set batches=268435457
refused "lookups must be at most 2147483648 (2^31 " configs/bench_gather.yaml --set lookups=2147483649
refused "cpu_lookups must be at most 16777216 with row_bytes 4096, got 100000000" configs/bench_gather.yaml \
  --set cpu_lookups=100000000
# At the bounds they run: 64000 seeds on 1,000 nodes; 262144 indices on 4096 rows.
run at_bound_sample "$bin" bench "${graph1k[@]}" --set batch_size=64000 --set walks= --set fanouts=1 \
  --set methods=uniform --set types=continuous --set locations=host --set samplers=cpu \
  --set batches=1 --set cpu_batches=1 --set warmup=0 --set threads=2
has at_bound_sample 'batch 64000, '
has at_bound_sample '^cpu +continuous +host +uniform +1 '
run at_bound_embedding "$bin" bench configs/bench_embedding.yaml "${tiny[@]}" --set batches=262144 \
  --set cpu_batches=262144 --set streams=uniform --set cache=false
has at_bound_embedding '^continuous/(host|device) float32 d8 sgd uniform +262144 '
# Bounds too large to run here pass the checks: what fails is a key checked after them, before
# anything is allocated (walks of 2^31 ids; 2^31 lookups of 32-byte rows, 64 GiB).
refused "cpu_target must be a positive number" configs/bench_sample.yaml --set walk_length=1 \
  --set walk_batch=1073741824 --set cpu_target=0
refused "repeats must be >= 1" configs/bench_gather.yaml --set row_bytes=32 --set lookups=2147483648 \
  --set cpu_lookups=2147483648 --set repeats=0

# Ranks with different configs (here each rank's own seed or size) fail on every rank naming
# the key and the ranks, before any table is built: the embedding, gather and sample suites
# and demo.  Per-rank keys (threads, timeout_s) may differ.
for cmd in "bench configs/bench_embedding.yaml ${tiny[*]} --set seed=\$((7 + RANK))" \
  "bench configs/bench_gather.yaml --set cpu_table_gib=0.001 --set cpu_lookups=1000 --set seed=\$((7 + RANK))" \
  "bench configs/bench_sample.yaml --set cpu_num_nodes=1000 --set cpu_num_edges=5000 --set random_seed=\$RANK" \
  "demo configs/demo.yaml --set memory.size_mib=\$((1 + RANK))"; do
  key=$(sed -E 's/.*--set ([a-z_.]+)=\$.*/\1/' <<<"$cmd")
  out=$("$bin" launch -n 2 -- bash -c "exec \"$bin\" $cmd" 2>&1)
  rc=$?
  [ $rc -eq 1 ] && grep -q "the config of every rank must match.*disagree on $key: rank 0 has .*, rank 1 has" <<<"$out" ||
    fail "per-rank $key ($cmd) not refused by name (exit $rc): $(tail -4 <<<"$out")"
done
run threads "$bin" launch -n 2 -- bash -c "exec \"$bin\" bench configs/bench_embedding.yaml ${tiny[*]} --set optimizers= --set cache=false --set threads=\$((1 + RANK))"
has threads '^wholestore bench \(embedding\): 2 rank\(s\)'

# The gather suite says when its index stream repeats rows (a 1 MiB table of 16 Ki 64-byte
# rows, 20,000 lookups: about 58% distinct; 4 KiB rows: 262 rows, about 1%), and not when the
# stream is nearly all distinct (a 256 MiB table, 4 Mi rows of 64 B).
"$bin" bench configs/bench_gather.yaml --set cpu_table_gib=0.001 --set cpu_lookups=20000 \
  --set repeats=1 --set warmup=0 --set types=continuous --set ops=gather \
  --set row_bytes=64,4096 --report "$work/gather.yaml" >"$work/gather.log" 2>&1 ||
  fail "gather bench exited non-zero: $(tail -3 "$work/gather.log")"
grep -Eq '^gather .* 64 B .*\[indices repeat rows: [56][0-9]\.[0-9]% distinct\]$' "$work/gather.log" &&
  grep -Eq '^gather .* 4096 B .*\[indices repeat rows: [0-9]\.[0-9]% distinct\]$' "$work/gather.log" ||
  fail "gather lines do not say how much the indices repeat: $(grep '^gather' "$work/gather.log")"
grep -q "distinct_share: " "$work/gather.yaml" || fail "the gather report lacks distinct_share"
"$bin" bench configs/bench_gather.yaml --set cpu_table_gib=0.25 --set cpu_lookups=20000 \
  --set repeats=1 --set warmup=0 --set types=continuous --set ops=gather --set row_bytes=64 \
  >"$work/gather-big.log" 2>&1 || fail "gather bench (big table) exited non-zero"
grep -q "indices repeat rows" "$work/gather-big.log" &&
  fail "a nearly distinct stream was reported as repeating: $(grep '^gather' "$work/gather-big.log")"

if [ "$failures" -ne 0 ]; then
  echo "bench_embedding_cli_test: $failures failure(s)"
  exit 1
fi
echo "bench_embedding_cli_test: all checks passed"
