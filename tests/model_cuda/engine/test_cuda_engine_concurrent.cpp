// Eight sequences at once on a GPU target: eight different prompts (lengths 2..130, different
// max_tokens so they finish at different steps) submitted together to one engine (max_seqs 8) with
// the CPU DFlash drafter, gamma 3 and 15, at T = 0 and seeded T = 0.8. Each output must equal the
// same request run alone, without a drafter, on the same GPU target — batching with other sequences
// and speculation together change no token.
#include <algorithm>
#include <random>

#include "../../spec/spec_test_util.h"
#include "../model_cuda_test_util.h"

namespace specserve {
namespace {

using namespace specserve::spec::testing;

constexpr int kSeqs = 8;

struct ConcurrentCase {
  std::string pair;
  int gamma;
};

engine::GenerationRequest request(int i, bool seeded) {
  static const int kLengths[kSeqs] = {2, 5, 9, 17, 33, 64, 65, 130};
  std::mt19937 rng(100 + i);
  std::vector<int32_t> prompt(static_cast<size_t>(kLengths[i]));
  for (auto& t : prompt) t = static_cast<int32_t>(rng() % 300);
  const int64_t max_tokens = 24 + 5 * i;
  return seeded ? sampled_request(prompt, max_tokens, 500 + i, 0.8f) : greedy_request(prompt, max_tokens);
}

class CudaConcurrent : public ::testing::TestWithParam<ConcurrentCase> {
 protected:
  void SetUp() override { SKIP_WITHOUT_GPU(); }

  void expect_each_as_alone(bool seeded) {
    const ConcurrentCase& c = GetParam();
    Pair pair(c.pair, "f32", "cuda");
    ASSERT_EQ(pair.target->backend(), "cuda");

    // Alone: one request at a time, plain decoding.
    std::vector<engine::RequestRun> alone;
    {
      auto plain = make_engine(*pair.target, nullptr, engine_options(kSeqs));
      for (int i = 0; i < kSeqs; ++i) alone.push_back(engine::run_request(*plain, request(i, seeded)));
    }

    // Together: all eight submitted at once to one speculative engine.
    spec::DFlashProposer proposer(*pair.drafter, {.gamma = c.gamma});
    ASSERT_EQ(proposer.gamma(), c.gamma);
    auto engine = make_engine(*pair.target, &proposer, engine_options(kSeqs));
    std::vector<engine::GenerationRequest> reqs;
    for (int i = 0; i < kSeqs; ++i) reqs.push_back(request(i, seeded));
    const auto together = run_all(*engine, std::move(reqs));

    int64_t accepted = 0;
    for (int i = 0; i < kSeqs; ++i) {
      ASSERT_TRUE(alone[i].error.empty()) << alone[i].error;
      ASSERT_TRUE(together[i].error.empty()) << together[i].error;
      EXPECT_EQ(alone[i].tokens.size(), static_cast<size_t>(24 + 5 * i)) << "sequence " << i;
      EXPECT_EQ(together[i].tokens, alone[i].tokens) << "sequence " << i;
      EXPECT_EQ(together[i].finish_reason, alone[i].finish_reason) << "sequence " << i;
      for (const auto& s : together[i].steps) {
        EXPECT_LE(s.drafts.size(), static_cast<size_t>(c.gamma)) << "sequence " << i;
        accepted += s.accepted;
      }
    }
    if (!seeded) {
      EXPECT_GT(accepted, 0) << "the trained pair must actually speculate";
    }
  }
};

TEST_P(CudaConcurrent, GreedyEachAsAlone) { expect_each_as_alone(false); }
TEST_P(CudaConcurrent, SeededSamplingEachAsAlone) { expect_each_as_alone(true); }

INSTANTIATE_TEST_SUITE_P(Cases, CudaConcurrent,
                         ::testing::Values(ConcurrentCase{"dense-trained", 3}, ConcurrentCase{"dense-trained", 15},
                                           ConcurrentCase{"hybrid-trained", 3}, ConcurrentCase{"hybrid-trained", 15}),
                         [](const auto& i) {
                           std::string n = i.param.pair + "_gamma" + std::to_string(i.param.gamma);
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

}  // namespace
}  // namespace specserve
