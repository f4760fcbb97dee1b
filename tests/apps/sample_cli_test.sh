#!/usr/bin/env bash
# `wholestore sample` end to end: the shipped config with small overrides on 1 and 2 ranks
# prints a summary with sampled edges, --report writes the keys, a dataset written by
# `wholestore gen` is loaded and sampled, bad config, settings that differ across ranks or a
# damaged dataset fail naming the key, file or broken array, and a peer that dies or stops
# leaves the survivor with the first error and exit code 1 within about one timeout.  Runs from the project root.
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

# Two simulated hosts of two ranks (launch --hosts 2), and four of one: each host holds its own
# copy of the graph (the host communicator cannot span hosts); a node's sample does not depend
# on which rank takes it, so the job samples exactly the edges of one host of four ranks.
for type in continuous chunked distributed; do
  one="$work/hosts1-$type.log" two="$work/hosts2-$type.log"
  "$bin" launch -n 4 -- "$bin" sample configs/sample.yaml "${small[@]}" --set batches=0 \
    --set graph.type="$type" >"$one" 2>&1 || fail "4 ranks, $type: exited non-zero: $(tail -3 "$one")"
  "$bin" launch -n 4 --hosts 2 -- "$bin" sample configs/sample.yaml "${small[@]}" --set batches=0 \
    --set graph.type="$type" >"$two" 2>&1 || fail "2 hosts x 2 ranks, $type: exited non-zero: $(tail -3 "$two")"
  grep -q "2 hosts: every host holds its own copy" "$two" || fail "2 hosts, $type: no hosts line: $(head -5 "$two")"
  edges() { grep -Eo "[0-9]+ sampled edges" "$1" | head -1; }
  [ -n "$(edges "$one")" ] && [ "$(edges "$one")" = "$(edges "$two")" ] ||
    fail "2 hosts, $type: '$(edges "$two")' differs from one host's '$(edges "$one")'"
  # Four hosts of one rank each: four copies, still the same edges.
  four="$work/hosts4-$type.log"
  "$bin" launch -n 4 --hosts 4 -- "$bin" sample configs/sample.yaml "${small[@]}" --set batches=0 \
    --set graph.type="$type" >"$four" 2>&1 || fail "4 hosts, $type: exited non-zero: $(tail -3 "$four")"
  [ "$(edges "$one")" = "$(edges "$four")" ] ||
    fail "4 hosts, $type: '$(edges "$four")' differs from one host's '$(edges "$one")'"
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

# A dataset that is named but missing is an error on every rank (only an empty `dataset`
# generates a graph).
out=$("$bin" launch -n 2 -- "$bin" sample configs/sample.yaml --set dataset="$work/no-such-ds" \
  --set sampler=cpu 2>&1)
rc=$?
[ $rc -eq 1 ] && grep -q "no-such-ds: no such dataset directory (it does not exist)" <<<"$out" ||
  fail "a missing dataset did not fail naming it (exit $rc): $(tail -3 <<<"$out")"
grep -q "generating" <<<"$out" && fail "a missing dataset was replaced by a generated graph"

# A dataset without nodes (an empty edge list) samples nothing, and says so.
: >"$work/empty.txt"
"$bin" convert configs/convert.yaml --set input="$work/empty.txt" --set output="$work/empty-ds" \
  >/dev/null 2>&1 || fail "convert of an empty edge list failed"
out=$("$bin" sample configs/sample.yaml --set dataset="$work/empty-ds" --set sampler=cpu 2>&1) ||
  fail "sample on a dataset without nodes failed: $out"
grep -q "warning: .*empty-ds has no nodes" <<<"$out" || fail "no warning for a graph without nodes: $out"

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
# fail naming the key and the ranks, before any graph is built (every rank throws; `launch`
# may stop the slower one before it prints).
for setting in 'gen.seed=$RANK' 'batch_size=$((256 + RANK))' 'epochs=$((1 + RANK))' \
  'method=$([ $RANK = 0 ] && echo uniform || echo weighted)'; do
  key=${setting%%=*}
  out=$("$bin" launch -n 2 -- bash -c "exec \"$bin\" sample configs/sample.yaml ${small[*]} --set $setting" 2>&1)
  rc=$?
  [ $rc -ne 0 ] && grep -q "disagree on $key: rank 0 has .*, rank 1 has" <<<"$out" ||
    fail "per-rank $key not refused by name (exit $rc): $(tail -4 <<<"$out")"
done

# A peer that dies (SIGKILL) or stops (SIGSTOP) in the middle of sampling a distributed graph:
# the survivor exits 1 within about one timeout (3 s), printing the failed collective and the
# rank, and nothing from the destructors that unwind after it (no crash, no second error).
# The ranks are started by hand: `launch` would stop the survivor itself.
for sig in KILL STOP; do
  port=$((20000 + RANDOM % 20000))
  for r in 0 1; do
    RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
      "$bin" sample configs/sample.yaml "${small[@]}" --set batches=0 --set epochs=100000 \
      --set graph.type=distributed --set timeout_s=3 >"$work/peer$sig$r.log" 2>&1 &
    pids[$r]=$!
  done
  for _ in $(seq 1 300); do grep -q "sample " "$work/peer${sig}0.log" && break; sleep 0.1; done
  sleep 0.3
  start=$(date +%s%N)
  kill -"$sig" "${pids[1]}"
  wait "${pids[0]}" 2>/dev/null
  rc=$?
  elapsed_ms=$((($(date +%s%N) - start) / 1000000))
  kill -KILL "${pids[1]}" 2>/dev/null
  wait "${pids[1]}" 2>/dev/null
  log=$(cat "$work/peer${sig}0.log")
  [ $rc -eq 1 ] || fail "SIG$sig: the survivor exited $rc, not 1: $(tail -3 <<<"$log")"
  [ $elapsed_ms -lt 6000 ] || fail "SIG$sig: the survivor took $elapsed_ms ms (timeout 3 s)"
  grep -Eq "error: .*(alltoallv|allreduce|barrier|allgather).* 1 \(pid ${pids[1]}\)" <<<"$log" ||
    fail "SIG$sig: the error does not name the collective and rank 1: $(tail -3 <<<"$log")"
  [ "$(grep -c "error" <<<"$log")" -eq 1 ] || fail "SIG$sig: more than the first error: $log"
  grep -Eqi "freeing|segmentation|abort|core dumped" <<<"$log" && fail "SIG$sig: unwinding went wrong: $log"
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
