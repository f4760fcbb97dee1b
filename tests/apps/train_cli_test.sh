#!/usr/bin/env bash
# `wholestore train` end to end on Cora (../shared/data/cora.cites): a small run writes the
# summary, --report, --plot and --export (the .npy header checked byte for byte, and loaded
# with numpy when python3 has it); 2 ranks export the same bytes as 1; graph.type distributed
# on 1, 2 and 3 ranks exports the continuous graph's bytes (also with ranks that have nothing
# to walk in a batch, and node2vec); a run stopped after one
# epoch and resumed from its checkpoint exports the same bytes as one that never stopped;
# bad settings fail with exit 1 or 2 and a message that leads with the problem; the shipped
# default on ego-Facebook reaches ROC-AUC >= 0.93 (the issue's quality target).
# Runs from the project root.  Usage: train_cli_test.sh <path-to-wholestore> <shared-data-dir>
set -uo pipefail
bin=$1
data=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
cora=(configs/train.yaml --set dataset="$data/cora.cites" --set walks_per_node=1 --set dim=32)

# A small run with every output.
"$bin" train "${cora[@]}" --report "$work/r.yaml" --plot "$work/p.svg" --export "$work/one.npy" \
  >"$work/one.log" 2>&1 || fail "cora run exited non-zero: $(tail -5 "$work/one.log")"
grep -q "graph: $data/cora.cites: 2708 nodes" "$work/one.log" || fail "cora not read: $(head -3 "$work/one.log")"
grep -Eq "^summary: 1 rank\(s\), cpu, deepwalk, 2 epoch\(s\), ROC-AUC 0\.[0-9]+, Hits@50 [01]\.[0-9]+, loss [0-9.]+, [0-9]+ pairs/s" \
  "$work/one.log" || fail "no summary: $(tail -3 "$work/one.log")"
grep -Eq "^  epoch 1: loss [0-9.]+, [0-9]+ pairs, .*ROC-AUC" "$work/one.log" || fail "no epoch line with ROC-AUC"
# The size of the job before it starts: 2708 walks of 20 steps, window 3 (114 slots each), and
# the steps the progress then counts.
grep -q "^  job: 308712 pair slots per epoch (2708 walks x 114 slots), 76 step(s) of 4096 slots per epoch, 2 epoch(s)$" \
  "$work/one.log" || fail "no job size line: $(grep -m1 job: "$work/one.log")"
grep -q "(76/76 steps)" "$work/one.log" || fail "the job line's steps are not the run's: $(grep -m1 steps "$work/one.log")"
for key in command ranks device mode roc_auc hits_at_k pairs pairs_per_s train_s curve config version; do
  grep -q "^$key:" "$work/r.yaml" 2>/dev/null || fail "report lacks $key"
done
[ "$(grep -c '^  - {epoch: ' "$work/r.yaml")" = 2 ] || fail "report curve has not 2 epochs"
grep -q "<svg" "$work/p.svg" 2>/dev/null && grep -q "<polyline" "$work/p.svg" || fail "plot not drawn"
# The .npy: magic, version 1.0, the dict with shape (2708, 32), and 2708 * 32 floats after it.
[ "$(head -c 8 "$work/one.npy" | od -An -tx1 | tr -d ' \n')" = "934e554d50590100" ] || fail ".npy magic/version"
hlen=$(head -c 10 "$work/one.npy" | tail -c 2 | od -An -tu2 | tr -d ' ')
grep -q "'shape': (2708, 32)" <(head -c $((10 + hlen)) "$work/one.npy") || fail ".npy shape"
[ "$(stat -c %s "$work/one.npy")" = $((10 + hlen + 2708 * 32 * 4)) ] || fail ".npy size"
if python3 -c 'import numpy' 2>/dev/null; then
  python3 -c "import numpy, sys; a = numpy.load(sys.argv[1]); assert a.shape == (2708, 32) and a.dtype == numpy.float32, a" \
    "$work/one.npy" || fail "numpy cannot load the .npy"
else
  echo "note: numpy not installed; the .npy header was checked byte for byte only"
fi

