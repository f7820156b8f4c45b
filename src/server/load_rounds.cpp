#include "server/load_rounds.h"

#include <algorithm>

#include <fmt/format.h>

namespace specserve::server {

namespace {

// The median of a non-empty list (the mean of the middle two for an even count).
double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

std::vector<LevelSummary> summarize_rounds(const std::vector<LevelResult>& results) {
  std::vector<int> order;
  for (const auto& r : results)
    if (std::find(order.begin(), order.end(), r.concurrency) == order.end()) order.push_back(r.concurrency);
  std::vector<LevelSummary> out;
  for (int c : order) {
    LevelSummary s;
    s.concurrency = c;
    std::vector<double> tps, ttft, itl;
    for (const auto& r : results) {
      if (r.concurrency != c) continue;
      ++s.rounds;
      s.errors += r.errors;
      tps.push_back(r.tokens_per_s);
      ttft.push_back(r.ttft_p50);
      itl.push_back(r.itl_p50);
    }
    s.tokens_per_s_median = median(tps);
    s.tokens_per_s_min = *std::min_element(tps.begin(), tps.end());
    s.tokens_per_s_max = *std::max_element(tps.begin(), tps.end());
    s.ttft_p50_median = median(ttft);
    s.itl_p50_median = median(itl);
    out.push_back(s);
  }
  return out;
}

std::string format_round_summary(const std::vector<LevelSummary>& summaries) {
  std::string out =
      "| concurrency | rounds | errors | output tok/s median | min – max | spread | TTFT p50 median (ms) | ITL p50 "
      "median (ms) |\n|---:|---:|---:|---:|---|---:|---:|---:|\n";
  for (const auto& s : summaries) {
    const double spread =
        s.tokens_per_s_median > 0 ? (s.tokens_per_s_max - s.tokens_per_s_min) / s.tokens_per_s_median : 0;
    out += fmt::format("| {} | {} | {} | {:.1f} | {:.1f} – {:.1f} | {:.1f}% | {:.1f} | {:.2f} |\n", s.concurrency,
                       s.rounds, s.errors, s.tokens_per_s_median, s.tokens_per_s_min, s.tokens_per_s_max,
                       100.0 * spread, s.ttft_p50_median * 1e3, s.itl_p50_median * 1e3);
  }
  return out;
}

}  // namespace specserve::server
