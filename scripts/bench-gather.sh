#!/usr/bin/env bash
# Gather/scatter benchmark on a GPU machine, run from the repository root after a CUDA build:
#   scripts/bench-gather.sh [build-dir] [extra --set overrides...]
# Runs `wholestore bench configs/bench_gather.yaml` on one GPU, then on 2, 4 and 8 GPUs (one
# process each) as far as the GPUs visible allow; BENCH_GPU_COUNTS="1 2" picks the counts.  Tables and YAML reports go to $OUT when set, else
# <build-dir>/bench.  Collective argument checks are off (WHOLESTORE_CHECK_COLLECTIVES=0) so
# that distributed memory is timed without the bootstrap round trip of each NCCL call.
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
counts=${BENCH_GPU_COUNTS:-1 2 4 8}
for n in $counts; do
  [ "$n" -le "$gpus" ] || continue
  visible=$(seq -s, 0 $((n - 1)))
  if [ "$n" -eq 1 ]; then
    (set -x; CUDA_VISIBLE_DEVICES=0 "$bin" bench configs/bench_gather.yaml "$@" \
      --report "$out/bench-1gpu.yaml") | tee "$out/bench-1gpu.txt"
  else
    (set -x; CUDA_VISIBLE_DEVICES=$visible "$bin" launch -n "$n" -- "$bin" bench \
      configs/bench_gather.yaml "$@" --report "$out/bench-${n}gpu.yaml") |
      tee "$out/bench-${n}gpu.txt"
  fi
done
