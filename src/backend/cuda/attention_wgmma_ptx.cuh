#pragma once
// The warpgroup instructions of the wgmma prefill attention (attention_prefill_wgmma_sm90a.cu) beyond the
// matmuls' (matmul_wgmma_ptx.cuh, matmul_wgmma_tma_ptx.cuh): O += P V with P from registers and V read
// MN-major, and that operand's descriptor. sm_90a device code only.
#include <cstdint>

#include "backend/cuda/wgmma_accumulators.cuh"

namespace specserve::cuda::wg {

// The descriptor of an MN-major operand in the 128-byte swizzle (PTX ISA, "matrix descriptor"; CUTLASS
// names the canonical form Swizzle<3,4,3> o ((T,8,m),(8,k)):((1,T,LBO),(8T,SBO))): 64 consecutive
// elements of the N dimension form a 128-byte row (its 16-byte pieces at piece ^ (row % 8), as tile_off),
// the rows are consecutive k, 8 of them an atom of 1024 bytes; the next 8 k sit `sbo` bytes on, the next
// 64 n `lbo` bytes on. The atoms start on 1024-byte boundaries (base offset 0).
constexpr uint64_t smem_desc_mn(uint32_t addr, uint32_t lbo, uint32_t sbo) {
  return uint64_t{(addr & 0x3FFFFu) >> 4} | (uint64_t{(lbo >> 4) & 0x3FFFu} << 16) |
         (uint64_t{(sbo >> 4) & 0x3FFFu} << 32) | (uint64_t{1} << 62);
}

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
// d += A · B for one k16 chunk: A 64 x 16 from registers (the m16n8k16 A fragment of each warp's 16 rows: the
// C fragments of a score tile packed to bf16 pairs), B 128 x 16 from its descriptor, MN-major (imm-trans-b 1:
// B's 128 columns contiguous in shared memory, as the values' rows are stored). scale-d 1.
__device__ __forceinline__ void wgmma_m64n128k16_rs_tb(float (&d)[64], const uint32_t (&a)[4], uint64_t desc_b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 " SS_WG_REGS64 ", {%64,%65,%66,%67}, %68, p, 1, 1, 1;\n}\n"
      : SS_WG_ACC64(d)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(1)
      : "memory");
}

// d += A · B for one k16 chunk: A 64 x 16 from registers (the m16n8k16 A fragment of each warp's 16 rows: the
// C fragments of a score tile packed to bf16 pairs), B 256 x 16 from its descriptor, MN-major (imm-trans-b 1:
// B's 256 columns contiguous in shared memory, as the values' rows are stored). scale-d 1.
__device__ __forceinline__ void wgmma_m64n256k16_rs_tb(float (&d)[128], const uint32_t (&a)[4], uint64_t desc_b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %133, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 " SS_WG_REGS128
      ", {%128,%129,%130,%131}, %132, p, 1, 1, 1;\n}\n"
      : SS_WG_ACC128(d)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(1)
      : "memory");
}
#endif

}  // namespace specserve::cuda::wg
