#!/usr/bin/env bash
# Tests `wholestore launch` end to end: environment and prefixed output of every rank, a failing
# rank stopping the job quickly, and usage errors.  Usage: launch_test.sh <path-to-wholestore>
set -u

if [ $# -ne 1 ] || [ ! -x "$1" ]; then
  echo "usage: $0 <path-to-wholestore>" >&2
  exit 2
fi
WHOLESTORE=$1
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
failures=0

fail() {
  echo "FAIL: $*" >&2
  failures=$((failures + 1))
}

pass() {
  echo "ok: $*"
}

# ---- three ranks print their environment ----------------------------------------------------
"$WHOLESTORE" launch -n 3 -- sh -c \
  'echo hello $RANK of $WORLD_SIZE local $LOCAL_RANK/$LOCAL_WORLD_SIZE at $MASTER_ADDR:$MASTER_PORT' \
  >"$WORK/out" 2>"$WORK/err"
rc=$?
if [ $rc -ne 0 ]; then
  fail "launch -n 3 of echo exited with $rc; stderr:"
  cat "$WORK/err" >&2
fi
for r in 0 1 2; do
  if ! grep -Eq "^\[rank $r\] hello $r of 3 local $r/3 at 127\.0\.0\.1:[0-9]+$" "$WORK/out"; then
    fail "no line '[rank $r] hello $r of 3 local $r/3 at 127.0.0.1:<port>' in the output:"
    cat "$WORK/out" >&2
  fi
done
lines=$(wc -l <"$WORK/out")
[ "$lines" -eq 3 ] || fail "expected 3 lines of output, got $lines"
ports=$(sed -E 's/.*:([0-9]+)$/\1/' "$WORK/out" | sort -u | wc -l)
[ "$ports" -eq 1 ] || fail "ranks saw $ports different MASTER_PORT values"
[ $failures -eq 0 ] && pass "3 ranks with their environment and prefixed output"

# ---- simulated hosts: --hosts 2 over 4 ranks --------------------------------------------------
before=$failures
"$WHOLESTORE" launch -n 4 --hosts 2 -- sh -c \
  'echo "$RANK local $LOCAL_RANK/$LOCAL_WORLD_SIZE host $WHOLESTORE_HOST_ID nccl $NCCL_HOSTID"' \
  >"$WORK/out" 2>"$WORK/err"
rc=$?
[ $rc -eq 0 ] || fail "launch -n 4 --hosts 2 exited with $rc: $(cat "$WORK/err")"
for r in 0 1 2 3; do
  h=$((r / 2))
  grep -Eq "^\[rank $r\] $r local $((r % 2))/2 host .+/sim$h nccl .+/sim$h\$" "$WORK/out" ||
    fail "rank $r: no 'local $((r % 2))/2 host .../sim$h' line: $(cat "$WORK/out")"
done
hosts=$(sed -E 's/.* host ([^ ]+) .*/\1/' "$WORK/out" | sort -u | wc -l)
[ "$hosts" -eq 2 ] || fail "expected 2 distinct host ids, got $hosts"
"$WHOLESTORE" launch -n 3 --hosts 2 -- true >/dev/null 2>"$WORK/err"
rc=$?
[ $rc -eq 2 ] && grep -q "does not divide" "$WORK/err" || fail "--hosts 2 with -n 3: exit $rc, $(cat "$WORK/err")"
"$WHOLESTORE" launch -n 2 --hosts 0 -- true >/dev/null 2>"$WORK/err"
rc=$?
[ $rc -eq 2 ] && grep -q "\-\-hosts '0'" "$WORK/err" || fail "--hosts 0: exit $rc, $(cat "$WORK/err")"
[ $failures -eq $before ] && pass "--hosts: per-host LOCAL_RANK, WHOLESTORE_HOST_ID, NCCL_HOSTID; bad values refused"

# ---- stderr, partial last lines and an explicit master address and port ----------------------
before=$failures
"$WHOLESTORE" launch -n 2 --master-addr 10.0.0.7 --master-port 4567 -- sh -c \
  'printf "err $RANK" >&2; printf "out $MASTER_ADDR:$MASTER_PORT"' >"$WORK/out" 2>"$WORK/err"
rc=$?
[ $rc -eq 0 ] || fail "launch -n 2 of printf exited with $rc"
for r in 0 1; do
  grep -qx "\[rank $r\] out 10.0.0.7:4567" "$WORK/out" || fail "rank $r: stdout without newline lost"
  grep -qx "\[rank $r\] err $r" "$WORK/err" || fail "rank $r: stderr line missing"
done
[ $failures -eq $before ] && pass "stderr, unterminated lines, --master-addr/--master-port"

# ---- a failing rank stops the others ---------------------------------------------------------
# The sleeping ranks record the pid of their `sleep` child, so that we can check that the whole
# process tree was stopped (and clean up exactly those, if not).
before=$failures
export LAUNCH_TEST_DIR="$WORK"
start=$(date +%s)
"$WHOLESTORE" launch -n 3 -- sh -c \
  'if [ "$RANK" = 1 ]; then sleep 0.3; exit 3; fi
   sleep 60 & echo $! >"$LAUNCH_TEST_DIR/sleep.$RANK"; wait' \
  >"$WORK/out" 2>"$WORK/err"
rc=$?
elapsed=$(($(date +%s) - start))
[ $rc -eq 3 ] || fail "launch with a rank exiting 3 returned $rc, expected 3"
[ $elapsed -lt 20 ] || fail "launch with a failing rank took ${elapsed}s; the others were not stopped"
grep -q "rank 1 exited with status 3" "$WORK/err" || {
  fail "no report of rank 1's exit status on stderr:"
  cat "$WORK/err" >&2
}
for r in 0 2; do
  if [ ! -s "$WORK/sleep.$r" ]; then
    fail "rank $r did not start its sleep"
    continue
  fi
  pid=$(cat "$WORK/sleep.$r")
  # A zombie is dead (where init does not reap orphans, one may linger).
  state=$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null)
  if [ -n "$state" ] && [ "$state" != Z ]; then
    fail "rank $r's 'sleep 60' (pid $pid) survived the launcher"
    kill -KILL "$pid" 2>/dev/null
  fi
