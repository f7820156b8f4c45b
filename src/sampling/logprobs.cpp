#include "sampling/logprobs.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace specserve::sampling {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Keeps the best n (score desc, id asc) of a stream of (id, score) in a small heap: O(V log n).
class TopN {
 public:
  explicit TopN(int n) : n_(static_cast<size_t>(std::max(n, 0))) { heap_.reserve(n_); }

  void offer(TokenId id, double score) {
    if (n_ == 0) return;
    const Entry e{id, score};
    if (heap_.size() < n_) {
      heap_.push_back(e);
      std::push_heap(heap_.begin(), heap_.end(), better);
    } else if (better(e, heap_.front())) {  // front = the worst kept entry
      std::pop_heap(heap_.begin(), heap_.end(), better);
      heap_.back() = e;
      std::push_heap(heap_.begin(), heap_.end(), better);
    }
  }

  // The kept entries best first, each score mapped through to_logprob.
  template <typename F>
  std::vector<TokenLogprob> take(F to_logprob) {
    std::sort(heap_.begin(), heap_.end(), better);
    std::vector<TokenLogprob> out;
    out.reserve(heap_.size());
    for (const Entry& e : heap_) out.push_back({e.id, to_logprob(e.score)});
    return out;
  }

 private:
  struct Entry {
    TokenId id;
    double score;
  };
  static bool better(const Entry& a, const Entry& b) { return a.score != b.score ? a.score > b.score : a.id < b.id; }

  size_t n_;
  std::vector<Entry> heap_;
};

}  // namespace

Logprobs logprobs_over_row(std::span<const float> logits, TokenId chosen, int top_n) {
  float max = kNegInf;
  for (float l : logits) max = std::max(max, l);
  Logprobs out;
  if (!(max > kNegInf)) {
    out.chosen = kNegInf;
    return out;
  }
  double sum = 0.0;
  TopN best(top_n);
  for (size_t id = 0; id < logits.size(); ++id) {
    if (logits[id] == kNegInf) continue;
    sum += std::exp(logits[id] - max);
    best.offer(static_cast<TokenId>(id), logits[id]);
  }
  const double lse = double(max) + std::log(sum);
  const auto to_logprob = [lse](double l) { return static_cast<float>(l - lse); };
  out.chosen = chosen >= 0 && size_t(chosen) < logits.size() && logits[chosen] != kNegInf
                   ? to_logprob(logits[chosen])
                   : kNegInf;
  out.top = best.take(to_logprob);
  return out;
}

Logprobs logprobs_over_candidates(std::span<const TokenId> candidates, std::span<const float> weights,
                                  double total, TokenId chosen, int top_n) {
  Logprobs out;
  out.chosen = kNegInf;
  TopN best(top_n);
  const double log_total = std::log(total);
  for (size_t i = 0; i < candidates.size(); ++i) {
    if (weights[i] <= 0.0f) continue;
    const double lp = std::log(double(weights[i])) - log_total;
    best.offer(candidates[i], lp);
    if (candidates[i] == chosen) out.chosen = static_cast<float>(lp);
  }
  out.top = best.take([](double lp) { return static_cast<float>(lp); });
  return out;
}

}  // namespace specserve::sampling
