// Paged KV store and causal GQA attention (backend/cpu/attention.cpp) on the device.
//
// Layout: KvGeometry's [layer][K|V][kv_head][slot][head_dim] blocks of kKvBlockSize (16) positions, f32
// or bf16 (KvArgs::bf16; every kernel takes the element type KV: kv_layout.cuh); a row's block table
// is a device array of device block pointers (staged by cuda_ops). A bf16 cache is copied to shared
// memory as stored (half the bytes of f32) and widened exactly where the arithmetic reads it.
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
//      attention_rows_kernel (attention_rows.cu) serves several rows per block instead: up to 16 or 32
//      query heads (4 rows of the 8B) of consecutive rows of the call whose chunks agree
//      (attention_rows.cuh: one block table, window start and chunk size, as a verify's rows of one
//      sequence), so chunk c of each of them starts at the same key and is walked in the same tiles;
//      each tile is loaded once for all of them instead of once per row. Each query head gets exactly
//      the per-tile arithmetic above through the same functions, on the tiles its row has (a row stops
//      at its own end), and writes the same scratch record; only which thread does which head's work
//      differs. The host picks it from its copy of the rows (KvArgs::host_rows) when it at least halves
//      the blocks. What the two kernels share besides the arithmetic: attention_common.cuh.
//   2. attention_combine_kernel: one block per (row, query head) merges the row's chunks in chunk
//      order: M = max m_c, L = sum l_c e^(m_c - M), out = (sum acc_c e^(m_c - M)) / L (the tensor-core
//      split kernel's records instead online, attention_common.cuh); with an XbOut it also writes out's
//      bf16 copy for the o projection's gemv kernel (xb_out.cuh).
// A bf16 cache at head dims 128 and 256 takes neither partial kernel: attention_split_tc.cu's tensor-core
// kernel serves all its rows (one read of a sequence's keys per step for up to 16 of its rows), with the
// same chunks and the same combine in base 2.
// Every choice of arithmetic depends only on the row's own window (the kernel and its variant depend
// on the launch, the arithmetic does not), so a row gives the same bits alone (a decode) or inside any
// batch (an extend, a verify, other sequences' rows).
#include <cuda_runtime.h>

#include <array>
#include <atomic>
#include <cmath>

#include "backend/cuda/device_scope.h"
#include "backend/cuda/attention_common.cuh"
#include "backend/cuda/attention_tile.cuh"
#include "backend/cuda/device_math.cuh"
#include "backend/cuda/xb_out.cuh"

