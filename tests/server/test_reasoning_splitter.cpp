// <think>…</think> splitting gives the same result however the text is chunked.
#include <gtest/gtest.h>

#include "server/reasoning_splitter.h"

using namespace specserve::server;

namespace {
// Feeds `text` in chunks of `n` bytes.
SplitText run(const std::string& text, size_t n, bool starts_in_reasoning) {
  ReasoningSplitter s(starts_in_reasoning ? ReasoningStart::Inside : ReasoningStart::Detect);
  SplitText all;
  for (size_t i = 0; i < text.size(); i += n) {
    SplitText part = s.feed(text.substr(i, n));
    all.reasoning += part.reasoning;
    all.content += part.content;
  }
  SplitText tail = s.finish();
  all.reasoning += tail.reasoning;
  all.content += tail.content;
  return all;
}
}  // namespace

TEST(ReasoningSplitter, Qwen3OpensItself) {
  for (size_t n : {1, 2, 3, 5, 7, 100}) {
    SplitText r = run("<think>\nLet me think.\n</think>\n\nThe answer is 4.", n, false);
    EXPECT_EQ(r.reasoning, "\nLet me think.\n") << n;
    EXPECT_EQ(r.content, "The answer is 4.") << n;
  }
}

TEST(ReasoningSplitter, Qwen35StartsInside) {
  for (size_t n : {1, 4, 100}) {
    SplitText r = run("plan a, b</think>\n\nanswer <think> stays", n, true);
    EXPECT_EQ(r.reasoning, "plan a, b");
    EXPECT_EQ(r.content, "answer <think> stays");
  }
}

TEST(ReasoningSplitter, NoThinkingIsAllContent) {
  for (size_t n : {1, 3, 100}) {
    SplitText r = run("Hello <think> world", n, false);
    EXPECT_EQ(r.reasoning, "");
    EXPECT_EQ(r.content, "Hello <think> world");
  }
  EXPECT_EQ(run("<thi", 1, false).content, "<thi");  // a prefix that never completed
}

TEST(ReasoningSplitter, UnclosedBlockStaysReasoning) {
  SplitText r = run("<think>still thinking </thi", 2, false);
  EXPECT_EQ(r.reasoning, "still thinking </thi");
  EXPECT_EQ(r.content, "");
}

TEST(ReasoningSplitter, PartialCloseTagHeldBack) {
  ReasoningSplitter s(ReasoningStart::Inside);
  SplitText a = s.feed("abc</th");
  EXPECT_EQ(a.reasoning, "abc");
  SplitText b = s.feed("ink>done");
  EXPECT_EQ(b.reasoning, "");
  EXPECT_EQ(b.content, "done");
}

TEST(ReasoningSplitter, ThinkingDisabledIsAllContent) {
  ReasoningSplitter s(ReasoningStart::Off);
  SplitText a = s.feed("<think>\nnot reasoning</think>");
  SplitText b = s.finish();
  EXPECT_EQ(a.reasoning + b.reasoning, "");
  EXPECT_EQ(a.content + b.content, "<think>\nnot reasoning</think>");
}

TEST(ReasoningSplitter, StartFromPrompt) {
  EXPECT_EQ(reasoning_start_of("<|im_start|>assistant\n<think>\n"), ReasoningStart::Inside);
  EXPECT_EQ(reasoning_start_of("<|im_start|>assistant\n<think>\n\n</think>\n\n"), ReasoningStart::Off);
  EXPECT_EQ(reasoning_start_of("<|im_start|>assistant\n"), ReasoningStart::Detect);
}
