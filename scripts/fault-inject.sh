#!/usr/bin/env bash
# Fault injection: kills (SIGKILL) or stops (SIGSTOP) one process of a `wholestore sample` or
# `demo` run of FAULT_RANKS ranks (default 2) at a random moment, with and without
# `wholestore launch`, on the CPU path or (FAULT_GPU=1) on the GPU path, and checks what a user
# would see afterwards:
#   - every process ends within about one timeout (a stopped rank started by hand is resumed
#     once its peer has ended, and must then end too), with a nonzero exit code;
#   - each rank prints at most one error, which leads with the problem (no source location
#     first), and nothing that looks like a crash (segfault, abort, "terminate called", ...);
#   - no process of the run is left, and nothing new is left in /dev/shm, /tmp or the ranks'
#     TMPDIR.
# A fault that lands after its target has exited is counted apart; that run must have succeeded.
#
# Usage: scripts/fault-inject.sh [path/to/wholestore]   (default: build-nocuda/, else build/)
# Knobs (environment): FAULT_CASES (default 100), FAULT_SEED (default: random; printed, so a
# run can be repeated), FAULT_TIMEOUT (WHOLESTORE_TIMEOUT of the runs, seconds, default 2),
# FAULT_OUT (logs; default <build>/fault-inject), FAULT_PRIVATE_TMP (1: run in a mount
# namespace with empty /tmp and /dev/shm, so that leftovers are told apart from other
# programs' files exactly; default: when unshare works, which needs root), FAULT_RANKS (ranks
# per run, default 2), FAULT_GPU (1: the GPU sampler on graphs in device memory and `demo` on
# device memory, ranks sharing the GPUs round-robin; distributed memory only when every rank
# has a GPU of its own, as NCCL needs; default 0: the CPU path).
# The CPU path needs no GPU; two cores are enough (a full default run takes about 7 minutes).
# Exit status: 0 when every case survived, 1 otherwise (the failed cases' logs stay in FAULT_OUT).
set -uo pipefail
script=$(cd "$(dirname "$0")" && pwd)/$(basename "$0")
cd "$(dirname "$0")/.."

bin=${1:-}
if [ -z "$bin" ]; then
  for b in build-nocuda/apps/wholestore build/apps/wholestore; do [ -x "$b" ] && bin=$b && break; done
fi
[ -n "$bin" ] && [ -x "$bin" ] || { echo "usage: $0 [path/to/wholestore] (none built)" >&2; exit 2; }
bin=$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")
cases=${FAULT_CASES:-100}
timeout_s=${FAULT_TIMEOUT:-2}
ranks=${FAULT_RANKS:-2}
gpu=${FAULT_GPU:-0}
[[ "$ranks" =~ ^[0-9]+$ ]] && [ "$ranks" -ge 2 ] || { echo "fault-inject: FAULT_RANKS must be >= 2" >&2; exit 2; }
out=${FAULT_OUT:-$(dirname "$(dirname "$bin")")/fault-inject}

