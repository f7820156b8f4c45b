// KV blocks on demand and preemption by swap (engine/kv_budget.h, engine/swap.h) on a real (tiny)
// model: with a KV budget far smaller than the requests' worst cases, 16+ concurrent requests — plain
// and speculative, T = 0 and seeded T > 0 — are admitted for what they need now, running sequences are
// swapped out to host memory and back, and every output equals that request decoded alone; a swapped-
// out sequence that cannot come back waits and completes later; without swap space the engine admits
// by worst case and never preempts; the metrics count it all.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <thread>
#include <tuple>

#include "engine/kv_budget.h"
#include "engine_test_util.h"

using namespace specserve;
using namespace specserve::engine;
using namespace specserve::test;

namespace {

EngineOptions tight_options(const TinyModel& m, int64_t kv_blocks) {
  EngineOptions o;
  o.max_seqs = 32;
  o.max_queue = 64;
  o.prefill_chunk = 64;
  o.max_batch_rows = 160;
  o.kv_blocks = kv_blocks;
  o.real_vocab = m.tokenizer.id_limit();
  return o;
}

std::vector<GenerationRequest> many_requests(const TinyModel& m, float temperature, int n = 16) {
  std::vector<GenerationRequest> reqs;
  for (int i = 0; i < n; ++i)
    reqs.push_back(make_request(prompt_of(10 + 4 * i, 200 + i, m.tokenizer.id_limit()), 30, temperature, 40 + i));
  return reqs;
}

// Proposes the true continuation with every third draft wrong (deterministic), so verify rounds
// accept varying prefixes; counts swaps of its contexts and checks they come back where they were.
class TruthProposer : public DraftProposer {
 public:
  TruthProposer(int gamma, std::vector<std::vector<int32_t>> truth, std::vector<int64_t> prompt_lens)
      : gamma_(gamma), truth_(std::move(truth)), prompt_lens_(std::move(prompt_lens)) {}
  int gamma() const override { return gamma_; }
  std::vector<int> capture_layers() const override { return {0}; }
  std::unique_ptr<DraftContext> new_context() override {
    auto c = std::make_unique<Ctx>(this);
    c->index = next_++;
    return c;
  }
  void append_contexts(std::span<const ContextRows> rows) override {
    for (const ContextRows& r : rows) {
      auto& c = static_cast<Ctx&>(*r.context);
      EXPECT_FALSE(c.swapped);
      EXPECT_EQ(r.first_position, c.committed);
      c.committed += static_cast<int64_t>(r.tokens.size());
    }
  }
  void propose(std::span<ProposeItem> items) override {
    for (auto& it : items) {
      auto& c = static_cast<Ctx&>(*it.context);
      EXPECT_FALSE(c.swapped);
      EXPECT_EQ(it.pending_position, c.committed);
      const auto& t = truth_[static_cast<size_t>(c.index)];
      const int64_t gen = it.pending_position - prompt_lens_[static_cast<size_t>(c.index)];
      it.drafts->clear();
      for (int k = 0; k < it.max_drafts; ++k) {
        const int64_t idx = gen + 1 + k;
        int32_t d = idx < static_cast<int64_t>(t.size()) ? t[static_cast<size_t>(idx)] : 0;
        if ((idx + k) % 3 == 2) d = (d + 1) % 50;
        it.drafts->push_back(d);
      }
    }
  }
  int swaps_out = 0, swaps_in = 0;

