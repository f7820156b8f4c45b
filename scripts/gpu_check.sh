#!/usr/bin/env bash
# GPU checks of the CUDA backend, for the GPU machine (CUDA 13.0 at /usr/local/cuda, 16 cores):
#   1. configures build-gpu/ (Release, -DSPECSERVE_CUDA=ON) and builds test_backend_cuda (-j16);
#   2. runs the GPU-labelled tests:   ctest --test-dir build-gpu -L gpu --output-on-failure
#   3. runs the test binary under:    compute-sanitizer --tool memcheck
# Exits non-zero when anything fails.
#
# The GPU machine may lack the Debian -dev packages the top-level CMake project needs (fmt, gtest,
# nlohmann-json, CLI11, cpp-httplib, pcre2, utf8proc, pkg-config) and cannot download them. Then:
#   - on a Debian 12 machine with apt, run `scripts/gpu_check.sh --fetch-deps`: it downloads those .deb
#     files into build-gpu-deps/ (git-ignored through /build-*/);
#   - carry build-gpu-deps to the GPU machine; this script unpacks them under build-gpu-deps/root (never
#     into /) and points CMake, pkg-config and the compilers there.
# If the CMake configure still fails, the script says which packages were missing and falls back to a
# direct build of the one test binary (g++ + nvcc, needing only fmt and gtest headers/libraries); ctest
# is then replaced by running the binary itself.
#
# Environment: GPU_CHECK_JOBS (default 16), GPU_CHECK_NO_SANITIZER=1 skips step 3,
#              GPU_CHECK_SANITIZER_FILTER (a --gtest_filter for step 3, default all tests).
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT_DIR=$(pwd)
BUILD=build-gpu
DEPS=build-gpu-deps
JOBS=${GPU_CHECK_JOBS:-16}
DEB_PACKAGES=(libfmt-dev libfmt9 libgtest-dev libgmock-dev nlohmann-json3-dev libcli11-dev libcpp-httplib-dev
  libpcre2-dev libpcre2-8-0 libpcre2-16-0 libpcre2-32-0 libpcre2-posix3 libutf8proc-dev libutf8proc2
  pkgconf pkgconf-bin libpkgconf3)

say() { echo "[gpu_check] $*" >&2; }

if [ "${1:-}" = "--fetch-deps" ]; then
  mkdir -p "$DEPS"
  (cd "$DEPS" && apt-get download "${DEB_PACKAGES[@]}") || { say "apt-get download failed"; exit 1; }
  say "downloaded $(ls "$DEPS"/*.deb | wc -l) packages into $DEPS/; carry '$DEPS' to the GPU machine"
  exit 0
fi

export PATH="/usr/local/cuda/bin:$PATH"
command -v nvcc >/dev/null || { say "nvcc not found (expected /usr/local/cuda/bin/nvcc)"; exit 1; }
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader >&2

