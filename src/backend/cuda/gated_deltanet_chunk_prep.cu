// The chunked gated delta rule's prep kernel (the overview, the state kernel and the host side:
// gated_deltanet_chunked.cu).
//
// chunk_prep_kernel, one block per (chunk, key head), fully parallel: everything of a chunk that does not
// depend on the state, for each of the key head's Hv / Hk value heads h in turn, into the chunk's
// scratch item of h (layout: item_layout). kThreads = 16 x 16 threads (ti, tj); per chunk of L <= 64
// rows (rows past L are zero padded, so they add exact zeros):
//  0. scores, once for the key head, over key tiles of 32 dims: K K^T and Q K^T, each thread a 4 x 4
//     sub-grid (rows ti + 16r, cols tj + 16c), float4 reads along the key dims;
//  then per value head h:
//  1. gates: G = cumulative g summed left to right (the CPU's order), beta, e^G, e^(G_last - G);
//  2. A = strictly-lower (beta_i k_i.k_j) e^(G_i - G_j) and P = lower (q_i.k_j) e^(G_i - G_j) (stored);
//  3. M = (I + A)^-1: the four 16 x 16 diagonal blocks by forward substitution (a thread per column),
//     then the blocks below the diagonal one distance at a time, M_ij = -M_ii sum_k A_ik M_kj;
//  4. U = M (beta V) over value tiles of 32 and W = M (beta e^G K) over key tiles of 32 (stored), each
//     thread rows 4ti + r, columns 2tj + c, sums over the chunk's rows in increasing order, stopping at
//     the thread's last row (M is lower triangular).
//  The block's qkv tiles (the scores' keys and queries, then per value head its value and key tiles) go
//  through registers one tile ahead of their use (TileRegs, gated_deltanet_chunk_math.cuh): a tile's
//  loads are in flight while the block works on the one before, and the thread that stores an element
//  scales it (beta, e^G) as the CPU rounds.
//  The item also holds e^G and e^(G_last - G) per row (0 past L) and e^(G_last). Rows past L of U, W
//  and P are exact zeros (A's rows past L are zero, so M's are the identity's and beta V, beta K there
//  are zero).
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/gated_deltanet_chunk_geometry.cuh"
#include "backend/cuda/gated_deltanet_chunk_math.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/launch.cuh"