# Two ranks: the same embeddings bit for bit.
"$bin" launch -n 2 -- "$bin" train "${cora[@]}" --export "$work/two.npy" >"$work/two.log" 2>&1 ||
  fail "2 ranks exited non-zero: $(tail -5 "$work/two.log")"
cmp -s "$work/one.npy" "$work/two.npy" || fail "2 ranks exported other embeddings than 1 rank"

# The graph in distributed memory: walked collectively, each step served by the owners of the
# walks' nodes, the same walks as continuous memory, so the same embeddings as the 1-rank
# continuous run above.
for n in 1 2 3; do
  "$bin" launch -n $n -- "$bin" train "${cora[@]}" --set graph.type=distributed \
    --export "$work/dist$n.npy" >"$work/dist$n.log" 2>&1 ||
    fail "graph.type distributed, $n rank(s) exited non-zero: $(tail -5 "$work/dist$n.log")"
  cmp -s "$work/one.npy" "$work/dist$n.npy" ||
    fail "graph.type distributed on $n rank(s) exported other embeddings than continuous memory"
done
# Ranks with nothing to walk in a batch still join the collective walks: 2708 walks of 4 slots
# (walk_length 2, window 1) in batches of 10831 leave a last batch of one slot an epoch, so
# rank 0 of 2 and ranks 0 and 1 of 3 walk nothing there.
short=(--set walk_length=2 --set window=1 --set batch_size=10831)
"$bin" train "${cora[@]}" "${short[@]}" --export "$work/short.npy" >"$work/short.log" 2>&1 ||
  fail "short walks exited non-zero: $(tail -5 "$work/short.log")"
for n in 2 3; do
  "$bin" launch -n $n -- "$bin" train "${cora[@]}" "${short[@]}" --set graph.type=distributed \
    --export "$work/short$n.npy" >"$work/short$n.log" 2>&1 ||
    fail "short walks, distributed, $n ranks exited non-zero: $(tail -5 "$work/short$n.log")"
  cmp -s "$work/short.npy" "$work/short$n.npy" ||
    fail "short walks: graph.type distributed on $n ranks exported other embeddings"
done
# node2vec on a distributed graph: the owners of the walks' nodes ask the previous nodes'
# owners, and 2 ranks export the bytes of the 1-rank continuous run.
n2v=(--set mode=node2vec --set p=0.5 --set q=2)
"$bin" train "${cora[@]}" "${n2v[@]}" --export "$work/n2v.npy" >"$work/n2v.log" 2>&1 ||
  fail "node2vec exited non-zero: $(tail -5 "$work/n2v.log")"
"$bin" launch -n 2 -- "$bin" train "${cora[@]}" "${n2v[@]}" --set graph.type=distributed \
  --export "$work/n2v2.npy" >"$work/n2v2.log" 2>&1 ||
  fail "node2vec, distributed, 2 ranks exited non-zero: $(tail -5 "$work/n2v2.log")"
cmp -s "$work/n2v.npy" "$work/n2v2.npy" ||
  fail "node2vec: graph.type distributed on 2 ranks exported other embeddings"

# Stopped after epoch 1 (2 ranks), resumed (1 rank): the same bytes as the run above.
"$bin" launch -n 2 -- "$bin" train "${cora[@]}" --set stop_after_epochs=1 --checkpoint "$work/ck" \
  >"$work/stop.log" 2>&1 || fail "stopped run exited non-zero: $(tail -5 "$work/stop.log")"
[ -f "$work/ck/state.txt" ] || fail "no checkpoint state"
"$bin" train "${cora[@]}" --resume "$work/ck" --export "$work/resumed.npy" >"$work/resume.log" 2>&1 ||
  fail "resumed run exited non-zero: $(tail -5 "$work/resume.log")"
grep -q "resuming from" "$work/resume.log" || fail "resume not announced"
cmp -s "$work/one.npy" "$work/resumed.npy" || fail "the resumed run exported other embeddings"
# Another dim: refused before training, naming both.
out=$("$bin" train "${cora[@]}" --set dim=16 --resume "$work/ck" 2>&1)
rc=$?
[ $rc -eq 1 ] && grep -q "error: resume: the checkpoint in $work/ck has dim 32, this run has dim 16" <<<"$out" ||
  fail "dim mismatch on resume (exit $rc): $(tail -2 <<<"$out")"

