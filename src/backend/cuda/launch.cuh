#pragma once
// Kernel launches with programmatic dependent launch (PDL, sm_90).
//
// A kernel launched by launch_pdl() may be scheduled while the kernel before it in the stream is still
// running: its CTAs become resident, do the prologue that reads nothing another kernel writes (offsets,
// an L2 prefetch of weights), and then pdl_wait() holds them until the previous grid has completed and
// its memory is visible. pdl_launch_dependents() then lets the next launch be scheduled in turn.
//
// The rule that keeps this correct: every kernel launched with launch_pdl() (or launch_clusters)
// executes pdl_wait() in every CTA before it touches memory another kernel writes, and before it exits.
// Then a grid completes only after its predecessor did, so completion stays ordered along the stream
// (a kernel sees every earlier launch complete, not just the one before it). Kernels launched plainly
// (<<<>>>) wait for the previous grid as always; in them pdl_wait() returns at once.
//
// Model parameters (weights) are the one exception to "reads nothing before pdl_wait()": when a kernel
// runs early, every launch before its predecessor has completed (the predecessor triggered only after
// its own wait), and the predecessor writes no parameters while its successor may run: parameters come
// from uploads and copies (memcpy, or copy_many_kernel, which never triggers before its copies are done)
// and from plainly launched fills, and no kernel on the model path writes a tensor that the next kernel
// reads as a parameter. So the gemv kernel loads its first weight tiles before its wait
// (matmul_tensor_core_gemv.cu), and the one-row norms and the DeltaNet gate preparation their weights.
//
// Only the timing changes: every result's bits are those of plain launches. SPECSERVE_PDL=0 launches
// plainly (an off-switch in core/env_registry.h, read once per process).
//
// Both launchers go through step_graphs.h: the launch is recorded, then enqueued directly or as a node
// of a CUDA graph (PDL becomes a programmatic edge there).
#include <cuda_runtime.h>

#include <cstdint>
#include <tuple>
#include <type_traits>
#include <utility>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/step_graphs.h"
#include "core/env_registry.h"

namespace specserve::cuda {

// Blocks until the previous grid in the stream has completed and its writes are visible.
__device__ __forceinline__ void pdl_wait() { asm volatile("griddepcontrol.wait;" ::: "memory"); }
// Lets the next PDL launch in the stream be scheduled (it still waits for this grid in its pdl_wait()).
__device__ __forceinline__ void pdl_launch_dependents() {
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
}
// The start of a kernel with no independent prologue. It waits before it triggers: triggering first (so that
// a matmul after a chain of small kernels is resident during all of them, not just the last) measured
// slower, 8B decode 5.09 -> 5.33 ms (docs/history/GPU_PERF_NOTES.md, session 13).
__device__ __forceinline__ void pdl_begin() {
  pdl_wait();
  pdl_launch_dependents();
}

inline bool pdl_enabled() {
  static const bool on = env_switch("SPECSERVE_PDL");
  return on;
}

// An attribute of the current device.
inline int current_device_attribute(cudaDeviceAttr attr) {
  int dev = 0, v = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  CUDA_CHECK(cudaDeviceGetAttribute(&v, attr, dev));
  return v;
}

// Multiprocessors of the current device (read once).
inline int sm_count() {
  static const int n = current_device_attribute(cudaDevAttrMultiProcessorCount);
  return n;
}

// Shared memory of a multiprocessor of the current device (read once), and what each CTA's reserves of it.
inline int sm_shared_memory() {
  static const int n = current_device_attribute(cudaDevAttrMaxSharedMemoryPerMultiprocessor);
  return n;
}
inline constexpr int kCtaReservedSmem = 1024;

// CTAs of `Kernel` (Threads threads a CTA, `smem` bytes of dynamic shared memory) that one multiprocessor
// holds at once: the registers' and threads' limit (the occupancy API, once per kernel) and the shared
// memory's (1 KB reserved per CTA). The kernel's shared-memory attributes are the caller's to set first.
template <auto Kernel, int Threads>
int ctas_per_sm(int smem) {
  static const int regs_limit = [] {
    int n = 0;
    CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, Kernel, Threads, 0));
    return n;
  }();
  const int by_smem = sm_shared_memory() / (smem + kCtaReservedSmem);
  return by_smem < regs_limit ? by_smem : regs_limit;
}

// The dynamic shared memory, `smem` or more, with which a multiprocessor holds at most `most` (>= 1) CTAs: a
// launch of at most `most` CTAs a multiprocessor asks for it so that the block scheduler spreads its grid evenly
// instead of filling some multiprocessors past the rest (256 CTAs of a kernel 3 fit a multiprocessor: some run 3,
// others 1). Never past `limit`, the kernel's most.
// (sm_smem: a multiprocessor's shared memory.)
constexpr int smem_for_at_most(int smem, int most, int limit, int sm_smem) {
  const int padded = (sm_smem / (most + 1) - kCtaReservedSmem + 1 + 127) / 128 * 128;
  const int want = padded > smem ? padded : smem;
  return want <= limit ? want : smem;
}
inline int smem_for_at_most(int smem, int most, int limit) {
  return smem_for_at_most(smem, most, limit, sm_shared_memory());
}

// Enqueues `l` with the parameter values `values` (a tuple of the kernel's parameter types) through
// step_graphs.h (recorded, then launched directly or as part of a graph).
template <class Tuple>
void enqueue_values(const KernelLaunch& l, cudaStream_t stream, Tuple& values) {
  constexpr size_t n = std::tuple_size_v<Tuple>;
  void* ptrs[n > 0 ? n : 1] = {};
  uint32_t sizes[n > 0 ? n : 1] = {};
  std::apply(
      [&](auto&... v) {
        size_t i = 0;
        ((ptrs[i] = static_cast<void*>(&v), sizes[i] = static_cast<uint32_t>(sizeof(v)), ++i), ...);
      },
      values);
  enqueue_launch(l, stream, ptrs, sizes, static_cast<int>(n));
}

// kernel<<<grid, block, smem, stream>>>(args...) with the PDL attribute. The kernel must follow the
// rule above.
template <class... Params, class... Args>
void launch_pdl(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream, Args&&... args) {
  std::tuple<std::decay_t<Params>...> values(std::forward<Args>(args)...);
  KernelLaunch l;
  l.func = reinterpret_cast<const void*>(kernel);
  l.grid = grid;
  l.block = block;
  l.smem = smem;
  l.pdl = pdl_enabled();
  enqueue_values(l, stream, values);
}

}  // namespace specserve::cuda
