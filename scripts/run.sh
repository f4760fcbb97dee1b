#!/usr/bin/env bash
# The README's first command: installs what is missing, builds, runs the main job (neighbor
# sampling with feature gathering, `wholestore sample`) with its shipped default config on this
# host; extra arguments go to the sample command (e.g. --set sampler=cpu, --report out.yaml).
# Ranks: one per visible GPU, or 2 CPU ranks without a GPU; WHOLESTORE_RANKS=N overrides (more
# ranks than GPUs is fine: ranks share GPUs).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
build_dir=${WHOLESTORE_BUILD_DIR:-build}

# Visible GPUs: nvidia-smi's list, narrowed by CUDA_VISIBLE_DEVICES when that is set.
gpus=0
if command -v nvidia-smi >/dev/null 2>&1; then
  gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU [0-9]' || true)
fi
if [ -n "${CUDA_VISIBLE_DEVICES+set}" ] && [ "$gpus" -gt 0 ]; then
  visible=$(printf '%s' "$CUDA_VISIBLE_DEVICES" | tr ',' '\n' | grep -c . || true)
  [ "$visible" -lt "$gpus" ] && gpus=$visible
fi
if [ -n "${WHOLESTORE_RANKS:-}" ]; then
  ranks=$WHOLESTORE_RANKS
  echo "run.sh: $ranks rank(s) (WHOLESTORE_RANKS), $gpus GPU(s) visible"
elif [ "$gpus" -gt 0 ]; then
  ranks=$gpus
  echo "run.sh: $gpus GPU(s) visible: $ranks rank(s), one per GPU (WHOLESTORE_RANKS=N to change)"
else
  ranks=2
  echo "run.sh: no GPU visible: 2 CPU ranks (WHOLESTORE_RANKS=N to change)"
fi
exec "$build_dir/apps/wholestore" launch -n "$ranks" -- "$build_dir/apps/wholestore" sample configs/sample.yaml "$@"
