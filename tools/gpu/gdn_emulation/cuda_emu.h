#pragma once
// A host stand-in for the few CUDA features the chunked Gated DeltaNet kernels use
// (src/backend/cuda/gated_deltanet_chunked.cu), so that they run on a CPU: each thread of a block is a
// fiber (ucontext) with its own stack, run until it reaches __syncthreads(), exits, or joins a
// warp-collective mma; a barrier releases once every thread of the block has reached it (a thread
// that exits or waits elsewhere first is reported as divergence), an mma once all 32 lanes of its warp
// have arrived. Blocks run one after the other; shared memory starts as NaN bytes so that a read of
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

enum State { kRunnable, kAtBarrier, kDone, kInWarpMma };

inline std::vector<ucontext_t> ctx;
inline ucontext_t scheduler;
inline std::vector<State> state;
inline int current = -1;
inline long barriers = 0;
inline std::vector<unsigned char> shared;
inline std::function<void()> body;

// One warp's mma.m16n8k8 operands and accumulators, by lane.
struct WarpMma {
  uint32_t a[32][4], b[32][2];
  float d[32][4];
};
inline WarpMma warp_mma[64];

inline float as_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// mma.m16n8k8.row.col.f32.tf32.tf32.f32 from the PTX ISA's fragment tables (g = lane / 4, t = lane % 4):
// A a0 (g, t), a1 (g + 8, t), a2 (g, t + 4), a3 (g + 8, t + 4); B b0 (t, g), b1 (t + 4, g); C c0 (g, 2t),
// c1 (g, 2t + 1), c2 (g + 8, 2t), c3 (g + 8, 2t + 1). The operands' low 13 bits are ignored; products
// exact, sums in double, rounded once.
inline void run_warp_mma(int w) {
  WarpMma& s = warp_mma[w];
  double A[16][8], B[8][8], C[16][8];
  auto tf32 = [](uint32_t u) { return double(as_float(u & 0xffffe000u)); };
  for (int lane = 0; lane < 32; ++lane) {
    const int g = lane / 4, t = lane % 4;
    A[g][t] = tf32(s.a[lane][0]);
    A[g + 8][t] = tf32(s.a[lane][1]);
    A[g][t + 4] = tf32(s.a[lane][2]);
    A[g + 8][t + 4] = tf32(s.a[lane][3]);
    B[t][g] = tf32(s.b[lane][0]);
    B[t + 4][g] = tf32(s.b[lane][1]);
    C[g][2 * t] = s.d[lane][0];
    C[g][2 * t + 1] = s.d[lane][1];
    C[g + 8][2 * t] = s.d[lane][2];
    C[g + 8][2 * t + 1] = s.d[lane][3];
  }
  float D[16][8];
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 8; ++j) {
      double x = C[i][j];
      for (int k = 0; k < 8; ++k) x += A[i][k] * B[k][j];
      D[i][j] = float(x);
    }
  for (int lane = 0; lane < 32; ++lane) {
    const int g = lane / 4, t = lane % 4;
    s.d[lane][0] = D[g][2 * t];
    s.d[lane][1] = D[g][2 * t + 1];
    s.d[lane][2] = D[g + 8][2 * t];
    s.d[lane][3] = D[g + 8][2 * t + 1];
  }
}

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
    for (int w = 0; w * 32 < threads; ++w) {
      bool all = true;
      for (int l = 0; l < 32; ++l) all = all && state[size_t(w * 32 + l)] == kInWarpMma;
      if (!all) continue;
      run_warp_mma(w);
      for (int l = 0; l < 32; ++l) state[size_t(w * 32 + l)] = kRunnable;
      ran = true;
    }
    if (ran) continue;
    int at = 0, done = 0, in_mma = 0;
    for (State s : state) (s == kAtBarrier ? at : s == kDone ? done : in_mma) += 1;
    if (done == threads) break;
    if (at == threads) {
      for (auto& s : state) s = kRunnable;
      ++barriers;
      continue;
    }
    std::fprintf(stderr, "divergence: %d threads at a barrier, %d done, %d in a warp mma\n", at, done, in_mma);
    std::abort();
  }
}

}  // namespace emu

inline void __syncthreads() {
  emu::state[size_t(emu::current)] = emu::kAtBarrier;
  swapcontext(&emu::ctx[size_t(emu::current)], &emu::scheduler);
}

// The calling lane's part of a warp-collective mma.m16n8k8 (d += a b).
inline void emu_warp_mma(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  const int lane = emu::current % 32, w = emu::current / 32;
  emu::WarpMma& s = emu::warp_mma[w];
  for (int i = 0; i < 4; ++i) {
    s.a[lane][i] = a[i];
    s.d[lane][i] = d[i];
  }
  s.b[lane][0] = b[0];
  s.b[lane][1] = b[1];
  emu::state[size_t(emu::current)] = emu::kInWarpMma;
  swapcontext(&emu::ctx[size_t(emu::current)], &emu::scheduler);
  for (int i = 0; i < 4; ++i) d[i] = s.d[lane][i];
}

template <class T>
T* emu_shared() {
  return reinterpret_cast<T*>(emu::shared.data());
}

namespace specserve::cuda {
inline void pdl_begin() {}
// Runs the grid's blocks one after the other.
template <class... P, class... A>
void launch_pdl(void (*kernel)(P...), unsigned grid, int block, size_t smem, cudaStream_t, A&&... args) {
  gridDim.x = grid;
  blockDim.x = unsigned(block);
  for (unsigned b = 0; b < grid; ++b) {
    blockIdx.x = b;
    emu::shared.assign(smem, 0xff);
    emu::run_block(block, [&] { kernel(static_cast<P>(args)...); });
  }
}
}  // namespace specserve::cuda

#define CUDA_CHECK(x) (void)0
#define CUDA_CHECK_LAUNCH() (void)0
#define cudaFuncSetAttribute(...) 0
