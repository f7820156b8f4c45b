// The attention block's per-head preparation in one launch (Ops::qk_norm_rope_kv_store and its _rows
// form, whose queries are other rows than its keys): one block per query head of each q row, then one per
// KV head of each KV row. The block norms its head exactly as
// rms_norm_kernel would (norm_math.cuh: the same threads per group, the same order), rotates it exactly
// as rope_kernel would (rope_math.cuh) in shared memory, writes it back, and a KV head's block also
// stores the head's key and value into the row's cache slot as kv_store_kernel would. So the bits are
// those of rms_norm; rope; kv_store, in a fifth of the launches (with the same rounding into a bf16 cache:
// kv_narrow).
#include <cuda_runtime.h>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/kernels.h"
#include "backend/cuda/kv_layout.cuh"
#include "backend/cuda/norm_math.cuh"
#include "backend/cuda/rope_math.cuh"
#include "backend/cuda/launch.cuh"

namespace specserve::cuda::kernels {

namespace {

template <class KV>
__global__ void qk_norm_rope_kv_store_kernel(HeadPrepArgs a, const KvRow* rows, void* const* ptrs, Geo geo) {
  pdl_begin();
  extern __shared__ float s_head[];  // [head_dim]: the normed head, then rotated
  __shared__ float shared[32];
  // Blocks [0, q_rows * num_heads) are q's heads, row by row; then k's, row by row.
  const int64_t q_blocks = a.q_rows * a.num_heads;
  const bool is_k = blockIdx.x >= q_blocks;
  const int64_t b = is_k ? blockIdx.x - q_blocks : blockIdx.x;
  const int per_row = is_k ? geo.num_kv_heads : a.num_heads;
  const int64_t r = b / per_row;
  const int h = static_cast<int>(b % per_row);
  const int hd = geo.head_dim;
  float* x = is_k ? a.k + r * a.ldk + int64_t{h} * hd : a.q + r * a.ldq + int64_t{h} * hd;
  const int32_t position = is_k || a.q_pos == nullptr ? rows[r].position : a.q_pos[r];

  write_normed(x, is_k ? a.k_norm : a.q_norm, s_head, hd, a.kind, inv_rms(x, hd, a.eps, shared));
  __syncthreads();
  const int half = a.rot_dim / 2;
  for (int i = threadIdx.x; i < half; i += blockDim.x) rope_pair(s_head, i, half, a.inv_freq[i], position);
  __syncthreads();
  for (int i = threadIdx.x; i < hd; i += blockDim.x) x[i] = s_head[i];
  if (!is_k) return;
  const KvRow row = rows[r];
  KV* block = static_cast<KV*>(kv_block_of(row, ptrs));
  const int slot = row.position % kBlockSize;
  KV* k_slot = block + geo.offset(0, h, slot);
  KV* v_slot = block + geo.offset(1, h, slot);
  const float* v = a.v + r * a.ldv + int64_t{h} * hd;
  for (int i = threadIdx.x; i < hd; i += blockDim.x) {
    k_slot[i] = kv_narrow<KV>(s_head[i]);
    v_slot[i] = kv_narrow<KV>(v[i]);
  }
}

}  // namespace

void qk_norm_rope_kv_store(const HeadPrepArgs& a, const KvArgs& kv, cudaStream_t stream) {
  const int64_t blocks = a.q_rows * a.num_heads + kv.R * kv.num_kv_heads;
  if (blocks == 0) return;
  launch_pdl(kv.bf16 ? qk_norm_rope_kv_store_kernel<KvBf16> : qk_norm_rope_kv_store_kernel<float>,
             static_cast<unsigned>(blocks), norm_threads(kv.head_dim), static_cast<size_t>(kv.head_dim) * sizeof(float),
             stream, a, kv.rows, kv.ptrs, geo_of(kv));
  CUDA_CHECK_LAUNCH();
}

}  // namespace specserve::cuda::kernels
