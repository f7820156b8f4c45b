#pragma once
// A deterministic stand-in for a language model, for sampler tests: the logits row is a pure
// function of the history, so "plain decoding" and "verify rows" can be compared exactly.
// It prefers continuing a short cycle, so unpenalised output repeats itself — which makes
// repetition penalties and DRY actually change picks.
#include <cstdint>
#include <span>
#include <vector>

#include "sampling/philox.h"
#include "sampling/types.h"

namespace specserve::sampling::testing {

inline std::vector<float> fake_logits(std::span<const TokenId> history, int64_t vocab, uint32_t model_seed = 7) {
  std::vector<float> row(vocab);
  const TokenId last = history.empty() ? 0 : history.back();
  const TokenId prev = history.size() < 2 ? 0 : history[history.size() - 2];
  for (int64_t v = 0; v < vocab; ++v) {
    // Noise keyed by (last two tokens, candidate): the same context always gives the same row.
    const PhiloxCounter out = philox4x32_10({uint32_t(last), uint32_t(prev), uint32_t(v), 0}, {model_seed, 0x5eed});
    row[v] = float(out[0] >> 8) * 0x1.0p-24f * 4.0f - 2.0f;
  }
  row[(last + 1) % vocab] += 3.0f;  // the cycle
  row[(last * 7 + 3) % vocab] += 2.5f;
  return row;
}

// Chi-square statistic of observed counts against expected probabilities.
inline double chi_square(std::span<const int64_t> observed, std::span<const double> expected_p, int64_t n) {
  double chi2 = 0.0;
  for (size_t i = 0; i < observed.size(); ++i) {
    const double e = expected_p[i] * double(n);
    chi2 += (double(observed[i]) - e) * (double(observed[i]) - e) / e;
  }
  return chi2;
}

}  // namespace specserve::sampling::testing
