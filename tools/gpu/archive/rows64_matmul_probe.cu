// Probe: how fast can a split-K bf16 matmul for 32-64 rows (a verify of 4 sequences x 16 drafts, or of
// 16 x 4) stream the weights, if its CTAs cover enough columns that x's L2 traffic stops dominating?
//
// Today these rows take the wgmma kernel at 2-2.3x the one-row weight stream (8B q/o 29.5 us at 64 rows
// against 13.7 us at one row; docs/history/GPU_PERF_NOTES.md, session 13). The gemv cannot take them: every CTA
// reads all of x, which is M * K * 2 bytes for each of N / 16 column blocks. This probe's kernel
// keeps the server's numerics contract in shape (S K-slices fixed by (N, K), one mma chain per slice in
// chunk order, partials summed in slice order), with CTAs of 32 columns: 8 warps, each a slice (S = 8) or
// half a slice's columns (S = 4), each streaming its own weight and x tiles (64 k a stage, 2 stages)
// with mma.sync m16n8k16, the partials summed through shared memory at the end. x traffic is then
// M / 32 times the weights (2x at 64 rows) instead of M / 16 (4x).
//
//   /usr/local/cuda/bin/nvcc -std=c++20 -arch=sm_90 -O2 --expt-relaxed-constexpr -I src -o rows64_matmul_probe \
//       tools/gpu/archive/rows64_matmul_probe.cu
//   ./rows64_matmul_probe          (on an H100 / H200)
//
// H200 (driver 580.159.04, 2026-12-01; copy 4.27 TB/s), µs a call with cold weights, against the server's
// kernels at the same rows (bench_cuda_matmul, docs/history/BENCHMARKS-log.md session 13: gemv at 32 rows, wgmma at
// 64):
//   8B q/o 4096 x 4096       32 rows 13.3 (gemv 25.5)   64 rows 18.2 (wgmma 29.5)
//   8B down 4096 x 12288     32 rows 32.5 (gemv 66.5)   64 rows 44.0 (wgmma 65.2)
//   8B gate+up 24576 x 4096  32 rows 65.4 (gemv 94.0)   64 rows 102  (wgmma 103; S = 4: two warps a
//                                                       slice each read x, 768 CTAs: x traffic again)
// (one row, the gemv: 13.7 / 31.1 / 55.6.) Outputs match a plain f32 kernel to 4e-6.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "backend/cuda/matmul_tensor_core_ptx.cuh"
#include "probe_util.h"

