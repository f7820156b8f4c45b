// The chunked gated delta rule's output kernel (the overview, the state kernel and the host side:
// gated_deltanet_chunked.cu): for a window of the call's chunks, after the state kernel,
//   O = (e^G Q) S + P V'
// of every chunk, value head and tile of kOT = 128 value columns, fully parallel: S is the state at the
// chunk's start and V' = U - W S, both written to the chunk's item by the state kernel (item_layout,
// gated_deltanet_chunk_geometry.cuh); P and e^G come from the prep, Q from the qkv rows.
//
// The same sums in the same order as when the state kernel computed O itself (before issue 27's
// deferral), so the same bits: each output O[i][j] starts at 0 and takes fmaf((e^G q)_i[a], S[a][j]) over
// the key dims a in increasing order, then fmaf(P[i][m], V'[m][j]) over the chunk's rows m in increasing
// order up to the end of i's group of four rows (4 (i / 4) + 4, at most L rounded up to 4); e^G q is
// staged and scaled by the same thread mapping as there (stage_tile / scale_tile,
// gated_deltanet_chunk_tiles.cuh), so it rounds the same. Only which thread owns which output changed:
// kThreads = 16 x 16 (ti, tj), each thread rows 4ti + r (r < 4) and columns 4tj + c, 64 + 4tj + c (c < 4),
// 32 accumulators; per four key dims (or rows of P) 4 float4 reads of e^G Q (or P) and 8 of S (or V') for
// 128 FMA.
//
// Running alongside the state kernel (issue 27): the state kernel walks the chunks in order (~15 us a
// chunk on the 27B, 192 blocks: one or two of its blocks on each multiprocessor, room for one output block
// beside one of them), so the output kernel does not wait for it to complete (pdl_wait) before it starts:
// each block waits for its item's ready count (all state_tiles(dv) blocks of the head have written S and V'
// of the chunk, released after a barrier; gated_deltanet_chunk_geometry.cuh) and then multiplies while the
// state kernel goes on with the later chunks, reading S and V' while they are still in L2. Launched with
// PDL after the state kernel, its blocks become resident only once every state block has passed its own
// pdl_wait (the state kernel triggers after it), so (a) every state block is resident before any output
// block: the waits always end, and (b) the prep, and every launch before it, has completed: its items (P,
// e^G, the ready counts it zeroed) and the qkv rows may be read at once. Without PDL the kernels run one
// after the other and the counts are complete at the start. The blocks of the window's last chunk also
// pdl_wait before they exit, so that this grid completes only after the state kernel did (launch.cuh's
// rule: the next launch sees every earlier one complete, the state written back included).
//
// Pipeline: the key tiles of kKT = 64 dims (e^G Q [kC][kKT] and S's rows [kKT][kOT]) and then P with V'
// are key_tiles + 1 stages through two buffers, stage s + 1's copies (cp.async) in flight while stage s is
// multiplied. Shared memory 2 x (64 x 68 + 64 x 128) floats = 98 KB, two blocks per multiprocessor.
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/gated_deltanet_chunk_geometry.cuh"
#include "backend/cuda/gated_deltanet_chunk_math.cuh"
#include "backend/cuda/gated_deltanet_chunk_tiles.cuh"
#include "backend/cuda/gated_deltanet_chunked_ptx.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/launch.cuh"

