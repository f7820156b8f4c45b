// The chunked gated delta rule (docs/MODELS.md §3.3 step 7) for prefill spans (GdnSpan::chunked): the same
// math as the CPU's chunked form (backend/cpu/gated_deltanet.cpp, chunk()), with the same chunks: a
// chunk ends at every absolute position that is a multiple of kGdnChunkRows (= kGdnChunk), so a span
// starting at position p first runs the partial chunk up to the next multiple. Stepped spans (decode,
// verify) keep the token-by-token kernel of gated_deltanet.cu.
//
// Two kernels per window of the call's chunks (chunks numbered span after span; a window is at most
// gdn_chunked_window chunks, so that the scratch stays within 128 MiB):
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
//
// chunk_state_kernel, one block per (span, value head h, tile of kVT = 32 value columns): the state's
// columns are independent of each other, so a block owns S[:, tile] of its head, holds it in shared
// memory for the whole window (read from and written back to the span's state once per window) and
// walks the span's chunks of the window in order. kThreads = 256; per chunk:
//  5. V' = U - W S and O = (e^G Q) S: W from the item, e^G Q staged from the q rows, both in key
//     tiles of kKT = 64 dims, two tiles a round; V' from U and O from 0, summed over the key dims in
//     increasing order;
//  6. O += P V' (the chunk's rows in increasing order; P and V' are zero past L), the outputs stored;
//  7. S = S e^(G_last) + (e^(G_last - G) K)^T V' per key tile, the sum over the chunk's rows in
//     increasing order, then the product and the sum rounded separately (as the CPU: --fmad=false).
// The tiles are staged with cp.async (no register round trip; scalar loads where the qkv rows are not
// 16-byte aligned: the same values), the second key tile of a round in its own commit group (in flight
// while the first is multiplied); then the thread that staged a row multiplies it by its gate, read into
// registers at the chunk's start (RowScales).
// The products run on CUDA cores (fmaf): each thread 4 x 2 outputs (rows 4ti + r, columns 2tj + c,
// ti = tid / 16, tj = tid % 16; for 7. key rows), float4 operand reads; 6. stops at the thread's last
// row (P is lower triangular).
// Shared memory: four 64 x 68 staging tiles (row stride 68: float4 rows 4 banks apart), V' (64 x 32) and
// the state tile (dk x 32): 92 KB at dk = 128, two blocks per multiprocessor.
//
// Bits: every sum runs in a fixed order (one thread's fmaf chain), no atomics. A chunk's item and its
// state step depend only on the chunk's rows, its position in the span (its length) and the state
// before it, never on the other spans of the call, the window (the state goes through global memory in
// f32 between windows), or where a prompt was cut into calls at chunk boundaries (the same chunks with
// the same state in between). So a span gives the bits it gives alone, in any call.
//
// Work (27B's linear-attention layer: 16 key heads, 48 value heads, dk = dv = 128, one 8,192-row span):
// 128 chunks; the prep does ~1.05 M FMA of scores a chunk and key head and ~0.6 M a value head (2,048
// blocks, no sequential dependence), the state kernel ~0.86 M FMA a chunk in each of 192 blocks, the
// chunks in sequence. Measured on an H200 (bench_cuda_gdn, docs/DECISIONS.md §4): 3.88 ms a layer,
// 18.3 TFLOP/s, 3.28 ms (21.6 TFLOP/s) since the prep's tiles go through registers (session 21: its
// scalar staging loads stalled it a third of the time; prep 429 -> 283 µs, state 787 µs a 2,048-row call
// under ncu's base clocks); the one-kernel form this replaced (~2.6 M FMA a chunk in each of the 192 sequential
// blocks: A, M, P and W recomputed for every column tile) 13.0 ms, and this state kernel's products on
// tensor cores (mma tf32, each f32 operand split in two tf32 parts) 4.16 ms; both left the code.
//
// tools/gpu/gdn_emulation/ runs both kernels on the host (threads as fibers) against the CPU's chunks
// and the bit identities above: run it after changing this file.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/gated_deltanet_chunk_math.cuh"
#include "backend/cuda/gated_deltanet_chunked_ptx.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/launch.cuh"

