#pragma once
// Heads read in place inside wider rows. Qwen3.5's q_proj output holds, per head, [query | gate]
// (2 * head_dim floats): the queries are the heads at offset 0 with a head stride of 2 * head_dim and
// the gates those at offset head_dim. Ops that take such a view (qk_norm_rope_kv_store_from,
// mul_sigmoid) read the heads where they are instead of after a strided copy.
#include <cstdint>

#include "core/tensor.h"

namespace specserve {

// A view's heads: head h of row r starts at data + r * ld + h * head_stride (floats), its head_dim
// elements contiguous.
struct HeadRows {
  int64_t rows = 0;
  int heads = 0;
  int head_dim = 0;
  int64_t ld = 0;
  int64_t head_stride = 0;
};

// The heads [rows, heads, head_dim] at `offset` floats into each head's block of x: x is f32 rows
// [R, heads * block] with contiguous rows, block = x.dim(1) / heads, offset + head_dim <= block.
TensorView head_slice(const TensorView& x, int heads, int head_dim, int64_t offset);

// Accepts f32 `v` as 2-D rows [rows, heads * head_dim] (unit column stride: head stride head_dim) or a
// 3-D [rows, heads, head_dim] view with unit element stride (head_slice); throws naming `op` otherwise.
HeadRows check_head_rows(const char* op, const TensorView& v, int heads, int head_dim);

}  // namespace specserve
