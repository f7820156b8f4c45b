// Cost of one pick on a Qwen3-sized row (V = 151,936, 151,669 real), per sampling configuration.
// A verify step picks γ + 1 rows per sequence, so this is paid up to 16 times per sequence step.
//
//   build/bin/bench_sampling [--benchmark_filter=...]
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "sampling/sampler.h"

namespace specserve::sampling {
namespace {

constexpr int64_t kVocab = 151936;
constexpr int64_t kReal = 151669;

// Logits shaped like a language model's: a few strong candidates over a broad Gaussian floor.
const std::vector<float>& model_like_row() {
  static const std::vector<float> row = [] {
    std::mt19937 rng(1);
    std::normal_distribution<float> floor(-2.0f, 2.0f);
    std::vector<float> r(kVocab);
    for (auto& x : r) x = floor(rng);
    for (int i = 0; i < 40; ++i) r[rng() % kReal] = 12.0f - float(i) * 0.25f;
    return r;
  }();
  return row;
}

enum Config { kGreedy, kQwenDefaults, kFullVocab, kTopP, kMinP, kPenalties, kLogprobs };

RequestParams params_for(int config) {
  RequestParams p;
  p.sampling.seed = 1;
  auto& s = p.sampling;
  switch (config) {
    case kGreedy: s.temperature = 0.0f; break;
    case kQwenDefaults:
      s.temperature = 0.6f;
      s.top_k = 20;
      s.top_p = 0.95f;
      break;
    case kFullVocab: break;
    case kTopP: s.top_p = 0.9f; break;
    case kMinP: s.min_p = 0.05f; break;
    case kPenalties:
      s.temperature = 0.6f;
      s.top_k = 20;
      s.top_p = 0.95f;
      s.repetition_penalty = 1.3f;
      s.presence_penalty = 0.5f;
      s.dry.multiplier = 0.8f;
      break;
    case kLogprobs:
      s.temperature = 0.6f;
      s.top_k = 20;
      s.top_p = 0.95f;
      s.logprobs = true;
      s.top_logprobs = 20;
      break;
  }
  return p;
}

void BM_Pick(benchmark::State& st) {
  const Sampler sampler(params_for(int(st.range(0))), {kVocab, kReal});
  std::mt19937 rng(2);
  std::vector<TokenId> prompt(4000);  // history for the penalties and DRY
  for (auto& t : prompt) t = TokenId(rng() % 20000);
  SamplerState state = sampler.make_state(prompt);
  SamplerWorkspace ws;
  const auto& row = model_like_row();
  for (auto _ : st) benchmark::DoNotOptimize(sampler.pick(row, state, ws).token);
}
BENCHMARK(BM_Pick)
    ->ArgName("config")
    ->Arg(kGreedy)
    ->Arg(kQwenDefaults)
    ->Arg(kFullVocab)
    ->Arg(kTopP)
    ->Arg(kMinP)
    ->Arg(kPenalties)
    ->Arg(kLogprobs)
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace specserve::sampling

BENCHMARK_MAIN();