namespace specserve::cuda::kernels {

namespace {

using namespace gdn_chunk;

// ---- the chunks ---------------------------------------------------------------------------------------

// Rows of a span's first chunk: up to the next multiple of kC.
__host__ __device__ inline int64_t first_chunk_rows(int64_t position, int64_t rows) {
  const int64_t to_boundary = kC - position % kC;
  return rows < to_boundary ? rows : to_boundary;
}

__host__ __device__ inline int64_t span_chunks(int64_t position, int64_t rows) {
  return 1 + (rows - first_chunk_rows(position, rows) + kC - 1) / kC;
}

struct ChunkRows {
  int64_t row;  // the chunk's first row of qkv
  int rows;     // 1 .. kC
};

// Chunk k of span sp (the CPU's cut: the first chunk up to a multiple of kC, then kC rows at a time).
__device__ inline ChunkRows chunk_rows(const GdnChunkSpanDev& sp, int64_t k) {
  const int64_t first = first_chunk_rows(sp.position, sp.rows);
  if (k == 0) return {sp.row_begin, static_cast<int>(first)};
  const int64_t off = first + (k - 1) * kC, left = sp.rows - off;
  return {sp.row_begin + off, static_cast<int>(left < kC ? left : kC)};
}

// A chunk's scratch item (one value head), in floats: W [kC][dk], U [kC][dv], P [kC][kC], e^G [kC],
// e^(G_last - G) [kC], then e^(G_last) and 3 floats of padding (every part starts 16-byte aligned).
struct ItemLayout {
  int w, u, p, eg, decay, tail, floats;  // dk, dv <= 512: well within int
};
__host__ __device__ inline ItemLayout item_layout(int dk, int dv) {
  ItemLayout l{};
  l.w = 0;
  l.u = l.w + kC * dk;
  l.p = l.u + kC * dv;
  l.eg = l.p + kC * kC;
  l.decay = l.eg + kC;
  l.tail = l.decay + kC;
  l.floats = l.tail + 4;
  return l;
}

// Component u of v (u a constant after unrolling).
__device__ __forceinline__ float lane4(const float4& v, int u) {
  return u == 0 ? v.x : (u == 1 ? v.y : (u == 2 ? v.z : v.w));
}

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
  int lo = span_lo, hi = span_hi - 1;  // the last span whose first chunk is <= c
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (spans[mid].first_chunk <= c)
      lo = mid;
    else
      hi = mid - 1;
  }
  const GdnChunkSpanDev sp = spans[lo];
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
  const bool vec16 = vec != 0;
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
      ahead.load(qkv + 2 * key_dim + int64_t{hh} * dv + r0 * ld + t * kT, ld, L, imin(kT, dv - t * kT), vec16);
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

// ---- chunk_state_kernel -------------------------------------------------------------------------------

constexpr int kVT = 32;  // value columns per block
constexpr int kKT = 64;  // key dims per staged tile
// Row strides (floats) of the state kernel's shared tiles: the staged 64-row tiles (W, e^G Q, P, the
// decayed K) 68 (float4 rows 4 banks apart), the state and V' 32.
constexpr int kLdA = 68;
constexpr int kLdS = 32;
constexpr int kBufFloats = kC * kLdA;  // floats of a staging buffer
constexpr int kMaxDk = 512;            // gdn_rule_supports' largest dk
static_assert(kVT == 2 * 16 && kKT == 4 * 16 && kC == 4 * 16, "the thread layouts: 8 outputs per thread");

// Rows of a tile a thread stages (stage_tile's): kStagedRows of them, row tid / 16 + 16 it.
constexpr int kStagedRows = kC * (kKT / 4) / kThreads;
__device__ __forceinline__ int staged_row(int it) {
  return static_cast<int>(threadIdx.x) / (kKT / 4) + it * (kThreads / (kKT / 4));
}

size_t state_smem_bytes(int dk) {
  return sizeof(float) * (4 * size_t{kBufFloats} + size_t{kC} * kLdS + size_t(dk) * kLdS);
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

// acc_v -= W S and acc_o += (e^G Q) S over key tile t (its na rows of S), key dims in increasing order.
__device__ __forceinline__ void vo_tile(const float* sW, const float* sQ, const float* sS, int t, int dk, int tid,
                                        float (&acc_v)[8], float (&acc_o)[8]) {
  const float* sSt = sS + t * kKT * kLdS;
  const int na = key_cols(t, dk), ti = tid / 16, tj = tid % 16;
#pragma unroll 1
  for (int a = 0; a < na; a += 4) {
    float4 w[4], q[4];
    float2 s[4];
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      w[r] = *reinterpret_cast<const float4*>(sW + (4 * ti + r) * kLdA + a);
      q[r] = *reinterpret_cast<const float4*>(sQ + (4 * ti + r) * kLdA + a);
    }
#pragma unroll
    for (int u = 0; u < 4; ++u) s[u] = *reinterpret_cast<const float2*>(sSt + (a + u) * kLdS + 2 * tj);
#pragma unroll
    for (int u = 0; u < 4; ++u)
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const float wu = lane4(w[r], u), qu = lane4(q[r], u);
        acc_v[2 * r] = fmaf(-wu, s[u].x, acc_v[2 * r]);
        acc_v[2 * r + 1] = fmaf(-wu, s[u].y, acc_v[2 * r + 1]);
        acc_o[2 * r] = fmaf(qu, s[u].x, acc_o[2 * r]);
        acc_o[2 * r + 1] = fmaf(qu, s[u].y, acc_o[2 * r + 1]);
      }
  }
}

