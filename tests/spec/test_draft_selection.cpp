// Drafts from drafter rows (spec/draft_selection.h): penalty-aware argmax sees the same history the
// verifier will (including the provisional drafts d1..d_{k−1}); raw mode ignores the processors;
// sampled mode keeps q and draws with the position-keyed kDraft uniform.
#include <gtest/gtest.h>

#include "core/error.h"
#include "sampling/draft_acceptance.h"
#include "spec/draft_selection.h"

namespace specserve::spec {
namespace {

constexpr int64_t V = 8;

sampling::Sampler make_sampler(float temperature, float presence, uint64_t seed = 5) {
  sampling::RequestParams p;
  p.sampling.temperature = temperature;
  p.sampling.presence_penalty = presence;
  p.sampling.seed = seed;
  return sampling::Sampler(p, {V, 7});  // id 7 is lm_head padding
}

// Two rows, both preferring token 3 (then 5), with padding id 7 the largest of all.
std::vector<float> rows() {
  std::vector<float> r(2 * V, 0.0f);
  for (int k = 0; k < 2; ++k) {
    r[k * V + 3] = 2.0f;
    r[k * V + 5] = 1.5f;
    r[k * V + 7] = 9.0f;
  }
  return r;
}

TEST(DraftSelection, PenaltyAwareArgmaxSeesProvisionalDrafts) {
  const auto sampler = make_sampler(0.0f, 1.0f);
  const std::vector<int32_t> prompt = {1, 2};
  sampling::SamplerState history = sampler.make_state(prompt);
  history.push(0);  // the pending token
  sampling::SamplerWorkspace ws;
  std::vector<int32_t> drafts;
  std::vector<float> q;
  select_drafts(rows(), 2, sampler, history, {}, ws, drafts, q);
  // Slot 1: 3 (padding never wins). Slot 2: 3 is now in the output, the presence penalty (1.0)
  // drops it to 1.0 < 1.5, exactly as verify row 1 will see it.
  EXPECT_EQ(drafts, (std::vector<int32_t>{3, 5}));
  EXPECT_TRUE(q.empty());
  EXPECT_EQ(history.length(), 3u);  // the caller's history is untouched
}

TEST(DraftSelection, RawArgmaxIgnoresProcessorsButNotPadding) {
  const auto sampler = make_sampler(0.0f, 1.0f);
  sampling::SamplerState history = sampler.make_state(std::vector<int32_t>{1});
  sampling::SamplerWorkspace ws;
  std::vector<int32_t> drafts;
  std::vector<float> q;
  select_drafts(rows(), 2, sampler, history, {.raw = true}, ws, drafts, q);
  EXPECT_EQ(drafts, (std::vector<int32_t>{3, 3}));
}

TEST(DraftSelection, SampledDraftsKeepQAndUseTheDraftStream) {
  const auto sampler = make_sampler(1.0f, 0.0f, 42);
  sampling::SamplerState history = sampler.make_state(std::vector<int32_t>{1, 4});
  sampling::SamplerWorkspace ws;
  std::vector<int32_t> drafts;
  std::vector<float> q;
  const auto r = rows();
  select_drafts(r, 2, sampler, history, {.sampling = DraftSampling::Sample}, ws, drafts, q);
  ASSERT_EQ(q.size(), static_cast<size_t>(2 * V));
  sampling::SamplerState h = history;
  for (int k = 0; k < 2; ++k) {
    std::vector<float> want(V);
    sampler.processed_distribution(std::span(r).subspan(k * V, V), h, ws, want);
    EXPECT_EQ(std::vector<float>(q.begin() + k * V, q.begin() + (k + 1) * V), want);
    EXPECT_EQ(q[k * V + 7], 0.0f);
    EXPECT_EQ(drafts[k], sampling::sample_from(want, sampler.uniform(h.length(), sampling::RandomStream::kDraft)));
    h.push(drafts[k]);
  }
}

TEST(DraftSelection, ParsesModeNames) {
  EXPECT_EQ(parse_draft_sampling("sample"), DraftSampling::Sample);
  EXPECT_EQ(parse_draft_sampling("argmax"), DraftSampling::Argmax);
  EXPECT_THROW(parse_draft_sampling("greedy"), Error);
}

}  // namespace
}  // namespace specserve::spec
