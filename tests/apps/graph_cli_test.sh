#!/usr/bin/env bash
# The graph subcommands end to end: gen is deterministic (same config, same checksums, any
# thread count), convert reads the shared real graphs with the counts their README states,
# info reads what they wrote, overwriting never loses the previous dataset or foreign files,
# edge lists are read without silent losses, and bad input fails with a message naming the
# problem.
# Usage: graph_cli_test.sh <path-to-wholestore> <shared-data-dir>
set -uo pipefail
bin=$1
data=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
checksums() { grep -E 'checksum' "$1/manifest.yaml"; }

# gen: a small R-MAT graph twice with different thread counts, then with another seed.
small=(--set num_nodes=5000 --set num_edges=60000 --set weights=true --set feature_dim=4)
"$bin" gen configs/gen.yaml "${small[@]}" --set output="$work/g1" --set threads=1 >"$work/gen1.log" 2>&1 ||
  fail "gen (1 thread) exited non-zero: $(cat "$work/gen1.log")"
"$bin" gen configs/gen.yaml "${small[@]}" --set output="$work/g2" --set threads=2 >/dev/null 2>&1 ||
  fail "gen (2 threads) exited non-zero"
"$bin" gen configs/gen.yaml "${small[@]}" --set output="$work/g3" --set seed=99 >/dev/null 2>&1 ||
  fail "gen (seed 99) exited non-zero"
[ "$(checksums "$work/g1")" = "$(checksums "$work/g2")" ] || fail "gen differs between 1 and 2 threads"
[ "$(checksums "$work/g1")" != "$(checksums "$work/g3")" ] || fail "gen ignores the seed"
"$bin" info "$work/g1" >"$work/info.log" 2>&1 || fail "info on a generated dataset failed"
grep -q "nodes 5000, edges 60000" "$work/info.log" || fail "info counts: $(head -3 "$work/info.log")"

# gen kind sbm: a labelled dataset (labels, split, features), deterministic, that info reads
# with its classes and split; bad sbm keys fail before generating.
sbm=(--set kind=sbm --set num_nodes=3000 --set num_edges=30000 --set feature_dim=8
  --set sbm.classes=7 --set symmetrize=true)
"$bin" gen configs/gen.yaml "${sbm[@]}" --set output="$work/s1" --set threads=1 >/dev/null 2>&1 ||
  fail "gen sbm exited non-zero"
"$bin" gen configs/gen.yaml "${sbm[@]}" --set output="$work/s2" --set threads=2 >/dev/null 2>&1 ||
  fail "gen sbm (2 threads) exited non-zero"
[ "$(checksums "$work/s1")" = "$(checksums "$work/s2")" ] || fail "gen sbm differs by threads"
grep -q "^node_labels.dtype: int32" "$work/s1/manifest.yaml" || fail "gen sbm: no labels"
"$bin" info "$work/s1" >"$work/sbm-info.log" 2>&1 || fail "info on an sbm dataset failed"
grep -Eq "num_classes 7; split: [0-9]+ train, [0-9]+ validation, [0-9]+ test" \
  "$work/sbm-info.log" || fail "info sbm: $(cat "$work/sbm-info.log")"
for bad in sbm.classes=1 sbm.homophily=1.5 sbm.snr=-1 sbm.train_fraction=0.9 weights=true; do
  out=$("$bin" gen configs/gen.yaml "${sbm[@]}" --set output="$work/s-bad" --set "$bad" 2>&1)
  rc=$?
  key=${bad%%=*}
  [ $rc -eq 1 ] && grep -q "${key#sbm.}" <<<"$out" ||
    fail "gen sbm --set $bad: exit $rc, expected an error naming ${key#sbm.}: $out"
done
[ -e "$work/s-bad/manifest.yaml" ] && fail "a refused sbm run wrote a dataset"

# convert: the shared real graphs, counts from shared/data/README.md.
"$bin" convert configs/convert.yaml --set input="$data/cora.cites" --set output="$work/cora" \
  >"$work/cora.log" 2>&1 || fail "convert cora: $(cat "$work/cora.log")"
