#!/usr/bin/env bash
# The README's first command: installs what is missing, builds, runs the main job (neighbor
# sampling with feature gathering, `wholestore sample`) with its shipped default config on this
# host: 2 ranks unless WHOLESTORE_RANKS says otherwise; extra arguments go to the sample
# command (e.g. --set sampler=cpu, --report out.yaml).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
build_dir=${WHOLESTORE_BUILD_DIR:-build}
ranks=${WHOLESTORE_RANKS:-2}
exec "$build_dir/apps/wholestore" launch -n "$ranks" -- "$build_dir/apps/wholestore" sample configs/sample.yaml "$@"
