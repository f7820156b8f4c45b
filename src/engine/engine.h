#pragma once
// The inference engine: a request queue, and one scheduler thread that runs the step loop over a
// TargetModel with continuous batching (engine/step.cpp, Engine::step, is the whole loop on one page).
//
// HTTP threads call submit() (cheap: validation and a queue push) and read results from the
// returned ResultStream; only the scheduler thread touches the model.
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <thread>
#include <vector>

#include "core/error.h"
#include "engine/acceptance.h"
#include "engine/batch_plan.h"
#include "engine/draft_length_policy.h"
#include "engine/draft_proposer.h"
#include "engine/engine_options.h"
#include "engine/kv_budget.h"
#include "engine/metrics.h"
#include "engine/prefix_cache.h"
#include "engine/request.h"
#include "engine/result_stream.h"
#include "engine/row_layout.h"
#include "engine/sequence.h"
#include "engine/spec_step.h"
#include "engine/step_trace.h"
#include "model/target_model.h"

namespace specserve::engine {

// Thrown by submit() when the queue is full (the HTTP layer answers 503).
class QueueFull : public Error {
 public:
  using Error::Error;
};

class Engine {
 public:
  // `model` and `proposer` (may be null: plain decoding) must outlive the engine.
  Engine(TargetModel& model, EngineOptions options, TokenText token_text, DraftProposer* proposer = nullptr);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Validates and enqueues. Throws Error for parameters the sampler rejects or a request that can
  // never fit the KV budget; QueueFull when max_queue requests are already waiting.
  std::shared_ptr<ResultStream> submit(GenerationRequest request);

  // Stops taking requests, lets running and queued ones finish for up to `grace`, cancels the
  // rest, and joins the scheduler thread. Idempotent.
  void shutdown(std::chrono::milliseconds grace);

  EngineMetrics& metrics() { return metrics_; }
  const EngineOptions& options() const { return options_; }
  // The most positions one sequence may ever hold (context length and KV budget), including the
  // verify overhang; prompt + max_tokens must stay within max_sequence_tokens().
  int64_t max_sequence_tokens() const;

 private:
  void run();
  // One step of the loop: its stages, in order (engine/step.cpp describes them).
  void step();
  struct SpanResult;
  bool schedule_sequences();
  std::vector<PlannedSpan> plan_rows(bool* held = nullptr) const;  // held: the prefill hold kept chunks back
  // The prefill hold's bookkeeping (engine/batch_plan.h: hold_prefill): each prefilling sequence's wait after the
  // step's plan, and whether the step admitted a prompt (ArrivalRate).
  void note_prefill_waits(std::span<const PlannedSpan> plan);
  void note_admissions(int64_t admitted);
  // Preemption by swap (engine/swap.cpp): the plan of a step whose blocks fit the budget, swapping out
  // the newest running sequences until they do; swapped-out sequences back in when they fit.
  std::vector<PlannedSpan> plan_with_blocks();
  int64_t blocks_after(std::span<const PlannedSpan> plan) const;
  void preempt_newest();
  void resume_swapped();
  // KV budget (engine/kv_budget.h): blocks running sequences hold; blocks a sequence needs for a step of
  // `rows` rows; the swap space the live sequences need with a candidate of the given worst case.
  int64_t blocks_held() const;
  int64_t blocks_private() const;
  int64_t blocks_needed(const Sequence& s, int64_t rows) const;
  // Evicts reclaimable prefix-cache blocks until `blocks` more fit the budget; whether they do.
  bool make_room(int64_t blocks);
  size_t swap_reservation_with(int64_t worst_blocks, size_t worst_swap_bytes) const;
  size_t worst_swap_bytes(int64_t worst_positions, bool drafts) const;
  void publish_budget_gauges();
  ForwardResult forward(const StepRows& rows);
  std::vector<SpanResult> pick_accept_commit(const StepRows& rows, const ForwardResult& out);
  void hand_over_context(std::span<const SpanResult> results, const ForwardResult& out);
  void stream_tokens(std::span<const SpanResult> results);
  void propose_drafts();
  // More sequences decode than options_.spec_max_batch allows to speculate.
  bool speculation_paused() const;
  // γ for each decoding sequence (its max_drafts under a fixed policy; engine/draft_length_policy.h),
  // valid until the next call.
  std::span<const int> draft_lengths(std::span<Sequence* const> decoding, std::span<const int> max_drafts);
  // Requests in and out (engine.cpp).
  void intake();
  void reap_cancelled();
  void admit();
  void retire_finished();
  void fail_all(const std::string& error);
  // Prefix cache (engine/prefix_cache.h, engine/prefix_share.cpp, docs/DESIGN.md §5): the row plan's view
  // of a sequence (its chunk boundaries); a request's hit; starting a sequence from it; a sequence's
  // prefill-computed blocks (and drafter blocks, DeltaNet snapshot) into the cache.
  SeqPlanInput plan_input(const Sequence& s) const;
  SeqPlanInput plan_input(int64_t prompt_len, int64_t prefilled, int drafts) const;
  std::vector<PrefixEntryId> find_prefix_hit(const std::vector<int32_t>& prompt, bool drafts) const;
  // Sequence::branch_stop for a prompt whose hit covers `hit_positions`.
  int64_t branch_stop(const std::vector<int32_t>& prompt, int64_t hit_positions) const;
  void start_from_prefix(Sequence& s, std::span<const PrefixEntryId> hit);
  void publish_prefix(Sequence& s);

