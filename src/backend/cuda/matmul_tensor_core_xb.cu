// The pre-pass of the tiled tensor-core matmul: x (f32, any pitch) -> its bf16 copy in a device
// scratch buffer (layout and rounding: matmul_tensor_core_xb.cuh). One thread per register (two
// elements): coalesced f32 reads and 4-byte writes; the pass moves M * K * 6 bytes, a few percent of
// what the matmul itself moves.
//
// The copy goes into the matmuls' scratch (matmul_scratch, defined here; kernels.h): growable device blocks,
// one per use, reused by every call. All matmuls are enqueued on the one stream (cuda_stream(), as
// cuda_memory()'s allocator assumes too), so a call's pre-pass runs after the previous call's kernel has
// finished reading the block. When a call needs a larger block, the stream is drained first (rare: it grows
// to the largest prefill's x once).
#include <cuda_runtime.h>

#include <climits>
#include <mutex>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device_scope.h"
#include "backend/cuda/kernels.h"
#include "backend/cuda/matmul_tensor_core_gemv.cuh"
#include "backend/cuda/matmul_tensor_core_ptx.cuh"
#include "backend/cuda/matmul_tensor_core_xb.cuh"
#include "backend/cuda/launch.cuh"

namespace specserve::cuda::kernels {

namespace {

using namespace specserve::cuda::tc;

__global__ void __launch_bounds__(256)
    x_to_bf16_kernel(const float* x, int64_t ldx, int64_t M, int64_t K, int64_t pitch, int64_t regs, uint32_t* out) {
  pdl_begin();
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < regs; i += stride)
    out[i] = xb_pair(x, ldx, M, K, pitch, i, [](float lo, float hi) { return pack_bf16x2(lo, hi); });
}

}  // namespace

void* matmul_scratch(size_t bytes, cudaStream_t stream, ScratchSlot which) {
  const int slot = static_cast<int>(which);
  static std::mutex mutex;
  static void* blocks[kMaxDevices][kScratchSlots] = {};  // the current device's (device_scope.h)
  static size_t capacities[kMaxDevices][kScratchSlots] = {};
  const int device = current_device();
  void*& block = blocks[device][slot];
  size_t& capacity = capacities[device][slot];
  std::lock_guard lock(mutex);
  if (bytes > capacity) {
    flush_launches();                           // recorded kernels may read the old block:
    CUDA_CHECK(cudaStreamSynchronize(stream));  // enqueue them and wait for them
    if (block) CUDA_CHECK(cudaFree(block));
    block = nullptr;
    capacity = 0;
    const size_t grown = bytes + bytes / 4, rounded = (grown + (size_t{1} << 20) - 1) & ~((size_t{1} << 20) - 1);
    CUDA_CHECK(cudaMalloc(&block, rounded));
    capacity = rounded;
  }
  return block;
}

XbOut matmul_xb_out(int64_t M, int64_t K, cudaStream_t stream, bool free_order) {
  // The gemv kernel's 5-32 rows, the free-order GEMM, and above 32 rows on an sm_90a device the prefill GEMM
  // and the TMA slice-serial kernel (33-256 rows), which read it; the other row-invariant wgmma kernels
  // convert again.
  const bool prefill = M > gemv_max_rows() && wgmma_available();
  if (!(free_order || prefill || (M >= gemv_xb_rows() && M <= gemv_max_rows())) || K <= 0) return {};
  XbOut o;
  static_assert(Gemv<2>::kKT == Gemv<3>::kKT && Gemv<3>::kKT == Gemv<4, true>::kKT, "one pitch for every gemv");
  o.pitch = xb_pitch(K, Gemv<2>::kKT);
  o.rows = xb_rows(M);
  o.regs =
      static_cast<uint32_t*>(matmul_scratch(static_cast<size_t>(o.rows * o.pitch) * 2, stream, ScratchSlot::XCopy));
  return o;
}

XbOut matmul_xb_out_beside_x(int64_t M, int64_t K, cudaStream_t stream) {
  if (M <= 0 || K <= 0) return {};
  XbOut o;
  o.pitch = xb_pitch(K, Gemv<2>::kKT);
  o.rows = xb_rows(M);
  o.regs = static_cast<uint32_t*>(
      matmul_scratch(static_cast<size_t>(o.rows * o.pitch) * 2, stream, ScratchSlot::OutputCopy));
  return o;
}

const uint16_t* matmul_x_to_bf16(const float* x, int64_t ldx, int64_t M, int64_t K, int64_t pitch,
                                 cudaStream_t stream) {
  const int64_t regs = xb_rows(M) * pitch / 2;
  auto* out = static_cast<uint32_t*>(matmul_scratch(static_cast<size_t>(regs) * 4, stream, ScratchSlot::XCopy));
  const int64_t blocks = ceil_div(regs, 256) < int64_t{1} << 20 ? ceil_div(regs, 256) : int64_t{1} << 20;
  launch_pdl(x_to_bf16_kernel, static_cast<unsigned>(blocks), 256, 0, stream, x, ldx, M, K, pitch, regs, out);
  CUDA_CHECK_LAUNCH();
  return reinterpret_cast<const uint16_t*>(out);
}

}  // namespace specserve::cuda::kernels
