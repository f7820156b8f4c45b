#pragma once
// Stop conditions for one request: EOS ids, stop token ids, stop strings (matched across token
// boundaries, never emitted), max_tokens, ignore_eos, min_tokens.
//
// It consumes the tokens a step emits — one for plain decoding, up to γ + 1 for a speculative step —
// in order, with their decoded text pieces, and says how many of them belong to the output: a stop
// inside an accepted run cuts the run there, and the tokens after the cut are never emitted
// (docs/DFLASH.md §4 step 8). It also produces the text that is safe to stream now: everything except a
// tail that could still become a stop string (or is an incomplete UTF-8 character).
//
// Per token, in order: counted as generated; while fewer than min_tokens have been generated no
// stop applies (the sampler masks the stop ids for the same reason); a stop id (stop_token_ids,
// EOS unless ignore_eos) ends the output — the token counts, its text is not emitted; otherwise its
// text is appended and a stop string that completes ends the output, the text cut where the stop
// string begins; finally the max_tokens-th token ends it with reason "length".
#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "sampling/sampling_params.h"
#include "sampling/stop_strings.h"
#include "sampling/types.h"

namespace specserve::sampling {

enum class FinishReason : uint8_t { kNone, kStop, kLength };

// "stop" / "length" / "" — the OpenAI finish_reason values.
const char* finish_reason_name(FinishReason r);

struct StopStep {
  size_t tokens_kept = 0;  // how many of the consumed tokens belong to the output (a prefix)
  FinishReason reason = FinishReason::kNone;
  std::string text;                        // newly safe text to stream (concatenated over steps: the output text)
  std::optional<std::string> stop_string;  // the stop string that ended the output
  std::optional<TokenId> stop_token;       // the stop id that ended the output

  bool finished() const { return reason != FinishReason::kNone; }
};

class StopChecker {
 public:
  explicit StopChecker(const StopParams& params);

  // tokens[i] decoded to pieces[i]. Throws if called after the output finished.
  StopStep consume(std::span<const TokenId> tokens, std::span<const std::string> pieces);

  bool finished() const { return reason_ != FinishReason::kNone; }
  FinishReason reason() const { return reason_; }
  size_t generated() const { return generated_; }
  // All output text so far, including a held-back tail not yet streamed.
  const std::string& text() const { return text_; }

 private:
  bool is_stop_id(TokenId id) const;

  std::vector<TokenId> stop_ids_;  // sorted
  StopStringMatcher matcher_;
  std::optional<int64_t> max_tokens_;
  size_t min_tokens_ = 0;
  size_t generated_ = 0;
  std::string text_;
  size_t streamed_ = 0;  // bytes of text_ already handed out
  FinishReason reason_ = FinishReason::kNone;
};

}  // namespace specserve::sampling
