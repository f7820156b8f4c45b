#!/usr/bin/env bash
# The GPU test suite on the GPU machine, from binaries built on the development machine (a bare GPU machine has
# CUDA but not the Debian -dev packages the project builds with).
#
#   here:   scripts/gpu_check.sh prepare [BUILD] [EXTRA_BINARY...]
#             builds the GPU test binaries (test_backend_cuda, test_model_cuda, test_model_cuda_engine), specserve
#             and the bench_cuda_* binaries in BUILD (default build/, configured with CUDA), and packs them stripped,
#             with the shared libraries a bare machine lacks (fmt, utf8proc, libevent, pcre2, benchmark), the demo
#             target's tokenizer files (tok/: tools/gpu/make_random_checkpoint.py --tokenizer-from) and any
#             EXTRA_BINARY (say, a second specserve built from another commit, for an A/B), into one xz archive,
#             .gpu-bin/bundle.tar.xz (~10 MB). Prints its size.
#   carry:  .gpu-bin (the device tool's `carry`). The working tree travels too and the tool takes at most 64 MiB:
#           without models/ the tree is ~25 MB; a call that needs models/demo-coder (~57 MB) moves src, tests,
#           fuzz, docs and bench aside instead (and then carries no test run: the tests read tests/fixtures).
#   there:  scripts/gpu_check.sh run [--memcheck] [TEST_BINARY...]
#             unpacks the bundle into /tmp/specserve-gpu-bin and runs each GPU test binary (default: all three) with
#             --gtest_brief=1 from this checkout (the tests find their fixtures under the source path they were
#             built with, linked to this checkout when it differs), and with --memcheck under compute-sanitizer
#             --tool memcheck.
#           scripts/gpu_check.sh unpack   only unpacks: then run the bundle's other binaries by hand, e.g.
#             LD_LIBRARY_PATH=/tmp/specserve-gpu-bin:/usr/local/cuda/lib64 /tmp/specserve-gpu-bin/specserve bench ...
# Exits non-zero when anything fails.
set -uo pipefail
cd "$(dirname "$0")/.."
say() { echo "[gpu_check] $*" >&2; }
MODE=${1:-}
[ $# -gt 0 ] && shift
TESTS=(test_backend_cuda test_model_cuda test_model_cuda_engine)
BUNDLE=.gpu-bin/bundle.tar.xz
GPU_BIN=/tmp/specserve-gpu-bin

unpack() {
  [ -f "$BUNDLE" ] || { say "$BUNDLE was not carried (scripts/gpu_check.sh prepare, then carry .gpu-bin)"; return 1; }
  rm -rf "$GPU_BIN" && mkdir -p "$GPU_BIN" && tar -xJf "$BUNDLE" -C "$GPU_BIN" || return 1
  export LD_LIBRARY_PATH="$GPU_BIN:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export PATH="/usr/local/cuda/bin:$PATH" GPU_BIN NCCL_NVLS_ENABLE=0
  # The tests read fixtures under the source path they were built with: point it at this checkout.
  local src
  src=$(cat "$GPU_BIN/source_dir" 2>/dev/null)
  if [ -n "$src" ] && [ "$(cd "$src" 2>/dev/null && pwd -P)" != "$(pwd -P)" ]; then
    [ -e "$src" ] && { say "$src exists and is not this checkout"; return 1; }
    mkdir -p "$(dirname "$src")" && ln -s "$PWD" "$src" || { say "cannot link $src to $PWD"; return 1; }
    say "linked $src -> $PWD"
  fi
}

case "$MODE" in
  prepare)
    BUILD=build
    if [ $# -gt 0 ] && [ -d "$1" ] && [ -f "$1/CMakeCache.txt" ]; then
      BUILD=$1
      shift
    fi
    cmake --build "$BUILD" --target "${TESTS[@]}" specserve -j "${GPU_CHECK_JOBS:-2}" || { say "build failed"; exit 1; }
    # Every benchmark it packs, rebuilt (a bench_cuda_* binary left from an earlier build would be packed stale).
    benches=(bench_cuda_matmul bench_cuda_attention)
    for b in "$BUILD"/bin/bench_cuda_*; do [ -x "$b" ] && benches+=("$(basename "$b")"); done
    cmake --build "$BUILD" --target $(printf '%s\n' "${benches[@]}" | sort -u) -j "${GPU_CHECK_JOBS:-2}" ||
      { say "building the benchmarks failed"; exit 1; }
    stage=$(mktemp -d)
    trap 'rm -rf "$stage"' EXIT
    for lib in libfmt.so.9 libutf8proc.so.2 libevent_core-2.1.so.7 libevent_pthreads-2.1.so.7 libpcre2-8.so.0 libbenchmark.so.1debian; do
      src=$(ldconfig -p | awk -v l="$lib" '$1 == l { print $NF; exit }')
      [ -n "$src" ] && cp -L "$src" "$stage/" || say "note: $lib not found here"
    done
    for t in "${TESTS[@]}"; do
      f=$(find "$BUILD/tests" -type f -name "$t" -perm -u+x | head -n 1)
      [ -n "$f" ] && cp "$f" "$stage/" || { say "$t was not built"; exit 1; }
    done
    cp "$BUILD/bin/specserve" "$stage/"
    for b in "$BUILD"/bin/bench_cuda_*; do [ -x "$b" ] && cp "$b" "$stage/"; done
    for extra in "$@"; do cp "$extra" "$stage/" || { say "cannot copy $extra"; exit 1; }; done
    for b in "$stage"/*; do [ -x "$b" ] && [ ! -d "$b" ] && strip "$b" 2>/dev/null; done
    mkdir -p "$stage/tok"
    for f in tokenizer.json tokenizer_config.json config.json; do
      cp models/demo-coder/target/$f "$stage/tok/" 2>/dev/null || true
    done
    sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$BUILD/CMakeCache.txt" >"$stage/source_dir"
    mkdir -p .gpu-bin
    tar -c -C "$stage" . | xz -T2 --lzma2=preset=6,dict=64MiB >"$BUNDLE" || { say "packing failed"; exit 1; }
    say "carry: .gpu-bin ($(du -h "$BUNDLE" | cut -f1)); run there: scripts/gpu_check.sh run"
    ;;
  unpack)
    unpack
    ;;
  run)
    MEMCHECK=0
    picked=()
    for a in "$@"; do
      case "$a" in
        --memcheck) MEMCHECK=1 ;;
        *) picked+=("$a") ;;
      esac
    done
    [ ${#picked[@]} -gt 0 ] && TESTS=("${picked[@]}")
    unpack || exit 1
    command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader >&2
    status=0
    for t in "${TESTS[@]}"; do
      bin="$GPU_BIN/$t"
      [ -x "$bin" ] || { say "$t is not in the bundle"; status=1; continue; }
      say "$t"
      "$bin" --gtest_brief=1 || { say "FAILED: $t"; status=1; }
      if [ $MEMCHECK = 1 ]; then
        say "compute-sanitizer --tool memcheck $t"
        compute-sanitizer --tool memcheck --error-exitcode 1 "$bin" --gtest_brief=1 >"$GPU_BIN/$t.memcheck.log" 2>&1 ||
          { say "memcheck FAILED: $t"; tail -n 30 "$GPU_BIN/$t.memcheck.log" >&2; status=1; }
        grep -E "ERROR SUMMARY" "$GPU_BIN/$t.memcheck.log" >&2
      fi
    done
    [ $status = 0 ] && say "all GPU checks passed" || say "GPU checks FAILED"
    exit $status
    ;;
  *)
    sed -n '2,21p' "$0"
    exit 2
    ;;
esac