namespace {

constexpr int kWarps = 8, kThreads = 32 * kWarps;
constexpr int kCols = 32;   // columns per CTA
constexpr int kKT = 64;     // k per stage
constexpr int kPitch = 72;  // bf16 per smem row (64 + 8: ldmatrix rows in distinct bank groups)
constexpr int kStages = 2;

using namespace specserve::cuda::tc;  // cp.async, ldmatrix, mma (the server's own wrappers)

// MT m16 tiles of rows (M = 16 MT), S slices (S = 8: a warp per slice, 32 columns; S = 4: two warps per
// slice, 16 columns each).
template <int MT, int S>
__global__ void __launch_bounds__(kThreads, 1)
    rows_matmul(const uint16_t* __restrict__ x, const uint16_t* __restrict__ w, float* __restrict__ y, int N, int K) {
  constexpr int M = 16 * MT;
  constexpr int kWps = kWarps / S;   // warps per slice
  constexpr int kCW = kCols / kWps;  // columns per warp
  constexpr int kNT = kCW / 8;       // n8 tiles per warp
  constexpr int kXBytes = M * kPitch * 2, kWBytes = kCW * kPitch * 2;
  constexpr int kStageBytes = kXBytes + kWBytes;
  extern __shared__ __align__(128) unsigned char smem[];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int slice = warp / kWps, half = warp % kWps;
  const int n0 = blockIdx.x * kCols + half * kCW;
  const int ks = K / S, k_begin = slice * ks, tiles = ks / kKT;
  const uint32_t ring = smem_addr(smem) + warp * kStages * kStageBytes;

  auto issue = [&](int t) {
    if (t < tiles) {
      const uint32_t st = ring + (t % kStages) * kStageBytes;
      const int k0 = k_begin + t * kKT;
#pragma unroll
      for (int i = 0; i < M * 8 / 32; ++i) {  // x: M rows x 8 pieces
        const int e = i * 32 + lane, r = e >> 3, c = (e & 7) * 8;
        cp_async_ca(st + (r * kPitch + c) * 2, x + size_t(r) * K + k0 + c, 16);
      }
#pragma unroll
      for (int i = 0; i < kCW * 8 / 32; ++i) {  // w: kCW rows x 8 pieces
        const int e = i * 32 + lane, r = e >> 3, c = (e & 7) * 8;
        cp_async_cg(st + kXBytes + (r * kPitch + c) * 2, w + size_t(n0 + r) * K + k0 + c, 16);
      }
    }
    cp_async_commit();
  };

  float acc[MT][kNT][4] = {};
  issue(0);
  for (int t = 0; t < tiles; ++t) {
    issue(t + 1);
    cp_async_wait<1>();
    __syncwarp();
    const uint32_t st = ring + (t % kStages) * kStageBytes;
#pragma unroll
    for (int kk = 0; kk < kKT / 16; ++kk) {
      uint32_t a[MT][4];
#pragma unroll
      for (int i = 0; i < MT; ++i)
        ldmatrix_x4(st + ((i * 16 + (lane & 15)) * kPitch + kk * 16 + (lane >> 4) * 8) * 2, a[i][0], a[i][1], a[i][2],
                    a[i][3]);
#pragma unroll
      for (int j = 0; j < kNT; j += 2) {
        uint32_t b0, b1, b2, b3;
        ldmatrix_x4(
            st + kXBytes + ((j * 8 + (lane & 7) + ((lane >> 4) << 3)) * kPitch + kk * 16 + ((lane >> 3) & 1) * 8) * 2,
            b0, b1, b2, b3);
#pragma unroll
        for (int i = 0; i < MT; ++i) {
          mma_bf16(acc[i][j], a[i], b0, b1);
          mma_bf16(acc[i][j + 1], a[i], b2, b3);
        }
      }
    }
    __syncwarp();  // every lane is done with this stage before the next issue overwrites it
  }
  cp_async_wait_all();
  __syncthreads();
  // The partials, part[slice][row][col of the CTA], then summed in slice order.
  float* part = reinterpret_cast<float*>(smem);
#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int j = 0; j < kNT; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int r = i * 16 + (lane >> 2) + 8 * (e >> 1), c = half * kCW + j * 8 + 2 * (lane & 3) + (e & 1);
        part[(slice * M + r) * kCols + c] = acc[i][j][e];
      }
  __syncthreads();
  for (int o = threadIdx.x; o < M * kCols; o += kThreads) {
    float v = part[o];
#pragma unroll
    for (int s = 1; s < S; ++s) v += part[s * M * kCols + o];
    y[size_t(o / kCols) * N + blockIdx.x * kCols + o % kCols] = v;
  }
}

__global__ void reference(const uint16_t* x, const uint16_t* w, float* y, int /*M = 1*/, int N, int K) {
  const int n = blockIdx.x * blockDim.x + threadIdx.x, m = 0;
  if (n >= N) return;
  float s = 0.0f;
  for (int k = 0; k < K; ++k)
    s = fmaf(__uint_as_float(uint32_t(x[size_t(m) * K + k]) << 16),
             __uint_as_float(uint32_t(w[size_t(n) * K + k]) << 16), s);
  y[size_t(m) * N + n] = s;
}

__global__ void fill(uint16_t* p, size_t n, uint32_t seed) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n; i += size_t{gridDim.x} * blockDim.x) {
    uint32_t h = uint32_t(i) * 2654435761u ^ seed;
    h ^= h >> 15;
    h *= 2246822519u;
    h ^= h >> 13;
    p[i] = uint16_t(__float_as_uint((int(h & 0xffff) - 32768) * (0.05f / 32768.0f)) >> 16);
  }
}

template <int MT, int S>
int smem_of() {
  constexpr int M = 16 * MT, cw = kCols / (kWarps / S);
  const int ring = kWarps * kStages * (M * kPitch * 2 + cw * kPitch * 2);
  const int parts = S * M * kCols * 4;
  return std::max(ring, parts);
}

