// The adaptive draft policy's host work per engine step (engine/draft_length_policy.h), on an H200
// qwen3-8b-like cost table (the one tests/engine/test_draft_length_policy.cpp uses): work the GPU waits
// for between a step's forward and its propose (issue 29: at 64 sequences it showed as ~0.4 ms of idle
// GPU a step).
//
//   build/bin/bench_draft_policy [--benchmark_filter=...]
//
//   BM_ChooseDraftLengths/N/P   the search alone over N candidates of 15 drafts each at one acceptance
//                               profile P: 0 every draft wrong (the rates a sequence reads after a few
//                               rejected verifies: 0.02), 1 geometric τ 6.5 (0.86 at every position), 2 drafts
//                               near break-even (0.5: the bound does not settle it, the search runs)
//   BM_PolicyStep/N/P           DraftLengthPolicy::choose_step, what Engine::draft_lengths runs each step:
//                               N sequences' candidates from their acceptance statistics, probes
//                               scheduled and afforded, the search, the back-off; then each verify it
//                               chose observed as the engine would (P as above, drawn per draft)
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "engine/draft_length_policy.h"

namespace {

using namespace specserve;
using namespace specserve::engine;

constexpr double kMs = 1e-3;
constexpr int kGamma = 15;

// Up to 16 rows cost about a decode step (4.9 ms), then about 0.11 ms a row; a propose 1.25 ms + 0.06 ms
// a sequence (docs/BENCHMARKS.md, the 8B shape on an H200).
StepCosts gpu_like_costs() {
  StepCosts c;
  c.row_knots = {1, 16, 64, 256, 1024};
  for (double ms : {4.9, 5.6, 11.0, 35.0, 130.0}) c.row_seconds.push_back(ms * kMs);
  c.sequence_s = 0.1 * kMs;
  c.context_s = 4.6e-5 * kMs;
  c.propose_s = 1.25 * kMs;
  c.propose_sequence_s = 0.06 * kMs;
  return c;
}

double profile_accept(int64_t profile) { return profile == 0 ? 0.02 : profile == 1 ? 0.86 : 0.5; }

void BM_ChooseDraftLengths(benchmark::State& state) {
  const StepCostModel model(gpu_like_costs());
  const auto n = static_cast<size_t>(state.range(0));
  std::vector<DraftCandidate> c(n);
  for (size_t i = 0; i < n; ++i) {
    c[i].max_drafts = kGamma;
    c[i].context = 512 + static_cast<int64_t>(i) * 7;
    c[i].accept.assign(kGamma, profile_accept(state.range(1)));
  }
  int drafted = 0;
  for (auto _ : state) {
    const DraftChoice choice = choose_draft_lengths(model, c);
    drafted = 0;
    for (int g : choice.gamma) drafted += g > 0;
    benchmark::DoNotOptimize(choice.tokens);
  }
  state.counters["drafting"] = drafted;
}
BENCHMARK(BM_ChooseDraftLengths)->ArgsProduct({{16, 64}, {0, 1, 2}})->Unit(benchmark::kMicrosecond);

void BM_PolicyStep(benchmark::State& state) {
  const auto n = static_cast<size_t>(state.range(0));
  const double p = profile_accept(state.range(1));
  EngineMetrics metrics;
  EngineOptions options;
  options.draft_policy = DraftPolicy::Adaptive;
  options.step_costs = gpu_like_costs();
  DraftLengthPolicy policy(options, metrics);
  std::vector<AcceptanceStats> stats(n);
  std::vector<PolicySequence> seqs(n);
  for (size_t i = 0; i < n; ++i) seqs[i] = {&stats[i], 512 + static_cast<int64_t>(i) * 7, kGamma};
  std::mt19937 rng(1);
  std::bernoulli_distribution correct(p);
  int64_t step = 0;
  double drafted = 0, probes = 0;
  // A warm-up of a few hundred steps: the statistics settle (every draft wrong: every sequence plain but
  // for probes) before the timed steps. The contexts stay as they are (a stationary load).
  auto one_step = [&] {
    const StepDraftChoice choice = policy.choose_step(step, seqs);
    drafted += static_cast<double>(choice.drafted);
    probes += static_cast<double>(choice.probes);
    ++step;
    for (size_t i = 0; i < n; ++i) {
      const int g = choice.gamma[i];
      if (g == 0) continue;
      int a = 0;
      while (a < g && correct(rng)) ++a;
      stats[i].observe(g, a, step);
      policy.engine_acceptance().observe(g, a);
    }
  };
  for (int t = 0; t < 300; ++t) one_step();
  drafted = probes = 0;
  int64_t timed = 0;
  for (auto _ : state) {
    one_step();
    ++timed;
  }
  state.counters["drafting"] = drafted / static_cast<double>(timed);
  state.counters["probes"] = probes / static_cast<double>(timed);
}
BENCHMARK(BM_PolicyStep)->ArgsProduct({{16, 64}, {0, 1}})->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
