#pragma once
// A host stand-in for the few CUDA features the chunked Gated DeltaNet kernels use
// (src/backend/cuda/gated_deltanet_chunked.cu), so that they run on a CPU: each thread of a block is a
// fiber (ucontext) with its own stack, run until it reaches __syncthreads() or exits; a barrier
// releases once every thread of the block has reached it (a thread that exits first is reported as
// divergence). Blocks run one after the other; shared memory starts as NaN bytes so that a read of
// anything the kernel did not write shows in the results. EMU_REVERSE=1 resumes the threads in
// reverse order: results that differ between the two orders reveal a race between barriers.
#include <ucontext.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <vector>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(a, b)
using cudaStream_t = void*;
struct float2 {
  float x, y;
};
struct alignas(16) float4 {
  float x, y, z, w;
};
inline float4 make_float4(float a, float b, float c, float d) { return {a, b, c, d}; }
struct EmuDim {
  unsigned x = 0, y = 0, z = 0;
};
inline EmuDim threadIdx, blockIdx, blockDim, gridDim;

namespace emu {

enum State { kRunnable, kAtBarrier, kDone };

inline std::vector<ucontext_t> ctx;
inline ucontext_t scheduler;
inline std::vector<State> state;
inline int current = -1;
inline long barriers = 0;
inline std::vector<unsigned char> shared;
inline std::function<void()> body;
inline void (*after_block)() = nullptr;  // a check run when each block ends (cp.async copies in flight)

inline void entry() {
  body();
  state[size_t(current)] = kDone;
  swapcontext(&ctx[size_t(current)], &scheduler);
}

inline void run_block(int threads, std::function<void()> fn) {
  body = std::move(fn);
  ctx.assign(size_t(threads), {});
  state.assign(size_t(threads), kRunnable);
  static std::vector<std::vector<char>> stacks;
  stacks.resize(size_t(threads));
  for (int t = 0; t < threads; ++t) {
    stacks[size_t(t)].resize(256 * 1024);
    getcontext(&ctx[size_t(t)]);
    ctx[size_t(t)].uc_stack.ss_sp = stacks[size_t(t)].data();
    ctx[size_t(t)].uc_stack.ss_size = stacks[size_t(t)].size();
    ctx[size_t(t)].uc_link = nullptr;
    makecontext(&ctx[size_t(t)], entry, 0);
  }
  static const bool reverse = std::getenv("EMU_REVERSE") != nullptr;
  for (;;) {
    bool ran = false;
    for (int i = 0; i < threads; ++i) {
      const int t = reverse ? threads - 1 - i : i;
      if (state[size_t(t)] != kRunnable) continue;
      current = t;
      threadIdx.x = unsigned(t);
      swapcontext(&scheduler, &ctx[size_t(t)]);
      ran = true;
    }
    if (ran) continue;
    int at = 0, done = 0;
    for (State s : state) (s == kAtBarrier ? at : done) += 1;
    if (done == threads) break;
    if (at == threads) {
      for (auto& s : state) s = kRunnable;
      ++barriers;
      continue;
    }
    std::fprintf(stderr, "divergence: %d threads at a barrier, %d done\n", at, done);
    std::abort();
  }
}

}  // namespace emu

inline void __syncthreads() {
  emu::state[size_t(emu::current)] = emu::kAtBarrier;
  swapcontext(&emu::ctx[size_t(emu::current)], &emu::scheduler);
}

template <class T>
T* emu_shared() {
  return reinterpret_cast<T*>(emu::shared.data());
}

namespace specserve::cuda {
inline void pdl_begin() {}
inline void pdl_wait() {}
inline void pdl_launch_dependents() {}
// Runs the grid's blocks one after the other.
template <class... P, class... A>
void launch_pdl(void (*kernel)(P...), unsigned grid, int block, size_t smem, cudaStream_t, A&&... args) {
  gridDim.x = grid;
  blockDim.x = unsigned(block);
  for (unsigned b = 0; b < grid; ++b) {
    blockIdx.x = b;
    emu::shared.assign(smem, 0xff);
    emu::run_block(block, [&] { kernel(static_cast<P>(args)...); });
    if (emu::after_block != nullptr) emu::after_block();
  }
}
}  // namespace specserve::cuda

#define CUDA_CHECK(x) (void)0
#define CUDA_CHECK_LAUNCH() (void)0
#define cudaFuncSetAttribute(...) 0
