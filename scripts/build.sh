#!/usr/bin/env bash
# Configures (once) and builds specserve into build/. Extra arguments go to cmake at configure time.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${SPECSERVE_BUILD_DIR:-build}
if [ ! -f "$BUILD_DIR/build.ninja" ]; then
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release "$@" >"${BUILD_DIR}.configure.log" 2>&1 || {
    cat "${BUILD_DIR}.configure.log" >&2
    exit 1
  }
fi
ninja -C "$BUILD_DIR" ${SPECSERVE_BUILD_JOBS:+-j "$SPECSERVE_BUILD_JOBS"}
