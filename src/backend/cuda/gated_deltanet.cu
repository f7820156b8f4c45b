// Gated DeltaNet kernels (backend/cpu/gated_deltanet.cpp): causal depthwise conv + SiLU, the f32 gates
// and L2 norms, and the gated delta rule.
//
// The rule kernel here runs the STEPPED spans (decode, verify, extends) token by token, the recurrent
// form. CHUNKED spans (prefill) run the chunked form of gated_deltanet_chunked.cu instead, with the
// CPU's chunk boundaries (multiples of kGdnChunk in absolute position); cuda_ops_gated_deltanet.cpp sends each span of
// a call to its kernel, and tests/backend_cuda/test_cuda_gdn_chunked.cpp checks it against the CPU's.
//
// Recurrent kernel: one block per (span, value head, group of 32 value columns). Thread (j, p) keeps the
// state entries S[i][j] for i in [16 p, 16 p + 16) in registers for the whole span, p < P = dk / 16.
// Per row: S *= exp(g); mem[j] = sum_i S[i][j] k[i] as 16-term fmaf partials (increasing i) summed over
// p in increasing p; u = (v - mem) * beta; S += k u; out[j] = sum_i S[i][j] q[i] the same way. The per-row
// arithmetic is identical whatever the span length, and the state round-trips through global memory
// exactly, so a K-row span equals K one-row calls bit for bit.
//
// Two kernels with this arithmetic:
// - rule_head_kernel, a block per (span, value head) of dv * P threads whose partials meet in shared
//   memory at four block barriers a row: for calls whose spans are all one row (decode), where it is the
//   faster (27B decode 15.90 against 16.01 ms);
// - rule_kernel, a block per (span, value head, 32 value columns): a warp holds the P threads of
//   floor(32 / P) columns (lane = column + floor(32 / P) p), so the sums over p are gathered by shuffles,
//   in increasing p, with no block barrier, and the block stages up to 16 rows of q, k, v and gates in
//   shared memory at a time. For longer spans: the 27B's 16-row verify 19.5 -> 18.8 ms (the head kernel
//   took ~22 µs a head for 16 rows, at its barriers).
// So a K-row span (rule_kernel) equals K one-row calls (rule_head_kernel) bit for bit, as the tests check.
#include <cuda_runtime.h>

#include <algorithm>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device_math.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/launch.cuh"

