#!/usr/bin/env bash
# Serving A/B of several specserve builds on the GPU machine: `bench serve-load` plain and speculative for each
# build, the builds taking turns within each of ROUNDS rounds, and each pass running its levels twice in turn
# (`--rounds 2`, docs/SERVER.md), so that a comparison reads medians beside their spread (one 256-request level of the demo
# pair lasts 1-2 s, and two passes of one build have differed by 0.39x: docs/history/BENCHMARKS-log.md, session 37).
#
#   tools/gpu/serve_ab.sh OUT_DIR ROUNDS NAME=BINARY... -- SERVE_LOAD_FLAGS...
#     e.g. (after scripts/gpu_check.sh prepare here with a second build's specserve renamed specserve_b,
#           carrying .gpu-bin and models/demo-coder, with src, tests, fuzz, docs and bench moved aside)
#       scripts/gpu_check.sh unpack
#       tools/gpu/serve_ab.sh $OUT/ab 2 main=/tmp/specserve-gpu-bin/specserve b=/tmp/specserve-gpu-bin/specserve_b \
#         -- --model models/demo-coder/target --draft models/demo-coder/drafter --backend cuda --concurrency 1,4,16 \
#            --max-tokens 128 --requests 1024 --temperature 0
#
# Each pass writes OUT_DIR/NAME-plain-R.txt and NAME-spec-R.txt (R = the round); the plain pass is the same
# flags without --draft and its directory. At the end it prints, per build and level, the speculative over plain
# ratio of the medians of every round's per-level medians (the --rounds summary rows).
set -uo pipefail
[ $# -ge 4 ] || { sed -n '2,17p' "$0"; exit 2; }
OUT=$1
ROUNDS=$2
shift 2
BUILDS=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
  BUILDS+=("$1")
  shift
done
[ "${1:-}" = "--" ] || { echo "serve_ab: give the serve-load flags after --" >&2; exit 2; }
shift
SPEC=("$@")
PLAIN=()
skip=0
for f in "${SPEC[@]}"; do  # the plain pass: the same flags without --draft DIR
  if [ $skip = 1 ]; then skip=0; continue; fi
  [ "$f" = "--draft" ] && { skip=1; continue; }
  PLAIN+=("$f")
done
export LD_LIBRARY_PATH="/tmp/specserve-gpu-bin:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" NCCL_NVLS_ENABLE=0
mkdir -p "$OUT"
for r in $(seq 1 "$ROUNDS"); do
  for b in "${BUILDS[@]}"; do
    name=${b%%=*}
    bin=${b#*=}
    echo "[serve_ab] round $r: $name plain" >&2
    "$bin" bench serve-load "${PLAIN[@]}" --rounds 2 >"$OUT/$name-plain-$r.txt" 2>&1
    echo "[serve_ab] round $r: $name speculative" >&2
    "$bin" bench serve-load "${SPEC[@]}" --rounds 2 >"$OUT/$name-spec-$r.txt" 2>&1
  done
done
# The summary rows: | concurrency | rounds | errors | median | ... ; the median over passes of each pass's median.
python3 - "$OUT" "$ROUNDS" "${BUILDS[@]}" <<'PY'
import statistics, sys, pathlib
out, rounds, builds = pathlib.Path(sys.argv[1]), int(sys.argv[2]), [b.split("=", 1)[0] for b in sys.argv[3:]]
def medians(path):
    text = path.read_text(errors="replace")
    summary = text.split("over 2 rounds", 1)[-1] if "over 2 rounds" in text else ""
    rows = {}
    for line in summary.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 4 and cells[0].isdigit():
            rows[int(cells[0])] = float(cells[3])
    return rows
for name in builds:
    per = {"plain": {}, "spec": {}}
    for kind in per:
        for r in range(1, rounds + 1):
            for level, v in medians(out / f"{name}-{kind}-{r}.txt").items():
                per[kind].setdefault(level, []).append(v)
    for level in sorted(per["plain"]):
        p, s = per["plain"][level], per["spec"].get(level, [])
        if not s:
            continue
        ratios = [b / a for a, b in zip(p, s)]
        print(f"{name} concurrency {level}: plain {statistics.median(p):.1f}, speculative {statistics.median(s):.1f} tok/s,"
              f" ratio {statistics.median(s) / statistics.median(p):.3f} (per round {', '.join(f'{x:.2f}' for x in ratios)})")
PY
