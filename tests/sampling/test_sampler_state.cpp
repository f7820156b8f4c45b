// SamplerState: counts stay exact under push / pop / truncate, so a verify row sees exactly the
// state plain decoding would have at that position.
#include <gtest/gtest.h>

#include <random>

#include "core/error.h"
#include "sampling/sampler_state.h"

namespace specserve::sampling {
namespace {

// Counts recomputed from scratch, the definition the incremental state must match.
TokenCounts count(std::span<const TokenId> tokens) {
  TokenCounts c;
  for (TokenId t : tokens) ++c[t];
  return c;
}

void expect_consistent(const SamplerState& s, int window) {
  const auto all = s.tokens();
  const size_t first = window > 0 && all.size() > size_t(window) ? all.size() - window : 0;
  EXPECT_EQ(s.window_counts(), count(all.subspan(first)));
  EXPECT_EQ(s.generated_counts(), count(all.subspan(s.prompt_length())));
}

TEST(SamplerState, LengthIsTheNextPosition) {
  const std::vector<TokenId> prompt = {5, 6, 7};
  SamplerState s(prompt);
  EXPECT_EQ(s.length(), 3u);
  EXPECT_EQ(s.generated(), 0u);
  s.push(9);
  EXPECT_EQ(s.length(), 4u);
  EXPECT_EQ(s.generated(), 1u);
  EXPECT_EQ(s.tokens().back(), 9);
}

TEST(SamplerState, RandomPushPopMatchesRecount) {
  std::mt19937 rng(1);
  for (int window : {0, 1, 3, 8}) {
    std::vector<TokenId> prompt;
    for (int i = 0; i < 10; ++i) prompt.push_back(rng() % 6);
    SamplerState s(prompt, window);
    expect_consistent(s, window);
    for (int step = 0; step < 400; ++step) {
      if (s.generated() > 0 && rng() % 3 == 0) {
        s.pop();
      } else {
        s.push(static_cast<TokenId>(rng() % 6));
      }
      expect_consistent(s, window);
    }
  }
}

TEST(SamplerState, TruncateRestoresACopy) {
  const std::vector<TokenId> prompt = {1, 2, 3, 1};
  SamplerState s(prompt, 3);
  s.push(2);
  s.push(4);
  const SamplerState committed = s;  // a copy is a clone
  for (TokenId d : {1, 1, 5, 2}) s.push(d);
  s.truncate(committed.length());
  EXPECT_EQ(std::vector<TokenId>(s.tokens().begin(), s.tokens().end()),
            std::vector<TokenId>(committed.tokens().begin(), committed.tokens().end()));
  EXPECT_EQ(s.window_counts(), committed.window_counts());
  EXPECT_EQ(s.generated_counts(), committed.generated_counts());
}

TEST(SamplerState, NeverPopsThePrompt) {
  const std::vector<TokenId> prompt = {1, 2};
  SamplerState s(prompt);
  EXPECT_THROW(s.pop(), Error);
  s.push(3);
  EXPECT_THROW(s.truncate(1), Error);
  EXPECT_THROW(s.truncate(4), Error);
  s.truncate(2);
  EXPECT_EQ(s.length(), 2u);
}

}  // namespace
}  // namespace specserve::sampling