"$bin" info "$work/cora" | grep -q "nodes 2708, edges 5429" || fail "cora counts"
grep -qx "1155073" "$work/cora/node_ids.txt" || fail "cora: the largest original id is missing"
"$bin" convert configs/convert.yaml --set input="$data/facebook_combined.txt" \
  --set output="$work/fb" --set symmetrize=true --set drop_duplicates=true >/dev/null 2>&1 ||
  fail "convert facebook"
"$bin" info "$work/fb" | grep -q "nodes 4039, edges 176468" || fail "facebook counts"

# Overwriting: a directory holding other files is refused unless asked (and left as it was),
# a failed convert leaves the dataset it would have replaced intact, and nothing is left
# beside the dataset.
mkdir -p "$work/mine"
echo "keep me" >"$work/mine/notes.txt"
out=$("$bin" gen configs/gen.yaml "${small[@]}" --set output="$work/mine" 2>&1)
[ $? -ne 0 ] && grep -q "notes.txt" <<<"$out" && grep -q "overwrite" <<<"$out" ||
  fail "gen into a directory with other files was not refused: $out"
[ "$(ls "$work/mine")" = "notes.txt" ] || fail "the refused directory changed: $(ls "$work/mine")"
"$bin" gen configs/gen.yaml "${small[@]}" --set output="$work/mine" --set overwrite=true \
  >/dev/null 2>&1 || fail "gen with overwrite=true failed"
"$bin" info "$work/mine" | grep -q "nodes 5000, edges 60000" || fail "overwritten dataset not readable"
printf '0 1\n1 2\nthree\n' >"$work/bad.txt"
"$bin" convert configs/convert.yaml --set input="$work/bad.txt" --set output="$work/g1" >/dev/null 2>&1 &&
  fail "a malformed edge list converted"
"$bin" info "$work/g1" | grep -q "nodes 5000, edges 60000" || fail "a failed convert damaged the old dataset"
ls -a "$work" | grep -q "writing" && fail "temporary directories left beside the datasets: $(ls -a "$work")"

# Silent wrong answers, no more: a UTF-8 byte order mark does not cost the first edge, a
# skipped header line is reported, an edge list without edges warns, and NaN, infinite or
# negative weights are refused naming the line.
printf '\xEF\xBB\xBF0 1\n1 2\n2 0\n' >"$work/bom.txt"
"$bin" convert configs/convert.yaml --set input="$work/bom.txt" --set output="$work/bom" \
  >"$work/bom.log" 2>&1 || fail "convert with a byte order mark failed: $(cat "$work/bom.log")"
"$bin" info "$work/bom" | grep -q "nodes 3, edges 3" || fail "byte order mark: an edge was lost"
printf 'source,target\n0 1\n' >"$work/hdr.txt"
out=$("$bin" convert configs/convert.yaml --set input="$work/hdr.txt" --set output="$work/hdr" 2>&1)
grep -q "line 1 skipped as a header: 'source,target'" <<<"$out" || fail "skipped header not reported: $out"
for text in '' '# only a comment\n' 'source,target\n'; do
  printf "$text" >"$work/empty.txt"
  out=$("$bin" convert configs/convert.yaml --set input="$work/empty.txt" --set output="$work/empty" 2>&1)
  [ $? -eq 0 ] && grep -q "warning: .*empty.txt holds no edges" <<<"$out" ||
    fail "an edge list without edges ('$text') did not warn: $out"
done
for w in nan inf -1; do
  printf '0 1 0.5\n1 2 %s\n' "$w" >"$work/w.txt"
  out=$("$bin" convert configs/convert.yaml --set input="$work/w.txt" --set output="$work/w" \
    --set weights=true 2>&1)
  [ $? -ne 0 ] && grep -q "w.txt:2" <<<"$out" && grep -q "finite and >= 0" <<<"$out" ||
    fail "weight $w not refused with its line: $out"
done

