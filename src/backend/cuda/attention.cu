// Paged KV store and causal GQA attention (backend/cpu/attention.cpp) on the device.
//
// Layout: KvGeometry's [layer][K|V][kv_head][slot][head_dim] f32 blocks of kKvBlockSize (16)
// positions; a row's block table is a device array of device block pointers (staged by cuda_ops).
//
// Attention, split over the keys (flash-decoding), in two kernels:
//   1. attention_partial_kernel: one block of kWarps warps per (query row, KV head, chunk of keys). It
//      serves the G = num_heads / num_kv_heads query heads of that KV head, so each key and value is
//      read once per block. A row's window (keys window_start..position, n of them) is cut into
//      chunks from the window's start by attn::chunking (attention_chunking.cuh: a function of n
//      alone), and a chunk is walked in tiles of kTileKeys keys. Per tile (attention_tile.cuh): the
//      scores (the whole q·k dot with fmaf over the dims in the order d = (i + kk % 32) mod HD,
//      i = 0, 1, ..., where kk is the key's place in its tile, so the lanes of a warp read distinct
//      banks; times scale), the tile max, the running max m and the rescale factor, p = exp(s - m),
//      the tile's sum of p (two keys per lane, then warp_sum) added to the running sum l, and the
//      weighted V sum in increasing key order with fmaf. The keys are copied first and the values
//      after them (two cp.async groups), so the values land while the scores are computed; a launch
//      of more than one wave instead copies the values into the keys' buffer after the scores (the
//      SeqKV kernel: half the shared memory, twice the CTAs per SM, the same arithmetic).
//      The chunk's (m, l, acc) go to a scratch row.
//      attention_rows_kernel serves several rows per block instead: up to 16 or 32 query heads (4
//      rows of the 8B) of consecutive rows of the call whose chunks agree (attention_rows.cuh: one
//      block table, window start and chunk size, as a verify's rows of one sequence), so chunk c of
//      each of them starts at the same key and is walked in the same tiles; each tile is loaded once
//      for all of them instead of once per row. Each query head gets exactly the per-tile arithmetic
//      above through the same functions, on the tiles its row has (a row stops at its own end), and
//      writes the same scratch record; only which thread does which head's work differs. The host
//      picks it from its copy of the rows (KvArgs::host_rows) when it at least halves the blocks.
//   2. attention_combine_kernel: one block per (row, query head) merges the row's chunks in chunk
//      order: M = max m_c, L = sum l_c e^(m_c - M), out = (sum acc_c e^(m_c - M)) / L.
// Every choice of arithmetic depends only on the row's own window (the kernel and its variant depend
// on the launch, the arithmetic does not), so a row gives the same bits alone (a decode) or inside any
// batch (an extend, a verify, other sequences' rows).
#include <cuda_runtime.h>

#include <array>
#include <atomic>
#include <cmath>
#include <vector>

#include "backend/cuda/attention_chunking.cuh"
#include "backend/cuda/attention_rows.cuh"
#include "backend/cuda/attention_tile.cuh"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device_math.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/kv_layout.cuh"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/matmul_tensor_core_ptx.cuh"  // cp.async
#include "backend/cuda/staging.h"

