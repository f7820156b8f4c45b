#include "server/reasoning_splitter.h"

namespace specserve::server {

namespace {
constexpr std::string_view kThinkOpen = "<think>";
constexpr std::string_view kThinkClose = "</think>";

bool is_space(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

// Length of the longest suffix of `s` that is a proper prefix of `tag` (it may complete later).
size_t partial_tag_suffix(std::string_view s, std::string_view tag) {
  size_t max = std::min(s.size(), tag.size() - 1);
  for (size_t n = max; n > 0; --n) {
    if (s.substr(s.size() - n) == tag.substr(0, n)) return n;
  }
  return 0;
}
}  // namespace

ReasoningSplitter::ReasoningSplitter(ReasoningStart start)
    : state_(start == ReasoningStart::Inside ? State::Reasoning
             : start == ReasoningStart::Off  ? State::Content
                                             : State::Start) {}

ReasoningStart reasoning_start_of(std::string_view prompt) {
  size_t end = prompt.size();
  while (end > 0 && is_space(prompt[end - 1])) --end;
  const std::string_view p = prompt.substr(0, end);
  auto ends_with = [&](std::string_view tag) {
    return p.size() >= tag.size() && p.substr(p.size() - tag.size()) == tag;
  };
  if (ends_with(kThinkOpen)) return ReasoningStart::Inside;
  if (ends_with(kThinkClose)) return ReasoningStart::Off;
  return ReasoningStart::Detect;
}

SplitText ReasoningSplitter::feed(std::string_view text) {
  pending_.append(text);
  SplitText out;
  step(out, false);
  return out;
}

SplitText ReasoningSplitter::finish() {
  SplitText out;
  step(out, true);
  return out;
}

void ReasoningSplitter::step(SplitText& out, bool final) {
  for (;;) {
    switch (state_) {
      case State::Start: {
        // Only a <think> at the very start (after whitespace) opens a block; later tags are content.
        size_t i = 0;
        while (i < pending_.size() && is_space(pending_[i])) ++i;
        std::string_view rest = std::string_view(pending_).substr(i);
        if (rest.size() >= kThinkOpen.size()) {
          if (rest.substr(0, kThinkOpen.size()) == kThinkOpen) {
            pending_.erase(0, i + kThinkOpen.size());
            state_ = State::Reasoning;
          } else {
            state_ = State::Content;
          }
          continue;
        }
        if (!final && kThinkOpen.substr(0, rest.size()) == rest) return;  // could still become <think>
        state_ = State::Content;
        continue;
      }
      case State::Reasoning: {
        size_t pos = pending_.find(kThinkClose);
        if (pos != std::string::npos) {
          out.reasoning.append(pending_, 0, pos);
          pending_.erase(0, pos + kThinkClose.size());
          state_ = State::AfterReasoning;
          continue;
        }
        size_t hold = final ? 0 : partial_tag_suffix(pending_, kThinkClose);
        out.reasoning.append(pending_, 0, pending_.size() - hold);
        pending_.erase(0, pending_.size() - hold);
        return;
      }
      case State::AfterReasoning: {
        // The template separates the block from the answer with "\n\n"; drop that whitespace.
        size_t i = 0;
        while (i < pending_.size() && is_space(pending_[i])) ++i;
        pending_.erase(0, i);
        if (pending_.empty() && !final) return;
        state_ = State::Content;
        continue;
      }
      case State::Content:
        out.content += pending_;
        pending_.clear();
        return;
    }
  }
}

}  // namespace specserve::server