namespace specserve::cuda::kernels::gdn_chunk {

namespace {

// ---- chunk_prep_kernel --------------------------------------------------------------------------------

constexpr int kLdP = kT + 4;  // row stride of the prep's 64 x 32 tiles (float4 rows)
constexpr int kLdM = kC + 4;  // row stride of its A and M (float4 rows)
// Shared memory, in floats.
constexpr int kPrepOffA = 0;                            // [kC][kLdM] A (strictly lower)
constexpr int kPrepOffM = kPrepOffA + kC * kLdM;        // [kC][kLdM] M = (I + A)^-1 (lower, unit diagonal)
constexpr int kPrepOffK = kPrepOffM + kC * kLdM;        // [kC][kLdP] a key tile (raw, later beta e^G scaled)
constexpr int kPrepOffQ = kPrepOffK + kC * kLdP;        // [kC][kLdP] a query tile, later a beta V tile
constexpr int kPrepOffX = kPrepOffQ + kC * kLdP;        // the inverse's scratch
constexpr int kPrepOffG = kPrepOffX + kInverseScratch;  // [kC] G
constexpr int kPrepOffBeta = kPrepOffG + kC;            // [kC] beta
constexpr int kPrepOffEg = kPrepOffBeta + kC;           // [kC] e^G
constexpr int kPrepOffDecay = kPrepOffEg + kC;          // [kC] e^(G_last - G)
constexpr int kPrepFloats = kPrepOffDecay + kC;
constexpr size_t kPrepBytes = sizeof(float) * kPrepFloats;
static_assert(kPrepBytes <= 75 * 1024, "three blocks per multiprocessor");
static_assert(kPrepOffK % 4 == 0 && kPrepOffQ % 4 == 0 && kPrepOffM % 4 == 0, "float4 rows");

// acc[r][c] += sum_m sM[4ti + r][m] sB[m][2tj + c] over m < min(rows4, 4ti + 4) (rows4 a multiple of 4)
// in increasing order: U = M (beta V) and W = M (beta e^G K) a 32-column tile at a time. M is lower
// triangular, so the columns past a thread's last row add exact zeros and are skipped (the same bits).
__device__ __forceinline__ void m_times_tile(const float* sM, const float* sB, int rows4, int ti, int tj,
                                             float (&acc)[4][2]) {
  const int end = imin(rows4, 4 * ti + 4);
  for (int m = 0; m < end; m += 4) {
    float4 mi[4];
    float2 b[4];
#pragma unroll
    for (int r = 0; r < 4; ++r) mi[r] = *reinterpret_cast<const float4*>(sM + (4 * ti + r) * kLdM + m);
#pragma unroll
    for (int q = 0; q < 4; ++q) b[q] = *reinterpret_cast<const float2*>(sB + (m + q) * kLdP + 2 * tj);
#pragma unroll
    for (int q = 0; q < 4; ++q)
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        acc[r][0] = fmaf(lane4(mi[r], q), b[q].x, acc[r][0]);
        acc[r][1] = fmaf(lane4(mi[r], q), b[q].y, acc[r][1]);
      }
  }
}

// Block (c - c0) * Hk + kh: chunk c of the call (in [c0, c0 + gridDim.x / Hk)), key head kh and its
// Hv / Hk value heads h, one after the other (K K^T and Q K^T computed once for them); the chunk's span
// is among spans[span_lo, span_hi). Writes the items scratch[(c - c0) * Hv + h].
__global__ void __launch_bounds__(kThreads, 2)
    chunk_prep_kernel(const float* qkv, int64_t ld, int vec, const float* g, const float* beta,
                      const GdnChunkSpanDev* spans, int span_lo, int span_hi, int64_t c0, int Hk, int Hv, int dk,
                      int dv, float* scratch) {
  pdl_begin();
  extern __shared__ float4 prep_smem4[];
  float* smem = reinterpret_cast<float*>(prep_smem4);
  float* sA = smem + kPrepOffA;
  float* sM = smem + kPrepOffM;
  float* sK = smem + kPrepOffK;
  float* sQ = smem + kPrepOffQ;
  float* sX = smem + kPrepOffX;
  float* sG = smem + kPrepOffG;
  float* sBeta = smem + kPrepOffBeta;
  float* sEg = smem + kPrepOffEg;
  float* sDecay = smem + kPrepOffDecay;

  const int tid = static_cast<int>(threadIdx.x), ti = tid / 16, tj = tid % 16;
  const int64_t bid = blockIdx.x;
  const int kh = static_cast<int>(bid % Hk);
  const int64_t c = c0 + bid / Hk;
  const GdnChunkSpanDev sp = spans[chunk_span(spans, span_lo, span_hi, c)];
  const ChunkRows cr = chunk_rows(sp, c - sp.first_chunk);
  const int64_t r0 = cr.row;
  const int L = cr.rows, rows4 = (cr.rows + 3) & ~3;
  const ItemLayout lay = item_layout(dk, dv);
  const int64_t key_dim = int64_t{Hk} * dk;
  const float* q_base = qkv + int64_t{kh} * dk;
  const float* k_base = qkv + key_dim + int64_t{kh} * dk;

  // The block's tiles of qkv rows, in the order it stages them: the key tiles of the scores, then per value
  // head its value tiles (U) and its key tiles (W). Each is loaded into registers one tile ahead of its
  // use (TileRegs), across the work between; the scores' query tiles the same way beside them.
  const int key_tiles = (dk + kT - 1) / kT, value_tiles = (dv + kT - 1) / kT, heads = Hv / Hk;
  const int tiles = key_tiles + heads * (value_tiles + key_tiles);
  // 16-byte loads where the rows allow: every key head's (dk a multiple of 16), a value head's only where
  // dv is a multiple of 4 (else its rows start off 16-byte boundaries).
  const bool vec16 = vec != 0, vec16_v = vec16 && dv % 4 == 0;
  TileRegs ahead, q_ahead;
  int next_tile = 0;
  auto fetch = [&] {  // loads tile next_tile (none past the last) and moves on
    int t = next_tile++;
    if (t >= tiles) return;
    if (t < key_tiles) {
      ahead.load(k_base + r0 * ld + t * kT, ld, L, imin(kT, dk - t * kT), vec16);
      return;
    }
    t -= key_tiles;
    const int hh = kh * heads + t / (value_tiles + key_tiles);
    t %= value_tiles + key_tiles;
    if (t < value_tiles)
      ahead.load(qkv + 2 * key_dim + int64_t{hh} * dv + r0 * ld + t * kT, ld, L, imin(kT, dv - t * kT), vec16_v);
    else
      ahead.load(k_base + r0 * ld + (t - value_tiles) * kT, ld, L, imin(kT, dk - (t - value_tiles) * kT), vec16);
  };
  fetch();
  q_ahead.load(q_base + r0 * ld, ld, L, imin(kT, dk), vec16);

  // Scores of the key head: K K^T and Q K^T over the key dims in increasing order, each thread a 4 x 4
  // sub-grid (rows ti + 16r, cols tj + 16c).
  float kk[4][4] = {}, qk[4][4] = {};
  for (int a0 = 0; a0 < dk; a0 += kT) {
    const int na = imin(kT, dk - a0);  // a multiple of 16
    __syncthreads();                   // the tiles are free
    ahead.store<kLdP>(sK, nullptr, nullptr);
    q_ahead.store<kLdP>(sQ, nullptr, nullptr);
    fetch();
    if (a0 + kT < dk) q_ahead.load(q_base + r0 * ld + a0 + kT, ld, L, imin(kT, dk - a0 - kT), vec16);
    __syncthreads();
    for (int a = 0; a < na; a += 4) {
      float4 ki[4], qi[4], kj[4];
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        ki[r] = *reinterpret_cast<const float4*>(sK + (ti + 16 * r) * kLdP + a);
        qi[r] = *reinterpret_cast<const float4*>(sQ + (ti + 16 * r) * kLdP + a);
        kj[r] = *reinterpret_cast<const float4*>(sK + (tj + 16 * r) * kLdP + a);
      }
#pragma unroll
      for (int u = 0; u < 4; ++u)
#pragma unroll
        for (int r = 0; r < 4; ++r)
#pragma unroll
          for (int cc = 0; cc < 4; ++cc) {
            kk[r][cc] = fmaf(lane4(ki[r], u), lane4(kj[cc], u), kk[r][cc]);
            qk[r][cc] = fmaf(lane4(qi[r], u), lane4(kj[cc], u), qk[r][cc]);
          }
    }
  }

