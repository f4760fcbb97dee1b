#!/usr/bin/env bash
# Sampling benchmark on a GPU machine, run from the repository root after a CUDA build:
#   scripts/bench-sample.sh [build-dir] [extra --set overrides...]
# Runs `wholestore bench configs/bench_sample.yaml` on 1, 2, 4 and 8 GPUs (one process each) as
# far as the visible GPUs allow; BENCH_GPU_COUNTS="1 2" picks the counts.  Tables and YAML
# reports go to $OUT when set, else <build-dir>/bench.
set -euo pipefail
export NCCL_NVLS_ENABLE=0 WHOLESTORE_CHECK_COLLECTIVES=0
cd "$(dirname "$0")/.."
build_dir=${1:-build}
shift || true
bin="$build_dir/apps/wholestore"
out=${OUT:-$build_dir/bench}
mkdir -p "$out"
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU [0-9]' || true)
echo "device: $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1) x $gpus"
echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)  date: $(date -u +%FT%TZ)"
for n in ${BENCH_GPU_COUNTS:-1 2 4 8}; do
  [ "$n" -le "$gpus" ] || continue
  visible=$(seq -s, 0 $((n - 1)))
  (set -x; CUDA_VISIBLE_DEVICES=$visible "$bin" launch -n "$n" -- "$bin" bench \
    configs/bench_sample.yaml "$@" --report "$out/sample-${n}gpu.yaml") |
    tee "$out/sample-${n}gpu.txt"
done
