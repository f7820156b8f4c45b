#pragma once
// The PTX of the chunked DeltaNet state kernel (gated_deltanet_chunked.cu): 16-byte cp.async staging in
// commit groups. tools/gpu/gdn_emulation/ stands in for this header on the host.
#include <cstdint>

namespace specserve::cuda::kernels::gdn_ptx {

// 16 bytes global -> shared without a register round trip (cp.async, cached in L2 only).
__device__ __forceinline__ void cp_async16(float* dst, const float* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(static_cast<uint32_t>(__cvta_generic_to_shared(dst))),
               "l"(src)
               : "memory");
}
// Closes this thread's cp.async issued since the last commit into one group.
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
// Waits until at most N of this thread's committed groups (the newest) are still in flight.
template <int N>
__device__ __forceinline__ void cp_async_wait_group() {
  asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}
// Waits for every cp.async of this thread: their bytes are then visible to it (to the block after a barrier).
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_all;" ::: "memory"); }

}  // namespace specserve::cuda::kernels::gdn_ptx
