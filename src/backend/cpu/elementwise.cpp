// Elementwise ops and the embedding gather. Plain loops: each element is computed on its own (the
// build uses -ffp-contract=off, so vectorised and scalar iterations round identically).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "backend/cpu/cpu_ops.h"
#include "backend/head_rows.h"
#include "backend/cpu/row_parallel.h"
#include "core/error.h"

namespace specserve::cpu {

float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }
float silu(float x) { return x / (1.0f + std::exp(-x)); }
// torch.nn.functional.softplus (beta 1, threshold 20).
float softplus(float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); }

namespace {
void check_same(const char* op, const TensorView& a, const TensorView& b) {
  SS_CHECK(a.dtype == DType::F32 && b.dtype == DType::F32 && a.is_contiguous() && b.is_contiguous() &&
               a.numel() == b.numel(),
           "{}: contiguous f32 operands of equal size expected ({}, {})", op, a.describe(), b.describe());
}
}  // namespace

void swiglu(const TensorView& gate, const TensorView& up, const TensorView& out) {
  check_same("swiglu", gate, up);
  check_same("swiglu", gate, out);
  const float* g = gate.as<const float>();
  const float* u = up.as<const float>();
  float* o = out.as<float>();
  for_rows(gate.numel() / 256 + 1, 256 * 8, [&](int64_t b0, int64_t b1) {
    int64_t e = std::min(gate.numel(), b1 * 256);
    for (int64_t i = b0 * 256; i < e; ++i) o[i] = silu(g[i]) * u[i];
  });
}

void add(const TensorView& x, const TensorView& y) {
  check_same("add", x, y);
  float* a = x.as<float>();
  const float* b = y.as<const float>();
  for (int64_t i = 0, n = x.numel(); i < n; ++i) a[i] += b[i];
}

void mul_sigmoid(const TensorView& x, const TensorView& gate) {
  if (gate.ndim() == 3) {  // heads read in place (head_rows.h)
    SS_CHECK(x.dtype == DType::F32 && x.ndim() == 2 && x.is_contiguous(),
             "mul_sigmoid: x {} must be contiguous f32 rows for the gate {}", x.describe(), gate.describe());
    const HeadRows g =
        check_head_rows("mul_sigmoid", gate, static_cast<int>(gate.dim(1)), static_cast<int>(gate.dim(2)));
    SS_CHECK(x.dim(0) == g.rows && x.dim(1) == int64_t{g.heads} * g.head_dim, "mul_sigmoid: x {} vs gate {}",
             x.describe(), gate.describe());
    float* a = x.as<float>();
    for (int64_t r = 0; r < g.rows; ++r)
      for (int h = 0; h < g.heads; ++h) {
        const float* gh = gate.as<const float>() + r * g.ld + h * g.head_stride;
        float* ah = a + (r * g.heads + h) * g.head_dim;
        for (int i = 0; i < g.head_dim; ++i) ah[i] = ah[i] * sigmoid(gh[i]);
      }
    return;
  }
  check_same("mul_sigmoid", x, gate);
  float* a = x.as<float>();
  const float* g = gate.as<const float>();
  for (int64_t i = 0, n = x.numel(); i < n; ++i) a[i] = a[i] * sigmoid(g[i]);
}

void copy_heads(const TensorView& q_in, const TensorView& q_out, int head_dim) {
  SS_CHECK(q_out.dtype == DType::F32 && q_out.ndim() == 2 && q_out.strides[1] == 1 && head_dim > 0 &&
               q_out.dim(1) % head_dim == 0,
           "qk_norm_rope_kv_store: q_out {} is not f32 rows of heads of {}", q_out.describe(), head_dim);
  const int heads = static_cast<int>(q_out.dim(1) / head_dim);
  const HeadRows in = check_head_rows("qk_norm_rope_kv_store", q_in, heads, head_dim);
  SS_CHECK(in.rows == q_out.dim(0), "qk_norm_rope_kv_store: q_in {} for q_out {}", q_in.describe(), q_out.describe());
  if (q_in.data == q_out.data && in.ld == q_out.strides[0] && in.head_stride == head_dim) return;
  for (int64_t r = 0; r < in.rows; ++r)
    for (int h = 0; h < heads; ++h)
      std::memmove(q_out.as<float>() + r * q_out.strides[0] + int64_t{h} * head_dim,
                   q_in.as<const float>() + r * in.ld + h * in.head_stride, static_cast<size_t>(head_dim) * 4);
}

void embedding(const TensorView& table, std::span<const int32_t> ids, const TensorView& out) {
  SS_CHECK(table.ndim() == 2 && table.is_contiguous() && (table.dtype == DType::F32 || table.dtype == DType::BF16),
           "embedding: table {} must be a contiguous f32/bf16 matrix", table.describe());
  SS_CHECK(out.dtype == DType::F32 && out.ndim() == 2 && out.is_contiguous() && out.dim(1) == table.dim(1) &&
               out.dim(0) == static_cast<int64_t>(ids.size()),
           "embedding: output {} for {} ids of width {}", out.describe(), ids.size(), table.dim(1));
  const int64_t h = table.dim(1);
  for (size_t r = 0; r < ids.size(); ++r) {
    SS_CHECK(ids[r] >= 0 && ids[r] < table.dim(0), "token id {} outside the vocabulary [0, {})", ids[r], table.dim(0));
    float* dst = out.as<float>() + static_cast<int64_t>(r) * h;
    if (table.dtype == DType::F32) {
      std::memcpy(dst, table.as<const float>() + int64_t{ids[r]} * h, static_cast<size_t>(h) * 4);
    } else {
      convert_to_f32(table.as<const uint16_t>() + int64_t{ids[r]} * h, DType::BF16, dst, static_cast<size_t>(h));
    }
  }
}

}  // namespace specserve::cpu
