#!/usr/bin/env bash
# Exploration on the GPU machine, several steps in one call; logs under $OUT.
#   EXPLORE="variants gather sample" scripts/device-explore.sh      (the default steps)
# Steps: variants (the kernels of scripts/experiments/gather_variants.cu side by side), alloc
# (scripts/experiments/gather_alloc.cu: the same kernel on tables allocated several ways),
# peervariants (scripts/experiments/peer_gather_variants.cu, two GPUs gathering at once), build,
# gather (the gather bench at every row size), sample (the sampling bench), tests (GPU gather
# and embedding tests; TESTS_FILTER narrows the first), chunkdebug (two-rank chunked tables
# with the row copies logged), ncu and ncufill (Nsight Compute on weighted sampling), profile
# (nsys, where present), compare (before/after in one call: .device-base/base.tgz holds an
# earlier tree, packed from a git worktree and carried; COMPARE="small big sample walks train
# tables pair" picks the benches run with both builds, alternating; pair needs two GPUs).
set -uo pipefail
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0 WHOLESTORE_EXPECT_GPU=1
final=${OUT:-/tmp/wholestore-out}
mkdir -p "$final"
steps=" ${EXPLORE:-variants gather sample} "
want() { [[ "$steps" == *" $1 "* ]]; }
nvidia-smi -L
b=build/apps/wholestore
if want variants; then
  echo "==== variants ($(date +%T))"
  nvcc -O3 -std=c++17 -arch=sm_90 scripts/experiments/gather_variants.cu -o /tmp/gv &&
    /tmp/gv 8 4194304 2>&1 | tee "$final/variants.txt"
fi
if want alloc; then
  echo "==== table allocation and small-row gathers ($(date +%T))"
  nvcc -O3 -std=c++17 -arch=sm_90 scripts/experiments/gather_alloc.cu -lcuda -o /tmp/galloc &&
    /tmp/galloc 4194304 2>&1 | tee "$final/alloc.txt"
fi
if want peervariants; then
  echo "==== peer variants, two GPUs ($(date +%T))"
  nvcc -O3 -std=c++17 -arch=sm_90 scripts/experiments/peer_gather_variants.cu -o /tmp/pgv &&
    /tmp/pgv 8 4194304 2>&1 | tee "$final/peer-variants.txt"
fi
if want build || want gather || want sample || want tests || want chunkdebug; then
  echo "==== build ($(date +%T))"
  targets="--target wholestore"
  want tests && targets="--target wholestore wholememory_gpu_tests embedding_gpu_tests"
  { cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release &&
    cmake --build build -j "$(nproc)" $targets; } >"$final/build.log" 2>&1 ||
    { tail -n 30 "$final/build.log"; exit 1; }
fi
if want tests; then
  echo "==== GPU tests: ${TESTS_FILTER:-gather and embedding} ($(date +%T))"
  timeout 300 build/tests/wholememory_gpu_tests --gtest_filter="${TESTS_FILTER:-*GpuGather*}" \
    >"$final/tests-wholememory.txt" 2>&1
  echo "rc=$?"; grep -E "^\[  (PASSED|FAILED) |^\[  FAILED|tests ran" "$final/tests-wholememory.txt"
  if [ -z "${TESTS_FILTER:-}" ]; then
    timeout 300 build/tests/embedding_gpu_tests >"$final/tests-embedding.txt" 2>&1
    echo "rc=$?"; grep -E "^\[  (PASSED|FAILED) |^\[  FAILED|tests ran" "$final/tests-embedding.txt"
  fi
fi
if want chunkdebug; then
  # Issue 10: which copy does the chunked table's lookup run with two ranks?
  echo "==== chunked table lookup, 2 ranks, debug log ($(date +%T))"
  WHOLESTORE_LOG_LEVEL=debug timeout 200 $b launch -n 2 -- $b bench configs/bench_embedding.yaml \
    --set types=chunked,continuous --set optimizers=sgd --set streams=uniform \
    --set batches=1048576 --set cache=false --set repeats=3 >"$final/chunkdebug.txt" 2>&1
  echo "rc=$?"
  grep -E "row copy" "$final/chunkdebug.txt" | sed -E 's/^\[rank [0-9]\] //; s/[0-9]+ rows/N rows/' |
    sort | uniq -c | sort -rn | head -n 12
  grep -E "lookup ms|uniform " "$final/chunkdebug.txt" | grep -v "row copy" | head -n 6
  # The gather suite on parts of 2.56e9 bytes (10M rows of 512 B over two ranks), the table's
  # shape, next to its default 5 GiB (parts of whole 2 MiB pages).
  for gib in 4.76837158203125 5; do
    timeout 150 $b launch -n 2 -- $b bench configs/bench_gather.yaml --set types=chunked \
      --set locations=device --set row_bytes=512 --set table_gib=$gib --set ops=gather \
      --set lookups=1048576 2>&1 | grep -E "^\[rank 0\] gather"
  done
