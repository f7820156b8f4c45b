#include "backend/op_checks.h"

#include <cmath>

#include "core/error.h"

namespace specserve {

void check_matmul_operands(const TensorView& x, const TensorView& w, const TensorView& y) {
  SS_CHECK(x.dtype == DType::F32 && y.dtype == DType::F32, "matmul: activations must be F32 (x {}, y {})", x.describe(),
           y.describe());
  SS_CHECK(w.dtype == DType::F32 || w.dtype == DType::BF16 || (w.dtype == DType::F8_E4M3 && w.block_scaled()),
           "matmul: weight dtype {} unsupported", w.describe());
  SS_CHECK(w.block_scaled() == (w.dtype == DType::F8_E4M3), "matmul: weight {} has scales but is not F8_E4M3",
           w.describe());
  SS_CHECK(x.ndim() == 2 && w.ndim() == 2 && y.ndim() == 2, "matmul: 2-D operands expected ({}, {}, {})", x.describe(),
           w.describe(), y.describe());
  SS_CHECK(x.dim(1) == w.dim(1) && y.dim(0) == x.dim(0) && y.dim(1) == w.dim(0),
           "matmul: shapes {} x {}^T -> {} do not agree", x.describe(), w.describe(), y.describe());
  SS_CHECK(x.strides[1] == 1 && w.strides[1] == 1 && y.strides[1] == 1, "matmul: rows must be contiguous");
}

void check_rope_operands(const TensorView& x, int heads, int head_dim, int rot_dim, size_t positions) {
  SS_CHECK(x.dtype == DType::F32 && x.ndim() == 2 && x.strides[1] == 1, "rope: f32 rows expected, got {}",
           x.describe());
  SS_CHECK(x.dim(1) == int64_t{heads} * head_dim, "rope: {} is not {} heads of {}", x.describe(), heads, head_dim);
  SS_CHECK(rot_dim > 0 && rot_dim % 2 == 0 && rot_dim <= head_dim, "rope: bad rotary dim {} (head_dim {})", rot_dim,
           head_dim);
  SS_CHECK(static_cast<int64_t>(positions) == x.dim(0), "rope: {} positions for {} rows", positions, x.dim(0));
}

int check_qk_heads(const TensorView& q, int head_dim) {
  SS_CHECK(head_dim > 0 && q.ndim() == 2 && q.dim(1) % head_dim == 0,
           "qk_norm_rope_kv_store: q {} is not whole heads of {}", q.describe(), head_dim);
  return static_cast<int>(q.dim(1) / head_dim);
}

std::vector<float> rope_inv_freq(double theta, int rot_dim) {
  const int half = rot_dim / 2;
  std::vector<float> inv_freq(half);
  for (int i = 0; i < half; ++i) {
    float e = static_cast<float>(2 * i) / static_cast<float>(rot_dim);
    inv_freq[i] = 1.0f / std::pow(static_cast<float>(theta), e);
  }
  return inv_freq;
}

void check_causal_conv_operands(const TensorView& x, const TensorView& window, const TensorView& w,
                                const TensorView& out) {
  SS_CHECK(x.dtype == DType::F32 && window.dtype == DType::F32 && w.dtype == DType::F32 && out.dtype == DType::F32,
           "causal_conv_silu: f32 operands expected");
  SS_CHECK(x.ndim() == 2 && w.ndim() == 2 && window.ndim() == 2 && out.ndim() == 2, "causal_conv_silu: 2-D operands");
  const int64_t n = x.dim(0), C = x.dim(1), Kc = w.dim(1);
  SS_CHECK(w.dim(0) == C && window.dim(0) == Kc - 1 && window.dim(1) == C && out.dim(0) == n && out.dim(1) == C,
           "causal_conv_silu: x {} window {} w {} out {} disagree", x.describe(), window.describe(), w.describe(),
           out.describe());
  SS_CHECK(x.strides[1] == 1 && out.strides[1] == 1 && w.is_contiguous() && window.is_contiguous(),
           "causal_conv_silu: contiguous rows expected");
}

void check_argmax_operands(const TensorView& x, int64_t n, size_t out) {
  SS_CHECK(x.dtype == DType::F32 && x.ndim() == 2 && x.strides[1] == 1, "argmax: x {} must be f32 [rows, columns]",
           x.describe());
  SS_CHECK(n >= 1 && n <= x.dim(1), "argmax: {} columns of rows {} wide", n, x.dim(1));
  SS_CHECK(static_cast<int64_t>(out) == x.dim(0), "argmax: {} outputs for {} rows", out, x.dim(0));
}

}  // namespace specserve
