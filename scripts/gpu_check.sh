#!/usr/bin/env bash
# The GPU test suite (`ctest -L gpu`) on the GPU machine, from test binaries built on the development
# machine (a bare GPU machine has CUDA but not the Debian -dev packages the project builds with).
#
#   here:   scripts/gpu_check.sh prepare [BUILD]
#             builds the gpu-labelled test binaries, specserve and the bench_cuda_* binaries in BUILD (default
#             build/, configured with CUDA) and copies the shared libraries a bare machine lacks (fmt,
#             utf8proc, libevent, pcre2) into .gpu-bin/. Prints the paths to carry.
#   carry:  .gpu-bin and BUILD/tests/backend_cuda BUILD/tests/model_cuda (the device tool's `carry`;
#           the working tree must stay under its size limit: move models/demo-coder aside meanwhile)
#   there:  scripts/gpu_check.sh run [BUILD] [--memcheck]
#             makes the build tree's absolute source path (CMAKE_HOME_DIRECTORY, e.g. /work/main) point
#             at this checkout, then runs `ctest -L gpu --output-on-failure` in each carried test folder,
#             and with --memcheck every GPU test binary under compute-sanitizer --tool memcheck.
# Exits non-zero when anything fails.
set -uo pipefail
cd "$(dirname "$0")/.."
say() { echo "[gpu_check] $*" >&2; }
MODE=${1:-}
BUILD=build
MEMCHECK=0
[ $# -gt 0 ] && shift
for a in "$@"; do
  case "$a" in
    --memcheck) MEMCHECK=1 ;;
    *) BUILD=$a ;;
  esac
done
TEST_DIRS=("$BUILD/tests/backend_cuda" "$BUILD/tests/model_cuda")
TARGETS=(test_backend_cuda test_model_cuda test_model_cuda_engine)

case "$MODE" in
  prepare)
    cmake --build "$BUILD" --target "${TARGETS[@]}" specserve -j "${GPU_CHECK_JOBS:-2}" || { say "build failed"; exit 1; }
    cmake --build "$BUILD" --target bench_cuda_matmul bench_cuda_attention -j "${GPU_CHECK_JOBS:-2}" 2>/dev/null || true
    mkdir -p .gpu-bin
    for lib in libfmt.so.9 libutf8proc.so.2 libevent_core-2.1.so.7 libevent_pthreads-2.1.so.7 libpcre2-8.so.0 libbenchmark.so.1debian; do
      src=$(ldconfig -p | awk -v l="$lib" '$1 == l { print $NF; exit }')
      [ -n "$src" ] && cp -L "$src" .gpu-bin/ || say "note: $lib not found here"
    done
    cp "$BUILD/bin/specserve" .gpu-bin/ 2>/dev/null || true
    for b in bench_cuda_matmul bench_cuda_attention; do cp "$BUILD/bin/$b" .gpu-bin/ 2>/dev/null || true; done
    say "carry: .gpu-bin ${TEST_DIRS[*]}"
    du -sh .gpu-bin "${TEST_DIRS[@]}" >&2
    ;;
  run)
    export PATH="/usr/local/cuda/bin:$PATH"
    export LD_LIBRARY_PATH="$PWD/.gpu-bin:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader >&2
    src=$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$BUILD/CMakeCache.txt" 2>/dev/null)
    if [ -z "$src" ]; then
      # Only the test folders were carried: read the source path from a CTest file.
      src=$(sed -n 's/^# Source directory: \(.*\)\/tests\/.*/\1/p' "${TEST_DIRS[0]}/CTestTestfile.cmake" | head -n 1)
    fi
    [ -n "$src" ] || { say "cannot tell the build's source directory"; exit 1; }
    if [ "$(cd "$src" 2>/dev/null && pwd -P)" != "$(pwd -P)" ]; then
      [ -e "$src" ] && { say "$src exists and is not this checkout"; exit 1; }
      mkdir -p "$(dirname "$src")" && ln -s "$PWD" "$src" || { say "cannot link $src to $PWD"; exit 1; }
      say "linked $src -> $PWD"
    fi
    status=0
    for d in "${TEST_DIRS[@]}"; do
      [ -d "$d" ] || { say "$d was not carried"; status=1; continue; }
      if command -v ctest >/dev/null; then
        (cd "$src/$d" && ctest -L gpu --output-on-failure -j 1) || { say "ctest -L gpu FAILED in $d"; status=1; }
      else
        # No CMake on this machine: run the folder's test binaries themselves (all of them are gpu-labelled).
        say "ctest not found: running the test binaries of $d directly"
        for bin in $(find "$d" -maxdepth 2 -type f -name 'test_*' -perm -u+x); do
          "$src/$bin" --gtest_brief=1 || { say "FAILED: $bin"; status=1; }
        done
      fi
    done
    if [ $MEMCHECK = 1 ]; then
      for bin in $(find "${TEST_DIRS[@]}" -maxdepth 2 -type f -name 'test_*' -perm -u+x); do
        say "compute-sanitizer --tool memcheck $bin"
        compute-sanitizer --tool memcheck --error-exitcode 1 "$bin" --gtest_brief=1 >"$bin.memcheck.log" 2>&1 ||
          { say "memcheck FAILED: $bin"; tail -n 30 "$bin.memcheck.log" >&2; status=1; }
        grep -E "ERROR SUMMARY" "$bin.memcheck.log" >&2
      done
    fi
    [ $status = 0 ] && say "all GPU checks passed" || say "GPU checks FAILED"
    exit $status
    ;;
  *)
    sed -n '2,16p' "$0"
    exit 2
    ;;
esac