done
[ $failures -eq $before ] && pass "a rank exiting 3 stops the job in ${elapsed}s with status 3"

# ---- a rank killed by a signal -----------------------------------------------------------------
before=$failures
"$WHOLESTORE" launch -n 2 -- sh -c 'if [ "$RANK" = 0 ]; then kill -KILL $$; fi; sleep 60' \
  >"$WORK/out" 2>"$WORK/err"
rc=$?
[ $rc -eq 137 ] || fail "launch with a rank killed by SIGKILL returned $rc, expected 137"
grep -q "rank 0 killed by signal 9" "$WORK/err" || fail "no report of rank 0's signal"
[ $failures -eq $before ] && pass "a rank killed by SIGKILL gives status 137"

# ---- a missing program: the launcher's own report, never a signal it did not get ---------------
# Every rank fails to exec at once; the launcher stops the ranks still starting with SIGTERM.
# A rank signalled between its fork and resetting the launcher's handlers ran the launcher's
# handler, which wrote the signal into the pipe it shares with the launcher: "received signal
# 15; passing it on to the ranks" in most runs of 8 ranks (issue 36).
before=$failures
spurious=0
for i in $(seq 1 20); do
  "$WHOLESTORE" launch -n 8 -- "$WORK/no-such-program" >"$WORK/out" 2>"$WORK/err"
  rc=$?
  [ $rc -eq 127 ] || fail "launch of a missing program, run $i: exit $rc, expected 127"
  grep -q "cannot run '$WORK/no-such-program': No such file or directory" "$WORK/err" ||
    fail "launch of a missing program, run $i: no 'cannot run' line: $(head -3 "$WORK/err")"
  grep -q "received signal" "$WORK/err" && spurious=$((spurious + 1))
done
[ $spurious -eq 0 ] || fail "launch of a missing program said 'received signal' in $spurious of 20 runs: $(grep "received signal" "$WORK/err")"
[ $failures -eq $before ] && pass "a missing program: exit 127, 'cannot run', no spurious signal (20 runs of 8 ranks)"

