#!/usr/bin/env bash
# One device call on a machine with two GPUs (kind nvidia-h200-x2; most steps also run on one
# GPU): build with the Python module, the Python tests with a GPU visible, GPU tests, the
# README's main job with one rank per GPU, two-rank GPU training next to one rank, and the
# benchmarks that need two GPUs.  Logs packed in $OUT/logs.tgz.
#   scripts/device-two-gpu.sh                     # every step, ctest -L gpu
#   TESTS='Sgns|FileIoGpu' REPEAT=3 scripts/device-two-gpu.sh   # those tests, each 3 times
#   STEPS='build pytest tests' scripts/device-two-gpu.sh         # only these steps
# Steps: build pytest tests run train symmetric embedding chunked owners walks ncclmode peer faults
# graphsage sanitize (the last eight not by default; peer: distributed gathers with owners
# writing into peers' buffers against NCCL's exchange of rows; ncclmode: the blocking NCCL communicator
# against WHOLESTORE_NCCL_NONBLOCKING=1 on distributed sampling, walks and gathers; owners: the served hops' tests, and the sample bench
# with padded hops off and on, needs two GPUs; walks: the distributed walkers' tests and the
# walk bench on distributed and continuous graphs, needs two GPUs)
set -uo pipefail
cd "$(dirname "$0")/.."
if [ -d .device-shared/data ] && [ ! -e ../shared/data ]; then
  mkdir -p ../shared && cp -r .device-shared/data ../shared/
fi
# GPUs are expected here: a CUDA error fails the GPU tests instead of skipping them.
export PIP_NO_INDEX=1 PIP_DISABLE_PIP_VERSION_CHECK=1 NCCL_NVLS_ENABLE=0 WHOLESTORE_EXPECT_GPU=1
final=${OUT:-/tmp/wholestore-out}
out=$(mktemp -d)
mkdir -p "$final"
trap 'tar czf "$final/logs.tgz" -C "$out" . 2>/dev/null' EXIT
steps=" ${STEPS:-build pytest tests run train symmetric embedding} "
want() { [[ "$steps" == *" $1 "* ]]; }
b=build/apps/wholestore
step() { echo "==== $* ($(date +%T))"; }
nvidia-smi -L
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU [0-9]' || true)
py=$(scripts/python-env.sh build 2>/dev/null) || py=$(command -v python3)
if want build; then
  step build
  { cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DWHOLESTORE_WITH_PYTHON=ON \
      "-DPython_EXECUTABLE=$py" && cmake --build build -j "$(nproc)"; } >"$out/build.log" 2>&1 ||
    { tail -n 30 "$out/build.log"; exit 1; }
fi
if want pytest; then
  step pytest
  WHOLESTORE_REQUIRE_GPU=1 PYTHONPATH=build/python PYTHONDONTWRITEBYTECODE=1 timeout 240 \
    "$py" -X faulthandler -m pytest -q -rs -p no:cacheprovider python/tests >"$out/pytest.log" 2>&1
  echo "rc=$?"; tail -n 12 "$out/pytest.log"
fi
if want tests; then
  sel=(-L gpu)
  [ -n "${TESTS:-}" ] && sel=(-R "$TESTS")
  step "ctest ${sel[*]} x${REPEAT:-1}"
  timeout "${GPU_TESTS_TIMEOUT:-300}" ctest --test-dir build "${sel[@]}" -j 4 --timeout 120 \
    --repeat "until-fail:${REPEAT:-1}" --output-on-failure >"$out/gpu-tests.log" 2>&1
  echo "rc=$? $(grep -E 'tests passed|failed out of' "$out/gpu-tests.log")"
  grep -E '\*\*\*(Failed|Timeout|Exception)|Not Run' "$out/gpu-tests.log" | head -20
fi
if want run; then
  step "run.sh, one rank per GPU"
  timeout 120 scripts/run.sh >"$out/run.log" 2>&1
  echo "rc=$?"; grep -E 'summary' "$out/run.log" | tail -n 2
fi
fb=../shared/data/facebook_combined.txt
if want train; then
  for n in 1 2; do
    [ "$n" -gt "$gpus" ] && continue
    step "train ego-Facebook gpu, $n rank(s)"
    timeout 150 $b launch -n $n -- $b train configs/train.yaml --set dataset=$fb \
      --set device=gpu --set graph.location=device --set table.location=device \
      --export "$out/fb-gpu$n.npy" >"$out/train-fb-gpu$n.log" 2>&1
    echo "rc=$?"; grep -E 'summary' "$out/train-fb-gpu$n.log" | tail -n 1
  done
  [ -f "$out/fb-gpu2.npy" ] && cmp "$out/fb-gpu1.npy" "$out/fb-gpu2.npy" &&
    echo "ego-Facebook: 2 GPUs == 1 GPU (byte for byte)"
