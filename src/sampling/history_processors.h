#pragma once
// The token-level history processors: logit bias, repetition penalty, presence/frequency
// penalties, and masking (min_tokens). Each edits a logits row in place and touches only the ids
// it names, so the cost is proportional to the history's distinct tokens, not to the vocabulary.
// DRY lives in dry.h.
#include <span>
#include <utility>

#include "sampling/sampler_state.h"
#include "sampling/types.h"

namespace specserve::sampling {

// logit[id] += bias (OpenAI logit_bias). Ids outside the row are ignored.
void apply_logit_bias(std::span<float> logits, std::span<const std::pair<TokenId, float>> bias);

// Hugging Face RepetitionPenaltyLogitsProcessor: for every id in `seen` (once, however often it
// occurred), logit / penalty if logit > 0, else logit * penalty — so a penalty > 1 always makes the
// token less likely, whatever the logit's sign.
void apply_repetition_penalty(std::span<float> logits, const TokenCounts& seen, float penalty);

// OpenAI presence/frequency penalties over the generated tokens:
// logit[j] -= count[j] * frequency + [count[j] > 0] * presence.
void apply_presence_frequency(std::span<float> logits, const TokenCounts& generated, float presence, float frequency);

// logit[id] = −inf for every id (min_tokens: the stop ids before enough tokens were generated).
void mask_ids(std::span<float> logits, std::span<const TokenId> ids);

}  // namespace specserve::sampling
