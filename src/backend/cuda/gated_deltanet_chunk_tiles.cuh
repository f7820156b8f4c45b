#pragma once
// The cp.async staging of the chunked gated delta rule's 64-row tiles (kC rows x kKT = 64 columns, row
// stride kLdA), shared by its state kernel (gated_deltanet_chunked.cu: W and the decayed keys) and its
// output kernel (gated_deltanet_chunk_output.cu: e^G Q and P): the same element of a tile is staged, and
// scaled, by the same thread in both, so that the scaled values are bit for bit the same. Also the
// output kernel's wide tiles (kC x kOT value columns: the state's rows, V').
#include <cstdint>

#include "backend/cuda/gated_deltanet_chunk_math.cuh"
#include "backend/cuda/gated_deltanet_chunked_ptx.cuh"

namespace specserve::cuda::kernels::gdn_chunk {

inline constexpr int kKT = 64;  // key dims per staged tile
// Row stride (floats) of the staged 64-row tiles: float4 rows 4 banks apart.
inline constexpr int kLdA = 68;
inline constexpr int kBufFloats = kC * kLdA;  // floats of a staging buffer
inline constexpr int kMaxDk = 512;            // gdn_rule_supports' largest dk
static_assert(kKT == 4 * 16 && kC == 4 * 16, "the thread layouts: rows 4ti + r");

// Rows of a tile a thread stages (stage_tile's): kStagedRows of them, row tid / 16 + 16 it.
inline constexpr int kStagedRows = kC * (kKT / 4) / kThreads;
__device__ __forceinline__ int staged_row(int it) {
  return static_cast<int>(threadIdx.x) / (kKT / 4) + it * (kThreads / (kKT / 4));
}

// Starts dst[i][a] (row stride kLdA) = src[i * ld + a] for i < rows, a < cols (cols a multiple of 4) and
// zeroes the rest of the kC x kKT tile. vec: the rows are 16-byte aligned, so cp.async (complete after
// cp_async_wait_all); else scalar loads.
__device__ __forceinline__ void stage_tile(float* dst, const float* src, int64_t ld, int rows, int cols, bool vec) {
  constexpr int kGroups = kKT / 4;  // float4 groups per row
#pragma unroll
  for (int it = 0; it < kStagedRows; ++it) {
    const int e = static_cast<int>(threadIdx.x) + it * kThreads;
    const int i = e / kGroups, a = (e % kGroups) * 4;
    float* d = dst + i * kLdA + a;
    if (i < rows && a < cols) {
      const float* p = src + i * ld + a;
      if (vec)
        gdn_ptx::cp_async16(d, p);
      else
        *reinterpret_cast<float4*>(d) = make_float4(p[0], p[1], p[2], p[3]);
    } else {
      *reinterpret_cast<float4*>(d) = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    }
  }
}

// The scales of the rows this thread stages (scale[staged_row(it)]), read into registers at a chunk's start
// so that scaling a tile does not wait for global memory.
struct RowScales {
  float s[kStagedRows];
  __device__ __forceinline__ void load(const float* scale) {
#pragma unroll
    for (int it = 0; it < kStagedRows; ++it) s[it] = scale[staged_row(it)];
  }
};

// After the tile's copies are waited for: dst[i][a] *= scale[i] on the elements this thread staged
// (stage_tile's).
__device__ __forceinline__ void scale_tile(float* dst, int rows, int cols, const RowScales& scale) {
  constexpr int kGroups = kKT / 4;
#pragma unroll
  for (int it = 0; it < kStagedRows; ++it) {
    const int e = static_cast<int>(threadIdx.x) + it * kThreads;
    const int i = e / kGroups, a = (e % kGroups) * 4;
    if (i < rows && a < cols) {
      float4* d = reinterpret_cast<float4*>(dst + i * kLdA + a);
      float4 v = *d;
      const float s = scale.s[it];
      v.x = v.x * s;
      v.y = v.y * s;
      v.z = v.z * s;
      v.w = v.w * s;
      *d = v;
    }
  }
}

// Key dims of key tile t (0 past the last tile).
__device__ __forceinline__ int key_cols(int t, int dk) { return t * kKT < dk ? imin(kKT, dk - t * kKT) : 0; }

// The output kernel's wide tiles: kC rows x kOT value columns, row stride kLdO (a warp's float4 reads of a
// row are 256 contiguous bytes).
inline constexpr int kOT = 128;
inline constexpr int kLdO = kOT;

// Starts dst[i][j] (row stride kLdO) = src[i * ld + j] for i < rows, j < cols and zeroes the rest of the
// kC x kOT tile. vec: ld, cols and src's alignment allow 16-byte cp.async (complete after a wait); else
// scalar loads.
__device__ __forceinline__ void stage_wide(float* dst, const float* src, int64_t ld, int rows, int cols, bool vec) {
  constexpr int kGroups = kOT / 4;  // float4 groups per row
  // Not fully unrolled: the output kernel stages while its 32 accumulators are live, and all eight groups'
  // addresses at once took it past 128 registers (152 bytes spilled).
#pragma unroll 2
  for (int it = 0; it < kC * kGroups / kThreads; ++it) {
    const int e = static_cast<int>(threadIdx.x) + it * kThreads;
    const int i = e / kGroups, j = (e % kGroups) * 4;
    float* d = dst + i * kLdO + j;
    if (i < rows && j < cols) {
      const float* p = src + i * ld + j;
      if (vec)
        gdn_ptx::cp_async16(d, p);
      else
        *reinterpret_cast<float4*>(d) =
            make_float4(p[0], j + 1 < cols ? p[1] : 0.0f, j + 2 < cols ? p[2] : 0.0f, j + 3 < cols ? p[3] : 0.0f);
    } else {
      *reinterpret_cast<float4*>(d) = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    }
  }
}

}  // namespace specserve::cuda::kernels::gdn_chunk
