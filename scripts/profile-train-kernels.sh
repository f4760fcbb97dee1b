#!/usr/bin/env bash
# Per-kernel GPU time of `wholestore train`'s step on the products-shaped R-MAT (the command of
# scripts/device-train.sh), from Nsight Compute's kernel durations over a window of launches in
# the steady state: which kernels take the step's time.  Needs ncu (the device machine) and a
# built build/.  Writes $OUT/ncu-train.csv and prints the kernels by total time.
#   SKIP=20000 COUNT=120 scripts/profile-train-kernels.sh
set -uo pipefail
cd "$(dirname "$0")/.."
final=${OUT:-/tmp/wholestore-out}
mkdir -p "$final"
ncu --clock-control none --launch-skip "${SKIP:-20000}" --launch-count "${COUNT:-120}" \
  --metrics gpu__time_duration.sum --csv \
  build/apps/wholestore train configs/train.yaml --set gen.num_nodes=2449029 \
  --set gen.num_edges=61859140 --set device=gpu --set graph.location=device \
  --set table.location=device --set batch_size=233472 --set optimizer=adam --set lr=0.01 \
  --set epochs=1 --set walks_per_node=1 --set holdout=0.01 --set eval_every=0 \
  >"$final/ncu-train.csv" 2>"$final/ncu-train.err"
echo "rc=$?"
python3 - "$final/ncu-train.csv" <<'PY'
import csv, sys, collections, re
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
head = rows[0]
name_at, value_at = head.index("Kernel Name"), head.index("Metric Value")
unit_at = head.index("Metric Unit")
to_us = {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3}
total = collections.Counter()
calls = collections.Counter()
for r in rows[1:]:
    try:
        v = float(r[value_at].replace(",", ""))
    except ValueError:
        continue
    name = re.sub(r"\(.*$", "", r[name_at].removeprefix("void "))[-70:]
    total[name] += v * to_us.get(r[unit_at], 1.0)
    calls[name] += 1
all_us = sum(total.values())
print(f"{len(rows) - 1} launches, {all_us:.0f} us of kernel time")
for name, us in total.most_common(25):
    print(f"{us:10.1f} us {100 * us / all_us:5.1f}%  {calls[name]:4d}x  {name}")
# SEQ=N: the last N launches in launch order with their grids (which table a kernel served).
seq = int(__import__("os").environ.get("SEQ", "0"))
if seq:
    grid_at = head.index("Grid Size") if "Grid Size" in head else None
    print(f"last {seq} launches in order:")
    for r in rows[1:][-seq:]:
        try:
            v = float(r[value_at].replace(",", "")) * to_us.get(r[unit_at], 1.0)
        except ValueError:
            continue
        name = re.sub(r"\(.*$", "", r[name_at].removeprefix("void "))[-60:]
        grid = r[grid_at] if grid_at is not None else ""
        print(f"{v:9.1f} us  {grid:>18}  {name}")
PY
