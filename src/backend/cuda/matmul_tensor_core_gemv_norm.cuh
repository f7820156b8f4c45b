#pragma once
// The gemv kernel's norm prologue (Gemv<..., Xn>, matmul_tensor_core_gemv.cu): a CTA norms its rows of
// x (the residual stream) into shared memory as bf16 before its main loop, so that a decode step needs
// no norm launch between the matmuls (one dependent phase less before q/k/v and before gate/up).
//
// Bits: rms_norm()'s (norm.cu), then the f32 gemv's rounding of x. rms_norm sums the squares in the
// order of a norm block of B = norm_threads(K) threads: its thread v chains elements v, v + B, ... with
// fmaf, warp_sum adds each warp's 32 chains, and the B / 32 warp sums are added in warp order. Here the
// CTA's 128 threads play that block: for B >= 128, thread t holds elements t + 128 m (m < kXnHeld),
// which belong to the norm block's thread t + 128 (m % R), R = B / 128, as its (m / R)-th element, so
// chain m % R of thread t is that thread's chain, and the warp_sum of chain i over warp w is norm warp
// w + 4 i. For B < 128 (K <= 128) threads t < B are the norm block's threads. Each normed element is
// norm_math.cuh's normed() of the same f32 values, rounded to bf16 as pack_bf16x2 rounds the f32 A
// fragments (round to nearest even, each half on its own).
#include <cuda_runtime.h>

#include "backend/cuda/matmul_tensor_core_gemv.cuh"
#include "backend/cuda/matmul_tensor_core_ptx.cuh"
#include "backend/cuda/norm_math.cuh"

namespace specserve::cuda::tc {

// Elements of a row each of the 128 threads holds: K <= 128 * 40 = 5,120 (Qwen3-8B 4,096, the 27B
// models 5,120); matmul_bf16_gemv_fused declines wider rows.
inline constexpr int kXnHeld = 40;
inline constexpr int kXnThreads = 128;
constexpr bool gemv_xn_fits(int64_t K) { return K >= 1 && K <= int64_t{kXnThreads} * kXnHeld; }

__device__ __forceinline__ uint16_t bf16_bits(float v) { return static_cast<uint16_t>(pack_bf16x2(v, 0.0f) & 0xffffu); }

// This thread's R chains of one row held in v (B = 128 R), each warp-summed into red[warp + 4 i].
template <int R>
__device__ __forceinline__ void xn_warp_sums(const float (&v)[kXnHeld], int held, float* red) {
  float s[R];
#pragma unroll
  for (int i = 0; i < R; ++i) s[i] = 0.0f;
#pragma unroll
  for (int m = 0; m < kXnHeld; ++m)
    if (m < held) s[m % R] = fmaf(v[m], v[m], s[m % R]);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
#pragma unroll
  for (int i = 0; i < R; ++i) {
    const float w = cuda::warp_sum(s[i]);
    if (lane == 0) red[warp + 4 * i] = w;
  }
}

// Rows m0 .. m0 + rows - 1 of p.x normed (p.norm_w, kind, eps, norm block p.norm_block) into the
// shared-memory rows at xs (pitch p.xn_pitch elements; +0 from K to the pitch); red: 32 floats of
// shared memory. Called by all kThreads threads after the wait for x's producer. The norm weights are
// read only once the sum is known: holding them through it too made the kernel need 152 registers,
// which would halve the CTAs a multiprocessor holds. Ends with a __syncthreads().
__device__ __forceinline__ void gemv_norm_rows(const Params& p, int64_t m0, int rows, uint16_t* xs, float* red) {
  const int t = static_cast<int>(threadIdx.x);
  const int64_t K = p.K;
  const int B = p.norm_block;
  const int held = static_cast<int>((K - t + kXnThreads - 1) / kXnThreads);  // elements t + 128 m < K
  for (int r = 0; r < rows; ++r) {
    const float* x = p.x + (m0 + r) * p.ldx;
    uint16_t* out = xs + int64_t{r} * p.xn_pitch;
    float v[kXnHeld];
#pragma unroll
    for (int m = 0; m < kXnHeld; ++m) v[m] = m < held ? x[t + kXnThreads * m] : 0.0f;
    if (B >= kXnThreads) {
      switch (B / kXnThreads) {
        case 1: xn_warp_sums<1>(v, held, red); break;
        case 2: xn_warp_sums<2>(v, held, red); break;
        case 4: xn_warp_sums<4>(v, held, red); break;
        default: xn_warp_sums<8>(v, held, red); break;
      }
    } else {
      // K <= 128: the norm block's thread t chains t, t + B, ... (at most 4 elements).
      float s = 0.0f;
      if (t < B)
        for (int64_t e = t; e < K; e += B) s = fmaf(x[e], x[e], s);
      s = cuda::warp_sum(s);
      if ((t & 31) == 0 && t < B) red[t >> 5] = s;
    }
    __syncthreads();
    float total = 0.0f;
    for (int i = 0; i < B / 32; ++i) total += red[i];
    const float inv = kernels::inv_rms_of_total(total, K, p.norm_eps);
#pragma unroll
    for (int m = 0; m < kXnHeld; ++m)
      if (m < held) out[t + kXnThreads * m] = bf16_bits(kernels::normed(v[m], p.norm_w[t + kXnThreads * m], p.norm_kind, inv));
    for (int64_t e = K + t; e < p.xn_pitch; e += kXnThreads) out[e] = 0;
    __syncthreads();  // the row is written, and red[] may be reused
  }
}

}  // namespace specserve::cuda::tc