  for (int h = kh * heads; h < (kh + 1) * heads; ++h) {
    float* item = scratch + ((c - c0) * Hv + h) * lay.floats;

    // 1. Gates.
    __syncthreads();  // the previous head is done with every buffer
    if (tid < kC) {
      sG[tid] = tid < L ? g[(r0 + tid) * Hv + h] : 0.0f;
      sBeta[tid] = tid < L ? beta[(r0 + tid) * Hv + h] : 0.0f;
    }
    __syncthreads();
    if (tid == 0) {
      float acc = 0.0f;
      for (int i = 0; i < L; ++i) {
        acc += sG[i];
        sG[i] = acc;
      }
      for (int i = L; i < kC; ++i) sG[i] = acc;
    }
    __syncthreads();
    if (tid < kC) {
      const float e = expf(sG[tid]);
      const float decay = tid < L ? expf(sG[L - 1] - sG[tid]) : 0.0f;
      sEg[tid] = e;
      sDecay[tid] = decay;
      item[lay.eg + tid] = tid < L ? e : 0.0f;
      item[lay.decay + tid] = decay;
      if (tid == L - 1) item[lay.tail] = e;
      if (tid == 0) *item_ready(item, lay) = 0u;  // the state kernel counts its blocks in
    }

    // 2. A (shared memory) and P (the item) from the scores.
#pragma unroll
    for (int r = 0; r < 4; ++r)
#pragma unroll
      for (int cc = 0; cc < 4; ++cc) {
        const int i = ti + 16 * r, j = tj + 16 * cc;
        const float decay = j <= i ? expf(sG[i] - sG[j]) : 0.0f;  // masked before the exp: no inf
        sA[i * kLdM + j] = j < i ? (sBeta[i] * kk[r][cc]) * decay : 0.0f;
        item[lay.p + i * kC + j] = j <= i ? qk[r][cc] * decay : 0.0f;
      }
    for (int e = tid; e < kC * kC; e += kThreads) {
      const int i = e / kC, j = e % kC;
      if (j / kB > i / kB) sM[i * kLdM + j] = 0.0f;
    }
    __syncthreads();

    // 3. M = (I + A)^-1 (ends with a barrier).
    invert<kLdM>(sA, sM, sX);

    // 4. U = M (beta V), a value tile at a time, then W = M (beta e^G K), a key tile at a time; each
    // thread rows 4ti + r, columns 2tj + c, the sums over m <= its last row and < rows4 (M's columns
    // and the tile's rows past L add exact zeros).
    for (int v0 = 0; v0 < dv; v0 += kT) {
      const int nvv = imin(kT, dv - v0);
      __syncthreads();                        // sQ is free
      ahead.store<kLdP>(sQ, sBeta, nullptr);  // beta V
      fetch();
      __syncthreads();
      float u[4][2] = {};
      m_times_tile(sM, sQ, rows4, ti, tj, u);
#pragma unroll
      for (int r = 0; r < 4; ++r)
#pragma unroll
        for (int cc = 0; cc < 2; ++cc) {
          const int j = 2 * tj + cc;
          if (j < nvv) item[lay.u + (4 * ti + r) * dv + v0 + j] = u[r][cc];
        }
    }
    for (int a0 = 0; a0 < dk; a0 += kT) {
      const int na = imin(kT, dk - a0);
      __syncthreads();                    // sK is free
      ahead.store<kLdP>(sK, sBeta, sEg);  // (k beta) e^G, as the CPU rounds
      fetch();
      __syncthreads();
      float w[4][2] = {};
      m_times_tile(sM, sK, rows4, ti, tj, w);
#pragma unroll
      for (int r = 0; r < 4; ++r)
#pragma unroll
        for (int cc = 0; cc < 2; ++cc) {
          const int j = 2 * tj + cc;
          if (j < na) item[lay.w + (4 * ti + r) * dk + a0 + j] = w[r][cc];
        }
    }
  }
}

}  // namespace

void launch_chunk_prep(const float* qkv, int64_t ld, int vec, const float* g, const float* beta,
                       const GdnChunkSpanDev* spans, int span_lo, int span_hi, int64_t c0, int64_t chunks, int Hk,
                       int Hv, int dk, int dv, float* scratch, cudaStream_t stream) {
  static const bool opted_in = [] {  // more than the default 48 KB of dynamic shared memory
    CUDA_CHECK(cudaFuncSetAttribute(chunk_prep_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    static_cast<int>(kPrepBytes)));
    return true;
  }();
  (void)opted_in;
  launch_pdl(chunk_prep_kernel, static_cast<unsigned>(chunks * Hk), kThreads, kPrepBytes, stream, qkv, ld, vec, g, beta,
             spans, span_lo, span_hi, c0, Hk, Hv, dk, dv, scratch);
  CUDA_CHECK_LAUNCH();
}

}  // namespace specserve::cuda::kernels::gdn_chunk
