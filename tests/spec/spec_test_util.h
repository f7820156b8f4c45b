#pragma once
// Helpers for the DFlash tests: the reference fixture pairs (tests/fixtures/dflash/README.md), their
// traces, and running requests through an Engine with or without the DFlash proposer.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "model/target_model.h"
#include "spec/dflash_drafter.h"
#include "spec/dflash_proposer.h"
#include "spec/run_request.h"

namespace specserve::spec::testing {

// $SPECSERVE_SOURCE_DIR, when set, overrides the build's source tree (a test binary copied to the
// GPU machine finds the fixtures there).
inline std::string pair_dir(const std::string& pair) {
  const char* env = std::getenv("SPECSERVE_SOURCE_DIR");
  return (env && *env ? std::string(env) : std::string(SPECSERVE_SOURCE_DIR)) + "/tests/fixtures/dflash/" + pair;
}

struct TraceStep {
  int64_t pos = 0;
  std::vector<int32_t> drafts;
  int accepted = 0;
  std::vector<int32_t> emitted;
};

struct Trace {
  // Fixtures written before tools/reference/dflash/make_fixtures.py reloaded the saved checkpoints
  // ran the reference with bf16-rounded rotary inv_freq (a `.to(bfloat16).float()` round trip of
  // the in-memory models), i.e. not exactly the f32 model the files describe: logits differ by
  // ~1e-3 relative, enough to flip a few low-margin drafts. Regenerated fixtures say
  // "rope_inv_freq": "f32" and are compared strictly. (With bf16-rounded inv_freq patched into
  // our RoPE, the legacy fixtures match to 3e-6 and every draft: tests/fixtures/dflash/README.md.)
  bool exact_rope = false;
  std::vector<int32_t> prompt;
  int64_t max_new_tokens = 0;
  std::vector<int32_t> generated, greedy;
  std::vector<TraceStep> steps;
};

inline Trace load_trace(const std::string& pair) {
  std::ifstream f(pair_dir(pair) + "/trace.json");
  const nlohmann::json j = nlohmann::json::parse(f);
  Trace t;
  t.exact_rope = j.value("rope_inv_freq", "") == "f32";
  t.prompt = j.at("prompt_ids").get<std::vector<int32_t>>();
  t.max_new_tokens = j.at("max_new_tokens").get<int64_t>();
  t.generated = j.at("generated_ids").get<std::vector<int32_t>>();
  t.greedy = j.at("greedy_ids").get<std::vector<int32_t>>();
  for (const auto& s : j.at("steps"))
    t.steps.push_back({s.at("pos").get<int64_t>(), s.at("drafts").get<std::vector<int32_t>>(), s.at("accepted").get<int>(),
                       s.at("emitted").get<std::vector<int32_t>>()});
  return t;
}

// A target + drafter pair loaded with one dtype ("f32" for parity with the fp32 reference); the
// target on `backend` ("cpu" or "cuda"), the drafter always on the CPU.
struct Pair {
  std::unique_ptr<TargetModel> target;
  std::unique_ptr<DFlashDrafter> drafter;
  Pair(const std::string& pair, const std::string& dtype, const std::string& backend = "cpu")
      : target(TargetModel::load(pair_dir(pair) + "/target", {.dtype = dtype, .backend = backend})),
        drafter(DFlashDrafter::load(pair_dir(pair) + "/draft", *target, dtype)) {}
};

inline engine::EngineOptions engine_options(int max_seqs = 8) {
  engine::EngineOptions o;
  o.max_seqs = max_seqs;
  o.kv_blocks = 4096;
  return o;
}

inline std::unique_ptr<engine::Engine> make_engine(TargetModel& target, engine::DraftProposer* proposer,
                                                   engine::EngineOptions options = engine_options()) {
  return std::make_unique<engine::Engine>(target, options, [](int32_t) { return std::string(); }, proposer);
}

// Greedy (T = 0) generation of exactly max_tokens tokens (EOS ignored).
inline engine::GenerationRequest greedy_request(const std::vector<int32_t>& prompt, int64_t max_tokens) {
  engine::GenerationRequest r;
  r.prompt = prompt;
  r.params.sampling.temperature = 0.0f;
  r.params.stop.max_tokens = max_tokens;
  r.params.stop.ignore_eos = true;
  return r;
}

inline engine::GenerationRequest sampled_request(const std::vector<int32_t>& prompt, int64_t max_tokens, uint64_t seed,
                                                 float temperature = 1.0f, float top_p = 1.0f) {
  engine::GenerationRequest r = greedy_request(prompt, max_tokens);
  r.params.sampling.temperature = temperature;
  r.params.sampling.top_p = top_p;
  r.params.sampling.seed = seed;
  return r;
}

// Submits every request at once (so they share steps) and waits for all of them.
inline std::vector<RequestRun> run_all(engine::Engine& engine, std::vector<engine::GenerationRequest> requests) {
  std::vector<std::shared_ptr<engine::ResultStream>> streams;
  std::vector<std::shared_ptr<std::vector<engine::SpecStep>>> steps;
  for (auto& r : requests) {
    auto st = std::make_shared<std::vector<engine::SpecStep>>();
    r.on_step = [st](const engine::SpecStep& s) { st->push_back(s); };
    steps.push_back(st);
    streams.push_back(engine.submit(std::move(r)));
  }
  std::vector<RequestRun> runs(streams.size());
  for (size_t i = 0; i < streams.size(); ++i) {
    std::vector<engine::StreamEvent> events;
    for (bool done = false; !done;) {
      events.clear();
      streams[i]->wait(events, std::chrono::milliseconds(1000));
      for (auto& ev : events) {
        runs[i].tokens.insert(runs[i].tokens.end(), ev.tokens.begin(), ev.tokens.end());
        if (ev.finished) {
          runs[i].finish_reason = ev.finish_reason;
          runs[i].error = ev.error;
          done = true;
        }
      }
    }
    runs[i].steps = *steps[i];
  }
  return runs;
}

}  // namespace specserve::spec::testing