namespace specserve::cuda::kernels {

namespace {

using namespace attn_kernel;

template <class KV>
__global__ void kv_store_kernel(const KvRow* rows, void* const* ptrs, Geo geo, const float* k, int64_t ldk,
                                const float* v, int64_t ldv) {
  pdl_begin();
  const int64_t r = blockIdx.x;
  const KvRow row = rows[r];
  KV* block = static_cast<KV*>(kv_block_of(row, ptrs));
  const int slot = row.position % kBlockSize;
  const int width = geo.num_kv_heads * geo.head_dim;
  for (int e = threadIdx.x; e < width; e += blockDim.x) {
    const int h = e / geo.head_dim, d = e % geo.head_dim;
    block[geo.offset(0, h, slot) + d] = kv_narrow<KV>(k[r * ldk + e]);
    block[geo.offset(1, h, slot) + d] = kv_narrow<KV>(v[r * ldv + e]);
  }
}

// DPL: head dims per lane (head_dim = 32 * DPL). GT: the query heads per KV head when known at
// compile time (4: Qwen3, 6: the 27B shapes, 8), else 0 and the loops run to kMaxGroup under a
// g < G guard: the same arithmetic in the same order, but each guarded iteration still costs its
// instructions, and the kernel is issue-bound (ncu: 11k instructions per warp at G = 4 before).
// SeqKV: the tile's values are copied into the keys' buffer once the scores are done (half the shared
// memory, so twice the CTAs per SM for launches of several waves); otherwise they have their own buffer
// and land while the scores run. Only the copy schedule differs: the same arithmetic, the same bits.
template <int DPL, int GT, bool SeqKV, class KV>
__global__ void __launch_bounds__(kWarps * 32)
    attention_partial_kernel(const KvRow* rows, void* const* ptrs, Geo geo, const float* q, int64_t ldq, int num_heads,
                             float scale, float* part, int max_chunks) {
  pdl_begin();
  constexpr int HD = 32 * DPL;
  constexpr int kThreads = kWarps * 32;
  extern __shared__ __align__(16) float smem[];
  constexpr int kG = GT > 0 ? GT : kMaxGroup;  // the loops' bound
  const int G = GT > 0 ? GT : num_heads / geo.num_kv_heads;
  float* s_q = smem;                                                       // [G][HD]
  float* s_p = s_q + G * HD;                                               // [G][kTileKeys] scores, then p
  float* s_m = s_p + G * kTileKeys;                                        // [G] running max
  float* s_l = s_m + G;                                                    // [G] running sum
  float* s_corr = s_l + G;                                                 // [G] this tile's rescale factor
  KV* s_k = reinterpret_cast<KV*>(s_q + attention_smem_floats(G, HD, 0));  // [kTileKeys][HD] the tile's keys
  KV* s_v = SeqKV ? s_k : s_k + kTileKeys * HD;                            // [kTileKeys][HD] and values

  const int64_t r = blockIdx.x / geo.num_kv_heads;
  const int kvh = static_cast<int>(blockIdx.x % geo.num_kv_heads);
  const int c = static_cast<int>(blockIdx.y);
  const KvRow row = rows[r];
  const int64_t w0 = row.window_start, n = int64_t{row.position} + 1 - w0;
  const attn::Chunking ch = attn::chunking(n);
  if (c >= ch.chunks) return;
  const int64_t i_begin = c * ch.keys, i_end = i_begin + ch.keys < n ? i_begin + ch.keys : n;
  void* const* table = ptrs + row.table;
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

  __shared__ void* s_blk[kTileKeys / kBlockSize + 1];  // the tile's KV blocks
  for (int64_t t0 = i_begin; t0 < i_end; t0 += kTileKeys) {
    const int nk = i_end - t0 < kTileKeys ? static_cast<int>(i_end - t0) : kTileKeys;
    const int64_t blk0 = tile_blocks(table, w0 + t0, nk, s_blk, tid);
    __syncthreads();
    load_tile<HD, SeqKV>(s_k, s_v, s_blk, blk0, geo, kvh, w0 + t0, nk, tid);
    __syncthreads();
    // Scores: thread t takes key t % kTileKeys and query heads t / kTileKeys, + kThreads / kTileKeys, ...
    {
      constexpr int kHeadStep = kThreads / kTileKeys;
      constexpr int kHeadsPerThread = (kG + kHeadStep - 1) / kHeadStep;
      const int kk = tid % kTileKeys;
      if (kk < nk) {
        const KV* const key[1] = {s_k + kk * HD};
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
        const KV* vp = s_v + kk * HD;
        float v[kDims];
#pragma unroll
        for (int j = 0; j < kDims; ++j) v[j] = tid + kThreads * j < HD ? kv_widen(vp[tid + kThreads * j]) : 0.0f;
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

// With xb.regs (the call's R rows, rows [R, xb.rows) padding): block (r, h) also writes head h's
// registers of xb row r from its outputs (the last head also the registers past the heads), and the
// same registers of padding rows R + r, 2R + r, ... (xb_out.cuh). Base2: the records' maxima are in base 2
// (the tensor-core split kernel's, attention_split_tc.cu), merged online in chunk order with exp2f
// (attention_common.cuh: merge_chunk_stats, the bits of the split kernel's walking form); otherwise
// M = max m_c first, then the sums in chunk order with expf.
//
// A (row, head) merges up to 64 records in a chain, so every load is issued before the chain starts: the block
// reads all chunks' (m, l) into shared memory at once, derives each chunk's two weights there (Base2: the running
// maximum after chunk c is the maximum of m_0 .. m_c, fmaxf being exact; the weights are merge_chunk_stats' exp2f
// of the same operands), and each thread loads its dimension's values of 32 chunks into registers before it folds
// them in chunk order. Each value sees the operations of the chunk-by-chunk loop in the same order, so the bits
// are that loop's (which the walking form matches); only the loads moved. Measured at 57 chunks (H100): 15.8 ->
// 14.4 us a layer for a 16-row verify, 10.7 us for one row — what remains is mostly launch and the wait for the
// split kernel's grid, not the loads (docs/DECISIONS.md §3).
template <bool Base2>
__global__ void attention_combine_kernel(const KvRow* rows, int num_heads, int head_dim, const float* part,
                                         int max_chunks, float* out, int64_t ldo, int64_t R, XbOut xb) {
  constexpr int kMaxChunks = attn::kMaxChunks;
  __shared__ float s_m[kMaxChunks], s_l[kMaxChunks], s_wa[kMaxChunks], s_wb[kMaxChunks];
  pdl_begin();
  const int64_t r = blockIdx.x / num_heads;
  const int h = static_cast<int>(blockIdx.x % num_heads);
  const KvRow row = rows[r];
  const int chunks = static_cast<int>(attn::chunking(int64_t{row.position} + 1 - row.window_start).chunks);
  const int64_t rec = partial_floats(head_dim);
  const float* base = part + (r * num_heads + h) * max_chunks * rec;
  const int t = static_cast<int>(threadIdx.x), n = static_cast<int>(blockDim.x);
  for (int c = t; c < chunks; c += n) {
    s_m[c] = base[c * rec + head_dim];
    s_l[c] = base[c * rec + head_dim + 1];
  }
  __syncthreads();
  if constexpr (Base2) {
    // Chunk c's weights: merge_chunk_stats(m_c, ., M, .) with M the maximum of m_0 .. m_(c-1) (-inf for c = 0).
    for (int c = t; c < chunks; c += n) {
      float M = -INFINITY;
      for (int j = 0; j < c; ++j) M = fmaxf(M, s_m[j]);
      float L = 0.0f;
      const ChunkWeights w = merge_chunk_stats(s_m[c], 0.0f, M, L);
      s_wa[c] = w.a;
      s_wb[c] = w.b;
    }
  } else {
    float mx = -INFINITY;
    for (int c = 0; c < chunks; ++c) mx = fmaxf(mx, s_m[c]);
    for (int c = t; c < chunks; c += n) s_wb[c] = expf(s_m[c] - mx);
  }
  __syncthreads();
  constexpr int kBatch = 32;  // values in flight a thread: two round trips for 64 chunks, in ~100 registers
  for (int d = t; d < head_dim; d += n) {
    float L = 0.0f, o = 0.0f;
    for (int c0 = 0; c0 < chunks; c0 += kBatch) {
      // Unconditional loads (past the last chunk, the last chunk's value again, unused), so that all are issued
      // before the first use rather than each behind its own branch.
      float v[kBatch];
#pragma unroll
      for (int u = 0; u < kBatch; ++u) v[u] = base[int64_t{min(c0 + u, chunks - 1)} * rec + d];
#pragma unroll
      for (int u = 0; u < kBatch; ++u) {
        const int c = c0 + u;
        if (c < chunks) {
          if constexpr (Base2) {
            const ChunkWeights w{s_wa[c], s_wb[c]};
            L = merge_chunk_value(L, s_l[c], w);
            o = merge_chunk_value(o, v[u], w);
          } else {
            const float f = s_wb[c];
            L = L + s_l[c] * f;
            o = o + v[u] * f;
          }
        }
      }
    }
    out[r * ldo + int64_t{h} * head_dim + d] = o * (1.0f / L);
  }
  if (xb.regs != nullptr) {
    __syncthreads();  // the head's outputs, written by the block's threads
    const int64_t K = int64_t{num_heads} * head_dim, k0 = int64_t{h} * head_dim;
    const int64_t k1 = h == num_heads - 1 ? xb.pitch : k0 + head_dim;  // the last head also takes the tail
    xb_write(xb, r, out + r * ldo, K, k0, k1, t, n);
    for (int64_t m = R + r; m < xb.rows; m += R) xb_write(xb, m, nullptr, K, k0, k1, t, n);
  }
}

template <int DPL, int GT, bool SeqKV, class KV>
void launch_partial_kernel(const KvArgs& kv, const float* q, int64_t ldq, int num_heads, float scale, float* part,
                           int max_chunks, size_t smem, cudaStream_t stream) {
  launch_pdl(attention_partial_kernel<DPL, GT, SeqKV, KV>,
             dim3(static_cast<unsigned>(kv.R * kv.num_kv_heads), static_cast<unsigned>(max_chunks)), kWarps * 32, smem,
             stream, kv.rows, kv.ptrs, geo_of(kv), q, ldq, num_heads, scale, part, max_chunks);
  CUDA_CHECK_LAUNCH();
}

// The largest shared memory either variant of the partial kernel may take (once per instantiation).
template <int DPL, int GT, class KV>
void configure_partial() {
  constexpr int HD = 32 * DPL;
  static OncePerDevice configured;
  configured([] {
    for (const auto kernel :
         {attention_partial_kernel<DPL, GT, false, KV>, attention_partial_kernel<DPL, GT, true, KV>})
      CUDA_CHECK(
          cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               static_cast<int>(sizeof(float) * attention_smem_floats(kMaxGroup, HD, 2, sizeof(KV)))));
  });
}

template <int DPL, int GT, class KV>
void launch_partial(const KvArgs& kv, const float* q, int64_t ldq, int num_heads, float scale, float* part,
                    int max_chunks, cudaStream_t stream) {
  constexpr int HD = 32 * DPL;
  constexpr int kKvBytes = sizeof(KV);
  const int G = num_heads / kv.num_kv_heads;
  configure_partial<DPL, GT, KV>();
  const size_t smem2 = sizeof(float) * static_cast<size_t>(attention_smem_floats(G, HD, 2, kKvBytes));
  static std::array<std::atomic<int64_t>, kMaxGroup + 1> wave{};  // per group size
  if (use_seq_kv(attention_partial_kernel<DPL, GT, false, KV>, smem2, kv.R * kv.num_kv_heads * max_chunks, wave[G]))
    launch_partial_kernel<DPL, GT, true, KV>(
        kv, q, ldq, num_heads, scale, part, max_chunks,
        sizeof(float) * static_cast<size_t>(attention_smem_floats(G, HD, 1, kKvBytes)), stream);
  else
    launch_partial_kernel<DPL, GT, false, KV>(kv, q, ldq, num_heads, scale, part, max_chunks, smem2, stream);
}

// Whether the one-row kernel would take at least two waves for this call (its SeqKV variant, the one
// it takes beyond a wave; the generic instantiation stands for all: shared memory bounds them alike).
template <int DPL, class KV>
bool one_row_many_waves(const KvArgs& kv, int G, int max_chunks) {
  constexpr int HD = 32 * DPL;
  configure_partial<DPL, 0, KV>();
  static std::array<std::atomic<int64_t>, kMaxGroup + 1> wave{};  // per group size
  const size_t smem1 = sizeof(float) * static_cast<size_t>(attention_smem_floats(G, HD, 1, sizeof(KV)));
  return kv.R * kv.num_kv_heads * max_chunks >=
         2 * ctas_per_wave(attention_partial_kernel<DPL, 0, true, KV>, smem1, wave[G]);
}

template <bool Base2>
void launch_combine(const KvArgs& kv, int num_heads, int head_dim, const float* part, int max_chunks, float* out,
                    int64_t ldo, cudaStream_t stream, const XbOut& xb) {
  launch_pdl(attention_combine_kernel<Base2>, static_cast<unsigned>(kv.R * num_heads), head_dim < 128 ? head_dim : 128,
             0, stream, kv.rows, num_heads, head_dim, part, max_chunks, out, ldo, kv.R, xb);
  CUDA_CHECK_LAUNCH();
}

template <int DPL, class KV>
void launch_attention(const KvArgs& kv, const float* q, int64_t ldq, int num_heads, float scale, float* out,
                      int64_t ldo, float* part, int max_chunks, cudaStream_t stream, const XbOut& xb) {
  constexpr int HD = 32 * DPL;
  // Rows of one sequence that share their chunks go to the multi-row kernel (attention_rows.cu; head_dim
  // 32, 64, 128 and 256). Otherwise the group sizes of the supported models get their own
  // single-row kernels (head_dim 128 and 256 only, to bound the instantiations); any other runs the
  // generic one. Same bits in every case.
  // A bf16 cache at head dims 128 and 256: the tensor-core split kernel (attention_split_tc.cu) for every
  // row, decode and verify alike.
  if (split_tc_serves(kv, num_heads)) {
    if (!launch_split_tc(kv, q, ldq, num_heads, scale, part, max_chunks, out, ldo, xb, stream))
      launch_combine<true>(kv, num_heads, HD, part, max_chunks, out, ldo, stream, xb);
    return;
  }
  const int G = num_heads / kv.num_kv_heads;
  bool launched = kv.R > 1 && launch_grouped_rows(kv, q, ldq, num_heads, scale, part, max_chunks,
                                                  one_row_many_waves<DPL, KV>(kv, G, max_chunks), stream);
  if constexpr (DPL == 4 || DPL == 8) {
    if (!launched) {
      launched = true;
      switch (G) {
        case 4: launch_partial<DPL, 4, KV>(kv, q, ldq, num_heads, scale, part, max_chunks, stream); break;
        case 6: launch_partial<DPL, 6, KV>(kv, q, ldq, num_heads, scale, part, max_chunks, stream); break;
        case 8: launch_partial<DPL, 8, KV>(kv, q, ldq, num_heads, scale, part, max_chunks, stream); break;
        default: launched = false;
      }
    }
  }
  if (!launched) launch_partial<DPL, 0, KV>(kv, q, ldq, num_heads, scale, part, max_chunks, stream);
  launch_combine<false>(kv, num_heads, HD, part, max_chunks, out, ldo, stream, xb);
}

template <class KV>
void launch_attention_kv(const KvArgs& kv, const float* q, int64_t ldq, int num_heads, float scale, float* out,
                         int64_t ldo, float* scratch, int mc, cudaStream_t stream, const XbOut& xb) {
  switch (kv.head_dim / 32) {
    case 1: launch_attention<1, KV>(kv, q, ldq, num_heads, scale, out, ldo, scratch, mc, stream, xb); break;
    case 2: launch_attention<2, KV>(kv, q, ldq, num_heads, scale, out, ldo, scratch, mc, stream, xb); break;
    case 3: launch_attention<3, KV>(kv, q, ldq, num_heads, scale, out, ldo, scratch, mc, stream, xb); break;
    case 4: launch_attention<4, KV>(kv, q, ldq, num_heads, scale, out, ldo, scratch, mc, stream, xb); break;
    case 5: launch_attention<5, KV>(kv, q, ldq, num_heads, scale, out, ldo, scratch, mc, stream, xb); break;
    case 6: launch_attention<6, KV>(kv, q, ldq, num_heads, scale, out, ldo, scratch, mc, stream, xb); break;
    case 7: launch_attention<7, KV>(kv, q, ldq, num_heads, scale, out, ldo, scratch, mc, stream, xb); break;
    case 8: launch_attention<8, KV>(kv, q, ldq, num_heads, scale, out, ldo, scratch, mc, stream, xb); break;
    default: break;  // excluded by attention_supports()
  }
}

}  // namespace

void kv_store(const KvArgs& kv, const float* k, int64_t ldk, const float* v, int64_t ldv, cudaStream_t stream) {
  if (kv.R == 0) return;
  launch_pdl(kv.bf16 ? kv_store_kernel<KvBf16> : kv_store_kernel<float>, static_cast<unsigned>(kv.R), 128, 0, stream,
             kv.rows, kv.ptrs, geo_of(kv), k, ldk, v, ldv);
  CUDA_CHECK_LAUNCH();
}

bool attention_supports(int head_dim) { return head_dim % 32 == 0 && head_dim >= 32 && head_dim <= 256; }
bool attention_group_supported(int num_heads, int num_kv_heads) { return num_heads / num_kv_heads <= kMaxGroup; }

int64_t attention_chunks(int64_t window) { return attn::chunking(window).chunks; }
int64_t attention_scratch_floats(int64_t rows, int num_heads, int head_dim, int64_t max_chunks) {
  return rows * num_heads * max_chunks * partial_floats(head_dim);
}

void attention(const KvArgs& kv, const float* q, int64_t ldq, int num_heads, float scale, float* out, int64_t ldo,
               float* scratch, int64_t max_chunks, cudaStream_t stream, const XbOut& xb) {
  if (kv.R == 0 || num_heads == 0) return;
  const int mc = static_cast<int>(max_chunks);
  if (kv.bf16)
    launch_attention_kv<KvBf16>(kv, q, ldq, num_heads, scale, out, ldo, scratch, mc, stream, xb);
  else
    launch_attention_kv<float>(kv, q, ldq, num_heads, scale, out, ldo, scratch, mc, stream, xb);
}

}  // namespace specserve::cuda::kernels
