#pragma once
// The launcher of the TMA-fed slice-serial warpgroup matmul (matmul_wgmma_tma_sm90a.cu; tile shapes and
// the shape rule: matmul_wgmma_tma.cuh). Host C++; kept out of kernels.h so the kernel's declarations sit
// beside it.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "backend/cuda/kernels.h"

namespace specserve::cuda::kernels {

// Whether the kernel can take a weight: bf16, 16-byte aligned with ldw % 8 == 0 (TMA's strides),
// K % 8 == 0, every dimension positive and below 2^31. (The plan's rule, backend/matmul_choice.h:
// matmul_wgmma_tma_takes, states the same on MatmulWeight.)
bool wgmma_tma_fits(const MatmulArgs& a);

// y_i = x · w_iᵀ for `count` weights sharing x, M and K (one bf16 copy of x: the producer's, a.xb, when
// there is one; up to 4 weights a launch, more in several launches), with the row-invariant contract's
// bits (matmul_tensor_core.cu). `shape` and `split` < 0 take wgt::choose_wgt_plan's per launch; >= 0 force
// a wgt::WgtShape / wgt::WgtSplit (tests and benchmarks; the same bits). Returns false, launching nothing,
// when wgmma cannot run here or a part does not fit or the parts do not share x, M and K.
bool matmul_bf16_wgmma_tma(const MatmulArgs* parts, int count, cudaStream_t stream, int shape = -1, int split = -1);

// Launches of the kernel so far in this process (tests check that the plan reaches it).
uint64_t matmul_wgmma_tma_launches();

}  // namespace specserve::cuda::kernels
