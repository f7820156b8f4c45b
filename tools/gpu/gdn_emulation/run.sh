#!/usr/bin/env bash
# Host emulation of the CUDA chunked Gated DeltaNet kernels (no GPU needed): builds their .cu files
# (`kernels` below, in src/backend/cuda/) with g++ against cuda_emu.h and runs gdn_emulation.cpp twice,
# threads resumed in order and in reverse; the two runs' bit hashes must match. About 40 s on 2 cores.
#   tools/gpu/gdn_emulation/run.sh [BUILD_DIR]   (default /tmp/gdn_emulation)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
out="${1:-/tmp/gdn_emulation}"
mkdir -p "$out"
# Every .cu of the chunked rule, the CUDA-only includes stripped and dynamic shared memory taken from the
# emulator.
kernels=(gated_deltanet_chunked gated_deltanet_chunk_prep gated_deltanet_chunk_output)
sources=()
for k in "${kernels[@]}"; do
  sed -e '/#include <cuda_runtime.h>/d' -e '/#include "backend\/cuda\/cuda_check.h"/d' \
    -e '/#include "backend\/cuda\/launch.cuh"/d' \
    -e 's/extern __shared__ float4 \([a-z_0-9]*\)\[\];/float4* \1 = emu_shared<float4>();/' \
    "$root/src/backend/cuda/$k.cu" >"$out/$k.cpp"
  sources+=("$out/$k.cpp")
done
g++ -std=c++20 -O2 -ffp-contract=off -mfma -I"$here" -I"$root/src" -o "$out/gdn_emulation" \
  "$here/gdn_emulation.cpp" "${sources[@]}"
"$out/gdn_emulation" | tee "$out/forward.txt"
EMU_REVERSE=1 "$out/gdn_emulation" >"$out/reverse.txt"
if ! diff <(sed 's/, out err.*//' "$out/forward.txt") <(sed 's/, out err.*//' "$out/reverse.txt"); then
  echo "gdn_emulation: the bits depend on the threads' order (a race)" >&2
  exit 1
fi
echo "gdn_emulation: every case ok, the same bits in both thread orders"
