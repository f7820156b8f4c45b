// The engine on a real (tiny) model: each request's output is exactly what plain decoding of that
// request alone produces, whatever the batch (continuous batching, chunked prefill, queueing),
// for both model families; cancellation frees resources; stop strings; the verify path with a
// proposer keeps outputs identical.
#include <gtest/gtest.h>

#include <atomic>
#include <random>
#include <thread>

#include "engine_test_util.h"

using namespace specserve;
using namespace specserve::engine;
using namespace specserve::test;

namespace {

EngineOptions small_options() {
  EngineOptions o;
  o.max_seqs = 6;
  o.max_queue = 64;
  o.prefill_chunk = 64;
  o.max_batch_rows = 160;
  o.kv_blocks = 4096;
  return o;
}

class EngineFamilies : public ::testing::TestWithParam<std::string> {};

}  // namespace

TEST_P(EngineFamilies, AloneEqualsReferenceDecoding) {
  TinyModel m(GetParam());
  EngineOptions o = small_options();
  o.real_vocab = m.tokenizer.id_limit();
  Engine engine(*m.model, o, m.token_text());
  // Prompts shorter than one chunk, spanning several chunks, and a multiple of the chunk.
  int salt = 0;
  for (int n : {5, 64, 150}) {
    auto req = make_request(prompt_of(n, ++salt, m.tokenizer.id_limit()), 12);
    auto expected = reference_decode(m, req);
    Output got = collect(*engine.submit(req));
    EXPECT_EQ(got.tokens, expected) << "prompt length " << n;
    EXPECT_EQ(got.reason, FinishReason::Length);
    EXPECT_EQ(got.usage.prompt_tokens, n);
    EXPECT_EQ(got.usage.completion_tokens, 12);
  }
}

TEST_P(EngineFamilies, ConcurrentRequestsEqualAlone) {
  TinyModel m(GetParam());
  EngineOptions o = small_options();
  o.real_vocab = m.tokenizer.id_limit();
  std::vector<GenerationRequest> reqs;
  for (int i = 0; i < 16; ++i) {
    const int len = 3 + (i * 37) % 180;
    const int max_tokens = 4 + (i * 7) % 24;
    reqs.push_back(i % 2 ? make_request(prompt_of(len, i, m.tokenizer.id_limit()), max_tokens, 0.8f, 1000 + i)
                         : make_request(prompt_of(len, i, m.tokenizer.id_limit()), max_tokens));
  }
  std::vector<std::vector<int32_t>> alone;
  {
    Engine engine(*m.model, o, m.token_text());
    for (const auto& r : reqs) alone.push_back(collect(*engine.submit(r)).tokens);
  }
  Engine engine(*m.model, o, m.token_text());
  std::vector<std::shared_ptr<ResultStream>> streams;
  for (const auto& r : reqs) streams.push_back(engine.submit(r));  // 16 at once, 6 admitted at a time
  for (size_t i = 0; i < reqs.size(); ++i) {
    Output got = collect(*streams[i]);
    EXPECT_EQ(got.tokens, alone[i]) << "request " << i;
    EXPECT_EQ(got.tokens.size(), static_cast<size_t>(*reqs[i].params.stop.max_tokens));
  }
  EXPECT_GT(engine.metrics().steps.load(), 0u);
  // More rows than sequences per step on average: batching happened.
  EXPECT_GT(engine.metrics().step_rows.load(), engine.metrics().steps.load());
}

