#!/usr/bin/env bash
# One device call on a machine with several GPUs (kind nvidia-h100-x4): the weak-scaling runs
# of issue 34 on 1, 2 and 4 GPUs with one build, each N next to one GPU in the same call.
#   - embedding step: the bench's 10M x 128 float32 table, 1M lookups per rank, Adam,
#     uniform and power-law streams, continuous and distributed tables
#   - `wholestore train` on the products-shaped R-MAT (2,449,029 nodes, 61,859,140 edges),
#     DeepWalk, dim 128, 5 negatives, Adam, batch_size 233472, one epoch
# Logs packed in $OUT/logs.tgz; a summary of every run on stdout.
#   scripts/device-scaling.sh                      # build, GPU tests, embedding, train
#   STEPS='build embedding' scripts/device-scaling.sh
#   TESTS='Sgns|Train' ...                         # the GPU tests to run (ctest -R)
#   RANKS='1 4' ...                                # the GPU counts (default 1 2 4)
#   TRAIN_RANKS='1 4' ...                          # the trainer's (default: RANKS)
#   VARIANT='NAME=value' ...                       # each multi-GPU run again with that env
#   BENCH_VARIANT='--set exchange=collective' ...  # each multi-GPU bench again with these args
#   BASE_SRC=.device-base ...                      # an older tree's binary, built and run
#                                                  # before ours at every N (A/B in one call)
#   BASE_FOR='train' ...                           # the steps the baseline runs in (default
#                                                  # embedding train)
#   TRAIN_VARIANT='--set schedule=blocks ...' ...  # each trainer run again with these args
#                                                  # (at every N, 1 GPU included); several
#                                                  # variants separated by ';'
#   TRAIN_BASE_RANKS='1' ...                       # the N at which the plain trainer runs
#                                                  # (default: every N)
#   FACEBOOK=path/facebook_combined.txt ...        # also train ego-Facebook on 1 GPU and on
#                                                  # the most GPUs, plain and with TRAIN_VARIANT
set -uo pipefail
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0 WHOLESTORE_EXPECT_GPU=1
final=${OUT:-/tmp/wholestore-out}
out=$(mktemp -d)
mkdir -p "$final"
trap 'tar czf "$final/logs.tgz" -C "$out" . 2>/dev/null' EXIT
steps=" ${STEPS:-build tests embedding train} "
want() { [[ "$steps" == *" $1 "* ]]; }
b=$PWD/build/apps/wholestore
step() { echo "==== $* ($(date +%T))"; }
nvidia-smi -L
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU [0-9]' || true)
ranks=${RANKS:-1 2 4}

if want build; then
  step build
  { cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DWHOLESTORE_WITH_PYTHON=OFF &&
      cmake --build build -j "$(nproc)"; } >"$out/build.log" 2>&1 ||
    { tail -n 30 "$out/build.log"; exit 1; }
fi
base=""
if [ -n "${BASE_SRC:-}" ]; then
  step "build the baseline ($BASE_SRC)"
  { cmake -S "$BASE_SRC" -B "$BASE_SRC/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DWHOLESTORE_BUILD_TESTS=OFF -DWHOLESTORE_WITH_PYTHON=OFF &&
      cmake --build "$BASE_SRC/build" -j "$(nproc)" --target wholestore; } \
    >"$out/build-base.log" 2>&1 && base="$PWD/$BASE_SRC/build/apps/wholestore" ||
    tail -n 20 "$out/build-base.log"
fi
if want tests; then
  sel=(-L gpu)
  [ -n "${TESTS:-}" ] && sel=(-R "$TESTS")
  step "ctest ${sel[*]}"
  timeout "${GPU_TESTS_TIMEOUT:-240}" ctest --test-dir build "${sel[@]}" -j 4 --timeout 200 \
    >"$out/gpu-tests.log" 2>&1
  echo "rc=$? $(grep -E 'tests passed|failed out of' "$out/gpu-tests.log")"
  grep -E '\*\*\*(Failed|Timeout|Exception)|Not Run' "$out/gpu-tests.log" | head -20
fi

# $1 binary, $2 ranks, $3 log name, then the command's arguments.
on_ranks() {
  local bin=$1 n=$2 log=$3
  shift 3
  if [ "$n" = 1 ]; then
    timeout "${RUN_TIMEOUT:-150}" "$bin" "$@" >"$out/$log.log" 2>&1
  else
    timeout "${RUN_TIMEOUT:-150}" "$bin" launch -n "$n" -- "$bin" "$@" >"$out/$log.log" 2>&1
  fi
  echo "rc=$? ($log)"
}

