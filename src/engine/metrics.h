#pragma once
// Engine-side metric values: lock-free counters, gauges and fixed-bucket histograms that the
// scheduler thread and HTTP threads update, and that /metrics (server/prometheus_text.cpp) reads.
// Values only; the Prometheus text format lives in the server layer.
#include <array>
#include <atomic>
#include <cstdint>
#include <vector>

namespace specserve::engine {

// Cumulative-bucket histogram with fixed upper bounds (Prometheus semantics: bucket i counts
// observations <= bounds[i]; +Inf is implicit).
class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds);
  void observe(double value);

  struct Snapshot {
    std::vector<double> upper_bounds;
    std::vector<uint64_t> cumulative_counts;  // one per bound, then +Inf (== count)
    double sum = 0;
    uint64_t count = 0;
  };
  Snapshot snapshot() const;

 private:
  std::vector<double> bounds_;
  std::vector<std::atomic<uint64_t>> counts_;  // per bucket, non-cumulative; last is +Inf
  std::atomic<double> sum_{0};
  std::atomic<uint64_t> count_{0};
};

enum class FinishReason { Stop = 0, Length = 1, Cancelled = 2, Error = 3, ToolCalls = 4 };
inline constexpr int kNumFinishReasons = 5;
const char* finish_reason_name(FinishReason r);

struct EngineMetrics {
  EngineMetrics();

  // Requests.
  std::atomic<uint64_t> requests_received{0};
  std::array<std::atomic<uint64_t>, kNumFinishReasons> requests_finished{};
  std::atomic<int64_t> requests_running{0};    // admitted: holding KV / state, or swapped out
  std::atomic<int64_t> requests_waiting{0};    // queued for admission
  std::atomic<uint64_t> requests_rejected{0};  // queue full at submission

  // Tokens.
  std::atomic<uint64_t> prompt_tokens{0};
  std::atomic<uint64_t> generation_tokens{0};

  // Latency (seconds).
  Histogram time_to_first_token;
  Histogram inter_token_latency;  // per emitted token: step gap / tokens emitted in that step
  Histogram request_latency;      // arrival → finish

  // Engine steps.
  std::atomic<uint64_t> steps{0};
  std::atomic<uint64_t> step_rows{0};           // sum of forward rows over steps
  std::atomic<uint64_t> prefill_held_steps{0};  // steps whose short prefill chunks the prefill hold kept back
  std::atomic<int64_t> kv_blocks_used{0};
  std::atomic<int64_t> kv_blocks_total{0};

  // Preemption by swap (engine/swap.h).
  std::atomic<uint64_t> preemptions{0};      // sequences swapped out
  std::atomic<int64_t> requests_swapped{0};  // swapped out now (counted in requests_running too)
  std::atomic<uint64_t> swap_out_bytes{0};   // bytes copied device -> host
  std::atomic<uint64_t> swap_in_bytes{0};    // bytes copied host -> device
  std::atomic<int64_t> swap_space_used_bytes{0};
  std::atomic<int64_t> swap_space_total_bytes{0};

  // Prefix cache (as vLLM counts them): prompt tokens looked up in the cache, and those found there.
  std::atomic<int64_t> prefix_cache_queries{0};
  std::atomic<int64_t> prefix_cache_hits{0};
  std::atomic<int64_t> prefix_cache_blocks{0};  // KV budget blocks the cache holds (held or not, snapshots included)

  // Speculative decoding (names follow vLLM's spec_decode_*).
  static constexpr int kMaxDraftPositions = 32;
  std::atomic<uint64_t> spec_num_drafts{0};        // verify rounds
  std::atomic<uint64_t> spec_num_draft_tokens{0};  // draft tokens proposed
  std::atomic<uint64_t> spec_num_accepted_tokens{0};
  std::array<std::atomic<uint64_t>, kMaxDraftPositions> spec_accepted_per_pos{};  // accepted at draft index i
  std::atomic<uint64_t> spec_paused_steps{0};  // steps with sequences that could draft whose drafter did not run
                                               // (EngineOptions::spec_max_batch, or the policy chose γ = 0 for all)

  // The draft-length policy (engine/draft_length_policy.h): decode rows it gave drafts, those it kept at
  // γ = 0, and probes; and its step cost model's predicted seconds at fixed points (set at start-up).
  std::atomic<uint64_t> spec_policy_drafted{0};
  std::atomic<uint64_t> spec_policy_plain{0};
  std::atomic<uint64_t> spec_policy_probes{0};
  std::atomic<uint64_t> spec_policy_plain_checks{0};  // steps made plain to time one (DraftLengthPolicy)
  // Its measured / predicted step time, for steps with drafts and with plain rows only
  // (StepCostCorrection).
  std::atomic<double> spec_policy_correction_plain{1};
  std::atomic<double> spec_policy_correction_drafting{1};
  struct StepCostPoint {
    const char* kind;  // "decode", "verify" (rows per sequence), "propose"
    int sequences, rows, context;
  };
  static constexpr std::array<StepCostPoint, 8> kStepCostPoints = {{{"decode", 1, 1, 1024},
                                                                    {"decode", 16, 1, 1024},
                                                                    {"decode", 64, 1, 1024},
                                                                    {"decode", 1, 1, 32768},
                                                                    {"verify", 1, 16, 1024},
                                                                    {"verify", 16, 16, 1024},
                                                                    {"propose", 1, 0, 1024},
                                                                    {"propose", 16, 0, 1024}}};
  std::atomic<bool> step_cost_model{false};  // the adaptive policy runs on a cost model
  std::array<std::atomic<double>, kStepCostPoints.size()> step_cost_seconds{};

  void record_spec_round(int num_drafts_proposed, int num_accepted);
};

}  // namespace specserve::engine
