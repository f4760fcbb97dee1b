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
