// Stop conditions: stop strings split across tokens, a stop inside a multi-token (speculative)
// emission, EOS / stop ids, max_tokens, ignore_eos, min_tokens, and the streaming hold-back.
#include <gtest/gtest.h>

#include "core/error.h"
#include "sampling/stop_checker.h"

namespace specserve::sampling {
namespace {

StopParams stops(std::vector<std::string> strings) {
  StopParams p;
  p.eos_token_ids = {0};
  p.stop = std::move(strings);
  return p;
}

// Feeds (token, piece) pairs in chunks of `chunk` and returns the concatenated streamed text,
// the total tokens kept and the last step.
struct Fed {
  std::string streamed;
  size_t kept = 0;
  StopStep last;
};

Fed feed(StopChecker& c, const std::vector<TokenId>& tokens, const std::vector<std::string>& pieces, size_t chunk) {
  Fed f;
  for (size_t i = 0; i < tokens.size() && !c.finished(); i += chunk) {
    const size_t n = std::min(chunk, tokens.size() - i);
    f.last = c.consume(std::span(tokens).subspan(i, n), std::span(pieces).subspan(i, n));
    f.streamed += f.last.text;
    f.kept += f.last.tokens_kept;
  }
  return f;
}

TEST(StopChecker, StopStringSplitAcrossTokensIsCutAndNotEmitted) {
  StopChecker c(stops({"</end>"}));
  const std::vector<TokenId> t = {5, 6, 7, 8, 9};
  const std::vector<std::string> p = {"Hello", " wor", "ld</", "en", "d> trailing"};
  auto s = c.consume(std::span(t).first(3), std::span(p).first(3));
  EXPECT_EQ(s.text, "Hello world");  // "</" held back: it may begin the stop string
  EXPECT_FALSE(s.finished());
  s = c.consume(std::span(t).subspan(3, 1), std::span(p).subspan(3, 1));
  EXPECT_EQ(s.text, "");  // "</en" still a prefix
  s = c.consume(std::span(t).subspan(4, 1), std::span(p).subspan(4, 1));
  EXPECT_TRUE(s.finished());
  EXPECT_EQ(s.reason, FinishReason::kStop);
  EXPECT_EQ(s.stop_string, "</end>");
  EXPECT_EQ(s.text, "");
  EXPECT_EQ(s.tokens_kept, 1u);
  EXPECT_EQ(c.text(), "Hello world");
  EXPECT_EQ(c.generated(), 5u);
}

TEST(StopChecker, FalseStartIsReleased) {
  StopChecker c(stops({"STOP"}));
  const std::vector<TokenId> t = {1, 2};
  const std::vector<std::string> p = {"a ST", "ep"};
  EXPECT_EQ(c.consume(std::span(t).first(1), std::span(p).first(1)).text, "a ");
  EXPECT_EQ(c.consume(std::span(t).subspan(1), std::span(p).subspan(1)).text, "STep");
}

TEST(StopChecker, StopInsideASpeculativeRunCutsTheRun) {
  // One step emits 6 tokens (5 accepted drafts + the pick); the stop string "\n\n" completes in
  // the 3rd token and begins in the 2nd.
  const std::vector<TokenId> t = {11, 12, 13, 14, 15, 16};
  const std::vector<std::string> p = {"x = 1", ";\n", "\n\nand", " more", " text", "!"};
  StopChecker c(stops({"\n\n"}));
  const StopStep s = c.consume(t, p);
  EXPECT_EQ(s.tokens_kept, 3u);
  EXPECT_EQ(s.reason, FinishReason::kStop);
  EXPECT_EQ(s.text, "x = 1;");
  EXPECT_EQ(c.generated(), 3u);
  EXPECT_THROW(c.consume(t, p), Error);  // nothing more after the stop
}

TEST(StopChecker, ChunkingDoesNotChangeTheResult) {
  const std::vector<TokenId> t = {1, 2, 3, 4, 5, 6, 7, 8};
  const std::vector<std::string> p = {"ab", "c<", "st", "op", "x", "<", "stop>", "zz"};
  std::optional<Fed> first;
  for (size_t chunk : {1, 2, 3, 8}) {
    StopChecker c(stops({"<stop>", "cx"}));
    const Fed f = feed(c, t, p, chunk);
    EXPECT_EQ(f.streamed, "abc<stopx") << chunk;
    EXPECT_EQ(f.kept, 7u) << chunk;
    EXPECT_EQ(f.last.stop_string, "<stop>") << chunk;
  }
}

TEST(StopChecker, EarliestStopStringWins) {
  StopChecker c(stops({"world", "lo w"}));
  const std::vector<TokenId> t = {1};
  const std::vector<std::string> p = {"hello world"};
  const auto s = c.consume(t, p);
  EXPECT_EQ(s.stop_string, "lo w");
  EXPECT_EQ(s.text, "hel");
}

TEST(StopChecker, EosAndStopIdsEndTheOutputWithoutTheirText) {
  StopParams sp = stops({});
  sp.stop_token_ids = {42};
  StopChecker c(sp);
  const std::vector<TokenId> t = {7, 42, 8};
  const std::vector<std::string> p = {"hi", "<|stop|>", "never"};
  const auto s = c.consume(t, p);
  EXPECT_EQ(s.tokens_kept, 2u);
  EXPECT_EQ(s.stop_token, 42);
  EXPECT_EQ(s.text, "hi");
  EXPECT_STREQ(finish_reason_name(s.reason), "stop");

  StopChecker e(sp);
  const std::vector<TokenId> eos = {7, 0, 8};
  EXPECT_EQ(e.consume(eos, p).stop_token, 0);
}

TEST(StopChecker, IgnoreEos) {
  StopParams sp = stops({});
  sp.ignore_eos = true;
  sp.max_tokens = 3;
  StopChecker c(sp);
  const std::vector<TokenId> t = {0, 0, 0, 0};
  const std::vector<std::string> p = {"a", "b", "c", "d"};
  const auto s = c.consume(t, p);
  EXPECT_EQ(s.tokens_kept, 3u);
  EXPECT_EQ(s.reason, FinishReason::kLength);
  EXPECT_EQ(s.text, "abc");
}

TEST(StopChecker, MaxTokensInsideARunAndFlushesHeldText) {
  StopParams sp = stops({"STOP"});
  sp.max_tokens = 2;
  StopChecker c(sp);
  const std::vector<TokenId> t = {1, 2, 3};
  const std::vector<std::string> p = {"a", "ST", "OP"};
  const auto s = c.consume(t, p);
  EXPECT_EQ(s.tokens_kept, 2u);
  EXPECT_EQ(s.reason, FinishReason::kLength);
  EXPECT_EQ(s.text, "aST");  // the held "ST" never became a stop string
  EXPECT_STREQ(finish_reason_name(s.reason), "length");
}

TEST(StopChecker, StopStringOnTheLastAllowedTokenIsAStop) {
  StopParams sp = stops({"ab"});
  sp.max_tokens = 2;
  StopChecker c(sp);
  const std::vector<TokenId> t = {1, 2};
  const std::vector<std::string> p = {"a", "b"};
  EXPECT_EQ(c.consume(t, p).reason, FinishReason::kStop);
}

TEST(StopChecker, MinTokensDefersStops) {
  StopParams sp = stops({"x"});
  sp.min_tokens = 3;
  StopChecker c(sp);
  const std::vector<TokenId> t = {0, 5, 5, 6, 0};
  const std::vector<std::string> p = {"", "x", "y", "x", ""};
  const auto s = c.consume(t, p);
  // EOS as the 1st token and "x" in the 2nd come before min_tokens; the 4th token's "x" stops.
  EXPECT_EQ(s.tokens_kept, 4u);
  EXPECT_EQ(s.stop_string, "x");
  EXPECT_EQ(s.text, "xy");
}

TEST(StopChecker, IncompleteUtf8IsHeldBack) {
  StopChecker c(stops({}));
  const std::string euro = "\xE2\x82\xAC";
  const std::vector<TokenId> t = {1, 2};
  const std::vector<std::string> p = {"a" + euro.substr(0, 2), euro.substr(2)};
  EXPECT_EQ(c.consume(std::span(t).first(1), std::span(p).first(1)).text, "a");
  EXPECT_EQ(c.consume(std::span(t).subspan(1), std::span(p).subspan(1)).text, euro);
}

TEST(StopStrings, PartialSuffixIsTheLongestPrefixOfAnyStop) {
  StopStringMatcher m({"abcd", "cx"});
  EXPECT_EQ(m.partial_suffix("zzabc"), 3u);
  EXPECT_EQ(m.partial_suffix("zzc"), 1u);
  EXPECT_EQ(m.partial_suffix("zz"), 0u);
  EXPECT_EQ(m.partial_suffix("abcd"), 0u);  // a complete stop is a match, not a prefix
  EXPECT_EQ(incomplete_utf8_suffix("a\xF0\x9F\x98"), 3u);
  EXPECT_EQ(incomplete_utf8_suffix("a\xF0\x9F\x98\x80"), 0u);
}

}  // namespace
}  // namespace specserve::sampling