# Bad input: a malformed line, a truncated array, an unknown key.
printf '0 1\n1 2\nthree\n' >"$work/bad.txt"
out=$("$bin" convert configs/convert.yaml --set input="$work/bad.txt" --set output="$work/bad" 2>&1)
[ $? -ne 0 ] && grep -q "bad.txt:3" <<<"$out" && grep -q "three" <<<"$out" ||
  fail "malformed line not reported with file, line and content: $out"
truncate -s -4 "$work/cora/col_indices.bin"
out=$("$bin" info "$work/cora" 2>&1)
[ $? -ne 0 ] && grep -q "col_indices.bin" <<<"$out" || fail "truncated file not named: $out"
out=$("$bin" gen configs/gen.yaml --set num_nodez=3 2>&1)
[ $? -ne 0 ] && grep -q "num_nodez" <<<"$out" || fail "unknown key not named: $out"

# convert from a pipe (input=-): the same dataset, checksum for checksum, as from the file.
cat "$data/cora.cites" | "$bin" convert configs/convert.yaml --set input=- \
  --set output="$work/cora-pipe" >"$work/pipe.log" 2>&1 || fail "convert from a pipe: $(cat "$work/pipe.log")"
[ "$(checksums "$work/cora")" = "$(checksums "$work/cora-pipe")" ] ||
  fail "convert from a pipe differs from the file: $(checksums "$work/cora-pipe")"
grep -q "^wholestore convert: standard input -> " "$work/pipe.log" || fail "pipe not named: $(cat "$work/pipe.log")"
# Progress: convert of a file reports the share read, gen each phase (non-terminal: lines).
grep -q "^  read 100% " "$work/cora.log" || fail "convert printed no progress: $(cat "$work/cora.log")"
for phase in draw count fill features; do
  grep -q "^  $phase 100% " "$work/gen1.log" || fail "gen printed no progress for $phase: $(cat "$work/gen1.log")"
done

# gen and convert check the destination and the features dtype before the work: nothing is
# generated or parsed for a destination that will be refused.
mkdir -p "$work/foreign" && echo x >"$work/foreign/x.txt" && echo x >"$work/plainfile"
for bad in "output=$work/foreign" "output=$work/plainfile/sub" "features_dtype=int32"; do
  out=$("$bin" gen configs/gen.yaml "${small[@]}" --set output="$work/g-early" --set "$bad" 2>&1)
  rc=$?
  [ $rc -eq 1 ] && ! grep -q "^  generate " <<<"$out" && ! grep -q "draw" <<<"$out" ||
    fail "gen --set $bad: exit $rc, expected a refusal before generating: $out"
  out=$("$bin" convert configs/convert.yaml --set input="$data/cora.cites" \
    --set output="$work/c-early" --set "$bad" 2>&1)
  rc=$?
  [ $rc -eq 1 ] && ! grep -q "read " <<<"$out" ||
    fail "convert --set $bad: exit $rc, expected a refusal before reading: $out"
done
[ -e "$work/g-early" ] || [ -e "$work/c-early" ] && fail "a refused run created its output"

# Out of memory in gen (issue 36: a bare "std::bad_alloc"): the sizes and the way out, exit 1,
# no output.  The address space is limited to 400 MB for the one command.
out=$( (ulimit -v 400000 && exec "$bin" gen configs/gen.yaml --set num_nodes=1000000 \
  --set num_edges=200000000 --set output="$work/g-oom") 2>&1)
rc=$?
[ $rc -eq 1 ] && grep -q "error: out of host memory generating 1000000 nodes and 200000000 edges" <<<"$out" &&
  grep -q "lower num_edges" <<<"$out" || fail "gen out of memory (exit $rc): $(tail -2 <<<"$out")"
[ -e "$work/g-oom" ] && fail "gen out of memory left $work/g-oom"

if [ "$failures" -ne 0 ]; then
  echo "graph_cli_test: $failures failure(s)"
  exit 1
fi
echo "graph_cli_test: all checks passed"
