// The multi-row split-KV attention partial kernel (attention.cu's header explains the scheme): one CTA
// serves several rows of one sequence whose chunks agree (attention_rows.cuh), loading each tile of keys
// and values once for all of them; every query head gets the one-row kernel's per-tile arithmetic
// (attention_tile.cuh), so a row's bits do not depend on the kernel that served it.
#include <cuda_runtime.h>

#include <atomic>
#include <cmath>
#include <vector>

#include "backend/cuda/device_scope.h"
#include "backend/cuda/attention_common.cuh"
#include "backend/cuda/attention_rows.cuh"
#include "backend/cuda/attention_tile.cuh"
#include "backend/cuda/staging.h"

namespace specserve::cuda::kernels::attn_kernel {

namespace {

// The multi-row kernel: one block of W warps per (item, KV head, chunk), an item being up to
// kQ / G consecutive rows of the call whose chunks agree (attention_rows.cuh: one block table, window
// start and chunk size), so that chunk c of each of them covers keys from the same start to the row's
// own end. Each tile is loaded once for all of them. Query head qi = (row of the item) * G + head takes
// the single-row kernel's arithmetic (attention_tile.cuh) on the tiles its row has: the same scores,
// softmax bookkeeping, values and scratch record, so the same bits; only the assignment of the work to
// threads differs. A row past its own end (a shorter window: fewer keys in the last tile or chunk)
// skips the tile, and a row without chunk c writes no record for it.
// W (4 warps: kRowWarps) only sets how the work is spread over the CTA's threads.
template <int DPL, int kQ, int W, bool SeqKV, class KV>
__global__ void __launch_bounds__(W * 32)
    attention_rows_kernel(const KvRow* rows, const int32_t* items, void* const* ptrs, Geo geo, const float* q,
                          int64_t ldq, int num_heads, float scale, float* part, int max_chunks) {
  pdl_begin();
  constexpr int HD = 32 * DPL;
  constexpr int kThreads = W * 32;
  static_assert(kThreads % HD == 0 || HD % kThreads == 0, "head dims split evenly over the threads");
  static_assert(kQ % W == 0, "every warp scores the same number of query heads");
  extern __shared__ __align__(16) float smem[];
  const int G = num_heads / geo.num_kv_heads;
  float* s_q = smem;                                                        // [kQ][HD] query head qi = row * G + head
  float* s_p = s_q + kQ * HD;                                               // [kQ][kTileKeys] scores, then p
  float* s_m = s_p + kQ * kTileKeys;                                        // [kQ] running max
  float* s_l = s_m + kQ;                                                    // [kQ] running sum
  float* s_corr = s_l + kQ;                                                 // [kQ] this tile's rescale factor
  KV* s_k = reinterpret_cast<KV*>(s_q + attention_smem_floats(kQ, HD, 0));  // [kTileKeys][HD] the tile's keys
  KV* s_v = SeqKV ? s_k : s_k + kTileKeys * HD;                             // [kTileKeys][HD] and values
  __shared__ int64_t s_end[kQ];  // per query head: the end of its row's keys in the chunk (i_begin: none)
  __shared__ int s_nk[kQ];       // per query head: its row's keys in the tile (0: none)
  __shared__ void* s_blk[kTileKeys / kBlockSize + 1];  // the tile's KV blocks

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

  // Scores: warp w takes query heads w, w + W, ...; lane takes keys lane and lane + 32 (one rot).
  constexpr int kScoreHeads = kQ / W;
  // Values: this thread's outputs are dims col + kCols * jd of query heads vq0 + kSplit * j.
  constexpr int kCols = HD < kThreads ? HD : kThreads;
  constexpr int kSplit = kThreads / kCols;
  constexpr int kDims = HD / kCols;
  constexpr int kValueHeads = kQ / kSplit;
  static_assert(kQ % kSplit == 0, "every thread sums the values of the same number of query heads");
  const int col = tid % kCols, vq0 = tid / kCols;
  float acc[kValueHeads][kDims];
#pragma unroll
  for (int j = 0; j < kValueHeads; ++j)
#pragma unroll
    for (int jd = 0; jd < kDims; ++jd) acc[j][jd] = 0.0f;

  void* const* table = ptrs + first.table;
  for (int64_t t0 = i_begin; t0 < i_end; t0 += kTileKeys) {
    const int nk = i_end - t0 < kTileKeys ? static_cast<int>(i_end - t0) : kTileKeys;  // the longest row's
    const int64_t blk0 = tile_blocks(table, w0 + t0, nk, s_blk, tid);
    for (int qi = tid; qi < kQ; qi += kThreads) {
      const int64_t left = s_end[qi] - t0;
      s_nk[qi] = left <= 0 ? 0 : left < kTileKeys ? static_cast<int>(left) : kTileKeys;
    }
    __syncthreads();
    load_tile<HD, SeqKV, kThreads>(s_k, s_v, s_blk, blk0, geo, kvh, w0 + t0, nk, tid);
    __syncthreads();
    // Every head's scores, unguarded: those of heads whose row has no keys in the tile (or no row: zero
    // queries) and of keys past a row's end or past the tile's copy (lane + 32 >= nk) are never read.
    if (lane < nk) {
      const KV* const key[2] = {s_k + lane * HD, s_k + (lane + 32) * HD};
      const float* heads[kScoreHeads];
      bool live[kScoreHeads];
#pragma unroll
      for (int j = 0; j < kScoreHeads; ++j) {
        heads[j] = s_q + (warp + W * j) * HD;
        live[j] = true;
      }
      float s[2][kScoreHeads];
      attn_tile::scores<HD, 2, kScoreHeads>(key, heads, live, lane, scale, s);
#pragma unroll
      for (int j = 0; j < kScoreHeads; ++j) {
        float* sp = s_p + (warp + W * j) * kTileKeys;
        sp[lane] = s[0][j];
        sp[lane + 32] = s[1][j];
      }
    }
    __syncthreads();
    if constexpr (SeqKV) copy_tile<HD, kThreads>(s_v, s_blk, blk0, geo, kvh, 1, w0 + t0, nk, tid);  // keys done
#pragma unroll
    for (int j = 0; j < kScoreHeads; ++j) {
      const int qi = warp + W * j, n = s_nk[qi];
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
        for (int jd = 0; jd < kDims; ++jd) v[t][jd] = kv_widen(s_v[(kk + t) * HD + col + kCols * jd]);
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
      for (int jd = 0; jd < kDims; ++jd) v[jd] = kv_widen(s_v[kk * HD + col + kCols * jd]);
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

// When rows group (attention_rows.cuh: RowGrouping): Auto, unless a test sets another mode.
std::atomic<int>& grouping_mode() {
  static std::atomic<int> mode{static_cast<int>(attn::RowGrouping::Auto)};
  return mode;
}

// The warps of a multi-row CTA. 8 and 16 (head dims 128 and 256) gave the same bits and were never
// measured faster; they left the tree (docs/DECISIONS.md: attention).
constexpr int kRowWarps = 4;

// The multi-row kernel with W warps a CTA over n_items items (items: their first rows, then R; device).
template <int DPL, int kQ, int W, class KV>
void launch_rows_w(const KvArgs& kv, const int32_t* items, int64_t n_items, const float* q, int64_t ldq, int num_heads,
                   float scale, float* part, int max_chunks, cudaStream_t stream) {
  constexpr int HD = 32 * DPL;
  constexpr int kKvBytes = sizeof(KV);
  const size_t smem2 = sizeof(float) * static_cast<size_t>(attention_smem_floats(kQ, HD, 2, kKvBytes));
  static OncePerDevice configured;
  configured([smem2] {
    for (const auto kernel :
         {attention_rows_kernel<DPL, kQ, W, false, KV>, attention_rows_kernel<DPL, kQ, W, true, KV>})
      CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem2)));
  });
  static std::atomic<int64_t> wave{0};
  const bool seq = use_seq_kv(attention_rows_kernel<DPL, kQ, W, false, KV>, smem2,
                              n_items * kv.num_kv_heads * max_chunks, wave, W * 32);
  const dim3 grid(static_cast<unsigned>(n_items * kv.num_kv_heads), static_cast<unsigned>(max_chunks));
  const size_t smem = seq ? sizeof(float) * static_cast<size_t>(attention_smem_floats(kQ, HD, 1, kKvBytes)) : smem2;
  launch_pdl(seq ? attention_rows_kernel<DPL, kQ, W, true, KV> : attention_rows_kernel<DPL, kQ, W, false, KV>, grid,
             W * 32, smem, stream, kv.rows, items, kv.ptrs, geo_of(kv), q, ldq, num_heads, scale, part, max_chunks);
  CUDA_CHECK_LAUNCH();
}

// The multi-row kernel when the call's rows group (attn::row_items over kv.host_rows) and the grouping
// mode allows; false when it launched nothing.
template <int DPL, class KV>
bool launch_grouped(const KvArgs& kv, const float* q, int64_t ldq, int num_heads, float scale, float* part,
                    int max_chunks, bool many_waves, cudaStream_t stream) {
  const auto mode = static_cast<attn::RowGrouping>(grouping_mode().load(std::memory_order_relaxed));
  if (mode == attn::RowGrouping::Never || (mode == attn::RowGrouping::Auto && !many_waves)) return false;
  const int G = num_heads / kv.num_kv_heads;
  const int queries = attn::item_queries(G);
  if (kv.host_rows == nullptr) return false;
  const std::vector<int32_t> items = attn::row_items(kv.host_rows, kv.R, queries / G);
  // (A table past a staging segment would take the staging's big buffer, which may hold kv.rows.)
  if (items.empty() || items.size() > 8192) return false;
  // Read by the kernel enqueued next: the caller holds the staging lock (as for kv.rows).
  const auto* d_items =
      static_cast<const int32_t*>(Staging::global().stage(items.data(), items.size() * sizeof(int32_t)));
  const auto n_items = static_cast<int64_t>(items.size()) - 1;
  if (queries == 16)
    launch_rows_w<DPL, 16, kRowWarps, KV>(kv, d_items, n_items, q, ldq, num_heads, scale, part, max_chunks, stream);
  else
    launch_rows_w<DPL, 32, kRowWarps, KV>(kv, d_items, n_items, q, ldq, num_heads, scale, part, max_chunks, stream);
  return true;
}

template <class KV>
bool launch_grouped_kv(const KvArgs& kv, const float* q, int64_t ldq, int num_heads, float scale, float* part,
                       int max_chunks, bool many_waves, cudaStream_t stream) {
  switch (kv.head_dim) {
    case 32: return launch_grouped<1, KV>(kv, q, ldq, num_heads, scale, part, max_chunks, many_waves, stream);
    case 64: return launch_grouped<2, KV>(kv, q, ldq, num_heads, scale, part, max_chunks, many_waves, stream);
    case 128: return launch_grouped<4, KV>(kv, q, ldq, num_heads, scale, part, max_chunks, many_waves, stream);
    case 256: return launch_grouped<8, KV>(kv, q, ldq, num_heads, scale, part, max_chunks, many_waves, stream);
    default: return false;
  }
}

}  // namespace

bool launch_grouped_rows(const KvArgs& kv, const float* q, int64_t ldq, int num_heads, float scale, float* part,
                         int max_chunks, bool many_waves, cudaStream_t stream) {
  return kv.bf16 ? launch_grouped_kv<KvBf16>(kv, q, ldq, num_heads, scale, part, max_chunks, many_waves, stream)
                 : launch_grouped_kv<float>(kv, q, ldq, num_heads, scale, part, max_chunks, many_waves, stream);
}

}  // namespace specserve::cuda::kernels::attn_kernel

namespace specserve::cuda::attn {

void set_row_grouping(RowGrouping g) {
  kernels::attn_kernel::grouping_mode().store(static_cast<int>(g), std::memory_order_relaxed);
}
RowGrouping row_grouping() {
  return static_cast<RowGrouping>(kernels::attn_kernel::grouping_mode().load(std::memory_order_relaxed));
}

}  // namespace specserve::cuda::attn
