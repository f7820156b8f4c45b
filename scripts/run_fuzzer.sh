#!/usr/bin/env bash
# run_fuzzer.sh BINARY SEED_CORPUS WORK_DIR SECONDS — a bounded libFuzzer run; fails on any finding.
set -euo pipefail
bin=$1 seeds=$2 work=$3 seconds=$4
[ -x "$bin" ] || { echo "fuzz binary $bin missing (was the clang external project built?)" >&2; exit 1; }
rm -rf "$work" && mkdir -p "$work/corpus" "$work/artifacts"
[ -d "$seeds" ] && cp -r "$seeds/." "$work/corpus/" 2>/dev/null || true
exec "$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
  -artifact_prefix="$work/artifacts/" -print_final_stats=1 "$work/corpus"
