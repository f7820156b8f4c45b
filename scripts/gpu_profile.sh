#!/usr/bin/env bash
# One engine step of `specserve bench steps --synthetic SHAPE` under Nsight Compute, summarised per kernel.
# On the GPU machine, with the bundle `scripts/gpu_check.sh prepare` packs in .gpu-bin/ (carried):
#
#   scripts/gpu_profile.sh SHAPE [decode|verify|propose] [--base-clocks] [-- bench batch flags]
#     e.g. scripts/gpu_profile.sh qwen3-8b verify -- --decode-batches 1 --verify-batches 4 --verify-k 8
#
# The bench repeats one step between cudaProfilerStart/Stop (SPECSERVE_PROFILE_STEP) and ncu starts
# with profiling off, so only that step's kernels are profiled. Batch flags default to
# --decode-batches 1 --verify-batches 1 --verify-k 16 (flags after -- replace them; give one batch and
# one K, or several steps are profiled together). Real clocks and warm caches by default (--clock-control none
# --cache-control none): the sum of the kernels' durations then compares with the bench's step time,
# and the difference is the launch gaps. --base-clocks keeps ncu's defaults (locked base clocks, caches
# flushed before each kernel), steadier for comparing kernels with each other. The raw report goes to
# ${OUT:-.}/ncu-SHAPE-STEP.txt; tools/gpu/ncu_summary.py prints the totals.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 1 ] || { sed -n '2,18p' "$0"; exit 2; }
SHAPE=$1
shift
STEP=decode
CLOCKS=(--clock-control none --cache-control none)
EXTRA=()
while [ $# -gt 0 ]; do
  case "$1" in
    decode | verify | propose) STEP=$1 ;;
    --base-clocks) CLOCKS=() ;;
    --) shift; EXTRA=("$@"); break ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
export PATH="/usr/local/cuda/bin:$PATH"
GPU_BIN=/tmp/specserve-gpu-bin  # scripts/gpu_check.sh's bundle, unpacked here when carried
[ -x "$GPU_BIN/specserve" ] || [ ! -f .gpu-bin/bundle.tar.xz ] || scripts/gpu_check.sh unpack
export LD_LIBRARY_PATH="$GPU_BIN:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
[ ${#EXTRA[@]} -gt 0 ] || EXTRA=(--decode-batches 1 --verify-batches 1 --verify-k 16)
BIN=$GPU_BIN/specserve
[ -x "$BIN" ] || BIN=build/bin/specserve
REPORT="${OUT:-.}/ncu-$SHAPE-$STEP.txt"
SPECSERVE_PROFILE_STEP=$STEP ncu --profile-from-start off "${CLOCKS[@]}" --metrics gpu__time_duration.sum \
  --print-summary per-kernel "$BIN" bench steps --synthetic "$SHAPE" --prefill 64 --iterations 3 "${EXTRA[@]}" \
  >"$REPORT" 2>&1 || { tail -n 20 "$REPORT" >&2; exit 1; }
grep -E "^ +1 +[0-9.]+ " "$REPORT" >&2 || true  # the bench's own decode/verify lines (step times)
python3 tools/gpu/ncu_summary.py "$REPORT"