// acc_o += P V' over the chunk's rows m < rows4 (a multiple of 4; P and V' are zero past L) in
// increasing order, stopping after the thread's last row (P is lower triangular: the same bits).
__device__ __forceinline__ void pv(const float* sP, const float* sV, int rows4, int tid, float (&acc_o)[8]) {
  const int ti = tid / 16, tj = tid % 16, end = imin(rows4, 4 * ti + 4);
#pragma unroll 1
  for (int m = 0; m < end; m += 4) {
    float4 p[4];
    float2 v[4];
#pragma unroll
    for (int r = 0; r < 4; ++r) p[r] = *reinterpret_cast<const float4*>(sP + (4 * ti + r) * kLdA + m);
#pragma unroll
    for (int u = 0; u < 4; ++u) v[u] = *reinterpret_cast<const float2*>(sV + (m + u) * kLdS + 2 * tj);
#pragma unroll
    for (int u = 0; u < 4; ++u)
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const float pu = lane4(p[r], u);
        acc_o[2 * r] = fmaf(pu, v[u].x, acc_o[2 * r]);
        acc_o[2 * r + 1] = fmaf(pu, v[u].y, acc_o[2 * r + 1]);
      }
  }
}

// Key tile t's rows of S (na of them): S = S e^(G_last) + sum_m Kd[m][a] V'[m][j] for the thread's rows
// 4ti + r < na and columns 2tj + c, over the chunk's rows m < rows4 = rows rounded up to 4 (Kd and V' are
// zero past them) in increasing order.
__device__ __forceinline__ void update_tile(const float* sKd, const float* sV, float* sS, int t, int dk, int rows,
                                            float e_last, int tid) {
  float* sSt = sS + t * kKT * kLdS;
  const int na = key_cols(t, dk), rows4 = (rows + 3) & ~3, ti = tid / 16, tj = tid % 16;
  float add[4][2] = {};
#pragma unroll 4
  for (int m = 0; m < rows4; ++m) {
    const float4 k = *reinterpret_cast<const float4*>(sKd + m * kLdA + 4 * ti);
    const float2 v = *reinterpret_cast<const float2*>(sV + m * kLdS + 2 * tj);
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      add[r][0] = fmaf(lane4(k, r), v.x, add[r][0]);
      add[r][1] = fmaf(lane4(k, r), v.y, add[r][1]);
    }
  }