# A private /tmp and /dev/shm: nothing but the runs can put files there.  Not when the script,
# the program or the logs live under one of them (a checkout in /tmp, as CI may have): the
# fresh mounts would hide them.
under_tmp=0
for p in "$script" "$bin" "$out"; do
  case "$p" in /tmp | /tmp/* | /dev/shm | /dev/shm/*) under_tmp=1 ;; esac
done
if [ "${FAULT_PRIVATE_TMP:-auto}" = 1 ] && [ "$under_tmp" = 1 ]; then
  echo "fault-inject: FAULT_PRIVATE_TMP=1, but the script, program or logs are under /tmp or" \
    "/dev/shm, which the private mounts would hide" >&2
  exit 2
fi
if [ -z "${FAULT_IN_NAMESPACE:-}" ] && [ "${FAULT_PRIVATE_TMP:-auto}" != 0 ] &&
  [ "$under_tmp" = 0 ] && unshare -m --propagation private true 2>/dev/null; then
  mkdir -p "$out"
  exec unshare -m --propagation private env FAULT_IN_NAMESPACE=1 FAULT_OUT="$out" bash -c \
    'mount -t tmpfs fault-tmp /tmp && mount -t tmpfs fault-shm /dev/shm && exec "$0" "$@"' \
    "$script" "$bin"
fi
if [ "${FAULT_PRIVATE_TMP:-auto}" = 1 ] && [ -z "${FAULT_IN_NAMESPACE:-}" ]; then
  echo "fault-inject: FAULT_PRIVATE_TMP=1 but unshare -m does not work here" >&2
  exit 2
fi

seed=${FAULT_SEED:-$(((RANDOM << 15) | RANDOM))}
RANDOM=$seed
rm -rf "$out"
mkdir -p "$out"
deadline_s=$((2 * timeout_s + 10))  # the longest a case may take to end after its fault

# Files in /tmp and /dev/shm that were not there before (other programs' files excluded as far
# as names allow, when not in a private namespace).
snapshot() { (ls -A /tmp /dev/shm 2>/dev/null | sort) >"$1"; }
new_files() {
  local now
  now=$(mktemp -p "$out")
  snapshot "$now"
  comm -13 "$1" "$now" | grep -v -e '^/' -e '^$' |
    if [ -n "${FAULT_IN_NAMESPACE:-}" ]; then cat; else grep -Ev '^(cc|tmp\.|ccache|ninja|ctest)'; fi
  rm -f "$now"
}

# Live (not zombie) processes whose environment carries FAULT_CASE=$1.
case_processes() {
  local env pid state
  for env in /proc/[0-9]*/environ; do
    pid=${env#/proc/}
    pid=${pid%/environ}
    { tr '\0' '\n' <"$env"; } 2>/dev/null | grep -qx "FAULT_CASE=$1" || continue
    state=$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null) || continue
    [ -n "$state" ] && [ "$state" != Z ] && echo "$pid"
  done
}

alive() {  # <pid>: running or stopped, not a zombie
  local state
  state=$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)
  [ -n "$state" ] && [ "$state" != Z ]
}

# Waits until <pid> (a child of this shell) ends or <seconds> pass; sets wait_rc (its status,
# or 255 when it did not end in time).
wait_bounded() {
  local pid=$1 limit=$(($(date +%s%N) + $2 * 1000000000))
  while alive "$pid"; do
    if [ "$(date +%s%N)" -gt $limit ]; then
      wait_rc=255
      return
    fi
    sleep 0.05
  done
  wait "$pid" 2>/dev/null
  wait_rc=$?
}

# Sends $sig to <pid> and sets hit: 1 when the fault landed.  A SIGSTOP that finds the process
# gone or a zombie within 0.2 s did not land: it was already exiting (its work done, not yet
# reaped), could not stop, and its run must then end well.
signal_victim() {
  local pid=$1 state
  kill -"$sig" "$pid" 2>/dev/null || { hit=0; return; }
  hit=1
  [ "$sig" = STOP ] || return
  for _ in 1 2 3 4; do
    state=$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null)
    case "$state" in
      T | t) return ;;
      '' | Z | X) hit=0; return ;;
    esac
    sleep 0.05
  done  # still running (e.g. in the kernel): the stop will land, count it
}

# The pid of rank <r> among the children of launcher <pid>, waiting up to 3 s for it to start.
launched_rank() {
  local launcher=$1 r=$2 child
  for _ in $(seq 1 60); do
    for child in $(pgrep -P "$launcher"); do
      { tr '\0' '\n' <"/proc/$child/environ"; } 2>/dev/null | grep -qx "RANK=$r" && { echo "$child"; return; }
    done
    sleep 0.05
  done
}

# Checks the messages of one process's log (launch: the lines of one rank); appends problems.
check_messages() {  # <label> <text> <must have one error: 0/1>
  local label=$1 text=$2 must=$3 errors
  errors=$(grep -c "error" <<<"$text")
  if [ "$errors" -gt 1 ]; then
    problems+=("$label printed $errors errors, not one")
  fi
  if [ "$must" = 1 ] && [ "$errors" -eq 0 ]; then
    problems+=("$label printed no error")
  fi
  if grep -Eq "error: [A-Za-z0-9_./-]+\.(cpp|hpp|cu|cuh|h):[0-9]+:" <<<"$text"; then
    problems+=("$label's error leads with a source location: $(grep -m1 error <<<"$text")")
  fi
  if grep -Eqi "segmentation|aborted|core dumped|terminate called|double free|corrupted|sanitizer|freeing" <<<"$text"; then
    problems+=("$label shows a crash: $(grep -Eim1 "segmentation|abort|core|terminate|free|corrupt|sanitizer" <<<"$text")")
  fi
}

