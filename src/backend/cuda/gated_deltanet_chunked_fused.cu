// The one-kernel form of the chunked gated delta rule (docs/MODELS.md §3.3 step 7), the CUDA prefill
// kernel before the two-kernel form of gated_deltanet_chunked.cu replaced it (issue 27). It stays only as
// the measured baseline of bench/bench_cuda_gdn.cpp (kernel:1); no op calls it. Remove it once the
// replacement's measurement is in docs/DECISIONS.md §4. Same chunks and math as the CPU's chunk().
//
// One block per (span, value head h, tile of kT value columns), kThreads = 16 x 16 threads (ti, tj).
// The state's columns are independent of each other, so a block owns S[:, tile] of its head and
// walks the span's chunks in order; the state stays in global memory (the block is its only reader
// and writer; __syncthreads orders its accesses). Per chunk of L <= 64 rows (rows past L are zero
// padded, so they add exact zeros):
//  1. gates: G = cumulative g summed left to right (the CPU's order), beta, e^G, e^(G_last - G);
//  2. scores over key tiles of kT dims: A = strictly-lower (beta_i k_i.k_j) e^(G_i - G_j) and
//     P = lower (q_i.k_j) e^(G_i - G_j), each thread a 4 x 4 sub-grid (rows ti + 16r, cols tj + 16c);
//  3. M = (I + A)^-1: the four 16 x 16 diagonal blocks by forward substitution (a thread per column),
//     then the blocks below the diagonal one distance at a time, M_ij = -M_ii sum_k A_ik M_kj;
//  4. U = M (beta V); then per key tile: W = M (beta e^G K) and V' = U - W S0, O = (e^G Q) S0;
//  5. O += P V' (stored), then per key tile S = e^(G_last) S0 + (e^(G_last - G) K)^T V'.
// Every reduction runs in a fixed order on one thread (fmaf, f32): no atomics, and a span's bits
// depend only on its own rows, state and the dims, never on the other spans of the call. Shared
// memory is 87 KB whatever dk and dv (the state is staged a key tile at a time), so any dk and dv
// run, two blocks per multiprocessor.
#include <cuda_runtime.h>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/gated_deltanet_chunk_math.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/launch.cuh"

