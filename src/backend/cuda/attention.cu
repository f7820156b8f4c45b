// Paged KV store and causal GQA attention (backend/cpu/attention.cpp) on the device.
//
// Layout: KvGeometry's [layer][K|V][kv_head][slot][head_dim] f32 blocks of kKvBlockSize (16)
// positions; a row's block table is a device array of device block pointers (staged by cuda_ops).
//
// Attention: one block of kWarps warps per (query row, query head), independent of every other row.
// Warp w walks keys i = w, w + kWarps, w + 2 kWarps, ... of the row's window (i counted from
// window_start) in increasing order with an online softmax (running max m, running sum l, running
// weighted V sum acc); lane l holds head dims l, l + 32, ... A score is the q·k dot of the lane's dims
// (fmaf, increasing dim) reduced by warp_sum, times scale. The kWarps partial states are then merged
// in warp order. Every choice here depends only on the row's own window length, so a row gives the
// same bits alone (a decode) or inside any batch (an extend, other sequences' rows).
#include <cuda_runtime.h>

#include <cmath>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device_math.cuh"
#include "backend/cuda/kernels.h"

namespace specserve::cuda::kernels {

namespace {

constexpr int kBlockSize = 16;  // == kKvBlockSize (backend/ops.h)
constexpr int kWarps = 4;

struct Geo {
  int64_t layer_base;  // offset of the layer inside a block
  int64_t head_floats;  // kBlockSize * head_dim
  int num_kv_heads;
  int head_dim;
  __device__ int64_t offset(int which, int head, int slot) const {
    return layer_base + (int64_t{which} * num_kv_heads + head) * head_floats + int64_t{slot} * head_dim;
  }
};

Geo geo_of(const KvArgs& kv) {
  Geo g;
  g.head_floats = int64_t{kBlockSize} * kv.head_dim;
  g.layer_base = int64_t{kv.layer} * 2 * kv.num_kv_heads * g.head_floats;
  g.num_kv_heads = kv.num_kv_heads;
  g.head_dim = kv.head_dim;
  return g;
}

__global__ void kv_store_kernel(const KvRow* rows, float* const* ptrs, Geo geo, const float* k, int64_t ldk,
                                const float* v, int64_t ldv) {
  const int64_t r = blockIdx.x;
  const KvRow row = rows[r];
  float* block = ptrs[row.table + row.position / kBlockSize];
  const int slot = row.position % kBlockSize;
  const int width = geo.num_kv_heads * geo.head_dim;
  for (int e = threadIdx.x; e < width; e += blockDim.x) {
    const int h = e / geo.head_dim, d = e % geo.head_dim;
    block[geo.offset(0, h, slot) + d] = k[r * ldk + e];
    block[geo.offset(1, h, slot) + d] = v[r * ldv + e];
  }
}

template <int DPL>  // head dims per lane: head_dim = 32 * DPL
__global__ void __launch_bounds__(kWarps * 32)
    attention_kernel(const KvRow* rows, float* const* ptrs, Geo geo, const float* q, int64_t ldq, int num_heads,
                     float scale, float* out, int64_t ldo) {
  constexpr int HD = 32 * DPL;
  __shared__ float s_m[kWarps], s_l[kWarps];
  __shared__ float s_acc[kWarps][HD];
  const int64_t r = blockIdx.x / num_heads;
  const int h = static_cast<int>(blockIdx.x % num_heads);
  const int kvh = h / (num_heads / geo.num_kv_heads);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const KvRow row = rows[r];
  float* const* table = ptrs + row.table;
  const int64_t w0 = row.window_start, n = int64_t{row.position} + 1 - w0;

  float qv[DPL];
#pragma unroll
  for (int t = 0; t < DPL; ++t) qv[t] = q[r * ldq + int64_t{h} * HD + lane + 32 * t];

  float m = -INFINITY, l = 0.0f, acc[DPL];
#pragma unroll
  for (int t = 0; t < DPL; ++t) acc[t] = 0.0f;
  for (int64_t i = warp; i < n; i += kWarps) {
    const int64_t j = w0 + i;
    const float* block = table[j / kBlockSize];
    const int slot = static_cast<int>(j % kBlockSize);
    const float* kp = block + geo.offset(0, kvh, slot);
    const float* vp = block + geo.offset(1, kvh, slot);
    float p = 0.0f;
#pragma unroll
    for (int t = 0; t < DPL; ++t) p = fmaf(qv[t], kp[lane + 32 * t], p);
    const float s = warp_sum(p) * scale;
    const float m_new = fmaxf(m, s);
    const float corr = expf(m - m_new);  // 0 on the first key (m = -inf)
    const float e = expf(s - m_new);
    l = l * corr + e;
#pragma unroll
    for (int t = 0; t < DPL; ++t) acc[t] = acc[t] * corr + e * vp[lane + 32 * t];
    m = m_new;
  }
  if (lane == 0) {
    s_m[warp] = m;
    s_l[warp] = l;
  }
#pragma unroll
  for (int t = 0; t < DPL; ++t) s_acc[warp][lane + 32 * t] = acc[t];
  __syncthreads();
  // Merge the warps' states in warp order (a warp with no keys has m = -inf, l = 0: factor 0).
  float mx = s_m[0];
  for (int w = 1; w < kWarps; ++w) mx = fmaxf(mx, s_m[w]);
  float f[kWarps], L = 0.0f;
#pragma unroll
  for (int w = 0; w < kWarps; ++w) {
    f[w] = expf(s_m[w] - mx);
    L = L + s_l[w] * f[w];
  }
  const float inv = 1.0f / L;
  for (int d = threadIdx.x; d < HD; d += blockDim.x) {
    float o = 0.0f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) o = o + s_acc[w][d] * f[w];
    out[r * ldo + int64_t{h} * HD + d] = o * inv;
  }
}

template <int DPL>
void launch_attention(const KvArgs& kv, const float* q, int64_t ldq, int num_heads, float scale, float* out,
                      int64_t ldo, cudaStream_t stream) {
  const int64_t blocks = kv.R * num_heads;
  attention_kernel<DPL><<<static_cast<unsigned>(blocks), kWarps * 32, 0, stream>>>(kv.rows, kv.ptrs, geo_of(kv), q,
                                                                                    ldq, num_heads, scale, out, ldo);
  CUDA_CHECK_LAUNCH();
}

}  // namespace