fi
if want symmetric && [ -f configs/bench_symmetric.yaml ]; then
  step "symmetric put/get, 2 ranks"
  timeout 120 $b launch -n 2 -- $b bench configs/bench_symmetric.yaml >"$out/bench-symmetric.txt" 2>&1
  echo "rc=$?"; grep -vE '^\[rank 1\]' "$out/bench-symmetric.txt" | tail -n 30
  cp "$out/bench-symmetric.txt" "$final/"
fi
if want embedding; then
  # 1 rank, then one rank per GPU (EMBEDDING_RANKS to choose): every type, SGD and Adam,
  # both streams, 1M indices.
  for n in ${EMBEDDING_RANKS:-1 2}; do
    [ "$n" -gt "$gpus" ] && continue
    step "embedding bench, $n rank(s)"
    timeout 200 $b launch -n $n -- $b bench configs/bench_embedding.yaml \
      --set types=continuous,chunked,distributed --set optimizers=sgd,adam \
      --set streams=uniform,powerlaw --set batches=1048576 --set cache=false --set repeats=5 \
      >"$out/bench-embedding-$n.txt" 2>&1
    echo "rc=$?"; grep -vE '^\[rank 1\]' "$out/bench-embedding-$n.txt" | tail -n 16
    cp "$out/bench-embedding-$n.txt" "$final/"
  done
fi
if want chunked && [ "$gpus" -ge 1 ]; then
  # Two ranks (sharing the GPU on a one-GPU machine), 512-byte rows, 1M lookups per rank: the
  # gather suite's chunked and continuous memory next to embedding tables of both types over
  # the NCCL and the host communicator (the table's chunked lookup measured 15x slower than
  # continuous: which layer is it?).
  step "chunked vs continuous, 2 ranks"
  timeout 150 $b launch -n 2 -- $b bench configs/bench_gather.yaml --set types=continuous,chunked \
    --set locations=device --set row_bytes=512 --set table_gib=5 --set ops=gather \
    --set lookups=1048576 >"$out/chunked-gather.txt" 2>&1
  echo "rc=$?"; grep -vE '^\[rank 1\]' "$out/chunked-gather.txt" | tail -n 8
  for comm in auto host; do
    timeout 150 $b launch -n 2 -- $b bench configs/bench_embedding.yaml \
      --set types=continuous,chunked --set optimizers=sgd --set streams=uniform \
      --set batches=1048576 --set cache=false --set repeats=5 --set comm=$comm \
      >"$out/chunked-embedding-$comm.txt" 2>&1
    echo "rc=$? comm=$comm"; grep -vE '^\[rank 1\]' "$out/chunked-embedding-$comm.txt" | tail -n 4
  done
  cp "$out"/chunked-*.txt "$final/"
fi
if want owners && [ "$gpus" -ge 2 ]; then
  # Distributed graphs served by their owners: the tests, then the sample bench through the
  # gathers, served with every hop counting first and served with padded hops, alternating
  # (ROUNDS, default 2).  The edges/batch column must be the same in all three.
  step "served hops: tests"
  timeout 300 ctest --test-dir build -R \
    'GpuSamplingDistributed|GpuSamplingHubs|HostileMemoryGpuDistributed|TrainGpu.TwoGpus' \
    -j 2 --timeout 200 --output-on-failure >"$out/owners-tests.log" 2>&1
  echo "rc=$? $(grep -E 'tests passed|failed out of' "$out/owners-tests.log")"
  grep -E '\*\*\*(Failed|Timeout|Exception)' "$out/owners-tests.log" | head -20
  for round in $(seq 1 "${ROUNDS:-2}"); do
    # gathers: the default path; counted: served, every hop waits for counts; padded: served,
    # hops after the first sized by bounds.
    for mode in gathers counted padded; do
      step "sample, distributed, $mode (round $round)"
      modeenv=(WHOLESTORE_SAMPLE_BY_OWNER=1)
      [ "$mode" = gathers ] && modeenv=(WHOLESTORE_SAMPLE_BY_OWNER=0)
      [ "$mode" = counted ] && modeenv+=(WHOLESTORE_SAMPLE_PAD_KIB=0)
      env "${modeenv[@]}" WHOLESTORE_CHECK_COLLECTIVES=0 timeout 150 \
        $b launch -n 2 -- $b bench configs/bench_sample.yaml --set locations=device \
        --set samplers=gpu --set walks= --set types=distributed,continuous \
        >"$out/owners-sample-$mode-$round.txt" 2>&1
      echo "rc=$?"; grep -E '^\[rank 0\] (gpu|     \()' "$out/owners-sample-$mode-$round.txt"
    done
  done
  cp "$out"/owners-* "$final/" 2>/dev/null