namespace specserve::cuda::kernels::gdn_chunk {

namespace {

// A stage's buffers, in floats: [kC][kLdA] e^G Q (or P), then [kC][kLdO] S's rows (or V').
constexpr int kStageFloats = kBufFloats + kC * kLdO;
constexpr size_t kOutputBytes = sizeof(float) * 2 * kStageFloats;
static_assert(kOT == 2 * 4 * 16 && kKT == kC, "the thread layout: 4 x 8 outputs per thread, S's tiles kC rows");

// acc[r][c] += sum_a A[4ti + r][a] B[a][col(c)] over a < n (a multiple of 4) in increasing order, where
// col(c) = 4tj + c for c < 4 and 64 + 4tj + c - 4 after: (e^G Q) S over a key tile (n its key dims) and
// P V' (n the end of the thread's rows, P lower triangular: the columns past it add exact zeros).
__device__ __forceinline__ void multiply(const float* A, const float* B, int n, int ti, int tj, float (&acc)[4][8]) {
#pragma unroll 1
  for (int a = 0; a < n; a += 4) {
    float4 x[4];
#pragma unroll
    for (int r = 0; r < 4; ++r) x[r] = *reinterpret_cast<const float4*>(A + (4 * ti + r) * kLdA + a);
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      const float4 b0 = *reinterpret_cast<const float4*>(B + (a + u) * kLdO + 4 * tj);
      const float4 b1 = *reinterpret_cast<const float4*>(B + (a + u) * kLdO + 64 + 4 * tj);
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const float xu = lane4(x[r], u);
#pragma unroll
        for (int c = 0; c < 4; ++c) {
          acc[r][c] = fmaf(xu, lane4(b0, c), acc[r][c]);
          acc[r][4 + c] = fmaf(xu, lane4(b1, c), acc[r][4 + c]);
        }
      }
    }
  }
}

// Where a block's stages come from.
struct StageSources {
  const float* q;  // the chunk's first q row (its key head's dims)
  const float* s;  // S at the chunk's start, the block's first column (row stride dv)
  const float* p;  // P [kC][kC]
  const float* v;  // V', the block's first column (row stride dv)
  int64_t ld;      // qkv's row stride
  int dk, dv, L, nv, key_tiles;
  bool vec_q, vec_item;  // 16-byte copies of the q rows, of the rows of S and V'
};

// Starts stage s (< key_tiles: key tile s's q rows (to be scaled by e^G) and S rows; key_tiles: P and
// V', all kC rows of V' (exact zeros past L)) into the buffers at A (then B) and commits its copies.
__device__ __forceinline__ void stage(float* A, const StageSources& src, int s) {
  float* B = A + kBufFloats;
  if (s < src.key_tiles) {
    const int na = key_cols(s, src.dk);
    stage_tile(A, src.q + s * kKT, src.ld, src.L, na, src.vec_q);
    stage_wide(B, src.s + int64_t{s * kKT} * src.dv, src.dv, na, src.nv, src.vec_item);
  } else {
    stage_tile(A, src.p, kC, kC, kC, true);
    stage_wide(B, src.v, src.dv, kC, src.nv, src.vec_item);
  }
  gdn_ptx::cp_async_commit();
}