# Bad settings: exit status and the message's start.
expect_error() {  # expected-exit, expected-text, args...
  local want_rc=$1 text=$2
  shift 2
  out=$("$bin" train "${cora[@]}" "$@" 2>&1)
  rc=$?
  [ $rc -eq "$want_rc" ] && grep -qF -- "$text" <<<"$out" || fail "$* (exit $rc): $(tail -2 <<<"$out")"
}
expect_error 1 "error: walk_length must be at least 1, got 0" --set walk_length=0
expect_error 1 "error: window must be at least 1, got -2" --set window=-2
expect_error 1 "error: p must be a positive number, got 0" --set mode=node2vec --set p=0
expect_error 1 "error: q must be a positive number, got -1" --set mode=node2vec --set q=-1
expect_error 1 "error: negatives must be at least 1, got 0" --set negatives=0
expect_error 1 "error: holdout must be in (0, 1), got 0" --set holdout=0
expect_error 1 "error: holdout must be in (0, 1), got 1.5" --set holdout=1.5
expect_error 1 "error: mode must be deepwalk, node2vec or line, got 'walk'" --set mode=walk
# Upper bounds (issue 36: these ran for hours without a word or died in an allocation), each
# named with its bound, and a value past int refused rather than wrapped (4294967297 was 1).
expect_error 1 "error: negatives must be at most 1024, got 100000: " --set negatives=100000
expect_error 1 "error: walk_length must be at most 100000, got 100000000: " --set walk_length=100000000
expect_error 1 "error: walks_per_node must be at most 10000, got 100000: " --set walks_per_node=100000
expect_error 1 "error: window must be at most 1024, got 1025: " --set window=1025
expect_error 1 "error: dim must be at most 65536, got 65537: " --set dim=65537
expect_error 1 "error: batch_size must be at most 2147483648 (2^31), got 2147483649: " --set batch_size=2147483649
expect_error 1 "error: epochs must be at most 1000000, got 1000001: " --set epochs=1000001
expect_error 1 "error: hits_k must be at most 1000000, got 1000001: " --set hits_k=1000001
expect_error 1 "error: negatives must be at most 2147483647, got 4294967297 (--set)" --set negatives=4294967297
# At the bounds it trains: a tiny generated graph, one epoch in one step.
out=$("$bin" train configs/train.yaml --set gen.num_nodes=30 --set gen.num_edges=120 --set epochs=1 \
  --set walk_length=4 --set walks_per_node=1 --set dim=4 --set negatives=1024 --set window=1024 \
  --set hits_k=1000000 --set batch_size=2147483648 2>&1)
rc=$?
[ $rc -eq 0 ] && grep -Eq "^  job: 600 pair slots per epoch \(30 walks x 20 slots\), 1 step\(s\) of 2147483648 slots per epoch, 1 epoch\(s\)$" <<<"$out" ||
  fail "settings at their bounds (exit $rc): $(tail -3 <<<"$out")"
expect_error 2 "unknown option '--plt'" --plt x.svg
expect_error 2 "--export needs a value" --export
expect_error 1 "error: --export $work/no-dir/e.npy: its directory $work/no-dir does not exist" \
  --export "$work/no-dir/e.npy"
expect_error 1 "error: --plot $work: is a directory; nothing was run" --plot "$work"
: >"$work/a-file"
expect_error 1 "error: --checkpoint: cannot create the directory $work/a-file/ck" --checkpoint "$work/a-file/ck"
: >"$work/empty.txt"
expect_error 1 "has no edges: nothing to train on" --set dataset="$work/empty.txt"
printf '0 1\n2 2\n' >"$work/one-edge.txt"  # one edge: holding out 10% leaves nothing to score
expect_error 1 "no held-out edges to evaluate on: $work/one-edge.txt has 1 edge(s), and holding out 0.1 of them rounds to none; train needs at least 2 edges" \
  --set dataset="$work/one-edge.txt"
printf '0 1\n1 2\n2 3\n' >"$work/three-edges.txt"  # 10% of 3 rounds to none; 17% would not
expect_error 1 "has 3 edge(s), and holding out 0.1 of them rounds to none; raise holdout to at least 0.166667" \
  --set dataset="$work/three-edges.txt"

