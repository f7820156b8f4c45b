#pragma once
// What the split-KV attention partial kernels share (attention.cu: one row per CTA; attention_rows.cu:
// several rows of one sequence per CTA; attention_split_tc.cu: the tensor-core kernel of bf16 caches): the
// shared-memory and scratch layouts, the tile loads, and the choice of the values-after-keys (SeqKV)
// variant. The per-tile arithmetic of the first two is attention_tile.cuh.
#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>

#include "backend/cuda/attention_chunking.cuh"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/kernels.h"
#include "backend/cuda/kv_layout.cuh"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/matmul_tensor_core_ptx.cuh"  // cp.async

namespace specserve::cuda::kernels::attn_kernel {

using tc::cp_async_ca;
using tc::cp_async_commit;
using tc::cp_async_wait;
using tc::cp_async_wait_all;
using tc::smem_addr;

constexpr int kWarps = 4;  // per CTA of either partial kernel

using attn::kTileKeys;
constexpr int kMaxGroup = 16;  // query heads per KV head

// Dynamic shared memory of the partial kernel (floats): q [G][HD], p [G][kTileKeys], m, l and the
// rescale factor [G], then `tiles` buffers of [kTileKeys][HD] cache elements (kv_bytes each: 4 for an
// f32 cache, 2 for bf16, as stored): the tile's keys and values (2), or one buffer that takes the keys
// and then the values (1), or none (0: the offset of the first buffer). The buffers start on a 16-byte
// boundary (cp.async destinations).
__host__ __device__ inline int attention_smem_floats(int G, int HD, int tiles, int kv_bytes = 4) {
  const int head = (G * HD + G * kTileKeys + 3 * G + 3) / 4 * 4;
  return head + tiles * kTileKeys * HD * kv_bytes / 4;
}

// Scratch record of one (row, query head, chunk): acc[HD], then m, then l.
__host__ __device__ inline int64_t partial_floats(int head_dim) { return int64_t{head_dim} + 2; }

__device__ __forceinline__ float* partial_record(float* part, int64_t r, int num_heads, int h, int max_chunks, int c,
                                                 int head_dim) {
  return part + ((r * num_heads + h) * max_chunks + c) * partial_floats(head_dim);
}

// A row's chunks merged in chunk order, online (the tensor-core split kernel's records, base-2 maxima), written
// once for attention_combine_kernel<true> and the split kernel's walking form (attention_split_tc.cu), which
// merges in registers as each chunk ends and must give the same bits: per chunk c, M' = max(M, m_c),
// a = 2^(M - M'), b = 2^(m_c - M'), L = L a + l_c b, and each element O = O a + acc_c b; out = O (1 / L).
// From M = -inf, L = O = 0 the first chunk gives a = 0, b = 1 (m_c is finite: a chunk's first key is visible
// to every row that has the chunk). The project builds with --fmad=false: no contraction in either place.
struct ChunkWeights {
  float a, b;
};
__device__ __forceinline__ ChunkWeights merge_chunk_stats(float m_c, float l_c, float& M, float& L) {
  const float M_new = fmaxf(M, m_c);
  const ChunkWeights w{exp2f(M - M_new), exp2f(m_c - M_new)};
  L = L * w.a + l_c * w.b;
  M = M_new;
  return w;
}
__device__ __forceinline__ float merge_chunk_value(float O, float acc_c, ChunkWeights w) {
  return O * w.a + acc_c * w.b;
}

// The KV blocks of a tile, keys j0 .. j0 + nk - 1 of a block table, into blk[]; returns the first one's
// index in the table (blk[0]). The caller synchronises before blk is read.
__device__ __forceinline__ int64_t tile_blocks(void* const* table, int64_t j0, int nk, void** blk, int tid) {
  const int64_t blk0 = j0 / kBlockSize, blk_last = (j0 + nk - 1) / kBlockSize;
  if (tid <= blk_last - blk0) blk[tid] = table[blk0 + tid];
  return blk0;
}

// One cp.async group copying the tile's keys (which 0) or values (1) of KV head kvh, keys j0 .. j0 + nk
// - 1, into dst [nk][HD] of the cache's element type KV (as stored: a bf16 cache copies half the
// bytes), by the CTA's kThreads threads.
template <int HD, int kThreads = kWarps * 32, class KV>
__device__ __forceinline__ void copy_tile(KV* dst, void* const* blk, int64_t blk0, const Geo& geo, int kvh, int which,
                                          int64_t j0, int nk, int tid) {
  constexpr int kPerPiece = 16 / static_cast<int>(sizeof(KV));
  constexpr int kPieces = HD / kPerPiece;
  for (int e = tid; e < nk * kPieces; e += kThreads) {
    const int kk = e / kPieces, piece = e % kPieces;
    const int64_t j = j0 + kk;
    const KV* src =
        static_cast<const KV*>(blk[j / kBlockSize - blk0]) + geo.offset(which, kvh, static_cast<int>(j % kBlockSize));
    cp_async_ca(smem_addr(dst + kk * HD + kPerPiece * piece), src + kPerPiece * piece, 16);
  }
  cp_async_commit();
}

// The tile's keys, then its values (unless SeqKV: they are copied after the scores, into the keys'
// buffer), into shared memory as two cp.async groups; returns once this thread's key pieces have
// landed (the values land meanwhile). The caller synchronises before the keys are read.
template <int HD, bool SeqKV, int kThreads = kWarps * 32, class KV>
__device__ __forceinline__ void load_tile(KV* s_k, KV* s_v, void* const* blk, int64_t blk0, const Geo& geo, int kvh,
                                          int64_t j0, int nk, int tid) {
  copy_tile<HD, kThreads>(s_k, blk, blk0, geo, kvh, 0, j0, nk, tid);
  if constexpr (!SeqKV) {
    copy_tile<HD, kThreads>(s_v, blk, blk0, geo, kvh, 1, j0, nk, tid);
    cp_async_wait<1>();  // this thread's key pieces
  } else {
    cp_async_wait_all();
  }
}

// The CTAs of one wave of `kernel` (`threads` a CTA, `smem` bytes of shared memory, whose attribute must
// allow it): asked of the occupancy API once, then kept in `wave`.
template <class Kernel>
inline int64_t ctas_per_wave(Kernel kernel, size_t smem, std::atomic<int64_t>& wave, int threads = kWarps * 32) {
  int64_t per_wave = wave.load(std::memory_order_relaxed);
  if (per_wave == 0) {
    int per_sm = 0;
    CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, smem));
    per_wave = int64_t{per_sm > 0 ? per_sm : 1} * sm_count();
    wave.store(per_wave, std::memory_order_relaxed);
  }
  return per_wave;
}

