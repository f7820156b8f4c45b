#!/usr/bin/env python3
"""Summarises a kernel timeline written by tools/gpu/kernel_trace.cpp (CSV: start_ns, end_ns, ctas,
threads, name).

The kernels of one stream complete in order, so a kernel's share of the step is the time from the
previous kernel's end to its own end ("cost"), split into the gap before it started (launch or host
gaps: when it began after the previous one ended) and the rest. With programmatic dependent launch a
kernel often starts before its predecessor ends; its duration (end - start) then exceeds its cost.

  python3 tools/gpu/kernel_trace_summary.py trace.csv [--window N]

prints the span, the sum of costs per kernel (name and CTA count), and N consecutive kernels from the
middle of the trace (one layer's pattern).
"""
import argparse
import csv
import shutil
import subprocess
import sys


def demangle(names):
    if not names or shutil.which("c++filt") is None:
        return {n: n for n in names}
    out = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True).stdout.splitlines()
    return dict(zip(names, out)) if len(out) == len(names) else {n: n for n in names}


def short(name, width=70):
    # "void ns::kernels::(anonymous namespace)::foo<G>(Params)" -> "foo<G>"
    n = name.replace("(anonymous namespace)::", "")
    if "(" in n and not n.startswith("("):
        n = n[: n.index("(")]
    n = n.replace("specserve::cuda::", "").replace("kernels::", "").replace("void ", "") or name
    return n if len(n) <= width else n[: width - 1] + "…"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("--window", type=int, default=14)
    a = ap.parse_args()
    rows = []
    with open(a.csv) as f:
        for r in csv.DictReader(f):
            # Kernels only: the clock row ("clock:cupti", its end on another clock) and the runtime calls
            # ("api:...") have no CTAs.
            if int(r["ctas"]) == 0:
                continue
            rows.append((int(r["start_ns"]), int(r["end_ns"]), int(r["ctas"]), int(r["threads"]), r["name"]))
    if not rows:
        print("no kernels in the trace")
        return 1
    rows.sort(key=lambda r: r[1])
    names = demangle(sorted({r[4] for r in rows}))
    t0 = min(r[0] for r in rows)
    span = rows[-1][1] - t0
    per = {}
    prev_end = rows[0][0]
    gaps = 0
    seq = []
    for s, e, ctas, threads, name in rows:
        gap = max(0, s - prev_end)
        cost = e - prev_end
        gaps += gap
        key = (short(names[name]), ctas)
        c = per.setdefault(key, [0, 0, 0, 0])
        c[0] += 1
        c[1] += cost
        c[2] += e - s
        c[3] += gap
        seq.append((s - t0, e - t0, cost, gap, ctas, short(names[name], 60)))
        prev_end = e
    print(f"{len(rows)} kernels, span {span / 1e6:.3f} ms, gaps (a kernel starting after its predecessor ended) "
          f"{gaps / 1e6:.3f} ms")
    print(f"{'kernel':70s} {'CTAs':>6s} {'n':>5s} {'cost ms':>8s} {'share':>6s} {'cost µs':>8s} {'dur µs':>7s} {'gap µs':>7s}")
    for (name, ctas), (n, cost, dur, gap) in sorted(per.items(), key=lambda kv: -kv[1][1]):
        print(f"{name:70s} {ctas:6d} {n:5d} {cost / 1e6:8.3f} {cost / span:6.1%} {cost / n / 1e3:8.2f} "
              f"{dur / n / 1e3:7.2f} {gap / n / 1e3:7.2f}")
    mid = max(0, len(seq) // 2 - a.window // 2)
    print(f"\nkernels {mid} .. {mid + a.window - 1} (µs from the first start):")
    print(f"{'start':>9s} {'end':>9s} {'cost':>7s} {'gap':>6s} {'CTAs':>6s}  kernel")
    for s, e, cost, gap, ctas, name in seq[mid: mid + a.window]:
        print(f"{s / 1e3:9.2f} {e / 1e3:9.2f} {cost / 1e3:7.2f} {gap / 1e3:6.2f} {ctas:6d}  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
