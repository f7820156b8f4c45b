#pragma once
// Helpers for the prefix-cache tests (docs/DESIGN.md §5) on any backend: a request's output with its
// logprobs, its cached prompt tokens and its speculation steps, collected from an Engine's stream;
// requests run one at a time or all at once; the comparisons of a cache-on run against a cache-off one.
// Shared by tests/engine/test_prefix_cache.cpp (CPU) and tests/model_cuda/engine (the same on a GPU).
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "engine/engine.h"
#include "engine/spec_step.h"
#include "stream_drain.h"
#include "model/target_model.h"

namespace specserve::test {

// Asks for every token's logprob and its top two, so that outputs are compared bit for bit.
inline engine::GenerationRequest with_logprobs(engine::GenerationRequest r) {
  r.params.sampling.logprobs = true;
  r.params.sampling.top_logprobs = 2;
  return r;
}

struct CacheRun {
  std::vector<int32_t> tokens;
  std::vector<float> logprobs;  // each token's logprob, then its top ones'
  int64_t cached = 0;           // usage.cached_tokens
  std::vector<engine::SpecStep> steps;
};

// Submits `r` with an observer that records its steps into *steps (read after the finishing event,
// which the stream's mutex orders after every observer call).
inline std::shared_ptr<engine::ResultStream> submit_observed(engine::Engine& e, engine::GenerationRequest r,
                                                             std::shared_ptr<std::vector<engine::SpecStep>> steps) {
  r.on_step = [steps](const engine::SpecStep& s) { steps->push_back(s); };
  return e.submit(std::move(r));
}

inline CacheRun collect_run(engine::ResultStream& s,
                            const std::shared_ptr<std::vector<engine::SpecStep>>& steps = nullptr) {
  CacheRun out;
  drain(s, [&](const engine::StreamEvent& e) {
    out.tokens.insert(out.tokens.end(), e.tokens.begin(), e.tokens.end());
    for (const auto& lp : e.logprobs) {
      out.logprobs.push_back(lp.logprob);
      for (const auto& t : lp.top) out.logprobs.push_back(t.logprob);
    }
    if (e.finished) {
      EXPECT_TRUE(e.error.empty()) << e.error;
      out.cached = e.usage.cached_tokens;
      if (steps) out.steps = *steps;
    }
  });
  return out;
}

inline CacheRun run_one(engine::Engine& e, const engine::GenerationRequest& r) {
  auto steps = std::make_shared<std::vector<engine::SpecStep>>();
  auto stream = submit_observed(e, r, steps);
  return collect_run(*stream, steps);
}

inline std::vector<CacheRun> run_sequentially(engine::Engine& e, const std::vector<engine::GenerationRequest>& reqs) {
  std::vector<CacheRun> out;
  for (const auto& r : reqs) out.push_back(run_one(e, r));
  return out;
}

// Submits every request at once (so they share steps) and waits for all of them.
inline std::vector<CacheRun> run_together(engine::Engine& e, const std::vector<engine::GenerationRequest>& reqs) {
  std::vector<std::shared_ptr<engine::ResultStream>> streams;
  std::vector<std::shared_ptr<std::vector<engine::SpecStep>>> steps;
  for (const auto& r : reqs) {
    steps.push_back(std::make_shared<std::vector<engine::SpecStep>>());
    streams.push_back(submit_observed(e, r, steps.back()));
  }
  std::vector<CacheRun> out;
  for (size_t i = 0; i < streams.size(); ++i) out.push_back(collect_run(*streams[i], steps[i]));
  return out;
}

// Tokens and logprobs bit for bit; `off` (the cache-off run) hit nothing.
inline void expect_same_outputs(const std::vector<CacheRun>& on, const std::vector<CacheRun>& off) {
  ASSERT_EQ(on.size(), off.size());
  for (size_t i = 0; i < on.size(); ++i) {
    EXPECT_EQ(on[i].tokens, off[i].tokens) << "request " << i;
    EXPECT_EQ(on[i].logprobs, off[i].logprobs) << "request " << i;
    EXPECT_EQ(off[i].cached, 0);
  }
}

// Tokens, and step by step the position, the drafts and how many were accepted (RequestRun or CacheRun).
template <class Got, class Want>
void expect_same_steps(const Got& got, const Want& want, const std::string& what) {
  EXPECT_EQ(got.tokens, want.tokens) << what;
  ASSERT_EQ(got.steps.size(), want.steps.size()) << what;
  for (size_t k = 0; k < want.steps.size(); ++k) {
    EXPECT_EQ(got.steps[k].position, want.steps[k].position) << what << " step " << k;
    EXPECT_EQ(got.steps[k].drafts, want.steps[k].drafts) << what << " step " << k;
    EXPECT_EQ(got.steps[k].accepted, want.steps[k].accepted) << what << " step " << k;
  }
}

// After the engine is idle every block of the target's pool in use is the cache's.
inline void expect_pool_is_the_cache(TargetModel& model, engine::Engine& e) {
  bool idle = false;
  for (int i = 0; i < 2000 && !idle; ++i) {
    idle = e.metrics().requests_running.load() == 0 && e.metrics().requests_waiting.load() == 0;
    if (!idle) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_TRUE(idle);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(e.metrics().kv_blocks_used.load(), 0);
  EXPECT_EQ(model.kv_pool()->blocks_in_use(), e.metrics().prefix_cache_blocks.load());
}

inline std::vector<int32_t> concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// Synthetic-language text the trained DFlash pairs (tests/fixtures/dflash) continue predictably, so that
// their drafts get accepted: ids 7, 12, ..., 202, from `phase` on.
inline std::vector<int32_t> synthetic(int n, int phase) {
  std::vector<int32_t> p;
  for (int k = 0; k < n; ++k) p.push_back(static_cast<int32_t>(7 + 5 * ((k + phase) % 40)));
  return p;
}

// n ids in [0, 300), below the trained pairs' special ids.
inline std::vector<int32_t> random_tokens(int n, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> p;
  for (int k = 0; k < n; ++k) p.push_back(static_cast<int32_t>(rng() % 300));
  return p;
}

}  // namespace specserve::test
