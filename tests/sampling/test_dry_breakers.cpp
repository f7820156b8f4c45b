// Breaker strings → token sequences (llama.cpp's rule), on a toy vocabulary.
#include <gtest/gtest.h>

#include <algorithm>

#include "sampling/dry_breakers.h"

namespace specserve::sampling {
namespace {

const std::vector<std::string> kVocab = {"a", "b", "\n", "x\n", "ab", "::", "c:", ":", "q"};

// Greedy longest-match tokenizer over kVocab.
std::vector<TokenId> encode(std::string_view text) {
  std::vector<TokenId> out;
  while (!text.empty()) {
    TokenId best = -1;
    for (TokenId id = 0; id < TokenId(kVocab.size()); ++id) {
      if (text.substr(0, kVocab[id].size()) == kVocab[id] && (best < 0 || kVocab[id].size() > kVocab[best].size()))
        best = id;
    }
    EXPECT_GE(best, 0);
    if (best < 0) break;
    out.push_back(best);
    text.remove_prefix(kVocab[best].size());
  }
  return out;
}

std::vector<std::vector<TokenId>> convert(std::vector<std::string> breakers) {
  auto seqs = dry_breaker_sequences(
      breakers, TokenId(kVocab.size()), [](TokenId id) { return kVocab[id]; }, encode);
  std::sort(seqs.begin(), seqs.end());
  return seqs;
}

TEST(DryBreakers, TokensContainingTheBreakerAreSingleTokenBreakers) {
  EXPECT_EQ(convert({"\n"}), (std::vector<std::vector<TokenId>>{{2}, {3}}));
}

TEST(DryBreakers, TokensEndingInAPrefixGetTheRestAsATail) {
  // "ab": token 4 contains it; token 0 "a" ends with its prefix "a", the rest "b" encodes to [1].
  EXPECT_EQ(convert({"ab"}), (std::vector<std::vector<TokenId>>{{0, 1}, {4}}));
  // "::": token 5 contains it; "c:" and ":" end with ":" and continue with ":" (id 7).
  EXPECT_EQ(convert({"::"}), (std::vector<std::vector<TokenId>>{{5}, {6, 7}, {7, 7}}));
}

TEST(DryBreakers, DuplicatesAcrossBreakersCollapse) {
  EXPECT_EQ(convert({"\n", "\n", ""}), (std::vector<std::vector<TokenId>>{{2}, {3}}));
}

}  // namespace
}  // namespace specserve::sampling
