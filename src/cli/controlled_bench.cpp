#include "cli/controlled_bench.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <random>
#include <set>

#include "cli/controlled_draft_proposer.h"
#include "core/error.h"
#include "engine/engine.h"
#include "spec/dflash_proposer.h"

namespace specserve::cli {

namespace {

using Clock = std::chrono::steady_clock;

struct Pass {
  std::vector<std::vector<int32_t>> outputs;
  std::vector<std::vector<engine::SpecStep>> steps;
  double seconds = 0;
};

// Submits every request at once, waits for all of them and stops the engine (so every step observer
// has run). A request that fails is an Error.
Pass run_pass(engine::Engine& engine, const std::vector<engine::GenerationRequest>& requests) {
  Pass pass;
  pass.outputs.resize(requests.size());
  pass.steps.resize(requests.size());
  std::vector<std::shared_ptr<engine::ResultStream>> streams;
  const auto t0 = Clock::now();
  for (size_t i = 0; i < requests.size(); ++i) {
    engine::GenerationRequest r = requests[i];
    auto* steps = &pass.steps[i];
    r.on_step = [steps](const engine::SpecStep& s) { steps->push_back(s); };
    streams.push_back(engine.submit(std::move(r)));
  }
  std::string error;
  for (size_t i = 0; i < streams.size(); ++i) {
    std::vector<engine::StreamEvent> events;
    for (bool done = false; !done;) {
      events.clear();
      streams[i]->wait(events, std::chrono::milliseconds(1000));
      for (auto& ev : events) {
        pass.outputs[i].insert(pass.outputs[i].end(), ev.tokens.begin(), ev.tokens.end());
        if (!ev.finished) continue;
        done = true;
        if (ev.finish_reason == engine::FinishReason::Error && error.empty()) error = ev.error;
      }
    }
  }
  pass.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  engine.shutdown(std::chrono::milliseconds(0));
  SS_CHECK(error.empty(), "bench controlled: a request failed: {}", error);
  return pass;
}

void check_same(const Pass& pass, const std::vector<std::vector<int32_t>>& recorded, const char* name) {
  for (size_t i = 0; i < recorded.size(); ++i) {
    const auto& got = pass.outputs[i];
    const auto diff = std::mismatch(got.begin(), got.end(), recorded[i].begin(), recorded[i].end());
    SS_CHECK(got == recorded[i],
             "bench controlled: the {} pass's request {} emitted different tokens from the recorded plain decoding "
             "(first at output token {})",
             name, i, diff.first - got.begin());
  }
}

std::vector<engine::GenerationRequest> make_requests(const ControlledBenchOptions& o, int n, int64_t vocab,
                                                     uint64_t level_seed) {
  std::mt19937_64 rng(level_seed);
  std::uniform_int_distribution<int64_t> id(0, vocab - 1);
  std::set<std::vector<int32_t>> seen;
  std::vector<engine::GenerationRequest> out;
  while (static_cast<int>(out.size()) < n) {
    engine::GenerationRequest r;
    for (int k = 0; k < o.prompt_tokens; ++k) r.prompt.push_back(static_cast<int32_t>(id(rng)));
    if (!seen.insert(r.prompt).second) continue;  // the prompt names the request's recording
    r.params.sampling.temperature = o.temperature;
    r.params.sampling.seed = level_seed + out.size();
    r.params.stop.max_tokens = o.max_tokens;
    r.params.stop.ignore_eos = true;
    out.push_back(std::move(r));
  }
  return out;
}

engine::EngineOptions engine_options(const ControlledBenchOptions& o, int concurrency, int lookahead, int gamma) {
  engine::EngineOptions e;
  e.gamma = gamma;
  e.max_seqs = concurrency;
  e.max_queue = std::max(e.max_queue, o.requests);
  const int64_t blocks_per_sequence = (o.prompt_tokens + o.max_tokens + lookahead + 15) / 16 + 2;
  e.kv_blocks = 2 * blocks_per_sequence * concurrency;  // target and drafter, every sequence at its longest
  e.swap_space_bytes = 0;
  return engine::normalised(e);
}

}  // namespace

ControlledBenchResult run_controlled_bench(TargetModel& target, const spec::DFlashDrafter& drafter,
                                           const std::string& label, const ControlledBenchOptions& o) {
  SS_CHECK(o.prompt_tokens >= 1 && o.max_tokens >= 1,
           "bench controlled: --prompt-tokens and --max-tokens must be >= 1");
  SS_CHECK(o.requests >= 0, "bench controlled: --requests must be >= 0");
  SS_CHECK(o.temperature >= 0, "bench controlled: --temperature must be >= 0");
  SS_CHECK(!o.concurrency.empty(), "bench controlled: --concurrency needs at least one level");
  spec::DFlashProposer real(
      drafter, spec::proposer_options(o.gamma, spec::DraftSampling::Argmax, engine::VerifyMode::SampleMatch));
  ControlledBenchResult result;
  result.label = label;
  result.acceptance = o.acceptance.label();
  result.gamma = real.gamma();
  const std::vector<double> conditional = o.acceptance.conditional(result.gamma);
  result.requested_tau = verify_tokens(conditional).mean;
  if (target.forward_memory().device() != Device::CPU) {
    // Pools sized before the timed passes (as `serve` does at start-up), for the largest level.
    const int most = *std::max_element(o.concurrency.begin(), o.concurrency.end());
    const int64_t blocks = engine_options(o, most, real.positions_past_context(), real.gamma()).kv_blocks;
    target.reserve(blocks, most);
    drafter.reserve_kv_blocks(blocks + most);
  }
  for (int c : o.concurrency) {
    SS_CHECK(c >= 1, "bench controlled: concurrency levels must be >= 1, got {}", c);
    ControlledLevel level;
    level.concurrency = c;
    level.requests = o.requests > 0 ? o.requests : c;
    const uint64_t level_seed = o.seed * 1000003u + static_cast<uint64_t>(c);
    const auto requests = make_requests(o, level.requests, target.vocab_size(), level_seed);
    const engine::TokenText no_text = [](int32_t) { return std::string(); };
    std::vector<std::vector<int32_t>> recorded;
    {
      engine::Engine plain(target, engine_options(o, c, 0, 0), no_text);
      recorded = run_pass(plain, requests).outputs;
    }
    {
      engine::Engine plain(target, engine_options(o, c, 0, 0), no_text);
      const Pass pass = run_pass(plain, requests);
      check_same(pass, recorded, "plain");
      level.plain_seconds = pass.seconds;
    }
    std::vector<RecordedRequest> recording;
    for (size_t i = 0; i < requests.size(); ++i) {
      recording.push_back({requests[i].prompt, recorded[i]});
      level.tokens += static_cast<int64_t>(recorded[i].size());
    }
    ControlledDraftProposer controlled(real, std::move(recording), conditional, level_seed, target.vocab_size());
    engine::Engine spec(target, engine_options(o, c, real.positions_past_context(), real.gamma()), no_text,
                        &controlled);
    const Pass pass = run_pass(spec, requests);
    check_same(pass, recorded, "controlled");
    level.controlled_seconds = pass.seconds;
    for (const auto& steps : pass.steps)
      for (const auto& s : steps) {
        if (s.drafts.empty()) continue;
        ++level.verifies;
        level.verify_tokens += s.accepted + 1;
        const VerifyTokens v =
            verify_tokens(std::vector<double>(conditional.begin(), conditional.begin() + s.drafts.size()));
        level.expected_tokens += v.mean;
        level.variance += v.variance;
      }
    result.levels.push_back(level);
  }
  return result;
}

std::string format_controlled_bench(const ControlledBenchResult& r, const ControlledBenchOptions& o) {
  std::string s = fmt::format(
      "acceptance-controlled: {} (γ={}, {:.3g} tokens per verify at γ drafts), {}: drafts are the recorded plain "
      "output, corrupted; the real drafter runs every step\n",
      r.acceptance, r.gamma, r.requested_tau, r.label);
  s += fmt::format("acceptance-controlled: {} prompt tokens, {} generated per request, T={}, seed {}\n",
                   o.prompt_tokens, o.max_tokens, o.temperature, o.seed);
  s += fmt::format("{:>11} {:>8} {:>12} {:>17} {:>8} {:>15} {:>14}  {}\n", "concurrency", "requests", "plain tok/s",
                   "controlled tok/s", "speed-up", "tokens/verify", "expected", "acceptance-controlled");
  for (const auto& l : r.levels) {
    const double plain = static_cast<double>(l.tokens) / l.plain_seconds;
    const double spec = static_cast<double>(l.tokens) / l.controlled_seconds;
    const double measured = l.verifies ? static_cast<double>(l.verify_tokens) / static_cast<double>(l.verifies) : 0;
    const double expected = l.verifies ? l.expected_tokens / static_cast<double>(l.verifies) : 0;
    s += fmt::format("{:>11} {:>8} {:>12.1f} {:>17.1f} {:>7.2f}x {:>15.2f} {:>14.2f}  controlled {}\n", l.concurrency,
                     l.requests, plain, spec, spec / plain, measured, expected, r.acceptance);
  }
  s += "acceptance-controlled: outputs of both passes equal the recorded plain decoding (checked)\n";
  return s;
}

}  // namespace specserve::cli
