#include "sampling/truncation.h"

#include <algorithm>
#include <cmath>

namespace specserve::sampling {
namespace {

// The total order every rank-based stage uses: higher logit first, then lower id.
struct BetterFirst {
  std::span<const float> logits;
  bool operator()(TokenId a, TokenId b) const {
    return logits[a] != logits[b] ? logits[a] > logits[b] : a < b;
  }
};

// Keeps the candidates for which keep(id) holds; order is preserved.
template <typename Keep>
void filter(std::vector<TokenId>& candidates, Keep keep) {
  candidates.erase(std::remove_if(candidates.begin(), candidates.end(), [&](TokenId id) { return !keep(id); }),
                   candidates.end());
}

}  // namespace

void apply_temperature(std::span<float> logits, std::span<const TokenId> candidates, float temperature) {
  if (temperature == 1.0f) return;
  for (TokenId id : candidates) logits[id] /= temperature;  // a division, as HF's warper does
}

void truncate_top_k(std::span<const float> logits, std::vector<TokenId>& candidates, int k,
                    TruncationScratch& scratch) {
  if (k <= 0 || size_t(k) >= candidates.size()) return;
  auto& order = scratch.order;
  order.assign(candidates.begin(), candidates.end());
  std::nth_element(order.begin(), order.begin() + (k - 1), order.end(), BetterFirst{logits});
  // Everything before the k-th element is better than it; keep those and it, back in id order.
  candidates.assign(order.begin(), order.begin() + k);
  std::sort(candidates.begin(), candidates.end());
}

void truncate_top_p(std::span<const float> logits, std::vector<TokenId>& candidates, float top_p,
                    TruncationScratch& scratch) {
  if (top_p >= 1.0f || candidates.size() <= 1) return;
  const float max = max_logit(logits, candidates);
  double total = 0.0;
  for (TokenId id : candidates) total += std::exp(logits[id] - max);
  const double target = double(top_p) * total;

  // Rank only as many candidates as needed: sort the best m, and if their mass stays below the
  // target, sort more. The kept set is a prefix of the total order either way.
  auto& order = scratch.order;
  order.assign(candidates.begin(), candidates.end());
  const size_t n = order.size();
  size_t kept = n;
  for (size_t m = std::min<size_t>(n, 64);; m = std::min(n, m * 8)) {
    std::partial_sort(order.begin(), order.begin() + m, order.end(), BetterFirst{logits});
    double before = 0.0;  // mass of the candidates ranked before order[j]
    size_t j = 0;
    while (j < m && before < target) before += std::exp(logits[order[j++]] - max);
    if (before >= target || m == n) {
      kept = j;  // j >= 1: the best candidate has nothing before it
      break;
    }
  }
  candidates.assign(order.begin(), order.begin() + kept);
  std::sort(candidates.begin(), candidates.end());
}

void truncate_min_p(std::span<const float> logits, std::vector<TokenId>& candidates, float min_p) {
  if (min_p <= 0.0f || candidates.empty()) return;
  const float max = max_logit(logits, candidates);
  // p_i / p_max = exp(l_i − max): no normalisation needed, and the argmax gives exp(0) = 1 ≥ min_p.
  filter(candidates, [&](TokenId id) { return std::exp(logits[id] - max) >= min_p; });
}

void truncate_top_n_sigma(std::span<const float> logits, std::vector<TokenId>& candidates, float n) {
  if (n <= 0.0f || candidates.size() <= 1) return;
  const float max = max_logit(logits, candidates);
  double sum = 0.0;
  for (TokenId id : candidates) sum += logits[id];
  const double mean = sum / double(candidates.size());
  double sq = 0.0;
  for (TokenId id : candidates) sq += (logits[id] - mean) * (logits[id] - mean);
  const double sigma = std::sqrt(sq / double(candidates.size()));
  const double threshold = double(max) - double(n) * sigma;
  filter(candidates, [&](TokenId id) { return double(logits[id]) >= threshold; });
}

TokenId best_candidate(std::span<const float> logits, std::span<const TokenId> candidates) {
  TokenId best = candidates.front();
  for (TokenId id : candidates) {
    if (logits[id] > logits[best]) best = id;  // strict: an equal logit later (higher id) loses
  }
  return best;
}

float max_logit(std::span<const float> logits, std::span<const TokenId> candidates) {
  float m = logits[candidates.front()];
  for (TokenId id : candidates) m = std::max(m, logits[id]);
  return m;
}

}  // namespace specserve::sampling
