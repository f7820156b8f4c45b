#pragma once
// Memory::fill_uniform of F8_E4M3 on the device (synthetic_fill.cu): the seeded uniform values of
// backend/synthetic_fill.h as e4m3 codes, one byte each (the synthetic fp8 weights,
// model/synthetic_tensors.h). Apart from kernels.h so that adding it rebuilt nothing else.
#include <cuda_runtime.h>

#include <cstdint>

namespace specserve::cuda::kernels {

void fill_uniform_e4m3(void* dst, int64_t n, uint64_t seed, float lo, float hi, cudaStream_t stream);

}  // namespace specserve::cuda::kernels
