#!/usr/bin/env bash
# The README's first command: installs what is missing, builds, runs the main job with its
# shipped default config on this host (2 ranks when launched without arguments).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
build_dir=${WHOLESTORE_BUILD_DIR:-build}
ranks=${WHOLESTORE_RANKS:-2}
exec "$build_dir/apps/wholestore" launch -n "$ranks" -- "$build_dir/apps/wholestore" demo configs/demo.yaml "$@"
