#!/usr/bin/env bash
# Configures and builds wholestore into ./build (or $WHOLESTORE_BUILD_DIR).
# Extra arguments go to CMake, e.g. -DWHOLESTORE_WITH_CUDA=OFF.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${WHOLESTORE_BUILD_DIR:-build}
jobs=${WHOLESTORE_JOBS:-$(nproc)}
cmake -S . -B "$build_dir" -G Ninja "$@" >/dev/null
cmake --build "$build_dir" -j "$jobs"