namespace specserve::cuda::kernels {

namespace {

using tc::cp_async_ca;
using tc::cp_async_commit;
using tc::cp_async_wait;
using tc::cp_async_wait_all;
using tc::smem_addr;

constexpr int kWarps = 4;

__global__ void kv_store_kernel(const KvRow* rows, float* const* ptrs, Geo geo, const float* k, int64_t ldk,
                                const float* v, int64_t ldv) {
  pdl_begin();
  const int64_t r = blockIdx.x;
  const KvRow row = rows[r];
  float* block = kv_block_of(row, ptrs);
  const int slot = row.position % kBlockSize;
  const int width = geo.num_kv_heads * geo.head_dim;
  for (int e = threadIdx.x; e < width; e += blockDim.x) {
    const int h = e / geo.head_dim, d = e % geo.head_dim;
    block[geo.offset(0, h, slot) + d] = k[r * ldk + e];
    block[geo.offset(1, h, slot) + d] = v[r * ldv + e];
  }
}

using attn::kTileKeys;
constexpr int kMaxGroup = 16;  // query heads per KV head

// Dynamic shared memory of the partial kernel (floats): q [G][HD], p [G][kTileKeys], m, l and the
// rescale factor [G], then `tiles` buffers of [kTileKeys][HD]: the tile's keys and values (2), or one
// buffer that takes the keys and then the values (1), or none (0: the offset of the first buffer).
// The buffers start on a 16-byte boundary (cp.async destinations).
__host__ __device__ inline int attention_smem_floats(int G, int HD, int tiles) {
  const int head = (G * HD + G * kTileKeys + 3 * G + 3) / 4 * 4;
  return head + tiles * kTileKeys * HD;
}

// Scratch record of one (row, query head, chunk): acc[HD], then m, then l.
__host__ __device__ inline int64_t partial_floats(int head_dim) { return int64_t{head_dim} + 2; }

__device__ __forceinline__ float* partial_record(float* part, int64_t r, int num_heads, int h, int max_chunks, int c,
                                                 int head_dim) {
  return part + ((r * num_heads + h) * max_chunks + c) * partial_floats(head_dim);
}

// The KV blocks of a tile, keys j0 .. j0 + nk - 1 of a block table, into blk[]; returns the first one's
// index in the table (blk[0]). The caller synchronises before blk is read.
__device__ __forceinline__ int64_t tile_blocks(float* const* table, int64_t j0, int nk, float** blk, int tid) {
  const int64_t blk0 = j0 / kBlockSize, blk_last = (j0 + nk - 1) / kBlockSize;
  if (tid <= blk_last - blk0) blk[tid] = table[blk0 + tid];
  return blk0;
}

// One cp.async group copying the tile's keys (which 0) or values (1) of KV head kvh, keys j0 .. j0 + nk
// - 1, into dst [nk][HD].
template <int HD>
__device__ __forceinline__ void copy_tile(float* dst, float* const* blk, int64_t blk0, const Geo& geo, int kvh,
                                          int which, int64_t j0, int nk, int tid) {
  constexpr int kPieces = HD / 4;
  for (int e = tid; e < nk * kPieces; e += kWarps * 32) {
    const int kk = e / kPieces, piece = e % kPieces;
    const int64_t j = j0 + kk;
    const float* src = blk[j / kBlockSize - blk0] + geo.offset(which, kvh, static_cast<int>(j % kBlockSize));
    cp_async_ca(smem_addr(dst + kk * HD + 4 * piece), src + 4 * piece, 16);
  }
  cp_async_commit();
}

// DPL: head dims per lane (head_dim = 32 * DPL). GT: the query heads per KV head when known at
// compile time (4: Qwen3, 6: the 27B shapes, 8), else 0 and the loops run to kMaxGroup under a
// g < G guard: the same arithmetic in the same order, but each guarded iteration still costs its
// instructions, and the kernel is issue-bound (ncu: 11k instructions per warp at G = 4 before).
// SeqKV: the tile's values are copied into the keys' buffer once the scores are done (half the shared
// memory, so twice the CTAs per SM for launches of several waves); otherwise they have their own buffer
// and land while the scores run. Only the copy schedule differs: the same arithmetic, the same bits.
template <int DPL, int GT, bool SeqKV>
__global__ void __launch_bounds__(kWarps * 32)
    attention_partial_kernel(const KvRow* rows, float* const* ptrs, Geo geo, const float* q, int64_t ldq,
                             int num_heads, float scale, float* part, int max_chunks) {
  pdl_begin();
  constexpr int HD = 32 * DPL;
  constexpr int kThreads = kWarps * 32;
  extern __shared__ __align__(16) float smem[];
  constexpr int kG = GT > 0 ? GT : kMaxGroup;  // the loops' bound
  const int G = GT > 0 ? GT : num_heads / geo.num_kv_heads;
  float* s_q = smem;                       // [G][HD]
  float* s_p = s_q + G * HD;               // [G][kTileKeys] scores, then p
  float* s_m = s_p + G * kTileKeys;        // [G] running max
  float* s_l = s_m + G;                    // [G] running sum
  float* s_corr = s_l + G;                 // [G] this tile's rescale factor
  float* s_k = s_q + attention_smem_floats(G, HD, 0);  // [kTileKeys][HD] the tile's keys
  float* s_v = SeqKV ? s_k : s_k + kTileKeys * HD;      // [kTileKeys][HD] and values

  const int64_t r = blockIdx.x / geo.num_kv_heads;
  const int kvh = static_cast<int>(blockIdx.x % geo.num_kv_heads);
  const int c = static_cast<int>(blockIdx.y);
  const KvRow row = rows[r];
  const int64_t w0 = row.window_start, n = int64_t{row.position} + 1 - w0;
  const attn::Chunking ch = attn::chunking(n);
  if (c >= ch.chunks) return;
  const int64_t i_begin = c * ch.keys, i_end = i_begin + ch.keys < n ? i_begin + ch.keys : n;
  float* const* table = ptrs + row.table;
  const int tid = static_cast<int>(threadIdx.x), warp = tid >> 5, lane = tid & 31;

  for (int e = tid; e < G * HD; e += kThreads) s_q[e] = q[r * ldq + int64_t{kvh} * G * HD + e];
  for (int g = tid; g < G; g += kThreads) {
    s_m[g] = -INFINITY;
    s_l[g] = 0.0f;
  }
  // This thread's outputs in the value sum: dims tid and tid + kThreads (below HD) of every query head.
  constexpr int kDims = (HD + kThreads - 1) / kThreads;
  float acc[kG][kDims];
#pragma unroll
  for (int g = 0; g < kG; ++g)
#pragma unroll
    for (int j = 0; j < kDims; ++j) acc[g][j] = 0.0f;
  __syncthreads();

  __shared__ float* s_blk[kTileKeys / kBlockSize + 1];  // the tile's KV blocks
  for (int64_t t0 = i_begin; t0 < i_end; t0 += kTileKeys) {
    const int nk = i_end - t0 < kTileKeys ? static_cast<int>(i_end - t0) : kTileKeys;
    const int64_t blk0 = tile_blocks(table, w0 + t0, nk, s_blk, tid);
    __syncthreads();
    // The tile's keys, then its values, into shared memory (two groups: the values land meanwhile; with
    // SeqKV they are copied after the scores, into the keys' buffer).
    copy_tile<HD>(s_k, s_blk, blk0, geo, kvh, 0, w0 + t0, nk, tid);
    if constexpr (!SeqKV) {
      copy_tile<HD>(s_v, s_blk, blk0, geo, kvh, 1, w0 + t0, nk, tid);
      cp_async_wait<1>();  // this thread's key pieces
    } else {
      cp_async_wait_all();
    }
    __syncthreads();
    // Scores: thread t takes key t % kTileKeys and query heads t / kTileKeys, + kThreads / kTileKeys, ...
    {
      constexpr int kHeadStep = kThreads / kTileKeys;
      constexpr int kHeadsPerThread = (kG + kHeadStep - 1) / kHeadStep;
      const int kk = tid % kTileKeys;
      if (kk < nk) {
        const float* const key[1] = {s_k + kk * HD};
        const float* heads[kHeadsPerThread];
        bool live[kHeadsPerThread];
#pragma unroll
        for (int j = 0; j < kHeadsPerThread; ++j) {
          const int g = tid / kTileKeys + kHeadStep * j;
          heads[j] = s_q + g * HD;
          live[j] = g < G;
        }
        float p[1][kHeadsPerThread];
        attn_tile::scores<HD, 1, kHeadsPerThread>(key, heads, live, kk % 32, scale, p);
#pragma unroll
        for (int j = 0; j < kHeadsPerThread; ++j)
          if (live[j]) s_p[(tid / kTileKeys + kHeadStep * j) * kTileKeys + kk] = p[0][j];
      }
    }
    __syncthreads();
    if constexpr (SeqKV) copy_tile<HD>(s_v, s_blk, blk0, geo, kvh, 1, w0 + t0, nk, tid);  // keys are done
    // Softmax bookkeeping: warp w takes query heads w, w + kWarps, ...
    for (int g = warp; g < G; g += kWarps)
      attn_tile::softmax(s_p + g * kTileKeys, nk, lane, s_m + g, s_l + g, s_corr + g);
    cp_async_wait_all();  // this thread's value pieces
    __syncthreads();
    // Weighted values, keys in increasing order.
#pragma unroll
    for (int g = 0; g < kG; ++g)
#pragma unroll
      for (int j = 0; j < kDims; ++j)
        if (g < G) acc[g][j] = attn_tile::rescale(acc[g][j], s_corr[g]);
    if (tid < HD) {
#pragma unroll 4
      for (int kk = 0; kk < nk; ++kk) {
        const float* vp = s_v + kk * HD;
        float v[kDims];
#pragma unroll
        for (int j = 0; j < kDims; ++j) v[j] = tid + kThreads * j < HD ? vp[tid + kThreads * j] : 0.0f;
#pragma unroll
        for (int g = 0; g < kG; ++g)
          if (g < G) {
            const float pg = s_p[g * kTileKeys + kk];
#pragma unroll
            for (int j = 0; j < kDims; ++j) acc[g][j] = attn_tile::add_value(acc[g][j], pg, v[j]);
          }
      }
    }
    __syncthreads();  // s_p is rewritten by the next tile
  }
#pragma unroll
  for (int g = 0; g < kG; ++g)
#pragma unroll
    for (int j = 0; j < kDims; ++j)
      if (g < G && tid + kThreads * j < HD)
        partial_record(part, r, num_heads, kvh * G + g, max_chunks, c, HD)[tid + kThreads * j] = acc[g][j];
  for (int g = tid; g < G; g += kThreads) {
    float* rec = partial_record(part, r, num_heads, kvh * G + g, max_chunks, c, HD);
    rec[HD] = s_m[g];
    rec[HD + 1] = s_l[g];
  }
}

// The multi-row kernel: one block of kWarps warps per (item, KV head, chunk), an item being up to
// kQ / G consecutive rows of the call whose chunks agree (attention_rows.cuh: one block table, window
// start and chunk size), so that chunk c of each of them covers keys from the same start to the row's
// own end. Each tile is loaded once for all of them. Query head qi = (row of the item) * G + head takes
// the single-row kernel's arithmetic (attention_tile.cuh) on the tiles its row has: the same scores,
// softmax bookkeeping, values and scratch record, so the same bits; only the assignment of the work to
// threads differs. A row past its own end (a shorter window: fewer keys in the last tile or chunk)
// skips the tile, and a row without chunk c writes no record for it.
template <int DPL, int kQ, bool SeqKV>
__global__ void __launch_bounds__(kWarps * 32)
    attention_rows_kernel(const KvRow* rows, const int32_t* items, float* const* ptrs, Geo geo, const float* q,
                          int64_t ldq, int num_heads, float scale, float* part, int max_chunks) {
  pdl_begin();
  constexpr int HD = 32 * DPL;
  constexpr int kThreads = kWarps * 32;
  static_assert(kThreads % HD == 0 || HD % kThreads == 0, "head dims split evenly over the threads");
  extern __shared__ __align__(16) float smem[];
  const int G = num_heads / geo.num_kv_heads;
  float* s_q = smem;                       // [kQ][HD] query head qi = row * G + head
  float* s_p = s_q + kQ * HD;              // [kQ][kTileKeys] scores, then p
  float* s_m = s_p + kQ * kTileKeys;       // [kQ] running max
  float* s_l = s_m + kQ;                   // [kQ] running sum
  float* s_corr = s_l + kQ;                // [kQ] this tile's rescale factor
  float* s_k = s_q + attention_smem_floats(kQ, HD, 0);  // [kTileKeys][HD] the tile's keys
  float* s_v = SeqKV ? s_k : s_k + kTileKeys * HD;       // [kTileKeys][HD] and values
  __shared__ int64_t s_end[kQ];  // per query head: the end of its row's keys in the chunk (i_begin: none)
  __shared__ int s_nk[kQ];       // per query head: its row's keys in the tile (0: none)
  __shared__ float* s_blk[kTileKeys / kBlockSize + 1];  // the tile's KV blocks

  const int item = static_cast<int>(blockIdx.x / geo.num_kv_heads);
  const int kvh = static_cast<int>(blockIdx.x % geo.num_kv_heads);
  const int c = static_cast<int>(blockIdx.y);
  const int r0 = items[item], nrows = items[item + 1] - r0, Q = nrows * G;
  const KvRow first = rows[r0];
  const int64_t w0 = first.window_start;
  const int64_t keys = attn::chunking(int64_t{first.position} + 1 - w0).keys;  // every row's
  const int64_t i_begin = c * keys;
  const int tid = static_cast<int>(threadIdx.x), warp = tid >> 5, lane = tid & 31;

  for (int qi = tid; qi < kQ; qi += kThreads) {
    int64_t end = i_begin;
    if (qi < Q) {
      const int64_t n = int64_t{rows[r0 + qi / G].position} + 1 - w0;
      end = n < i_begin ? i_begin : n < i_begin + keys ? n : i_begin + keys;
    }
    s_end[qi] = end;
    s_m[qi] = -INFINITY;
    s_l[qi] = 0.0f;
  }
  __syncthreads();
  int64_t i_end = i_begin;  // the end of the item's keys in the chunk: its longest window's
  for (int qi = 0; qi < Q; qi += G) i_end = s_end[qi] > i_end ? s_end[qi] : i_end;
  if (i_end == i_begin) return;  // no row of the item has chunk c
  for (int row = 0; row < nrows; ++row)
    for (int e = tid; e < G * HD; e += kThreads)
      s_q[row * G * HD + e] = q[(r0 + row) * ldq + int64_t{kvh} * G * HD + e];
  for (int e = Q * HD + tid; e < kQ * HD; e += kThreads) s_q[e] = 0.0f;  // no row

  // Scores: warp w takes query heads w, w + kWarps, ...; lane takes keys lane and lane + 32 (one rot).
  constexpr int kScoreHeads = kQ / kWarps;
  // Values: this thread's outputs are dims col + kCols * jd of query heads vq0 + kSplit * j.
  constexpr int kCols = HD < kThreads ? HD : kThreads;
  constexpr int kSplit = kThreads / kCols;
  constexpr int kDims = HD / kCols;
  constexpr int kValueHeads = kQ / kSplit;
  const int col = tid % kCols, vq0 = tid / kCols;
  float acc[kValueHeads][kDims];
#pragma unroll
  for (int j = 0; j < kValueHeads; ++j)
#pragma unroll
    for (int jd = 0; jd < kDims; ++jd) acc[j][jd] = 0.0f;

  float* const* table = ptrs + first.table;
  for (int64_t t0 = i_begin; t0 < i_end; t0 += kTileKeys) {
    const int nk = i_end - t0 < kTileKeys ? static_cast<int>(i_end - t0) : kTileKeys;  // the longest row's
    const int64_t blk0 = tile_blocks(table, w0 + t0, nk, s_blk, tid);
    for (int qi = tid; qi < kQ; qi += kThreads) {
      const int64_t left = s_end[qi] - t0;
      s_nk[qi] = left <= 0 ? 0 : left < kTileKeys ? static_cast<int>(left) : kTileKeys;
    }
    __syncthreads();
    copy_tile<HD>(s_k, s_blk, blk0, geo, kvh, 0, w0 + t0, nk, tid);
    if constexpr (!SeqKV) {
      copy_tile<HD>(s_v, s_blk, blk0, geo, kvh, 1, w0 + t0, nk, tid);
      cp_async_wait<1>();  // this thread's key pieces
    } else {
      cp_async_wait_all();
    }
    __syncthreads();
    // Every head's scores, unguarded: those of heads whose row has no keys in the tile (or no row: zero
    // queries) and of keys past a row's end or past the tile's copy (lane + 32 >= nk) are never read.
    if (lane < nk) {
      const float* const key[2] = {s_k + lane * HD, s_k + (lane + 32) * HD};
      const float* heads[kScoreHeads];
      bool live[kScoreHeads];
#pragma unroll
      for (int j = 0; j < kScoreHeads; ++j) {
        heads[j] = s_q + (warp + kWarps * j) * HD;
        live[j] = true;
      }
      float s[2][kScoreHeads];
      attn_tile::scores<HD, 2, kScoreHeads>(key, heads, live, lane, scale, s);
#pragma unroll
      for (int j = 0; j < kScoreHeads; ++j) {
        float* sp = s_p + (warp + kWarps * j) * kTileKeys;
        sp[lane] = s[0][j];
        sp[lane + 32] = s[1][j];
      }
    }
    __syncthreads();
    if constexpr (SeqKV) copy_tile<HD>(s_v, s_blk, blk0, geo, kvh, 1, w0 + t0, nk, tid);  // keys are done
#pragma unroll
    for (int j = 0; j < kScoreHeads; ++j) {
      const int qi = warp + kWarps * j, n = s_nk[qi];
      if (n > 0) attn_tile::softmax(s_p + qi * kTileKeys, n, lane, s_m + qi, s_l + qi, s_corr + qi);
    }
    cp_async_wait_all();  // this thread's value pieces
    __syncthreads();
    // Weighted values, each head's keys in increasing order: the keys all of this thread's heads in the
    // tile have, four at a time, then the rest head by head.
    int vn[kValueHeads];
    int common = kTileKeys, longest = 0;
#pragma unroll
    for (int j = 0; j < kValueHeads; ++j) {
      const int qi = vq0 + kSplit * j;
      vn[j] = s_nk[qi];
      if (vn[j] > 0) {
        common = vn[j] < common ? vn[j] : common;
        longest = vn[j] > longest ? vn[j] : longest;
#pragma unroll
        for (int jd = 0; jd < kDims; ++jd) acc[j][jd] = attn_tile::rescale(acc[j][jd], s_corr[qi]);
      }
    }
    if (longest == 0) common = 0;
    int kk = 0;
    for (; kk + 4 <= common; kk += 4) {
      float v[4][kDims];
#pragma unroll
      for (int t = 0; t < 4; ++t)
#pragma unroll
        for (int jd = 0; jd < kDims; ++jd) v[t][jd] = s_v[(kk + t) * HD + col + kCols * jd];
#pragma unroll
      for (int j = 0; j < kValueHeads; ++j)
        if (vn[j] > 0) {
          const float4 p = *reinterpret_cast<const float4*>(s_p + (vq0 + kSplit * j) * kTileKeys + kk);
#pragma unroll
          for (int jd = 0; jd < kDims; ++jd) {
            acc[j][jd] = attn_tile::add_value(acc[j][jd], p.x, v[0][jd]);
            acc[j][jd] = attn_tile::add_value(acc[j][jd], p.y, v[1][jd]);
            acc[j][jd] = attn_tile::add_value(acc[j][jd], p.z, v[2][jd]);
            acc[j][jd] = attn_tile::add_value(acc[j][jd], p.w, v[3][jd]);
          }
        }
    }
    for (; kk < longest; ++kk) {
      float v[kDims];
#pragma unroll
      for (int jd = 0; jd < kDims; ++jd) v[jd] = s_v[kk * HD + col + kCols * jd];
#pragma unroll
      for (int j = 0; j < kValueHeads; ++j)
        if (kk < vn[j]) {
          const float p = s_p[(vq0 + kSplit * j) * kTileKeys + kk];
#pragma unroll
          for (int jd = 0; jd < kDims; ++jd) acc[j][jd] = attn_tile::add_value(acc[j][jd], p, v[jd]);
        }
    }
    __syncthreads();  // s_p, s_nk and the buffers are rewritten by the next tile
  }
#pragma unroll
  for (int j = 0; j < kValueHeads; ++j) {
    const int qi = vq0 + kSplit * j;
    if (qi < Q && s_end[qi] > i_begin) {
      const int row = qi / G;
      float* rec = partial_record(part, r0 + row, num_heads, kvh * G + qi - row * G, max_chunks, c, HD);
#pragma unroll
      for (int jd = 0; jd < kDims; ++jd) rec[col + kCols * jd] = acc[j][jd];
    }
  }
  for (int qi = tid; qi < Q; qi += kThreads)
    if (s_end[qi] > i_begin) {
      const int row = qi / G;
      float* rec = partial_record(part, r0 + row, num_heads, kvh * G + qi - row * G, max_chunks, c, HD);
      rec[HD] = s_m[qi];
      rec[HD + 1] = s_l[qi];
    }
}

__global__ void attention_combine_kernel(const KvRow* rows, int num_heads, int head_dim, const float* part,
                                         int max_chunks, float* out, int64_t ldo) {
  pdl_begin();
  const int64_t r = blockIdx.x / num_heads;
  const int h = static_cast<int>(blockIdx.x % num_heads);
  const KvRow row = rows[r];
  const int64_t chunks = attn::chunking(int64_t{row.position} + 1 - row.window_start).chunks;
  const int64_t rec = partial_floats(head_dim);
  const float* base = part + (r * num_heads + h) * max_chunks * rec;
  float mx = -INFINITY;
  for (int64_t c = 0; c < chunks; ++c) mx = fmaxf(mx, base[c * rec + head_dim]);
  for (int d = static_cast<int>(threadIdx.x); d < head_dim; d += blockDim.x) {
    float L = 0.0f, o = 0.0f;
    for (int64_t c = 0; c < chunks; ++c) {
      const float f = expf(base[c * rec + head_dim] - mx);
      L = L + base[c * rec + head_dim + 1] * f;
      o = o + base[c * rec + d] * f;
    }
    out[r * ldo + int64_t{h} * head_dim + d] = o * (1.0f / L);
  }
}

// SPECSERVE_ATTN_SEQ_KV: -1 (default) picks per launch, 0 never uses the SeqKV kernel, 1 always (a
// benchmark knob, read once; the bits are the same either way).
int seq_kv_knob() {
  static const int v = static_cast<int>(tuning_knob("SPECSERVE_ATTN_SEQ_KV", -1));
  return v;
}

// SPECSERVE_ATTN_ROW_QUERIES: -1 (default) attn::item_queries, 0 never groups rows (every row to the
// single-row kernel), 16 or 32 query heads per CTA of the multi-row kernel (a benchmark knob, read once;
// the bits are the same either way).
int row_queries_knob() {
  static const int v = static_cast<int>(tuning_knob("SPECSERVE_ATTN_ROW_QUERIES", -1));
  return v;
}

// Whether a launch of `ctas` CTAs takes a partial kernel's SeqKV variant: as the knob says, else when it
// needs more than one wave of the overlapped variant (`overlapped`, smem2 bytes of shared memory; 16
// verify rows of the 8B one row per CTA: 1,152 CTAs against 3 per SM). `wave` keeps the CTAs of one
// wave, asked of the occupancy API once.
template <class Kernel>
bool use_seq_kv(Kernel overlapped, size_t smem2, int64_t ctas, std::atomic<int64_t>& wave) {
  if (seq_kv_knob() >= 0) return seq_kv_knob() == 1;
  int64_t per_wave = wave.load(std::memory_order_relaxed);
  if (per_wave == 0) {
    int per_sm = 0;
    CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, overlapped, kWarps * 32, smem2));
    per_wave = int64_t{per_sm} * sm_count();
    wave.store(per_wave, std::memory_order_relaxed);
  }
  return ctas > per_wave;
}

