#pragma once
// The in-order sum of the NCCL collective (nccl_collective.h): after an all-gather has put every rank's
// partial [rows, cols] side by side in `gathered` ([ranks, rows, cols], contiguous), each element of `out` is
// ((p0 + p1) + p2) + … + p(ranks−1) in f32, rounded to nearest after every addition, never fused. That is the
// order and rounding of the CPU simulation's all_reduce_sum (backend/collective.cpp), its reference: an
// element's bits depend on its `ranks` partials only, not on rows, cols or the launch shape.
// Plain C++17 so the .cu file includes it; pointers are device pointers.
#include <cuda_runtime_api.h>

#include <cstdint>

namespace specserve::cuda::kernels {

// out[i * ldo + c] <- Σ_q gathered[(q * rows + i) * cols + c], q in rank order. Enqueued on `stream` (a plain
// launch on the current device); rows * cols == 0 launches nothing.
void ordered_sum(const float* gathered, int ranks, int64_t rows, int64_t cols, float* out, int64_t ldo,
                 cudaStream_t stream);

}  // namespace specserve::cuda::kernels