// The prefill hold (--prefill-hold-steps): as sequences finish, queued prompts are admitted one at a time
// beside decoding sequences and wait for company; their tokens stay those of each request alone.
TEST_P(EngineFamilies, PrefillHoldKeepsEveryRequestsTokens) {
  TinyModel m(GetParam());
  EngineOptions o = small_options();
  o.real_vocab = m.tokenizer.id_limit();
  std::vector<GenerationRequest> reqs;
  for (int i = 0; i < 16; ++i) {
    const int len = 3 + (i * 53) % 150;
    const int max_tokens = 4 + (i * 11) % 30;
    reqs.push_back(i % 3 ? make_request(prompt_of(len, 40 + i, m.tokenizer.id_limit()), max_tokens)
                         : make_request(prompt_of(len, 40 + i, m.tokenizer.id_limit()), max_tokens, 0.8f, 77 + i));
  }
  std::vector<std::vector<int32_t>> alone;
  {
    o.prefill_hold_steps = 0;
    Engine engine(*m.model, o, m.token_text());
    for (const auto& r : reqs) alone.push_back(collect(*engine.submit(r)).tokens);
    EXPECT_EQ(engine.metrics().prefill_held_steps.load(), 0u);
  }
  o.prefill_hold_steps = 8;
  Engine engine(*m.model, o, m.token_text());
  std::vector<std::shared_ptr<ResultStream>> streams;
  for (const auto& r : reqs) streams.push_back(engine.submit(r));
  for (size_t i = 0; i < reqs.size(); ++i) EXPECT_EQ(collect(*streams[i]).tokens, alone[i]) << "request " << i;
  EXPECT_GT(engine.metrics().prefill_held_steps.load(), 0u);
}

INSTANTIATE_TEST_SUITE_P(Families, EngineFamilies, ::testing::Values("qwen3", "qwen3_5"));

TEST(Engine, QueueingUnderASmallKvBudget) {
  TinyModel m("qwen3_5");
  EngineOptions o = small_options();
  o.real_vocab = m.tokenizer.id_limit();
  o.kv_blocks = 8;  // 128 positions: two 40+24-token requests at a time
  Engine engine(*m.model, o, m.token_text());
  std::vector<GenerationRequest> reqs;
  for (int i = 0; i < 6; ++i) reqs.push_back(make_request(prompt_of(40, 50 + i, m.tokenizer.id_limit()), 24));
  std::vector<std::shared_ptr<ResultStream>> streams;
  for (const auto& r : reqs) streams.push_back(engine.submit(r));
  EXPECT_GT(engine.metrics().requests_waiting.load() + engine.metrics().requests_running.load(), 2);
  for (size_t i = 0; i < reqs.size(); ++i) {
    EXPECT_EQ(collect(*streams[i]).tokens, reference_decode(m, reqs[i])) << i;
  }
  EXPECT_TRUE(wait_for_idle(engine));
  EXPECT_EQ(engine.metrics().kv_blocks_used.load(), 0);
  // A request that could never fit is refused up front, not queued forever.
  EXPECT_THROW(engine.submit(make_request(prompt_of(100, 9, m.tokenizer.id_limit()), 100)), Error);
}

TEST(Engine, CancellationFreesTheSequenceWhileOthersContinue) {
  TinyModel m("qwen3_5");
  EngineOptions o = small_options();
  o.real_vocab = m.tokenizer.id_limit();
  Engine engine(*m.model, o, m.token_text());
  auto long_req = make_request(prompt_of(30, 1, m.tokenizer.id_limit()), 5000);
  auto short_req = make_request(prompt_of(20, 2, m.tokenizer.id_limit()), 40);
  auto long_stream = engine.submit(long_req);
  auto short_stream = engine.submit(short_req);
  // Wait for the long one to produce something, then cancel it.
  std::vector<StreamEvent> evs;
  ASSERT_TRUE(long_stream->wait(evs, std::chrono::seconds(60)));
  const int64_t blocks_with_both = engine.metrics().kv_blocks_used.load();
  long_stream->cancel();
  Output cancelled = collect(*long_stream);
  EXPECT_EQ(cancelled.reason, FinishReason::Cancelled);
  EXPECT_LT(cancelled.usage.completion_tokens, 5000);
  Output done = collect(*short_stream);
  EXPECT_EQ(done.tokens, reference_decode(m, short_req));
  EXPECT_TRUE(wait_for_idle(engine));
  EXPECT_GT(blocks_with_both, 0);
  EXPECT_EQ(engine.metrics().kv_blocks_used.load(), 0);
  EXPECT_EQ(engine.metrics().requests_finished[static_cast<int>(FinishReason::Cancelled)].load(), 1u);
  // Cancelling a queued request works too (the engine is idle, so it is seen at once).
  auto q = engine.submit(make_request(prompt_of(10, 3, m.tokenizer.id_limit()), 3000));
  q->cancel();
  EXPECT_EQ(collect(*q).reason, FinishReason::Cancelled);
}