template <int DPL, int GT, bool SeqKV>
void launch_partial_kernel(const KvArgs& kv, const float* q, int64_t ldq, int num_heads, float scale, float* part,
                           int max_chunks, size_t smem, cudaStream_t stream) {
  launch_pdl(attention_partial_kernel<DPL, GT, SeqKV>,
             dim3(static_cast<unsigned>(kv.R * kv.num_kv_heads), static_cast<unsigned>(max_chunks)), kWarps * 32, smem,
             stream, kv.rows, kv.ptrs, geo_of(kv), q, ldq, num_heads, scale, part, max_chunks);
  CUDA_CHECK_LAUNCH();
}

template <int DPL, int GT>
void launch_partial(const KvArgs& kv, const float* q, int64_t ldq, int num_heads, float scale, float* part,
                    int max_chunks, cudaStream_t stream) {
  constexpr int HD = 32 * DPL;
  const int G = num_heads / kv.num_kv_heads;
  static const bool configured = [] {
    for (const auto kernel : {attention_partial_kernel<DPL, GT, false>, attention_partial_kernel<DPL, GT, true>})
      CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      static_cast<int>(sizeof(float) * attention_smem_floats(kMaxGroup, HD, 2))));
    return true;
  }();
  (void)configured;
  const size_t smem2 = sizeof(float) * static_cast<size_t>(attention_smem_floats(G, HD, 2));
  static std::array<std::atomic<int64_t>, kMaxGroup + 1> wave{};  // per group size
  if (use_seq_kv(attention_partial_kernel<DPL, GT, false>, smem2, kv.R * kv.num_kv_heads * max_chunks, wave[G]))
    launch_partial_kernel<DPL, GT, true>(kv, q, ldq, num_heads, scale, part, max_chunks,
                                         sizeof(float) * static_cast<size_t>(attention_smem_floats(G, HD, 1)), stream);
  else
    launch_partial_kernel<DPL, GT, false>(kv, q, ldq, num_heads, scale, part, max_chunks, smem2, stream);
}