# ---- carried Debian packages -------------------------------------------------------------------------
PREFIX_ARGS=()
if compgen -G "$DEPS/*.deb" >/dev/null; then
  SYSROOT="$ROOT_DIR/$DEPS/root"
  mkdir -p "$SYSROOT"
  for f in "$DEPS"/*.deb; do dpkg-deb -x "$f" "$SYSROOT" 2>/dev/null || dpkg -x "$f" "$SYSROOT" || say "could not unpack $f"; done
  MULTI="$SYSROOT/usr/lib/x86_64-linux-gnu"
  export PATH="$SYSROOT/usr/bin:$PATH"
  export LD_LIBRARY_PATH="$MULTI${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export CPATH="$SYSROOT/usr/include${CPATH:+:$CPATH}"
  export LIBRARY_PATH="$MULTI${LIBRARY_PATH:+:$LIBRARY_PATH}"
  export PKG_CONFIG_PATH="$MULTI/pkgconfig:$SYSROOT/usr/share/pkgconfig"
  export PKG_CONFIG_SYSROOT_DIR="$SYSROOT"
  export PKG_CONFIG_LIBDIR="$PKG_CONFIG_PATH"
  PREFIX_ARGS=(-DCMAKE_PREFIX_PATH="$SYSROOT/usr" -DPKG_CONFIG_EXECUTABLE="$(command -v pkgconf || command -v pkg-config || echo pkg-config)")
  say "using the packages carried in $DEPS/ (unpacked under $SYSROOT)"
fi

missing_report() {
  local miss=()
  for h in fmt/format.h gtest/gtest.h nlohmann/json.hpp CLI/CLI.hpp httplib.h pcre2.h utf8proc.h; do
    local found=0
    for d in /usr/include /usr/local/include ${CPATH//:/ }; do [ -f "$d/$h" ] && found=1 && break; done
    [ $found = 1 ] || miss+=("$h")
  done
  command -v cmake >/dev/null || miss+=("cmake")
  command -v pkg-config >/dev/null || command -v pkgconf >/dev/null || miss+=("pkg-config")
  if [ ${#miss[@]} -gt 0 ]; then
    say "missing on this machine: ${miss[*]}"
    say "fix: on the dev machine run 'scripts/gpu_check.sh --fetch-deps', then carry '$DEPS' here"
  fi
}

status=0
sanitize() {  # $1: the test binary
  [ "${GPU_CHECK_NO_SANITIZER:-0}" = 1 ] && return 0
  local cs
  cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
  if [ ! -x "$cs" ]; then say "compute-sanitizer not found: memcheck skipped (counted as a failure)"; return 1; fi
  say "compute-sanitizer --tool memcheck $1"
  "$cs" --tool memcheck --error-exitcode 1 --leak-check full "$1" \
    ${GPU_CHECK_SANITIZER_FILTER:+--gtest_filter="$GPU_CHECK_SANITIZER_FILTER"}
}

# ---- 1. CMake build ----------------------------------------------------------------------------------
GEN=()
command -v ninja >/dev/null && GEN=(-G Ninja)
mkdir -p "$BUILD"
if command -v cmake >/dev/null && cmake -S . -B "$BUILD" "${GEN[@]}" -DCMAKE_BUILD_TYPE=Release -DSPECSERVE_CUDA=ON \
  -DSPECSERVE_BENCH=OFF -DSPECSERVE_FUZZ=OFF "${PREFIX_ARGS[@]}" >"$BUILD/configure.log" 2>&1; then
  say "configured $BUILD"
  cmake --build "$BUILD" --target test_backend_cuda -j "$JOBS" || { say "build failed"; exit 1; }
  BIN=$(find "$BUILD" -type f -name test_backend_cuda -perm -u+x | head -n 1)
  [ -n "$BIN" ] || { say "test_backend_cuda not found under $BUILD"; exit 1; }
  # ---- 2. ctest -L gpu ----
  ctest --test-dir "$BUILD" -L gpu --output-on-failure -j 1 || { say "ctest -L gpu FAILED"; status=1; }
  # ---- 3. memcheck ----
  sanitize "$BIN" || { say "memcheck FAILED"; status=1; }
  [ $status = 0 ] && say "all GPU checks passed" || say "GPU checks FAILED"
  exit $status
fi

say "CMake configure failed or cmake is missing (log: $BUILD/configure.log):"
[ -f "$BUILD/configure.log" ] && grep -E "Could NOT find|not found|Error|error" "$BUILD/configure.log" | head -n 20 >&2
missing_report

# ---- fallback: direct build of the test binary (needs only fmt and gtest) ---------------------------------
say "falling back to a direct build of test_backend_cuda (fmt header-only, gtest static)"
OUTD="$BUILD/direct"
mkdir -p "$OUTD/obj"
CXXF=(-std=c++20 -O3 -DNDEBUG -DFMT_HEADER_ONLY -mavx2 -mfma -mf16c -Isrc -Itests/backend_cuda -I/usr/local/cuda/include
  -DSPECSERVE_HAVE_CUDA=1)
AVX512=(-mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512bf16)
NVF=(-std=c++17 -O3 -DNDEBUG -arch=sm_90 --fmad=false --expt-relaxed-constexpr -Isrc -DFMT_HEADER_ONLY)
jobs_file="$OUTD/jobs.txt"
: >"$jobs_file"
for f in src/core/*.cpp src/backend/*.cpp src/backend/cpu/*.cpp src/backend/cuda/*.cpp tests/backend_cuda/test_*.cpp; do
  [ -f "$f" ] || continue
  extra=""
  case "$f" in
    src/backend/cpu/*_avx512.cpp) extra="${AVX512[*]} -ffp-contract=off" ;;
    src/backend/*) extra="-ffp-contract=off" ;;
  esac
  echo "g++ ${CXXF[*]} $extra -c $f -o $OUTD/obj/$(echo "$f" | tr / _).o" >>"$jobs_file"
done
for f in src/backend/cuda/*.cu; do
  echo "nvcc ${NVF[*]} -c $f -o $OUTD/obj/$(echo "$f" | tr / _).o" >>"$jobs_file"
done
if ! xargs -P "$JOBS" -I{} -d '\n' sh -c '{} || exit 255' <"$jobs_file"; then
  say "direct build failed (see the compiler errors above)"
  exit 1
fi
BIN="$OUTD/test_backend_cuda"
g++ -o "$BIN" "$OUTD"/obj/*.o -L/usr/local/cuda/lib64 -lcudart -lgtest_main -lgtest -lpthread -ldl -lrt ||
  { say "link failed (libgtest.a / libgtest_main.a needed)"; exit 1; }
"$BIN" || { say "test_backend_cuda FAILED"; status=1; }
sanitize "$BIN" || { say "memcheck FAILED"; status=1; }
[ $status = 0 ] && say "all GPU checks passed (direct build)" || say "GPU checks FAILED"
exit $status
