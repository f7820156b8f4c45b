// The chunked gated delta rule (docs/MODELS.md §3.3 step 7) for prefill spans (GdnSpan::chunked): the same
// math as the CPU's chunked form (backend/cpu/gated_deltanet.cpp, chunk()), with the same chunks: a
// chunk ends at every absolute position that is a multiple of kGdnChunkRows (= kGdnChunk), so a span
// starting at position p first runs the partial chunk up to the next multiple. Stepped spans (decode,
// verify) keep the token-by-token kernel of gated_deltanet.cu.
//
// Three kernels per window of the call's chunks (chunks numbered span after span; a window is at most
// gdn_chunked_window chunks, so that the scratch stays within 256 MiB):
//
// chunk_prep_kernel (gated_deltanet_chunk_prep.cu), one block per (chunk, key head), fully parallel:
// everything of a chunk that does not depend on the state (A, M = (I + A)^-1, P, U, W of each of the
// key head's value heads), into the chunk's scratch items (item_layout, gated_deltanet_chunk_geometry.cuh).
//
// chunk_state_kernel, one block per (span, value head h, tile of kVT = 32 value columns): only what is
// sequential. The state's columns are independent of each other, so a block owns S[:, tile] of its head,
// holds it in shared memory for the whole window (read from and written back to the span's state once per
// window) and walks the span's chunks of the window in order. kThreads = 256; per chunk:
//  5. V' = U - W S: W from the item in key tiles of kKT = 64 dims, two tiles a round, V' from U, summed
//     over the key dims in increasing order;
//  6. V' to shared memory and to the item (over U: each element of U is this block's alone);
//  7. S = S e^(G_last) + (e^(G_last - G) K)^T V' per key tile, the sum over the chunk's rows in
//     increasing order, then the product and the sum rounded separately (as the CPU: --fmad=false); the
//     values before the update, the state at the chunk's start, to the item;
//  8. after a barrier, 1 added to the item's ready count (release): the output kernel's signal.
// The tiles are staged with cp.async (no register round trip; scalar loads where the qkv rows are not
// 16-byte aligned: the same values): a round's second W tile in its own commit group (in flight while the
// first is multiplied), the update's first two key tiles behind the first round's (in flight through 5.);
// then the thread that staged a key row multiplies it by its gate, read into registers at the chunk's
// start (RowScales).
// The products run on CUDA cores (fmaf): each thread 4 x 2 outputs (rows 4ti + r, columns 2tj + c,
// ti = tid / 16, tj = tid % 16; for 7. key rows), float4 operand reads.
// Shared memory: four 64 x 68 staging tiles (row stride 68: float4 rows 4 banks apart; two W, two key
// tiles), V' (64 x 32) and the state tile (dk x 32): 92 KB at dk = 128, two blocks per multiprocessor.
//
// chunk_output_kernel (gated_deltanet_chunk_output.cu), one block per (chunk, value head, 128 value
// columns), fully parallel: O = (e^G Q) S + P V' from the state at the chunk's start and V' in the item,
// each output's sum in the order the state kernel summed it when it computed O itself (issue 27 moved it
// out: the bits did not change). It runs alongside the state kernel: each of its blocks starts once the
// state kernel has counted the chunk's item ready (8. below, after 7.; gated_deltanet_chunk_output.cu).
//
// Bits: every sum runs in a fixed order (one thread's fmaf chain), no atomics. A chunk's item and its
// state step depend only on the chunk's rows, its position in the span (its length) and the state
// before it, never on the other spans of the call, the window (the state goes through global memory in
// f32 between windows), or where a prompt was cut into calls at chunk boundaries (the same chunks with
// the same state in between). So a span gives the bits it gives alone, in any call.
//
// Work (27B's linear-attention layer: 16 key heads, 48 value heads, dk = dv = 128, one 8,192-row span):
// 128 chunks; the prep does ~1.05 M FMA of scores a chunk and key head and ~0.6 M a value head (2,048
// blocks, no sequential dependence), the state kernel ~0.52 M FMA a chunk in each of 192 blocks, the
// chunks in sequence (0.86 M while it computed O too), the output kernel ~1.33 M a chunk and value head
// (6,144 blocks, no sequential dependence); S and V' (96 KB a chunk and value head, ~150 MB a 2,048-row
// call) go through the scratch, written once and read once. Measured on an H200 (bench_cuda_gdn,
// docs/DECISIONS.md §4), before the output kernel: 3.88 ms a layer, 18.3 TFLOP/s, 3.28 ms (21.6 TFLOP/s)
// since the prep's tiles go through registers (session 21: its scalar staging loads stalled it a third of
// the time; prep 429 -> 283 µs, state 787 µs a 2,048-row call under ncu's base clocks); the one-kernel
// form this replaced (~2.6 M FMA a chunk in each of the 192 sequential blocks: A, M, P and W recomputed
// for every column tile) 13.0 ms, and the state kernel's products on tensor cores (mma tf32, each f32
// operand split in two tf32 parts) 4.16 ms; both left the code.
//
// tools/gpu/gdn_emulation/ runs the three kernels on the host (threads as fibers) against the CPU's
// chunks and the bit identities above: run it after changing any of their files.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/gated_deltanet_chunk_geometry.cuh"
#include "backend/cuda/gated_deltanet_chunk_math.cuh"
#include "backend/cuda/gated_deltanet_chunk_tiles.cuh"
#include "backend/cuda/gated_deltanet_chunked_ptx.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/launch.cuh"

