#pragma once
// The CPU kernels behind cpu_ops() (backend/ops.h documents each op). One file per op family:
// matmul(.cpp, _avx512.cpp), norm.cpp, rope.cpp, elementwise.cpp, argmax.cpp, attention.cpp, gated_deltanet.cpp.
// Non-matmul kernels use the AVX2 baseline only, so their bits are the same on every machine.
#include <span>

#include "backend/ops.h"

namespace specserve::cpu {

void matmul(const TensorView& x, const TensorView& w, const TensorView& y);
void matmul_multi(const TensorView& x, std::span<const TensorView> ws, std::span<const TensorView> ys);
void embedding(const TensorView& table, std::span<const int32_t> ids, const TensorView& out);
void rms_norm(const TensorView& x, const TensorView& w, NormKind kind, float eps, const TensorView& y);
void rms_norm_gated(const TensorView& x, const TensorView& z, const TensorView& w, float eps, const TensorView& y);
void rope(const TensorView& x, int heads, int head_dim, int rot_dim, double theta, std::span<const int32_t> positions);
void swiglu(const TensorView& gate, const TensorView& up, const TensorView& out);
void add(const TensorView& x, const TensorView& y);
void mul_sigmoid(const TensorView& x, const TensorView& gate);
// q_in's heads (2-D rows or a head_rows.h view) into q_out [R, heads * head_dim] (rows contiguous).
void copy_heads(const TensorView& q_in, const TensorView& q_out, int head_dim);
void argmax(const TensorView& x, int64_t n, std::span<int32_t> out);
void kv_store(const TensorView& k, const TensorView& v, const KvGeometry& geo, int layer,
              std::span<const AttentionRow> rows);
void attention(const TensorView& q, const KvGeometry& geo, int layer, std::span<const AttentionRow> rows, int num_heads,
               float scale, const TensorView& out);
void causal_conv_silu(const TensorView& x, const TensorView& window, const TensorView& w, const TensorView& out);
void gdn_prepare(const TensorView& qkv, const TensorView& a, const TensorView& b, const TensorView& a_log,
                 const TensorView& dt_bias, const GdnDims& dims);
void gated_delta_rule(const TensorView& qkv, const TensorView& g, const TensorView& beta,
                      std::span<const GdnSpan> spans, const GdnDims& dims, const TensorView& out);

// Scalar helpers with the exact formulas the kernels use (also used by tests' references).
float silu(float x);
float sigmoid(float x);
float softplus(float x);

}  // namespace specserve::cpu