#pragma unroll
  for (int r = 0; r < 4; ++r) {
    const int a = 4 * ti + r;
    if (a < na) {
      float2* s = reinterpret_cast<float2*>(sSt + a * kLdS + 2 * tj);
      float2 x = *s;
      x.x = x.x * e_last + add[r][0];
      x.y = x.y * e_last + add[r][1];
      *s = x;
    }
  }
}

// Block ((s - span_lo) * Hv + h) * tiles + tile: span s, value head h, value columns [32 tile, 32 tile
// + 32); its chunks among the call's chunks [c0, c1), whose items are scratch[(c - c0) * Hv + h].
__global__ void __launch_bounds__(kThreads, 2)
    chunk_state_kernel(const float* qkv, int64_t ld, int vec, const GdnChunkSpanDev* spans, int span_lo, int64_t c0,
                       int64_t c1, int Hk, int Hv, int dk, int dv, const float* scratch, float* out, int64_t ldo) {
  pdl_begin();
  extern __shared__ float4 state_smem4[];
  float* smem = reinterpret_cast<float*>(state_smem4);
  float* b0 = smem;
  float* b1 = b0 + kBufFloats;
  float* b2 = b1 + kBufFloats;
  float* b3 = b2 + kBufFloats;
  float* sV = b3 + kBufFloats;  // [kC][kLdS] V'
  float* sS = sV + kC * kLdS;   // [dk][kLdS] the state's columns of this block

  const int tid = static_cast<int>(threadIdx.x);
  const int tiles = (dv + kVT - 1) / kVT;
  const int64_t bid = blockIdx.x;
  const int tile = static_cast<int>(bid % tiles);
  const int h = static_cast<int>((bid / tiles) % Hv);
  const GdnChunkSpanDev sp = spans[span_lo + bid / (int64_t{tiles} * Hv)];
  const int kh = h / (Hv / Hk);
  const int j0 = tile * kVT, nv = imin(kVT, dv - j0);
  const int64_t key_dim = int64_t{Hk} * dk;
  const float* q_base = qkv + int64_t{kh} * dk;
  const float* k_base = qkv + key_dim + int64_t{kh} * dk;
  float* S = sp.state + int64_t{h} * dk * dv + j0;  // S[a * dv + j], j < nv: this block's columns
  const ItemLayout lay = item_layout(dk, dv);
  const int64_t span_end = sp.first_chunk + span_chunks(sp.position, sp.rows);
  const int64_t k_begin = (c0 > sp.first_chunk ? c0 : sp.first_chunk) - sp.first_chunk;
  const int64_t k_end = (c1 < span_end ? c1 : span_end) - sp.first_chunk;
  const int key_tiles = (dk + kKT - 1) / kKT;
  // The thread's 8 elements of a 64 x 32 output (V', O): rows row0 + e / 2, columns col0 + e % 2.
  const int row0 = 4 * (tid / 16), col0 = 2 * (tid % 16);
  for (int e = tid; e < dk * kVT; e += kThreads) {
    const int a = e / kVT, j = e % kVT;
    sS[a * kLdS + j] = j < nv ? S[int64_t{a} * dv + j] : 0.0f;
  }
  // The chunks in order: each ends at the next multiple of kC or at the span's end.
  const int64_t row_end = sp.row_begin + sp.rows;
  int64_t row = chunk_rows(sp, k_begin).row;
  int64_t pos = sp.position + (row - sp.row_begin);
  const float* item = scratch + ((sp.first_chunk + k_begin - c0) * Hv + h) * lay.floats;
  for (int64_t k = k_begin; k < k_end; ++k, item += int64_t{Hv} * lay.floats) {
    const int64_t r0 = row;
    const int L = static_cast<int>(row_end - row < kC - pos % kC ? row_end - row : kC - pos % kC);
    row += L;
    pos += L;

    RowScales eg, decay;
    eg.load(item + lay.eg);
    decay.load(item + lay.decay);

    // 5. V' = U - W S and O = (e^G Q) S, two key tiles a round, the second tile's copies in flight while
    // the first is multiplied.
    float acc_v[8], acc_o[8];
    const float* u_base = item + lay.u + int64_t{row0} * dv + j0 + col0;
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      acc_v[e] = col0 + e % 2 < nv ? u_base[(e / 2) * dv + e % 2] : 0.0f;
      acc_o[e] = 0.0f;
    }
    for (int t = 0; t < key_tiles; t += 2) {
      const int na0 = key_cols(t, dk), na1 = key_cols(t + 1, dk);
      __syncthreads();  // the tiles are free; the state's writes (the previous chunk's) are visible
      stage_tile(b0, item + lay.w + t * kKT, dk, kC, na0, true);
      stage_tile(b1, q_base + r0 * ld + t * kKT, ld, L, na0, vec != 0);
      gdn_ptx::cp_async_commit();
      if (na1 > 0) {
        stage_tile(b2, item + lay.w + (t + 1) * kKT, dk, kC, na1, true);
        stage_tile(b3, q_base + r0 * ld + (t + 1) * kKT, ld, L, na1, vec != 0);
      }
      gdn_ptx::cp_async_commit();
      gdn_ptx::cp_async_wait_group<1>();
      scale_tile(b1, L, na0, eg);  // e^G q
      __syncthreads();
      vo_tile(b0, b1, sS, t, dk, tid, acc_v, acc_o);
      if (na1 > 0) {
        gdn_ptx::cp_async_wait_group<0>();
        scale_tile(b3, L, na1, eg);
        __syncthreads();
        vo_tile(b2, b3, sS, t + 1, dk, tid, acc_v, acc_o);
      }
    }

    // 6. V' to shared memory with P and the first two e^(G_last - G) K tiles; O += P V'.
    __syncthreads();  // every read of the tiles is done
#pragma unroll
    for (int e = 0; e < 8; ++e) sV[(row0 + e / 2) * kLdS + col0 + e % 2] = acc_v[e];
    stage_tile(b2, item + lay.p, kC, kC, kC, true);
    stage_tile(b0, k_base + r0 * ld, ld, L, key_cols(0, dk), vec != 0);
    gdn_ptx::cp_async_commit();
    if (key_tiles > 1) stage_tile(b1, k_base + r0 * ld + kKT, ld, L, key_cols(1, dk), vec != 0);
    gdn_ptx::cp_async_commit();
    const float e_last = item[lay.tail];
    gdn_ptx::cp_async_wait_group<1>();
    scale_tile(b0, L, key_cols(0, dk), decay);  // e^(G_last - G) k
    __syncthreads();
    pv(b2, sV, (L + 3) & ~3, tid, acc_o);
    float* o_base = out + (r0 + row0) * ldo + int64_t{h} * dv + j0 + col0;
#pragma unroll
    for (int e = 0; e < 8; ++e)
      if (row0 + e / 2 < L && col0 + e % 2 < nv) o_base[(e / 2) * ldo + e % 2] = acc_o[e];

    // 7. The state, two key tiles a round (the first two staged above: the second's copies in flight while
    // P V' and the first tile's update run).
    for (int t = 0; t < key_tiles; t += 2) {
      const int na0 = key_cols(t, dk), na1 = key_cols(t + 1, dk);
      if (t > 0) {
        __syncthreads();  // the tiles are free
        stage_tile(b0, k_base + r0 * ld + t * kKT, ld, L, na0, vec != 0);
        if (na1 > 0) stage_tile(b1, k_base + r0 * ld + (t + 1) * kKT, ld, L, na1, vec != 0);
        gdn_ptx::cp_async_wait_all();
        scale_tile(b0, L, na0, decay);
        if (na1 > 0) scale_tile(b1, L, na1, decay);
        __syncthreads();
      }
      update_tile(b0, sV, sS, t, dk, L, e_last, tid);
      if (t == 0 && na1 > 0) {
        gdn_ptx::cp_async_wait_group<0>();
        scale_tile(b1, L, na1, decay);
        __syncthreads();
      }
      if (na1 > 0) update_tile(b1, sV, sS, t + 1, dk, L, e_last, tid);
    }
  }
  __syncthreads();
  for (int e = tid; e < dk * kVT; e += kThreads) {
    const int a = e / kVT, j = e % kVT;
    if (j < nv) S[int64_t{a} * dv + j] = sS[a * kLdS + j];
  }
}

}  // namespace

