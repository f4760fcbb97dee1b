#!/usr/bin/env bash
# `wholestore sample` end to end: the shipped config with small overrides on 1 and 2 ranks
# prints a summary with sampled edges, --report writes the keys, a dataset written by
# `wholestore gen` is loaded and sampled, and bad config, settings that differ across ranks or
# a damaged dataset fail naming the key, file or broken array.  Runs from the project root.
# Usage: sample_cli_test.sh <path-to-wholestore>
set -uo pipefail
bin=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
small=(--set gen.num_nodes=20000 --set gen.num_edges=200000 --set gen.feature_dim=16
  --set batches=4 --set batch_size=256 --set sampler=cpu)

# The shipped config, small, on 1 and 2 ranks (distributed memory makes sampling collective).
for ranks in 1 2; do
  for type in continuous distributed; do
    log="$work/run$ranks-$type.log"
    "$bin" launch -n "$ranks" -- "$bin" sample configs/sample.yaml "${small[@]}" \
      --set graph.type="$type" >"$log" 2>&1 || fail "$ranks rank(s), $type: exited non-zero: $(tail -5 "$log")"
    grep -q "graph: 20000 nodes" "$log" || fail "$ranks rank(s), $type: graph not made: $(tail -5 "$log")"
    grep -Eq "summary: $ranks rank\(s\), cpu sampler, [0-9]+ batches, [1-9][0-9]* sampled edges" "$log" ||
      fail "$ranks rank(s), $type: no summary with sampled edges: $(tail -3 "$log")"
  done
done

# --report: the YAML has the summary's keys and the effective config.
"$bin" sample configs/sample.yaml "${small[@]}" --report "$work/report.yaml" >"$work/report.log" 2>&1 ||
  fail "--report run exited non-zero: $(tail -3 "$work/report.log")"
for key in command ranks sampler num_nodes num_edges load_s load_gbps batches sampled_edges \
  sampled_edges_per_s batches_per_s gathered_bytes gathered_gbps peak_rss_mib config; do
  grep -q "^$key:" "$work/report.yaml" 2>/dev/null || fail "report lacks $key"
done

# A dataset written by gen, loaded (2 ranks, chunked) and sampled.
"$bin" gen configs/gen.yaml --set num_nodes=5000 --set num_edges=50000 --set weights=true \
  --set feature_dim=8 --set output="$work/ds" >/dev/null 2>&1 || fail "gen exited non-zero"
"$bin" launch -n 2 -- "$bin" sample configs/sample.yaml --set dataset="$work/ds" \
  --set graph.type=chunked --set method=weighted --set sampler=cpu --set batches=3 \
  --set load.verify_checksums=true >"$work/load.log" 2>&1
grep -Eq "load +[0-9.]+ s" "$work/load.log" || fail "dataset not loaded: $(tail -5 "$work/load.log")"
grep -q "graph: 5000 nodes, 50000 edges" "$work/load.log" || fail "loaded counts: $(tail -5 "$work/load.log")"
grep -Eq "summary: 2 rank\(s\), cpu sampler, [0-9]+ batches, [1-9][0-9]* sampled edges" "$work/load.log" ||
  fail "loaded dataset not sampled: $(tail -3 "$work/load.log")"

# Config errors name the key (and the file line for keys from a file).
out=$("$bin" sample configs/sample.yaml --set fanoutz=3 2>&1)
[ $? -ne 0 ] && grep -q "fanoutz" <<<"$out" || fail "unknown key not named: $out"
printf 'batch_size: many\n' >"$work/bad.yaml"
out=$("$bin" sample "$work/bad.yaml" 2>&1)
[ $? -ne 0 ] && grep -q "batch_size" <<<"$out" && grep -q "bad.yaml:1" <<<"$out" ||
  fail "wrong-typed value not named with its line: $out"
out=$("$bin" sample configs/sample.yaml --set fanouts=15,x 2>&1)
[ $? -ne 0 ] && grep -q "fanouts" <<<"$out" || fail "bad fanouts not named: $out"

# A dataset whose checksums were not checked and whose CSR is broken (a negative row offset,
# then a column index of -1) fails on every rank with exit code 1, naming the array, the
# position and the rule, never crashing.
for array in row_offsets col_indices; do
  cp -r "$work/ds" "$work/bad-$array"
  if [ "$array" = row_offsets ]; then at=800; else at=40; fi  # element 100, element 10
  printf '\xff\xff\xff\xff\xff\xff\xff\xff' |
    dd of="$work/bad-$array/$array.bin" bs=1 seek="$at" count=$([ "$array" = row_offsets ] && echo 8 || echo 4) \
      conv=notrunc status=none
  out=$("$bin" launch -n 2 -- "$bin" sample configs/sample.yaml --set dataset="$work/bad-$array" \
    --set sampler=cpu --set batches=2 2>&1)
  rc=$?
  [ $rc -ne 0 ] && grep -q "$array\[" <<<"$out" && grep -q "is -1" <<<"$out" &&
    grep -q "rule 6" <<<"$out" || fail "broken $array not refused by name (exit $rc): $(tail -4 <<<"$out")"
  grep -Eqi "segmentation|abort|core dumped|signal" <<<"$out" && fail "broken $array: a rank crashed: $out"
done

# Ranks with different settings (each rank's own generator seed, batch size, epochs or method)
# fail on every rank naming the key and the ranks, before any graph is built.
for setting in 'gen.seed=$RANK' 'batch_size=$((256 + RANK))' 'epochs=$((1 + RANK))' \
  'method=$([ $RANK = 0 ] && echo uniform || echo weighted)'; do
  key=${setting%%=*}
  out=$("$bin" launch -n 2 -- bash -c "exec \"$bin\" sample configs/sample.yaml ${small[*]} --set $setting" 2>&1)
  rc=$?
  [ $rc -ne 0 ] && grep -q "disagree on $key: rank 0 has .*, rank 1 has" <<<"$out" ||
    fail "per-rank $key not refused by name (exit $rc): $(tail -4 <<<"$out")"
  [ "$(grep -c "disagree on $key" <<<"$out")" -ge 2 ] || fail "per-rank $key: not every rank said so: $out"
done

# A truncated dataset file fails on every rank, naming the file.
truncate -s -4 "$work/ds/edge_weights.bin"
out=$("$bin" launch -n 2 -- "$bin" sample configs/sample.yaml --set dataset="$work/ds" \
  --set sampler=cpu 2>&1)
[ $? -ne 0 ] && grep -q "edge_weights.bin" <<<"$out" || fail "truncated file not named: $out"

if [ "$failures" -ne 0 ]; then
  echo "sample_cli_test: $failures failure(s)"
  exit 1
fi
echo "sample_cli_test: all checks passed"
