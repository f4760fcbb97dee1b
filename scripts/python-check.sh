#!/usr/bin/env bash
# The Python package on a GPU machine without PyPI, run from the repository root:
#   scripts/python-check.sh                       # build the module, run every Python test
#   scripts/python-check.sh -DWHOLESTORE_WERROR=OFF   # extra arguments go to CMake
# Uses python3 as it is (PYTHON=... for another): it must have nanobind, numpy and pytest;
# torch and CuPy, when present, run the torch and GPU tests.  Configures build/ (or
# $WHOLESTORE_BUILD_DIR) with WHOLESTORE_WITH_PYTHON=ON, builds only the module and the
# libraries under it, and runs pytest with WHOLESTORE_REQUIRE_GPU=1, so that a GPU test that
# would skip for want of a GPU, torch or a CUDA build fails instead.  Logs go to $OUT when set,
# else build/logs; exits non-zero on any failure.
set -euo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH="/usr/local/cuda/bin:$PATH"
fi
cd "$(dirname "$0")/.."
build_dir=${WHOLESTORE_BUILD_DIR:-build}
log_dir=${OUT:-$build_dir/logs}
mkdir -p "$log_dir"
python=$(command -v "${PYTHON:-python3}")

echo "==== machine ===="
nvidia-smi -L 2>&1 || true
"$python" - <<'PY' 2>&1 | tee "$log_dir/python-versions.txt"
import importlib, sys
print("python", sys.version.split()[0], sys.executable)
for name in ("nanobind", "numpy", "pytest", "torch", "cupy"):
    try:
        module = importlib.import_module(name)
        print(name, getattr(module, "__version__", "?"))
    except Exception as e:
        print(name, "missing:", e)
PY
"$python" -c 'import nanobind, numpy, pytest' || {
  echo "python-check: $python needs nanobind, numpy and pytest"
  exit 1
}

generator=()
if command -v ninja >/dev/null 2>&1; then generator=(-G Ninja); fi
echo "==== configure (log: $log_dir/python-configure.log) ===="
cmake -S . -B "$build_dir" "${generator[@]}" -DWHOLESTORE_WITH_PYTHON=ON \
  "-DPython_EXECUTABLE=$python" "$@" >"$log_dir/python-configure.log" 2>&1 || {
  tail -n 40 "$log_dir/python-configure.log"
  exit 1
}
grep -E "^-- wholestore:" "$log_dir/python-configure.log" || true
echo "==== build (log: $log_dir/python-build.log) ===="
cmake --build "$build_dir" -j "$(nproc)" --target wholestore_python_core \
  >"$log_dir/python-build.log" 2>&1 || {
  grep -E "error|FAILED:" "$log_dir/python-build.log" | head -n 40
  tail -n 20 "$log_dir/python-build.log"
  exit 1
}
echo "==== pytest (log: $log_dir/pytest.log) ===="
set +e
WHOLESTORE_REQUIRE_GPU=1 PYTHONPATH="$build_dir/python" PYTHONDONTWRITEBYTECODE=1 \
  PYTHONUNBUFFERED=1 "$python" -m pytest -v -rs -p no:cacheprovider python/tests 2>&1 |
  tee "$log_dir/pytest.log"
rc=${PIPESTATUS[0]}
set -e
echo "python-check: pytest exit $rc"
exit "$rc"
