#pragma once
// Operand checks and shared constants of the ops that every backend (cpu/, cuda/) applies the same
// way: one definition, so the backends cannot drift apart in what they accept or compute.
#include <cstddef>
#include <vector>

#include "core/tensor.h"

namespace specserve {

// y[M, N] = x[M, K] · w[N, K]ᵀ: f32 activations, f32/bf16 weights or block-scaled fp8 ones (F8_E4M3 with
// TensorView::scales), 2-D, shapes agree, rows contiguous.
void check_matmul_operands(const TensorView& x, const TensorView& w, const TensorView& y);

// RoPE on x [R, heads * head_dim] with `positions` entries, rot_dim even and <= head_dim.
void check_rope_operands(const TensorView& x, int heads, int head_dim, int rot_dim, size_t positions);

// The rotary inverse frequencies theta^(-2i/rot_dim), i < rot_dim / 2, computed in f32 exactly as
// every backend must (the GPU uploads these, so CPU and GPU rotate by the same angles).
std::vector<float> rope_inv_freq(double theta, int rot_dim);

// qk_norm_rope_kv_store: q is 2-D rows of whole heads of head_dim; returns the query heads.
int check_qk_heads(const TensorView& q, int head_dim);

// Causal conv: x [n, C], window [Kc-1, C], w [C, Kc], out [n, C], all f32, rows contiguous.
void check_causal_conv_operands(const TensorView& x, const TensorView& window, const TensorView& w,
                                const TensorView& out);

// argmax: x f32 [R, >= n] with unit column stride, 1 <= n, `out` entries == R.
void check_argmax_operands(const TensorView& x, int64_t n, size_t out);

}  // namespace specserve
