#pragma once
// The PTX of the chunked DeltaNet kernels (gated_deltanet_chunked.cu): 16-byte cp.async staging in
// commit groups; the items' ready counts between the state and the output kernel. tools/gpu/gdn_emulation/
// stands in for this header on the host.
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

// Adds 1 to a ready count with release semantics at GPU scope (after a barrier: the block's writes before
// it are visible to whoever acquires the count).
__device__ __forceinline__ void ready_add(unsigned* count) {
  asm volatile("red.release.gpu.global.add.u32 [%0], 1;" ::"l"(count) : "memory");
}
// Waits until a ready count reaches n, acquiring it (then a barrier makes what its writers released
// visible to the block).
__device__ __forceinline__ void ready_wait(const unsigned* count, unsigned n) {
  for (;;) {
    unsigned v;
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(count) : "memory");
    if (v >= n) return;
    __nanosleep(256);
  }
}

}  // namespace specserve::cuda::kernels::gdn_ptx