// The multi-row kernel over n_items items (items: their first rows, then R; device).
template <int DPL, int kQ>
void launch_rows(const KvArgs& kv, const int32_t* items, int64_t n_items, const float* q, int64_t ldq, int num_heads,
                 float scale, float* part, int max_chunks, cudaStream_t stream) {
  constexpr int HD = 32 * DPL;
  const size_t smem2 = sizeof(float) * static_cast<size_t>(attention_smem_floats(kQ, HD, 2));
  static const bool configured = [smem2] {
    for (const auto kernel : {attention_rows_kernel<DPL, kQ, false>, attention_rows_kernel<DPL, kQ, true>})
      CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem2)));
    return true;
  }();
  (void)configured;
  static std::atomic<int64_t> wave{0};
  const bool seq = use_seq_kv(attention_rows_kernel<DPL, kQ, false>, smem2, n_items * kv.num_kv_heads * max_chunks, wave);
  const dim3 grid(static_cast<unsigned>(n_items * kv.num_kv_heads), static_cast<unsigned>(max_chunks));
  const size_t smem = seq ? sizeof(float) * static_cast<size_t>(attention_smem_floats(kQ, HD, 1)) : smem2;
  launch_pdl(seq ? attention_rows_kernel<DPL, kQ, true> : attention_rows_kernel<DPL, kQ, false>, grid, kWarps * 32,
             smem, stream, kv.rows, items, kv.ptrs, geo_of(kv), q, ldq, num_heads, scale, part, max_chunks);
  CUDA_CHECK_LAUNCH();
}