namespace specserve::cuda::kernels {

namespace {

using namespace gdn_chunk;

// Shared memory, in floats.
constexpr int kOffA = 0;                  // [kC][kLdC] A (strictly lower)
constexpr int kOffM = kOffA + kC * kLdC;  // [kC][kLdC] M = (I + A)^-1 (lower, unit diagonal)
constexpr int kOffP = kOffM + kC * kLdC;  // [kC][kLdC] P (lower with the diagonal)
constexpr int kOffK = kOffP + kC * kLdC;  // [kC][kLdT] a key tile (raw or scaled)
constexpr int kOffQ = kOffK + kC * kLdT;  // [kC][kLdT] a query tile (raw or scaled)
constexpr int kOffW = kOffQ + kC * kLdT;  // [kC][kLdT] a W tile; the inverse's scratch X before
constexpr int kOffU = kOffW + kC * kLdT;  // [kC][kLdT] beta V, then V'
constexpr int kOffS = kOffU + kC * kLdT;  // [kT][kLdT] a tile of S0 rows
constexpr int kOffG = kOffS + kT * kLdT;  // [kC] G
constexpr int kOffBeta = kOffG + kC;      // [kC] beta
constexpr int kOffEg = kOffBeta + kC;     // [kC] e^G
constexpr int kOffDecay = kOffEg + kC;    // [kC] e^(G_last - G)
constexpr int kSmemFloats = kOffDecay + kC;
constexpr size_t kSmemBytes = sizeof(float) * kSmemFloats;
static_assert(kInverseScratch <= kC * kLdT, "the inverse's scratch fits in the W tile");
static_assert(kSmemBytes <= 113 * 1024, "two blocks per multiprocessor");

__global__ void __launch_bounds__(kThreads, 2)
    chunked_kernel(const float* qkv, int64_t ld, const float* g, const float* beta, const GdnChunkSpanDev* spans,
                   int Hk, int Hv, int dk, int dv, float* out, int64_t ldo) {
  pdl_begin();
  extern __shared__ float smem[];
  float* sA = smem + kOffA;
  float* sM = smem + kOffM;
  float* sP = smem + kOffP;
  float* sK = smem + kOffK;
  float* sQ = smem + kOffQ;
  float* sW = smem + kOffW;
  float* sU = smem + kOffU;
  float* sS = smem + kOffS;
  float* sG = smem + kOffG;
  float* sBeta = smem + kOffBeta;
  float* sEg = smem + kOffEg;
  float* sDecay = smem + kOffDecay;

  const int tid = static_cast<int>(threadIdx.x), ti = tid / 16, tj = tid % 16;
  const int tiles = (dv + kT - 1) / kT;
  const int64_t bid = blockIdx.x;
  const int tile = static_cast<int>(bid % tiles);
  const int h = static_cast<int>((bid / tiles) % Hv);
  const GdnChunkSpanDev sp = spans[bid / (int64_t{tiles} * Hv)];
  const int kh = h / (Hv / Hk);
  const int j0 = tile * kT, nv = imin(kT, dv - j0);
  const int64_t key_dim = int64_t{Hk} * dk;
  const float* q_base = qkv + int64_t{kh} * dk;
  const float* k_base = qkv + key_dim + int64_t{kh} * dk;
  const float* v_base = qkv + 2 * key_dim + int64_t{h} * dv + j0;
  float* S = sp.state + int64_t{h} * dk * dv + j0;  // S[a * dv + j], j < nv: this block's columns

  for (int64_t done = 0; done < sp.rows;) {
    const int64_t r0 = sp.row_begin + done;
    const int64_t to_boundary = kC - (sp.position + done) % kC;
    const int L = static_cast<int>(sp.rows - done < to_boundary ? sp.rows - done : to_boundary);
    done += L;

    // 1. Gates.
    __syncthreads();  // the previous chunk is done with every buffer and its state writes are visible
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
      sEg[tid] = expf(sG[tid]);
      sDecay[tid] = tid < L ? expf(sG[L - 1] - sG[tid]) : 0.0f;
    }

    // 2. Scores: K K^T and Q K^T over the key dims, then A and P.
    float kk[4][4] = {}, qk[4][4] = {};
    for (int a0 = 0; a0 < dk; a0 += kT) {
      const int na = imin(kT, dk - a0);
      __syncthreads();  // the tiles are free; the gates are visible
      stage(sK, kC, k_base + r0 * ld + a0, ld, L, na, nullptr, nullptr);
      stage(sQ, kC, q_base + r0 * ld + a0, ld, L, na, nullptr, nullptr);
      __syncthreads();
      for (int a = 0; a < na; ++a) {
        float ki[4], qi[4], kj[4];
#pragma unroll
        for (int r = 0; r < 4; ++r) {
          ki[r] = sK[(ti + 16 * r) * kLdT + a];
          qi[r] = sQ[(ti + 16 * r) * kLdT + a];
          kj[r] = sK[(tj + 16 * r) * kLdT + a];
        }
#pragma unroll
        for (int r = 0; r < 4; ++r)
#pragma unroll
          for (int c = 0; c < 4; ++c) {
            kk[r][c] = fmaf(ki[r], kj[c], kk[r][c]);
            qk[r][c] = fmaf(qi[r], kj[c], qk[r][c]);
          }
      }
    }
#pragma unroll
    for (int r = 0; r < 4; ++r)
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        const int i = ti + 16 * r, j = tj + 16 * c;
        const float decay = j <= i ? expf(sG[i] - sG[j]) : 0.0f;  // masked before the exp: no inf
        sA[i * kLdC + j] = j < i ? (sBeta[i] * kk[r][c]) * decay : 0.0f;
        sP[i * kLdC + j] = j <= i ? qk[r][c] * decay : 0.0f;
      }
    stage(sU, kC, v_base + r0 * ld, ld, L, nv, sBeta, nullptr);  // beta V
    for (int e = tid; e < kC * kC; e += kThreads) {
      const int i = e / kC, j = e % kC;
      if (j / kB > i / kB) sM[i * kLdC + j] = 0.0f;
    }
    __syncthreads();

    // 3. M = (I + A)^-1.
    invert(sA, sM, sW);

