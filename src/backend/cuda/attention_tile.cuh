#pragma once
// The arithmetic of one tile of keys for one query head of the split-KV attention (attention.cu): the
// scores, the softmax bookkeeping and the weighted values. Both partial kernels (one row per CTA, and
// several rows of one sequence per CTA) compute every query head's values through these functions, so
// a row's bits do not depend on which kernel served it.
#include <cuda_runtime.h>

#include <cmath>

#include "backend/cuda/device_math.cuh"
#include "backend/cuda/kv_layout.cuh"

namespace specserve::cuda::kernels::attn_tile {

// The scores of NK keys of a tile against NQ query heads (rows of HD floats in shared memory; the keys'
// rows are the cache's elements KV, widened exactly: kv_layout.cuh), for keys that share rot, their
// place in the tile mod 32: s[k][j] = (q_j · key_k) * scale, the dot summed with
// fmaf over the dims in the order d = (i + rot) mod HD, i = 0, 1, ..., HD - 1 (so the lanes of a warp,
// one key each, read distinct banks). A head with !live[j] is skipped (its s[.][j] is meaningless).
template <int HD, int NK, int NQ, class KV>
__device__ __forceinline__ void scores(const KV* const (&key)[NK], const float* const (&q)[NQ], const bool (&live)[NQ],
                                       int rot, float scale, float (&s)[NK][NQ]) {
#pragma unroll
  for (int k = 0; k < NK; ++k)
#pragma unroll
    for (int j = 0; j < NQ; ++j) s[k][j] = 0.0f;
  for (int i = 0; i < HD; ++i) {
    const int d = i + rot < HD ? i + rot : i + rot - HD;
    float kd[NK];
#pragma unroll
    for (int k = 0; k < NK; ++k) kd[k] = kv_widen(key[k][d]);
#pragma unroll
    for (int j = 0; j < NQ; ++j)
      if (live[j]) {
        const float qd = q[j][d];
#pragma unroll
        for (int k = 0; k < NK; ++k) s[k][j] = fmaf(qd, kd[k], s[k][j]);
      }
  }
#pragma unroll
  for (int k = 0; k < NK; ++k)
#pragma unroll
    for (int j = 0; j < NQ; ++j) s[k][j] = s[k][j] * scale;
}

// One query head's softmax bookkeeping for a tile, by a whole warp: sp holds the scores of the tile's
// first nk >= 1 keys (lane takes keys lane and lane + 32). The tile max, the new running max *m, p =
// exp(s - *m) written over the scores, the tile's sum of p (warp_sum) added to the rescaled running sum
// *l, and *corr = exp(m_old - m_new), the factor for the values summed so far (0 on the first tile).
__device__ __forceinline__ void softmax(float* sp, int nk, int lane, float* m, float* l, float* corr) {
  const float a = lane < nk ? sp[lane] : -INFINITY;
  const float b = lane + 32 < nk ? sp[lane + 32] : -INFINITY;
  const float m_old = *m;
  const float m_new = fmaxf(m_old, warp_max(fmaxf(a, b)));
  const float pa = lane < nk ? expf(a - m_new) : 0.0f;
  const float pb = lane + 32 < nk ? expf(b - m_new) : 0.0f;
  const float sum = warp_sum(pa + pb);
  const float c = expf(m_old - m_new);  // 0 on the first tile (m_old = -inf)
  __syncwarp();
  if (lane < nk) sp[lane] = pa;
  if (lane + 32 < nk) sp[lane + 32] = pb;
  if (lane == 0) {
    *l = *l * c + sum;
    *m = m_new;
    *corr = c;
  }
}

// The weighted values of one (query head, dim): once per tile acc = rescale(acc, corr), then
// acc = add_value(acc, p, v) for the tile's keys in increasing order.
__device__ __forceinline__ float rescale(float acc, float corr) { return acc * corr; }
__device__ __forceinline__ float add_value(float acc, float p, float v) { return fmaf(p, v, acc); }

}  // namespace specserve::cuda::kernels::attn_tile
