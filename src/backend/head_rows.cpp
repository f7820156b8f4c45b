#include "backend/head_rows.h"

#include "core/error.h"

namespace specserve {

TensorView head_slice(const TensorView& x, int heads, int head_dim, int64_t offset) {
  SS_CHECK(
      x.dtype == DType::F32 && x.ndim() == 2 && x.strides[1] == 1 && heads > 0 && head_dim > 0 && x.dim(1) % heads == 0,
      "head_slice: {} is not f32 rows of {} heads", x.describe(), heads);
  const int64_t block = x.dim(1) / heads;
  SS_CHECK(offset >= 0 && offset + head_dim <= block, "head_slice: {} floats at {} outside heads of {}", head_dim,
           offset, block);
  TensorView v = x;
  v.data = x.as<float>() + offset;
  v.shape = Shape{x.dim(0), heads, head_dim};
  v.strides = {};
  v.strides[0] = x.strides[0];
  v.strides[1] = block;
  v.strides[2] = 1;
  return v;
}

HeadRows check_head_rows(const char* op, const TensorView& v, int heads, int head_dim) {
  SS_CHECK(v.dtype == DType::F32 && heads > 0 && head_dim > 0, "{}: f32 heads of {} expected, got {}", op, head_dim,
           v.describe());
  HeadRows h;
  h.heads = heads;
  h.head_dim = head_dim;
  if (v.ndim() == 2) {
    SS_CHECK(v.dim(1) == int64_t{heads} * head_dim && v.strides[1] == 1,
             "{}: {} is not rows of {} heads of {} with unit column stride", op, v.describe(), heads, head_dim);
    h.rows = v.dim(0);
    h.ld = v.strides[0];
    h.head_stride = head_dim;
    return h;
  }
  SS_CHECK(v.ndim() == 3 && v.dim(1) == heads && v.dim(2) == head_dim && v.strides[2] == 1,
           "{}: {} is not [rows, {}, {}] with unit element stride", op, v.describe(), heads, head_dim);
  SS_CHECK(v.strides[1] >= head_dim && (v.dim(0) <= 1 || v.strides[0] >= int64_t{heads} * v.strides[1]),
           "{}: {}'s heads overlap (strides {}, {})", op, v.describe(), v.strides[0], v.strides[1]);
  h.rows = v.dim(0);
  h.ld = v.strides[0];
  h.head_stride = v.strides[1];
  return h;
}

}  // namespace specserve
