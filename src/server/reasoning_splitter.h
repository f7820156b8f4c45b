#pragma once
// Splits streamed model text into reasoning (`<think>…</think>`) and answer content, for
// `reasoning_content` / `delta.reasoning_content`. Works on arbitrary text chunks: a tag split
// across chunks is held back until it is complete or ruled out, so no partial `</thi` leaks into
// either channel.
//
// Where the output starts is decided by the rendered prompt (reasoning_start_of):
//   Detect: Qwen3 (hybrid) models open the block themselves: "<think>\n…\n</think>\n\nanswer"; only a
//           <think> at the very start of the output opens it.
//   Inside: Qwen3.5/3.6 and the 2507 thinking models get "<think>\n" from the generation prompt, so
//           their output starts inside the block and only "</think>" appears.
//   Off:    the prompt already closed an (empty) block — thinking disabled, e.g. enable_thinking =
//           false — so everything is content, even a stray "<think>".
#include <string>
#include <string_view>

namespace specserve::server {

struct SplitText {
  std::string reasoning;
  std::string content;
};

enum class ReasoningStart { Detect, Inside, Off };

// From the rendered prompt: Inside when it ends inside an open <think> block, Off when it ends
// right after a closed one (ignoring trailing whitespace), Detect otherwise.
ReasoningStart reasoning_start_of(std::string_view prompt);

class ReasoningSplitter {
 public:
  explicit ReasoningSplitter(ReasoningStart start = ReasoningStart::Detect);

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
