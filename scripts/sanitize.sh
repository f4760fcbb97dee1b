#!/usr/bin/env bash
# Builds the host-only configuration (-DWHOLESTORE_WITH_CUDA=OFF) under sanitizers, each in its
# own build directory, and runs the CPU suite (ctest -L cpu) there:
#   scripts/sanitize.sh             # ASan+UBSan in build-asan/, then TSan in build-tsan/
#   scripts/sanitize.sh address     # ASan+UBSan only
#   scripts/sanitize.sh thread      # TSan only
#   scripts/sanitize.sh thread -R Bootstrap   # arguments after the kind go to ctest
# Logs: <build dir>/sanitize.log.  Ends with a summary; exits non-zero when a build or a test
# fails or any process reported (see below).  RelWithDebInfo: optimised like the shipped build,
# with line numbers in the reports.  Slow on 2 cores: 10-20 minutes of build each, then about
# 5 (ASan) and 13 (TSan) minutes of tests.  What the runs found: docs/reliability.md,
# "Sanitizers".
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)

kinds=(address thread)
if [ $# -gt 0 ] && [ "${1#-}" = "$1" ]; then
  case "$1" in
    address | thread) kinds=("$1") ;;
    *)
      echo "usage: $0 [address|thread] [ctest arguments...]" >&2
      exit 2
      ;;
  esac
  shift
fi
ctest_args=("$@")

scripts/setup.sh
jobs=${WHOLESTORE_JOBS:-$(nproc)}
test_jobs=${WHOLESTORE_TEST_JOBS:-2}

# ASan, LSan and TSan reports go to files under <build dir>/sanitizer-reports/ (one per process
# that had one), so that a report is seen even where a test expects a failing exit code or a
# rank's output is not shown.  UBSan inside an ASan build ignores log_path (GCC 12) and writes
# to stderr: its "runtime error:" lines are looked for in every test's output (ctest's
# LastTest.log).  A report also stops the process (ASan, UBSan: exit 86) or sets its exit code
# (TSan: 66).
user_asan=${ASAN_OPTIONS:-} user_ubsan=${UBSAN_OPTIONS:-} user_tsan=${TSAN_OPTIONS:-}
set_options() {
  local reports=$1
  export ASAN_OPTIONS="detect_leaks=1:check_initialization_order=1:strict_init_order=1:detect_stack_use_after_return=1:exitcode=86:log_path=$reports/asan:$user_asan"
  export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:exitcode=86:log_path=$reports/ubsan:$user_ubsan"
  export TSAN_OPTIONS="second_deadlock_stack=1:log_path=$reports/tsan:$user_tsan"
  # Reports in code that is not ours, each with the reason it is not ours.
  local supp file var
  for supp in lsan tsan ubsan; do
    file=$repo/scripts/sanitize-$supp.supp
    [ -f "$file" ] || continue
    var=$(echo "$supp" | tr a-z A-Z)_OPTIONS
    export "$var=suppressions=$file:${!var:-}"
  done
}

summary=()
failed=0
for kind in "${kinds[@]}"; do
  case "$kind" in
    address) dir=build-asan sanitize=address,undefined ;;
    thread) dir=build-tsan sanitize=thread ;;
  esac
  log=$dir/sanitize.log
  mkdir -p "$dir"
  echo "==== $sanitize: configure and build $dir (log: $log)"
  if ! {
    cmake -S . -B "$dir" -G Ninja -DWHOLESTORE_WITH_CUDA=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DWHOLESTORE_SANITIZE="$sanitize" && cmake --build "$dir" -j "$jobs"
  } >"$log" 2>&1; then
    grep -E "error:|FAILED:" "$log" | head -n 20 || true
    summary+=("$sanitize: BUILD FAILED (see $log)")
    failed=1
    continue
  fi
  reports=$repo/$dir/sanitizer-reports
  rm -rf "$reports"
  mkdir -p "$reports"
  set_options "$reports"
  echo "==== $sanitize: ctest -L cpu in $dir (reports: $reports)"
  set +e
  ctest --test-dir "$dir" -L cpu --output-on-failure -j "$test_jobs" --timeout 1200 \
    "${ctest_args[@]}" 2>&1 | tee -a "$log"
  rc=${PIPESTATUS[0]}
  set -e
  result=$(grep -E 'tests passed, [0-9]+ tests? failed out of [0-9]+' "$log" | tail -n 1)
  report_files=$(find "$reports" -type f | wc -l)
  if [ "$report_files" -gt 0 ]; then
    echo "==== $sanitize: $report_files process(es) reported; the first lines of each:"
    for f in "$reports"/*; do
      echo "-- $f"
      grep -m 3 -E 'ERROR|WARNING|runtime error|SUMMARY' "$f" || head -n 3 "$f"
    done
    failed=1
  fi
  ub_lines=$(grep -hE 'runtime error: ' "$dir/Testing/Temporary/LastTest.log" 2>/dev/null |
    sort -u || true)
  ub_count=0
  if [ -n "$ub_lines" ]; then
    ub_count=$(printf '%s\n' "$ub_lines" | wc -l)
    echo "==== $sanitize: UBSan in the test output ($dir/Testing/Temporary/LastTest.log):"
    printf '%s\n' "$ub_lines" | head -n 20
    failed=1
  fi
  summary+=("$sanitize: ${result:-no ctest result}; $report_files process(es) with reports in $reports, $ub_count distinct UBSan lines in the test output (log $log)")
  [ "$rc" -ne 0 ] && failed=1
done

echo
echo "==== sanitize summary ===="
printf '%s\n' "${summary[@]}"
if [ "$failed" -ne 0 ]; then
  echo "RESULT: FAILED"
  exit 1
fi
echo "RESULT: OK"
