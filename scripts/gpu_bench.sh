#!/usr/bin/env bash
# The open issues' recorded tables (docs/BENCHMARKS.md) on the GPU machine, in parts that each fit one device
# call (at most 10 minutes; the estimates below are an H100's, an H200 is faster), from the bundle of
# scripts/gpu_check.sh. Every part prints the GPU, driver and date first, then each command line before its
# output, so a part's log is what a BENCHMARKS.md row needs.
#
#   here:   scripts/gpu_check.sh prepare build        (carry .gpu-bin)
#   there:  scripts/gpu_bench.sh PART [PART...]       (output on stdout; also under $OUT/PART.log when set)
#
# Parts:
#   steps           8B and 27B step tables, bf16 and fp8 kept: decode, verify K = 16, propose, prefill (~5 min)
#   controlled-8b   acceptance-controlled 8B at 1 / 16 / 64 sequences, τ 1 / 3 / 6.5, 256 new tokens (~4 min)
#   controlled-27b  the same for the 27B shape, 128 new tokens (~5 min)
#   long-32k        the 8B at a 32,768-token prompt, one sequence, τ 1 / 6.5, 1,024 new tokens (~2 min)
#   http-8b-low     the 8B shape served over HTTP (random weights in-process), τ 1 / 3 / 6.5, 1-16 clients
#   http-8b-high    the same at 32 and 64 clients
#   http-27b-low    the 27B shape over HTTP, 1 and 2 clients (with http-27b-mid ~10 min on an H100: one call each)
#   http-27b-mid    the same at 4, 8 and 16 clients
#   http-27b-high   the same at 32 and 64 clients (64 needs an H200's memory)
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
[ $# -ge 1 ] || { sed -n '2,19p' "$0"; exit 2; }
GPU_BIN=/tmp/specserve-gpu-bin
[ -x "$GPU_BIN/specserve" ] || scripts/gpu_check.sh unpack >/dev/null || exit 1
export LD_LIBRARY_PATH="$GPU_BIN:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" NCCL_NVLS_ENABLE=0
S="$GPU_BIN/specserve"
TOK="$GPU_BIN/tok"  # any tokenizer.json serves the random-weight targets (their prompts are token ids)

# One command: its line (as docs/BENCHMARKS.md records it: `specserve ...`), then its output without the
# engine's info lines.
bench() {
  echo "\$ specserve $*"
  "$S" "$@" 2>&1 | grep -vE '^\[specserve\] info'
}

http() {  # SHAPE LEVELS
  bench bench serve-load --synthetic "$1" --tokenizer "$TOK" --backend cuda --acceptance geometric:1,3,6.5 \
    --concurrency "$2" --prompt-words 128 --max-tokens 128
}

part() {
  case "$1" in
    steps)
      bench bench steps --synthetic qwen3-8b --backend cuda --decode-batches 1,4,16,64 --verify-batches 1,4,16 \
        --verify-k 16 --prefill 2048,4096
      bench bench steps --synthetic qwen3-8b-fp8 --backend cuda --fp8-weights keep --decode-batches 1,4,16 \
        --verify-batches 1,16 --verify-k 16 --prefill 4096 --iterations 8
      bench bench steps --synthetic qwen3.6-27b --backend cuda --decode-batches 1,16 --verify-batches 1,16 \
        --verify-k 16 --prefill 2048
      bench bench steps --synthetic qwen3.6-27b-fp8 --backend cuda --fp8-weights keep --decode-batches 1,16 \
        --verify-batches 1,16 --verify-k 16 --prefill 64 --iterations 8
      ;;
    controlled-8b)
      bench bench controlled --synthetic qwen3-8b --backend cuda --policies adaptive --concurrency 1,16,64 \
        --acceptance geometric:1,3,6.5 --max-tokens 256
      ;;
    controlled-27b)
      bench bench controlled --synthetic qwen3.6-27b --backend cuda --policies adaptive --concurrency 1,16,64 \
        --acceptance geometric:1,3,6.5 --max-tokens 128
      ;;
    long-32k)
      bench bench controlled --synthetic qwen3-8b --backend cuda --policies adaptive --concurrency 1 \
        --prompt-tokens 32768 --acceptance geometric:1,6.5 --max-tokens 1024
      ;;
    http-8b-low) http qwen3-8b 1,2,4,8,16 ;;
    http-8b-high) http qwen3-8b 32,64 ;;
    http-27b-low) http qwen3.6-27b 1,2 ;;
    http-27b-mid) http qwen3.6-27b 4,8,16 ;;
    http-27b-high) http qwen3.6-27b 32,64 ;;
  esac
}

PARTS=" steps controlled-8b controlled-27b long-32k http-8b-low http-8b-high http-27b-low http-27b-mid http-27b-high "
for p in "$@"; do  # every name checked before any part runs
  [[ "$PARTS" == *" $p "* ]] || { echo "unknown part '$p' (known:$PARTS)" >&2; exit 2; }
done
status=0
for p in "$@"; do
  {
    echo "== $p: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1), $(date -u +%F)"
    part "$p"
  } 2>&1 | tee ${OUT:+"$OUT/$p.log"}
  [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
done
exit $status