// The multi-row kernel when the call's rows group (attn::row_items over kv.host_rows) and the knob
// allows; false when it launched nothing.
template <int DPL>
bool launch_grouped(const KvArgs& kv, const float* q, int64_t ldq, int num_heads, float scale, float* part,
                    int max_chunks, cudaStream_t stream) {
  const int G = num_heads / kv.num_kv_heads;
  int queries = row_queries_knob();
  if (queries < 0) queries = attn::item_queries(G);
  if (kv.host_rows == nullptr || (queries != 16 && queries != 32)) return false;
  const std::vector<int32_t> items = attn::row_items(kv.host_rows, kv.R, queries / G);
  // (A table past a staging segment would take the staging's big buffer, which may hold kv.rows.)
  if (items.empty() || items.size() > 8192) return false;
  // Read by the kernel enqueued next: the caller holds the staging lock (as for kv.rows).
  const auto* d_items =
      static_cast<const int32_t*>(Staging::global().stage(items.data(), items.size() * sizeof(int32_t)));
  const auto n_items = static_cast<int64_t>(items.size()) - 1;
  if (queries == 16)
    launch_rows<DPL, 16>(kv, d_items, n_items, q, ldq, num_heads, scale, part, max_chunks, stream);
  else
    launch_rows<DPL, 32>(kv, d_items, n_items, q, ldq, num_heads, scale, part, max_chunks, stream);
  return true;
}

