#!/usr/bin/env bash
# The README's test command: installs what is missing, builds, runs the test suites: the C++
# ones (ctest), then the Python package's (pytest, python/tests) with the module built by
# WHOLESTORE_WITH_PYTHON=ON (scripts/python-env.sh finds or makes the Python it needs;
# WHOLESTORE_PYTHON=0 leaves Python out, =1 fails when Python cannot be set up, the default says
# so loudly and goes on without it: a machine without PyPI or apt).  GPU tests skip themselves
# (with the reason) on a machine without a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
build_dir=${WHOLESTORE_BUILD_DIR:-build}
python=""
python_args=()
if [ "${WHOLESTORE_PYTHON:-auto}" != 0 ]; then
  if python=$(scripts/python-env.sh "$build_dir"); then
    python_args=(-DWHOLESTORE_WITH_PYTHON=ON "-DPython_EXECUTABLE=$python")
  elif [ "${WHOLESTORE_PYTHON:-auto}" = 1 ]; then
    exit 1
  else
    python=""
    echo "test.sh: WARNING: the Python package's tests will NOT run (scripts/python-env.sh" \
      "failed; WHOLESTORE_PYTHON=1 makes this an error)" >&2
  fi
fi
scripts/build.sh "${python_args[@]}" "$@"
ctest --test-dir "$build_dir" --output-on-failure -j "${WHOLESTORE_TEST_JOBS:-2}" --timeout 600
if [ -n "$python" ]; then
  PYTHONPATH="$build_dir/python" PYTHONDONTWRITEBYTECODE=1 \
    "$python" -m pytest -q -rs -p no:cacheprovider python/tests
fi