namespace specserve::cuda::kernels {

namespace {

using namespace gdn_chunk;

// ---- chunk_state_kernel -------------------------------------------------------------------------------

// Row stride (floats) of the state kernel's state tile and V'.
constexpr int kLdS = 32;
static_assert(kVT == 2 * 16, "the thread layout: 8 outputs per thread");

size_t state_smem_bytes(int dk) {
  return sizeof(float) * (4 * size_t{kBufFloats} + size_t{kC} * kLdS + size_t(dk) * kLdS);
}

// acc_v -= W S over key tile t (its na rows of S), key dims in increasing order.
__device__ __forceinline__ void v_tile(const float* sW, const float* sS, int t, int dk, int tid, float (&acc_v)[8]) {
  const float* sSt = sS + t * kKT * kLdS;
  const int na = key_cols(t, dk), ti = tid / 16, tj = tid % 16;
#pragma unroll 1
  for (int a = 0; a < na; a += 4) {
    float4 w[4];
    float2 s[4];
#pragma unroll
    for (int r = 0; r < 4; ++r) w[r] = *reinterpret_cast<const float4*>(sW + (4 * ti + r) * kLdA + a);
#pragma unroll
    for (int u = 0; u < 4; ++u) s[u] = *reinterpret_cast<const float2*>(sSt + (a + u) * kLdS + 2 * tj);
#pragma unroll
    for (int u = 0; u < 4; ++u)
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const float wu = lane4(w[r], u);
        acc_v[2 * r] = fmaf(-wu, s[u].x, acc_v[2 * r]);
        acc_v[2 * r + 1] = fmaf(-wu, s[u].y, acc_v[2 * r + 1]);
      }
  }
}

// Key tile t's rows of S (na of them): S = S e^(G_last) + sum_m Kd[m][a] V'[m][j] for the thread's rows
// 4ti + r < na and columns 2tj + c, over the chunk's rows m < rows4 = rows rounded up to 4 (Kd and V' are
// zero past them) in increasing order. The rows' values before the update (the state at the chunk's start)
// go to s_start[a * dv + j] (global; the block's columns j < nv).
__device__ __forceinline__ void update_tile(const float* sKd, const float* sV, float* sS, float* s_start, int t, int dk,
                                            int dv, int nv, int rows, float e_last, int tid) {
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
      float* g = s_start + int64_t{t * kKT + a} * dv + 2 * tj;
      if (2 * tj < nv) g[0] = x.x;
      if (2 * tj + 1 < nv) g[1] = x.y;
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
                       int64_t c1, int Hk, int Hv, int dk, int dv, float* scratch) {
  pdl_begin();
  extern __shared__ float4 state_smem4[];
  float* smem = reinterpret_cast<float*>(state_smem4);
  float* b0 = smem;  // b0, b1: W tiles; b2, b3: e^(G_last - G) K tiles
  float* b1 = b0 + kBufFloats;
  float* b2 = b1 + kBufFloats;
  float* b3 = b2 + kBufFloats;
  float* sV = b3 + kBufFloats;  // [kC][kLdS] V'
  float* sS = sV + kC * kLdS;   // [dk][kLdS] the state's columns of this block

  const int tid = static_cast<int>(threadIdx.x);
  const int tiles = state_tiles(dv);
  const int64_t bid = blockIdx.x;
  const int tile = static_cast<int>(bid % tiles);
  const int h = static_cast<int>((bid / tiles) % Hv);
  const GdnChunkSpanDev sp = spans[span_lo + bid / (int64_t{tiles} * Hv)];
  const int kh = h / (Hv / Hk);
  const int j0 = tile * kVT, nv = imin(kVT, dv - j0);
  const float* k_base = qkv + int64_t{Hk} * dk + int64_t{kh} * dk;
  float* S = sp.state + int64_t{h} * dk * dv + j0;  // S[a * dv + j], j < nv: this block's columns
  const ItemLayout lay = item_layout(dk, dv);
  const int64_t span_end = sp.first_chunk + span_chunks(sp.position, sp.rows);
  const int64_t k_begin = (c0 > sp.first_chunk ? c0 : sp.first_chunk) - sp.first_chunk;
  const int64_t k_end = (c1 < span_end ? c1 : span_end) - sp.first_chunk;
  const int key_tiles = (dk + kKT - 1) / kKT;
  // The thread's 8 elements of a 64 x 32 V': rows row0 + e / 2, columns col0 + e % 2.
  const int row0 = 4 * (tid / 16), col0 = 2 * (tid % 16);
  for (int e = tid; e < dk * kVT; e += kThreads) {
    const int a = e / kVT, j = e % kVT;
    sS[a * kLdS + j] = j < nv ? S[int64_t{a} * dv + j] : 0.0f;
  }
  // The chunks in order: each ends at the next multiple of kC or at the span's end.
  const int64_t row_end = sp.row_begin + sp.rows;
  int64_t row = chunk_rows(sp, k_begin).row;
  int64_t pos = sp.position + (row - sp.row_begin);
  float* item = scratch + ((sp.first_chunk + k_begin - c0) * Hv + h) * lay.floats;
  for (int64_t k = k_begin; k < k_end; ++k, item += int64_t{Hv} * lay.floats) {
    const int64_t r0 = row;
    const int L = static_cast<int>(row_end - row < kC - pos % kC ? row_end - row : kC - pos % kC);
    row += L;
    pos += L;

    RowScales decay;
    decay.load(item + lay.decay);

    // 5. V' = U - W S, two key tiles a round, the second tile's copies in flight while the first is
    // multiplied; the update's first two key tiles staged behind the first round's.
    float acc_v[8];
    float* u_base = item + lay.u + int64_t{row0} * dv + j0 + col0;
#pragma unroll
    for (int e = 0; e < 8; ++e) acc_v[e] = col0 + e % 2 < nv ? u_base[(e / 2) * dv + e % 2] : 0.0f;
    for (int t = 0; t < key_tiles; t += 2) {
      const int na0 = key_cols(t, dk), na1 = key_cols(t + 1, dk);
      __syncthreads();  // the tiles are free; the state's writes (the previous chunk's) are visible
      stage_tile(b0, item + lay.w + t * kKT, dk, kC, na0, true);
      gdn_ptx::cp_async_commit();
      if (na1 > 0) stage_tile(b1, item + lay.w + (t + 1) * kKT, dk, kC, na1, true);
      gdn_ptx::cp_async_commit();
      if (t == 0) {
        stage_tile(b2, k_base + r0 * ld, ld, L, na0, vec != 0);
        if (na1 > 0) stage_tile(b3, k_base + r0 * ld + kKT, ld, L, na1, vec != 0);
        gdn_ptx::cp_async_commit();
        gdn_ptx::cp_async_wait_group<2>();
      } else {
        gdn_ptx::cp_async_wait_group<1>();
      }
      __syncthreads();
      v_tile(b0, sS, t, dk, tid, acc_v);
      if (na1 > 0) {
        if (t == 0)
          gdn_ptx::cp_async_wait_group<1>();
        else
          gdn_ptx::cp_async_wait_group<0>();
        __syncthreads();
        v_tile(b1, sS, t + 1, dk, tid, acc_v);
      }
    }

    // 6. V' to shared memory and, in U's place, to the item (the output kernel's).
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      sV[(row0 + e / 2) * kLdS + col0 + e % 2] = acc_v[e];
      if (col0 + e % 2 < nv) u_base[(e / 2) * dv + e % 2] = acc_v[e];
    }
    const float e_last = item[lay.tail];
    gdn_ptx::cp_async_wait_group<0>();
    scale_tile(b2, L, key_cols(0, dk), decay);  // e^(G_last - G) k
    if (key_tiles > 1) scale_tile(b3, L, key_cols(1, dk), decay);
    __syncthreads();

    // 7. The state, two key tiles a round (the first two staged in 5.), its values before the update to the
    // item (the state at the chunk's start, the output kernel's).
    float* s_start = item + lay.s + j0;
    for (int t = 0; t < key_tiles; t += 2) {
      const int na0 = key_cols(t, dk), na1 = key_cols(t + 1, dk);
      if (t > 0) {
        __syncthreads();  // the tiles are free
        stage_tile(b2, k_base + r0 * ld + t * kKT, ld, L, na0, vec != 0);
        if (na1 > 0) stage_tile(b3, k_base + r0 * ld + (t + 1) * kKT, ld, L, na1, vec != 0);
        gdn_ptx::cp_async_wait_all();
        scale_tile(b2, L, na0, decay);
        if (na1 > 0) scale_tile(b3, L, na1, decay);
        __syncthreads();
      }
      update_tile(b2, sV, sS, s_start, t, dk, dv, nv, L, e_last, tid);
      if (na1 > 0) update_tile(b3, sV, sS, s_start, t + 1, dk, dv, nv, L, e_last, tid);
    }

    // 8. The block's columns of V' and S are in the item: count them in (the output kernel waits for all
    // the head's blocks, then multiplies while this kernel goes on with the next chunks).
    __syncthreads();
    if (tid == 0) gdn_ptx::ready_add(item_ready(item, lay));
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
  // 256 MiB: an engine prefill call of 2,048 rows of the 27B (32 or 33 chunks of 7.1 MB) in one window.
  constexpr int64_t kScratchBytes = int64_t{256} << 20;
  const int64_t per_chunk = gdn_chunk_scratch_floats(Hv, dk, dv) * int64_t{sizeof(float)};
  return std::clamp<int64_t>(kScratchBytes / per_chunk, 1, std::max<int64_t>(chunks, 1));
}

void gated_delta_rule_chunked(const float* qkv, int64_t ld, const float* g, const float* beta,
                              const GdnChunkSpanDev* spans, const GdnChunkSpanDev* host_spans, int64_t num_spans,
                              int Hk, int Hv, int dk, int dv, float* out, int64_t ldo, float* scratch,
                              int64_t scratch_chunks, cudaStream_t stream) {
  if (num_spans == 0) return;
  static const bool opted_in = [] {  // more than the default 48 KB of dynamic shared memory
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
  const int64_t tiles = state_tiles(dv);
  int64_t lo = 0;  // the first span with a chunk in the window
  for (int64_t c0 = 0; c0 < total; c0 += scratch_chunks) {
    const int64_t c1 = std::min(total, c0 + scratch_chunks);
    while (span_end(lo) <= c0) ++lo;
    int64_t hi = lo;  // past the last span with a chunk in the window
    while (hi < num_spans && host_spans[hi].first_chunk < c1) ++hi;
    launch_chunk_prep(qkv, ld, vec, g, beta, spans, static_cast<int>(lo), static_cast<int>(hi), c0, c1 - c0, Hk, Hv, dk,
                      dv, scratch, stream);
    const auto state_blocks = static_cast<unsigned>((hi - lo) * Hv * tiles);
    launch_pdl(chunk_state_kernel, state_blocks, kThreads, state_smem_bytes(dk), stream, qkv, ld, vec, spans,
               static_cast<int>(lo), c0, c1, Hk, Hv, dk, dv, scratch);
    CUDA_CHECK_LAUNCH();
    launch_chunk_output(qkv, ld, vec, spans, static_cast<int>(lo), static_cast<int>(hi), c0, c1 - c0, Hk, Hv, dk, dv,
                        scratch, out, ldo, stream);
  }
}

}  // namespace specserve::cuda::kernels