TEST(Engine, StopStringEndsOutputBeforeIt) {
  TinyModel m("qwen3");
  EngineOptions o = small_options();
  o.real_vocab = m.tokenizer.id_limit();
  Engine engine(*m.model, o, m.token_text());
  auto req = make_request(prompt_of(12, 4, m.tokenizer.id_limit()), 40);
  Output full = collect(*engine.submit(req));
  ASSERT_GE(full.text.size(), 12u);
  // A stop string taken from the middle of the greedy text.
  const std::string stop = full.text.substr(full.text.size() / 2, 3);
  const size_t at = full.text.find(stop);
  req.params.stop.stop = {stop};
  Output cut = collect(*engine.submit(req));
  EXPECT_EQ(cut.reason, FinishReason::Stop);
  EXPECT_EQ(cut.text, full.text.substr(0, at));
  EXPECT_EQ(cut.text.find(stop), std::string::npos);
}

namespace {
// Proposes the true continuation (from a reference run) with some drafts corrupted, so verify
// rounds accept a varying prefix; the engine's outputs must not change at all.
class OracleProposer : public DraftProposer {
 public:
  OracleProposer(int gamma, std::vector<std::vector<int32_t>> truth, std::vector<int64_t> prompt_lens)
      : gamma_(gamma), truth_(std::move(truth)), prompt_lens_(std::move(prompt_lens)) {}
  int gamma() const override { return gamma_; }
  std::vector<int> capture_layers() const override { return {0}; }
  std::unique_ptr<DraftContext> new_context() override {
    auto c = std::make_unique<Ctx>(live_);
    c->index = next_++;
    return c;
  }
  void append_contexts(std::span<const ContextRows> rows) override {
    ++handoffs_;
    for (const ContextRows& r : rows) {
      auto& c = static_cast<Ctx&>(*r.context);
      // Rows must arrive in order, once per committed position, with one feature row each (a CPU
      // target: on the host).
      EXPECT_EQ(r.first_position, c.committed);
      EXPECT_EQ(r.features.ndim(), 2);
      EXPECT_EQ(r.features.dim(0), static_cast<int64_t>(r.tokens.size()));
      EXPECT_GT(r.features.dim(1), 0);
      EXPECT_EQ(r.features.device, Device::CPU);
      c.committed += static_cast<int64_t>(r.tokens.size());
    }
  }
  void propose(std::span<ProposeItem> items) override {
    ++batches_;
    for (auto& it : items) {
      auto& c = static_cast<Ctx&>(*it.context);
      EXPECT_EQ(it.pending_position, c.committed);
      const auto& t = truth_[c.index];
      const int64_t gen = it.pending_position - prompt_lens_[c.index];  // index of the pending token in t
      it.drafts->clear();
      for (int k = 0; k < it.max_drafts; ++k) {
        const int64_t idx = gen + 1 + k;
        int32_t d = idx < static_cast<int64_t>(t.size()) ? t[idx] : 0;
        if (rng_() % 4 == 0) d = static_cast<int32_t>(rng_() % 50);  // a wrong draft now and then
        it.drafts->push_back(d);
      }
    }
  }
  int batches_ = 0;
  std::atomic<uint64_t> handoffs_ = 0;                                              // append_contexts calls
  std::shared_ptr<std::atomic<int>> live_ = std::make_shared<std::atomic<int>>(0);  // contexts alive

