#!/usr/bin/env bash
# One device call on a machine with two GPUs (kind nvidia-h200-x2): build with the Python module,
# the Python tests with a GPU visible, the GPU tests (ctest -L gpu; FROM=N starts at test number
# N), the README's main job with one rank per GPU, and two-rank GPU training next to one rank.
# Logs packed in $OUT/logs.tgz.
#   scripts/device-two-gpu.sh
set -uo pipefail
cd "$(dirname "$0")/.."
if [ -d .device-shared/data ] && [ ! -e ../shared/data ]; then
  mkdir -p ../shared && cp -r .device-shared/data ../shared/
fi
export PIP_NO_INDEX=1 PIP_DISABLE_PIP_VERSION_CHECK=1 NCCL_NVLS_ENABLE=0
final=${OUT:-/tmp/wholestore-out}
out=$(mktemp -d)
mkdir -p "$final"
trap 'tar czf "$final/logs.tgz" -C "$out" . 2>/dev/null' EXIT
b=build/apps/wholestore
step() { echo "==== $* ($(date +%T))"; }
nvidia-smi -L
step build
py=$(scripts/python-env.sh build 2>/dev/null) || py=$(command -v python3)
{ cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DWHOLESTORE_WITH_PYTHON=ON \
    "-DPython_EXECUTABLE=$py" && cmake --build build -j "$(nproc)"; } >"$out/build.log" 2>&1 ||
  { tail -n 30 "$out/build.log"; exit 1; }
echo "LDFLAGS=${LDFLAGS-unset} CXXFLAGS=${CXXFLAGS-unset}"
grep -E "static|Python module links" "$out/build.log" | head -5
readelf -d build/python/wholestore/_core*.so | grep NEEDED | tr -s ' ' | cut -d' ' -f5- | tr '\n' ' '
echo; echo "exported: $(nm -D --defined-only build/python/wholestore/_core*.so | wc -l) symbols"
step pytest
WHOLESTORE_REQUIRE_GPU=1 PYTHONPATH=build/python \
  PYTHONDONTWRITEBYTECODE=1 timeout 120 "$py" -X faulthandler -m pytest -q -rs \
  -p no:cacheprovider python/tests >"$out/pytest.log" 2>&1
echo "rc=$?"; tail -n 12 "$out/pytest.log"
step "ctest -L gpu from ${FROM:-1}"
timeout "${GPU_TESTS_TIMEOUT:-300}" ctest --test-dir build -L gpu -I "${FROM:-1},100000" -j 4 \
  --timeout 120 >"$out/gpu-tests.log" 2>&1
echo "rc=$? $(grep -E 'tests passed|failed out of' "$out/gpu-tests.log")"
grep -E '\*\*\*(Failed|Timeout|Exception)|Not Run' "$out/gpu-tests.log" | head -20
tail -n 2 "$out/gpu-tests.log"
step "run.sh, one rank per GPU"
timeout 120 scripts/run.sh >"$out/run.log" 2>&1
echo "rc=$?"; grep -vE '%|#' "$out/run.log" | tail -n 6
fb=../shared/data/facebook_combined.txt
for n in 1 2; do
  step "train ego-Facebook gpu, $n rank(s)"
  timeout 150 $b launch -n $n -- $b train configs/train.yaml --set dataset=$fb --set device=gpu \
    --set graph.location=device --set table.location=device --export "$out/fb-gpu$n.npy" \
    >"$out/train-fb-gpu$n.log" 2>&1
  echo "rc=$?"; grep -vE '%|#' "$out/train-fb-gpu$n.log" | tail -n 8
done
cmp "$out/fb-gpu1.npy" "$out/fb-gpu2.npy" && echo "ego-Facebook: 2 GPUs == 1 GPU (byte for byte)"
step done