# ---- SIGKILL of the launcher takes its ranks down ------------------------------------------------
# The launcher cannot forward a SIGKILL: its ranks, and what they started, must die on their own
# within a few seconds.  Two jobs: shells that start a child and wait (a rank's own processes
# must go too), and sampling ranks spinning in collectives at full CPU.
gone_within() {  # <seconds> <pid...>: true when every pid is dead (or a zombie) in time
  local limit=$(($(date +%s%N) + $1 * 1000000000)) pid state alive
  shift
  while :; do
    alive=""
    for pid in "$@"; do
      state=$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null)
      [ -n "$state" ] && [ "$state" != Z ] && alive="$alive $pid"
    done
    [ -z "$alive" ] && return 0
    [ "$(date +%s%N)" -gt $limit ] && { echo "$alive"; return 1; }
    sleep 0.05
  done
}
before=$failures
rm -f "$WORK"/rank.* "$WORK"/child.*
"$WHOLESTORE" launch -n 2 -- sh -c 'echo $$ >"$LAUNCH_TEST_DIR/rank.$RANK"
  sleep 60 & echo $! >"$LAUNCH_TEST_DIR/child.$RANK"; wait' >"$WORK/out" 2>&1 &
launcher=$!
for _ in $(seq 1 100); do [ -s "$WORK/child.0" ] && [ -s "$WORK/child.1" ] && break; sleep 0.05; done
pids=$(cat "$WORK"/rank.* "$WORK"/child.* 2>/dev/null | tr '\n' ' ')
[ "$(wc -w <<<"$pids")" -eq 4 ] || fail "the shell ranks did not start: $(cat "$WORK/out")"
kill -KILL $launcher
wait $launcher 2>/dev/null
if ! left=$(gone_within 5 $pids); then
  fail "SIGKILL of launch left processes of its ranks running:$left"
  kill -KILL $left 2>/dev/null
fi
"$WHOLESTORE" launch -n 2 -- "$WHOLESTORE" sample --set sampler=cpu --set gen.num_nodes=20000 \
  --set gen.num_edges=200000 --set epochs=100000 --set graph.type=distributed --set threads=1 \
  >"$WORK/out" 2>&1 &
launcher=$!
for _ in $(seq 1 200); do grep -q "sample " "$WORK/out" && break; sleep 0.05; done
pids=$(pgrep -P $launcher | tr '\n' ' ')
[ "$(wc -w <<<"$pids")" -ge 2 ] || fail "the sampling ranks did not start: $(tail -3 "$WORK/out")"
kill -KILL $launcher
wait $launcher 2>/dev/null
if ! left=$(gone_within 5 $pids); then
  fail "SIGKILL of launch left sampling ranks running:$left"
  kill -KILL $left 2>/dev/null
fi
[ $failures -eq $before ] && pass "SIGKILL of launch takes its ranks and their children down"

# ---- ranks meet through the environment (needs the test binary next to the build's apps/) ----
TESTS_BIN="$(dirname "$WHOLESTORE")/../tests/wholememory_tests"
if [ -x "$TESTS_BIN" ]; then
  before=$failures
  "$WHOLESTORE" launch -n 3 -- "$TESTS_BIN" --gtest_filter='BootstrapLaunched.*' \
    >"$WORK/out" 2>"$WORK/err"
  rc=$?
  [ $rc -eq 0 ] || { fail "bootstrap_from_env under launch exited with $rc"; cat "$WORK/out" "$WORK/err" >&2; }
  for r in 0 1 2; do
    grep -q "^\[rank $r\] \[  PASSED  \] 1 test" "$WORK/out" ||
      fail "rank $r did not pass BootstrapLaunched (skipped or failed)"
  done
  [ $failures -eq $before ] && pass "3 launched ranks meet through bootstrap_from_env"
else
  echo "skip: no $TESTS_BIN, not testing bootstrap_from_env under launch"
fi

# ---- a second job on the same port is refused; the first goes on -------------------------------
# Job A samples a distributed graph for a few seconds.  Strangers then come to its port: a whole
# launched job, a rank started by hand without a token, one of another size with another token,
# and one that claims A's own token (a rank started twice).  Each must fail naming the problem,
# and A must finish as if nothing happened.
before=$failures
port=$((20000 + RANDOM % 20000))
"$WHOLESTORE" launch -n 2 --master-port $port -- "$WHOLESTORE" sample --set sampler=cpu \
  --set gen.num_nodes=20000 --set gen.num_edges=200000 --set gen.feature_dim=16 \
  --set batch_size=256 --set epochs=20 --set threads=1 --set graph.type=distributed \
  --set timeout_s=30 >"$WORK/job-a" 2>&1 &