template <int DPL>
void launch_attention(const KvArgs& kv, const float* q, int64_t ldq, int num_heads, float scale, float* out,
                      int64_t ldo, float* part, int max_chunks, cudaStream_t stream) {
  constexpr int HD = 32 * DPL;
  // Rows of one sequence that share their chunks go to the multi-row kernel (head_dim 32, 64, 128 and
  // 256: attn::rows_kernel_supports). Otherwise the group sizes of the supported models get their own
  // single-row kernels (head_dim 128 and 256 only, to bound the instantiations); any other runs the
  // generic one. Same bits in every case.
  bool launched = false;
  if constexpr (DPL == 1 || DPL == 2 || DPL == 4 || DPL == 8)
    launched = launch_grouped<DPL>(kv, q, ldq, num_heads, scale, part, max_chunks, stream);
  const int G = num_heads / kv.num_kv_heads;
  if constexpr (DPL == 4 || DPL == 8) {
    if (!launched) {
      launched = true;
      switch (G) {
        case 4: launch_partial<DPL, 4>(kv, q, ldq, num_heads, scale, part, max_chunks, stream); break;
        case 6: launch_partial<DPL, 6>(kv, q, ldq, num_heads, scale, part, max_chunks, stream); break;
        case 8: launch_partial<DPL, 8>(kv, q, ldq, num_heads, scale, part, max_chunks, stream); break;
        default: launched = false;
      }
    }
  }
  if (!launched) launch_partial<DPL, 0>(kv, q, ldq, num_heads, scale, part, max_chunks, stream);
  launch_pdl(attention_combine_kernel, static_cast<unsigned>(kv.R * num_heads), HD < 128 ? HD : 128, 0, stream, kv.rows,
             num_heads, HD, part, max_chunks, out, ldo);
  CUDA_CHECK_LAUNCH();
}

}  // namespace

