#pragma once
// Where a (layer, K|V, kv head, slot) lives inside a KV block on the device (KvGeometry of
// backend/ops.h, for the kernel arguments of kernels.h): shared by the KV store, attention and the
// fused head preparation. A block's elements are f32 or bf16 (KvArgs::bf16); kernels take the element
// type KV (float, or KvBf16: a bf16's bits) as a template parameter, store through kv_narrow (bf16:
// __float2bfloat16_rn, round to nearest even as the CPU's convert_from_f32) and read through kv_widen
// (exact), so their arithmetic is that of an f32 cache holding the rounded values.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/kernels.h"

namespace specserve::cuda::kernels {

constexpr int kBlockSize = 16;  // == kKvBlockSize (backend/ops.h)

using KvBf16 = uint16_t;  // a bf16 cache's element: the bf16's bits

__device__ __forceinline__ float kv_widen(float x) { return x; }
__device__ __forceinline__ float kv_widen(KvBf16 x) { return __uint_as_float(uint32_t{x} << 16); }
template <class KV>
__device__ __forceinline__ KV kv_narrow(float x);
template <>
__device__ __forceinline__ float kv_narrow<float>(float x) {
  return x;
}
template <>
__device__ __forceinline__ KvBf16 kv_narrow<KvBf16>(float x) {
  return __bfloat16_as_ushort(__float2bfloat16_rn(x));
}

// Offsets in elements of the block's type.
struct Geo {
  int64_t layer_base;  // offset of the layer inside a block
  int64_t head_elems;  // kBlockSize * head_dim
  int num_kv_heads;
  int head_dim;
  __device__ int64_t offset(int which, int head, int slot) const {
    return layer_base + (int64_t{which} * num_kv_heads + head) * head_elems + int64_t{slot} * head_dim;
  }
};

inline Geo geo_of(const KvArgs& kv) {
  Geo g;
  g.head_elems = int64_t{kBlockSize} * kv.head_dim;
  g.layer_base = int64_t{kv.layer} * 2 * kv.num_kv_heads * g.head_elems;
  g.num_kv_heads = kv.num_kv_heads;
  g.head_dim = kv.head_dim;
  return g;
}

// The KV block that holds a row's position (its slot is position % kBlockSize).
__device__ __forceinline__ void* kv_block_of(const KvRow& row, void* const* ptrs) {
  return ptrs[row.table + row.position / kBlockSize];
}

}  // namespace specserve::cuda::kernels
