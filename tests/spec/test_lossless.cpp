// The promise (docs/DESIGN.md §1): with the DFlash drafter, T = 0 output is identical to plain decoding,
// for dense and hybrid targets, γ ∈ {1, 3, 7, 15}, f32 and bf16 weights, several requests batched
// together; and a seeded T > 0 request gives identical text with and without the drafter (argmax
// drafts, sample-match acceptance). Also with penalties, which the drafter applies too.
#include <random>

#include "spec_test_util.h"

namespace specserve::spec {
namespace {

using namespace specserve::spec::testing;

struct LosslessCase {
  std::string pair, dtype;
  int gamma;
};

std::vector<std::vector<int32_t>> prompts(const Trace& trace) {
  std::vector<std::vector<int32_t>> p = {trace.prompt};
  std::mt19937 rng(11);
  for (int len : {3, 17, 40}) {
    std::vector<int32_t> ids(static_cast<size_t>(len));
    for (auto& t : ids) t = static_cast<int32_t>(rng() % 300);
    p.push_back(ids);
  }
  // A synthetic-language prompt the trained pairs continue predictably (high acceptance).
  p.push_back({7, 12, 17, 22, 27, 32, 37, 42});
  return p;
}

using RequestMaker = std::function<engine::GenerationRequest(const std::vector<int32_t>&, size_t)>;

void expect_identical(const LosslessCase& c, const RequestMaker& make, const std::string& what,
                      DraftSelection selection = {}) {
  Pair pair(c.pair, c.dtype);
  const auto ps = prompts(load_trace(c.pair));
  std::vector<engine::GenerationRequest> plain_reqs, spec_reqs;
  for (size_t i = 0; i < ps.size(); ++i) {
    plain_reqs.push_back(make(ps[i], i));
    spec_reqs.push_back(make(ps[i], i));
  }
  auto plain_engine = make_engine(*pair.target, nullptr);
  const auto plain = run_all(*plain_engine, std::move(plain_reqs));
  DFlashProposer proposer(*pair.drafter, {.gamma = c.gamma, .selection = selection});
  auto spec_engine = make_engine(*pair.target, &proposer);
  const auto spec = run_all(*spec_engine, std::move(spec_reqs));
  int64_t accepted = 0;
  for (size_t i = 0; i < ps.size(); ++i) {
    ASSERT_TRUE(plain[i].error.empty() && spec[i].error.empty()) << plain[i].error << spec[i].error;
    EXPECT_EQ(spec[i].tokens, plain[i].tokens) << what << ", prompt " << i;
    for (const auto& s : spec[i].steps) accepted += s.accepted;
  }
  ::testing::Test::RecordProperty(what + "_accepted", static_cast<int>(accepted));
  // The trained pairs must actually speculate, or this test would prove nothing.
  if (c.pair != "dense-random") {
    EXPECT_GT(accepted, 0) << what;
  }
}

class Lossless : public ::testing::TestWithParam<LosslessCase> {};

TEST_P(Lossless, GreedyIdenticalToPlainDecoding) {
  expect_identical(
      GetParam(), [](const auto& p, size_t) { return greedy_request(p, 40); }, "greedy");
}

TEST_P(Lossless, SeededSamplingIdenticalToPlainDecoding) {
  expect_identical(
      GetParam(), [](const auto& p, size_t i) { return sampled_request(p, 40, 1000 + i, 0.8f, 0.9f); }, "seeded");
}

TEST_P(Lossless, PenalisedSamplingIdenticalToPlainDecoding) {
  expect_identical(
      GetParam(),
      [](const auto& p, size_t i) {
        auto r = sampled_request(p, 40, 77 + i, i % 2 ? 0.0f : 0.7f);
        r.params.sampling.repetition_penalty = 1.3f;
        r.params.sampling.presence_penalty = 0.4f;
        r.params.sampling.frequency_penalty = 0.2f;
        return r;
      },
      "penalised");
}

// At T = 0 the sampled-draft mode's q and p are point masses, so min(1, p/q) acceptance is
// argmax-match and the residual is the target's argmax: bit-identical to plain decoding too.
TEST(LosslessSampledDrafts, GreedyIdenticalToPlainDecoding) {
  for (const char* pair : {"dense-trained", "hybrid-trained"})
    expect_identical({pair, "f32", 15}, [](const auto& p, size_t) { return greedy_request(p, 40); },
                     std::string("sampled-drafts greedy ") + pair, {.sampling = DraftSampling::Sample});
}

std::vector<LosslessCase> cases() {
  std::vector<LosslessCase> v;
  for (const char* pair : {"dense-trained", "hybrid-trained"})
    for (const char* dtype : {"f32", "bf16"})
      for (int gamma : {1, 3, 7, 15}) v.push_back({pair, dtype, gamma});
  v.push_back({"dense-random", "f32", 15});
  return v;
}

INSTANTIATE_TEST_SUITE_P(Cases, Lossless, ::testing::ValuesIn(cases()), [](const auto& info) {
  std::string n = info.param.pair + "_" + info.param.dtype + "_gamma" + std::to_string(info.param.gamma);
  std::replace(n.begin(), n.end(), '-', '_');
  return n;
});

}  // namespace
}  // namespace specserve::spec