    // 4. U = M (beta V), then V' = U - W S0 and O = (e^G Q) S0 over the key tiles.
    float acc_v[4][2], acc_o[4][2];
#pragma unroll
    for (int r = 0; r < 4; ++r)
#pragma unroll
      for (int c = 0; c < 2; ++c) acc_v[r][c] = acc_o[r][c] = 0.0f;
    for (int m = 0; m < L; ++m) {
      float mi[4], vj[2];
#pragma unroll
      for (int r = 0; r < 4; ++r) mi[r] = sM[(ti + 16 * r) * kLdC + m];
#pragma unroll
      for (int c = 0; c < 2; ++c) vj[c] = sU[m * kLdT + tj + 16 * c];
#pragma unroll
      for (int r = 0; r < 4; ++r)
#pragma unroll
        for (int c = 0; c < 2; ++c) acc_v[r][c] = fmaf(mi[r], vj[c], acc_v[r][c]);
    }
    for (int a0 = 0; a0 < dk; a0 += kT) {
      const int na = imin(kT, dk - a0);
      __syncthreads();  // the previous tile's W, Q and S0 are no longer read
      stage(sK, kC, k_base + r0 * ld + a0, ld, L, na, sBeta, sEg);  // (k beta) e^G, as the CPU rounds
      stage(sQ, kC, q_base + r0 * ld + a0, ld, L, na, sEg, nullptr);
      stage(sS, kT, S + int64_t{a0} * dv, dv, na, nv, nullptr, nullptr);
      __syncthreads();
      float w[4][2] = {};
      for (int m = 0; m < L; ++m) {
        float mi[4], kb[2];
#pragma unroll
        for (int r = 0; r < 4; ++r) mi[r] = sM[(ti + 16 * r) * kLdC + m];
#pragma unroll
        for (int c = 0; c < 2; ++c) kb[c] = sK[m * kLdT + tj + 16 * c];
#pragma unroll
        for (int r = 0; r < 4; ++r)
#pragma unroll
          for (int c = 0; c < 2; ++c) w[r][c] = fmaf(mi[r], kb[c], w[r][c]);
      }
#pragma unroll
      for (int r = 0; r < 4; ++r)
#pragma unroll
        for (int c = 0; c < 2; ++c) sW[(ti + 16 * r) * kLdT + tj + 16 * c] = w[r][c];
      __syncthreads();
      for (int a = 0; a < na; ++a) {
        float wi[4], qi[4], sj[2];
#pragma unroll
        for (int r = 0; r < 4; ++r) {
          wi[r] = sW[(ti + 16 * r) * kLdT + a];
          qi[r] = sQ[(ti + 16 * r) * kLdT + a];
        }
#pragma unroll
        for (int c = 0; c < 2; ++c) sj[c] = sS[a * kLdT + tj + 16 * c];
#pragma unroll
        for (int r = 0; r < 4; ++r)
#pragma unroll
          for (int c = 0; c < 2; ++c) {
            acc_v[r][c] = fmaf(-wi[r], sj[c], acc_v[r][c]);
            acc_o[r][c] = fmaf(qi[r], sj[c], acc_o[r][c]);
          }
      }
    }
    // beta V was last read before the key-tile loop's first barrier: V' replaces it.
#pragma unroll
    for (int r = 0; r < 4; ++r)
#pragma unroll
      for (int c = 0; c < 2; ++c) sU[(ti + 16 * r) * kLdT + tj + 16 * c] = acc_v[r][c];
    __syncthreads();

    // 5. O += P V' and the outputs; then the state, one key tile at a time.
    for (int m = 0; m < L; ++m) {
      float p[4], u[2];
#pragma unroll
      for (int r = 0; r < 4; ++r) p[r] = sP[(ti + 16 * r) * kLdC + m];
#pragma unroll
      for (int c = 0; c < 2; ++c) u[c] = sU[m * kLdT + tj + 16 * c];
#pragma unroll
      for (int r = 0; r < 4; ++r)
#pragma unroll
        for (int c = 0; c < 2; ++c) acc_o[r][c] = fmaf(p[r], u[c], acc_o[r][c]);
    }
#pragma unroll
    for (int r = 0; r < 4; ++r)
#pragma unroll
      for (int c = 0; c < 2; ++c) {
        const int i = ti + 16 * r, j = tj + 16 * c;
        if (i < L && j < nv) out[(r0 + i) * ldo + int64_t{h} * dv + j0 + j] = acc_o[r][c];
      }
    const float e_last = sEg[L - 1];
    for (int a0 = 0; a0 < dk; a0 += kT) {
      const int na = imin(kT, dk - a0);
      __syncthreads();                                                   // the key tile is free
      stage(sK, kC, k_base + r0 * ld + a0, ld, L, na, sDecay, nullptr);  // k e^(G_last - G)
      __syncthreads();
      float add[2][2] = {};
      for (int m = 0; m < L; ++m) {
        float ka[2], u[2];
#pragma unroll
        for (int r = 0; r < 2; ++r) ka[r] = sK[m * kLdT + ti + 16 * r];
#pragma unroll
        for (int c = 0; c < 2; ++c) u[c] = sU[m * kLdT + tj + 16 * c];
#pragma unroll
        for (int r = 0; r < 2; ++r)
#pragma unroll
          for (int c = 0; c < 2; ++c) add[r][c] = fmaf(ka[r], u[c], add[r][c]);
      }
#pragma unroll
      for (int r = 0; r < 2; ++r)
#pragma unroll
        for (int c = 0; c < 2; ++c) {
          const int a = ti + 16 * r, j = tj + 16 * c;
          if (a < na && j < nv) {
            float* s = S + int64_t{a0 + a} * dv + j;
            *s = *s * e_last + add[r][c];
          }
        }
    }
  }
}

}  // namespace

void gated_delta_rule_chunked_fused(const float* qkv, int64_t ld, const float* g, const float* beta,
                                    const GdnChunkSpanDev* spans, int64_t num_spans, int Hk, int Hv, int dk, int dv,
                                    float* out, int64_t ldo, cudaStream_t stream) {
  if (num_spans == 0) return;
  static const bool opted_in = [] {  // more than the default 48 KB of dynamic shared memory
    CUDA_CHECK(cudaFuncSetAttribute(chunked_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    static_cast<int>(kSmemBytes)));
    return true;
  }();
  (void)opted_in;
  const int64_t blocks = num_spans * Hv * ((dv + kT - 1) / kT);
  launch_pdl(chunked_kernel, static_cast<unsigned>(blocks), kThreads, kSmemBytes, stream, qkv, ld, g, beta, spans, Hk,
             Hv, dk, dv, out, ldo);
  CUDA_CHECK_LAUNCH();
}

}  // namespace specserve::cuda::kernels
