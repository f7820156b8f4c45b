#pragma once
// Pieces of the chunked gated delta rule (docs/MODELS.md §3.3 step 7) for its CUDA kernels
// (gated_deltanet_chunked.cu): the chunk geometry, the staging of a 64-row tile into shared memory, and
// M = (I + A)^-1 of a chunk's strictly lower A. Every reduction runs in a fixed order on one thread (fmaf, f32).
#include <cstdint>

#include "backend/cuda/kernels.h"

namespace specserve::cuda::kernels::gdn_chunk {

inline constexpr int kC = kGdnChunkRows;                   // rows per chunk
inline constexpr int kT = 32;                              // columns of a staged tile (value columns or key dims)
inline constexpr int kB = 16;                              // diagonal block size of the triangular inverse
inline constexpr int kThreads = 256;                       // 16 x 16: thread (ti, tj)
inline constexpr int kInverseScratch = 3 * kB * (kB + 1);  // floats of invert()'s X
static_assert(kC == 64 && kC % kB == 0 && kThreads == 256, "the thread layout assumes 64-row chunks");

__device__ __forceinline__ int imin(int a, int b) { return a < b ? a : b; }

// dst[i][a] (row stride Ld) = src[i * ld + a] (* s1[i]) (* s2[i]) for i < rows, a < cols; zero for
// the rest of the alloc_rows x kT tile.
template <int Ld>
__device__ __forceinline__ void stage(float* dst, int alloc_rows, const float* src, int64_t ld, int rows, int cols,
                                      const float* s1, const float* s2) {
  for (int e = static_cast<int>(threadIdx.x); e < alloc_rows * kT; e += kThreads) {
    const int i = e / kT, a = e % kT;
    float v = 0.0f;
    if (i < rows && a < cols) {
      v = src[i * ld + a];
      if (s1 != nullptr) v = v * s1[i];
      if (s2 != nullptr) v = v * s2[i];
    }
    dst[i * Ld + a] = v;
  }
}

// M = (I + A)^-1 for the strictly lower A (sA), into sM (both row stride Ld); X is kInverseScratch
// floats of scratch. Expects the blocks of sM above the diagonal zeroed and sA visible; ends with a
// barrier. Rows of A that are zero (a chunk's padding past its last row) give rows of M that are the
// identity's.
template <int Ld>
__device__ __forceinline__ void invert(const float* sA, float* sM, float* X) {
  const int tid = static_cast<int>(threadIdx.x);
  if (tid < kC) {  // diagonal block b, column c: forward substitution down the column
    const int b = tid / kB, c = tid % kB;
    const float* a = sA + (b * kB) * Ld + b * kB;
    float col[kB];
#pragma unroll
    for (int r = 0; r < kB; ++r) {
      float s = 0.0f;
#pragma unroll
      for (int m = 0; m < r; ++m) s = fmaf(a[r * Ld + m], col[m], s);
      col[r] = r < c ? 0.0f : (r == c ? 1.0f : -s);
    }
#pragma unroll
    for (int r = 0; r < kB; ++r) sM[(b * kB + r) * Ld + b * kB + c] = col[r];
  }
  __syncthreads();
  for (int d = 1; d < kC / kB; ++d) {  // blocks (bi, bj) = (q + d, q) at distance d
    const int n = (kC / kB - d) * kB * kB;
    for (int e = tid; e < n; e += kThreads) {  // X_q = sum_{k = bj}^{bi - 1} A_{bi,k} M_{k,bj}
      const int q = e / (kB * kB), r = (e / kB) % kB, c = e % kB;
      const float* arow = sA + ((q + d) * kB + r) * Ld;
      float x = 0.0f;
      for (int m = q * kB; m < (q + d) * kB; ++m) x = fmaf(arow[m], sM[m * Ld + q * kB + c], x);
      X[(q * kB + r) * (kB + 1) + c] = x;
    }
    __syncthreads();
    for (int e = tid; e < n; e += kThreads) {  // M_{bi,bj} = -M_{bi,bi} X_q
      const int q = e / (kB * kB), r = (e / kB) % kB, c = e % kB;
      const float* mrow = sM + ((q + d) * kB + r) * Ld + (q + d) * kB;
      float x = 0.0f;
#pragma unroll
      for (int m = 0; m < kB; ++m) x = fmaf(mrow[m], X[(q * kB + m) * (kB + 1) + c], x);
      sM[((q + d) * kB + r) * Ld + q * kB + c] = -x;
    }
    __syncthreads();
  }
}

}  // namespace specserve::cuda::kernels::gdn_chunk
