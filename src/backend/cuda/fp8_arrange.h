#pragma once
// kernels::fp8_arrange_codes (fp8_arrange.cu): a kept fp8 matrix's codes on the device put into fragment order
// (fp8_code_order.h), in place. Apart from kernels.h so that adding it rebuilt nothing else.
#include <cuda_runtime.h>

#include <cstdint>

namespace specserve::cuda::kernels {

// codes: N rows of K e4m3 codes, rows ldq bytes apart (ldq >= K; any alignment), in natural order on entry.
void fp8_arrange_codes(uint8_t* codes, int64_t N, int64_t K, int64_t ldq, cudaStream_t stream);

}  // namespace specserve::cuda::kernels
