// `specserve bench controlled` on a tiny target + drafter pair (tests/fixtures/dflash): the controlled
// passes emit exactly the recorded plain tokens (T = 0 and seeded T > 0, fixed and adaptive policy;
// run_controlled_bench throws otherwise), the tokens per verify track the requested profile within a bound
// computed from its variance, τ = 1 accepts nothing, a profile of certain drafts accepts exactly its length,
// the adaptive policy keeps rows plain where drafts do not pay and drafts where they do, and a recording
// that differs from what the target emits is an error, not a number. The corruption process alone is checked
// unbiased over many seeds at the few verifies of one short request.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

#include "../spec/spec_test_util.h"
#include "../specserve_cli.h"
#include "cli/controlled_bench.h"
#include "cli/controlled_draft_proposer.h"

namespace specserve::cli {
namespace {

using namespace specserve::spec::testing;

ControlledBenchOptions options(const std::string& acceptance, float temperature = 0) {
  ControlledBenchOptions o;
  o.acceptance = parse_acceptance_list(acceptance);
  o.policies = {engine::DraftPolicy::Fixed};
  o.concurrency = {1, 4};
  o.requests = 6;
  o.prompt_tokens = 24;
  o.max_tokens = 128;
  o.temperature = temperature;
  o.seed = 7;
  return o;
}

int64_t total(const ControlledBenchResult& r, int64_t ControlledPass::*field) {
  int64_t n = 0;
  for (const auto& l : r.levels)
    for (const auto& p : l.passes) n += p.*field;
  return n;
}

// Σ (accepted + 1) over all verifies is a sum of independent draws (each step's draw is keyed by its
// request and position); its expectation and variance given each step's draft count come from the
// profile. Four standard deviations: a correct process lands outside with probability < 1e-4 (normal
// approximation over hundreds of verifies); the seed is fixed, so the test is deterministic.
void expect_tracks_profile(const ControlledBenchResult& r) {
  for (const auto& l : r.levels)
    for (const auto& p : l.passes) {
      ASSERT_GT(p.verifies, 150) << "too few verifies to measure acceptance";
      const double bound = 4 * std::sqrt(p.variance);
      EXPECT_NEAR(static_cast<double>(p.verify_tokens), p.expected_tokens, bound)
          << l.acceptance << ", concurrency " << l.concurrency << ", " << engine::draft_policy_name(p.policy) << ": "
          << p.verifies << " verifies";
    }
}

TEST(ControlledBench, GeometricTauTracksAndOutputsMatchAtTZero) {
  Pair pair("dense-trained", "f32");
  const ControlledBenchResult r = run_controlled_bench(*pair.target, *pair.drafter, "pair", options("geometric:3"));
  EXPECT_EQ(r.gamma, 15);
  ASSERT_EQ(r.levels.size(), 2u);
  EXPECT_NEAR(r.levels[0].requested_tau, 3, 1e-9);
  expect_tracks_profile(r);
  // Per verify, the expectation is τ except in the last steps, where fewer drafts are left.
  for (const auto& l : r.levels) {
    ASSERT_EQ(l.passes.size(), 1u);
    EXPECT_NEAR(l.passes[0].expected_tokens / l.passes[0].verifies, 3, 0.3);
    EXPECT_EQ(l.passes[0].plain_rows, 0);  // the fixed policy drafts every row it can
    // The decode phase: a plain request's first token comes from its prefill and its first decode step's
    // is before the window, so each of the others is one step inside it.
    EXPECT_EQ(l.plain_decode.tokens, l.tokens - 2 * l.requests);
    EXPECT_GT(l.plain_decode.seconds, 0);
    EXPECT_LT(l.plain_decode.seconds, l.plain_seconds * l.requests);
    EXPECT_GT(l.passes[0].decode.tokens, 0);
    EXPECT_GT(l.passes[0].decode.rate(), 0);
  }
  const std::string table = format_controlled_bench(r, options("geometric:3"));
  EXPECT_NE(table.find("acceptance-controlled: geometric τ=3"), std::string::npos) << table;
  EXPECT_NE(table.find(" decode "), std::string::npos) << table;
}

TEST(ControlledBench, SeededSamplingMatchesAndTracks) {
  Pair pair("dense-trained", "f32");
  expect_tracks_profile(
      run_controlled_bench(*pair.target, *pair.drafter, "pair", options("geometric:4.5", /*temperature=*/0.8f)));
}

TEST(ControlledBench, TauOneAcceptsNothing) {
  Pair pair("hybrid-trained", "f32");
  ControlledBenchOptions o = options("geometric:1");
  o.max_tokens = 48;
  const ControlledBenchResult r = run_controlled_bench(*pair.target, *pair.drafter, "pair", o);
  EXPECT_GT(total(r, &ControlledPass::verifies), 0);
  EXPECT_EQ(total(r, &ControlledPass::verify_tokens), total(r, &ControlledPass::verifies));
}

// With more requests than sequences, later prompts arrive among decoding ones; the prefill hold
// (--prefill-hold-steps) may keep them back a few steps, and every pass still emits the recorded tokens
// (run_controlled_bench throws otherwise), dense and hybrid.
TEST(ControlledBench, PrefillHoldKeepsTheRecordedTokens) {
  for (const char* kind : {"dense-trained", "hybrid-trained"}) {
    Pair pair(kind, "f32");
    ControlledBenchOptions o = options("geometric:3");
    o.concurrency = {2};
    o.requests = 8;
    o.max_tokens = 40;
    o.prefill_hold_steps = 32;
    const ControlledBenchResult r = run_controlled_bench(*pair.target, *pair.drafter, "pair", o);
    ASSERT_EQ(r.levels.size(), 1u) << kind;
    EXPECT_EQ(r.levels[0].requests, 8) << kind;
    EXPECT_GT(total(r, &ControlledPass::verifies), 0) << kind;
  }
}

TEST(ControlledBench, ProfileForm) {
  Pair pair("dense-trained", "f32");
  // Drafts 1 and 2 always correct, 3 never: every verify with 3+ drafts commits exactly 3 tokens.
  ControlledBenchResult r = run_controlled_bench(*pair.target, *pair.drafter, "pair", options("profile:1,1,0"));
  for (const auto& l : r.levels) {
    EXPECT_EQ(l.passes[0].variance, 0);
    EXPECT_EQ(static_cast<double>(l.passes[0].verify_tokens), l.passes[0].expected_tokens);
  }
  r = run_controlled_bench(*pair.target, *pair.drafter, "pair", options("profile:0.9,0.8,0.7,0.6,0.5"));
  expect_tracks_profile(r);
}

TEST(ControlledBench, DivergedRecordingIsAnError) {
  Pair pair("dense-trained", "f32");
  const std::vector<int32_t> prompt = {5, 9, 13, 2, 77, 31};
  auto plain_engine = make_engine(*pair.target, nullptr);
  std::vector<int32_t> output = run_request(*plain_engine, greedy_request(prompt, 24)).tokens;
  output[10] = (output[10] + 1) % 300;  // not what the target emits
  spec::DFlashProposer real(*pair.drafter, {.gamma = 15});
  ControlledDraftProposer controlled(real, {{prompt, output}}, std::vector<double>(15, 1.0), 1,
                                     pair.target->vocab_size());
  engine::EngineOptions eo = engine_options();
  eo.gamma = 15;
  auto engine = make_engine(*pair.target, &controlled, eo);
  const RequestRun run = run_request(*engine, greedy_request(prompt, 24));
  EXPECT_EQ(run.finish_reason, engine::FinishReason::Error);
  EXPECT_NE(run.error.find("differ from its recorded plain decoding"), std::string::npos) << run.error;
}

TEST(ControlledBench, AcceptanceAndPolicyLists) {
  auto labels = [](const std::string& text) {
    std::string s;
    for (const auto& a : parse_acceptance_list(text)) s += (s.empty() ? "" : "; ") + a.label();
    return s;
  };
  EXPECT_EQ(labels("geometric:6.5"), "geometric τ=6.5");
  EXPECT_EQ(labels("geometric:1,3,6.5"), "geometric τ=1; geometric τ=3; geometric τ=6.5");
  EXPECT_EQ(labels("geometric:1,profile:0.9,0.8,geometric:6.5"), "geometric τ=1; profile 0.9,0.8; geometric τ=6.5");
  EXPECT_EQ(labels("profile:1,0.5,geometric:2,3"), "profile 1,0.5; geometric τ=2; geometric τ=3");
  auto error = [](const std::string& text) {
    try {
      parse_acceptance_list(text);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(error("3,geometric:2").find("has no kind before it"), std::string::npos) << error("3,geometric:2");
  EXPECT_NE(error("geometric:2,x").find("is not a number"), std::string::npos) << error("geometric:2,x");
  EXPECT_NE(error("geometric:2,2").find("given twice"), std::string::npos) << error("geometric:2,2");
  EXPECT_NE(error("geometric:2,").find("is not a number"), std::string::npos) << error("geometric:2,");
  EXPECT_NE(error("profile:0.5,1.5").find("outside [0, 1]"), std::string::npos) << error("profile:0.5,1.5");

  using engine::DraftPolicy;
  EXPECT_EQ(parse_policy_list("fixed,adaptive"), (std::vector<DraftPolicy>{DraftPolicy::Fixed, DraftPolicy::Adaptive}));
  EXPECT_EQ(parse_policy_list("adaptive"), (std::vector<DraftPolicy>{DraftPolicy::Adaptive}));
  EXPECT_THROW(parse_policy_list("fixed,fixed"), Error);
  EXPECT_THROW(parse_policy_list("fixed,"), Error);
  EXPECT_THROW(parse_policy_list("greedy"), Error);
}

// Verify rows that cost far more than a decode row: the adaptive policy keeps rows plain when every draft
// is wrong and drafts nearly every row when every draft is right; the fixed policy drafts every row either
// way. Every pass's outputs equal the recording (run_controlled_bench checks). Levels come profile-major,
// and both profiles of a level share its plain pass.
TEST(ControlledBench, AdaptivePolicyFollowsAcceptance) {
  Pair pair("dense-trained", "f32");
  ControlledBenchOptions o = options("geometric:1,profile:1,1,1,1,1,1,1,1,1,1,1,1,1,1,1");
  o.policies = {engine::DraftPolicy::Fixed, engine::DraftPolicy::Adaptive};
  o.max_tokens = 96;
  StepCosts costs;
  costs.row_knots = {1, 16};
  costs.row_seconds = {1e-3, 1.3e-3};  // a row past the first costs 2 % of a decode step
  costs.propose_s = 5e-5;
  o.step_costs = costs;
  const ControlledBenchResult r = run_controlled_bench(*pair.target, *pair.drafter, "pair", o);
  ASSERT_EQ(r.levels.size(), 4u);
  EXPECT_FALSE(r.step_costs.empty());
  for (size_t i = 0; i < 4; ++i) {
    const ControlledLevel& l = r.levels[i];
    EXPECT_EQ(l.concurrency, o.concurrency[i % 2]);
    EXPECT_EQ(l.acceptance, i < 2 ? "geometric τ=1" : "profile 1,1,1,1,1,1,1,1,1,1,1,1,1,1,1");
    EXPECT_EQ(l.plain_seconds, r.levels[(i + 2) % 4].plain_seconds);
    ASSERT_EQ(l.passes.size(), 2u);
    const ControlledPass& fixed = l.passes[0];
    const ControlledPass& adaptive = l.passes[1];
    EXPECT_EQ(fixed.policy, engine::DraftPolicy::Fixed);
    EXPECT_EQ(adaptive.policy, engine::DraftPolicy::Adaptive);
    EXPECT_EQ(fixed.plain_rows, 0);
    for (const ControlledPass& p : l.passes) {
      EXPECT_EQ(p.variance, 0);  // both profiles are certain
      EXPECT_EQ(static_cast<double>(p.verify_tokens), p.expected_tokens);
    }
    const double rows = static_cast<double>(adaptive.verifies + adaptive.plain_rows);
    const double plain_share = static_cast<double>(adaptive.plain_rows) / rows;
    if (i < 2) {
      EXPECT_EQ(adaptive.verify_tokens, adaptive.verifies);  // every draft wrong
      EXPECT_GT(plain_share, 0.7) << "concurrency " << l.concurrency;
      EXPECT_LT(adaptive.verifies, fixed.verifies / 2);
    } else {
      EXPECT_LT(plain_share, 0.1) << "concurrency " << l.concurrency;
      // γ climbs from the prior's (untried positions read 0.6) within the requests' few verifies.
      EXPECT_GT(static_cast<double>(adaptive.drafts) / static_cast<double>(adaptive.verifies), 7);
    }
  }
  const std::string table = format_controlled_bench(r, o);
  for (const char* want : {"fixed tok/s", "adaptive tok/s", "acceptance-controlled: adaptive policy's step costs",
                           "acceptance-controlled: geometric τ=1 (1 tokens per verify", "controlled profile 1,1"})
    EXPECT_NE(table.find(want), std::string::npos) << want << "\n" << table;
}

// The timed pass runs on the engine that ran the untimed one (its steady state): with every draft wrong,
// the adaptive policy starts the timed pass knowing the engine-wide acceptance, so its new sequences verify
// fewer drafted rows than on a fresh engine; and the plain rows counted are the timed pass's alone (a
// fresh engine's pass counts the same rows whichever engine ran before it). The scripted step costs take
// no feedback from timings, so both runs are deterministic.
TEST(ControlledBench, TimedPassRunsOnTheWarmedEngine) {
  Pair pair("dense-trained", "f32");
  ControlledBenchOptions o = options("geometric:1");
  o.policies = {engine::DraftPolicy::Adaptive};
  o.concurrency = {4};
  o.max_tokens = 64;
  StepCosts costs;
  costs.row_knots = {1, 16};
  costs.row_seconds = {1e-3, 1.3e-3};
  costs.propose_s = 5e-5;
  o.step_costs = costs;
  const ControlledBenchResult cold = run_controlled_bench(*pair.target, *pair.drafter, "pair", o);
  o.warm_up_on_cpu = true;
  const ControlledBenchResult warm = run_controlled_bench(*pair.target, *pair.drafter, "pair", o);
  ASSERT_EQ(cold.levels.size(), 1u);
  ASSERT_EQ(warm.levels.size(), 1u);
  const ControlledPass& c = cold.levels[0].passes.at(0);
  const ControlledPass& w = warm.levels[0].passes.at(0);
  EXPECT_GT(c.verifies, 0);
  EXPECT_LT(w.verifies, c.verifies);
  // Every decode row of a pass is a verify or a plain row the policy kept: one pass's worth, not two.
  const int64_t decode_rows = cold.levels[0].tokens - o.requests;  // the first token of each is the prefill's
  EXPECT_LE(c.verifies + c.plain_rows, decode_rows);
  EXPECT_LE(w.verifies + w.plain_rows, decode_rows);
  EXPECT_GT(w.plain_rows, decode_rows / 2);
}

// The corruption process alone (no model: a proposer that drafts nothing, and the engine's acceptance
// of leading drafts equal to the recording), over many seeds at the few verifies one 128-token request
// makes (γ = 15, τ = 6.5): z = (Σ tokens − Σ expected) / σ is centred with unit spread, so a short run's
// tokens per verify far above the expectation is a draw, not a bias. (The H200 run that printed 9.77
// against 6.22 at concurrency 1 is the draw pinned at the end: 13 verifies for 127 tokens, z = 2.8.)
class NoDrafts final : public engine::DraftProposer {
 public:
  int gamma() const override { return 15; }
  std::vector<int> capture_layers() const override { return {}; }
  std::unique_ptr<engine::DraftContext> new_context() override { return std::make_unique<engine::DraftContext>(); }
  void append_contexts(std::span<const ContextRows>) override {}
  void propose(std::span<engine::ProposeItem>) override {}
};

struct Draw {
  int64_t verifies = 0, tokens = 0;
  double expected = 0, variance = 0;
};

Draw one_request(uint64_t seed, const std::vector<double>& conditional, int prompt_tokens, int max_tokens) {
  NoDrafts none;
  std::vector<int32_t> prompt(static_cast<size_t>(prompt_tokens)), output(static_cast<size_t>(max_tokens));
  std::iota(prompt.begin(), prompt.end(), 0);
  for (size_t i = 0; i < output.size(); ++i) output[i] = static_cast<int32_t>((i * 37 + 11) % 1000);
  ControlledDraftProposer controlled(none, {{prompt, output}}, conditional, seed, 1000);
  auto context = controlled.new_context();
  sampling::SamplerState history(prompt);
  history.push(output[0]);  // the first token, from the prefill
  Draw d;
  std::vector<int32_t> drafts;
  while (static_cast<int>(history.generated()) < max_tokens) {
    const auto generated = static_cast<int>(history.generated());
    const int max_drafts = std::clamp(max_tokens - generated - 1, 0, 15);  // as Engine::propose_drafts
    int accepted = 0;
    if (max_drafts > 0) {
      engine::ProposeItem item;
      item.context = context.get();
      item.pending_token = history.tokens().back();
      item.pending_position = static_cast<int64_t>(history.length()) - 1;
      item.history = &history;
      item.max_drafts = max_drafts;
      item.drafts = &drafts;
      controlled.propose({&item, 1});
      EXPECT_EQ(static_cast<int>(drafts.size()), max_drafts);
      while (accepted < static_cast<int>(drafts.size()) && drafts[accepted] == output[generated + accepted]) ++accepted;
      const VerifyTokens v = verify_tokens({conditional.begin(), conditional.begin() + drafts.size()});
      ++d.verifies;
      d.tokens += accepted + 1;
      d.expected += v.mean;
      d.variance += v.variance;
    }
    for (int k = 0; k <= accepted; ++k) history.push(output[generated + k]);
  }
  return d;
}

TEST(ControlledBench, CorruptionIsUnbiasedOverSeeds) {
  const std::vector<double> conditional = parse_acceptance_spec("geometric:6.5").conditional(15);
  constexpr int kSeeds = 2000;
  double sum = 0, sum_sq = 0;
  int above = 0;
  for (uint64_t seed = 1; seed <= kSeeds; ++seed) {
    const Draw d = one_request(seed * 1000003u + 1, conditional, 128, 128);
    const double z = (static_cast<double>(d.tokens) - d.expected) / std::sqrt(d.variance);
    sum += z;
    sum_sq += z * z;
    above += z >= 2.79;
  }
  const double mean = sum / kSeeds, sd = std::sqrt(sum_sq / kSeeds - mean * mean);
  // The mean of 2,000 unit-spread draws is within 0.11 of 0 with probability 1 − 1e-6 (5σ).
  EXPECT_NEAR(mean, 0, 0.11);
  EXPECT_NEAR(sd, 1, 0.1);
  EXPECT_LT(above, kSeeds / 50);  // a normal tail gives ~0.3 %; the discrete one here ~0.5 %

  // `bench controlled --acceptance geometric:6.5 --concurrency 1 --max-tokens 128` (seed 1, 128-token
  // prompt, γ 15): the level's seed 1·1000003 + 1, request 0.
  const Draw gpu = one_request(1000003u + 1, conditional, 128, 128);
  EXPECT_EQ(gpu.verifies, 13);
  EXPECT_EQ(gpu.tokens, 127);
  EXPECT_NEAR(gpu.expected / 13, 6.22, 0.005);
}

// The command end to end on the tiny synthetic shape with two profiles and both policies (the adaptive one
// on step costs timed at the start): it runs, and every line it prints says it is acceptance-controlled (the
// table's rows in their last column).
TEST(ControlledBench, CommandLabelsEveryLine) {
  const auto r = specserve::testing::run_specserve(
      "bench controlled --synthetic tiny --backend cpu --concurrency 1,2 --prompt-tokens 16 --max-tokens 24 "
      "--acceptance geometric:1,2.5");
  ASSERT_EQ(r.status, 0) << r.out;
  size_t lines = 0;
  for (size_t i = 0; i < r.out.size();) {
    const size_t end = r.out.find('\n', i);
    const std::string line = r.out.substr(i, end - i);
    EXPECT_NE(line.find("controlled"), std::string::npos) << line;
    ++lines;
    i = end == std::string::npos ? r.out.size() : end + 1;
  }
  // 2 header lines, the step costs, the column names, per profile its line and 2 levels, the check
  EXPECT_EQ(lines, 11u) << r.out;
  for (const char* want : {"controlled geometric τ=1", "controlled geometric τ=2.5", "fixed tok/s", "adaptive tok/s"})
    EXPECT_NE(r.out.find(want), std::string::npos) << want << "\n" << r.out;
}

TEST(ControlledBench, CommandRefusesBadLists) {
  auto run = [](const std::string& flags) {  // stdout and stderr (where the errors go); a failure exits 3
    return specserve::testing::run_specserve("bench controlled --synthetic tiny --backend cpu " + flags +
                                             " 2>&1 || exit 3");
  };
  auto r = run("--policies fixed,greedy");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.out.find("'greedy' is not a draft policy"), std::string::npos) << r.out;
  r = run("--acceptance 3,geometric:2");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.out.find("has no kind before it"), std::string::npos) << r.out;
  r = run("--policies fixed --step-cost-profile /nonexistent");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.out.find("--step-cost-profile needs the adaptive policy"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace specserve::cli
