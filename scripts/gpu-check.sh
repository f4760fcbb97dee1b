#!/usr/bin/env bash
# GPU check, run from the repository root on a machine with GPUs:
#   scripts/gpu-check.sh                                 # build and run every test (cpu and gpu)
#   WHOLESTORE_BIG_TEST_GIB=64 scripts/gpu-check.sh      # ... then the big allocation test
#   scripts/gpu-check.sh -DWHOLESTORE_WERROR=OFF         # extra arguments go to CMake
# Configures a CUDA Release build into build-gpu, builds with every core, runs the whole ctest
# suite one test at a time, then (when WHOLESTORE_BIG_TEST_GIB is set) the big continuous
# allocation test over two GPUs.  Logs go to $OUT when set, else build-gpu/logs.  Prints a
# summary at the end, also when a step fails, and exits non-zero on any failure.
set -euo pipefail

# NVLink multicast (NVLS) stays off on the shared GPU machines.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1

# nvcc is not always on PATH; CMake's CUDA detection looks there first.
if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH="/usr/local/cuda/bin:$PATH"
fi

cd "$(dirname "$0")/.."
build_dir=build-gpu
log_dir=${OUT:-$build_dir/logs}
mkdir -p "$log_dir"
log_dir=$(cd "$log_dir" && pwd)
jobs=$(nproc)

configure_status="not run"
build_status="not run"
test_status="not run"
test_counts=""
big_status="not run (WHOLESTORE_BIG_TEST_GIB unset)"
big_lines=""
demo_status="not run"
demo_lines=""
gpu_status="unknown"
failed=0
completed=0

summary() {
  local rc=$?
  [ "$rc" -ne 0 ] && failed=1
  # Stopped before the end (a timeout's SIGTERM, say): what did not run is not a pass.
  if [ "$completed" -ne 1 ]; then
    failed=1
    echo "gpu-check did not run to the end (stopped at: ctest $test_status)"
  fi
  echo
  echo "==== gpu-check summary ===="
  echo "GPUs:       $gpu_status"
  echo "configure:  $configure_status"
  echo "build:      $build_status"
  echo "ctest:      $test_status${test_counts:+ ($test_counts)}"
  echo "big test:   $big_status"
  [ -n "$big_lines" ] && printf '%s\n' "$big_lines" | sed 's/^/            /'
  echo "demo, sample: $demo_status"
  [ -n "$demo_lines" ] && printf '%s\n' "$demo_lines" | sed 's/^/            /'
  echo "logs:       $log_dir"
  if [ "$failed" -ne 0 ]; then
    echo "RESULT: FAILED"
    exit 1
  fi
  echo "RESULT: OK"
}
trap summary EXIT

echo "==== machine ===="
gpu_list=$(nvidia-smi -L 2>&1) || gpu_list="nvidia-smi -L failed: $gpu_list"
echo "$gpu_list"
gpu_count=$(printf '%s\n' "$gpu_list" | grep -c '^GPU [0-9]' || true)
if [ "$gpu_count" -eq 0 ]; then
  # Everything would skip and look green: a GPU check without a GPU is a failure.
  gpu_status="NONE VISIBLE (the GPU tests skip; this check fails)"
  failed=1
else
  gpu_status="$gpu_count"
fi
echo "nproc: $jobs"
nvcc --version 2>/dev/null | tail -n 1 || echo "nvcc not on PATH"
echo "NCCL_NVLS_ENABLE=$NCCL_NVLS_ENABLE"

generator=()
if command -v ninja >/dev/null 2>&1; then generator=(-G Ninja); fi

echo "==== configure (log: $log_dir/configure.log) ===="
if cmake -S . -B "$build_dir" "${generator[@]}" -DWHOLESTORE_WITH_CUDA=ON \
  -DCMAKE_BUILD_TYPE=Release "$@" >"$log_dir/configure.log" 2>&1; then
  configure_status="ok"
  grep -E "^-- wholestore:" "$log_dir/configure.log" || true
else
  configure_status="FAILED"
  tail -n 40 "$log_dir/configure.log"
  exit 1
fi

echo "==== build with $jobs jobs (log: $log_dir/build.log) ===="
build_start=$(date +%s)
if cmake --build "$build_dir" -j "$jobs" >"$log_dir/build.log" 2>&1; then
  build_status="ok in $(($(date +%s) - build_start)) s"
else
  build_status="FAILED"
  grep -E "error:|FAILED:" "$log_dir/build.log" | head -n 40 || true
  tail -n 20 "$log_dir/build.log"
  exit 1
fi

