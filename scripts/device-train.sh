#!/usr/bin/env bash
# One device call after a gpu-check: the GPU tests alone (ctest -L gpu, one at a time), the
# peer-fault timing tests, the Python package's tests on the GPU, then `wholestore train` on
# the GPU: ego-Facebook against the CPU path (AUC, the exported embeddings compared byte for
# byte) and the whole-step pairs/s on a products-shaped R-MAT graph next to
# scripts/bench-torch-train.py on the same GPU.  Logs and tables in $OUT.
#   scripts/device-train.sh            # configures and builds build/ (with the Python module)
#   SKIP_TESTS=1 scripts/device-train.sh  # ... without the tests: the training figures only
#   ONE_GPU=1 ...                         # without the two-GPU runs
#   TRAIN_ROUNDS=3 ...                    # ours and torch alternating three times each
#   TESTS=regex ...                       # only those GPU tests (no peer faults, no pytest)
#   FB_DEVICES=gpu ...                    # ego-Facebook on these devices only ("" for none)
#   VARIANT="NAME=1" ...                  # ours once more per round with that environment
#   BASE_SRC=.device-base ...             # also an older source tree's binary, built here and
#                                         # run before ours in each round (an A/B in one call)
set -uo pipefail
cd "$(dirname "$0")/.."
if [ -d .device-shared/data ] && [ ! -e ../shared/data ]; then
  mkdir -p ../shared && cp -r .device-shared/data ../shared/
fi
export PIP_NO_INDEX=1 PIP_DISABLE_PIP_VERSION_CHECK=1 WHOLESTORE_EXPECT_GPU=1
final=${OUT:-/tmp/wholestore-out}
out=$(mktemp -d)
mkdir -p "$final"
# Every log and export in one file (the device tool brings back at most 8).
trap 'tar czf "$final/logs.tgz" -C "$out" . 2>/dev/null' EXIT
b=build/apps/wholestore
step() { echo "==== $* ($(date +%T))"; }

step build
py=$(scripts/python-env.sh build 2>/dev/null) || py=$(command -v python3)
{ cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DWHOLESTORE_WITH_PYTHON=ON \
    "-DPython_EXECUTABLE=$py" && cmake --build build -j "$(nproc)"; } >"$out/build.log" 2>&1 ||
  { tail -n 30 "$out/build.log"; exit 1; }
