// Gated DeltaNet kernels (backend/cpu/gated_deltanet.cpp): causal depthwise conv + SiLU, the f32 gates
// and L2 norms, and the gated delta rule.
//
// The rule kernel here runs the STEPPED spans (decode, verify, extends) token by token, the recurrent
// form. CHUNKED spans (prefill) run the chunked form of gated_deltanet_chunked.cu instead, with the
// CPU's chunk boundaries (multiples of kGdnChunk in absolute position); cuda_ops.cpp sends each span of
// a call to its kernel, and tests/backend_cuda/test_cuda_gdn_chunked.cpp checks it against the CPU's.
//
// Recurrent kernel: one block per (span, value head), dv * (dk / 16) threads. Thread (j, p) keeps the
// state entries S[i][j] for i in [16 p, 16 p + 16) in registers for the whole span. Per row: q, k, v
// go to shared memory; S *= exp(g); mem[j] = sum_i S[i][j] k[i] as 16-term fmaf partials (increasing
// i) summed over p in increasing p; u = (v - mem) * beta; S += k u; out[j] = sum_i S[i][j] q[i] the
// same way. The per-row arithmetic is identical whatever the span length, and the state round-trips
// through global memory exactly, so a K-row span equals K one-row calls bit for bit.
#include <cuda_runtime.h>

#include <algorithm>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device_math.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/launch.cuh"

namespace specserve::cuda::kernels {

namespace {

constexpr int kRowsPerThread = 16;  // state rows (along dk) per thread

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

// blockIdx.y: the span.
__global__ void conv_spans_kernel(const float* x, int64_t ldx, const ConvSpanDev* spans, const float* w, float* out,
                                  int64_t ldo, int64_t C, int Kc) {
  pdl_begin();
  const ConvSpanDev sp = spans[blockIdx.y];
  const float* xs = x + sp.row_begin * ldx;
  float* os = out + sp.row_begin * ldo;
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < sp.rows * C;
       e += int64_t{gridDim.x} * blockDim.x) {
    const int64_t t = e / C, c = e % C;
    os[t * ldo + c] = conv_one(xs, ldx, sp.window, w, t, c, C, Kc);
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

__global__ void __launch_bounds__(1024) rule_kernel(const float* qkv, int64_t ld, const float* g, const float* beta, const GdnSpanDev* spans,
                            int Hk, int Hv, int dk, int dv, float* out, int64_t ldo) {
  pdl_begin();
  extern __shared__ float smem[];
  const int P = dk / kRowsPerThread;
  float* sq = smem;                 // [dk]
  float* sk = sq + dk;              // [dk]
  float* sv = sk + dk;              // [dv]
  float* part_mem = sv + dv;        // [P][dv]
  float* part_out = part_mem + P * dv;  // [P][dv]

  const GdnSpanDev sp = spans[blockIdx.x / Hv];
  const int h = static_cast<int>(blockIdx.x % Hv);
  const int kh = h / (Hv / Hk);
  if (sp.rows == 0) return;
  const int j = threadIdx.x % dv, p = threadIdx.x / dv;
  const int key_dim = Hk * dk;
  const int64_t head_off = int64_t{h} * dk * dv;
  const float* src = (sp.state_in != nullptr ? sp.state_in : sp.state) + head_off;
  float* S = sp.state + head_off;

  float s[kRowsPerThread];
#pragma unroll
  for (int c = 0; c < kRowsPerThread; ++c) s[c] = src[int64_t{p * kRowsPerThread + c} * dv + j];

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
    float pm = 0.0f;
#pragma unroll
    for (int c = 0; c < kRowsPerThread; ++c) {
      s[c] = s[c] * alpha;
      pm = fmaf(s[c], sk[p * kRowsPerThread + c], pm);
    }
    part_mem[p * dv + j] = pm;
    __syncthreads();
    float mem = 0.0f;
    for (int pp = 0; pp < P; ++pp) mem = mem + part_mem[pp * dv + j];
    const float u = (sv[j] - mem) * bt;
    float po = 0.0f;
#pragma unroll
    for (int c = 0; c < kRowsPerThread; ++c) {
      s[c] = fmaf(sk[p * kRowsPerThread + c], u, s[c]);
      po = fmaf(s[c], sq[p * kRowsPerThread + c], po);
    }
    part_out[p * dv + j] = po;
    __syncthreads();
    if (p == 0) {
      float o = 0.0f;
      for (int pp = 0; pp < P; ++pp) o = o + part_out[pp * dv + j];
      out[r * ldo + int64_t{h} * dv + j] = o;
    }
  }
#pragma unroll
  for (int c = 0; c < kRowsPerThread; ++c) S[int64_t{p * kRowsPerThread + c} * dv + j] = s[c];
}

}  // namespace

void causal_conv_silu(const float* x, int64_t ldx, const float* window, const float* w, float* out, int64_t ldo,
                      int64_t n, int64_t C, int Kc, cudaStream_t stream) {
  if (n == 0 || C == 0) return;
  launch_pdl(conv_kernel, grid_for(n * C, 256), 256, 0, stream, x, ldx, window, w, out, ldo, n, C, Kc);
  CUDA_CHECK_LAUNCH();
}

void causal_conv_silu_spans(const float* x, int64_t ldx, const ConvSpanDev* spans, int64_t num_spans,
                            int64_t max_rows, const float* w, float* out, int64_t ldo, int64_t C, int Kc,
                            cudaStream_t stream) {
  if (num_spans == 0 || max_rows == 0 || C == 0) return;
  for (int64_t first = 0; first < num_spans; first += 65535) {
    const auto n = static_cast<unsigned>(num_spans - first < 65535 ? num_spans - first : 65535);
    launch_pdl(conv_spans_kernel, dim3(grid_for(max_rows * C, 256), n), 256, 0, stream, x, ldx, spans + first, w, out,
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
  return dk > 0 && dv > 0 && dk % kRowsPerThread == 0 && (dk / kRowsPerThread) * dv <= 1024;
}

void gated_delta_rule(const float* qkv, int64_t ld, const float* g, const float* beta, const GdnSpanDev* spans,
                      int64_t num_spans, int Hk, int Hv, int dk, int dv, float* out, int64_t ldo, cudaStream_t stream) {
  if (num_spans == 0) return;
  const int P = dk / kRowsPerThread;
  const size_t shared = sizeof(float) * (2 * size_t(dk) + dv + 2 * size_t(P) * dv);
  launch_pdl(rule_kernel, static_cast<unsigned>(num_spans * Hv), P * dv, shared, stream, qkv, ld, g, beta, spans, Hk,
             Hv, dk, dv, out, ldo);
  CUDA_CHECK_LAUNCH();
}

}  // namespace specserve::cuda::kernels
