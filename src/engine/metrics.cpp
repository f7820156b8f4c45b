#include "engine/metrics.h"

#include <algorithm>

namespace specserve::engine {

Histogram::Histogram(std::vector<double> upper_bounds) : bounds_(std::move(upper_bounds)), counts_(bounds_.size() + 1) {
  std::sort(bounds_.begin(), bounds_.end());
  for (auto& c : counts_) c.store(0, std::memory_order_relaxed);
}

void Histogram::observe(double value) {
  size_t i = std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin();  // first bound >= value
  counts_[i].fetch_add(1, std::memory_order_relaxed);
  double s = sum_.load(std::memory_order_relaxed);
  while (!sum_.compare_exchange_weak(s, s + value, std::memory_order_relaxed)) {
  }
  count_.fetch_add(1, std::memory_order_relaxed);
}

Histogram::Snapshot Histogram::snapshot() const {
  Snapshot s;
  s.upper_bounds = bounds_;
  uint64_t acc = 0;
  for (size_t i = 0; i < counts_.size(); ++i) {
    acc += counts_[i].load(std::memory_order_relaxed);
    s.cumulative_counts.push_back(acc);
  }
  // Read racing with observe(): make the exposition self-consistent (+Inf bucket == count).
  s.count = acc;
  s.sum = sum_.load(std::memory_order_relaxed);
  return s;
}

const char* finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::Stop: return "stop";
    case FinishReason::Length: return "length";
    case FinishReason::Cancelled: return "cancelled";
    case FinishReason::Error: return "error";
    case FinishReason::ToolCalls: return "tool_calls";
  }
  return "unknown";
}

namespace {
std::vector<double> latency_buckets() {
  return {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0};
}
std::vector<double> request_buckets() {
  return {0.1, 0.3, 0.5, 1, 2.5, 5, 10, 15, 20, 30, 40, 50, 60, 120, 240, 480, 960};
}
}  // namespace

EngineMetrics::EngineMetrics()
    : time_to_first_token(latency_buckets()),
      inter_token_latency(latency_buckets()),
      request_latency(request_buckets()) {}

void EngineMetrics::record_spec_round(int num_drafts_proposed, int num_accepted) {
  spec_num_drafts.fetch_add(1, std::memory_order_relaxed);
  spec_num_draft_tokens.fetch_add(num_drafts_proposed, std::memory_order_relaxed);
  spec_num_accepted_tokens.fetch_add(num_accepted, std::memory_order_relaxed);
  for (int i = 0; i < num_accepted && i < kMaxDraftPositions; ++i) {
    spec_accepted_per_pos[i].fetch_add(1, std::memory_order_relaxed);
  }
}

}  // namespace specserve::engine