 private:
  struct Ctx : DraftContext {
    explicit Ctx(TruthProposer* p) : owner(p) {}
    void swap_out() override {
      EXPECT_FALSE(swapped);
      swapped = true;
      ++owner->swaps_out;
    }
    void swap_in() override {
      EXPECT_TRUE(swapped);
      swapped = false;
      ++owner->swaps_in;
    }
    TruthProposer* owner;
    int index = 0;
    int64_t committed = 0;
    bool swapped = false;
  };
  int gamma_;
  std::vector<std::vector<int32_t>> truth_;
  std::vector<int64_t> prompt_lens_;
  int next_ = 0;
};

void expect_swap_metrics_settled(const EngineMetrics& mt) {
  EXPECT_EQ(mt.requests_swapped.load(), 0);
  EXPECT_EQ(mt.swap_space_used_bytes.load(), 0);
  EXPECT_EQ(mt.swap_in_bytes.load(), mt.swap_out_bytes.load());
  EXPECT_EQ(mt.kv_blocks_used.load(), 0);
}

class Preemption : public ::testing::TestWithParam<std::tuple<std::string, float>> {};

TEST_P(Preemption, PlainOutputsEqualAloneUnderATinyBudget) {
  const auto& [family, temperature] = GetParam();
  TinyModel m(family);
  // Worst cases of up to 6 blocks each, 16 requests: ~4x oversubscribed.
  const auto reqs = many_requests(m, temperature);
  // The references first: the model runs one forward at a time.
  std::vector<std::vector<int32_t>> alone;
  for (const auto& r : reqs) alone.push_back(reference_decode(m, r));
  Engine engine(*m.model, tight_options(m, 24), m.token_text());
  std::vector<std::shared_ptr<ResultStream>> streams;
  for (const auto& r : reqs) streams.push_back(engine.submit(r));
  for (size_t i = 0; i < reqs.size(); ++i) {
    const Output out = collect(*streams[i]);
    EXPECT_EQ(out.reason, FinishReason::Length) << i;
    EXPECT_EQ(out.tokens, alone[i]) << i;
  }
  ASSERT_TRUE(wait_for_idle(engine));
  const EngineMetrics& mt = engine.metrics();
  EXPECT_GT(mt.preemptions.load(), 0u);
  EXPECT_GT(mt.swap_out_bytes.load(), 0u);
  expect_swap_metrics_settled(mt);
  EXPECT_EQ(mt.requests_finished[static_cast<int>(FinishReason::Error)].load(), 0u);
}

TEST_P(Preemption, SpeculativeOutputsEqualAloneUnderATinyBudget) {
  const auto& [family, temperature] = GetParam();
  TinyModel m(family);
  const auto reqs = many_requests(m, temperature, 18);
  std::vector<std::vector<int32_t>> truth;
  std::vector<int64_t> lens;
  for (const auto& r : reqs) {
    truth.push_back(reference_decode(m, r));
    lens.push_back(static_cast<int64_t>(r.prompt.size()));
  }
  TruthProposer proposer(4, truth, lens);
  Engine engine(*m.model, tight_options(m, 24), m.token_text(), &proposer);
  std::vector<std::shared_ptr<ResultStream>> streams;
  for (const auto& r : reqs) streams.push_back(engine.submit(r));  // admission order = context index
  for (size_t i = 0; i < reqs.size(); ++i) EXPECT_EQ(collect(*streams[i]).tokens, truth[i]) << i;
  ASSERT_TRUE(wait_for_idle(engine));
  const EngineMetrics& mt = engine.metrics();
  EXPECT_GT(mt.preemptions.load(), 0u);
  EXPECT_GT(mt.spec_num_accepted_tokens.load(), 0u);
  EXPECT_EQ(static_cast<uint64_t>(proposer.swaps_out), mt.preemptions.load());
  EXPECT_EQ(proposer.swaps_in, proposer.swaps_out);
  expect_swap_metrics_settled(mt);
}

INSTANTIATE_TEST_SUITE_P(FamiliesAndTemperatures, Preemption,
                         ::testing::Combine(::testing::Values("qwen3", "qwen3_5"), ::testing::Values(0.0f, 0.9f)));

// A swapped-out sequence comes back only when its blocks are free: here not before the older one
// finishes. A (worst 9 blocks) and B (worst 8) share a 10-block budget; at 80 positions each they need
// 12, B (the newer) is swapped out, waits while A runs alone, and completes after it.
TEST(Preemption, SwappedSequenceWaitsAndCompletesLater) {
  TinyModel m("qwen3_5");
  Engine engine(*m.model, tight_options(m, 10), m.token_text());
  std::mutex mu;
  std::vector<std::pair<char, int64_t>> log;  // (request, position) per decode step, in step order
  auto observe = [&](char who) {
    return [&mu, &log, who](const SpecStep& s) {
      std::lock_guard lock(mu);
      log.push_back({who, s.position});
    };
  };
  GenerationRequest a = make_request(prompt_of(16, 31, m.tokenizer.id_limit()), 120);
  GenerationRequest b = make_request(prompt_of(16, 32, m.tokenizer.id_limit()), 100);
  const auto alone_a = reference_decode(m, a), alone_b = reference_decode(m, b);
  a.on_step = observe('A');
  b.on_step = observe('B');
  auto sa = engine.submit(a);
  auto sb = engine.submit(b);
  EXPECT_EQ(collect(*sa).tokens, alone_a);
  EXPECT_EQ(collect(*sb).tokens, alone_b);
  ASSERT_TRUE(wait_for_idle(engine));
  EXPECT_EQ(engine.metrics().preemptions.load(), 1u);
  expect_swap_metrics_settled(engine.metrics());

  std::lock_guard lock(mu);
  size_t last_a = 0;
  for (size_t i = 0; i < log.size(); ++i)
    if (log[i].first == 'A') last_a = i;
  // B stopped at 80 positions, A went on alone to its end, then B resumed where it stopped.
  size_t alone = 0;
  for (size_t i = last_a + 1; i-- > 0 && log[i].first == 'A';) ++alone;
  EXPECT_GE(alone, 40u);
  ASSERT_LT(last_a + 1, log.size());
  EXPECT_EQ(log[last_a + 1].first, 'B');
  EXPECT_EQ(log[last_a + 1].second, log[last_a - alone].second + 1);
}

// Cancelling a swapped-out request ends it and frees its host image; the other one is unaffected.
TEST(Preemption, CancellingASwappedOutRequestFreesItsImage) {
  TinyModel m("qwen3_5");
  GenerationRequest a = make_request(prompt_of(16, 31, m.tokenizer.id_limit()), 120);
  GenerationRequest b = make_request(prompt_of(16, 32, m.tokenizer.id_limit()), 100);
  const auto alone_a = reference_decode(m, a);
  Engine engine(*m.model, tight_options(m, 10), m.token_text());
  auto sa = engine.submit(a);
  auto sb = engine.submit(b);
  for (int i = 0; i < 20000 && engine.metrics().preemptions.load() == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_EQ(engine.metrics().preemptions.load(), 1u);
  sb->cancel();
  EXPECT_EQ(collect(*sb).reason, FinishReason::Cancelled);
  EXPECT_EQ(collect(*sa).tokens, alone_a);
  ASSERT_TRUE(wait_for_idle(engine));
  EXPECT_EQ(engine.metrics().requests_swapped.load(), 0);
  EXPECT_EQ(engine.metrics().swap_space_used_bytes.load(), 0);
  EXPECT_EQ(engine.metrics().kv_blocks_used.load(), 0);
}

// A swap space for two requests at their longest: requests beyond what it can cover wait in the queue,
// the space is never overcommitted, nothing fails, and every output is still that of the request alone.
TEST(Preemption, ASmallSwapSpaceIsNeverExceeded) {
  TinyModel m("qwen3_5");
  const auto reqs = many_requests(m, 0.0f);
  std::vector<std::vector<int32_t>> alone;
  for (const auto& r : reqs) alone.push_back(reference_decode(m, r));
  int64_t longest = 0;
  for (const auto& r : reqs)
    longest = std::max<int64_t>(longest, static_cast<int64_t>(r.prompt.size()) + *r.params.stop.max_tokens);
  EngineOptions o = tight_options(m, 24);
  o.swap_space_bytes = 2 * m.model->new_sequence()->swap_bytes(longest);
  Engine engine(*m.model, o, m.token_text());
  std::vector<std::shared_ptr<ResultStream>> streams;
  for (const auto& r : reqs) streams.push_back(engine.submit(r));
  std::vector<Output> outs(reqs.size());
  std::atomic<bool> done = false;
  std::thread reader([&] {
    for (size_t i = 0; i < reqs.size(); ++i) outs[i] = collect(*streams[i]);
    done = true;
  });
  int64_t most_used = 0;
  while (!done.load()) {
    most_used = std::max(most_used, engine.metrics().swap_space_used_bytes.load());
    std::this_thread::yield();
  }
  reader.join();
  for (size_t i = 0; i < reqs.size(); ++i) EXPECT_EQ(outs[i].tokens, alone[i]) << i;
  EXPECT_LE(most_used, static_cast<int64_t>(o.swap_space_bytes));
  EXPECT_GT(engine.metrics().preemptions.load(), 0u);
  ASSERT_TRUE(wait_for_idle(engine));
  EXPECT_EQ(engine.metrics().requests_finished[static_cast<int>(FinishReason::Error)].load(), 0u);
  expect_swap_metrics_settled(engine.metrics());
}

// Without swap space nothing may be preempted: a request is admitted only while every admitted
// sequence's worst case fits the budget; the others wait in the queue and complete later.
TEST(Preemption, NoSwapSpaceMeansWorstCaseAdmissionAndWaiting) {
  TinyModel m("qwen3");
  EngineOptions o = tight_options(m, 24);
  o.swap_space_bytes = 0;
  const auto reqs = many_requests(m, 0.0f);
  std::vector<std::vector<int32_t>> alone;
  for (const auto& r : reqs) alone.push_back(reference_decode(m, r));
  Engine engine(*m.model, o, m.token_text());
  std::vector<std::shared_ptr<ResultStream>> streams;
  for (const auto& r : reqs) streams.push_back(engine.submit(r));
  for (size_t i = 0; i < reqs.size(); ++i) EXPECT_EQ(collect(*streams[i]).tokens, alone[i]) << i;
  ASSERT_TRUE(wait_for_idle(engine));
  EXPECT_EQ(engine.metrics().preemptions.load(), 0u);
  expect_swap_metrics_settled(engine.metrics());
}

}  // namespace