void kv_store(const KvArgs& kv, const float* k, int64_t ldk, const float* v, int64_t ldv, cudaStream_t stream) {
  if (kv.R == 0) return;
  launch_pdl(kv_store_kernel, static_cast<unsigned>(kv.R), 128, 0, stream, kv.rows, kv.ptrs, geo_of(kv), k, ldk, v,
             ldv);
  CUDA_CHECK_LAUNCH();
}

bool attention_supports(int head_dim) { return head_dim % 32 == 0 && head_dim >= 32 && head_dim <= 256; }
bool attention_group_supported(int num_heads, int num_kv_heads) { return num_heads / num_kv_heads <= kMaxGroup; }

int64_t attention_chunks(int64_t window) { return attn::chunking(window).chunks; }
int64_t attention_scratch_floats(int64_t rows, int num_heads, int head_dim, int64_t max_chunks) {
  return rows * num_heads * max_chunks * partial_floats(head_dim);
}

void attention(const KvArgs& kv, const float* q, int64_t ldq, int num_heads, float scale, float* out, int64_t ldo,
               float* scratch, int64_t max_chunks, cudaStream_t stream) {
  if (kv.R == 0 || num_heads == 0) return;
  const int mc = static_cast<int>(max_chunks);
  switch (kv.head_dim / 32) {
    case 1: launch_attention<1>(kv, q, ldq, num_heads, scale, out, ldo, scratch, mc, stream); break;
    case 2: launch_attention<2>(kv, q, ldq, num_heads, scale, out, ldo, scratch, mc, stream); break;
    case 3: launch_attention<3>(kv, q, ldq, num_heads, scale, out, ldo, scratch, mc, stream); break;
    case 4: launch_attention<4>(kv, q, ldq, num_heads, scale, out, ldo, scratch, mc, stream); break;
    case 5: launch_attention<5>(kv, q, ldq, num_heads, scale, out, ldo, scratch, mc, stream); break;
    case 6: launch_attention<6>(kv, q, ldq, num_heads, scale, out, ldo, scratch, mc, stream); break;
    case 7: launch_attention<7>(kv, q, ldq, num_heads, scale, out, ldo, scratch, mc, stream); break;
    case 8: launch_attention<8>(kv, q, ldq, num_heads, scale, out, ldo, scratch, mc, stream); break;
    default: break;  // excluded by attention_supports()
  }
}

}  // namespace specserve::cuda::kernels
