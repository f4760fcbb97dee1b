#!/usr/bin/env bash
# The README's test command: installs what is missing, builds, runs the test suites.
# GPU tests skip themselves (with the reason) on a machine without a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh "$@"
build_dir=${WHOLESTORE_BUILD_DIR:-build}
ctest --test-dir "$build_dir" --output-on-failure -j "${WHOLESTORE_TEST_JOBS:-2}" --timeout 600
