#!/usr/bin/env bash
# The whole test suite: installs what is missing, builds, runs every test through ctest.
# Exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")"
./scripts/install_deps.sh
./scripts/fetch_test_assets.sh
./scripts/build.sh
cd "${SPECSERVE_BUILD_DIR:-build}"
ctest --output-on-failure -j "$(nproc)" -LE gpu "$@"
