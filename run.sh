#!/usr/bin/env bash
# Installs what is missing, builds, and runs specserve. Without arguments it serves the bundled
# default model at 127.0.0.1:8000; with arguments they are passed to `specserve`
# (e.g. ./run.sh generate --prompt "def fib").
set -euo pipefail
cd "$(dirname "$0")"
./scripts/install_deps.sh
./scripts/build.sh >&2
BIN=${SPECSERVE_BUILD_DIR:-build}/bin/specserve
MODEL=${SPECSERVE_MODEL:-$(./scripts/default_model.sh)}
if [ $# -eq 0 ]; then
  exec "$BIN" serve --model "$MODEL" --host 127.0.0.1 --port 8000
fi
# Subcommands that take --model get the default one unless the caller gave one.
case "$1" in
  generate|serve|info|bench)
    if ! printf '%s\n' "$@" | grep -q -- '^--model'; then
      sub=$1; shift
      exec "$BIN" "$sub" --model "$MODEL" "$@"
    fi
    ;;
esac
exec "$BIN" "$@"