// Block ((c - c0) * Hv + h) * tiles + tile: the call's chunk c, value head h, value columns [128 tile,
// 128 tile + 128); the chunk's span among spans[span_lo, span_hi), its item scratch[(c - c0) * Hv + h].
__global__ void __launch_bounds__(kThreads, 2)
    chunk_output_kernel(const float* qkv, int64_t ld, int vec, const GdnChunkSpanDev* spans, int span_lo, int span_hi,
                        int64_t c0, int Hk, int Hv, int dk, int dv, const float* scratch, float* out, int64_t ldo) {
  pdl_launch_dependents();  // no pdl_wait first: the ready counts order it after the state kernel (above)
  extern __shared__ float4 output_smem4[];
  float* smem = reinterpret_cast<float*>(output_smem4);

  const int tid = static_cast<int>(threadIdx.x), ti = tid / 16, tj = tid % 16;
  const int tiles = (dv + kOT - 1) / kOT;
  const int64_t bid = blockIdx.x;
  const int tile = static_cast<int>(bid % tiles);
  const int h = static_cast<int>((bid / tiles) % Hv);
  const int64_t c = c0 + bid / (int64_t{tiles} * Hv);
  const GdnChunkSpanDev sp = spans[chunk_span(spans, span_lo, span_hi, c)];
  const ChunkRows cr = chunk_rows(sp, c - sp.first_chunk);
  const int64_t r0 = cr.row;
  const int L = cr.rows;
  const int j0 = tile * kOT, nv = imin(kOT, dv - j0);
  const ItemLayout lay = item_layout(dk, dv);
  const float* item = scratch + ((c - c0) * Hv + h) * lay.floats;
  const float* q_base = qkv + r0 * ld + int64_t{h / (Hv / Hk)} * dk;
  const bool vec_q = vec != 0, vec_item = dv % 4 == 0;  // the item's rows of S and V': 16-byte aligned
  const int key_tiles = (dk + kKT - 1) / kKT;

  RowScales eg;
  eg.load(item + lay.eg);
  if (tid == 0) gdn_ptx::ready_wait(item_ready(item, lay), static_cast<unsigned>(state_tiles(dv)));
  __syncthreads();  // the state kernel's S and V' of the item are visible to the block
  StageSources src;
  src.q = q_base;
  src.s = item + lay.s + j0;
  src.p = item + lay.p;
  src.v = item + lay.u + j0;
  src.ld = ld;
  src.dk = dk;
  src.dv = dv;
  src.L = L;
  src.nv = nv;
  src.key_tiles = key_tiles;
  src.vec_q = vec_q;
  src.vec_item = vec_item;
  float acc[4][8] = {};
  stage(smem, src, 0);
  for (int s = 0; s <= key_tiles; ++s) {
    if (s < key_tiles) {
      stage(smem + ((s + 1) % 2) * kStageFloats, src, s + 1);
      gdn_ptx::cp_async_wait_group<1>();
    } else {
      gdn_ptx::cp_async_wait_group<0>();
    }
    float* A = smem + (s % 2) * kStageFloats;
    const float* B = A + kBufFloats;
    if (s < key_tiles) scale_tile(A, L, key_cols(s, dk), eg);  // e^G q
    __syncthreads();
    if (s < key_tiles)
      multiply(A, B, key_cols(s, dk), ti, tj, acc);
    else
      multiply(A, B, imin((L + 3) & ~3, 4 * ti + 4), ti, tj, acc);
    __syncthreads();  // buffer s % 2 is free for stage s + 2
  }

  // The outputs: a thread's four consecutive columns as one 16-byte store where they are aligned.
  float* o_base = out + int64_t{h} * dv + j0;
  const bool vec_out = ldo % 4 == 0 && dv % 4 == 0 && reinterpret_cast<uintptr_t>(out) % 16 == 0;
#pragma unroll
  for (int r = 0; r < 4; ++r) {
    const int i = 4 * ti + r;
    if (i >= L) continue;
    float* o = o_base + (r0 + i) * ldo;
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int j = half * 64 + 4 * tj;
      const float* v = acc[r] + 4 * half;
      if (vec_out && j + 4 <= nv) {
        *reinterpret_cast<float4*>(o + j) = make_float4(v[0], v[1], v[2], v[3]);
      } else {
#pragma unroll
        for (int c = 0; c < 4; ++c)
          if (j + c < nv) o[j + c] = v[c];
      }
    }
  }
  // The window's last chunk: this grid completes only after the state kernel (see the top).
  if (bid / (int64_t{tiles} * Hv) == gridDim.x / (int64_t{tiles} * Hv) - 1) pdl_wait();
}

}  // namespace

void launch_chunk_output(const float* qkv, int64_t ld, int vec, const GdnChunkSpanDev* spans, int span_lo, int span_hi,
                         int64_t c0, int64_t chunks, int Hk, int Hv, int dk, int dv, const float* scratch, float* out,
                         int64_t ldo, cudaStream_t stream) {
  static const bool opted_in = [] {  // more than the default 48 KB of dynamic shared memory
    CUDA_CHECK(cudaFuncSetAttribute(chunk_output_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    static_cast<int>(kOutputBytes)));
    return true;
  }();
  (void)opted_in;
  const int64_t tiles = (dv + kOT - 1) / kOT;
  launch_pdl(chunk_output_kernel, static_cast<unsigned>(chunks * Hv * tiles), kThreads, kOutputBytes, stream, qkv, ld,
             vec, spans, span_lo, span_hi, c0, Hk, Hv, dk, dv, scratch, out, ldo);
  CUDA_CHECK_LAUNCH();
}

}  // namespace specserve::cuda::kernels::gdn_chunk