 private:
  struct Ctx : DraftContext {
    explicit Ctx(std::shared_ptr<std::atomic<int>> l) : live(std::move(l)) { live->fetch_add(1); }
    ~Ctx() override { live->fetch_sub(1); }
    std::shared_ptr<std::atomic<int>> live;
    int index = 0;
    int64_t committed = 0;
  };
  int gamma_;
  std::vector<std::vector<int32_t>> truth_;
  std::vector<int64_t> prompt_lens_;
  int next_ = 0;
  std::mt19937 rng_{11};
};
}  // namespace

TEST(Engine, VerifyPathKeepsOutputsIdentical) {
  TinyModel m("qwen3_5");
  EngineOptions o = small_options();
  o.real_vocab = m.tokenizer.id_limit();
  std::vector<GenerationRequest> reqs;
  std::vector<std::vector<int32_t>> truth;
  std::vector<int64_t> lens;
  for (int i = 0; i < 6; ++i) {
    reqs.push_back(i % 2 ? make_request(prompt_of(10 + 30 * i, 70 + i, m.tokenizer.id_limit()), 30, 0.9f, 5 + i)
                         : make_request(prompt_of(10 + 30 * i, 70 + i, m.tokenizer.id_limit()), 30));
    truth.push_back(reference_decode(m, reqs.back()));
    lens.push_back(static_cast<int64_t>(reqs.back().prompt.size()));
  }
  OracleProposer proposer(4, truth, lens);
  Engine engine(*m.model, o, m.token_text(), &proposer);
  std::vector<std::shared_ptr<ResultStream>> streams;
  for (const auto& r : reqs) streams.push_back(engine.submit(r));  // admission order = context index
  for (size_t i = 0; i < reqs.size(); ++i) EXPECT_EQ(collect(*streams[i]).tokens, truth[i]) << i;
  const auto& mt = engine.metrics();
  EXPECT_GT(proposer.batches_, 0);
  EXPECT_GT(mt.spec_num_drafts.load(), 0u);
  EXPECT_GT(mt.spec_num_accepted_tokens.load(), 0u);
  EXPECT_LT(mt.spec_num_accepted_tokens.load(), mt.spec_num_draft_tokens.load());
  EXPECT_GT(mt.spec_accepted_per_pos[0].load(), mt.spec_accepted_per_pos[3].load());
  // Fewer steps than tokens: verify rounds emitted several tokens at once.
  EXPECT_LT(mt.steps.load(), 6u * 30u);
  EXPECT_TRUE(wait_for_idle(engine));
  EXPECT_EQ(proposer.live_->load(), 0);  // every drafter context was freed with its sequence
  // The context rows of a step reach the proposer in one hand-off, whatever the number of sequences.
  EXPECT_GT(proposer.handoffs_.load(), 0u);
  EXPECT_LE(proposer.handoffs_.load(), mt.steps.load());
}

// Above spec_max_batch decoding sequences the engine proposes no drafts (plain decode steps), and
// speculates again once fewer decode; the outputs stay those of reference decoding throughout.
TEST(Engine, SpeculationPausesAboveTheBatchCap) {
  TinyModel m("qwen3");
  EngineOptions o = small_options();
  o.real_vocab = m.tokenizer.id_limit();
  std::vector<GenerationRequest> reqs;
  std::vector<std::vector<int32_t>> truth;
  std::vector<int64_t> lens;
  for (int i = 0; i < 5; ++i) {
    // Different lengths: the batch shrinks below the cap before the last requests finish.
    reqs.push_back(make_request(prompt_of(12 + 7 * i, 90 + i, m.tokenizer.id_limit()), 12 + 10 * i));
    truth.push_back(reference_decode(m, reqs.back()));
    lens.push_back(static_cast<int64_t>(reqs.back().prompt.size()));
  }
  // Runs the requests with a cap; returns (paused steps, verify rounds).
  auto run = [&](int cap) {
    o.spec_max_batch = cap;
    OracleProposer proposer(4, truth, lens);
    Engine engine(*m.model, o, m.token_text(), &proposer);
    std::vector<std::shared_ptr<ResultStream>> streams;
    for (const auto& r : reqs) streams.push_back(engine.submit(r));
    for (size_t i = 0; i < reqs.size(); ++i)
      EXPECT_EQ(collect(*streams[i]).tokens, truth[i]) << "cap " << cap << " request " << i;
    EXPECT_TRUE(wait_for_idle(engine));
    EXPECT_EQ(proposer.live_->load(), 0);
    return std::pair{engine.metrics().spec_paused_steps.load(), engine.metrics().spec_num_drafts.load()};
  };
  const auto [paused, rounds] = run(2);
  EXPECT_GT(paused, 0u);  // five sequences decoded at once: above the cap
  EXPECT_GT(rounds, 0u);  // and speculation resumed with two or fewer
  const auto [paused_uncapped, rounds_uncapped] = run(0);
  EXPECT_EQ(paused_uncapped, 0u);
  EXPECT_GT(rounds_uncapped, rounds);
}

