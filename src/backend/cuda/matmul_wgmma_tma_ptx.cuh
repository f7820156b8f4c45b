#pragma once
// The 64-column warpgroup instruction of the TMA-fed slice-serial matmul (matmul_wgmma_tma_sm90a.cu) and the
// flag operations of its slice units' hand-over; the other wgmma, mbarrier and TMA wrappers are
// matmul_wgmma_ptx.cuh's. sm_90a device code only.
#include <cstdint>

namespace specserve::cuda::wgt {

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
// d += A · B for one k16 chunk: A 64 x 16 and B 64 x 16 (both K-major, 128-byte swizzle) from their
// descriptors; 32 accumulators a thread, laid out as m64n128k16's first half. scale-d 1: the chain goes on
// from whatever d holds (+0 for a new slice).
__device__ __forceinline__ void wgmma_m64n64k16(float (&d)[32], uint64_t desc_a, uint64_t desc_b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}, %32, %33, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]),
        "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]),
        "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]),
        "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "l"(desc_a), "l"(desc_b), "r"(1)
      : "memory");
}

// A flag in global memory read with acquire semantics at GPU scope (what another CTA wrote before its
// release store of the flag is visible after), and written with release semantics.
__device__ __forceinline__ uint32_t ld_acquire_gpu(const uint32_t* p) {
  uint32_t v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];\n" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void st_release_gpu(uint32_t* p, uint32_t v) {
  asm volatile("st.release.gpu.global.u32 [%0], %1;\n" ::"l"(p), "r"(v) : "memory");
}
// Named barrier 1 among the `threads` consumer threads (warpgroups 1 and 2; barrier 0 is __syncthreads').
__device__ __forceinline__ void consumers_sync(int threads) {
  asm volatile("bar.sync 1, %0;\n" ::"r"(threads) : "memory");
}
#endif

}  // namespace specserve::cuda::wgt
