#pragma once
// Splits streamed model text into reasoning (`<think>…</think>`) and answer content, for
// `reasoning_content` / `delta.reasoning_content`. Works on arbitrary text chunks: a tag split
// across chunks is held back until it is complete or ruled out, so no partial `</thi` leaks into
// either channel.
//
// Qwen3 (hybrid) models open the block themselves: output "<think>\n…\n</think>\n\nanswer".
// Qwen3.5/3.6 and the 2507 thinking models get "<think>\n" from the chat template's generation
// prompt, so their output starts inside the block and only "</think>" appears: construct with
// starts_in_reasoning = true (chat::prompt_opens_reasoning tells from the rendered prompt).
#include <string>
#include <string_view>

namespace specserve::server {

struct SplitText {
  std::string reasoning;
  std::string content;
};

class ReasoningSplitter {
 public:
  explicit ReasoningSplitter(bool starts_in_reasoning = false);

  // Feeds the next text chunk; returns what can be released now.
  SplitText feed(std::string_view text);
  // End of output: releases everything held back (an unclosed block stays reasoning).
  SplitText finish();

 private:
  enum class State { Start, Reasoning, AfterReasoning, Content };
  void step(SplitText& out, bool final);

  State state_;
  std::string pending_;
};

}  // namespace specserve::server
