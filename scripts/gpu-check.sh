#!/usr/bin/env bash
# GPU check, run from the repository root on a machine with GPUs:
#   scripts/gpu-check.sh                                 # build and run every test (cpu and gpu)
#   WHOLESTORE_BIG_TEST_GIB=64 scripts/gpu-check.sh      # ... then the big allocation test
#   scripts/gpu-check.sh -DWHOLESTORE_WERROR=OFF         # extra arguments go to CMake
# Configures a CUDA Release build into build/ (the README commands' build directory), builds
# with every core, then runs the README's two commands exactly as a user would: scripts/test.sh
# (every cpu and gpu test) and scripts/run.sh, with its default rank count (one per GPU) and
# with one rank more than there are GPUs (ranks sharing a GPU); then the demo and the sample app
# on every memory type, and a check that distributed memory with ranks sharing a GPU is refused
# up front with the way out.  With WHOLESTORE_BIG_TEST_GIB set, also the big continuous
# allocation test over two GPUs.  Logs go to $OUT when set, else build/logs.  Prints a summary
# at the end, also when a step fails, and exits non-zero on any failure.
set -euo pipefail

# NVLink multicast (NVLS) stays off on the shared GPU machines.
# GPUs are expected here: a CUDA error fails the GPU tests instead of skipping them.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 WHOLESTORE_EXPECT_GPU=1

# nvcc is not always on PATH; CMake's CUDA detection looks there first.
if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH="/usr/local/cuda/bin:$PATH"
fi

cd "$(dirname "$0")/.."
build_dir=build
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
readme_status="not run"
readme_lines=""
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
  echo "test.sh:    $test_status${test_counts:+ ($test_counts)}"
  echo "run.sh:     $readme_status"
  [ -n "$readme_lines" ] && printf '%s\n' "$readme_lines" | sed 's/^/            /'

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

echo "==== wholestore --version (log: $log_dir/version.txt) ===="
# What produced every figure below: commit, build, CUDA/NCCL, driver and the GPUs seen.
"$build_dir/apps/wholestore" --version | tee "$log_dir/version.txt" || true

echo "==== README test command: scripts/test.sh (log: $log_dir/test.log) ===="
# Exactly as a user runs it: it re-runs setup and the (no-op) build, then every test.
set +e
# ctest with 4 jobs here (16 cores), so the check fits one 10-minute device call: the GPU
# tests hold the `gpu` resource lock (one at a time: some compare the GPU's free memory before
# and after), CPU tests run beside them (more jobs made the peer-fault timing tests miss their
# one-timeout bound under load).
WHOLESTORE_BUILD_DIR="$build_dir" WHOLESTORE_TEST_JOBS=${WHOLESTORE_TEST_JOBS:-4} \
  env -u WHOLESTORE_BIG_TEST_GIB scripts/test.sh 2>&1 |
  tee "$log_dir/test.log"
ctest_rc=${PIPESTATUS[0]}
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
  test_status="FAILED (exit $ctest_rc)"
  failed=1
fi

# The README's main job, as shipped: the default rank count, then more ranks than GPUs.
echo "==== README main job: scripts/run.sh (log: $log_dir/run.log) ===="
readme_status="ok"
: >"$log_dir/run.log"
for ranks in default $((gpu_count + 1)); do
  set +e
  if [ "$ranks" = default ]; then
    WHOLESTORE_BUILD_DIR="$build_dir" scripts/run.sh >>"$log_dir/run.log" 2>&1
  else
    WHOLESTORE_BUILD_DIR="$build_dir" WHOLESTORE_RANKS=$ranks scripts/run.sh \
      >>"$log_dir/run.log" 2>&1
  fi
  rc=$?
  set -e
  chose=$(grep -E '^run.sh:' "$log_dir/run.log" | tail -n 1)
  line=$(grep -E 'summary' "$log_dir/run.log" | tail -n 1 | tr -s ' ')
  readme_lines="$readme_lines$ranks ranks: $chose | $line"$'\n'
  if [ "$rc" -ne 0 ]; then
    readme_status="FAILED (ranks $ranks, exit $rc)"
    failed=1
  fi
done
# Distributed memory with ranks sharing a GPU cannot use NCCL: it must stop before any work,
# with one message naming the way out, and never from inside NCCL.
set +e
timeout 120 "$build_dir/apps/wholestore" launch -n $((gpu_count + 1)) -- \
  "$build_dir/apps/wholestore" sample configs/sample.yaml --set sampler=gpu \
  --set graph.type=distributed >"$log_dir/run-shared-distributed.log" 2>&1
rc=$?
set -e
if [ "$rc" -eq 0 ] || ! grep -q 'needs one GPU per rank' "$log_dir/run-shared-distributed.log" ||
  grep -qi 'duplicate gpu' "$log_dir/run-shared-distributed.log"; then
  readme_status="FAILED (distributed with shared GPUs: exit $rc, see run-shared-distributed.log)"
  failed=1
else
  readme_lines="${readme_lines}distributed, $((gpu_count + 1)) ranks: refused up front (exit $rc)"
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
  echo "==== demo on device memory, $gpu_count and $((gpu_count + 1)) rank(s) (log: $log_dir/demo.log) ===="
  demo_status="ok"
  : >"$log_dir/demo.log"
  # One rank per GPU, then one rank more than the GPUs (ranks sharing a GPU).
  for ranks in "$gpu_count" $((gpu_count + 1)); do
    for type in continuous chunked distributed; do
      set +e
      "$build_dir/apps/wholestore" launch -n "$ranks" -- "$build_dir/apps/wholestore" demo \
        configs/demo.yaml --set memory.location=device --set memory.type=$type \
        --set memory.size_mib=4096 >>"$log_dir/demo.log" 2>&1
      rc=$?
      set -e
      line=$(grep -E 'create|summary' "$log_dir/demo.log" | tail -n 2 | tr -s ' ' | paste -sd' ')
      demo_lines="$demo_lines$type, $ranks rank(s): $line"$'\n'
      if [ "$rc" -ne 0 ]; then
        demo_status="FAILED ($type, $ranks ranks, exit $rc)"
        failed=1
      fi
    done
  done
  demo_lines=${demo_lines%$'\n'}

  echo "==== sample app on the GPUs, $gpu_count and $((gpu_count + 1)) rank(s) (log: $log_dir/sample.log) ===="
  : >"$log_dir/sample.log"
  for combo in continuous:device:1 chunked:host:1 distributed:device:1 continuous:device:2 \
    chunked:device:2; do
    type=${combo%%:*}
    loc=${combo#*:}
    loc=${loc%%:*}
    # :2 runs one rank more than the GPUs (ranks sharing a GPU).
    ranks=$gpu_count
    [ "${combo##*:}" = 2 ] && ranks=$((gpu_count + 1))
    set +e
    "$build_dir/apps/wholestore" launch -n "$ranks" -- "$build_dir/apps/wholestore" sample \
      configs/sample.yaml --set sampler=gpu --set graph.type=$type --set graph.location=$loc \
      >>"$log_dir/sample.log" 2>&1
    rc=$?
    set -e
    line=$(grep -E 'summary' "$log_dir/sample.log" | tail -n 1 | tr -s ' ')
    demo_lines="$demo_lines"$'\n'"sample $type/$loc, $ranks rank(s): $line"
    if [ "$rc" -ne 0 ]; then
      demo_status="FAILED (sample $type/$loc, $ranks ranks, exit $rc)"
      failed=1
    fi
  done
fi
completed=1
