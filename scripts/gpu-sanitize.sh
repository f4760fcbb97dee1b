#!/usr/bin/env bash
# compute-sanitizer over the project's GPU tests, on a machine with a GPU, from the repository
# root with a built build/ (scripts/gpu-check.sh or scripts/device-two-gpu.sh builds it):
#   scripts/gpu-sanitize.sh                         # memcheck over the default list below
#   TOOL=racecheck scripts/gpu-sanitize.sh          # another tool (memcheck, racecheck, initcheck)
#   scripts/gpu-sanitize.sh embedding_gpu_tests:'SgnsGpu.*'   # BINARY:GTEST_FILTER pairs
# Each case runs `compute-sanitizer --tool TOOL --error-exitcode 86 build/tests/BINARY
# --gtest_filter=FILTER` (the tests' forked children are followed); logs under $OUT (else
# build/logs).  Prints one line per case with the sanitizer's error count, and exits non-zero
# when a case reports errors or fails.  The default list keeps to small shapes: under memcheck
# kernels run 10-100x slower.
set -uo pipefail
cd "$(dirname "$0")/.."
tool=${TOOL:-memcheck}
san=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
[ -x "$san" ] || { echo "gpu-sanitize: compute-sanitizer not found" >&2; exit 2; }
logs=${OUT:-build/logs}/sanitize-$tool
mkdir -p "$logs"
cases=("$@")
if [ ${#cases[@]} -eq 0 ]; then
  cases=(
    "embedding_gpu_tests:SgnsGpu.FromTables*"
    "embedding_gpu_tests:GpuApply.DuplicatesAreSummedLeftToRightInGlobalBatchOrder:GpuApply.LongRuns*"
    "graph_gpu_tests:GpuWindowPairs.*:GpuNegatives.*"
    "wholememory_gpu_tests:AllTypes/GpuGather.EveryDtypePairAgainstTheReference/gpus1_*_device"
  )
fi
rc=0
for c in "${cases[@]}"; do
  bin=${c%%:*}
  filter=${c#*:}  # gtest filters use ':' themselves: everything after the first one
  [ "$filter" = "$c" ] && filter='*'
  log="$logs/$(printf '%s' "$c" | tr -c 'A-Za-z0-9_.-' '_').log"
  timeout "${CASE_TIMEOUT:-120}" "$san" --tool "$tool" --error-exitcode 86 \
    "build/tests/$bin" "--gtest_filter=$filter" >"$log" 2>&1
  status=$?
  errors=$(grep -Eo 'ERROR SUMMARY: [0-9]+' "$log" | awk '{s += $3} END {print s + 0}')
  tests=$(grep -Eo 'PASSED  \] [0-9]+' "$log" | tail -n 1 | awk '{print $3}')
  echo "$tool $bin '$filter': exit $status, ${tests:-0} test(s) passed, $errors error(s) ($log)"
  [ "$status" -ne 0 ] || [ "$errors" -ne 0 ] && rc=1
done
exit $rc
