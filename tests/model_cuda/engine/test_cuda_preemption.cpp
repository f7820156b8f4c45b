// Preemption by swap on a GPU (engine/swap.h): the CUDA half of the swap primitives (pinned host
// blocks from cudaHostAlloc, cudaMemcpyAsync on the engine's stream) round-trips a target sequence's KV
// blocks and DeltaNet state bit for bit into new device blocks; and under a KV budget far below the
// requests' worst cases, 16 concurrent requests on a GPU target with its GPU DFlash drafter, T = 0 and
// seeded T > 0, give exactly the tokens and the drafts of each request run alone on the same GPU.
#include <algorithm>
#include <cstring>
#include <random>

#include "../../engine/sequence_bytes.h"
#include "../../spec/spec_test_util.h"
#include "../model_cuda_test_util.h"
#include "model/layers.h"

namespace specserve {
namespace {

using namespace specserve::spec::testing;

using swap_testing::decode_logits;
using swap_testing::sequence_state_bytes;

class CudaSwap : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override { SKIP_WITHOUT_GPU(); }
};

TEST_P(CudaSwap, TargetStateRoundTripsBitForBit) {
  Pair pair(GetParam(), "f32", "cuda");
  TargetModel& model = *pair.target;
  ASSERT_EQ(model.backend(), "cuda");
  std::vector<int32_t> prompt(41);
  for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<int32_t>((i * 37 + 11) % 300);
  auto swapped = model.new_sequence(), reference = model.new_sequence();
  for (SequenceState* s : {swapped.get(), reference.get()}) {
    ForwardBatch b;
    b.spans = {{s, prompt, SpanMode::Prefill, LogitsWanted::None}};
    model.forward(b);
    for (int32_t t : {3, 9, 27}) decode_logits(model, *s, t);
  }
  const std::vector<char> before = sequence_state_bytes(model, *swapped);
  const std::vector<void*> old_table = ModelInternals::blocks(*swapped);
  swapped->swap_out();
  auto squatter = model.new_sequence();
  {
    std::vector<int32_t> other(old_table.size() * kKvBlockSize, 5);
    ForwardBatch b;
    b.spans = {{squatter.get(), other, SpanMode::Prefill, LogitsWanted::None}};
    model.forward(b);
  }
  swapped->swap_in();
  for (void* b : ModelInternals::blocks(*swapped))
    EXPECT_EQ(std::find(old_table.begin(), old_table.end(), b), old_table.end());
  EXPECT_EQ(sequence_state_bytes(model, *swapped), before);
  for (int32_t t : {81, 4, 55, 12}) {
    const auto a = decode_logits(model, *swapped, t), b = decode_logits(model, *reference, t);
    ASSERT_EQ(a.size(), b.size());
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0) << "after token " << t;
  }
}

INSTANTIATE_TEST_SUITE_P(Pairs, CudaSwap, ::testing::Values("dense-trained", "hybrid-trained"), [](const auto& i) {
  std::string n = i.param;
  std::replace(n.begin(), n.end(), '-', '_');
  return n;
});

struct PreemptionCase {
  std::string pair;
  float temperature;
};
void PrintTo(const PreemptionCase& c, std::ostream* os) { *os << c.pair << " T=" << c.temperature; }

class CudaPreemption : public ::testing::TestWithParam<PreemptionCase> {
 protected:
  void SetUp() override { SKIP_WITHOUT_GPU(); }
};

TEST_P(CudaPreemption, EveryRequestEqualsItsRunAloneWithItsDrafts) {
  const PreemptionCase& c = GetParam();
  Pair pair(c.pair, "f32", "cuda");
  // The drafter in the row-invariant order, so that its drafts too are the same alone and in any batch
  // (its default, the free order, lets them depend on the batch; outputs never do).
  pair.drafter->set_matmul_order(MatmulOrder::RowInvariant);
  std::vector<engine::GenerationRequest> reqs;
  std::mt19937 rng(29);
  for (int i = 0; i < 16; ++i) {
    std::vector<int32_t> prompt(static_cast<size_t>(10 + 4 * i));
    for (auto& t : prompt) t = static_cast<int32_t>(rng() % 300);
    reqs.push_back(c.temperature > 0 ? sampled_request(prompt, 32, 900 + i, c.temperature, 0.9f)
                                     : greedy_request(prompt, 32));
  }
  spec::DFlashProposer alone_proposer(*pair.drafter, {.gamma = 7});
  auto alone_engine = make_engine(*pair.target, &alone_proposer);
  std::vector<engine::RequestRun> alone;
  for (const auto& r : reqs) alone.push_back(engine::run_request(*alone_engine, r));

  spec::DFlashProposer proposer(*pair.drafter, {.gamma = 7});
  engine::EngineOptions o = engine_options(32);
  o.prefill_chunk = 64;
  o.kv_blocks = 20;
  auto engine = make_engine(*pair.target, &proposer, o);
  const auto together = run_all(*engine, reqs);
  for (size_t i = 0; i < reqs.size(); ++i) {
    ASSERT_TRUE(together[i].error.empty()) << together[i].error;
    EXPECT_EQ(together[i].tokens, alone[i].tokens) << "request " << i;
    ASSERT_EQ(together[i].steps.size(), alone[i].steps.size()) << "request " << i;
    for (size_t k = 0; k < alone[i].steps.size(); ++k)
      EXPECT_EQ(together[i].steps[k].drafts, alone[i].steps[k].drafts) << "request " << i << " step " << k;
  }
  EXPECT_GT(engine->metrics().preemptions.load(), 0u);
  EXPECT_EQ(engine->metrics().swap_in_bytes.load(), engine->metrics().swap_out_bytes.load());
}

INSTANTIATE_TEST_SUITE_P(Cases, CudaPreemption,
                         ::testing::Values(PreemptionCase{"dense-trained", 0.0f},
                                           PreemptionCase{"hybrid-trained", 0.0f},
                                           PreemptionCase{"hybrid-trained", 0.8f}),
                         [](const auto& info) {
                           std::string n = info.param.pair + (info.param.temperature > 0 ? "_seeded" : "_greedy");
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

}  // namespace
}  // namespace specserve
