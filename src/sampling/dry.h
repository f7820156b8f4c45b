#pragma once
// DRY ("Don't Repeat Yourself") repetition penalty with llama.cpp's semantics (sampler by p-e-w,
// koboldcpp implementation by pi6am; llama.cpp `llama_sampler_dry`), re-derived here:
//
// Let w be the last N tokens of the history (N = penalty_last_n, or the whole history for −1).
// For every earlier position j of w, let len(j) be the length of the longest run of tokens ending
// at j that equals a suffix of w (the text that currently ends the history). Emitting w[j+1] next
// would extend that repeat to len(j) + 1 tokens, so when len(j) ≥ allowed_length token w[j+1] is
// penalised by multiplier · base^(len − allowed_length) (len: its largest over all j; the exponent
// is clamped so the power stays finite in f32). Nothing happens if N ≤ allowed_length.
//
// Sequence breakers cut repeats: scanning back from the end, the most recent complete breaker
// occurrence limits every len(j) to the number of tokens after that breaker; if that leaves fewer
// than allowed_length tokens, no penalty is applied at all. A single-token breaker is never itself
// penalised.
#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "sampling/sampling_params.h"
#include "sampling/types.h"

namespace specserve::sampling {

// Breaker token sequences indexed by their first ("head") token.
class DryBreakers {
 public:
  // Tails longer than this are cut (as llama.cpp does) so the breaker scan stays linear.
  static constexpr size_t kMaxTailLength = 20;

  DryBreakers() = default;
  explicit DryBreakers(const std::vector<std::vector<TokenId>>& sequences);

  // The tails (the sequence minus its head) of every breaker that starts with `head`.
  const std::vector<std::vector<TokenId>>* tails(TokenId head) const;
  // Whether `id` alone is a breaker (tail empty): such tokens are never penalised.
  bool is_single_token_breaker(TokenId id) const;

 private:
  std::unordered_map<TokenId, std::vector<std::vector<TokenId>>> by_head_;
};

// Scratch reused across calls so a verify step's rows do not allocate.
struct DryScratch {
  std::vector<int32_t> z;
  std::unordered_map<TokenId, int32_t> longest;
};

// Subtracts the DRY penalty from `logits` given the full history (prompt + output + provisional).
void apply_dry(std::span<float> logits, std::span<const TokenId> history, const DryParams& params,
               const DryBreakers& breakers, DryScratch& scratch);

}  // namespace specserve::sampling
