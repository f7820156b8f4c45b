#!/usr/bin/env python3
"""Per-kernel totals of an `ncu --metrics gpu__time_duration.sum --print-summary per-kernel` report.

    tools/gpu/ncu_summary.py REPORT.txt [--top N]

Prints the sum of the kernels' durations (with real clocks, compare it with the step time: the
difference is the launch gaps) and, per kernel and launch shape, calls x average = total and the
share, largest first. Stdlib only.
"""
import argparse
import re
import sys

HEADER = re.compile(r"\s+(.*?) \((\d+), (\d+), (\d+)\)x\((\d+), (\d+), (\d+)\), Device.*Invocations (\d+)")
METRIC = re.compile(r"\s+gpu__time_duration\.sum\s+(\w+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)")
UNIT_US = {"ns": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3, "s": 1e6, "second": 1e6}


def parse(lines):
    rows, current = [], None
    for line in lines:
        m = HEADER.match(line)
        if m:
            grid = "x".join(m.group(i) for i in (2, 3, 4))
            current = (m.group(1), f"{grid} / {m.group(5)}", int(m.group(8)))
            continue
        m = METRIC.match(line)
        if m and current:
            unit = UNIT_US.get(m.group(1))
            if unit is None:
                raise SystemExit(f"unknown time unit {m.group(1)!r}")
            average = float(m.group(4)) * unit
            rows.append((current[0], current[1], current[2], average, average * current[2]))
            current = None
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("report")
    ap.add_argument("--top", type=int, default=20)
    a = ap.parse_args()
    with open(a.report, encoding="utf-8", errors="replace") as f:
        rows = parse(f)
    if not rows:
        sys.exit("no per-kernel gpu__time_duration.sum summary in the report")
    total = sum(r[4] for r in rows)
    print(f"sum of kernel durations: {total:.0f} us over {sum(r[2] for r in rows)} launches")
    for name, shape, calls, average, t in sorted(rows, key=lambda r: -r[4])[: a.top]:
        print(f"{t:9.0f} us {100 * t / total:5.1f}%  {calls:4d} x {average:8.2f} us  {shape:22s} {name[:80]}")


if __name__ == "__main__":
    main()
