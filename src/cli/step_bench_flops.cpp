#include "cli/step_bench_flops.h"

#include "backend/ops.h"

namespace specserve::cli {

namespace {

// K and V values of one position over every full-attention layer.
double kv_values_per_position(const ModelConfig& c) {
  return 2.0 * c.num_attention_layers() * c.num_kv_heads * c.head_dim;
}

}  // namespace

double kv_element_bytes(const TargetModel& target) {
  const double values = kv_values_per_position(target.config()) * kKvBlockSize;
  return values > 0 ? static_cast<double>(target.kv_block_bytes()) / values : 0.0;
}

double kv_read_bytes(const TargetModel& target, int64_t positions) {
  return kv_values_per_position(target.config()) * static_cast<double>(positions) * kv_element_bytes(target);
}

double prefill_matmul_parameters(const TargetModel& target) {
  const double element = static_cast<double>(dtype_size(target.weight_dtype()));
  const double lm_head = static_cast<double>(target.vocab_size()) * static_cast<double>(target.hidden_size()) * element;
  return (static_cast<double>(target.dequantised_step_weight_bytes()) - lm_head) / element;
}

double prefill_attention_flops(const TargetModel& target, int64_t tokens) {
  const ModelConfig& c = target.config();
  const double n = static_cast<double>(tokens);
  return 4.0 * c.num_attention_layers() * c.num_heads * c.head_dim * n * n / 2.0;
}

}  // namespace specserve::cli
