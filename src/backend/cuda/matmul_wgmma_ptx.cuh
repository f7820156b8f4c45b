#pragma once
// The warpgroup instructions the wgmma kernels issue (matmul_wgmma_sm90a.cu, the cluster kernel;
// matmul_wgmma_serial_sm90a.cu, the slice-serial one; matmul_prefill_sm90a.cu, the prefill GEMM): sm_90a device code
// only, so included only by
// *_sm90a.cu files.
#include <cstdint>

#include "backend/cuda/wgmma_accumulators.cuh"

namespace specserve::cuda::wg {

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
// Shared-memory writes of this thread (cp.async landed, or plain stores) become visible to wgmma's
// reads (the async proxy).
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}

// d += A · B for one k16 chunk: A 64 x 16 and B 128 x 16 (both K-major) from their descriptors; the
// third operand 1 keeps d (scale-d), so a chain starts from whatever d holds (+0 for a new slice).
__device__ __forceinline__ void wgmma_m64n128k16(float (&d)[64], uint64_t desc_a, uint64_t desc_b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 " SS_WG_REGS64 ", %64, %65, p, 1, 1, 0, 0;\n}\n"
      : SS_WG_ACC64(d)
      : "l"(desc_a), "l"(desc_b), "r"(1)
      : "memory");
}

// d += A · B for one k16 chunk with B 256 x 16 (the prefill GEMM, matmul_prefill_sm90a.cu): 128
// accumulators per thread, laid out as m64n128k16's repeated along n.
__device__ __forceinline__ void wgmma_m64n256k16(float (&d)[128], uint64_t desc_a, uint64_t desc_b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 " SS_WG_REGS128 ", %128, %129, p, 1, 1, 0, 0;\n}\n"
      : SS_WG_ACC128(d)
      : "l"(desc_a), "l"(desc_b), "r"(1)
      : "memory");
}

// mbarriers (the warp-specialised kernels' stage hand-offs) and TMA.
__device__ __forceinline__ void mbar_init(uint32_t bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
// A stage ring's barriers, by thread `tid` 0: full[s] at full0 + 8 s and empty[s] at empty0 + 8 s for the
// `stages` stages, with their arrival counts, made visible (to the cluster too) for the __syncthreads the
// caller runs next.
__device__ __forceinline__ void init_ring_barriers(int tid, uint32_t full0, uint32_t empty0, int stages,
                                                   unsigned full_arrivals, unsigned empty_arrivals) {
  if (tid != 0) return;
  for (int s = 0; s < stages; ++s) {
    mbar_init(full0 + 8 * s, full_arrivals);
    mbar_init(empty0 + 8 * s, empty_arrivals);
  }
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
  asm volatile("{\n.reg .b64 state;\nmbarrier.arrive.release.cta.shared::cta.b64 state, [%0];\n}\n" ::"r"(bar)
               : "memory");
}
// Waits until the phase with parity `parity` of the barrier has completed.
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
  asm volatile(
      "{\n.reg .pred done;\nwait_%=:\n"
      "mbarrier.try_wait.parity.acquire.cta.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra wait_%=;\n}\n" ::"r"(bar),
      "r"(parity)
      : "memory");
}
// The expected transaction bytes of the current phase, with this thread's arrival.
__device__ __forceinline__ void mbar_arrive_expect_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
// A 2-D TMA box load into shared memory at dst, coordinates (c0 innermost, c1), completing on bar.
__device__ __forceinline__ void tma_load_2d(uint32_t dst, const void* tensor_map, int c0, int c1, uint32_t bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n" ::"r"(
          dst),
      "l"(reinterpret_cast<uint64_t>(tensor_map)), "r"(c0), "r"(c1), "r"(bar)
      : "memory");
}
#endif

// An epilogue's store of one thread's column pair (c, c + 1) of an output row yr of N columns: one 8-byte
// store where `pairs` says y and its row stride allow it and both columns are inside N, else the columns
// inside N one at a time (the TMA GEMMs: matmul_prefill_sm90a.cu, matmul_wgmma_tma_sm90a.cu).
__device__ __forceinline__ void store_column_pair(float* yr, int64_t c, int64_t N, bool pairs, float v0, float v1) {
  if (pairs && c + 1 < N) {
    *reinterpret_cast<float2*>(yr + c) = make_float2(v0, v1);
  } else {
    if (c < N) yr[c] = v0;
    if (c + 1 < N) yr[c + 1] = v1;
  }
}

}  // namespace specserve::cuda::wg