# Issue 36's severe faults.  A diverging run (SGD at lr 2 on a generated graph) stops at the
# step, exit 1, within the time limit, instead of spinning forever in the scoring.
div=(configs/train.yaml --set optimizer=sgd --set lr=2 --set gen.num_nodes=2000
  --set gen.num_edges=10000 --set epochs=1 --set dim=8)
out=$(timeout 120 "$bin" train "${div[@]}" 2>&1)
rc=$?
[ $rc -eq 1 ] && grep -q "error: training diverged at epoch 1, step [0-9]* of [0-9]* (lr " <<<"$out" &&
  grep -q "lower the learning rate" <<<"$out" || fail "diverging run (exit $rc): $(tail -2 <<<"$out")"
# --checkpoint DIR holding the user's files: refused, nothing removed.
mkdir -p "$work/d/epoch-2024-photos" && echo x >"$work/d/epoch-2024-photos/img1.jpg" &&
  echo y >"$work/d/epoch-notes.txt"
out=$("$bin" train "${cora[@]}" --set epochs=2 --checkpoint "$work/d" 2>&1)
rc=$?
[ $rc -eq 1 ] && grep -q "error: checkpoint: $work/d holds 'epoch-" <<<"$out" ||
  fail "checkpoint into a directory of user files (exit $rc): $(tail -2 <<<"$out")"
[ -f "$work/d/epoch-2024-photos/img1.jpg" ] && [ -f "$work/d/epoch-notes.txt" ] ||
  fail "train --checkpoint removed the user's files"

# Issue 36's mild faults of the outputs and checkpoints.
# An empty value and two outputs on one file: refused before the run, nothing written.
expect_error 2 "--export needs a value, got an empty one" --export ''
expect_error 2 "--plot needs a value, got an empty one" --plot=
expect_error 2 "--report needs a value, got an empty one" --report ''
expect_error 2 "--checkpoint needs a value, got an empty one" --checkpoint ''
expect_error 1 "error: --export $work/same.out and --plot $work/same.out name the same file" \
  --export "$work/same.out" --plot "$work/same.out"
expect_error 1 "error: --plot $work/./same.out and --report $work/same.out name the same file" \
  --plot "$work/./same.out" --report "$work/same.out"
[ -e "$work/same.out" ] && fail "a refused run wrote $work/same.out"
# A write that fails: /dev/full (a device is written in place, never replaced, even as root).
expect_error 1 "error: --export: cannot write /dev/full: No space left on device" \
  --set epochs=1 --export /dev/full
[ -c /dev/full ] || fail "/dev/full is no longer a device"
# A directory made read-only after the check before the run: the previous export and plot stay
# byte for byte, nothing else is left.  Root writes into read-only directories, so this case
# runs only for other users (tests/apps/train_outputs_test.cpp fails writes under a file size
# limit, which binds root too).
if [ "$(id -u)" != 0 ]; then
  mkdir -p "$work/ro" && echo "previous export" >"$work/ro/e.npy" && echo "previous plot" >"$work/ro/p.svg"
  for flag in --export --plot; do
    file=$work/ro/e.npy
    [ $flag = --plot ] && file=$work/ro/p.svg
    chmod u+w "$work/ro"
    "$bin" train "${cora[@]}" --set epochs=1 $flag "$file" >"$work/ro.log" 2>&1 &
    pid=$!
    for _ in $(seq 1 600); do grep -q "graph: " "$work/ro.log" && break; sleep 0.05; done
    chmod a-w "$work/ro"
    wait $pid
    rc=$?
    chmod u+w "$work/ro"
    [ $rc -eq 1 ] && grep -q "error: $flag: cannot write $file: Permission denied" "$work/ro.log" ||
      fail "$flag into a read-only directory (exit $rc): $(tail -2 "$work/ro.log")"
  done
  [ "$(cat "$work/ro/e.npy")" = "previous export" ] && [ "$(cat "$work/ro/p.svg")" = "previous plot" ] ||
    fail "a failed write changed the previous output"
  [ "$(ls -A "$work/ro" | tr '\n' ' ')" = "e.npy p.svg " ] || fail "leftovers: $(ls -A "$work/ro")"
