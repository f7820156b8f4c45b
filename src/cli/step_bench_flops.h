#pragma once
// The byte and FLOP counts `specserve bench steps` divides its times by (cli/step_bench.h). Counts,
// not measurements: each names what it includes.
#include <cstddef>
#include <cstdint>

#include "model/target_model.h"

namespace specserve::cli {

// Bytes of one stored K or V element of the target's cache, from the model's own block size
// (kv_block_bytes() over the values a block holds): 4 while the cache is f32, and it follows the
// cache's dtype without a change here.
double kv_element_bytes(const TargetModel& target);

// The K and V bytes one decode row reads at `positions`: 2 × attention layers × kv_heads × head_dim ×
// positions × kv_element_bytes (the full-attention layers only; DeltaNet state is counted apart).
double kv_read_bytes(const TargetModel& target, int64_t positions);

// ≈ the weights a prefill token multiplies by: the step's weight bytes less the lm_head (a prefill
// computes it for its last row only), over the weight dtype's size (kept fp8 weights counted as their
// dequantised matrices, TargetModel::dequantised_step_weight_bytes). Norm vectors and the DeltaNet's
// small per-head tensors are included: under 0.1 % of a real shape.
double prefill_matmul_parameters(const TargetModel& target);

// Causal attention of an n-token prompt: 4 × attention layers × heads × head_dim × n² / 2 (Q·Kᵀ and
// P·V, 2 FLOPs a multiply-add, half the square under the causal mask). The DeltaNet layers' chunked
// form is not counted.
double prefill_attention_flops(const TargetModel& target, int64_t tokens);

}  // namespace specserve::cli
