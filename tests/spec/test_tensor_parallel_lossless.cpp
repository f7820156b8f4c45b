// The promise under tensor parallelism (docs/DESIGN.md §6.2), on the CPU simulation of N ranks: the trained
// dense and hybrid pairs and the demo pair, several sequences sharing steps, give with the DFlash drafter
// exactly the tokens of plain decoding of the same sharded target, at T = 0 and seeded T > 0.
#include <cstdlib>

#include "spec_test_util.h"

namespace specserve::spec {
namespace {

using namespace specserve::spec::testing;

struct ShardedPair {
  std::unique_ptr<TargetModel> target;
  std::unique_ptr<DFlashDrafter> drafter;
};

ShardedPair load_pair(const std::string& target_dir, const std::string& drafter_dir, const std::string& dtype,
                      int ranks) {
  ShardedPair p;
  p.target = TargetModel::load(target_dir, {.dtype = dtype, .tensor_parallel = ranks});
  p.drafter = DFlashDrafter::load(drafter_dir, *p.target, dtype);
  return p;
}

std::vector<engine::GenerationRequest> requests(bool seeded, int count) {
  std::vector<engine::GenerationRequest> reqs;
  for (int i = 0; i < count; ++i) {
    std::vector<int32_t> prompt;
    // The synthetic language the trained pairs continue predictably, then some noise.
    for (int k = 0; k < 6 + 3 * i; ++k) prompt.push_back(7 + 5 * ((k + i) % 12) + (k % 5 == 4 ? 31 * i : 0));
    const int64_t max_tokens = 20 + 4 * i;
    reqs.push_back(seeded ? sampled_request(prompt, max_tokens, 900 + i, 0.8f, 0.9f)
                          : greedy_request(prompt, max_tokens));
  }
  return reqs;
}

void expect_lossless(ShardedPair& pair, const std::string& what) {
  for (bool seeded : {false, true}) {
    const auto reqs = requests(seeded, 4);
    auto plain_engine = make_engine(*pair.target, nullptr);
    const auto plain = run_all(*plain_engine, reqs);
    DFlashProposer proposer(*pair.drafter, {.gamma = 15});
    auto spec_engine = make_engine(*pair.target, &proposer);
    const auto spec = run_all(*spec_engine, reqs);
    const std::string name = what + (seeded ? ", seeded" : ", T=0");
    for (size_t i = 0; i < reqs.size(); ++i) {
      ASSERT_TRUE(plain[i].error.empty()) << name << ": " << plain[i].error;
      ASSERT_TRUE(spec[i].error.empty()) << name << ": " << spec[i].error;
      EXPECT_EQ(plain[i].tokens.size(), static_cast<size_t>(*reqs[i].params.stop.max_tokens)) << name;
      EXPECT_EQ(spec[i].tokens, plain[i].tokens) << name << ", request " << i;
    }
    EXPECT_GT(spec_engine->metrics().spec_num_drafts.load(), 0u) << name;
    EXPECT_GT(spec_engine->metrics().spec_num_accepted_tokens.load(), 0u) << name << ": no draft accepted";
  }
}

TEST(TensorParallelLossless, TrainedPairsUnderTwoRanks) {
  for (const std::string name : {"dense-trained", "hybrid-trained"}) {
    ShardedPair p = load_pair(pair_dir(name) + "/target", pair_dir(name) + "/draft", "bf16", 2);
    expect_lossless(p, name + " N=2");
  }
}

TEST(TensorParallelLossless, DenseTrainedPairUnderFourRanks) {
  // 2 KV heads over 4 ranks: each replicated on two.
  ShardedPair p = load_pair(pair_dir("dense-trained") + "/target", pair_dir("dense-trained") + "/draft", "bf16", 4);
  expect_lossless(p, "dense-trained N=4");
}

TEST(TensorParallelLossless, DemoPairUnderTwoRanks) {
  const char* env = std::getenv("SPECSERVE_SOURCE_DIR");
  const std::string demo = (env && *env ? std::string(env) : std::string(SPECSERVE_SOURCE_DIR)) + "/models/demo-coder";
  ShardedPair p = load_pair(demo + "/target", demo + "/drafter", "bf16", 2);
  expect_lossless(p, "demo-coder N=2");
}

}  // namespace
}  // namespace specserve::spec