namespace specserve::cuda::kernels {

namespace {

constexpr int kRowsPerThread = 16;  // state rows (along dk) per thread
constexpr int kRuleCols = 32;       // value columns per block
constexpr int kRuleRows = 16;       // rows of q, k, v and gates staged in shared memory at a time
// q and k in shared memory with one padding float after every 16: the 16-element runs that the P
// threads of a column read (element 16 p + c at the same c) fall in distinct banks.
__host__ __device__ constexpr int rule_pad(int i) { return i + i / kRowsPerThread; }

// A thread's kRowsPerThread state entries S[16 p + e][j] of value head h: loaded from the span's source
// (state_in, else state; zeros for a thread without a column, !valid) and stored back into its state.
// Both rule kernels hold the state this way.
__device__ __forceinline__ void rule_load_state(const GdnSpanDev& sp, int h, int dk, int dv, int p, int j, bool valid,
                                                float (&s)[kRowsPerThread]) {
  const float* src = (sp.state_in != nullptr ? sp.state_in : sp.state) + int64_t{h} * dk * dv;
#pragma unroll
  for (int e = 0; e < kRowsPerThread; ++e) s[e] = valid ? src[int64_t{p * kRowsPerThread + e} * dv + j] : 0.0f;
}
__device__ __forceinline__ void rule_store_state(const GdnSpanDev& sp, int h, int dk, int dv, int p, int j,
                                                 const float (&s)[kRowsPerThread]) {
  float* S = sp.state + int64_t{h} * dk * dv;
#pragma unroll
  for (int e = 0; e < kRowsPerThread; ++e) S[int64_t{p * kRowsPerThread + e} * dv + j] = s[e];
}

// A thread's share of one row of the rule, over its kRowsPerThread state entries s (rows 16 p ...) of
// one column, with k and q at those rows. Both rule kernels call these, so their arithmetic is one.
// S *= alpha, then this thread's partial of mem = sum_i S[i][j] k[i].
__device__ __forceinline__ float rule_decay_dot(float (&s)[kRowsPerThread], float alpha, const float* k) {
  float pm = 0.0f;
#pragma unroll
  for (int e = 0; e < kRowsPerThread; ++e) {
    s[e] = s[e] * alpha;
    pm = fmaf(s[e], k[e], pm);
  }
  return pm;
}
// S += k u, then this thread's partial of out = sum_i S[i][j] q[i].
__device__ __forceinline__ float rule_update_dot(float (&s)[kRowsPerThread], const float* k, float u, const float* q) {
  float po = 0.0f;
#pragma unroll
  for (int e = 0; e < kRowsPerThread; ++e) {
    s[e] = fmaf(k[e], u, s[e]);
    po = fmaf(s[e], q[e], po);
  }
  return po;
}

// Output (t, c) of one span: rows before the span come from its window.
__device__ __forceinline__ float conv_one(const float* x, int64_t ldx, const float* window, const float* w, int64_t t,
                                          int64_t c, int64_t C, int Kc) {
  float acc = 0.0f;
  for (int j = 0; j < Kc; ++j) {
    const int64_t src = t - (Kc - 1) + j;  // negative: a window row
    const float v = src >= 0 ? x[src * ldx + c] : window[(Kc - 1 + src) * C + c];
    acc += w[c * Kc + j] * v;  // two roundings, as the CPU (no contraction)
  }
  return d_silu(acc);
}

__global__ void conv_kernel(const float* x, int64_t ldx, const float* window, const float* w, float* out, int64_t ldo,
                            int64_t n, int64_t C, int Kc) {
  pdl_begin();
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < n * C; e += int64_t{gridDim.x} * blockDim.x) {
    const int64_t t = e / C, c = e % C;
    out[t * ldo + c] = conv_one(x, ldx, window, w, t, c, C, Kc);
  }
}

// blockIdx.z: the span; blockIdx.x: 256 channels; rows blockIdx.y, + gridDim.y, ... Each element is conv_one
// as before; the grid no longer divides a 64-bit flat index by C per element (a 2,048-row prefill chunk of
// the 27B took ~220 µs a layer for ~170 MB: session 18's trace).
__global__ void conv_spans_kernel(const float* x, int64_t ldx, const ConvSpanDev* spans, const float* w, float* out,
                                  int64_t ldo, int64_t C, int Kc) {
  pdl_begin();
  const ConvSpanDev sp = spans[blockIdx.z];
  const int64_t c = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (c >= C) return;
  const float* xs = x + sp.row_begin * ldx;
  float* os = out + sp.row_begin * ldo;
  for (int64_t t = blockIdx.y; t < sp.rows; t += gridDim.y)
    os[t * ldo + c] = conv_one(xs, ldx, sp.window, w, t, c, C, Kc);
}

// The same outputs for a compile-time kernel width KC (Qwen3.5/3.6: 4), each thread one channel over a run
// of kConvRunRows consecutive rows of its span: the KC weights and the last KC - 1 inputs stay in registers,
// so every input is read once (conv_spans_kernel reads each KC times, and its weights every row: a
// 2,048-row chunk of the 27B took ~210 µs a layer for ~170 MB, session 19's trace). Each output is
// conv_one's sum, term by term in the same order: the same bits.
constexpr int kConvRunRows = 32;
template <int KC>
__global__ void conv_spans_runs_kernel(const float* x, int64_t ldx, const ConvSpanDev* spans, const float* w,
                                       float* out, int64_t ldo, int64_t C) {
  pdl_begin();
  const ConvSpanDev sp = spans[blockIdx.z];
  const int64_t c = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (c >= C) return;
  float wr[KC];
#pragma unroll
  for (int j = 0; j < KC; ++j) wr[j] = w[c * KC + j];
  const float* xs = x + sp.row_begin * ldx;
  float* os = out + sp.row_begin * ldo;
  for (int64_t t0 = int64_t{blockIdx.y} * kConvRunRows; t0 < sp.rows; t0 += int64_t{gridDim.y} * kConvRunRows) {
    const int64_t t1 = t0 + kConvRunRows < sp.rows ? t0 + kConvRunRows : sp.rows;
    float win[KC];  // win[j]: the input at row t - (KC - 1) + j
#pragma unroll
    for (int j = 0; j < KC - 1; ++j) {
      const int64_t src = t0 - (KC - 1) + j;  // negative: a window row
      win[j] = src >= 0 ? xs[src * ldx + c] : sp.window[(KC - 1 + src) * C + c];
    }
    for (int64_t t = t0; t < t1; ++t) {
      win[KC - 1] = xs[t * ldx + c];
      float acc = 0.0f;
#pragma unroll
      for (int j = 0; j < KC; ++j) acc += wr[j] * win[j];  // two roundings, as conv_one
      os[t * ldo + c] = d_silu(acc);
#pragma unroll
      for (int j = 0; j < KC - 1; ++j) win[j] = win[j + 1];
    }
  }
}

// One block per row: warps take the 2 Hk q/k heads in turn (one each when the block has 2 Hk warps,
// as launched up to 32), then the threads do the Hv gates. The gates' weights are read before the wait
// for the previous kernel (launch.cuh: weights may be).
__global__ void prepare_kernel(float* qkv, int64_t ld, float* a, float* b, const float* a_log, const float* dt_bias,
                               int Hk, int Hv, int dk) {
  const int h0 = static_cast<int>(threadIdx.x);
  const float a_log0 = h0 < Hv ? a_log[h0] : 0.0f, dt_bias0 = h0 < Hv ? dt_bias[h0] : 0.0f;
  pdl_begin();
  const int64_t r = blockIdx.x;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, warps = blockDim.x >> 5;
  const float q_scale = 1.0f / sqrtf(static_cast<float>(dk));
  float* row = qkv + r * ld;
  for (int head = warp; head < 2 * Hk; head += warps) {
    float* v = row + int64_t{head} * dk;  // q heads then k heads: [q (Hk dk) | k (Hk dk) | v]
    float ss = 0.0f;
    for (int i = lane; i < dk; i += 32) ss = fmaf(v[i], v[i], ss);
    const float inv = 1.0f / sqrtf(warp_sum(ss) + 1e-6f);
    if (head < Hk)
      for (int i = lane; i < dk; i += 32) v[i] = (v[i] * inv) * q_scale;
    else
      for (int i = lane; i < dk; i += 32) v[i] = v[i] * inv;
  }
  for (int h = threadIdx.x; h < Hv; h += blockDim.x) {
    float* br = b + r * Hv + h;
    float* ar = a + r * Hv + h;
    *br = d_sigmoid(*br);
    const float al = h == h0 ? a_log0 : a_log[h], dt = h == h0 ? dt_bias0 : dt_bias[h];
    *ar = -expf(al) * d_softplus(*ar + dt);
  }
}

__global__ void __launch_bounds__(1024)
    rule_head_kernel(const float* qkv, int64_t ld, const float* g, const float* beta, const GdnSpanDev* spans, int Hk,
                     int Hv, int dk, int dv, float* out, int64_t ldo) {
  pdl_begin();
  extern __shared__ float smem[];
  const int P = dk / kRowsPerThread;
  float* sq = smem;                     // [dk]
  float* sk = sq + dk;                  // [dk]
  float* sv = sk + dk;                  // [dv]
  float* part_mem = sv + dv;            // [P][dv]
  float* part_out = part_mem + P * dv;  // [P][dv]

  const GdnSpanDev sp = spans[blockIdx.x / Hv];
  const int h = static_cast<int>(blockIdx.x % Hv);
  const int kh = h / (Hv / Hk);
  if (sp.rows == 0) return;
  const int j = threadIdx.x % dv, p = threadIdx.x / dv;
  const int key_dim = Hk * dk;

  float s[kRowsPerThread];
  rule_load_state(sp, h, dk, dv, p, j, true, s);

  for (int64_t r = sp.row_begin; r < sp.row_begin + sp.rows; ++r) {
    const float* row = qkv + r * ld;
    __syncthreads();  // the previous row's shared values are no longer read
    for (int i = threadIdx.x; i < dk; i += blockDim.x) {
      sq[i] = row[int64_t{kh} * dk + i];
      sk[i] = row[key_dim + int64_t{kh} * dk + i];
    }
    for (int i = threadIdx.x; i < dv; i += blockDim.x) sv[i] = row[2 * int64_t{key_dim} + int64_t{h} * dv + i];
    __syncthreads();
    const float alpha = expf(g[r * Hv + h]);
    const float bt = beta[r * Hv + h];
    part_mem[p * dv + j] = rule_decay_dot(s, alpha, sk + p * kRowsPerThread);
    __syncthreads();
    float mem = 0.0f;
    for (int pp = 0; pp < P; ++pp) mem = mem + part_mem[pp * dv + j];
    const float u = (sv[j] - mem) * bt;
    part_out[p * dv + j] = rule_update_dot(s, sk + p * kRowsPerThread, u, sq + p * kRowsPerThread);
    __syncthreads();
    if (p == 0) {
      float o = 0.0f;
      for (int pp = 0; pp < P; ++pp) o = o + part_out[pp * dv + j];
      out[r * ldo + int64_t{h} * dv + j] = o;
    }
  }
  rule_store_state(sp, h, dk, dv, p, j, s);
}

// blockIdx.x = (span * Hv + head) * col_blocks + column block.
__global__ void __launch_bounds__(1024)
    rule_kernel(const float* qkv, int64_t ld, const float* g, const float* beta, const GdnSpanDev* spans, int Hk,
                int Hv, int dk, int dv, int col_blocks, float* out, int64_t ldo) {
  pdl_begin();
  extern __shared__ float smem[];
  const int P = dk / kRowsPerThread, cpw = 32 / P;  // partials per column, columns per warp (lanes past cpw P idle)
  const int qk_pitch = rule_pad(dk);
  float* sq = smem;                        // [kRuleRows][qk_pitch]
  float* sk = sq + kRuleRows * qk_pitch;   // [kRuleRows][qk_pitch]
  float* sv = sk + kRuleRows * qk_pitch;   // [kRuleRows][kRuleCols]
  float* sg = sv + kRuleRows * kRuleCols;  // [kRuleRows]: exp(g)
  float* sb = sg + kRuleRows;              // [kRuleRows]: beta

  const int cb = static_cast<int>(blockIdx.x % col_blocks);
  const int64_t sh = blockIdx.x / col_blocks;
  const GdnSpanDev sp = spans[sh / Hv];
  const int h = static_cast<int>(sh % Hv);
  const int kh = h / (Hv / Hk);
  if (sp.rows == 0) return;
  const int col0 = cb * kRuleCols, ncols = dv - col0 < kRuleCols ? dv - col0 : kRuleCols;
  const int lane = static_cast<int>(threadIdx.x) & 31, c = lane % cpw, p = lane / cpw;
  const int jl = (static_cast<int>(threadIdx.x) >> 5) * cpw + c;  // column within the block
  const bool valid = jl < ncols && p < P;
  const int j = col0 + jl;
  const int key_dim = Hk * dk;
  // This thread's runs of q and k in a staged row (an idle lane, p == P, reads p = 0's: its sums are
  // never gathered).
  const int run = rule_pad((p < P ? p : 0) * kRowsPerThread);

  float s[kRowsPerThread];
  rule_load_state(sp, h, dk, dv, p, j, valid, s);

  for (int64_t r0 = 0; r0 < sp.rows; r0 += kRuleRows) {
    const int nr = sp.rows - r0 < kRuleRows ? static_cast<int>(sp.rows - r0) : kRuleRows;
    __syncthreads();  // the previous rows' shared values are no longer read
    for (int e = static_cast<int>(threadIdx.x); e < nr * dk; e += blockDim.x) {
      const int r = e / dk, i = e % dk;
      const float* row = qkv + (sp.row_begin + r0 + r) * ld;
      sq[r * qk_pitch + rule_pad(i)] = row[int64_t{kh} * dk + i];
      sk[r * qk_pitch + rule_pad(i)] = row[key_dim + int64_t{kh} * dk + i];
    }
    for (int e = static_cast<int>(threadIdx.x); e < nr * ncols; e += blockDim.x) {
      const int r = e / ncols, jj = e % ncols;
      sv[r * kRuleCols + jj] = qkv[(sp.row_begin + r0 + r) * ld + 2 * int64_t{key_dim} + int64_t{h} * dv + col0 + jj];
    }
    for (int r = static_cast<int>(threadIdx.x); r < nr; r += blockDim.x) {
      const int64_t gr = sp.row_begin + r0 + r;
      sg[r] = expf(g[gr * Hv + h]);
      sb[r] = beta[gr * Hv + h];
    }
    __syncthreads();
    for (int r = 0; r < nr; ++r) {
      const float* kr = sk + r * qk_pitch + run;
      const float* qr = sq + r * qk_pitch + run;
      const float alpha = sg[r], bt = sb[r];
      const float pm = rule_decay_dot(s, alpha, kr);
      float mem = 0.0f;  // the column's P partials, in increasing p
      for (int pp = 0; pp < P; ++pp) mem = mem + __shfl_sync(0xffffffffu, pm, c + cpw * pp);
      const float u = ((valid ? sv[r * kRuleCols + jl] : 0.0f) - mem) * bt;
      const float po = rule_update_dot(s, kr, u, qr);
      float o = 0.0f;
      for (int pp = 0; pp < P; ++pp) o = o + __shfl_sync(0xffffffffu, po, c + cpw * pp);
      if (p == 0 && valid) out[(sp.row_begin + r0 + r) * ldo + int64_t{h} * dv + j] = o;
    }
  }
  if (valid) rule_store_state(sp, h, dk, dv, p, j, s);
}

}  // namespace