# One dataset for the load cases.
"$bin" gen --set num_nodes=20000 --set num_edges=200000 --set feature_dim=16 --set weights=true \
  --set output="$out/ds" >"$out/gen.log" 2>&1 || { echo "fault-inject: gen failed: $(tail -3 "$out/gen.log")" >&2; exit 2; }

types=(continuous chunked distributed)
path_args=(--set sampler=cpu)
demo_args=()
if [ "$gpu" = 1 ]; then
  gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU [0-9]' || true)
  [ "${gpus:-0}" -ge 1 ] || { echo "fault-inject: FAULT_GPU=1 but no GPU is visible" >&2; exit 2; }
  path_args=(--set sampler=gpu --set graph.location=device)
  demo_args=(--set memory.location=device)
  # Ranks sharing a GPU use the host communicator: distributed memory needs NCCL.
  [ "$gpus" -ge "$ranks" ] || types=(continuous chunked)
fi
workloads=(sample-gen sample-load demo)

# The command line of a workload on a memory type.
workload_args() {  # <workload> <type>; sets args
  case $1 in
    sample-gen)
      args=(sample "${path_args[@]}" --set gen.num_nodes=20000 --set gen.num_edges=200000
        --set gen.feature_dim=16 --set batch_size=256 --set epochs=10 --set threads=1
        --set graph.type="$2") ;;
    sample-load)
      args=(sample "${path_args[@]}" --set dataset="$out/ds" --set batch_size=256 --set epochs=10
        --set threads=1 --set graph.type="$2" --set load.verify_checksums=true) ;;
    demo)
      args=(demo --set memory.size_mib=256 --set memory.type="$2" "${demo_args[@]}") ;;
  esac
}

# Faults land anywhere from the start to the end of a run: time one undisturbed run of each
# workload and type on this machine (under launch, FAULT_RANKS ranks).
declare -A run_ms
for workload in "${workloads[@]}"; do
  for type in "${types[@]}"; do
    workload_args "$workload" "$type"
    t0=$(date +%s%N)
    "$bin" launch -n "$ranks" -- "$bin" "${args[@]}" >"$out/calibrate.log" 2>&1 ||
      { echo "fault-inject: $workload $type fails without a fault: $(tail -3 "$out/calibrate.log")" >&2; exit 2; }
    run_ms[$workload-$type]=$((($(date +%s%N) - t0) / 1000000))
  done
done
tried=0 landed=0 missed=0 survived=0
declare -A landed_by survived_by
failed_cases=()
echo "fault-inject: $cases cases, $ranks ranks, $([ "$gpu" = 1 ] && echo "GPU path" || echo "CPU path"), seed $seed, WHOLESTORE_TIMEOUT=$timeout_s, binary $bin, logs $out" \
  "$([ -n "${FAULT_IN_NAMESPACE:-}" ] && echo "(private /tmp and /dev/shm)")"
echo "undisturbed runs (ms):$(for k in "${!run_ms[@]}"; do echo -n " $k ${run_ms[$k]}"; done)"
start_all=$(date +%s)
# The shell's own notes on killed background jobs ("Killed  RANK=1 ...") go to a file.
exec 3>&2 2>>"$out/shell.log"

