#include "sampling/stop_checker.h"

#include <algorithm>

#include "core/error.h"

namespace specserve::sampling {

const char* finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::kStop: return "stop";
    case FinishReason::kLength: return "length";
    default: return "";
  }
}

StopChecker::StopChecker(const StopParams& params)
    : stop_ids_(params.stopping_ids()),
      matcher_(params.stop),
      max_tokens_(params.max_tokens),
      min_tokens_(static_cast<size_t>(std::max(params.min_tokens, 0))) {}

bool StopChecker::is_stop_id(TokenId id) const { return std::binary_search(stop_ids_.begin(), stop_ids_.end(), id); }

StopStep StopChecker::consume(std::span<const TokenId> tokens, std::span<const std::string> pieces) {
  SS_CHECK(!finished(), "stop checker: tokens consumed after the output finished");
  SS_CHECK(tokens.size() == pieces.size(), "stop checker: {} tokens but {} text pieces", tokens.size(), pieces.size());
  StopStep step;
  for (size_t i = 0; i < tokens.size() && !finished(); ++i) {
    ++generated_;
    step.tokens_kept = i + 1;
    const bool stops_apply = generated_ >= min_tokens_;
    if (stops_apply && is_stop_id(tokens[i])) {
      reason_ = FinishReason::kStop;
      step.stop_token = tokens[i];
      break;
    }
    const size_t old_size = text_.size();
    text_ += pieces[i];
    if (stops_apply && !matcher_.empty()) {
      if (auto m = matcher_.find_new(text_, old_size)) {
        // Held-back text is never streamed, so the match cannot begin inside what was sent.
        SS_DEBUG_CHECK(m->begin >= streamed_, "stop checker: stop string begins in streamed text");
        text_.resize(std::max(m->begin, streamed_));
        reason_ = FinishReason::kStop;
        step.stop_string = matcher_.stop(m->stop_index);
        break;
      }
    }
    if (max_tokens_ && generated_ >= size_t(*max_tokens_)) reason_ = FinishReason::kLength;
  }
  step.reason = reason_;

  // Stream what can no longer change: all of it once finished, else all but a tail that may still
  // become a stop string or that ends inside a UTF-8 character.
  size_t safe = text_.size();
  if (!finished()) {
    const size_t held = std::max(matcher_.partial_suffix(text_), incomplete_utf8_suffix(text_));
    safe = std::max(streamed_, text_.size() - std::min(held, text_.size()));
  }
  step.text = text_.substr(streamed_, safe - streamed_);
  streamed_ = safe;
  return step;
}

}  // namespace specserve::sampling
