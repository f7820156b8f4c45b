#pragma once
// What the tensor-parallel lossless tests share on the CPU simulation (test_tensor_parallel_lossless.cpp) and
// on one GPU (../model_cuda/engine/test_cuda_tensor_parallel_lossless.cpp): a sharded target with its
// drafter, requests in the trained pairs' synthetic language, and the check that speculative decoding gives
// plain decoding's tokens.
#include "spec_test_util.h"

namespace specserve::spec::testing {

struct ShardedPair {
  std::unique_ptr<TargetModel> target;
  std::unique_ptr<DFlashDrafter> drafter;
};

// The target sharded over `ranks` on `backend` (every rank on the one GPU for "cuda"); the drafter beside it
// (on the target's backend).
inline ShardedPair load_pair(const std::string& target_dir, const std::string& drafter_dir, const std::string& dtype,
                             int ranks, const std::string& backend = "cpu") {
  ShardedPair p;
  p.target = TargetModel::load(target_dir, {.dtype = dtype, .backend = backend, .tensor_parallel = ranks});
  p.drafter = DFlashDrafter::load(drafter_dir, *p.target, dtype);
  return p;
}

inline std::vector<engine::GenerationRequest> requests(bool seeded, int count) {
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

// With the drafter, the tokens of plain decoding of the same sharded target, 4 requests sharing steps, at
// T = 0 and seeded T > 0; some drafts accepted (else the check is empty).
inline void expect_lossless(ShardedPair& pair, const std::string& what) {
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

}  // namespace specserve::spec::testing
