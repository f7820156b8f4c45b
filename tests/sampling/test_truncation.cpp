// Properties of the shaping stages: top-k keeps exactly k (ties to the lower id), top-p keeps the
// smallest prefix reaching the mass, min-p and top-n-sigma never remove the argmax, probabilities
// sum to 1.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "sampling/sampler.h"
#include "sampling/row_kernels.h"
#include "sampling/truncation.h"

namespace specserve::sampling {
namespace {

std::vector<TokenId> all_ids(size_t n) {
  std::vector<TokenId> ids(n);
  std::iota(ids.begin(), ids.end(), 0);
  return ids;
}

// The kept ids of a candidate set (every finite id when it is still implicit).
std::vector<TokenId> ids_of(const std::vector<float>& row, const Candidates& c) {
  std::vector<TokenId> out;
  c.for_each(row, [&](TokenId id) { out.push_back(id); });
  return out;
}

std::vector<float> random_row(std::mt19937& rng, size_t n, float scale, bool with_ties) {
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> row(n);
  for (auto& x : row) x = with_ties ? std::round(d(rng)) : d(rng);  // rounding makes many ties
  return row;
}

TEST(TopK, KeepsExactlyKWithTiesToTheLowerId) {
  const std::vector<float> row = {1.0f, 3.0f, 3.0f, 2.0f, 3.0f, 0.0f};
  TruncationScratch scratch;
  Candidates cands;
  truncate_top_k(row, cands, 2, scratch);
  EXPECT_EQ(ids_of(row, cands), (std::vector<TokenId>{1, 2}));  // three tokens tie at 3: the lowest two ids stay
  cands = Candidates{};
  truncate_top_k(row, cands, 4, scratch);
  EXPECT_EQ(ids_of(row, cands), (std::vector<TokenId>{1, 2, 3, 4}));
}

TEST(TopK, PropertyExactlyKAndNoBetterTokenLeftOut) {
  std::mt19937 rng(3);
  TruncationScratch scratch;
  for (int trial = 0; trial < 200; ++trial) {
    const auto row = random_row(rng, 50, 2.0f, /*with_ties=*/true);
    const int k = 1 + rng() % 49;
    Candidates cands;
    truncate_top_k(row, cands, k, scratch);
    const auto kept = ids_of(row, cands);
    ASSERT_EQ(kept.size(), size_t(k));
    ASSERT_TRUE(std::is_sorted(kept.begin(), kept.end()));
    // Every dropped token is worse than every kept one in (logit desc, id asc).
    for (TokenId out = 0; out < 50; ++out) {
      if (std::binary_search(kept.begin(), kept.end(), out)) continue;
      for (TokenId in : kept) ASSERT_TRUE(row[in] > row[out] || (row[in] == row[out] && in < out));
    }
  }
}

TEST(TopP, KeepsTheSmallestPrefixReachingTheMass) {
  // Probabilities 0.5, 0.25, 0.125, 0.125 (logits log2-spaced).
  const std::vector<float> row = {std::log(4.0f), std::log(2.0f), 0.0f, 0.0f};
  TruncationScratch scratch;
  Candidates cands;
  truncate_top_p(row, cands, 0.5f, scratch);  // 0.5 reached by the first token alone
  EXPECT_EQ(ids_of(row, cands), (std::vector<TokenId>{0}));
  cands = Candidates{};
  truncate_top_p(row, cands, 0.6f, scratch);
  EXPECT_EQ(ids_of(row, cands), (std::vector<TokenId>{0, 1}));
  cands = Candidates{};
  truncate_top_p(row, cands, 0.8f, scratch);  // 0.75 < 0.8: the tie at 0.125 goes to id 2
  EXPECT_EQ(ids_of(row, cands), (std::vector<TokenId>{0, 1, 2}));
}

TEST(TopP, LargeRowsNeedMoreThanTheFirstSortedBlock) {
  // 3000 nearly flat tokens: top-p 0.9 keeps ~2700, well past the first partial sort.
  std::mt19937 rng(5);
  const auto row = random_row(rng, 3000, 0.01f, false);
  TruncationScratch scratch;
  Candidates cands;
  truncate_top_p(row, cands, 0.9f, scratch);
  // Reference: full sort, then the prefix rule.
  auto order = all_ids(row.size());
  std::sort(order.begin(), order.end(),
            [&](TokenId x, TokenId z) { return row[x] != row[z] ? row[x] > row[z] : x < z; });
  const float max = row[order[0]];
  double total = 0.0;
  for (float l : row) total += exp_nonpositive(l - max);
  double before = 0.0;
  size_t keep = 0;
  while (keep < order.size() && (keep == 0 || before < 0.9 * total))
    before += exp_nonpositive(row[order[keep++]] - max);
  std::vector<TokenId> expected(order.begin(), order.begin() + keep);
  std::sort(expected.begin(), expected.end());
  EXPECT_GT(ids_of(row, cands).size(), 2000u);
  EXPECT_EQ(ids_of(row, cands), expected);
}

TEST(MinP, NeverRemovesTheArgmax) {
  std::mt19937 rng(4);
  for (int trial = 0; trial < 200; ++trial) {
    const auto row = random_row(rng, 40, 5.0f, trial % 2 == 0);
    const float min_p = float(rng() % 1000 + 1) / 1000.0f;  // up to 1.0: keeps only the maxima
    Candidates cands;
    const TokenId argmax = argmax_lowest_id(row);
    truncate_min_p(row, cands, min_p);
    const auto kept = ids_of(row, cands);
    ASSERT_TRUE(std::binary_search(kept.begin(), kept.end(), argmax));
    for (TokenId id : kept) ASSERT_GE(exp_nonpositive(row[id] - row[argmax]), min_p);
  }
}

TEST(TopNSigma, KeepsLogitsWithinNSigmaOfTheMax) {
  const std::vector<float> row = {0.0f, 0.0f, 0.0f, 4.0f};  // mean 1, σ = √3
  Candidates cands;
  truncate_top_n_sigma(row, cands, 1.0f);  // threshold 4 − 1.732: only the max
  EXPECT_EQ(ids_of(row, cands), (std::vector<TokenId>{3}));
  cands = Candidates{};
  truncate_top_n_sigma(row, cands, 2.5f);  // threshold 4 − 4.33 < 0: everything
  EXPECT_EQ(ids_of(row, cands).size(), 4u);
}

TEST(ProcessedDistribution, SumsToOneAndRespectsTruncation) {
  std::mt19937 rng(6);
  for (int trial = 0; trial < 50; ++trial) {
    RequestParams p;
    p.sampling.temperature = 0.3f + float(trial % 7) * 0.3f;
    p.sampling.top_k = trial % 3 == 0 ? 0 : 1 + int(rng() % 30);
    p.sampling.top_p = trial % 2 == 0 ? 1.0f : 0.5f + float(rng() % 50) / 100.0f;
    p.sampling.min_p = trial % 5 == 0 ? 0.1f : 0.0f;
    p.sampling.top_n_sigma = trial % 4 == 0 ? 1.5f : 0.0f;
    p.sampling.seed = 1;
    Sampler sampler(p, {100, 90});
    const auto row = random_row(rng, 100, 3.0f, false);
    std::vector<float> probs(100);
    SamplerWorkspace ws;
    const std::vector<TokenId> prompt = {1};
    sampler.processed_distribution(row, sampler.make_state(prompt), ws, probs);
    const double sum = std::accumulate(probs.begin(), probs.end(), 0.0);
    EXPECT_NEAR(sum, 1.0, 1e-5);
    const auto kept = std::count_if(probs.begin(), probs.end(), [](float x) { return x > 0.0f; });
    if (p.sampling.top_k > 0) {
      EXPECT_LE(kept, p.sampling.top_k);
    }
    for (int id = 90; id < 100; ++id) EXPECT_EQ(probs[id], 0.0f);  // padded ids never
  }
}

}  // namespace
}  // namespace specserve::sampling