int64_t gdn_span_chunks(int64_t position, int64_t rows) { return span_chunks(position, rows); }

int64_t gdn_number_chunks(GdnChunkSpanDev* spans, int64_t num_spans) {
  int64_t n = 0;
  for (int64_t s = 0; s < num_spans; ++s) {
    spans[s].first_chunk = n;
    n += span_chunks(spans[s].position, spans[s].rows);
  }
  return n;
}

int64_t gdn_chunk_scratch_floats(int Hv, int dk, int dv) { return int64_t{Hv} * item_layout(dk, dv).floats; }

int64_t gdn_chunked_window(int64_t chunks, int Hv, int dk, int dv) {
  constexpr int64_t kScratchBytes = int64_t{128} << 20;
  const int64_t per_chunk = gdn_chunk_scratch_floats(Hv, dk, dv) * int64_t{sizeof(float)};
  return std::clamp<int64_t>(kScratchBytes / per_chunk, 1, std::max<int64_t>(chunks, 1));
}

void gated_delta_rule_chunked(const float* qkv, int64_t ld, const float* g, const float* beta,
                              const GdnChunkSpanDev* spans, const GdnChunkSpanDev* host_spans, int64_t num_spans,
                              int Hk, int Hv, int dk, int dv, float* out, int64_t ldo, float* scratch,
                              int64_t scratch_chunks, cudaStream_t stream) {
  if (num_spans == 0) return;
  static const bool opted_in = [] {  // more than the default 48 KB of dynamic shared memory
    CUDA_CHECK(cudaFuncSetAttribute(chunk_prep_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    static_cast<int>(kPrepBytes)));
    CUDA_CHECK(cudaFuncSetAttribute(chunk_state_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    static_cast<int>(state_smem_bytes(kMaxDk))));
    return true;
  }();
  (void)opted_in;
  auto span_end = [&](int64_t s) {
    return host_spans[s].first_chunk + span_chunks(host_spans[s].position, host_spans[s].rows);
  };
  const int64_t total = span_end(num_spans - 1);
  const int vec = ld % 4 == 0 && reinterpret_cast<uintptr_t>(qkv) % 16 == 0 ? 1 : 0;
  const int64_t tiles = (dv + kVT - 1) / kVT;
  int64_t lo = 0;  // the first span with a chunk in the window
  for (int64_t c0 = 0; c0 < total; c0 += scratch_chunks) {
    const int64_t c1 = std::min(total, c0 + scratch_chunks);
    while (span_end(lo) <= c0) ++lo;
    int64_t hi = lo;  // past the last span with a chunk in the window
    while (hi < num_spans && host_spans[hi].first_chunk < c1) ++hi;
    launch_pdl(chunk_prep_kernel, static_cast<unsigned>((c1 - c0) * Hk), kThreads, kPrepBytes, stream, qkv, ld, vec, g,
               beta, spans, static_cast<int>(lo), static_cast<int>(hi), c0, Hk, Hv, dk, dv, scratch);
    CUDA_CHECK_LAUNCH();
    const auto state_blocks = static_cast<unsigned>((hi - lo) * Hv * tiles);
    launch_pdl(chunk_state_kernel, state_blocks, kThreads, state_smem_bytes(dk), stream, qkv, ld, vec, spans,
               static_cast<int>(lo), c0, c1, Hk, Hv, dk, dv, static_cast<const float*>(scratch), out, ldo);
    CUDA_CHECK_LAUNCH();
  }
}

}  // namespace specserve::cuda::kernels
