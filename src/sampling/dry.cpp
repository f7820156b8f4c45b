#include "sampling/dry.h"

#include <algorithm>
#include <cmath>

namespace specserve::sampling {

DryBreakers::DryBreakers(const std::vector<std::vector<TokenId>>& sequences) {
  for (const auto& seq : sequences) {
    if (seq.empty()) continue;
    std::vector<TokenId> tail(seq.begin() + 1, seq.begin() + std::min(seq.size(), kMaxTailLength + 1));
    auto& tails = by_head_[seq.front()];
    if (std::find(tails.begin(), tails.end(), tail) == tails.end()) tails.push_back(std::move(tail));
  }
}

const std::vector<std::vector<TokenId>>* DryBreakers::tails(TokenId head) const {
  auto it = by_head_.find(head);
  return it == by_head_.end() ? nullptr : &it->second;
}

bool DryBreakers::is_single_token_breaker(TokenId id) const {
  const auto* t = tails(id);
  return t && std::any_of(t->begin(), t->end(), [](const auto& tail) { return tail.empty(); });
}

namespace {

// The number of trailing tokens of `w` after the most recent complete breaker (w.size() if none).
// Among breakers sharing a head, the longest that matches wins, as in llama.cpp.
int64_t repeat_limit(std::span<const TokenId> w, const DryBreakers& breakers) {
  const int64_t n = static_cast<int64_t>(w.size());
  for (int64_t i = 0; i < n; ++i) {  // i: distance of the head from the last token
    const auto* tails = breakers.tails(w[n - 1 - i]);
    if (!tails) continue;
    int64_t longest = -1;
    for (const auto& tail : *tails) {
      const int64_t len = static_cast<int64_t>(tail.size());
      if (len <= longest || len > i) continue;  // must fit between the head and the end
      if (std::equal(tail.begin(), tail.end(), w.begin() + (n - i))) longest = len;
    }
    if (longest >= 0) return i - longest;
  }
  return n;
}

}  // namespace

void apply_dry(std::span<float> logits, std::span<const TokenId> history, const DryParams& params,
               const DryBreakers& breakers, DryScratch& scratch) {
  if (!params.enabled()) return;
  const size_t window =
      params.penalty_last_n < 0 ? history.size() : std::min(history.size(), size_t(params.penalty_last_n));
  const std::span<const TokenId> w = history.last(window);
  const int64_t n = static_cast<int64_t>(w.size());
  const int64_t allowed = params.allowed_length;
  if (n <= allowed) return;

  const int64_t limit = repeat_limit(w, breakers);
  if (limit < allowed) return;

  // Z-function of the reversed window: z[k] = length of the common prefix of rev and rev[k..],
  // i.e. how many tokens ending at w[n-1-k] match the tokens ending at w[n-1].
  const auto rev = [&](int64_t i) { return w[n - 1 - i]; };
  auto& z = scratch.z;
  z.assign(n, 0);
  for (int64_t k = 1, l = 0, r = 0; k < n; ++k) {  // [l, r): the rightmost match box found so far
    int64_t len = k < r ? std::min<int64_t>(r - k, z[k - l]) : 0;
    while (k + len < n && rev(len) == rev(k + len)) ++len;
    z[k] = static_cast<int32_t>(len);
    if (k + len > r) {
      l = k;
      r = k + len;
    }
  }

  // The longest repeat each candidate next token would extend: w[n-k] follows the run ending at
  // w[n-1-k].
  auto& longest = scratch.longest;
  longest.clear();
  for (int64_t k = 1; k < n; ++k) {
    const int32_t len = static_cast<int32_t>(std::min<int64_t>(z[k], limit));
    if (len < allowed) continue;
    int32_t& best = longest[w[n - k]];
    best = std::max(best, len);
  }

  // Clamp the exponent so base^exp stays below FLT_MAX (ln FLT_MAX ≈ 88.72).
  const int max_exponent = params.base > 1.000001f ? static_cast<int>(88.7228391f / std::log(params.base)) : 0;
  for (const auto& [id, len] : longest) {
    if (id < 0 || size_t(id) >= logits.size() || breakers.is_single_token_breaker(id)) continue;
    int exponent = len - params.allowed_length;
    if (max_exponent > 0) exponent = std::min(exponent, max_exponent);
    const double penalty = double(params.multiplier) * std::pow(double(params.base), exponent);
    logits[id] -= static_cast<float>(penalty);
  }
}

}  // namespace specserve::sampling