fi
if want compare; then
  # Before/after in one call: the tree in .device-base/base.tgz (an earlier commit, made by
  # `git archive`-like packing) built beside this one; the gather suite at narrow rows and the
  # two-rank chunked table, alternating between the builds.
  echo "==== compare: build the baseline ($(date +%T))"
  rm -rf /tmp/base && mkdir -p /tmp/base && tar xzf .device-base/base.tgz -C /tmp/base &&
    { cmake -S /tmp/base -B /tmp/base/build -G Ninja -DCMAKE_BUILD_TYPE=Release &&
      cmake --build /tmp/base/build -j "$(nproc)" --target wholestore; } >"$final/build-base.log" 2>&1 ||
    { tail -n 20 "$final/build-base.log"; exit 1; }
  parts=" ${COMPARE:-small big tables} "
  # Runs the function $4 with each build's binary, base first, $1 rounds, when part $2 is asked.
  each_build() {
    [[ "$parts" == *" $2 "* ]] || return 0
    for round in $(seq "$1"); do
      for which in base new; do
        local bin=$b
        [ "$which" = base ] && bin=/tmp/base/build/apps/wholestore
        echo "---- $which, round $round: $3"
        "$4" "$bin" "$which-$round"
      done
    done
  }
  small_batches() {
    for n in 16384 131072; do
      "$1" bench configs/bench_gather.yaml --set types=continuous --set locations=device \
        --set row_bytes=256 --set ops=gather,scatter --set kernel_only=true \
        --set pipelined=true --set repeats=50 --set lookups=$n 2>&1 |
        grep -E "^(gather|scatter)" | awk -v n=$n '{print n, $1, $2, $4, $5, $7, $8, $9}'
    done
  }
  narrow_rows() {
    "$1" bench configs/bench_gather.yaml --set types=continuous,chunked --set locations=device \
      --set row_bytes=64,128,256,512 --set ops=gather --set kernel_only=true \
      --set pipelined=true --set repeats=15 2>&1 | tee "$final/compare-$2.txt" |
      grep -E "^gather" | awk '{print $2, $4, $5, $7, $8, $9}'
  }
  sampling() {
    "$1" bench configs/bench_sample.yaml --set methods=weighted,uniform --set locations=device \
      --set samplers=gpu --set walks= --set batches=100 2>&1 | grep -E "^gpu " |
      awk '{print $4, $5, $6}'
  }
  training() {
    timeout 150 "$1" train configs/train.yaml --set gen.num_nodes=500000 \
      --set gen.num_edges=12000000 --set device=gpu --set graph.location=device \
      --set table.location=device --set batch_size=233472 --set optimizer=adam --set lr=0.01 \
      --set epochs=1 --set walks_per_node=1 --set holdout=0.01 --set eval_every=0 2>&1 |
      grep -E "summary|gpu" | grep -vE "%|#" | tail -n 3
  }
  two_rank_tables() {
    timeout 200 "$1" launch -n 2 -- "$1" bench configs/bench_embedding.yaml \
      --set types=chunked,continuous --set optimizers=sgd,adam --set streams=uniform \
      --set batches=262144,1048576 --set cache=false --set repeats=3 2>&1 |
      grep -E "^\[rank 0\] (chunked|contin)"
  }
  walking() {
    "$1" bench configs/bench_sample.yaml --set fanouts=15,10,5 --set methods=uniform \
      --set samplers=gpu --set walk_calls=3 --set locations=device --set types=continuous,chunked 2>&1 |
      grep -E "^gpu .*(deepwalk|node2vec)" | awk '{print $2, $4, $6}'
  }
  pair_rows() {
    WHOLESTORE_CHECK_COLLECTIVES=0 timeout 200 "$1" launch -n 2 -- "$1" bench \
      configs/bench_gather.yaml --set types=continuous,chunked --set locations=device \
      --set row_bytes=64,128,256,512 --set ops=gather --set kernel_only=true --set pipelined=true \
      --set repeats=15 2>&1 | tee "$final/compare-pair-$2.txt" | grep -E "^\[rank 0\] gather" |
      awk '{print $4, $6, $7, $9, $10, $11}'
  }
  each_build 2 small "small batches" small_batches
  each_build 2 big "4M lookups, narrow rows" narrow_rows
  each_build 2 pair "two ranks (GPUs 0 and 1), 4M lookups, narrow rows" pair_rows
  each_build 2 sample "sampling, device graph" sampling
  each_build 2 walks "random walks, device graph" walking
  each_build 2 train "train, R-MAT 500k nodes / 12M edges, products batch" training
  each_build 1 tables "two-rank tables, 1M lookups of 512 B" two_rank_tables
