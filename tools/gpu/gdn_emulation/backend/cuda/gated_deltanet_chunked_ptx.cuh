#pragma once
// Stands in for src/backend/cuda/gated_deltanet_chunked_ptx.cuh in the host emulation: cp.async as a
// plain copy.
#include "cuda_emu.h"

namespace specserve::cuda::kernels::gdn_ptx {

inline void cp_async16(float* dst, const float* src) { std::memcpy(dst, src, 16); }
inline void cp_async_wait_all() {}

}  // namespace specserve::cuda::kernels::gdn_ptx
