#pragma once
// The norms as one block a row (norm_reference.cu): the kernels norm.cu launched before its held-row
// kernels. norm.cu still launches them for rows wider than kNormHeld * 1024 elements, and the tests hold
// the held-row kernels to their bits (test_cuda_norm_rows.cpp). Arguments as in kernels.h.
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/kernels.h"

namespace specserve::cuda::kernels {

void rms_norm_reference(const float* x, const float* w, float* y, int64_t groups, int64_t d, int kind, float eps,
                        cudaStream_t stream, const XbOut& xb = {});
void add_rms_norm_reference(float* x, const float* y, const float* w, float* out, int64_t groups, int64_t d, int kind,
                            float eps, cudaStream_t stream, const XbOut& xb = {});
void rms_norm_gated_reference(const float* x, const float* z, const float* w, float* y, int64_t groups, int64_t d,
                              float eps, cudaStream_t stream);

}  // namespace specserve::cuda::kernels