void causal_conv_silu(const float* x, int64_t ldx, const float* window, const float* w, float* out, int64_t ldo,
                      int64_t n, int64_t C, int Kc, cudaStream_t stream) {
  if (n == 0 || C == 0) return;
  launch_pdl(conv_kernel, grid_for(n * C, 256), 256, 0, stream, x, ldx, window, w, out, ldo, n, C, Kc);
  CUDA_CHECK_LAUNCH();
}

void causal_conv_silu_spans(const float* x, int64_t ldx, const ConvSpanDev* spans, int64_t num_spans, int64_t max_rows,
                            const float* w, float* out, int64_t ldo, int64_t C, int Kc, cudaStream_t stream) {
  if (num_spans == 0 || max_rows == 0 || C == 0) return;
  const auto channel_blocks = static_cast<unsigned>((C + 255) / 256);
  if (Kc == 4) {
    const int64_t runs = (max_rows + kConvRunRows - 1) / kConvRunRows;
    const auto run_blocks = static_cast<unsigned>(runs < 65535 ? runs : 65535);
    for (int64_t first = 0; first < num_spans; first += 65535) {
      const auto n = static_cast<unsigned>(num_spans - first < 65535 ? num_spans - first : 65535);
      launch_pdl(conv_spans_runs_kernel<4>, dim3(channel_blocks, run_blocks, n), 256, 0, stream, x, ldx, spans + first,
                 w, out, ldo, C);
      CUDA_CHECK_LAUNCH();
    }
    return;
  }
  const auto row_blocks = static_cast<unsigned>(max_rows < 65535 ? max_rows : 65535);
  for (int64_t first = 0; first < num_spans; first += 65535) {
    const auto n = static_cast<unsigned>(num_spans - first < 65535 ? num_spans - first : 65535);
    launch_pdl(conv_spans_kernel, dim3(channel_blocks, row_blocks, n), 256, 0, stream, x, ldx, spans + first, w, out,
               ldo, C, Kc);
    CUDA_CHECK_LAUNCH();
  }
}

