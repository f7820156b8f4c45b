#pragma once
// The chunks of the chunked gated delta rule's CUDA kernels (the overview, the state kernel and the host
// side: gated_deltanet_chunked.cu; the prep kernel: gated_deltanet_chunk_prep.cu; the output kernel:
// gated_deltanet_chunk_output.cu): where a span's chunks start and end, the layout of a chunk's scratch
// item (what the kernels hand each other), and the launcher each kernel file exports.
#include <cstdint>

#include "backend/cuda/gated_deltanet_chunk_math.cuh"
#include "backend/cuda/kernels.h"

namespace specserve::cuda::kernels::gdn_chunk {

// ---- where the chunks are ----------------------------------------------------------------------------

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

// The span of the call's chunk c: the last of spans[lo, hi) whose first chunk is <= c.
__device__ inline int chunk_span(const GdnChunkSpanDev* spans, int lo, int hi, int64_t c) {
  --hi;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (spans[mid].first_chunk <= c)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

// A chunk's scratch item (one value head), in floats: W [kC][dk], U [kC][dv], P [kC][kC], e^G [kC],
// e^(G_last - G) [kC], e^(G_last), the ready count (a uint32) and 2 floats of padding, S [dk][dv] (every
// part starts 16-byte aligned). The prep writes all but S and sets the ready count to 0; the state
// kernel writes S, the state at the chunk's start, and V' = U - W S over U, and then each of its column
// blocks adds 1 to the ready count (release); the output kernel waits for state_tiles(dv) (acquire) and
// reads them (gated_deltanet_chunk_output.cu: why it runs while the state kernel still does).
struct ItemLayout {
  int w, u, p, eg, decay, tail, ready, s, floats;  // dk, dv <= 512: well within int
};
__host__ __device__ inline ItemLayout item_layout(int dk, int dv) {
  ItemLayout l{};
  l.w = 0;
  l.u = l.w + kC * dk;
  l.p = l.u + kC * dv;
  l.eg = l.p + kC * kC;
  l.decay = l.eg + kC;
  l.tail = l.decay + kC;
  l.ready = l.tail + 1;
  l.s = l.tail + 4;
  l.floats = l.s + dk * dv;
  return l;
}

// The ready count of an item (its float slot ItemLayout::ready holds a uint32).
__host__ __device__ inline unsigned* item_ready(float* item, const ItemLayout& l) {
  return reinterpret_cast<unsigned*>(item + l.ready);
}
__host__ __device__ inline const unsigned* item_ready(const float* item, const ItemLayout& l) {
  return reinterpret_cast<const unsigned*>(item + l.ready);
}

// The state kernel's blocks of a value head: kVT value columns each; an item is ready for the output
// kernel once all state_tiles(dv) of them have written their columns of it.
inline constexpr int kVT = 32;
__host__ __device__ inline int state_tiles(int dv) { return (dv + kVT - 1) / kVT; }

// Component u of v (u a constant after unrolling).
__device__ __forceinline__ float lane4(const float4& v, int u) {
  return u == 0 ? v.x : (u == 1 ? v.y : (u == 2 ? v.z : v.w));
}

// ---- the launchers (one per kernel file) --------------------------------------------------------------

// chunk_prep_kernel over the call's chunks [c0, c0 + chunks) (their spans among spans[span_lo, span_hi)):
// the items scratch[(c - c0) * Hv + h].
void launch_chunk_prep(const float* qkv, int64_t ld, int vec, const float* g, const float* beta,
                       const GdnChunkSpanDev* spans, int span_lo, int span_hi, int64_t c0, int64_t chunks, int Hk,
                       int Hv, int dk, int dv, float* scratch, cudaStream_t stream);

// chunk_output_kernel over the same chunks, after the state kernel: their rows of out (row stride ldo).
void launch_chunk_output(const float* qkv, int64_t ld, int vec, const GdnChunkSpanDev* spans, int span_lo, int span_hi,
                         int64_t c0, int64_t chunks, int Hk, int Hv, int dk, int dv, const float* scratch, float* out,
                         int64_t ldo, cudaStream_t stream);

}  // namespace specserve::cuda::kernels::gdn_chunk