else
  echo "note: running as root, which ignores directory permissions: the read-only directory case is skipped"
fi
# Resuming with other settings than the checkpoint's: refused, naming the setting and both values.
resume_other() {  # setting, checkpoint's value, this run's value
  expect_error 1 "error: resume: the checkpoint in $work/ck was trained with $1 $2, this run has $1 $3 (" \
    --resume "$work/ck" --set "$1=$3"
}
resume_other seed 0 7
resume_other lr 0.1 0.5  # a lower one is allowed: the way out of a diverged run
resume_other optimizer adagrad sgd
resume_other walk_length 20 10
resume_other window 3 2
resume_other walks_per_node 1 2
resume_other negatives 5 4
resume_other p 1 0.5
resume_other q 1 2
resume_other batch_size 4096 1000
expect_error 1 "error: resume: the checkpoint in $work/ck was trained with mode deepwalk, this run has node2vec" \
  --resume "$work/ck" --set mode=node2vec
# A damaged state.txt: refused naming the file and the line, not clamped or accepted.
cp -r "$work/ck" "$work/ck-bad"
sed -i 's/^epoch: 1$/epoch: 99999999999999999999/' "$work/ck-bad/state.txt"
expect_error 1 "error: resume: $work/ck-bad/state.txt is not a train checkpoint state: line 2: epoch '99999999999999999999' is not a whole number in [1, 2147483647]" \
  --resume "$work/ck-bad"
sed -i -e 's/^epoch: .*/epoch: 1/' -e 's/^curve: .*/curve: 1 garbage/' "$work/ck-bad/state.txt"
line=$(grep -n '^curve:' "$work/ck-bad/state.txt" | cut -d: -f1)
expect_error 1 "error: resume: $work/ck-bad/state.txt is not a train checkpoint state: line $line: 'curve:' needs 7 value(s), got 2" \
  --resume "$work/ck-bad"
expect_error 1 "error: checkpoint: $work/ck-bad/state.txt is not a train checkpoint's state (line $line:" \
  --checkpoint "$work/ck-bad"
# What a checkpoint killed while it stored epoch 2 leaves (epoch-2/input.tmp-*) is removed by
# the next run that stores into the directory.
rm -rf "$work/ck-bad" && cp -r "$work/ck" "$work/ck-killed"
mkdir -p "$work/ck-killed/epoch-2/input.tmp-123-0" && echo partial >"$work/ck-killed/epoch-2/input.tmp-123-0/data.bin"
"$bin" train "${cora[@]}" --resume "$work/ck-killed" --checkpoint "$work/ck-killed" >"$work/killed.log" 2>&1 ||
  fail "resume into a killed checkpoint exited non-zero: $(tail -3 "$work/killed.log")"
[ -z "$(find "$work/ck-killed" -name '*.tmp*')" ] && [ -d "$work/ck-killed/epoch-2/input" ] ||
  fail "the killed store's leftover stayed: $(find "$work/ck-killed")"

# --export writes the original id of each row beside the embeddings (FILE.ids.npy): cora's ids
# are sparse (up to 1155073) and remapped in order of first appearance, the order of convert's
# node_ids.txt, int64, one per row; both ends of cora.cites's edges are among them. A generated
# graph's are 0 .. n-1; ids that are not all integers are strings (NumPy's <U).
npy_values() {  # FILE OD-TYPE: the values after a .npy's header, one per line
  local hlen
  hlen=$(head -c 10 "$1" | tail -c 2 | od -An -tu2 | tr -d ' ')
  tail -c +$((11 + hlen)) "$1" | od -An -v "-t$2" | tr -s ' ' '\n' | sed '/^$/d'
}
[ -f "$work/one.ids.npy" ] || fail "--export $work/one.npy wrote no $work/one.ids.npy"
grep -q "{'descr': '<i8', 'fortran_order': False, 'shape': (2708,), }" <(head -c 128 "$work/one.ids.npy") ||
  fail "ids .npy header: $(head -c 128 "$work/one.ids.npy" | tr -d '\0')"
