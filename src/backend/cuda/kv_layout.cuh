#pragma once
// Where a (layer, K|V, kv head, slot) lives inside a KV block on the device (KvGeometry of
// backend/ops.h, for the kernel arguments of kernels.h): shared by the KV store, attention and the
// fused head preparation.
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/kernels.h"

namespace specserve::cuda::kernels {

constexpr int kBlockSize = 16;  // == kKvBlockSize (backend/ops.h)

struct Geo {
  int64_t layer_base;   // offset of the layer inside a block
  int64_t head_floats;  // kBlockSize * head_dim
  int num_kv_heads;
  int head_dim;
  __device__ int64_t offset(int which, int head, int slot) const {
    return layer_base + (int64_t{which} * num_kv_heads + head) * head_floats + int64_t{slot} * head_dim;
  }
};

inline Geo geo_of(const KvArgs& kv) {
  Geo g;
  g.head_floats = int64_t{kBlockSize} * kv.head_dim;
  g.layer_base = int64_t{kv.layer} * 2 * kv.num_kv_heads * g.head_floats;
  g.num_kv_heads = kv.num_kv_heads;
  g.head_dim = kv.head_dim;
  return g;
}

// The KV block that holds a row's position (its slot is position % kBlockSize).
__device__ __forceinline__ float* kv_block_of(const KvRow& row, float* const* ptrs) {
  return ptrs[row.table + row.position / kBlockSize];
}

}  // namespace specserve::cuda::kernels