for ((c = 1; c <= cases; c++)); do
  workload=${workloads[RANDOM % 3]}
  type=${types[RANDOM % ${#types[@]}]}
  # (No $RANDOM inside $(...): a subshell draws from a sequence of its own.)
  if ((RANDOM % 2)); then mode=hand; else mode=launch; fi
  if ((RANDOM % 2)); then sig=STOP; else sig=KILL; fi
  target=$((RANDOM % ranks))
  # With launch, a third of the SIGKILLs go to the launcher itself.
  [ "$mode" = launch ] && [ "$sig" = KILL ] && [ $((RANDOM % 3)) = 0 ] && target=launcher
  workload_args "$workload" "$type"
  max_delay_ms=${run_ms[$workload-$type]}
  delay_ms=$(((RANDOM * 32768 + RANDOM) % (max_delay_ms + 1)))
  what="$workload $type, $mode, SIG$sig $([ "$target" = launcher ] && echo launcher || echo "rank $target") at $delay_ms ms"
  dir="$out/case-$c"
  mkdir -p "$dir/tmp"
  snapshot "$dir/before"
  id="fault-$$-$c"
  port=$((20000 + RANDOM % 40000))
  problems=()
  tried=$((tried + 1))
  export FAULT_CASE=$id TMPDIR="$dir/tmp" WHOLESTORE_TIMEOUT=$timeout_s
  case_start=$(date +%s%N)

  if [ "$mode" = launch ]; then
    "$bin" launch -n "$ranks" -- "$bin" "${args[@]}" >"$dir/launch.log" 2>&1 &
    launcher=$!
    sleep "$(printf '%d.%03d' $((delay_ms / 1000)) $((delay_ms % 1000)))"
    if [ "$target" = launcher ]; then victim=$launcher; else victim=$(launched_rank "$launcher" "$target"); fi
    if [ -n "$victim" ] && alive "$victim"; then
      signal_victim "$victim"
    else
      hit=0
    fi
    resumed=0
    if [ "$sig" = STOP ] && [ $hit = 1 ]; then
      # Stopped after the other rank's last collective, the job is paused, not broken: the
      # launcher rightly waits.  Resume it as a user would; it must then end well.
      wait_bounded "$launcher" $((timeout_s + 6))
      if [ $wait_rc -eq 255 ]; then
        kill -CONT "$victim" 2>/dev/null
        resumed=1
        wait_bounded "$launcher" "$deadline_s"
      fi
    else
      wait_bounded "$launcher" "$deadline_s"
    fi
    launch_rc=$wait_rc
    # A SIGKILL sent to a process that was exiting (0) between our look and the signal missed.
    [ "$sig" = KILL ] && [ $launch_rc -eq 0 ] && hit=0
    [ $launch_rc -eq 255 ] && problems+=("launch did not end within $deadline_s s")
    log=$(cat "$dir/launch.log")
    if [ $hit = 1 ]; then
      [ $launch_rc -ne 0 ] || [ $resumed = 1 ] || problems+=("launch exited 0 after the fault")
      if [ "$target" != launcher ]; then
        for ((r = 0; r < ranks; r++)); do check_messages "rank $r" "$(grep "^\[rank $r\]" <<<"$log")" 0; done
        # Somebody must say what happened: a rank's error or launch's report of the fault.
        [ $resumed = 1 ] && [ $launch_rc -eq 0 ] || grep -Eq "error: |wholestore launch: rank [0-9]+ (killed by signal|exited with status)" <<<"$log" ||
          problems+=("nothing says what happened")
      fi
      outcome="launch exit $launch_rc$([ $resumed = 1 ] && echo ", the job waited for the stopped rank and ended after SIGCONT")"
    else
      [ $launch_rc -eq 0 ] || problems+=("the run ended before the fault but launch exited $launch_rc")
      outcome="ended before the fault (launch exit $launch_rc)"
    fi
  else
    pids=()
    for ((r = 0; r < ranks; r++)); do
      RANK=$r WORLD_SIZE=$ranks LOCAL_RANK=$r LOCAL_WORLD_SIZE=$ranks MASTER_ADDR=127.0.0.1 \
        MASTER_PORT=$port WHOLESTORE_JOB_TOKEN=$id "$bin" "${args[@]}" >"$dir/rank$r.log" 2>&1 &
      pids[r]=$!
    done
    sleep "$(printf '%d.%03d' $((delay_ms / 1000)) $((delay_ms % 1000)))"
    victim=${pids[target]}
    if alive "$victim"; then
      signal_victim "$victim"
    else
      hit=0
    fi
    # Every other rank ends on its own; each has the whole deadline from the fault.
    declare -A other_rc=()
    for ((r = 0; r < ranks; r++)); do
      [ "$r" = "$target" ] && continue
      wait_bounded "${pids[r]}" "$deadline_s"
      other_rc[$r]=$wait_rc
      [ $wait_rc -eq 255 ] && problems+=("rank $r did not end within $deadline_s s of the fault")
    done
    if [ "$sig" = STOP ] && [ $hit = 1 ]; then
      kill -CONT "$victim" 2>/dev/null  # as a user would: the job is over, let it go
    fi
    wait_bounded "$victim" "$deadline_s"
    victim_rc=$wait_rc
    [ "$sig" = KILL ] && [ $victim_rc -eq 0 ] && hit=0  # as above
    [ $victim_rc -eq 255 ] && problems+=("rank $target did not end within $deadline_s s after SIGCONT")
    all_ok=1
    for r in "${!other_rc[@]}"; do [ "${other_rc[$r]}" -eq 0 ] || all_ok=0; done
    if [ $hit = 1 ]; then
      # A survivor reports an error and exits 1, unless the fault came after its last
      # collective: then it ends well (0, no error).  The stopped rank, resumed, likewise.
      for r in "${!other_rc[@]}"; do
        if [ "${other_rc[$r]}" -eq 0 ]; then
          grep -q error "$dir/rank$r.log" && problems+=("rank $r exited 0 after an error")
        else
          [ "${other_rc[$r]}" -eq 1 ] || problems+=("rank $r exited ${other_rc[$r]}, not 1")
        fi
        check_messages "rank $r" "$(cat "$dir/rank$r.log")" $([ "${other_rc[$r]}" -ne 0 ] && echo 1 || echo 0)
      done
      if [ "$sig" = KILL ]; then
        [ $victim_rc -eq 137 ] || problems+=("the killed rank exited $victim_rc")
      elif [ $victim_rc -eq 0 ]; then
        grep -q error "$dir/rank$target.log" && problems+=("the resumed rank exited 0 after an error")
      else
        [ $victim_rc -eq 1 ] || problems+=("the resumed rank exited $victim_rc, not 1")
      fi
      check_messages "rank $target" "$(cat "$dir/rank$target.log")" 0
      outcome="ranks exit$(for ((r = 0; r < ranks; r++)); do [ "$r" = "$target" ] && echo -n " $victim_rc" || echo -n " ${other_rc[$r]}"; done)"
    else
      [ $all_ok = 1 ] && [ $victim_rc -eq 0 ] ||
        problems+=("the run ended before the fault but exited$(for r in "${!other_rc[@]}"; do echo -n " ${other_rc[$r]}"; done) / $victim_rc")
      outcome="ended before the fault"
    fi
    unset other_rc
  fi
  seconds=$(awk -v ns=$(($(date +%s%N) - case_start)) 'BEGIN { printf "%.1f", ns / 1e9 }')
  unset FAULT_CASE TMPDIR WHOLESTORE_TIMEOUT

  # Nothing of the run may be left: processes (a short grace for the death signals to land),
  # files in /tmp, /dev/shm and its TMPDIR.
  left=""
  for _ in $(seq 1 60); do
    left=$(case_processes "$id" | tr '\n' ' ')
    [ -z "$left" ] && break
    sleep 0.05
  done
  if [ -n "$left" ]; then
    problems+=("processes left: $(for p in $left; do tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | cut -c1-60; echo -n "($p) "; done)")
    kill -KILL $left 2>/dev/null
  fi
  files=$(new_files "$dir/before" | tr '\n' ' ')
  [ -n "$files" ] && problems+=("new in /tmp or /dev/shm: $files")
  [ -n "$(ls -A "$dir/tmp")" ] && problems+=("left in TMPDIR: $(ls -A "$dir/tmp" | tr '\n' ' ')")

  if [ $hit = 1 ]; then
    landed=$((landed + 1))
    key="$mode SIG$sig$([ "$target" = launcher ] && echo " (launcher)")"
    landed_by[$key]=$((${landed_by[$key]:-0} + 1))
  else
    missed=$((missed + 1))
  fi
  if [ ${#problems[@]} -eq 0 ]; then
    survived=$((survived + 1))
    [ $hit = 1 ] && survived_by[$key]=$((${survived_by[$key]:-0} + 1))
    echo "case $c/$cases: $what: ok, $outcome, ${seconds} s"
    rm -rf "$dir"
  else
    failed_cases+=("$c")
    echo "case $c/$cases: $what: FAILED, $outcome, ${seconds} s"
    for p in "${problems[@]}"; do echo "    - $p"; done
  fi
done

elapsed=$(($(date +%s) - start_all))
echo
echo "fault-inject: seed $seed, $tried cases in ${elapsed} s: $landed faults landed, $missed after" \
  "the run had ended; $survived of $tried survived"
for key in "launch SIGKILL" "launch SIGKILL (launcher)" "launch SIGSTOP" "hand SIGKILL" \
  "hand SIGSTOP"; do
  echo "  $key: ${survived_by[$key]:-0} of ${landed_by[$key]:-0} landed faults survived"
done
if [ ${#failed_cases[@]} -ne 0 ]; then
  echo "failed cases: ${failed_cases[*]} (logs in $out/case-N)"
  exit 1
fi