npy_values "$work/one.ids.npy" d8 >"$work/one.ids"
[ "$(wc -l <"$work/one.ids")" = 2708 ] || fail "the ids file has $(wc -l <"$work/one.ids") ids, expected 2708"
[ "$(sort -n "$work/one.ids" | tail -1)" = 1155073 ] || fail "the largest id is $(sort -n "$work/one.ids" | tail -1)"
"$bin" convert configs/convert.yaml --set input="$data/cora.cites" --set output="$work/cora-ds" \
  >"$work/cora-ds.log" 2>&1 || fail "convert of cora exited non-zero: $(tail -3 "$work/cora-ds.log")"
cmp -s "$work/one.ids" "$work/cora-ds/node_ids.txt" || fail "the exported ids are not convert's node_ids.txt"
for edge in "$(head -1 "$data/cora.cites")" "$(sed -n 1000p "$data/cora.cites")" "$(tail -1 "$data/cora.cites")"; do
  read -r src dst <<<"$edge"
  grep -Fxq "$src" "$work/one.ids" && grep -Fxq "$dst" "$work/one.ids" ||
    fail "edge '$edge' of cora.cites: an end is not in the ids file"
done
if python3 -c 'import numpy' 2>/dev/null; then
  python3 -c "import numpy, sys; e = numpy.load(sys.argv[1]); i = numpy.load(sys.argv[2]); assert i.dtype == numpy.int64 and i.shape == (e.shape[0],), i" \
    "$work/one.npy" "$work/one.ids.npy" || fail "numpy cannot load the ids"
fi
"$bin" train configs/train.yaml --set gen.num_nodes=50 --set gen.num_edges=400 --set epochs=1 \
  --set dim=4 --export "$work/gen.npy" >"$work/gen.log" 2>&1 || fail "generated graph exited non-zero: $(tail -3 "$work/gen.log")"
[ "$(npy_values "$work/gen.ids.npy" d8 | tr '\n' ' ')" = "$(seq 0 49 | tr '\n' ' ')" ] ||
  fail "a generated graph's ids are not 0..49: $(npy_values "$work/gen.ids.npy" d8 | head -3 | tr '\n' ' ')"
printf 'ann bob\nbob cy\ncy zoë\nzoë ann\nann cy\nbob zoë\n7 ann\n7 bob\n' >"$work/names.txt"
"$bin" train configs/train.yaml --set dataset="$work/names.txt" --set epochs=1 --set dim=4 \
  --export "$work/names" >"$work/names.log" 2>&1 || fail "string ids exited non-zero: $(tail -3 "$work/names.log")"
grep -q "{'descr': '<U3', 'fortran_order': False, 'shape': (5,), }" <(head -c 128 "$work/names.ids.npy") ||
  fail "string ids .npy header: $(head -c 128 "$work/names.ids.npy" | tr -d '\0')"
[ "$(npy_values "$work/names.ids.npy" x4 | tr '\n' ' ')" = "00000061 0000006e 0000006e 00000062 0000006f 00000062 00000063 00000079 00000000 0000007a 0000006f 000000eb 00000037 00000000 00000000 " ] ||
  fail "string ids: $(npy_values "$work/names.ids.npy" x4 | tr '\n' ' ')"
expect_error 1 "error: --export's ids $work/e.ids.npy and --plot $work/e.ids.npy name the same file" \
  --export "$work/e.npy" --plot "$work/e.ids.npy"
expect_error 0 "summary: " --set epochs=1 --export /dev/null
[ -e /dev/null.ids.npy ] && fail "--export /dev/null wrote /dev/null.ids.npy"

# The headline: the shipped default on ego-Facebook, 10% held out, dim 128.
"$bin" train configs/train.yaml --set dataset="$data/facebook_combined.txt" >"$work/fb.log" 2>&1 ||
  fail "facebook run exited non-zero: $(tail -5 "$work/fb.log")"
auc=$(sed -n 's/^summary: .*ROC-AUC \([0-9.]*\),.*/\1/p' "$work/fb.log")
echo "ego-Facebook, shipped default: $(grep '^summary' "$work/fb.log")"
awk -v a="${auc:-0}" 'BEGIN { exit !(a >= 0.93) }' || fail "facebook ROC-AUC ${auc:-none} < 0.93"

if [ $failures -ne 0 ]; then
  echo "$failures failure(s)"
  exit 1
fi
echo "train CLI: all checks passed"