TEST(Engine, CancellingASpeculatingSequenceFreesItsDrafterContext) {
  TinyModel m("qwen3_5");
  EngineOptions o = small_options();
  o.real_vocab = m.tokenizer.id_limit();
  auto req = make_request(prompt_of(20, 90, m.tokenizer.id_limit()), 3000);
  OracleProposer proposer(3, {std::vector<int32_t>(4000, 1)}, {20});
  Engine engine(*m.model, o, m.token_text(), &proposer);
  auto stream = engine.submit(req);
  std::vector<StreamEvent> evs;
  ASSERT_TRUE(stream->wait(evs, std::chrono::seconds(60)));
  EXPECT_EQ(proposer.live_->load(), 1);
  stream->cancel();
  EXPECT_EQ(collect(*stream).reason, FinishReason::Cancelled);
  EXPECT_TRUE(wait_for_idle(engine));
  EXPECT_EQ(proposer.live_->load(), 0);
  EXPECT_EQ(engine.metrics().kv_blocks_used.load(), 0);
}

TEST(Engine, RequestTimeoutCancelsAndFrees) {
  TinyModel m("qwen3");
  EngineOptions o = small_options();
  o.real_vocab = m.tokenizer.id_limit();
  Engine engine(*m.model, o, m.token_text());
  auto req = make_request(prompt_of(16, 5, m.tokenizer.id_limit()), 100000 / 16);
  req.deadline = Clock::now() + std::chrono::milliseconds(200);
  Output out = collect(*engine.submit(req));
  EXPECT_EQ(out.reason, FinishReason::Cancelled);
  EXPECT_LT(out.usage.completion_tokens, 100000 / 16);
  EXPECT_TRUE(wait_for_idle(engine));
  EXPECT_EQ(engine.metrics().kv_blocks_used.load(), 0);
}

TEST(Engine, ShutdownCancelsWhatIsLeftAfterTheGrace) {
  TinyModel m("qwen3");
  EngineOptions o = small_options();
  o.real_vocab = m.tokenizer.id_limit();
  Engine engine(*m.model, o, m.token_text());
  auto quick = engine.submit(make_request(prompt_of(8, 6, m.tokenizer.id_limit()), 4));
  auto slow = engine.submit(make_request(prompt_of(8, 7, m.tokenizer.id_limit()), 100000 / 16));
  std::vector<StreamEvent> evs;
  ASSERT_TRUE(slow->wait(evs, std::chrono::seconds(60)));
  engine.shutdown(std::chrono::milliseconds(300));
  EXPECT_EQ(collect(*quick).reason, FinishReason::Length);  // finished within the grace
  Output rest = collect(*slow);
  EXPECT_EQ(rest.reason, FinishReason::Cancelled);
  EXPECT_THROW(engine.submit(make_request(prompt_of(8, 8, m.tokenizer.id_limit()), 4)), QueueFull);
}
