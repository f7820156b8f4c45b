#include "sampling/truncation.h"

#include <algorithm>
#include <cmath>

#include "sampling/row_kernels.h"

namespace specserve::sampling {
namespace {

// The total order of every rank-based stage: higher logit first, then lower id.
bool better(float la, TokenId a, float lb, TokenId b) { return la != lb ? la > lb : a < b; }

// Keeps the candidates for which keep(id) holds, as an ascending list.
template <typename Keep>
void filter(std::span<const float> logits, Candidates& cands, Keep keep) {
  std::vector<TokenId> kept;
  cands.for_each(logits, [&](TokenId id) {
    if (keep(id)) kept.push_back(id);
  });
  cands.all = false;
  cands.ids = std::move(kept);
}

// Top-p ranks by logit gap from the max in buckets of 1/64 nat (the last bucket takes every gap
// beyond 40 nats, where exp is below 1e-17): only the bucket where the mass crosses top_p is sorted.
constexpr float kBucketsPerNat = 64.0f;
constexpr size_t kBuckets = 64 * 40 + 1;

size_t bucket_of(float max, float l) {
  const float b = (max - l) * kBucketsPerNat;  // ≥ 0; monotone in l, so ties share a bucket
  return b >= float(kBuckets - 1) ? kBuckets - 1 : static_cast<size_t>(b);
}

}  // namespace

float max_logit(std::span<const float> logits, const Candidates& cands) {
  if (cands.all) return row_max(logits);
  float m = -__builtin_inff();
  for (TokenId id : cands.ids) m = std::max(m, logits[id]);
  return m;
}

double candidate_weights(std::span<const float> logits, const Candidates& cands, float max,
                         TruncationScratch& scratch) {
  auto& w = scratch.weights;
  if (cands.all) {
    w.resize(logits.size());
    return exp_weights(logits, max, w, scratch.block_sums);
  }
  w.resize(cands.ids.size());
  double total = 0.0;
  for (size_t i = 0; i < cands.ids.size(); ++i) {
    w[i] = exp_nonpositive(logits[cands.ids[i]] - max);
    total += w[i];
  }
  return total;
}

void apply_temperature(std::span<float> logits, const Candidates& cands, float temperature) {
  if (temperature == 1.0f) return;
  if (cands.all) {
    divide_row(logits, temperature);  // −inf stays −inf
  } else {
    for (TokenId id : cands.ids) logits[id] /= temperature;  // a division, as HF's warper does
  }
}

void truncate_top_k(std::span<const float> logits, Candidates& cands, int k, TruncationScratch& scratch) {
  if (k <= 0 || (!cands.all && size_t(k) >= cands.ids.size())) return;
  auto& heap = scratch.heap;
  if (cands.all) {
    if (select_top_k(logits, size_t(k), heap) <= size_t(k)) return;
  } else {
    // A short list: rank it directly.
    auto& order = scratch.order;
    order = cands.ids;
    std::nth_element(order.begin(), order.begin() + (k - 1), order.end(),
                     [&](TokenId a, TokenId b) { return better(logits[a], a, logits[b], b); });
    heap.clear();
    for (int j = 0; j < k; ++j) heap.emplace_back(logits[order[j]], order[j]);
  }
  cands.all = false;
  cands.ids.clear();
  for (const auto& e : heap) cands.ids.push_back(e.second);
  std::sort(cands.ids.begin(), cands.ids.end());
}

void truncate_top_p(std::span<const float> logits, Candidates& cands, float top_p, TruncationScratch& scratch) {
  if (top_p >= 1.0f || (!cands.all && cands.ids.size() <= 1)) return;
  const float max = max_logit(logits, cands);
  const double target = double(top_p) * candidate_weights(logits, cands, max, scratch);
  const auto& w = scratch.weights;

  // Mass per gap bucket, then the first bucket at which the mass ranked so far reaches the target.
  auto& mass = scratch.bucket_mass;
  mass.assign(kBuckets, 0.0);
  if (cands.all) {
    for (size_t i = 0; i < logits.size(); ++i) {
      if (w[i] > 0.0f) mass[bucket_of(max, logits[i])] += w[i];  // −inf and underflow: no mass
    }
  } else {
    for (size_t j = 0; j < cands.ids.size(); ++j) mass[bucket_of(max, logits[cands.ids[j]])] += w[j];
  }
  size_t crossing = kBuckets;
  double before_crossing = 0.0;
  for (size_t b = 0; b < kBuckets; ++b) {
    if (before_crossing + mass[b] >= target) {
      crossing = b;
      break;
    }
    before_crossing += mass[b];
  }
  if (crossing == kBuckets) return;  // rounding: the whole mass stays below the target

  // Buckets before the crossing are kept whole (collected in id order); the crossing bucket is
  // ranked and cut, then merged in.
  std::vector<TokenId> kept;
  auto& order = scratch.order;
  order.clear();
  const auto place = [&](TokenId id) {
    const size_t b = bucket_of(max, logits[id]);
    if (b < crossing)
      kept.push_back(id);
    else if (b == crossing)
      order.push_back(id);
  };
  if (cands.all) {
    // A bucket at or below the crossing means logit > max − (crossing + 1)/64: a cheap test first
    // (one bucket looser, so float rounding cannot exclude a member).
    const float floor = max - float(crossing + 2) / kBucketsPerNat;
    for (size_t i = 0; i < logits.size(); ++i) {
      if (logits[i] >= floor) place(static_cast<TokenId>(i));
    }
  } else {
    for (TokenId id : cands.ids) place(id);
  }
  std::sort(order.begin(), order.end(), [&](TokenId a, TokenId b) { return better(logits[a], a, logits[b], b); });
  double before = before_crossing;
  size_t taken = 0;
  while (taken < order.size() && before < target) before += exp_nonpositive(logits[order[taken++]] - max);
  const size_t whole = kept.size();
  std::sort(order.begin(), order.begin() + taken);
  kept.insert(kept.end(), order.begin(), order.begin() + taken);
  std::inplace_merge(kept.begin(), kept.begin() + whole, kept.end());
  cands.all = false;
  cands.ids = std::move(kept);
}

void truncate_min_p(std::span<const float> logits, Candidates& cands, float min_p) {
  if (min_p <= 0.0f) return;
  const float max = max_logit(logits, cands);
  // p_i / p_max = exp(l_i − max): no normalisation needed, and the argmax gives exp(0) = 1 ≥ min_p.
  // Logits clearly below the threshold skip the exp.
  const float clearly_below = max + std::log(min_p) - 0.01f;
  const auto keep = [&](float l) { return l >= clearly_below && exp_nonpositive(l - max) >= min_p; };
  std::vector<TokenId> kept;
  if (cands.all) {
    for (size_t i = 0; i < logits.size(); ++i) {
      if (keep(logits[i])) kept.push_back(static_cast<TokenId>(i));
    }
  } else {
    for (TokenId id : cands.ids) {
      if (keep(logits[id])) kept.push_back(id);
    }
  }
  cands.all = false;
  cands.ids = std::move(kept);
}

void truncate_top_n_sigma(std::span<const float> logits, Candidates& cands, float n) {
  if (n <= 0.0f) return;
  const float max = max_logit(logits, cands);
  double sum = 0.0;
  size_t count = 0;
  cands.for_each(logits, [&](TokenId id) {
    sum += logits[id];
    ++count;
  });
  if (count <= 1) return;
  const double mean = sum / double(count);
  double sq = 0.0;
  cands.for_each(logits, [&](TokenId id) { sq += (logits[id] - mean) * (logits[id] - mean); });
  const double threshold = double(max) - double(n) * std::sqrt(sq / double(count));
  filter(logits, cands, [&](TokenId id) { return double(logits[id]) >= threshold; });
}

}  // namespace specserve::sampling