fi
if want walks && [ "$gpus" -ge 2 ]; then
  # Random walks on distributed graphs (one rank per GPU): the walkers' tests, then DeepWalk and
  # node2vec on the sample suite's R-MAT, distributed next to continuous (every type must take
  # the same steps).
  step "distributed walks: tests"
  timeout 300 ctest --test-dir build -R 'GpuWalks|TrainGpu' -j 2 --timeout 200 \
    --output-on-failure >"$out/walks-tests.log" 2>&1
  echo "rc=$? $(grep -E 'tests passed|failed out of' "$out/walks-tests.log")"
  grep -E '\*\*\*(Failed|Timeout|Exception)' "$out/walks-tests.log" | head -20
  step "distributed walks: bench"
  WHOLESTORE_CHECK_COLLECTIVES=0 timeout 250 $b launch -n 2 -- $b bench configs/bench_sample.yaml \
    --set samplers=gpu --set types=distributed,continuous --set locations=device \
    --set fanouts=15,10,5 --set methods=uniform --set walks=deepwalk,node2vec \
    >"$out/walks-bench.txt" 2>&1
  echo "rc=$?"; grep -E '^\[rank 0\] (walk|gpu .*(deepwalk|node2vec))' "$out/walks-bench.txt"
  cp "$out/walks-bench.txt" "$final/"
fi
if want ncclmode && [ "$gpus" -ge 2 ]; then
  # The blocking NCCL communicator against WHOLESTORE_NCCL_NONBLOCKING=1 (every collective on
  # the non-blocking one, NCCL launching each group from a thread of its own), alternating,
  # NCCLMODE_ROUNDS rounds (2): distributed sampling and DeepWalk, then distributed gathers.
  for round in $(seq "${NCCLMODE_ROUNDS:-2}"); do
    for mode in nonblocking blocking; do
      nb=0; [ $mode = nonblocking ] && nb=1
      step "NCCL $mode, round $round"
      WHOLESTORE_NCCL_NONBLOCKING=$nb WHOLESTORE_CHECK_COLLECTIVES=0 timeout 200 $b launch -n 2 -- \
        $b bench configs/bench_sample.yaml --set samplers=gpu --set types=distributed \
        --set locations=device --set 'fanouts=15,10,5;30,30,30' --set methods=uniform,weighted \
        --set walks=deepwalk 2>&1 | tee "$out/ncclmode-sample-$mode-$round.txt" |
        grep -E '^\[rank 0\] gpu' | cut -c1-120
      WHOLESTORE_NCCL_NONBLOCKING=$nb WHOLESTORE_CHECK_COLLECTIVES=0 timeout 200 $b launch -n 2 -- \
        $b bench configs/bench_gather.yaml --set types=distributed --set locations=device \
        --set row_bytes=64,512,4096 --set ops=gather,scatter 2>&1 |
        tee "$out/ncclmode-gather-$mode-$round.txt" | grep -E '^\[rank 0\] (gather|scatter)' |
        awk '{print $3, $4, $6, $7, $9, $11, $14}'
    done
  done
  step "continuous gathers and sampling, same machine"
  WHOLESTORE_CHECK_COLLECTIVES=0 timeout 200 $b launch -n 2 -- $b bench configs/bench_gather.yaml \
    --set types=continuous --set locations=device --set row_bytes=64,512,4096 --set ops=gather 2>&1 |
    grep -E '^\[rank 0\] gather' | awk '{print $3, $4, $6, $7, $9, $11, $14}'
  WHOLESTORE_CHECK_COLLECTIVES=0 timeout 200 $b launch -n 2 -- $b bench configs/bench_sample.yaml \
    --set samplers=gpu --set types=continuous --set locations=device \
    --set 'fanouts=15,10,5;30,30,30' --set methods=uniform,weighted --set walks=deepwalk 2>&1 |
    grep -E '^\[rank 0\] gpu' | cut -c1-120