base=""
if [ -n "${BASE_SRC:-}" ]; then
  step "build the baseline ($BASE_SRC)"
  { cmake -S "$BASE_SRC" -B "$BASE_SRC/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DWHOLESTORE_BUILD_TESTS=OFF && cmake --build "$BASE_SRC/build" -j "$(nproc)" --target wholestore; } \
    >"$out/build-base.log" 2>&1 && base="$BASE_SRC/build/apps/wholestore" || tail -n 20 "$out/build-base.log"
fi
if [ -z "${SKIP_TESTS:-}" ]; then  # SKIP_TESTS=1: the training figures only
sel=(-L gpu)
[ -n "${TESTS:-}" ] && sel=(-R "$TESTS")
step "ctest ${sel[*]}"
timeout "${GPU_TESTS_TIMEOUT:-170}" ctest --test-dir build "${sel[@]}" -j 4 --timeout 120 >"$out/gpu-tests.log" 2>&1
echo "rc=$? $(grep -E 'tests passed|failed out of' "$out/gpu-tests.log")"
grep -E '\*\*\*(Failed|Timeout|Exception)|Not Run' "$out/gpu-tests.log" | head -20
if [ -z "${TESTS:-}" ]; then  # TESTS=regex: those tests only, no peer-fault or Python step
step "ctest PeerFaults"
ctest --test-dir build -R 'PeerFaults|FileIoStore' -j 2 >"$out/peer.log" 2>&1
echo "rc=$? $(grep -E 'tests passed|failed out of' "$out/peer.log")"
step pytest
# A SIGSEGV handler preloaded into Python prints the native frames of a crash (module+offset:
# resolve with addr2line against the _core module copied to $OUT); faulthandler the Python ones.
cat >/tmp/segv_trace.c <<'C'
#include <execinfo.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>
static void on_fault(int sig, siginfo_t* info, void* ctx) {
  (void)ctx;
  char msg[96];
  int n = 0;
  const char* head = "segv_trace: native frames, fault address ";
  write(2, head, strlen(head));
  unsigned long a = (unsigned long)info->si_addr;
  for (int s = 60; s >= 0; s -= 4) msg[n++] = "0123456789abcdef"[(a >> s) & 15];
  msg[n++] = '\n';
  write(2, msg, n);
  void* frames[64];
  int count = backtrace(frames, 64);
  backtrace_symbols_fd(frames, count, 2);
  signal(sig, SIG_DFL);
  raise(sig);
}
__attribute__((constructor)) static void install(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_sigaction = on_fault;
  sa.sa_flags = SA_SIGINFO;
  sigaction(SIGSEGV, &sa, 0);
  sigaction(SIGBUS, &sa, 0);
  sigaction(SIGABRT, &sa, 0);
}
C
gcc -shared -fPIC -O1 -Wno-unused-result -o /tmp/segv_trace.so /tmp/segv_trace.c
WHOLESTORE_REQUIRE_GPU=1 LD_PRELOAD=/tmp/segv_trace.so PYTHONPATH=build/python \
  PYTHONDONTWRITEBYTECODE=1 timeout 90 "$py" -X faulthandler -m pytest -q -rs -p no:cacheprovider \
  python/tests >"$out/pytest.log" 2>&1
rc=$?
echo "rc=$rc"; tail -n 15 "$out/pytest.log"
[ $rc -ne 0 ] && cp build/python/wholestore/_core*.so "$final/"
fi
fi
fb=../shared/data/facebook_combined.txt
for dev in ${FB_DEVICES-cpu gpu}; do  # FB_DEVICES="": no ego-Facebook runs
  step "train ego-Facebook $dev"
  extra=()
  [ $dev = gpu ] && extra=(--set graph.location=device --set table.location=device)
  timeout 120 $b train configs/train.yaml --set dataset=$fb --set device=$dev "${extra[@]}" \
    --export "$out/fb-$dev.npy" >"$out/train-fb-$dev.log" 2>&1
  echo "rc=$?"; grep -E 'summary|AUC|auc' "$out/train-fb-$dev.log" | tail -n 3
done
[ -f "$out/fb-gpu.npy" ] && cmp "$out/fb-cpu.npy" "$out/fb-gpu.npy" && echo "ego-Facebook: GPU embeddings == CPU embeddings (byte for byte)"

# TRAIN_ROUNDS (default 1): ours and torch alternating, that many times each, on the same GPU.
products() {  # $1: binary, $2: log name
  timeout "${PRODUCTS_TIMEOUT:-110}" "$1" train configs/train.yaml --set gen.num_nodes=2449029 \
    --set gen.num_edges=61859140 --set device=gpu --set graph.location=device \
    --set table.location=device --set batch_size=233472 --set optimizer=adam --set lr=0.01 \
    --set epochs=1 --set walks_per_node=1 --set holdout=0.01 --set eval_every=0 \
    >"$out/$2.log" 2>&1
  echo "rc=$?"; grep -vE '%|#' "$out/$2.log" | tail -n "${PRODUCTS_LINES:-12}"
}
for round in $(seq 1 "${TRAIN_ROUNDS:-1}"); do
  if [ -n "$base" ]; then
    step "train products-shaped R-MAT, GPU, baseline binary (round $round)"
    products "$base" "train-products-base-$round"
  fi
  step "train products-shaped R-MAT, GPU (round $round)"
  products "$b" "train-products-$round"
  if [ -n "${VARIANT:-}" ]; then  # VARIANT="NAME=value ...": ours again with that environment
    step "train products-shaped R-MAT, GPU, $VARIANT (round $round)"
    (export $VARIANT; products "$b" "train-products-variant-$round")
  fi
  step "torch baseline (round $round)"
  timeout "${TORCH_TIMEOUT:-90}" "$py" scripts/bench-torch-train.py --walks 2048 \
    >"$out/torch-train-$round.log" 2>&1
  echo "rc=$?"; tail -n 12 "$out/torch-train-$round.log"
done
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU [0-9]' || true)
if [ "$gpus" -ge 2 ] && [ -z "${ONE_GPU:-}" ]; then  # ONE_GPU=1: GPU 0 only
  export NCCL_NVLS_ENABLE=0
  step "train ego-Facebook gpu, 2 ranks on 2 GPUs"
  timeout 150 $b launch -n 2 -- $b train configs/train.yaml --set dataset=$fb --set device=gpu \
    --set graph.location=device --set table.location=device --export "$out/fb-gpu2.npy" \
    >"$out/train-fb-gpu2.log" 2>&1
  echo "rc=$?"; grep -E 'summary|AUC|auc' "$out/train-fb-gpu2.log" | tail -n 3
  cmp "$out/fb-gpu.npy" "$out/fb-gpu2.npy" && echo "ego-Facebook: 2 GPUs == 1 GPU (byte for byte)"
  step "train products-shaped R-MAT, 2 ranks on 2 GPUs"
  timeout "${PRODUCTS_TIMEOUT:-110}" $b launch -n 2 -- $b train configs/train.yaml \
    --set gen.num_nodes=2449029 --set gen.num_edges=61859140 --set device=gpu \
    --set graph.location=device --set table.location=device --set batch_size=233472 \
    --set optimizer=adam --set lr=0.01 --set epochs=1 --set walks_per_node=1 \
    --set holdout=0.01 --set eval_every=0 >"$out/train-products2.log" 2>&1
  echo "rc=$?"; grep -vE '%|#' "$out/train-products2.log" | tail -n 12
fi
step done