template <int MT, int S>
void run(const char* name, int N, int K, double copy_gbs, cudaStream_t s) {
  constexpr int M = 16 * MT;
  const size_t wn = size_t(N) * K;
  const int copies = int(std::max<size_t>(2, (size_t{400} << 20) / (wn * 2)));  // cold weights each call
  uint16_t *w, *x;
  float *y, *yr;
  CK(cudaMalloc(&w, wn * 2 * copies));
  CK(cudaMalloc(&x, size_t(M) * K * 2));
  CK(cudaMalloc(&y, size_t(M) * N * 4));
  CK(cudaMalloc(&yr, size_t(M) * N * 4));
  fill<<<1024, 256, 0, s>>>(w, wn * copies, 11u);
  fill<<<256, 256, 0, s>>>(x, size_t(M) * K, 13u);
  const int smem = smem_of<MT, S>();
  CK(cudaFuncSetAttribute(rows_matmul<MT, S>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  rows_matmul<MT, S><<<N / kCols, kThreads, smem, s>>>(x, w, y, N, K);
  CK(cudaGetLastError());
  constexpr int kChecked = 4;  // rows checked against the plain kernel (0, M/4 ... : spread over the m tiles)
  for (int c = 0; c < kChecked; ++c) {
    const int m = c * M / kChecked + c;
    reference<<<(N + 255) / 256, 256, 0, s>>>(x + size_t(m) * K, w, yr + size_t(m) * N, 1, N, K);
  }
  CK(cudaStreamSynchronize(s));
  std::vector<float> a(size_t(M) * N), b(size_t(M) * N);
  CK(cudaMemcpy(a.data(), y, a.size() * 4, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(b.data(), yr, b.size() * 4, cudaMemcpyDeviceToHost));
  double mx = 0, diff = 0;
  for (int c = 0; c < kChecked; ++c)
    for (int n = 0; n < N; ++n) {
      const size_t i = size_t(c * M / kChecked + c) * N + n;
      mx = std::max(mx, double(std::fabs(b[i])));
      diff = std::max(diff, double(std::fabs(a[i] - b[i])));
    }
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  const int reps = 40;
  CK(cudaEventRecord(e0, s));
  for (int r = 0; r < reps; ++r)
    rows_matmul<MT, S><<<N / kCols, kThreads, smem, s>>>(x, w + wn * (r % copies), y, N, K);
  CK(cudaEventRecord(e1, s));
  CK(cudaEventSynchronize(e1));
  float ms = 0;
  CK(cudaEventElapsedTime(&ms, e0, e1));
  const double us = ms * 1e3 / reps, stream_us = wn * 2 / (copy_gbs * 1e9) * 1e6;
  printf(
      "%-22s M=%2d S=%d: %7.1f us  (weights at the copy bandwidth %5.1f us: %.2fx; %.0f TFLOP/s)  max|y| %.3g, "
      "max diff vs reference %.3g\n",
      name, M, S, us, stream_us, us / stream_us, 2.0 * M * N * K / (us * 1e-6) / 1e12, mx, diff);
  CK(cudaFree(w));
  CK(cudaFree(x));
  CK(cudaFree(y));
  CK(cudaFree(yr));
}

}  // namespace

int main() {
  cudaStream_t s;
  CK(cudaStreamCreate(&s));
  const double copy_gbs = probe_copy_bandwidth(s);
  printf("copy bandwidth %.0f GB/s\n", copy_gbs);
  run<4, 8>("8B q/o 4096x4096", 4096, 4096, copy_gbs, s);
  run<4, 8>("8B down 4096x12288", 4096, 12288, copy_gbs, s);
  run<4, 4>("8B gate+up 24576x4096", 24576, 4096, copy_gbs, s);
  run<2, 8>("8B q/o 4096x4096", 4096, 4096, copy_gbs, s);
  run<2, 8>("8B down 4096x12288", 4096, 12288, copy_gbs, s);
  run<2, 4>("8B gate+up 24576x4096", 24576, 4096, copy_gbs, s);
  return 0;
}
