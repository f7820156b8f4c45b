#pragma once
// Writing a producer's XbOut (kernels.h): its result rounded to bf16 in the layout the gemv kernel reads
// x through (matmul_tensor_core_xb.cuh). Each register is what x_to_bf16_kernel would write for it: the
// same pack_bf16x2 of the same two f32 values (the producer's finished outputs), +0 outside the result,
// so the matmul reading it gets the bits it gets from its own conversion.
#include <cuda_runtime.h>

#include "backend/cuda/kernels.h"
#include "backend/cuda/matmul_tensor_core_ptx.cuh"  // tc::pack_bf16x2

namespace specserve::cuda::kernels {

// The registers of xb row m holding elements [k0, k1) (both even), by thread t of n: pairs of row[k]
// below K, +0 from K on, and +0 everywhere when row is nullptr (a padding row, m >= M). The row's values
// must be visible to the calling threads (a block's own writes after __syncthreads()).
__device__ __forceinline__ void xb_write(const XbOut& xb, int64_t m, const float* row, int64_t K, int64_t k0,
                                         int64_t k1, int t, int n) {
  uint32_t* out = xb.regs + m * (xb.pitch / 2);
  for (int64_t k = k0 + 2 * int64_t{t}; k < k1; k += 2 * int64_t{n}) {
    const float lo = row != nullptr && k < K ? row[k] : 0.0f;
    const float hi = row != nullptr && k + 1 < K ? row[k + 1] : 0.0f;
    out[k / 2] = tc::pack_bf16x2(lo, hi);
  }
}

}  // namespace specserve::cuda::kernels