fi
if want ncu; then
  # Per-kernel GPU time of weighted [30,30,30] sampling (issue 15: 1.5x WholeGraph).
  echo "==== ncu: weighted sampling kernels ($(date +%T))"
  timeout 400 ncu --metrics gpu__time_duration.sum --print-summary per-kernel --csv \
    $b bench configs/bench_sample.yaml --set methods=weighted --set fanouts=30,30,30 \
    --set locations=device --set samplers=gpu --set walks= --set warmup=1 --set batches=4 \
    >"$final/ncu.csv" 2>"$final/ncu.err"
  echo "rc=$?"
  python3 - "$final/ncu.csv" <<'PY'
import csv, sys, collections
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 5]
head = rows[0]; data = rows[1:]
def col(name):
    for i, h in enumerate(head):
        if name in h: return i
    return None
ki, ci, ai, ui = col("Kernel Name"), col("Invocations"), col("Average"), col("Unit")
scale = {"nsecond": 1e-3, "usecond": 1.0, "msecond": 1e3, "second": 1e6}
tot = collections.Counter()
calls = collections.Counter()
for r in data:
    try:
        name = r[ki][:90]; n = int(r[ci]); avg = float(r[ai].replace(",", ""))
        avg *= scale.get(r[ui], 1.0) if ui is not None else 1.0
    except Exception:
        continue
    tot[name] += n * avg; calls[name] += n
s = sum(tot.values()) or 1
if not tot:
    print(head); print(data[:3])
print(f"total {s:.1f} us over the profiled calls")
for name, t in tot.most_common(18):
    print(f"{t/s*100:5.1f}%  {calls[name]:5d} calls  {t/calls[name]:10.1f} avg  {name}")
PY
  tail -n 3 "$final/ncu.err"
fi
if want ncufill; then
  # What limits the weighted race (fill_kernel on hop 3 of [30,30,30]): stall reasons, pipes.
  echo "==== ncu: fill_kernel sections ($(date +%T))"
  timeout 300 ncu --kernel-name regex:'fill_kernel|race_segments' --launch-skip 4 --launch-count 2 \
    --section SpeedOfLight --section WarpStateStats --section ComputeWorkloadAnalysis \
    --section Occupancy --section LaunchStats \
    $b bench configs/bench_sample.yaml --set methods=weighted --set fanouts=30,30,30 \
    --set locations=device --set samplers=gpu --set walks= --set warmup=1 --set batches=2 \
    >"$final/ncufill.txt" 2>&1
  echo "rc=$?"
  grep -E "fill_kernel|race_segments|Duration|Throughput|Stall|Issue|Pipe|Occupancy|Registers|Executed Ipc|Warp Cycles|No Eligible|Active Warps|Block Size|Grid Size|Theoretical" \
    "$final/ncufill.txt" | grep -v "^==PROF" | head -n 90
fi
if want profile; then
  echo "==== profile: GPU trace of checked gathers, 64 B rows ($(date +%T))"
  if command -v nsys >/dev/null; then
    nsys profile -o /tmp/gprof --force-overwrite true $b bench configs/bench_gather.yaml \
      --set types=continuous --set locations=device --set row_bytes=64 --set ops=gather \
      --set repeats=3 --set warmup=1 >/dev/null 2>&1
    nsys stats --report cuda_gpu_trace --format csv /tmp/gprof.nsys-rep 2>/dev/null |
      awk -F, '{print $1", "$2", "$NF}' | tail -n 24
  else
    echo "no nsys here"; ls /usr/local/cuda/bin | grep -i -E "nsys|ncu" || true
  fi
fi
if want gather; then
  echo "==== gather bench ($(date +%T))"
  $b bench configs/bench_gather.yaml --set types=continuous,chunked --set locations=device \
    --set row_bytes=64,128,256,512,1024,4096 --set ops=gather --set kernel_only=true \
    --report "$final/gather.yaml" 2>&1 | tee "$final/gather.txt" | tail -n 14
fi
if want sample; then
  echo "==== sample bench ($(date +%T))"
  $b bench configs/bench_sample.yaml --set methods=weighted,uniform --set locations=device \
    --set samplers=gpu --set walks= --report "$final/sample.yaml" 2>&1 | tee "$final/sample.txt" |
    tail -n 12
fi