fi
if want peer && [ "$gpus" -ge 2 ]; then
  # Distributed gathers with owners writing rows into the asking rank's buffer
  # (WHOLESTORE_GATHER_PEER=1, the default) against NCCL's exchange of rows (0), alternating,
  # PEER_ROUNDS rounds (2), then continuous memory on the same machine.
  for round in $(seq "${PEER_ROUNDS:-2}"); do
    for setting in 0 1; do
      step "WHOLESTORE_GATHER_PEER=$setting, round $round"
      WHOLESTORE_GATHER_PEER=$setting WHOLESTORE_CHECK_COLLECTIVES=0 timeout 200 $b launch -n 2 -- \
        $b bench configs/bench_gather.yaml --set types=distributed --set locations=device,host \
        --set row_bytes=64,128,512,4096 --set ops=gather 2>&1 |
        tee "$out/peer-gather-$setting-$round.txt" | grep -E '^\[rank 0\] gather' |
        awk '{print $3, $4, $5, $6, $7, $9, $11, $14}'
    done
  done
  step "continuous gathers, same machine"
  WHOLESTORE_CHECK_COLLECTIVES=0 timeout 200 $b launch -n 2 -- $b bench configs/bench_gather.yaml \
    --set types=continuous --set locations=device,host --set row_bytes=64,128,512,4096 \
    --set ops=gather 2>&1 | grep -E '^\[rank 0\] gather' | awk '{print $3, $4, $5, $6, $7, $9, $11, $14}'
fi
if want faults; then
  # The fault injector on the GPU path (sampler=gpu on device graphs, demo on device memory),
  # FAULT_RANKS ranks (default 2) sharing the GPUs round-robin.
  step "fault injection, GPU path, ${FAULT_RANKS:-2} ranks, ${FAULT_CASES:-30} cases"
  FAULT_GPU=1 FAULT_CASES=${FAULT_CASES:-30} FAULT_OUT="$PWD/build/fault-gpu" \
    timeout "${FAULT_LIMIT:-400}" scripts/fault-inject.sh build/apps/wholestore >"$out/faults.log" 2>&1
  echo "rc=$?"; grep -vE '^case .*: ok' "$out/faults.log" | tail -n 25
  cp "$out/faults.log" "$final/"
  cp -r build/fault-gpu "$out/" 2>/dev/null
fi
if want graphsage; then
  # examples/graphsage.py on the products-shaped SBM (generated once): the MLP baseline and
  # GraphSAGE on one GPU, PyG's NeighborLoader with the same model, GraphSAGE on two GPUs.
  export PYTHONPATH=build/python PYTHONDONTWRITEBYTECODE=1
  ex="$py examples/graphsage.py --dataset $out/sbm"
  step "graphsage: the dataset"
  # GS_GRAPH: generator options instead of the example's defaults; GS_RUNS: NAME:OPTIONS runs.
  # shellcheck disable=SC2086
  timeout 200 "$py" examples/graphsage.py --save-dataset "$out/sbm" ${GS_GRAPH:-} \
    >"$out/graphsage-gen.log" 2>&1
  echo "rc=$?"; tail -n 3 "$out/graphsage-gen.log"
  e=${GS_EPOCHS:-5}
  IFS=';' read -r -a runs <<<"${GS_RUNS:-mlp:--model mlp --epochs $e;sage:--epochs $e;sage-emb:--epochs $e --embedding-dim 32;pyg:--loader pyg --epochs 1 --max-eval-batches 40 --pyg-workers 8}"
  for run in "${runs[@]}"; do
    name=${run%%:*}
    step "graphsage $name"
    # shellcheck disable=SC2086
    timeout 240 $ex ${run#*:} >"$out/graphsage-$name.log" 2>&1
    echo "rc=$?"; grep -E '^epoch|^test|^summary|Error|error' "$out/graphsage-$name.log" | tail -n 8
  done
  if [ "$gpus" -ge 2 ] && [ -z "${GS_RUNS:-}" ]; then
    step "graphsage, torchrun 2 GPUs"
    # shellcheck disable=SC2086
    timeout 240 "$py" -m torch.distributed.run --standalone --nproc-per-node 2 \
      examples/graphsage.py --dataset "$out/sbm" --epochs "$e" \
      >"$out/graphsage-2gpu.log" 2>&1
    echo "rc=$?"; grep -E '^epoch|^test|^summary|Error|error' "$out/graphsage-2gpu.log" | tail -n 8
  fi
  rm -rf "$out/sbm"
  cp "$out"/graphsage-*.log "$final/" 2>/dev/null
fi
if want sanitize; then
  step "compute-sanitizer memcheck"
  # SANITIZE_CASES: BINARY:FILTER pairs (space-separated) instead of gpu-sanitize.sh's list.
  # shellcheck disable=SC2086
  OUT="$out" CASE_TIMEOUT=${CASE_TIMEOUT:-60} scripts/gpu-sanitize.sh ${SANITIZE_CASES:-}
  echo "rc=$?"
fi
step done