  // What one span of a step committed and picked (stage 5), for the stages after it.
  struct SpanResult {
    Sequence* seq = nullptr;
    int64_t first_batch_row = 0;         // the span's first row in the forward (its captured rows)
    int64_t first_position = 0;          // the first committed row's position
    std::span<const int32_t> committed;  // the rows the target kept: a prefill chunk, or pending + accepted
    bool picked = false;                 // tokens were picked (not a prefill chunk before the last)
    Verdict picks;                       // the picked tokens (and logprobs), to stream
    std::optional<SpecStep> step;        // for the request's step observer
  };

  TargetModel& model_;
  EngineOptions options_;
  TokenText token_text_;
  DraftProposer* proposer_;
  sampling::VocabBounds vocab_;
  EngineMetrics metrics_;
  // The draft-length policy (adaptive: a step cost model; its gauges go into metrics_ at construction).
  DraftLengthPolicy draft_policy_{options_, metrics_};
  // The policy's last prediction (draft_lengths): its propose and the next step's forward, timed from this
  // choice to the next one; measured only when that step ran the predicted rows (no prefill chunk, the
  // same decoding sequences).
  struct StepPrediction {
    bool valid = false;
    std::chrono::steady_clock::time_point at;
    double seconds = 0;  // the cost model's, uncorrected
    bool drafting = false;
    uint64_t step = 0;
    size_t sequences = 0;
  };
  StepPrediction step_prediction_;
  bool step_had_prefill_ = false;  // the current step's plan has a prefill chunk
  ArrivalRate arrivals_;           // the prefill hold's: steps that admitted a prompt (batch_plan.h)
  StepTrace step_trace_;           // SPECSERVE_STEP_TRACE (a debugging aid)
  // hand_over_context's and propose_drafts' lists, kept from step to step (their storage reused).
  std::vector<DraftProposer::ContextRows> context_rows_;
  std::vector<Sequence*> decoding_;
  std::vector<int> max_drafts_;
  std::vector<PolicySequence> policy_sequences_;
  std::vector<std::pair<SequenceState*, int64_t>> commits_;  // pick_accept_commit's, one call a step
  std::vector<ProposeItem> propose_items_;
  int lookahead_ = 0;  // DraftProposer::positions_past_context (0 without a proposer)
  // The target's swap image: fixed bytes (DeltaNet state) and bytes per KV block (swap.cpp).
  size_t target_swap_fixed_ = 0, target_swap_per_block_ = 0;
  size_t swap_used_ = 0;  // host bytes of the swapped-out sequences' images

  // A request between submit() and admission (no model state yet).
  struct Queued {
    uint64_t id = 0;
    GenerationRequest request;
    std::shared_ptr<ResultStream> stream;
    std::shared_ptr<const sampling::Sampler> sampler;
    int64_t worst_positions = 0;  // prompt + max_tokens (+ the drafter's lookahead)
  };
  void finish_queued(Queued& q, FinishReason reason, const std::string& error);

  // Submission queue (HTTP threads → scheduler).
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Queued> submitted_;  // not yet seen by the scheduler
  uint64_t next_id_ = 1;
  bool stopping_ = false;    // no new submissions
  bool cancel_all_ = false;  // grace over: cancel everything
  bool exit_ = false;

  // Scheduler-thread state. The prefix cache outlives the sequences (they release its entries).
  std::unique_ptr<PrefixCache> cache_;  // null: --no-prefix-cache (or a model without attention layers)
  int64_t snapshot_blocks_ = 0;         // KV-pool blocks of one DeltaNet snapshot (0: dense target or no cache)
  std::deque<Queued> waiting_;          // FCFS admission queue
  std::vector<std::unique_ptr<Sequence>> running_;  // admitted, in admission order
  std::vector<std::unique_ptr<Sequence>> swapped_;  // preempted to host memory, in admission order
  sampling::SamplerWorkspace workspace_;

  std::thread thread_;
};

}  // namespace specserve::engine
