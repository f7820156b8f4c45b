// Preemption by swap with the DFlash drafter (engine/swap.h): under a KV budget far below the requests'
// worst cases, 16 concurrent requests on the trained dense and hybrid pairs, T = 0 and seeded T > 0,
// are swapped out (target KV and DeltaNet state, drafter context K/V and waiting rows) and back, and
// each gives exactly the tokens AND the drafts, step by step, of the same request run alone — so the
// drafter's context came back bit for bit too; also with the hybrid target sharded over 2 ranks. A drafter context's
// swap image round-trips directly.
#include <random>

#include "spec_test_util.h"

namespace specserve::spec {
namespace {

using namespace specserve::spec::testing;

struct PreemptionCase {
  std::string pair;
  float temperature;
  int ranks = 0;  // > 0: the target sharded over this many ranks (the CPU simulation, docs/DESIGN.md §6.3)
};
void PrintTo(const PreemptionCase& c, std::ostream* os) {
  *os << c.pair << " T=" << c.temperature << (c.ranks > 0 ? " N=" + std::to_string(c.ranks) : "");
}

std::vector<engine::GenerationRequest> requests(float temperature) {
  std::vector<engine::GenerationRequest> reqs;
  std::mt19937 rng(23);
  for (int i = 0; i < 16; ++i) {
    std::vector<int32_t> prompt;
    if (i % 2) {
      // Synthetic-language prompts the trained pairs continue predictably (drafts get accepted).
      for (int k = 0; k < 8 + i; ++k) prompt.push_back(static_cast<int32_t>(7 + 5 * ((k + i) % 40)));
    } else {
      for (int k = 0; k < 12 + 3 * i; ++k) prompt.push_back(static_cast<int32_t>(rng() % 300));
    }
    reqs.push_back(temperature > 0 ? sampled_request(prompt, 32, 500 + i, temperature, 0.9f)
                                   : greedy_request(prompt, 32));
  }
  return reqs;
}

class PreemptionLossless : public ::testing::TestWithParam<PreemptionCase> {};

TEST_P(PreemptionLossless, EveryRequestEqualsItsRunAloneWithItsDrafts) {
  const PreemptionCase& c = GetParam();
  Pair pair(c.pair, "f32", "cpu", c.ranks);
  const auto reqs = requests(c.temperature);

  DFlashProposer alone_proposer(*pair.drafter, {.gamma = 7});
  auto alone_engine = make_engine(*pair.target, &alone_proposer);
  std::vector<RequestRun> alone;
  for (const auto& r : reqs) alone.push_back(run_request(*alone_engine, r));

  DFlashProposer proposer(*pair.drafter, {.gamma = 7});
  engine::EngineOptions o = engine_options(32);
  o.prefill_chunk = 64;
  o.kv_blocks = 20;  // the longest request needs 7 blocks at its longest; all of them ~90
  auto engine = make_engine(*pair.target, &proposer, o);
  const auto together = run_all(*engine, reqs);

  int64_t accepted = 0;
  for (size_t i = 0; i < reqs.size(); ++i) {
    ASSERT_TRUE(together[i].error.empty()) << together[i].error;
    EXPECT_EQ(together[i].tokens, alone[i].tokens) << "request " << i;
    ASSERT_EQ(together[i].steps.size(), alone[i].steps.size()) << "request " << i;
    for (size_t k = 0; k < alone[i].steps.size(); ++k) {
      EXPECT_EQ(together[i].steps[k].position, alone[i].steps[k].position) << "request " << i << " step " << k;
      EXPECT_EQ(together[i].steps[k].drafts, alone[i].steps[k].drafts) << "request " << i << " step " << k;
      accepted += together[i].steps[k].accepted;
    }
  }
  const auto& mt = engine->metrics();
  EXPECT_GT(mt.preemptions.load(), 0u);
  EXPECT_GT(accepted, 0);  // it speculated, or this would prove little
  engine->shutdown(std::chrono::milliseconds(1000));
  EXPECT_EQ(mt.requests_swapped.load(), 0);
  EXPECT_EQ(mt.swap_in_bytes.load(), mt.swap_out_bytes.load());
}

INSTANTIATE_TEST_SUITE_P(Cases, PreemptionLossless,
                         ::testing::Values(PreemptionCase{"dense-trained", 0.0f},
                                           PreemptionCase{"hybrid-trained", 0.0f},
                                           PreemptionCase{"dense-trained", 0.8f},
                                           PreemptionCase{"hybrid-trained", 0.8f},
                                           // Swap under tensor parallelism: every rank's KV slice and DeltaNet state.
                                           PreemptionCase{"hybrid-trained", 0.8f, 2}),
                         [](const auto& info) {
                           std::string n = info.param.pair + (info.param.temperature > 0 ? "_seeded" : "_greedy") +
                                           (info.param.ranks > 0 ? "_tp" + std::to_string(info.param.ranks) : "");
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

// A drafter context's projected K/V and waiting rows come back bit for bit into new blocks.
TEST(DrafterSwap, ContextRoundTripsBitForBit) {
  Pair pair("hybrid-trained", "f32");
  const DFlashDrafter& d = *pair.drafter;
  auto seq = d.new_sequence();
  const int64_t W = seq->feature_width();
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> rows(static_cast<size_t>(40 * W));
  for (auto& x : rows) x = u(rng);
  append_rows(*seq, 0, std::span<const float>(rows).first(static_cast<size_t>(35 * W)));
  DrafterSequence* one[] = {seq.get()};
  d.project_context(one);                                                                    // 35 rows in the cache
  append_rows(*seq, 35, std::span<const float>(rows).subspan(static_cast<size_t>(35 * W)));  // 5 waiting

  const size_t bb = d.kv_block_bytes();
  auto cache_bytes = [&](const DrafterSequence& s) {
    std::vector<char> out;
    for (int64_t b = 0; b < (s.projected() + kKvBlockSize - 1) / kKvBlockSize; ++b) {
      const auto* p = static_cast<const char*>(s.blocks()[b]);
      out.insert(out.end(), p, p + bb);
    }
    return out;
  };
  const std::vector<char> before = cache_bytes(*seq);
  const void* first_block = seq->blocks()[0];
  seq->swap_out();
  EXPECT_EQ(seq->kv_blocks(), 0);
  EXPECT_EQ(seq->waiting_rows(), 5);  // still counted: they come back
  auto squatter = d.new_sequence();
  squatter->ensure_blocks(64);  // takes the freed blocks
  seq->swap_in();
  EXPECT_NE(seq->blocks()[0], first_block);
  EXPECT_EQ(cache_bytes(*seq), before);
  ASSERT_EQ(seq->waiting_features().size(), 1u);
  const TensorView w = seq->waiting_features()[0].view();
  ASSERT_EQ(w.dim(0), 5);
  EXPECT_EQ(std::memcmp(w.as<float>(), rows.data() + 35 * W, static_cast<size_t>(5 * W) * sizeof(float)), 0);
  // The page keeps its room: a row appended after the swap-in joins it.
  append_rows(*seq, 40, std::span<const float>(rows).first(static_cast<size_t>(W)));
  ASSERT_EQ(seq->waiting_features().size(), 1u);
  EXPECT_EQ(seq->waiting_features()[0].used, 6);
  EXPECT_EQ(std::memcmp(seq->waiting_features()[0].view().as<float>() + 5 * W, rows.data(),
                        static_cast<size_t>(W) * sizeof(float)),
            0);
}

}  // namespace
}  // namespace specserve::spec
