#!/usr/bin/env bash
# Installs the Debian packages specserve needs. Idempotent and fast when everything is present.
# Works as root on a fresh Debian 12 machine; uses sudo when not root.
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build pkg-config git ca-certificates
  libgtest-dev libgmock-dev libbenchmark-dev
  libcpp-httplib-dev libevent-dev nlohmann-json3-dev libpcre2-dev libcli11-dev libfmt-dev
  libxxhash-dev libutf8proc-dev
  clang-14 libclang-rt-14-dev clang-format-14
  nodejs npm python3
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    # node/npm may come from outside Debian (e.g. a preinstalled node); accept a working binary.
    case "$p" in
      nodejs) command -v node >/dev/null 2>&1 && continue ;;
      npm) command -v npm >/dev/null 2>&1 && continue ;;
      python3) command -v python3 >/dev/null 2>&1 && continue ;;
    esac
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "[install_deps] installing: ${missing[*]}" >&2
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
