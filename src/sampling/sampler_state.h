#pragma once
// The history a request's sampling depends on: prompt ids, output ids, and — during a verify step —
// the provisional draft ids of that step.
//
// Verify rows are K consecutive positions: row i must see history + drafts[0..i) (docs/DFLASH.md §6.4).
// Instead of rebuilding penalty counts per row, the verifier pushes each draft after picking its
// row and truncates back to the committed length afterwards; push/pop keep the counts exact (they
// are integers), so the state at row i is identical — not merely equal in value — to the state
// plain decoding has at that position. The state is a plain value: copying it is a clone.
#include <cstddef>
#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "sampling/types.h"

namespace specserve::sampling {

// Occurrence counts of token ids; an id is present only while its count is > 0.
using TokenCounts = std::unordered_map<TokenId, int32_t>;

class SamplerState {
 public:
  // `repetition_window`: the repetition penalty sees only the last N tokens of prompt + output
  // (0 = all of them). Sampler::make_state passes the request's value.
  explicit SamplerState(std::span<const TokenId> prompt, int repetition_window = 0);

  // Appends one token (an emitted token, or a provisional draft during verify).
  void push(TokenId token);
  // Removes the last token; never below the prompt.
  void pop();
  // Pops back to `length` tokens (prompt + output); `length` must be in [prompt_length, length()].
  void truncate(size_t length);

  // The number of tokens so far, which is also the absolute position of the token to be chosen
  // next — the position that keys its random number.
  size_t length() const { return tokens_.size(); }
  size_t prompt_length() const { return prompt_length_; }
  size_t generated() const { return tokens_.size() - prompt_length_; }
  std::span<const TokenId> tokens() const { return tokens_; }

  // Counts over the repetition window of prompt + output (repetition penalty).
  const TokenCounts& window_counts() const { return window_counts_; }
  // Counts over the output only (presence / frequency penalties, OpenAI semantics).
  const TokenCounts& generated_counts() const { return generated_counts_; }

 private:
  static void add(TokenCounts& counts, TokenId id);
  static void remove(TokenCounts& counts, TokenId id);
  bool windowed() const { return window_ > 0; }

  std::vector<TokenId> tokens_;
  size_t prompt_length_ = 0;
  size_t window_ = 0;
  TokenCounts window_counts_;
  TokenCounts generated_counts_;
};

}  // namespace specserve::sampling
