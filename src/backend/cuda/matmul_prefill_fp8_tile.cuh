#pragma once
// The W8A8 prefill GEMM's tile (matmul_prefill_fp8_sm90a.cu has the kernel and its numerics): the tile shape, the
// launch parameters, where tile t lies, and what becomes of a finished tile — the plain form's stores (from the
// consumers' registers or by the storer warps from the staging tile) and the SwiGLU form's quantisation of h into
// the down projection's codes. Device code for that one translation unit.
#include <cuda.h>
#include <cuda_fp8.h>

#include <cstdint>

#include "backend/cuda/fp8_code_order.h"
#include "backend/cuda/matmul_fp8_act_math.cuh"
#include "backend/cuda/matmul_wgmma_ptx.cuh"

namespace specserve::cuda::kernels::fp8p {

using wg::store_column_pair;

struct Fp8Gemm {
  static constexpr int kBM = 128, kBN = 128, kBK = 128, kConsumers = 2;
  static constexpr int kThreads = 128 * (kConsumers + 1);
  static constexpr int kABytes = kBM * kBK, kBBytes = kBN * kBK;  // one byte a code
  static constexpr int kTileBytes = kABytes + kBBytes;
  static constexpr int kScaleBytes = kBM * 4;  // the activation scales of the tile's rows for one block
  static constexpr int kStageTx = kTileBytes + kScaleBytes;
  static constexpr int kMaxStages = 6;
  static constexpr int kStorers = 96;          // the producer warpgroup's warps 1-3: the plain form's output stores
  static constexpr int kStagePitch = kBN + 8;  // floats a row of the output staging tile (rows 8 banks apart)
  static constexpr int kStagingBytes = kBM * kStagePitch * 4;
  static constexpr int kProducerRegs = 40, kConsumerRegs = 232;
  static constexpr int kMmaK = 32;       // k per wgmma step (32 codes = 32 bytes of a swizzled row)
  static constexpr int kSubN = kBN / 2;  // the SwiGLU form: columns of h a sub-tile computes (64 gate + 64 up rows)
};
static_assert(Fp8Gemm::kBK == fp8a::kGroup, "one stage is one scale block of K");
static_assert(Fp8Gemm::kBN == fp8a::kGroup, "a tile's columns are one weight scale block");
static_assert(Fp8Gemm::kBK == 128, "a 128-code row of a tile is the 128-byte swizzle's width");
static_assert(128 * Fp8Gemm::kProducerRegs + 256 * Fp8Gemm::kConsumerRegs <= 65536, "the register file");

struct Fp8Part {
  CUtensorMap b;  // w's codes [N, K] (stride ldw bytes), box 128 x 128
  const float* w_scales;
  int64_t scale_ld;
  float* y;
  int64_t ldy;
  int64_t N;
  int tiles_end;
  bool pairs;  // y and ldy allow 8-byte stores of column pairs
  bool quads;  // y and ldy allow 16-byte stores of 4 columns
};
constexpr int kMaxParts = 4;
struct Fp8Params {
  CUtensorMap a;   // x's codes [M, K] (pitch code_pitch(K)), box 128 x 128
  CUtensorMap sa;  // x's group scales, transposed [groups, M] (pitch scale_pitch(M)), box 128 x 1
  Fp8Part part[kMaxParts];
  int64_t M;
  int kblocks, tiles_m, tiles;
  // The SwiGLU form: part[0] is gate (its b box 64 x 128; y, ldy, N: h's), part[1] up (b, scales); h's codes
  // [M, hq_pitch] and transposed scales [groups_of(N), hq_scale_pitch] (the activation pass's layout).
  uint8_t* hq_codes;
  int64_t hq_pitch;
  float* hq_scales;
  int64_t hq_scale_pitch;
};

struct TileAt {
  int part;
  int64_t m0, n0;
};
// Tile t (128 x 128): its part, first row and first column; p.tiles_m counts the tiles along M.
__device__ __forceinline__ TileAt tile_at(const Fp8Params& p, int t) {
  int i = 0;
  while (t >= p.part[i].tiles_end) ++i;
  const int local = t - (i > 0 ? p.part[i - 1].tiles_end : 0);
  const int64_t m = int64_t{local % p.tiles_m} * Fp8Gemm::kBM;
  return {i, m, int64_t{local / p.tiles_m} * Fp8Gemm::kBN};
}

__device__ __forceinline__ uint32_t cvt_e4m3x2(float lo, float hi) {
  return static_cast<uint32_t>(__nv_cvt_float2_to_fp8x2(make_float2(lo, hi), __NV_SATFINITE, __NV_E4M3));
}

// A thread's two rows of a tile (r0 and r0 + 8; none at or past M) into part.y: kGroups column pairs, value(hr, j, e)
// at column n0 + 8 j + 2 (lane % 4) + e of row r0 + 8 hr (the wgmma C fragment's places).
template <int kGroups, class Value>
__device__ __forceinline__ void store_rows(const Fp8Part& part, int64_t M, int64_t r0, int64_t n0, int lane,
                                           Value value) {
#pragma unroll
  for (int hr = 0; hr < 2; ++hr) {
    const int64_t r = r0 + 8 * hr;
    if (r >= M) continue;
    float* yr = part.y + r * part.ldy;
#pragma unroll
    for (int j = 0; j < kGroups; ++j)
      store_column_pair(yr, n0 + 8 * j + 2 * (lane % 4), part.N, part.pairs, value(hr, j, 0), value(hr, j, 1));
  }
}

// The SwiGLU form's sub-tiles of launch tile `at` (two, or one where the group's second half starts at or past N).
__device__ __forceinline__ int swiglu_subs(const Fp8Params& p, const TileAt& at) {
  return at.n0 + Fp8Gemm::kSubN < p.part[0].N ? 2 : 1;
}

// The SwiGLU form's quantisation of one row's group (rows r, the group's first column c0 = n0 of the tile): the
// thread's values h0 (first sub-tile) and h1 (second; absent where subs == 1), index 2 jj + e for column
// 8 jj + 2 (lane % 4) + e of its sub-tile. Codes and the scale by the activation rule (matmul_fp8_act_math.cuh;
// the largest magnitude is order-free, so a quad's shuffles give the pass's value), stored as the pass stores them.
__device__ __forceinline__ void swiglu_quantise_row(const Fp8Params& p, int64_t r, int64_t c0, int subs, int lane,
                                                    const float (&h0)[16], const float (&h1)[16]) {
  const int64_t N = p.part[0].N;
  float amax = subs == 2 ? fabsf(h1[0]) : 0.0f;  // an absent half counts as zeros (the rule's columns past K)
#pragma unroll
  for (int i = 0; i < 16; ++i) amax = fmaxf(amax, fabsf(h0[i]));
  if (subs == 2) {
#pragma unroll
    for (int i = 1; i < 16; ++i) amax = fmaxf(amax, fabsf(h1[i]));
  }
  amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 1));
  amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 2));
  if (r >= p.M) return;
  const float s = fp8a::group_scale(amax);
  if (lane % 4 == 0) p.hq_scales[(c0 / fp8a::kGroup) * p.hq_scale_pitch + r] = s;
  uint8_t* row = p.hq_codes + r * p.hq_pitch;
  const int q = lane % 4;
