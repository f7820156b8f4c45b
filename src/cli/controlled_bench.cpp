#include "cli/controlled_bench.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <random>
#include <set>
#include <string>

#include "cli/controlled_draft_proposer.h"
#include "cli/step_cost_calibration.h"
#include "core/error.h"
#include "engine/engine.h"
#include "engine/step_cost_model.h"
#include "spec/dflash_proposer.h"

namespace specserve::cli {

namespace {

using Clock = std::chrono::steady_clock;

struct Pass {
  std::vector<std::vector<int32_t>> outputs;
  std::vector<std::vector<engine::SpecStep>> steps;
  double seconds = 0;
  DecodePhase decode;
};

// When each step of one request ended, on the scheduler thread.
struct StepTimes {
  Clock::time_point first, last;
  int64_t steps = 0;
  int64_t tokens_after_first = 0;
};

// Submits every request at once and waits for all of them; the engine stays up for the next pass. A
// request's step observer runs before that step's tokens reach its stream (engine/request.h), so when
// the last stream finishes every observer has run. A request that fails is an Error.
Pass run_pass(engine::Engine& engine, const std::vector<engine::GenerationRequest>& requests) {
  Pass pass;
  pass.outputs.resize(requests.size());
  pass.steps.resize(requests.size());
  std::vector<StepTimes> times(requests.size());
  std::vector<std::shared_ptr<engine::ResultStream>> streams;
  const auto t0 = Clock::now();
  for (size_t i = 0; i < requests.size(); ++i) {
    engine::GenerationRequest r = requests[i];
    auto* steps = &pass.steps[i];
    auto* t = &times[i];
    r.on_step = [steps, t](const engine::SpecStep& s) {
      steps->push_back(s);
      const auto now = Clock::now();
      if (t->steps++ == 0) {
        t->first = now;
      } else {
        t->tokens_after_first += static_cast<int64_t>(s.emitted.size());
      }
      t->last = now;
    };
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
  for (const StepTimes& t : times) {
    if (t.steps < 2) continue;
    pass.decode.seconds += std::chrono::duration<double>(t.last - t.first).count();
    pass.decode.tokens += t.tokens_after_first;
  }
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

engine::EngineOptions engine_options(const ControlledBenchOptions& o, int concurrency, int lookahead, int gamma,
                                     engine::DraftPolicy policy = engine::DraftPolicy::Fixed,
                                     const std::optional<StepCosts>& costs = std::nullopt) {
  engine::EngineOptions e;
  e.gamma = gamma;
  e.draft_policy = policy;
  if (policy == engine::DraftPolicy::Adaptive) e.step_costs = costs;
  e.step_cost_feedback = !o.step_costs.has_value();  // a scripted table (tests) is taken as it is
  e.max_seqs = concurrency;
  e.max_queue = std::max(e.max_queue, o.requests);
  const int64_t blocks_per_sequence = (o.prompt_tokens + o.max_tokens + lookahead + 15) / 16 + 2;
  e.kv_blocks = 2 * blocks_per_sequence * concurrency;  // target and drafter, every sequence at its longest
  e.swap_space_bytes = 0;
  // Each engine runs a pass untimed before its timed one (below): its prompts must be prefilled again,
  // not found in the prefix cache, or the timed pass would skip the prefills a server does for new prompts.
  e.prefix_cache = false;
  e.prefill_hold_steps = o.prefill_hold_steps;
  e.prefill_hold_rows = o.prefill_hold_rows;
  return engine::normalised(e);
}

// The comma-separated items of `text`, each trimmed of nothing (spaces are errors of the parsers).
std::vector<std::string_view> split_commas(std::string_view text) {
  std::vector<std::string_view> items;
  size_t start = 0;
  while (true) {
    const size_t comma = text.find(',', start);
    items.push_back(text.substr(start, comma == std::string_view::npos ? text.npos : comma - start));
    if (comma == std::string_view::npos) return items;
    start = comma + 1;
  }
}

}  // namespace

std::vector<AcceptanceSpec> parse_acceptance_list(std::string_view text) {
  // Items grouped into specs: an item with a kind starts one, a bare number continues the one before it.
  std::vector<std::string> specs;
  for (std::string_view item : split_commas(text)) {
    if (item.find(':') != std::string_view::npos) {
      specs.emplace_back(item);
      continue;
    }
    SS_CHECK(!specs.empty(), "--acceptance: '{}' has no kind before it; give geometric:TAU or profile:P1,P2,...",
             std::string(item));
    if (specs.back().rfind("geometric:", 0) == 0)
      specs.push_back(std::string("geometric:").append(item));  // another τ
    else
      specs.back().append(",").append(item);  // the profile's next probability
  }
  std::vector<AcceptanceSpec> out;
  std::vector<std::string> labels;
  for (const std::string& s : specs) {
    out.push_back(parse_acceptance_spec(s));
    const std::string label = out.back().label();
    SS_CHECK(std::find(labels.begin(), labels.end(), label) == labels.end(), "--acceptance: {} is given twice", label);
    labels.push_back(label);
  }
  return out;
}

namespace {

// "" when `parse` takes the text, else its Error's message without the "FLAG: " it starts with (CLI11 names
// the flag itself).
template <class Parse>
std::string list_problem(Parse parse, const std::string& text, std::string_view flag) {
  try {
    parse(text);
    return std::string();
  } catch (const Error& e) {
    const std::string message = e.what(), prefix = std::string(flag) + ": ";
    return message.rfind(prefix, 0) == 0 ? message.substr(prefix.size()) : message;
  }
}

}  // namespace

std::string acceptance_list_problem(const std::string& text) {
  return list_problem(parse_acceptance_list, text, "--acceptance");
}

std::string policy_list_problem(const std::string& text) { return list_problem(parse_policy_list, text, "--policies"); }

std::vector<engine::DraftPolicy> parse_policy_list(std::string_view text) {
  std::vector<engine::DraftPolicy> out;
  for (std::string_view item : split_commas(text)) {
    SS_CHECK(item == "fixed" || item == "adaptive",
             "--policies: '{}' is not a draft policy; give fixed and/or adaptive", std::string(item));
    const engine::DraftPolicy p = engine::parse_draft_policy(item);
    SS_CHECK(std::find(out.begin(), out.end(), p) == out.end(), "--policies: {} is given twice", std::string(item));
    out.push_back(p);
  }
  return out;
}

ControlledBenchResult run_controlled_bench(TargetModel& target, const spec::DFlashDrafter& drafter,
                                           const std::string& label, const ControlledBenchOptions& o) {
  SS_CHECK(o.prompt_tokens >= 1 && o.max_tokens >= 1,
           "bench controlled: --prompt-tokens and --max-tokens must be >= 1");
  SS_CHECK(o.requests >= 0, "bench controlled: --requests must be >= 0");
  SS_CHECK(o.temperature >= 0, "bench controlled: --temperature must be >= 0");
  SS_CHECK(!o.concurrency.empty(), "bench controlled: --concurrency needs at least one level");
  SS_CHECK(!o.acceptance.empty(), "bench controlled: --acceptance needs at least one profile");
  SS_CHECK(!o.policies.empty(), "bench controlled: --policies needs at least one policy");
  for (int c : o.concurrency) SS_CHECK(c >= 1, "bench controlled: concurrency levels must be >= 1, got {}", c);
  spec::DFlashProposer real(
      drafter, spec::proposer_options(o.gamma, spec::DraftSampling::Argmax, engine::VerifyMode::SampleMatch));
  ControlledBenchResult result;
  result.label = label;
  result.gamma = real.gamma();
  std::vector<std::vector<double>> conditional;  // per profile, before any pass (a τ above γ + 1 throws)
  for (const AcceptanceSpec& a : o.acceptance) conditional.push_back(a.conditional(result.gamma));

  const int most = *std::max_element(o.concurrency.begin(), o.concurrency.end());
  const bool adaptive =
      std::find(o.policies.begin(), o.policies.end(), engine::DraftPolicy::Adaptive) != o.policies.end();
  int64_t blocks = engine_options(o, most, real.positions_past_context(), real.gamma()).kv_blocks;
  const int chunk = engine::normalised(engine::EngineOptions{}).prefill_chunk;
  if (adaptive && !o.step_costs)  // room for serve's calibration too
    blocks = std::max(blocks, kv_blocks_needed(calibration_plan(target.backend(), most, result.gamma), chunk));
  if (target.forward_memory().device() != Device::CPU) {
    // Pools sized before the timed passes (as `serve` does at start-up), for the largest level.
    target.reserve(blocks, most);
    drafter.reserve_kv_blocks(blocks + most);
  }
  std::optional<StepCosts> costs = o.step_costs;
  if (adaptive && !costs)
    costs = serving_step_costs(target, drafter, most, result.gamma, blocks, chunk, o.step_cost_profile);
  if (adaptive) result.step_costs = engine::StepCostModel(*costs).describe(result.gamma);

  std::vector<ControlledLevel> by_level;  // concurrency-major while measuring
  for (int c : o.concurrency) {
    const int requests_n = o.requests > 0 ? o.requests : c;
    const uint64_t level_seed = o.seed * 1000003u + static_cast<uint64_t>(c);
    const auto requests = make_requests(o, requests_n, target.vocab_size(), level_seed);
    const engine::TokenText no_text = [](int32_t) { return std::string(); };
    std::vector<std::vector<int32_t>> recorded;
    double plain_seconds = 0;
    DecodePhase plain_decode;
    {
      // The recording pass is the plain engine's untimed run.
      engine::Engine plain(target, engine_options(o, c, 0, 0), no_text);
      recorded = run_pass(plain, requests).outputs;
      const Pass pass = run_pass(plain, requests);
      check_same(pass, recorded, "plain");
      plain_seconds = pass.seconds;
      plain_decode = pass.decode;
    }
    std::vector<RecordedRequest> recording;
    int64_t tokens = 0;
    for (size_t i = 0; i < requests.size(); ++i) {
      recording.push_back({requests[i].prompt, recorded[i]});
      tokens += static_cast<int64_t>(recorded[i].size());
    }
    for (size_t a = 0; a < o.acceptance.size(); ++a) {
      ControlledLevel level;
      level.acceptance = o.acceptance[a].label();
      level.requested_tau = verify_tokens(conditional[a]).mean;
      level.concurrency = c;
      level.requests = requests_n;
      level.tokens = tokens;
      level.plain_seconds = plain_seconds;
      level.plain_decode = plain_decode;
      for (engine::DraftPolicy policy : o.policies) {
        // The same draws for every policy and every pass: a row's are keyed by its request and position
        // only. On a GPU the engine runs the pass once untimed first, as the plain engine runs the recording
        // pass before its timed one, so the timed pass sees the engine's steady state, as a server's
        // requests do: the step shapes met for the first time have captured their CUDA graphs (a step's
        // second sight of a shape, backend/cuda/step_graphs.h), and the adaptive policy has timed its first
        // plain steps and learned the engine-wide acceptance (engine/draft_length_policy.h), which a serving
        // engine does once, not for every batch of requests.
        const engine::EngineOptions spec_options =
            engine_options(o, c, real.positions_past_context(), real.gamma(), policy, costs);
        ControlledDraftProposer controlled(real, recording, conditional[a], level_seed, target.vocab_size());
        engine::Engine spec(target, spec_options, no_text, &controlled);
        if (o.warm_up_on_cpu || target.forward_memory().device() != Device::CPU)
          check_same(run_pass(spec, requests), recorded, "warm-up");
        const uint64_t plain_rows_before = spec.metrics().spec_policy_plain.load();
        const Pass pass = run_pass(spec, requests);
        check_same(pass, recorded,
                   policy == engine::DraftPolicy::Adaptive ? "controlled (adaptive)" : "controlled (fixed)");
        ControlledPass p;
        p.policy = policy;
        p.seconds = pass.seconds;
        p.decode = pass.decode;
        p.plain_rows = static_cast<int64_t>(spec.metrics().spec_policy_plain.load() - plain_rows_before);
        for (const auto& steps : pass.steps)
          for (const auto& s : steps) {
            if (s.drafts.empty()) continue;
            ++p.verifies;
            p.drafts += static_cast<int64_t>(s.drafts.size());
            p.verify_tokens += s.accepted + 1;  // `accepted` counts drafts only; + the target's pick
            const VerifyTokens v =
                verify_tokens(std::vector<double>(conditional[a].begin(), conditional[a].begin() + s.drafts.size()));
            p.expected_tokens += v.mean;
            p.variance += v.variance;
          }
        level.passes.push_back(p);
      }
      by_level.push_back(std::move(level));
    }
  }
  for (size_t a = 0; a < o.acceptance.size(); ++a)
    for (size_t c = 0; c < o.concurrency.size(); ++c) result.levels.push_back(by_level[c * o.acceptance.size() + a]);
  return result;
}

std::string format_controlled_bench(const ControlledBenchResult& r, const ControlledBenchOptions& o) {
  std::string s = fmt::format(
      "acceptance-controlled: {}, γ={}: drafts are the recorded plain output, corrupted to the profile; the real "
      "drafter runs every step; on a GPU every pass is timed after an untimed run of itself on the same engine "
      "(the engine's steady state); the prefix cache is off\n",
      r.label, r.gamma);
  s += fmt::format("acceptance-controlled: {} prompt tokens, {} generated per request, T={}, seed {}\n",
                   o.prompt_tokens, o.max_tokens, o.temperature, o.seed);
  if (!r.step_costs.empty())
    s += fmt::format("acceptance-controlled: adaptive policy's step costs: {}\n", r.step_costs);
  // Per policy: tok/s, speed-up, tokens per verify measured, expected ± one standard deviation of the
  // measured mean (the profile's, given each verify's drafts), decode rows kept plain, mean drafts per verify.
  // `decode` is the speed-up of the decode phase alone (DecodePhase: every request's steps after its first),
  // which a long prompt's prefill does not dilute.
  std::string head = fmt::format("{:>11} {:>8} {:>11}", "concurrency", "requests", "plain tok/s");
  for (engine::DraftPolicy p : o.policies) {
    const std::string name(engine::draft_policy_name(p));
    head += fmt::format(" | {:>14} {:>8} {:>8} {:>10} {:>12} {:>6} {:>5}", name + " tok/s", "speed-up", "decode",
                        "tok/verify", "expected", "plain", "γ");
  }
  s += head + "  acceptance-controlled\n";
  std::string last;
  for (const auto& l : r.levels) {
    if (l.acceptance != last)
      s += fmt::format("acceptance-controlled: {} ({:.3g} tokens per verify at γ drafts)\n", l.acceptance,
                       l.requested_tau);
    last = l.acceptance;
    const double plain = static_cast<double>(l.tokens) / l.plain_seconds;
    std::string row = fmt::format("{:>11} {:>8} {:>11.1f}", l.concurrency, l.requests, plain);
    for (const auto& p : l.passes) {
      const double spec = static_cast<double>(l.tokens) / p.seconds;
      const auto n = static_cast<double>(p.verifies);
      const double measured = p.verifies ? static_cast<double>(p.verify_tokens) / n : 0;
      const std::string expected =
          p.verifies ? fmt::format("{:.2f}±{:.2f}", p.expected_tokens / n, std::sqrt(p.variance) / n) : "-";
      const double rows = static_cast<double>(p.verifies + p.plain_rows);
      const std::string plain_share =
          rows > 0 ? fmt::format("{:.0f}%", 100.0 * static_cast<double>(p.plain_rows) / rows) : "-";
      const std::string gamma = p.verifies ? fmt::format("{:.1f}", static_cast<double>(p.drafts) / n) : "-";
      const double plain_decode = l.plain_decode.rate(), spec_decode = p.decode.rate();
      const std::string decode =
          plain_decode > 0 && spec_decode > 0 ? fmt::format("{:.2f}x", spec_decode / plain_decode) : "-";
      row += fmt::format(" | {:>14.1f} {:>7.2f}x {:>8} {:>10.2f} {:>12} {:>6} {:>5}", spec, spec / plain, decode,
                         measured, expected, plain_share, gamma);
    }
    s += row + fmt::format("  controlled {}\n", l.acceptance);
  }
  s += "acceptance-controlled: outputs of every pass equal the recorded plain decoding (checked)\n";
  return s;
}

}  // namespace specserve::cli
