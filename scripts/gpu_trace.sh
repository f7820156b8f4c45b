#!/usr/bin/env bash
# One engine step of `specserve bench steps --synthetic SHAPE` as the GPU really runs it (CUDA graphs, PDL,
# warm caches): every kernel's start and end from CUPTI (tools/gpu/kernel_trace.cpp), summarised per
# kernel with its share of the step (tools/gpu/kernel_trace_summary.py). Unlike scripts/gpu_profile.sh
# (ncu: kernels one at a time, no overlap), the shares add up to the step time.
#
#   here:   scripts/gpu_trace.sh build            builds .gpu-probe/kernel_trace.so (needs the CUDA toolkit's CUPTI)
#   there:  scripts/gpu_trace.sh SHAPE [decode|verify|propose|prefill] [-- bench batch flags]
#             e.g. scripts/gpu_trace.sh qwen3.6-27b propose -- --decode-batches 16 --verify-batches 16 --verify-k 16
#                  scripts/gpu_trace.sh qwen3.6-27b prefill -- --prefill 8192   (one whole prompt, every chunk)
#
# Batch flags default to --decode-batches 1 --verify-batches 1 --verify-k 16 (and --prefill 512 for the
# other steps; a prefill trace takes its length from the flags). The CSV goes to
# ${OUT:-.}/trace-SHAPE-STEP.csv.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 1 ] || { sed -n '2,13p' "$0"; exit 2; }
LIB=.gpu-probe/kernel_trace.so
if [ "$1" = build ]; then
  mkdir -p .gpu-probe
  g++ -O2 -shared -fPIC -I/usr/local/cuda/include tools/gpu/kernel_trace.cpp -L/usr/local/cuda/lib64 -lcupti -lcuda \
    -o "$LIB"
  echo "built $LIB (carry .gpu-probe)" >&2
  exit 0
fi
SHAPE=$1
shift
STEP=decode
EXTRA=()
while [ $# -gt 0 ]; do
  case "$1" in
    decode | verify | propose | prefill) STEP=$1 ;;
    --) shift; EXTRA=("$@"); break ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
[ -f "$LIB" ] || { echo "no $LIB: run 'scripts/gpu_trace.sh build' on the development machine and carry .gpu-probe" >&2; exit 1; }
[ ${#EXTRA[@]} -gt 0 ] || EXTRA=(--decode-batches 1 --verify-batches 1 --verify-k 16)
[ "$STEP" = prefill ] || EXTRA=(--prefill 512 "${EXTRA[@]}")
GPU_BIN=/tmp/specserve-gpu-bin  # scripts/gpu_check.sh's bundle, unpacked here when carried
[ -x "$GPU_BIN/specserve" ] || [ ! -f .gpu-bin/bundle.tar.xz ] || scripts/gpu_check.sh unpack
export LD_LIBRARY_PATH="$GPU_BIN:/usr/local/cuda/lib64:/usr/local/cuda/extras/CUPTI/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
BIN=$GPU_BIN/specserve
[ -x "$BIN" ] || BIN=build/bin/specserve
CSV="${OUT:-.}/trace-$SHAPE-$STEP.csv"
CUDA_INJECTION64_PATH="$PWD/$LIB" SPECSERVE_TRACE_OUT="$CSV" SPECSERVE_PROFILE_STEP=$STEP \
  "$BIN" bench steps --synthetic "$SHAPE" --iterations 3 "${EXTRA[@]}" >"${CSV%.csv}.txt" 2>&1 ||
  { tail -n 20 "${CSV%.csv}.txt" >&2; exit 1; }
python3 tools/gpu/kernel_trace_summary.py "$CSV"
