#!/usr/bin/env bash
# The README's test command: installs what is missing, builds, runs the test suites: the C++
# ones (ctest), then the Python package's (pytest, python/tests) with the module built by
# WHOLESTORE_WITH_PYTHON=ON (scripts/python-env.sh finds or makes the Python it needs;
# WHOLESTORE_PYTHON=0 leaves Python out).  GPU tests skip themselves (with the reason) on a
# machine without a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
build_dir=${WHOLESTORE_BUILD_DIR:-build}
python=""
python_args=()
if [ "${WHOLESTORE_PYTHON:-1}" != 0 ]; then
  python=$(scripts/python-env.sh "$build_dir")
  python_args=(-DWHOLESTORE_WITH_PYTHON=ON "-DPython_EXECUTABLE=$python")
fi
scripts/build.sh "${python_args[@]}" "$@"
ctest --test-dir "$build_dir" --output-on-failure -j "${WHOLESTORE_TEST_JOBS:-2}" --timeout 600
if [ -n "$python" ]; then
  PYTHONPATH="$build_dir/python" PYTHONDONTWRITEBYTECODE=1 \
    "$python" -m pytest -q -rs -p no:cacheprovider python/tests
fi