if want embedding; then
  emb=(bench configs/bench_embedding.yaml --set optimizers=adam --set batches=1048576
    --set streams=uniform,powerlaw --set types=continuous,distributed --set cache=false
    --set repeats=10)
  for n in $ranks; do
    [ "$n" -gt "$gpus" ] && continue
    if [ -n "$base" ] && [[ " ${BASE_FOR:-embedding train} " == *" embedding "* ]]; then
      step "embedding bench, $n GPU(s), baseline"
      on_ranks "$base" "$n" "emb-base-$n" "${emb[@]}"
      grep -E 'adam' "$out/emb-base-$n.log" | head -20
    fi
    step "embedding bench, $n GPU(s)"
    on_ranks "$b" "$n" "emb-$n" "${emb[@]}"
    grep -E 'adam|case' "$out/emb-$n.log" | head -20
    if [ -n "${BENCH_VARIANT:-}" ] && [ "$n" -gt 1 ]; then
      step "embedding bench, $n GPU(s), $BENCH_VARIANT"
      on_ranks "$b" "$n" "emb-args-$n" "${emb[@]}" $BENCH_VARIANT
      grep -E 'adam' "$out/emb-args-$n.log" | head -20
    fi
    if [ -n "${VARIANT:-}" ] && [ "$n" -gt 1 ]; then
      step "embedding bench, $n GPU(s), $VARIANT"
      (export $VARIANT; on_ranks "$b" "$n" "emb-variant-$n" "${emb[@]}")
      grep -E 'adam|lookup|speed-up|host waits' "$out/emb-variant-$n.log" | head -20
    fi
  done
fi

if want train; then
  tr=(train configs/train.yaml --set gen.num_nodes=2449029 --set gen.num_edges=61859140
    --set device=gpu --set graph.location=device --set table.location=device
    --set batch_size=233472 --set optimizer=adam --set lr=0.01 --set epochs=1
    --set walks_per_node=1 --set holdout=0.01 --set eval_every=0 ${TRAIN_EXTRA:-})
  for n in ${TRAIN_RANKS:-$ranks}; do
    [ "$n" -gt "$gpus" ] && continue
    if [ -n "$base" ] && [[ " ${BASE_FOR:-embedding train} " == *" train "* ]]; then
      step "train products-shaped, $n GPU(s), baseline"
      on_ranks "$base" "$n" "train-base-$n" "${tr[@]}"
      grep -E '^summary|^  (step|gpu) ' "$out/train-base-$n.log"
    fi
    if [[ " ${TRAIN_BASE_RANKS:-$n} " == *" $n "* ]]; then
      step "train products-shaped, $n GPU(s)"
      on_ranks "$b" "$n" "train-$n" "${tr[@]}"
      grep -E 'summary|  (step|gpu) |error' "$out/train-$n.log" | head -8
    fi
    v=0
    IFS=';' read -ra variants <<<"${TRAIN_VARIANT:-}"
    for args in "${variants[@]}"; do
      v=$((v + 1))
      step "train products-shaped, $n GPU(s), $args"
      on_ranks "$b" "$n" "train-args$v-$n" "${tr[@]}" $args
      grep -E 'summary|  (step|gpu|schedule|blocks) |error' "$out/train-args$v-$n.log" | head -8
    done
    if [ -n "${VARIANT:-}" ] && [ "$n" -gt 1 ]; then
      step "train products-shaped, $n GPU(s), $VARIANT"
      (export $VARIANT; on_ranks "$b" "$n" "train-variant-$n" "${tr[@]}")
      grep -E 'summary|  (step|gpu) |error' "$out/train-variant-$n.log" | head -8
    fi
  done
  if [ -n "${FACEBOOK:-}" ]; then
    fb=(train configs/train.yaml --set dataset="$FACEBOOK" --set device=gpu
      --set graph.location=device --set table.location=device)
    most=$(for n in ${TRAIN_RANKS:-$ranks}; do [ "$n" -le "$gpus" ] && echo "$n"; done | tail -1)
    for n in 1 $most; do
      if [ "$n" = 1 ]; then
        step "train ego-Facebook, $n GPU(s)"
        on_ranks "$b" "$n" "fb-$n" "${fb[@]}"
        grep -E 'summary|error' "$out/fb-$n.log" | head -3
      fi
      if [ -n "${TRAIN_VARIANT:-}" ]; then
        args=${TRAIN_VARIANT%%;*}
        step "train ego-Facebook, $n GPU(s), $args"
        on_ranks "$b" "$n" "fb-args-$n" "${fb[@]}" $args
        grep -E 'summary|error' "$out/fb-args-$n.log" | head -3
      fi
    done
  fi
fi
step done