#pragma unroll
  for (int a = 0; a < 8; ++a) {  // the 16-column groups of the 128: columns 16 a + 2 q + {0, 1} and + 8
    if (a >= 4 && subs < 2) break;
    const float(&h)[16] = a < 4 ? h0 : h1;
    const int jj = 2 * (a % 4);
    const uint32_t lo = cvt_e4m3x2(__fdiv_rn(h[2 * jj], s), __fdiv_rn(h[2 * jj + 1], s));
    const uint32_t hi = cvt_e4m3x2(__fdiv_rn(h[2 * jj + 2], s), __fdiv_rn(h[2 * jj + 3], s));
    const int64_t c = c0 + 16 * a + 2 * q;
    if (fp8o::whole_group(c, N)) {  // word q of the group in fragment order: columns 2q, 2q + 1, 2q + 8, 2q + 9
      *reinterpret_cast<uint32_t*>(row + fp8o::stored_index(c, N)) = lo | (hi << 16);
    } else {  // a group cut by N stays as it is: +0 codes from N up to the pitch, as the pass writes them
      const int64_t cols[4] = {c, c + 1, c + 8, c + 9};
      const uint32_t codes = lo | (hi << 16);
#pragma unroll
      for (int e = 0; e < 4; ++e)
        if (cols[e] < p.hq_pitch) row[cols[e]] = cols[e] < N ? static_cast<uint8_t>(codes >> (8 * e)) : uint8_t{0};
    }
  }
}

// The plain form's storers (the producer warpgroup's warps 1-3; `sid` 0..95): for each tile of the CTA, in the
// consumers' order, wait until the staging tile holds it, store its rows below M and columns below N into the
// part's y (16-byte stores where y allows them), and hand the staging tile back. A row is one warp's 32 lanes of
// 4 columns: 512 contiguous bytes of y.
__device__ __forceinline__ void store_staged_tiles(const Fp8Params& p, const float* staging, uint32_t staged,
                                                   uint32_t drained, int sid) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  const int swarp = sid / 32, slane = sid % 32;
  uint32_t u = 0;
  for (int t = static_cast<int>(blockIdx.x); t < p.tiles; t += static_cast<int>(gridDim.x), ++u) {
    const TileAt at = tile_at(p, t);
    const Fp8Part& part = p.part[at.part];
    const int64_t n = at.n0 + 4 * slane;
    const bool quad = part.quads && n + 3 < part.N;
    wg::mbar_wait(staged, u & 1u);
    for (int r = swarp; r < Fp8Gemm::kBM && at.m0 + r < p.M; r += Fp8Gemm::kStorers / 32) {
      const float4 v = *reinterpret_cast<const float4*>(staging + r * Fp8Gemm::kStagePitch + 4 * slane);
      float* yr = part.y + (at.m0 + r) * part.ldy;
      if (quad) {
        *reinterpret_cast<float4*>(yr + n) = v;
      } else {
        const float e[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
        for (int i = 0; i < 4; ++i)
          if (n + i < part.N) yr[n + i] = e[i];
      }
    }
    wg::mbar_arrive(drained);
  }
#endif
}

}  // namespace specserve::cuda::kernels::fp8p
