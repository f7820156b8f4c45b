#pragma once
// The emulated qwen3-8b layer of tools/gpu/archive/persistent_layer_probe.cu: its shapes, buffers and the small
// phases between the matmuls (the norms, head preparation, attention partials and their merge, swiglu),
// each a CTA-level function that the separate kernels and the persistent kernel both call. Real loads and
// arithmetic, not the server's numerics (one-pass softmax, atomics in the matmuls): only time is measured.
#include <cuda_runtime.h>

#include <cstdint>

namespace plp {

constexpr int kLayers = 36, kHidden = 4096, kInter = 12288, kQkv = 6144, kHeads = 32, kKvHeads = 8, kHd = 128;
constexpr int kCtx = 512, kTile = 64, kChunks = kCtx / kTile;
constexpr int kWarps = 8, kThreads = 32 * kWarps;

struct Mat {
  const uint16_t* w;
  int N, K;
};

struct Buffers {
  const Mat* mats;      // [kLayers * 4]
  const float* norm_w;  // [kHidden]
  float* resid;         // [2][kHidden] ping-pong
  float* qkv;           // [kLayers][kQkv]
  float* qh;            // [kHidden] prepared queries
  float* kv;            // [kLayers][kKvHeads][kCtx][2][kHd]
  float* part;          // [kHeads][kChunks][kHd + 2]
  float* attn;          // [kHidden]
  float* o;             // [kLayers][kHidden]
  float* gu;            // [kLayers][2 * kInter]
  float* h;             // [kInter]
  float* down;          // [kLayers][kHidden]
  float* xnorm;         // [kHidden] (separate kernels: the norm's output)
  unsigned* bar;        // [2] count, generation
};

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ float block_sum(float v, float* red) {
  v = warp_sum(v);
  const int w = threadIdx.x >> 5, l = threadIdx.x & 31;
  __syncthreads();
  if (l == 0) red[w] = v;
  __syncthreads();
  float s = 0.0f;
  for (int i = 0; i < kWarps; ++i) s += red[i];
  return s;
}

// Residual rows: res[l][0] = before attention (written with layer l's first norm), res[l][1] = before
// the MLP; res[-1][1] (index 0) is the step's input.
__device__ float* res_row(const Buffers& b, int l, int which) { return b.resid + ((l + 1) * 2 + which) * kHidden; }

// v = in + add (add may be null), xs = rms_norm(v) * norm_w; CTA `writer` stores v to out.
__device__ void fill_x_norm(const Buffers& b, float* xs, const float* in, const float* add, float* out, bool writer,
                            float* red) {
  float ss = 0.0f;
  for (int i = threadIdx.x; i < kHidden; i += kThreads) {
    const float v = in[i] + (add != nullptr ? add[i] : 0.0f);
    xs[i] = v;
    if (writer) out[i] = v;
    ss = fmaf(v, v, ss);
  }
  const float inv = rsqrtf(block_sum(ss, red) / kHidden + 1e-6f);
  for (int i = threadIdx.x; i < kHidden; i += kThreads) xs[i] = xs[i] * inv * b.norm_w[i];
  __syncthreads();
}
__device__ void fill_x(float* xs, const float* src, int n) {
  for (int i = threadIdx.x; i < n; i += kThreads) xs[i] = src[i];
  __syncthreads();
}

// Head preparation: CTAs 0-31 the query heads (norm), 32-39 the key heads (norm, into the cache's last
// slot) with their values.
__device__ void head_prep(const Buffers& b, int l, int cta, float* red) {
  if (cta >= kHeads + kKvHeads) return;
  const int t = threadIdx.x;
  const float* src = b.qkv + static_cast<size_t>(l) * kQkv + cta * kHd;
  const float v = t < kHd ? src[t] : 0.0f;
  const float inv = rsqrtf(block_sum(v * v, red) / kHd + 1e-6f);
  if (t >= kHd) return;
  if (cta < kHeads) {
    b.qh[cta * kHd + t] = v * inv;
  } else {
    const int kvh = cta - kHeads;
    float* slot = b.kv + ((static_cast<size_t>(l) * kKvHeads + kvh) * kCtx + (kCtx - 1)) * 2 * kHd;
    slot[t] = v * inv;
    slot[kHd + t] = b.qkv[static_cast<size_t>(l) * kQkv + kHidden + kKvHeads * kHd + kvh * kHd + t];
  }
}

// Attention partials: CTA c < 64 takes KV head c / 8 and the 64 keys of chunk c % 8 for its 4 query heads.
__device__ void attention(const Buffers& b, int l, int cta, float* xs) {
  if (cta >= kKvHeads * kChunks) return;
  const int kvh = cta / kChunks, ch = cta % kChunks, t = threadIdx.x;
  float* sk = xs;                // [64][128] keys
  float* sq = xs + kTile * kHd;  // [4][128] queries
  float* sp = sq + 4 * kHd;      // [4][64] scores, then p
  float* sm = sp + 4 * kTile;    // [4] max
  const float* kvb = b.kv + (static_cast<size_t>(l) * kKvHeads + kvh) * kCtx * 2 * kHd;
  for (int e = t; e < kTile * kHd / 4; e += kThreads) {
    const int key = e / (kHd / 4), d4 = e % (kHd / 4);
    reinterpret_cast<float4*>(sk)[e] =
        reinterpret_cast<const float4*>(kvb + static_cast<size_t>(ch * kTile + key) * 2 * kHd)[d4];
  }
  for (int e = t; e < 4 * kHd; e += kThreads) sq[e] = b.qh[kvh * 4 * kHd + e];
  __syncthreads();
  {
    const int h = t / kTile, k = t % kTile;
    float s = 0.0f;
    for (int i = 0; i < kHd; ++i) {
      const int d = (i + k) & (kHd - 1);
      s = fmaf(sq[h * kHd + d], sk[k * kHd + d], s);
    }
    sp[h * kTile + k] = s * 0.08838834764f;
  }
  __syncthreads();
  const int warp = t >> 5, lane = t & 31;
  if (warp < 4) {
    float* row = sp + warp * kTile;
    float m = fmaxf(row[lane], row[lane + 32]);
    for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    const float pa = __expf(row[lane] - m), pb = __expf(row[lane + 32] - m);
    const float sum = warp_sum(pa + pb);
    __syncwarp();
    row[lane] = pa;
    row[lane + 32] = pb;
    if (lane == 0) {
      sm[warp] = m;
      float* rec = b.part + ((kvh * 4 + warp) * kChunks + ch) * (kHd + 2);
      rec[kHd] = m;
      rec[kHd + 1] = sum;
    }
  }
  __syncthreads();
  const int h = t / 64, d0 = (t % 64) * 2;
  float a0 = 0.0f, a1 = 0.0f;
  for (int k = 0; k < kTile; ++k) {
    const float p = sp[h * kTile + k];
    const float2 v = *reinterpret_cast<const float2*>(kvb + static_cast<size_t>(ch * kTile + k) * 2 * kHd + kHd + d0);
    a0 = fmaf(p, v.x, a0);
    a1 = fmaf(p, v.y, a1);
  }
  float* rec = b.part + ((kvh * 4 + h) * kChunks + ch) * (kHd + 2);
  rec[d0] = a0;
  rec[d0 + 1] = a1;
}

// The chunks' merge: CTA c < 32 takes query head c.
__device__ void combine(const Buffers& b, int cta) {
  if (cta >= kHeads || threadIdx.x >= kHd) return;
  const float* rec = b.part + cta * kChunks * (kHd + 2);
  float M = -INFINITY;
  for (int c = 0; c < kChunks; ++c) M = fmaxf(M, rec[c * (kHd + 2) + kHd]);
  float L = 0.0f, o = 0.0f;
  for (int c = 0; c < kChunks; ++c) {
    const float f = __expf(rec[c * (kHd + 2) + kHd] - M);
    L = fmaf(rec[c * (kHd + 2) + kHd + 1], f, L);
    o = fmaf(rec[c * (kHd + 2) + threadIdx.x], f, o);
  }
  b.attn[cta * kHd + threadIdx.x] = o / L;
}

__device__ void swiglu(const Buffers& b, int l, int cta, int ctas) {
  const float* g = b.gu + static_cast<size_t>(l) * 2 * kInter;
  for (int i = cta * kThreads + threadIdx.x; i < kInter; i += ctas * kThreads) {
    const float x = g[i];
    b.h[i] = x / (1.0f + __expf(-x)) * g[kInter + i];
  }
}

__device__ float* out_of(const Buffers& b, int l, int m) {
  switch (m) {
    case 0: return b.qkv + static_cast<size_t>(l) * kQkv;
    case 1: return b.o + static_cast<size_t>(l) * kHidden;
    case 2: return b.gu + static_cast<size_t>(l) * 2 * kInter;
    default: return b.down + static_cast<size_t>(l) * kHidden;
  }
}

}  // namespace plp
