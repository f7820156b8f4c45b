#pragma once
// Pieces of the chunked gated delta rule (docs/MODELS.md §3.3 step 7) for its CUDA kernels
// (gated_deltanet_chunked.cu, gated_deltanet_chunk_prep.cu): the chunk and tile sizes, the staging of a
// 64-row tile into shared memory, and M = (I + A)^-1 of a chunk's strictly lower A. Every reduction runs
// in a fixed order on one thread (fmaf, f32).
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

// A kC x kT tile of rows of qkv on its way to shared memory through registers: load() starts every load
// of the thread's kGroups float4 groups (all in flight at once; 16-byte loads where `vec` says the rows
// allow), store() writes dst[i][a] (row stride Ld) = src[i * ld + a] (* s1[i]) (* s2[i]) for i < rows,
// a < cols, and zero for the rest of the tile. Between the two the thread may work on the previous tile,
// so a tile's global latency is paid once and overlaps that work (the prep kernel's staging stalled on
// every element's load, one at a time: session 21's profile).
struct TileRegs {
  static constexpr int kGroupsPerRow = kT / 4;
  static constexpr int kGroups = kC * kGroupsPerRow / kThreads;
  static_assert(kC * kGroupsPerRow % kThreads == 0, "whole groups per thread");
  float4 v[kGroups];
  int rows = 0, cols = 0;

  __device__ __forceinline__ void load(const float* src, int64_t ld, int rows_, int cols_, bool vec) {
    rows = rows_;
    cols = cols_;
#pragma unroll
    for (int g = 0; g < kGroups; ++g) {
      const int e = static_cast<int>(threadIdx.x) + g * kThreads;
      const int i = e / kGroupsPerRow, a = (e % kGroupsPerRow) * 4;
      const float* p = src + i * ld + a;
      if (i < rows && a + 4 <= cols && vec) {
        v[g] = *reinterpret_cast<const float4*>(p);
      } else {
        const bool in = i < rows;
        v[g] = make_float4(in && a < cols ? p[0] : 0.0f, in && a + 1 < cols ? p[1] : 0.0f,
                           in && a + 2 < cols ? p[2] : 0.0f, in && a + 3 < cols ? p[3] : 0.0f);
      }
    }
  }

  template <int Ld>
  __device__ __forceinline__ void store(float* dst, const float* s1, const float* s2) const {
#pragma unroll
    for (int g = 0; g < kGroups; ++g) {
      const int e = static_cast<int>(threadIdx.x) + g * kThreads;
      const int i = e / kGroupsPerRow, a = (e % kGroupsPerRow) * 4;
      float x[4] = {v[g].x, v[g].y, v[g].z, v[g].w};
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        if (i < rows && a + u < cols) {  // the scaled elements; the rest stay exact zeros
          if (s1 != nullptr) x[u] = x[u] * s1[i];
          if (s2 != nullptr) x[u] = x[u] * s2[i];
        } else {
          x[u] = 0.0f;
        }
      }
      *reinterpret_cast<float4*>(dst + i * Ld + a) = make_float4(x[0], x[1], x[2], x[3]);
    }
  }
};

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
