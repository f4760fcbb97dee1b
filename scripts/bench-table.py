#!/usr/bin/env python3
"""Turns `wholestore bench` gather output (stdout, any rank prefix) into markdown tables:
one table per memory location, rows = op/type/order, columns = row sizes, cells =
"GB/s per rank (percent of the ceiling)".
Usage: scripts/bench-table.py bench-1gpu.txt [device-ceiling-GB/s]
(the optional figure replaces the device-memory ceiling, to recompute older runs' ratios)"""
import re
import sys
from collections import OrderedDict

LINE = re.compile(
    r"(gather|scatter)\s+(\w+)\s+(device|host)\s+(\w+)\s+(\d+) B\s+([\d.]+) ms\s+([\d.]+) "
    r"GB/s/rank\s+([\d.]+) GB/s total\s+([\d.]+)% of (.+?) \(([\d.]+) GB/s\)")


def main(path, device_ceiling=None):
    tables = OrderedDict()
    sizes = []
    for line in open(path):
        m = LINE.search(line)
        if not m:
            continue
        op, mtype, loc, order, size, _ms, gbps, _total, pct, ceil_name, ceil = m.groups()
        size = int(size)
        if size not in sizes:
            sizes.append(size)
        if device_ceiling is not None and loc == "device":
            ceil_name, ceil = "recomputed", f"{device_ceiling:.1f}"
            pct = 100.0 * float(gbps) / device_ceiling
        key = (loc, ceil_name, ceil)
        tables.setdefault(key, OrderedDict()).setdefault((op, mtype, order), {})[size] = (
            float(gbps), float(pct))
    for (loc, ceil_name, ceil), rows in tables.items():
        print(f"\n**{loc} memory; ceiling = {ceil_name} ({ceil} GB/s)** "
              "(GB/s per rank, and % of the ceiling)\n")
        print("| op | type | order | " + " | ".join(f"{s} B" for s in sizes) + " |")
        print("|---|---|---|" + "---|" * len(sizes))
        for (op, mtype, order), cells in rows.items():
            vals = [f"{cells[s][0]:.0f} ({cells[s][1]:.0f}%)" if s in cells else "" for s in sizes]
            print(f"| {op} | {mtype} | {order} | " + " | ".join(vals) + " |")


if __name__ == "__main__":
    main(sys.argv[1], float(sys.argv[2]) if len(sys.argv) > 2 else None)
