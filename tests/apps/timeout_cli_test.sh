#!/usr/bin/env bash
# The collective timeout of every command: WHOLESTORE_TIMEOUT, when set, replaces the config's
# timeout_s (the shipped configs say 300 to 900 s), and both are checked: -1, 0, nan, inf, 1e300,
# text and the empty string are errors that name the variable or the key and the accepted range.
# Runs from the project root.  Usage: timeout_cli_test.sh <path-to-wholestore>
set -uo pipefail
bin=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
range='(0, 31536000]'

# Rank 0 of a two-rank job whose rank 1 never comes: the connect round fails after the timeout
# that WHOLESTORE_TIMEOUT sets, not after the config's.  `timeout` keeps a regression from
# waiting out the config's 300 s; the bound on the elapsed time is loose (20 s, against the
# config's 300 s) because a loaded 2-core CI machine starts the bench slowly.
jobs=("sample configs/sample.yaml --set sampler=cpu"
  "demo configs/demo.yaml --set memory.size_mib=1"
  "bench configs/bench_gather.yaml"
  "bench configs/bench_sample.yaml"
  "bench configs/bench_embedding.yaml")
for job in "${jobs[@]}"; do
  # A port below the kernel's ephemeral range; another test running in parallel may hold it,
  # so a run that could not listen is repeated on another port.
  for attempt in 1 2 3 4 5; do
    port=$((10000 + RANDOM % 20000))
    start=$(date +%s%N)
    # shellcheck disable=SC2086 # the job's words
    out=$(WHOLESTORE_TIMEOUT=1 RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
      timeout 30 "$bin" $job 2>&1)
    rc=$?
    elapsed_ms=$((($(date +%s%N) - start) / 1000000))
    grep -q "Address already in use" <<<"$out" || break
  done
  [ $rc -eq 1 ] || fail "$job: exit $rc, expected 1: $(tail -3 <<<"$out")"
  grep -q "rank 1 did not connect within 1000 ms" <<<"$out" ||
    fail "$job: no 'rank 1 did not connect within 1000 ms': $(tail -3 <<<"$out")"
  [ $elapsed_ms -lt 20000 ] || fail "$job: took $elapsed_ms ms with WHOLESTORE_TIMEOUT=1"
done

# Bad values of the variable: every command with a timeout refuses them before it runs, and so
# does launch, before it starts a rank.
for value in -1 0 nan inf 1e300 abc ''; do
  for cmd in "demo configs/demo.yaml --set memory.size_mib=1" "sample configs/sample.yaml --set batches=1" \
    "launch -n 2 -- true"; do
    # shellcheck disable=SC2086
    out=$(WHOLESTORE_TIMEOUT="$value" timeout 30 "$bin" $cmd 2>&1)
    rc=$?
    [ $rc -eq 1 ] && grep -qF "WHOLESTORE_TIMEOUT='$value'" <<<"$out" && grep -qF "$range" <<<"$out" ||
      fail "WHOLESTORE_TIMEOUT='$value' $cmd: exit $rc, not refused naming the variable and range: $(tail -2 <<<"$out")"
  done
done

# Bad values of timeout_s, from --set and from a file: numbers out of range are errors (1)
# naming the key, the origin and the range; text is a usage error (2).
for value in -1 0 nan inf 1e300; do
  out=$(timeout 30 "$bin" demo configs/demo.yaml --set memory.size_mib=1 --set timeout_s="$value" 2>&1)
  rc=$?
  [ $rc -eq 1 ] && grep -qF "timeout_s '$value'" <<<"$out" && grep -qF "$range" <<<"$out" &&
    grep -qF -- "--set timeout_s=$value" <<<"$out" ||
    fail "--set timeout_s=$value: exit $rc, not refused naming the key and range: $(tail -2 <<<"$out")"
  printf 'memory:\n  size_mib: 1\ntimeout_s: %s\n' "$value" >"$work/bad.yaml"
  # The variable replaces the value, but a bad file stays an error.
  out=$(WHOLESTORE_TIMEOUT=5 timeout 30 "$bin" demo "$work/bad.yaml" 2>&1)
  rc=$?
  [ $rc -eq 1 ] && grep -qF "timeout_s '$value'" <<<"$out" && grep -qF "bad.yaml:3" <<<"$out" ||
    fail "timeout_s: $value in a file: exit $rc, not refused naming the line: $(tail -2 <<<"$out")"
done
for value in abc ''; do
  out=$("$bin" demo configs/demo.yaml --set timeout_s="$value" 2>&1)
  rc=$?
  [ $rc -eq 2 ] && grep -q "timeout_s" <<<"$out" ||
    fail "--set timeout_s='$value': exit $rc, expected a usage error naming the key: $(tail -2 <<<"$out")"
done

# A good variable over a good config: the run goes through, and the report's effective config
# shows the timeout used.
out=$(WHOLESTORE_TIMEOUT=7.5 "$bin" demo configs/demo.yaml --set memory.size_mib=1 \
  --set timeout_s=3 --report "$work/demo.yaml" 2>&1) || fail "demo with WHOLESTORE_TIMEOUT=7.5 failed: $out"
grep -q "^  timeout_s: 7.5$" "$work/demo.yaml" 2>/dev/null ||
  fail "the report does not show timeout_s: 7.5: $(grep timeout "$work/demo.yaml" 2>&1)"

# The help says so.
"$bin" demo --help | grep -q "WHOLESTORE_TIMEOUT=SECONDS, when set, replaces timeout_s" ||
  fail "demo --help does not describe WHOLESTORE_TIMEOUT"

if [ "$failures" -ne 0 ]; then
  echo "timeout_cli_test: $failures check(s) failed"
  exit 1
fi
echo "timeout_cli_test: all checks passed"
