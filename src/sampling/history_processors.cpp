#include "sampling/history_processors.h"

namespace specserve::sampling {
namespace {

bool in_row(std::span<float> logits, TokenId id) { return id >= 0 && size_t(id) < logits.size(); }

}  // namespace

void apply_logit_bias(std::span<float> logits, std::span<const std::pair<TokenId, float>> bias) {
  for (const auto& [id, b] : bias) {
    if (in_row(logits, id)) logits[id] += b;
  }
}

void apply_repetition_penalty(std::span<float> logits, const TokenCounts& seen, float penalty) {
  if (penalty == 1.0f) return;
  // Each id is touched once and independently, so the map's iteration order cannot matter.
  for (const auto& [id, count] : seen) {
    if (!in_row(logits, id)) continue;
    float& l = logits[id];
    l = l < 0.0f ? l * penalty : l / penalty;
  }
}

void apply_presence_frequency(std::span<float> logits, const TokenCounts& generated, float presence, float frequency) {
  if (presence == 0.0f && frequency == 0.0f) return;
  for (const auto& [id, count] : generated) {
    if (!in_row(logits, id)) continue;
    logits[id] -= static_cast<float>(count) * frequency + presence;  // count > 0 for every entry
  }
}

void mask_ids(std::span<float> logits, std::span<const TokenId> ids) {
  for (TokenId id : ids) {
    if (in_row(logits, id)) logits[id] = kNegInf;
  }
}

}  // namespace specserve::sampling
