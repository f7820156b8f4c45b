#!/usr/bin/env bash
# Prints the directory of the default target model: the trained demo model when it is there
# (models/demo-coder/target, or models/demo-coder itself if it holds the checkpoint), else the tiny
# random checkpoint .cache/models/tiny-random, created on first use with make_tiny_model (so the
# build must have run: ./scripts/build.sh).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
for demo in "$root/models/demo-coder/target" "$root/models/demo-coder"; do
  if [ -f "$demo/config.json" ]; then
    echo "$demo"
    exit 0
  fi
done
dir=$root/.cache/models/tiny-random
if [ ! -f "$dir/model.safetensors" ]; then
  build=${SPECSERVE_BUILD_DIR:-build}
  case $build in /*) ;; *) build=$root/$build ;; esac
  bin=$build/bin/make_tiny_model
  [ -x "$bin" ] || { echo "default_model.sh: $bin is missing; run ./scripts/build.sh first" >&2; exit 1; }
  mkdir -p "$root/.cache/models"
  # Written aside and moved into place, so an interrupted run never leaves a half model behind.
  tmp=$(mktemp -d "$root/.cache/models/.tiny-random.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  "$bin" --out "$tmp" --seed 0 --family qwen3_5 --dtype bf16 >&2
  rm -rf "$dir"
  mv "$tmp" "$dir"
fi
echo "$dir"