// Whether a launch of `ctas` CTAs takes a partial kernel's SeqKV variant (the same bits either way): when it
// needs more than one wave of the overlapped variant (`overlapped`, smem2 bytes of shared memory; 16
// verify rows of the 8B one row per CTA: 1,152 CTAs against 3 per SM).
template <class Kernel>
inline bool use_seq_kv(Kernel overlapped, size_t smem2, int64_t ctas, std::atomic<int64_t>& wave,
                       int threads = kWarps * 32) {
  return ctas > ctas_per_wave(overlapped, smem2, wave, threads);
}

// The multi-row kernel (attention_rows.cu) for this call's partials when its rows group
// (attn::row_items over kv.host_rows) and head_dim is one it is built for; false when it launched
// nothing (then the caller runs the one-row kernel). Hold the staging lock (it stages the item table).
// `many_waves`: the one-row kernel would take at least two waves; under RowGrouping::Auto
// (attention_rows.cuh) rows are grouped only then.
bool launch_grouped_rows(const KvArgs& kv, const float* q, int64_t ldq, int num_heads, float scale, float* part,
                         int max_chunks, bool many_waves, cudaStream_t stream);

// The tensor-core split kernel (attention_split_tc.cu): whether it serves a call (a bf16 cache, head dim
// 128 or 256, at most 8 query heads per KV head, kv.host_rows given), and its launch, which writes the
// records attention_combine_kernel<true> (base-2 maxima) merges. The caller holds the staging lock.
// It returns true when it took the walking form, which merges a row's chunks itself and writes out (and xb):
// then the caller launches no combine.
bool split_tc_serves(const KvArgs& kv, int num_heads);
bool launch_split_tc(const KvArgs& kv, const float* q, int64_t ldq, int num_heads, float scale, float* part,
                     int max_chunks, float* out, int64_t ldo, const XbOut& xb, cudaStream_t stream);

}  // namespace specserve::cuda::kernels::attn_kernel
