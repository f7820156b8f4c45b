#!/usr/bin/env python3
"""Where one kernel's warps spend their time, from Nsight Compute's per-instruction warp-state samples.

    ncu --kernel-name regex:NAME --launch-skip 3 --launch-count 1 --section WarpStateStats \\
        --section SourceCounters --page source --print-source sass --csv BINARY ARGS > sass.csv
    tools/gpu/ncu_sass_summary.py sass.csv [--top N]

Prints the kernel's warp samples (all samples: issued and stalled) three ways:
  - by how often each instruction ran: the most-run count is the main loop, smaller counts are the code
    around it (a tile's prologue and epilogue, per-row work), larger ones the producer's waits; a share
    outside the main loop is time a kernel does not spend in its main loop;
  - by opcode (FFMA, QGMMA, WARPGROUP.DEPBAR, STG ...);
  - the N instructions with the most samples, each with its two largest stall reasons.
This is how docs/DECISIONS.md §2 (session 39) read the W8A8 prefill GEMM: a quarter of a consumer warp's
samples waiting for its wgmma, a fifth in the promotion's FFMAs, 23-37 % outside the main loop. Stdlib only.
"""
import argparse
import collections
import csv
import sys

SAMPLES = "Warp Stall Sampling (All Samples)"
EXECUTED = "Instructions Executed"


def number(text):
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return 0.0


def read_rows(lines):
    """The per-instruction table: the rows after the header line that starts with "Address"."""
    for i, line in enumerate(lines):
        if line.startswith('"Address"'):
            rows = list(csv.reader(lines[i:]))
            header = rows[0]
            if SAMPLES not in header or EXECUTED not in header or "Source" not in header:
                break
            col = {name: j for j, name in enumerate(header)}
            stalls = [name for name in header if name.startswith("stall_") and "Not Issued" not in name]
            out = []
            for r in rows[1:]:
                if len(r) < len(header):
                    continue
                source = r[col["Source"]].strip()
                opcode_words = source.split()
                if opcode_words and opcode_words[0].startswith("@"):  # a predicate
                    opcode_words = opcode_words[1:]
                opcode = opcode_words[0].split(".")[0] if opcode_words else "?"
                out.append({
                    "address": r[col["Address"]],
                    "source": source,
                    "opcode": opcode,
                    "samples": number(r[col[SAMPLES]]),
                    "executed": number(r[col[EXECUTED]]),
                    "stalls": {name[len("stall_"):]: number(r[col[name]]) for name in stalls},
                })
            return out
    return None


def summarise(rows, top):
    total = sum(r["samples"] for r in rows)
    if total <= 0:
        return ["no warp samples in the report"]
    share = lambda s: f"{100.0 * s / total:5.1f} %"
    by_count = collections.Counter()
    for r in rows:
        by_count[r["executed"]] += r["samples"]
    main_count = max((c for c in by_count if c > 0), key=lambda c: (by_count[c], c))
    classes = collections.Counter()
    for r in rows:
        c = r["executed"]
        kind = ("main loop" if c == main_count else "never ran" if c == 0 else
                "ran fewer times (tile prologue, epilogue)" if c < main_count else "ran more times (spin waits)")
        classes[kind] += r["samples"]
    out = [f"{int(total)} warp samples over {len(rows)} instructions; the main loop's instructions ran "
           f"{int(main_count)} times"]
    for kind, s in classes.most_common():
        out.append(f"  {kind:40s} {int(s):8d} {share(s)}")
    out.append("by opcode:")
    by_op = collections.Counter()
    for r in rows:
        by_op[r["opcode"]] += r["samples"]
    for op, s in by_op.most_common(top):
        out.append(f"  {op:40s} {int(s):8d} {share(s)}")
    out.append(f"the {top} instructions with the most samples:")
    for r in sorted(rows, key=lambda r: -r["samples"])[:top]:
        reasons = sorted(r["stalls"].items(), key=lambda kv: -kv[1])[:2]
        why = ", ".join(f"{name} {int(v)}" for name, v in reasons if v > 0)
        out.append(f"  {r['address'][-6:]:>6s} {int(r['samples']):7d} {share(r['samples'])}  "
                   f"{r['source'][:60]:60s} x{int(r['executed'])}  {why}")
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("csv", help="ncu --page source --print-source sass --csv output")
    parser.add_argument("--top", type=int, default=15)
    args = parser.parse_args()
    with open(args.csv, encoding="utf-8", errors="replace") as f:
        rows = read_rows(f.read().splitlines())
    if rows is None:
        sys.exit(f"{args.csv}: no per-instruction table with '{SAMPLES}' and '{EXECUTED}' columns "
                 "(profile with --section WarpStateStats --section SourceCounters --page source "
                 "--print-source sass --csv)")
    print("\n".join(summarise(rows, args.top)))


if __name__ == "__main__":
    main()
