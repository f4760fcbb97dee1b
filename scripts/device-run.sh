#!/usr/bin/env bash
# One call on the device machine: the GPU check and the benchmarks, with every log packed into
# $OUT/logs.tgz (the device tool brings back at most 8 files) and the key tables copied beside.
#   scripts/device-run.sh check            # gpu-check.sh (build, cpu+gpu tests, demo)
#   scripts/device-run.sh bench [--set ..]  # scripts/bench-gather.sh on the existing build
#   scripts/device-run.sh all [--set ..]    # both
#   scripts/device-run.sh sample [--set ..] # scripts/bench-sample.sh on the existing build
#   scripts/device-run.sh check+sample      # gpu-check, then the sampling benchmark
#   scripts/device-run.sh embed [--set ..]  # build what the embedding needs, its CPU and GPU
#                                           # tests, then the embedding bench with the --set args
set -uo pipefail
cd "$(dirname "$0")/.."
# The tests read the shared real graphs from ../shared/data; only the checkout travels to the
# device machine, so a copy carried in .device-shared/ (git-ignored) is put in place.
if [ -d .device-shared/data ] && [ ! -e ../shared/data ]; then
  mkdir -p ../shared && cp -r .device-shared/data ../shared/
fi
# The device machine cannot reach PyPI: pip fails at once instead of retrying the network
# (the Python package's tests use the preinstalled nanobind, numpy, pytest, torch).
export PIP_NO_INDEX=1 PIP_DISABLE_PIP_VERSION_CHECK=1
what=${1:-all}
shift || true
final=${OUT:-/tmp/wholestore-out}
work=$(mktemp -d)
mkdir -p "$final"
rc=0
if [ "$what" = check ] || [ "$what" = all ] || [ "$what" = check+sample ]; then
  OUT="$work/check" timeout "${CHECK_TIMEOUT:-330}" scripts/gpu-check.sh >"$work/gpu-check.out" 2>&1 || rc=1
  sed -n '/==== gpu-check summary/,$p' "$work/gpu-check.out"
  grep -E '\*\*\*(Failed|Exception|Timeout)' "$work/gpu-check.out" | head -20
fi
if [ "$what" = bench ] || [ "$what" = all ]; then
  OUT="$work/bench" timeout "${BENCH_TIMEOUT:-250}" scripts/bench-gather.sh build "$@" \
    >"$work/bench.out" 2>&1 || rc=1
  cp "$work"/bench/*.txt "$final"/ 2>/dev/null
  tail -n 5 "$work/bench.out"
fi
if [ "$what" = sample ] || [ "$what" = check+sample ]; then
  OUT="$work/sample" timeout "${SAMPLE_TIMEOUT:-250}" scripts/bench-sample.sh build "$@" \
    >"$work/sample.out" 2>&1 || rc=1
  cp "$work"/sample/*.txt "$final"/ 2>/dev/null
  tail -n 30 "$work/sample.out"
fi
if [ "$what" = embed ]; then
  { cmake -S . -B build -G Ninja >/dev/null &&
    cmake --build build -j "$(nproc)" --target wholestore embedding_tests embedding_gpu_tests; } \
    >"$work/build.out" 2>&1 || { tail -n 30 "$work/build.out"; rc=1; }
  for t in embedding_tests embedding_gpu_tests; do
    timeout "${TEST_TIMEOUT:-200}" "build/tests/$t" >"$work/$t.out" 2>&1 || rc=1
    echo "== $t: $(tail -n 1 "$work/$t.out")"
    grep -E '^\[  (FAILED|SKIPPED) ' "$work/$t.out" | head -20
  done
  timeout "${BENCH_TIMEOUT:-250}" build/apps/wholestore bench configs/bench_embedding.yaml "$@" \
    >"$final/bench_embedding.txt" 2>&1 || rc=1
  cat "$final/bench_embedding.txt"
fi
tar czf "$final/logs.tgz" -C "$work" . 2>/dev/null
exit $rc
