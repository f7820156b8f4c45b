#pragma once
// Qwen's block-128 FP8 weight format (docs/MODELS.md §6), as transformers' FineGrainedFP8Config saves it:
// a quantised Linear stores `X.weight` as F8_E4M3 [out, in] and `X.weight_scale_inv` as F32, F16 or BF16
// [ceil(out/128), ceil(in/128)], and despite its name the scale is the multiplier:
//   W[r][c] = e4m3(weight[r][c]) × scale[r / 128][c / 128].
// The last block of a row or column is ragged when out or in is not a multiple of 128.
#include <string>
#include <string_view>

#include "core/tensor.h"

namespace specserve {

// (kFp8BlockSize, the rows and columns of weight one scale covers, is core/tensor.h's.)

// "model.layers.0.mlp.up_proj.weight" -> "model.layers.0.mlp.up_proj.weight_scale_inv".
std::string fp8_scale_name(std::string_view weight_name);

// The scale grid of an [out, in] weight: [ceil(out/128), ceil(in/128)].
Shape fp8_scale_shape(const Shape& weight_shape);

// The dtypes a scale may have: F32, F16, BF16.
bool is_fp8_scale_dtype(DType t);

// (e4m3_f32_table, the f32 value of every e4m3 code, is core/dtype.h's.)

// Throws Error naming `name` and the first offending element when the weight (a contiguous 2-D F8_E4M3
// tensor) holds a NaN code (0x7F or 0xFF). They are no weight value: a quantiser saturates at ±448 and never
// writes them, the CPU would compute NaN with them and the CUDA fp8 kernel ±480 × scale, so a checkpoint
// holding them is refused at load rather than served with an undefined result. One pass over the codes,
// 8 a step, on the thread pool.
void check_fp8_codes(const TensorView& weight, std::string_view name = "weight");

// The dequantised weight in `out` (F32, F16 or BF16), contiguous [out, in]. Each element is the e4m3 value
// (exact in f32) times its block's scale (exact in f32) rounded once to f32 — the product is exact, so
// no rounding happens at all, for F16 and BF16 scales (4 + 11 significant bits fit in f32's 24) unless it
// falls below f32's normal range — and then, for F16 / BF16 output, rounded to nearest even into `out`.
// Throws Error naming `name` when the weight is not a 2-D F8_E4M3 tensor, holds a NaN code (check_fp8_codes),
// or the scale's shape or dtype is wrong.
Tensor dequantize_fp8_blocks(const TensorView& weight, const TensorView& scale, DType out,
                             std::string_view name = "weight");

}  // namespace specserve
