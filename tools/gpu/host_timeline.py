#!/usr/bin/env python3
"""Where a step's wall time goes: the engine's stage clock (SPECSERVE_STEP_TRACE) read against a
kernel_trace.cpp CSV recorded with SPECSERVE_TRACE_API=1 (kernels, CUDA runtime calls, and the row that
aligns CUPTI's clock with CLOCK_MONOTONIC).

  python3 tools/gpu/host_timeline.py trace.csv steps.csv [--engine N] [--skip K]

For each engine (one header line of steps.csv each) it prints the median over its steps (after the first
K) of: each stage's host time, the GPU's busy time inside the step, the GPU's idle time, and the host
time inside the forward stage spent blocked in synchronising runtime calls; then the runtime calls the
steps made, by total host time.
"""
import argparse
import bisect
import collections
import csv
import statistics

STAGES = ["schedule", "plan", "layout", "forward", "commit", "context", "stream", "propose", "retire"]
SYNC = ("cudaStreamSynchronize", "cudaMemcpy_", "cudaDeviceSynchronize", "cudaEventSynchronize", "cudaMemcpy_v")


def load_trace(path):
    kernels, api, offset = [], [], None
    with open(path) as f:
        r = csv.reader(f)
        next(r)
        for row in r:
            start, end, ctas, threads, name = int(row[0]), int(row[1]), int(row[2]), int(row[3]), ",".join(row[4:])
            if name.startswith("clock:"):
                offset = end - start  # monotonic - cupti
            elif name.startswith("api:"):
                api.append((start, end, name[4:]))
            else:
                kernels.append((start, end))
    if offset is None:
        raise SystemExit("no clock row: record with SPECSERVE_TRACE_API=1")
    kernels = sorted((s + offset, e + offset) for s, e in kernels)
    api = sorted((s + offset, e + offset, n) for s, e, n in api)
    return kernels, api


def load_steps(path):
    engines, cur = [], None
    with open(path) as f:
        for line in f:
            if line.startswith("step,"):
                cur = []
                engines.append(cur)
                continue
            v = [int(x) for x in line.strip().split(",")[:14]]
            cur.append({"marks": v[1:11], "rows": v[11], "seqs": v[12], "drafted": v[13]})
    return engines


def busy_in(kernels, starts, lo, hi):
    """GPU busy time (union of kernel spans) inside [lo, hi)."""
    i = max(0, bisect.bisect_left(starts, lo) - 1)
    busy, cur_s, cur_e = 0, None, None
    while i < len(kernels) and kernels[i][0] < hi:
        s, e = max(kernels[i][0], lo), min(kernels[i][1], hi)
        i += 1
        if e <= s:
            continue
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                busy += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    if cur_e is not None:
        busy += cur_e - cur_s
    return busy


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("trace")
    ap.add_argument("steps")
    ap.add_argument("--skip", type=int, default=3)
    args = ap.parse_args()
    kernels, api = load_trace(args.trace)
    kstarts = [k[0] for k in kernels]
    astarts = [a[0] for a in api]
    for n, steps in enumerate(load_steps(args.steps)):
        steps = [s for s in steps[args.skip:] if all(s["marks"])]
        if len(steps) < 2:
            continue
        cols = collections.defaultdict(list)
        calls = collections.Counter()
        call_ns = collections.Counter()
        for a, b in zip(steps, steps[1:]):
            m = a["marks"]
            lo, hi = m[0], b["marks"][0]
            for k, st in enumerate(STAGES):
                cols[st].append((m[k + 1] - m[k]) / 1e3)
            cols["between"].append((hi - m[9]) / 1e3)
            cols["wall"].append((hi - lo) / 1e3)
            busy = busy_in(kernels, kstarts, lo, hi)
            cols["gpu busy"].append(busy / 1e3)
            cols["gpu idle"].append((hi - lo - busy) / 1e3)
            blocked = 0
            i = bisect.bisect_left(astarts, m[3])
            while i < len(api) and api[i][0] < m[4]:
                s, e, name = api[i]
                if name.startswith(SYNC):
                    blocked += e - s
                i += 1
            cols["fwd blocked"].append(blocked / 1e3)
            cols["fwd host"].append((m[4] - m[3] - blocked) / 1e3)
            i = bisect.bisect_left(astarts, lo)
            while i < len(api) and api[i][0] < hi:
                calls[api[i][2]] += 1
                call_ns[api[i][2]] += api[i][1] - api[i][0]
                i += 1
        rows = statistics.median(s["rows"] for s in steps)
        seqs = statistics.median(s["seqs"] for s in steps)
        print(f"engine {n}: {len(steps)} steps, median rows {rows}, sequences {seqs}; median µs:")
        print("  " + "  ".join(f"{k} {statistics.median(v):.0f}" for k, v in cols.items()))
        per = len(steps) - 1
        print("  runtime calls a step (count, host µs): " +
              ", ".join(f"{k} {calls[k] / per:.0f} {call_ns[k] / per / 1e3:.0f}" for k, _ in call_ns.most_common(8)))


if __name__ == "__main__":
    main()
