#!/usr/bin/env bash
# The multi-row attention kernel's widths (SPECSERVE_ATTN_ROW_WARPS 4 / 8 / 16) and row grouping at one
# sequence (SPECSERVE_ATTN_ROW_GROUPING=1), in one device call: the bit-equality tests first, then the op
# alone, then the verify steps it feeds. On the GPU machine, with the binaries `scripts/gpu_check.sh
# prepare` gathered (carry .gpu-bin and BUILD/tests/backend_cuda):
#
#   scripts/gpu_attention_rows.sh [BUILD]
#
# Each setting runs twice, interleaved, so the spread between two runs of one setting is visible next to the
# difference between settings (docs/history/GPU_PERF_NOTES.md, session 15, has the predictions this call checks).
# Full outputs go to ${OUT:-.}/attn-rows-*.txt; the last lines printed are the step table.
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
export PATH="/usr/local/cuda/bin:$PATH"
export LD_LIBRARY_PATH="$PWD/.gpu-bin:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
O=${OUT:-.}
say() { echo "[attn-rows] $*" >&2; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader >&2 || true

# 1. Bits: every width against each row alone (the test sets the width itself).
T="$BUILD/tests/backend_cuda/test_backend_cuda"
[ -x "$T" ] || T=.gpu-bin/test_backend_cuda
"$T" --gtest_filter='Heads/AttentionRows.*:Heads/Attention.*' >"$O/attn-rows-tests.txt" 2>&1
rc=$?
tail -n 3 "$O/attn-rows-tests.txt" >&2
[ $rc -eq 0 ] || { say "attention tests failed: no timing"; exit 1; }

# 2. The op alone: verify rows 1 x 8, 1 x 16, 2 x 16, 4 x 16, 16 x 16 and a prefill chunk, both head shapes.
SETTINGS=("default::" "one-row:SPECSERVE_ATTN_ROW_QUERIES=0:" "group-w4:SPECSERVE_ATTN_ROW_GROUPING=1:SPECSERVE_ATTN_ROW_WARPS=4"
  "group-w8:SPECSERVE_ATTN_ROW_GROUPING=1:SPECSERVE_ATTN_ROW_WARPS=8"
  "group-w16:SPECSERVE_ATTN_ROW_GROUPING=1:SPECSERVE_ATTN_ROW_WARPS=16"
  "q32-w8:SPECSERVE_ATTN_ROW_GROUPING=1:SPECSERVE_ATTN_ROW_WARPS=8:SPECSERVE_ATTN_ROW_QUERIES=32"
  "q32-w16:SPECSERVE_ATTN_ROW_GROUPING=1:SPECSERVE_ATTN_ROW_WARPS=16:SPECSERVE_ATTN_ROW_QUERIES=32")
run_with() {  # setting, command...
  local envs=${1#*:}
  shift
  (IFS=:; for e in $envs; do [ -n "$e" ] && export "$e"; done; "$@")
}
for pass in 1 2; do
  for s in "${SETTINGS[@]}"; do
    run_with "$s" .gpu-bin/bench_cuda_attention --benchmark_filter='BM_Attention/shape:[01]/rows:(5|6|7|8|9|10)/' \
      --benchmark_min_time=0.05 >"$O/attn-rows-op-${s%%:*}-$pass.txt" 2>&1
  done
done
for s in "${SETTINGS[@]}"; do
  printf '%-10s' "${s%%:*}"
  for pass in 1 2; do
    awk '/BM_Attention/ { printf " %s", $2 }' "$O/attn-rows-op-${s%%:*}-$pass.txt"
    printf ' |'
  done
  echo
done | tee "$O/attn-rows-op-table.txt"

# 3. The steps: verify of the 8B and the 27B at one to four sequences.
for pass in 1 2; do
  for s in "${SETTINGS[@]}"; do
    for shape in qwen3-8b qwen3.6-27b; do
      run_with "$s" .gpu-bin/specserve bench steps --synthetic "$shape" --decode-batches 1 --verify-batches 1,2,4 \
        --verify-k 8,16 --prefill 64 --iterations 10 --json >"$O/attn-rows-step-${s%%:*}-$shape-$pass.json" \
        2>"$O/attn-rows-step-${s%%:*}-$shape-$pass.log" || say "bench failed: $s $shape"
    done
  done
done
python3 - "$O" <<'EOF'
import glob, json, os, sys
o = sys.argv[1]
rows = {}
for f in sorted(glob.glob(os.path.join(o, 'attn-rows-step-*.json'))):
    name = os.path.basename(f)[len('attn-rows-step-'):-len('.json')]
    setting, rest = name.split('-qwen', 1)
    shape, p = ('qwen' + rest).rsplit('-', 1)
    try:
        d = json.load(open(f))
    except Exception:
        continue
    dec = {s['batch']: s['ms'] for s in d.get('decode', [])}
    ver = {(s['batch'], s['k']): s['ms'] for s in d.get('verify', [])}
    rows.setdefault((shape, setting), []).append((dec.get(1), ver))
for (shape, setting), runs in sorted(rows.items()):
    cells = []
    for dec, ver in runs:
        cells.append('dec %.3f | ' % (dec or 0) + ' '.join('%dx%d %.3f' % (b, k, ms) for (b, k), ms in sorted(ver.items())))
    print('%-12s %-10s %s' % (shape, setting, ' || '.join(cells)))
EOF
