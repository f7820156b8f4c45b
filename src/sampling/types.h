#pragma once
// Vocabulary-level types shared by every part of the sampling pipeline.
#include <cstdint>
#include <limits>

namespace specserve::sampling {

// A token id: an index into the model's vocabulary rows (the logits row).
using TokenId = int32_t;

// A masked logit: the value no token can be drawn at.
inline constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// The logits row's shape. Checkpoints pad the lm_head (Qwen3: 151,936 rows, 151,669 real tokens);
// ids at or above `real_vocab` are not tokens and must never be picked (docs/MODELS.md §2.3), so
// every pipeline entry point masks them before anything else.
struct VocabBounds {
  int64_t vocab_size = 0;  // V, the length of a logits row
  int64_t real_vocab = 0;  // ids in [real_vocab, V) are padding; 0 means "all V are real"

  int64_t real() const { return real_vocab > 0 && real_vocab < vocab_size ? real_vocab : vocab_size; }
};

}  // namespace specserve::sampling