void kv_store(const KvArgs& kv, const float* k, int64_t ldk, const float* v, int64_t ldv, cudaStream_t stream) {
  if (kv.R == 0) return;
  kv_store_kernel<<<static_cast<unsigned>(kv.R), 128, 0, stream>>>(kv.rows, kv.ptrs, geo_of(kv), k, ldk, v, ldv);
  CUDA_CHECK_LAUNCH();
}

bool attention_supports(int head_dim) { return head_dim % 32 == 0 && head_dim >= 32 && head_dim <= 256; }

void attention(const KvArgs& kv, const float* q, int64_t ldq, int num_heads, float scale, float* out, int64_t ldo,
               cudaStream_t stream) {
  if (kv.R == 0 || num_heads == 0) return;
  switch (kv.head_dim / 32) {
    case 1: launch_attention<1>(kv, q, ldq, num_heads, scale, out, ldo, stream); break;
    case 2: launch_attention<2>(kv, q, ldq, num_heads, scale, out, ldo, stream); break;
    case 3: launch_attention<3>(kv, q, ldq, num_heads, scale, out, ldo, stream); break;
    case 4: launch_attention<4>(kv, q, ldq, num_heads, scale, out, ldo, stream); break;
    case 5: launch_attention<5>(kv, q, ldq, num_heads, scale, out, ldo, stream); break;
    case 6: launch_attention<6>(kv, q, ldq, num_heads, scale, out, ldo, stream); break;
    case 7: launch_attention<7>(kv, q, ldq, num_heads, scale, out, ldo, stream); break;
    case 8: launch_attention<8>(kv, q, ldq, num_heads, scale, out, ldo, stream); break;
    default: break;  // excluded by attention_supports()
  }
}

}  // namespace specserve::cuda::kernels
