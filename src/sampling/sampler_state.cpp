#include "sampling/sampler_state.h"

#include "core/error.h"

namespace specserve::sampling {

SamplerState::SamplerState(std::span<const TokenId> prompt, int repetition_window)
    : prompt_length_(prompt.size()), window_(repetition_window > 0 ? size_t(repetition_window) : 0) {
  tokens_.reserve(prompt.size() + 256);
  tokens_.assign(prompt.begin(), prompt.end());
  const size_t first = windowed() && prompt.size() > window_ ? prompt.size() - window_ : 0;
  for (size_t i = first; i < prompt.size(); ++i) add(window_counts_, prompt[i]);
}

void SamplerState::add(TokenCounts& counts, TokenId id) { ++counts[id]; }

void SamplerState::remove(TokenCounts& counts, TokenId id) {
  auto it = counts.find(id);
  SS_DEBUG_CHECK(it != counts.end(), "SamplerState: removing token {} that is not counted", id);
  if (it != counts.end() && --it->second == 0) counts.erase(it);
}

void SamplerState::push(TokenId token) {
  tokens_.push_back(token);
  add(window_counts_, token);
  // The token that just fell out of the window.
  if (windowed() && tokens_.size() > window_) remove(window_counts_, tokens_[tokens_.size() - 1 - window_]);
  add(generated_counts_, token);
}

void SamplerState::pop() {
  SS_CHECK(tokens_.size() > prompt_length_, "SamplerState: pop below the prompt");
  const TokenId token = tokens_.back();
  remove(generated_counts_, token);
  // The token that comes back into the window (the inverse of push).
  if (windowed() && tokens_.size() > window_) add(window_counts_, tokens_[tokens_.size() - 1 - window_]);
  remove(window_counts_, token);
  tokens_.pop_back();
}

void SamplerState::truncate(size_t length) {
  SS_CHECK(length >= prompt_length_ && length <= tokens_.size(), "SamplerState: truncate to {} outside [{}, {}]",
           length, prompt_length_, tokens_.size());
  while (tokens_.size() > length) pop();
}

}  // namespace specserve::sampling