void gdn_prepare(float* qkv, int64_t ld, float* a, float* b, const float* a_log, const float* dt_bias, int64_t R,
                 int Hk, int Hv, int dk, int dv, cudaStream_t stream) {
  if (R == 0) return;
  // A warp per q/k head (up to 32 warps), at least 256 threads: one round of a head's latency at decode.
  const int threads = std::clamp(64 * Hk, 256, 1024);
  launch_pdl(prepare_kernel, static_cast<unsigned>(R), threads, 0, stream, qkv, ld, a, b, a_log, dt_bias, Hk, Hv, dk);
  CUDA_CHECK_LAUNCH();
}

bool gdn_rule_supports(int dk, int dv) {
  return dk > 0 && dv > 0 && dk % kRowsPerThread == 0 && dk <= 32 * kRowsPerThread;
}

void gated_delta_rule(const float* qkv, int64_t ld, const float* g, const float* beta, const GdnSpanDev* spans,
                      int64_t num_spans, int64_t max_rows, int Hk, int Hv, int dk, int dv, float* out, int64_t ldo,
                      cudaStream_t stream) {
  if (num_spans == 0) return;
  const int P = dk / kRowsPerThread, cpw = 32 / P;
  if (max_rows <= 1 && P * dv <= 1024) {
    const size_t shared = sizeof(float) * (2 * size_t(dk) + dv + 2 * size_t(P) * dv);
    launch_pdl(rule_head_kernel, static_cast<unsigned>(num_spans * Hv), P * dv, shared, stream, qkv, ld, g, beta, spans,
               Hk, Hv, dk, dv, out, ldo);
    CUDA_CHECK_LAUNCH();
    return;
  }
  const int col_blocks = (dv + kRuleCols - 1) / kRuleCols;
  const int warps = (std::min(dv, kRuleCols) + cpw - 1) / cpw;
  const size_t shared = sizeof(float) * (2 * size_t(kRuleRows) * rule_pad(dk) + kRuleRows * kRuleCols + 2 * kRuleRows);
  launch_pdl(rule_kernel, static_cast<unsigned>(num_spans * Hv * col_blocks), 32 * warps, shared, stream, qkv, ld, g,
             beta, spans, Hk, Hv, dk, dv, col_blocks, out, ldo);
  CUDA_CHECK_LAUNCH();
}

}  // namespace specserve::cuda::kernels