job_a=$!
for _ in $(seq 1 300); do grep -q "sample 10%" "$WORK/job-a" && break; sleep 0.05; done
grep -q "sample 10%" "$WORK/job-a" || fail "job A did not start sampling: $(tail -3 "$WORK/job-a")"
stranger() {  # <name> <command...>: must exit 1 within 10 s with the refusal
  local name=$1
  shift
  timeout 10 "$@" >"$WORK/stranger" 2>&1
  local rc=$?
  [ $rc -eq 1 ] || fail "stranger ($name) exited $rc, expected 1: $(tail -3 "$WORK/stranger")"
  grep -q "WHOLESTORE_MASTER_PORT) of its own" "$WORK/stranger" ||
    fail "stranger ($name): no advice to use another MASTER_PORT: $(tail -3 "$WORK/stranger")"
}
demo=("$WHOLESTORE" demo --set memory.size_mib=1 --set timeout_s=5)
stranger "a launched job" "$WHOLESTORE" launch -n 2 --master-port $port -- "${demo[@]}"
stranger "rank 1 by hand, no token" env -u WHOLESTORE_JOB_TOKEN RANK=1 WORLD_SIZE=2 \
  MASTER_ADDR=127.0.0.1 MASTER_PORT=$port "${demo[@]}"
grep -q "refused this process (rank 1 of 2): it serves another job" "$WORK/stranger" ||
  fail "rank 1 without a token: not refused as another job's: $(tail -2 "$WORK/stranger")"
stranger "rank 2 of 3, another token" env WHOLESTORE_JOB_TOKEN=other RANK=2 WORLD_SIZE=3 \
  MASTER_ADDR=127.0.0.1 MASTER_PORT=$port "${demo[@]}"
token_a=$(tr '\0' '\n' <"/proc/$(pgrep -P "$job_a" | head -1)/environ" 2>/dev/null |
  sed -n 's/^WHOLESTORE_JOB_TOKEN=//p')
[ -n "$token_a" ] || fail "job A's ranks have no WHOLESTORE_JOB_TOKEN"
stranger "rank 1 again, A's token" env WHOLESTORE_JOB_TOKEN="$token_a" RANK=1 WORLD_SIZE=2 \
  MASTER_ADDR=127.0.0.1 MASTER_PORT=$port "${demo[@]}"
grep -q "have all connected already" "$WORK/stranger" ||
  fail "a rank started twice: not refused as a late joiner: $(tail -2 "$WORK/stranger")"
wait $job_a
rc=$?
[ $rc -eq 0 ] || fail "job A exited $rc after the strangers came: $(tail -4 "$WORK/job-a")"
grep -q "summary: 2 rank(s), cpu sampler, 1600 batches" "$WORK/job-a" ||
  fail "job A did not finish its batches: $(tail -3 "$WORK/job-a")"
[ $failures -eq $before ] && pass "strangers on a running job's port are refused; the job goes on"

# Every launch gives its ranks one token, and another launch another.
before=$failures
for i in 1 2; do
  "$WHOLESTORE" launch -n 2 -- sh -c 'echo "token $WHOLESTORE_JOB_TOKEN"' >"$WORK/token$i" 2>&1
done
tokens=$(sed -n 's/.*token //p' "$WORK/token1" "$WORK/token2" | sort | uniq -c | awk '{print $1}' | tr '\n' ' ')
[ "$tokens" = "2 2 " ] || fail "expected one token per launch shared by its 2 ranks, got counts '$tokens'"
grep -Eq "token [0-9a-f]{32}$" "$WORK/token1" || fail "the token is not 32 hex digits: $(cat "$WORK/token1")"
[ $failures -eq $before ] && pass "one fresh WHOLESTORE_JOB_TOKEN per launch"

# ---- usage errors ------------------------------------------------------------------------------
before=$failures
check_usage() {
  "$WHOLESTORE" launch "$@" >"$WORK/out" 2>"$WORK/err" </dev/null
  local rc=$?
  [ $rc -eq 2 ] || fail "launch $* exited with $rc, expected 2"
  grep -q "usage:" "$WORK/err" || fail "launch $*: no usage message on stderr"
}
check_usage
check_usage -- true
check_usage -n 0 -- true
check_usage -n abc -- true
check_usage -n 2
check_usage -n 2 --
check_usage -n 2 --bogus -- true
[ $failures -eq $before ] && pass "usage errors exit 2 with a usage message"

if [ $failures -ne 0 ]; then
  echo "launch_test: $failures check(s) failed" >&2
  exit 1
fi
echo "launch_test: all checks passed"