echo "==== ctest: cpu label in parallel, gpu label one test at a time (log: $log_dir/test.log) ===="
# The big test runs on its own below, not inside ctest.  GPU tests run one at a time: several
# take every visible GPU.  GPU_CHECK_REGEX=... runs only the tests it matches.
set +e
env -u WHOLESTORE_BIG_TEST_GIB ctest --test-dir "$build_dir" --output-on-failure -L cpu ${GPU_CHECK_REGEX:+-R "$GPU_CHECK_REGEX"} \
  -j "$jobs" --timeout 900 --output-junit "$log_dir/ctest-cpu-junit.xml" 2>&1 |
  tee "$log_dir/test.log"
cpu_rc=${PIPESTATUS[0]}
env -u WHOLESTORE_BIG_TEST_GIB ctest --test-dir "$build_dir" --output-on-failure -L gpu -j1 ${GPU_CHECK_REGEX:+-R "$GPU_CHECK_REGEX"} \
  --timeout 900 --output-junit "$log_dir/ctest-gpu-junit.xml" 2>&1 | tee -a "$log_dir/test.log"
gpu_rc=${PIPESTATUS[0]}
ctest_rc=$((cpu_rc | gpu_rc))
set -e
passed=$(grep -cE '^ *[0-9]+/[0-9]+ Test +#[0-9]+: .* Passed' "$log_dir/test.log" || true)
skipped=$(grep -cE '^ *[0-9]+/[0-9]+ Test +#[0-9]+: .*Skipped' "$log_dir/test.log" || true)
failed_tests=$(grep -cE '^ *[0-9]+/[0-9]+ Test +#[0-9]+: .*\*\*\*(Failed|Exception|Timeout|Not Run)' \
  "$log_dir/test.log" || true)
test_counts="$passed passed, $failed_tests failed, $skipped skipped"
total_line=$(grep -E 'tests passed, [0-9]+ tests? failed out of [0-9]+' "$log_dir/test.log" |
  tr '\n' ';' || true)
[ -n "$total_line" ] && test_counts="$test_counts; ctest: $total_line"
if [ "$ctest_rc" -eq 0 ]; then
  test_status="ok"
else
  test_status="FAILED (ctest exit $ctest_rc)"
  failed=1
fi

if [ -n "${WHOLESTORE_BIG_TEST_GIB:-}" ]; then
  echo "==== big test: $WHOLESTORE_BIG_TEST_GIB GiB continuous over 2 GPUs (log: $log_dir/big-test.log) ===="
  set +e
  "$build_dir/tests/wholememory_gpu_tests" --gtest_filter='DeviceMemoryBig.*' 2>&1 |
    tee "$log_dir/big-test.log"
  big_rc=${PIPESTATUS[0]}
  set -e
  big_lines=$(grep -E '^(create |rank [0-9]+: )' "$log_dir/big-test.log" || true)
  if [ "$big_rc" -ne 0 ]; then
    big_status="FAILED (exit $big_rc)"
    failed=1
  elif grep -q '\[  SKIPPED \]' "$log_dir/big-test.log"; then
    big_status="skipped: $(grep -A1 'Skipped' "$log_dir/big-test.log" | tail -n 1)"
  else
    big_status="ok"
  fi
fi

# The main job on device memory, one process per GPU, every type.
if [ "$gpu_count" -gt 0 ]; then
  echo "==== demo on device memory, $gpu_count rank(s) (log: $log_dir/demo.log) ===="
  demo_status="ok"
  : >"$log_dir/demo.log"
  for type in continuous chunked distributed; do
    set +e
    "$build_dir/apps/wholestore" launch -n "$gpu_count" -- "$build_dir/apps/wholestore" demo \
      configs/demo.yaml --set memory.location=device --set memory.type=$type \
      --set memory.size_mib=4096 >>"$log_dir/demo.log" 2>&1
    rc=$?
    set -e
    line=$(grep -E 'create|summary' "$log_dir/demo.log" | tail -n 2 | tr -s ' ' | paste -sd' ')
    demo_lines="$demo_lines$type: $line"$'\n'
    if [ "$rc" -ne 0 ]; then
      demo_status="FAILED ($type, exit $rc)"
      failed=1
    fi
  done
  demo_lines=${demo_lines%$'\n'}

  echo "==== sample app on the GPUs, $gpu_count rank(s) (log: $log_dir/sample.log) ===="
  : >"$log_dir/sample.log"
  for combo in continuous:device chunked:host distributed:device; do
    type=${combo%%:*}
    loc=${combo##*:}
    set +e
    "$build_dir/apps/wholestore" launch -n "$gpu_count" -- "$build_dir/apps/wholestore" sample \
      configs/sample.yaml --set sampler=gpu --set graph.type=$type --set graph.location=$loc \
      >>"$log_dir/sample.log" 2>&1
    rc=$?
    set -e
    line=$(grep -E 'summary' "$log_dir/sample.log" | tail -n 1 | tr -s ' ')
    demo_lines="$demo_lines"$'\n'"sample $type/$loc: $line"
    if [ "$rc" -ne 0 ]; then
      demo_status="FAILED (sample $type/$loc, exit $rc)"
      failed=1
    fi
  done
fi
completed=1
