#pragma once
// The fp8 warpgroup instruction of the W8A8 prefill GEMM (matmul_prefill_fp8_sm90a.cu); the fences, commit / wait,
// mbarrier and TMA wrappers are matmul_wgmma_ptx.cuh's. sm_90a device code only.
#include <cstdint>

#include "backend/cuda/wgmma_accumulators.cuh"

namespace specserve::cuda::wg {

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
// d = A · B (accumulate == 0) or d += A · B (accumulate != 0) for one k32 chunk of e4m3 codes: A 64 x 32 and
// B 128 x 32, both K-major from their descriptors (128-byte swizzle: a 128-byte row is 128 codes; chunk kk of a
// stage starts 32 kk bytes in, as a bf16 k16 chunk does). f32 accumulators laid out as m64n128k16's (the D
// fragment does not depend on the input type). The fp8 forms take no transpose operands (PTX ISA: imm-trans
// only for .f16 / .bf16); the two 1s are imm-scale-a and imm-scale-b (no negation).
__device__ __forceinline__ void wgmma_m64n128k32_e4m3(float (&d)[64], uint64_t desc_a, uint64_t desc_b,
                                                      int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 " SS_WG_REGS64 ", %64, %65, p, 1, 1;\n}\n"
      : SS_WG_ACC64(d)
      : "l"(desc_a), "l"(desc_b), "r"(accumulate)
      : "memory");
}
#endif

}  // namespace specserve::cuda::wg
