#!/usr/bin/env bash
# Installs what is missing, builds, and runs specserve. Without arguments it serves the bundled
# default model at 127.0.0.1:8000; with arguments they are passed to `specserve`
# (e.g. ./run.sh generate --prompt "def fib").
# The default model is the demo pair (models/demo-coder): its target, speculating with its DFlash
# drafter. SPECSERVE_MODEL=DIR picks another target; SPECSERVE_DRAFT=DIR another drafter, and
# SPECSERVE_DRAFT= (empty) turns speculation off. A --model or --draft on the command line wins.
set -euo pipefail
cd "$(dirname "$0")"
./scripts/install_deps.sh
./scripts/build.sh >&2
BIN=${SPECSERVE_BUILD_DIR:-build}/bin/specserve
MODEL=${SPECSERVE_MODEL:-$(./scripts/default_model.sh)}
# The demo drafter goes with the demo target only.
DEFAULT_DRAFT=""
if [ -z "${SPECSERVE_MODEL:-}" ] && [ -f models/demo-coder/drafter/config.json ] &&
   [ "$MODEL" = "$(pwd)/models/demo-coder/target" ]; then
  DEFAULT_DRAFT=$(pwd)/models/demo-coder/drafter
fi
DRAFT=${SPECSERVE_DRAFT-$DEFAULT_DRAFT}
if [ $# -eq 0 ]; then
  name=()
  [ -n "$DEFAULT_DRAFT" ] && name=(--served-model-name demo-coder)
  exec "$BIN" serve --model "$MODEL" ${DRAFT:+--draft "$DRAFT"} "${name[@]}" --host 127.0.0.1 --port 8000
fi
# Subcommands that take --model get the default one (and its drafter) unless the caller gave one.
# `bench` takes them after its mode (bench steps | bench serve-load); --synthetic and --url bring their own model.
case "$1" in
  generate|serve|info|bench)
    if ! printf '%s\n' "$@" | grep -q -- '^--model\|^--synthetic\|^--url'; then
      sub=("$1"); shift
      if [ "${sub[0]}" = bench ]; then
        mode=serve-load
        if [ $# -gt 0 ] && { [ "$1" = steps ] || [ "$1" = serve-load ]; }; then mode=$1; shift; fi
        sub+=("$mode")
      fi
      draft=()
      if [ "${sub[0]}" != info ] && [ -n "$DRAFT" ] && ! printf '%s\n' "$@" | grep -q -- '^--draft$\|^--draft='; then
        draft=(--draft "$DRAFT")
      fi
      exec "$BIN" "${sub[@]}" --model "$MODEL" "${draft[@]}" "$@"
    fi
    ;;
esac
exec "$BIN" "$@"
