#!/usr/bin/env python3
"""Where the engine's steps go, from its stage clock alone (SPECSERVE_STEP_TRACE=FILE, engine/step_trace.h):
steps grouped by the sequences they decode and their kind, each group's count, its share of the wall time,
and the median of each stage's host time and of the whole step (start to the next step's start).

  python3 tools/gpu/step_trace_summary.py steps.csv [--engine N]

A step is "plain" when every row is a decode row (rows == sequences), "verify" when it has draft rows and
at most 16 rows a sequence, else "prefill" (a prompt chunk among its rows). steps.csv holds one header line
per engine (bench serve-load --acceptance makes one for each pass); --engine N reads the N-th (from 0),
default all of them together. The last line counts the steps the prefill hold kept short prompt chunks
back (the trace's prefill_held column). For the GPU's side of the same steps, record a kernel trace too and use
host_timeline.py.
"""
import argparse
import collections
import csv
import statistics
import sys

STAGES = ["schedule", "plan", "layout", "forward", "commit", "context", "stream", "propose", "retire"]


def read_engines(path):
    engines, header = [], None
    with open(path) as f:
        for row in csv.reader(f):
            if not row:
                continue
            if row[0] == "step":
                header = row
                engines.append([])
                continue
            if header is None:
                raise SystemExit(f"{path}: a step line before any header line")
            engines[-1].append(dict(zip(header, row)))
    if not engines:
        raise SystemExit(f"{path}: no header line (is it a SPECSERVE_STEP_TRACE file?)")
    return engines


def kind(step):
    rows, seqs = int(step["rows"]), int(step["sequences"])
    if rows == seqs:
        return "plain"
    return "verify" if rows <= 16 * seqs else "prefill"


def empty_groups():
    return collections.defaultdict(lambda: {"n": 0, "wall": 0.0, "step": [], **{s: [] for s in STAGES}})


def summarise(steps):
    """Per (sequences, kind): the steps' count, wall ms, and each stage's and the whole step's µs."""
    groups = empty_groups()
    for step, following in zip(steps, steps[1:]):
        g = groups[(int(step["sequences"]), kind(step))]
        start = int(step["start_ns"])
        total = int(following["start_ns"]) - start
        if total < 0:
            continue  # the next line is another engine's
        g["n"] += 1
        g["wall"] += total / 1e6
        g["step"].append(total / 1e3)
        prev = start
        for s in STAGES:
            mark = int(step[s])
            if mark == 0:
                continue  # a stage that did not run
            g[s].append((mark - prev) / 1e3)
            prev = mark
    return groups


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("steps")
    ap.add_argument("--engine", type=int, default=None)
    args = ap.parse_args()
    engines = read_engines(args.steps)
    if args.engine is not None:
        if not 0 <= args.engine < len(engines):
            raise SystemExit(f"{args.steps}: {len(engines)} engines, no engine {args.engine}")
        engines = [engines[args.engine]]
    groups = empty_groups()
    for steps in engines:
        for key, g in summarise(steps).items():
            into = groups[key]
            into["n"] += g["n"]
            into["wall"] += g["wall"]
            for s in ["step"] + STAGES:
                into[s] += g[s]
    wall = sum(g["wall"] for g in groups.values())
    med = lambda xs: f"{statistics.median(xs):.0f}" if xs else "-"
    print("sequences kind     steps  wall ms  share  step µs  " + "  ".join(f"{s:>8}" for s in STAGES))
    for (seqs, k), g in sorted(groups.items()):
        share = 100 * g["wall"] / wall if wall > 0 else 0
        print(f"{seqs:>9} {k:<8} {g['n']:>6} {g['wall']:>8.1f} {share:>5.1f}% {med(g['step']):>8}  " +
              "  ".join(f"{med(g[s]):>8}" for s in STAGES))
    print("(medians in µs; a step's time runs from its start to the next step's start)")
    held = [int(step["prefill_held"]) for steps in engines for step in steps if "prefill_held" in step]
    if held:  # traces written before the column have none
        print(f"prefill hold: {sum(held)} of {len(held)} steps kept short prefill chunks back")
    return 0


if __name__ == "__main__":
    sys.exit(main())
