#include "sampling/logprobs.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "sampling/row_kernels.h"

namespace specserve::sampling {
namespace {

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
  Logprobs out;
  const float max = row_max(logits);
  if (!(max > kNegInf)) {
    out.chosen = kNegInf;
    return out;
  }
  const double lse = double(max) + std::log(exp_sum(logits, max));
  const auto to_logprob = [lse](double l) { return static_cast<float>(l - lse); };
  out.chosen =
      chosen >= 0 && size_t(chosen) < logits.size() && logits[chosen] > kNegInf ? to_logprob(logits[chosen]) : kNegInf;
  std::vector<std::pair<float, TokenId>> best;
  select_top_k(logits, static_cast<size_t>(std::max(top_n, 0)), best);
  std::sort(best.begin(), best.end(),
            [](const auto& a, const auto& b) { return a.first != b.first ? a.first > b.first : a.second < b.second; });
  for (const auto& [l, id] : best) out.top.push_back({id, to_logprob(l)});
  return out;
}

Logprobs logprobs_over_candidates(std::span<const float> logits, const Candidates& cands,
                                  std::span<const float> weights, double total, TokenId chosen, int top_n) {
  Logprobs out;
  out.chosen = kNegInf;
  TopN best(top_n);
  const double log_total = std::log(total);
  size_t index = 0;
  cands.for_each(logits, [&](TokenId id) {
    const float w = cands.all ? weights[id] : weights[index];
    ++index;
    if (w <= 0.0f) return;
    const double lp = std::log(double(w)) - log_total;
    best.offer(id, lp);
    if (id == chosen) out.chosen = static_cast<float>(lp);
  });
  out.top = best.take([](double lp) { return static_cast<float>(lp); });
  return out;
}

}  // namespace specserve::sampling
