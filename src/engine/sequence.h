#pragma once
// One admitted request inside the engine: the target's per-sequence state (paged KV, DeltaNet
// state), the request's sampler and token history, its stop checker (stop strings held back
// across token boundaries), the proposer's context, and the output channel. Owned and touched by
// the scheduler thread only.
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "engine/acceptance_stats.h"
#include "engine/draft_proposer.h"
#include "engine/metrics.h"
#include "engine/prefix_cache.h"
#include "engine/request.h"
#include "engine/result_stream.h"
#include "model/sequence_state.h"
#include "sampling/sampler.h"
#include "sampling/stop_checker.h"

namespace specserve::engine {

// The bytes a token contributes to the output text ("" for special tokens such as <|im_end|>).
using TokenText = std::function<std::string(int32_t)>;

class Sequence {
 public:
  // `worst_positions`: the most positions it may ever hold (prompt + max_tokens + the drafter's
  // lookahead when it speculates), for the swap space's reservation (engine/swap.h).
  Sequence(uint64_t id, GenerationRequest request, std::shared_ptr<ResultStream> stream,
           std::shared_ptr<const sampling::Sampler> sampler, std::unique_ptr<SequenceState> state,
           int64_t worst_positions);

  uint64_t id() const { return id_; }
  const GenerationRequest& request() const { return request_; }
  ResultStream& stream() { return *stream_; }
  SequenceState& state() { return *state_; }
  const SequenceState& state() const { return *state_; }
  const sampling::Sampler& sampler() const { return *sampler_; }
  sampling::SamplerState& history() { return history_; }
  int64_t worst_positions() const { return worst_positions_; }

  int64_t prompt_len() const { return static_cast<int64_t>(request_.prompt.size()); }
  int64_t prefilled() const { return prefilled_; }
  bool prefilling() const { return prefilled_ < prompt_len(); }
  void advance_prefill(int64_t end) { prefilled_ = end; }

  // The last picked token, not yet fed to the target (the next decode row / verify anchor).
  std::optional<int32_t> pending;
  // Drafts proposed for the next verify (empty: plain decode).
  std::vector<int32_t> drafts;
  std::unique_ptr<DraftContext> draft_context;
  // Its acceptance per draft position, for the draft-length policy (engine/acceptance_stats.h).
  AcceptanceStats acceptance;
  // Its swap image at its longest (engine/kv_budget.h: the swap space's reservation).
  size_t worst_swap_bytes = 0;
  // Prefix cache (engine/prefix_cache.h, docs/DESIGN.md §5): the entries it holds — one per shared block
  // of its target block table, in order — the prompt tokens found in the cache at admission (reported as
  // usage.cached_tokens), and whether a hash collision stopped its blocks from going in.
  PrefixHold prefix;
  int64_t cached_tokens = 0;
  bool prefix_closed = false;
  // Hybrid targets: the last 64-grid point of the cached blocks its prompt matched past its hit (0: none),
  // where its DeltaNet state is kept, so that the next prompt sharing that prefix resumes there
  // (docs/DESIGN.md §5.3).
  int64_t branch_stop = 0;
  // Steps in a row it had a prefill chunk to run and got none (the prefill hold, engine/batch_plan.h).
  int64_t prefill_waited = 0;

  // Generated tokens not yet in the output (remaining max_tokens budget).
  int64_t remaining_tokens() const;

  // KV blocks held now as its own: the target's block table or the drafter context's, the longer (a
  // budget block pays for one of each: engine/kv_budget.h), without the blocks shared through the prefix
  // cache (counted once, as the cache's). 0 while swapped out.
  int64_t kv_blocks() const;
  // Preemption by swap (engine/swap.h): the target state and the drafter context move to host memory
  // and back bit for bit; everything else (sampler state and RNG, token history, stop checker, pending
  // token and drafts, the stream) stays in this object untouched. Blocks shared through the prefix
  // cache are copied like its own and its references dropped: it comes back with its own blocks only.
  // swap_out() returns the host bytes taken, swap_in() those given back.
  size_t swap_bytes() const;
  size_t swap_out();
  size_t swap_in();
  bool swapped_out() const { return swapped_; }
  size_t swapped_bytes() const { return swapped_bytes_; }

  // Runs `tokens` (picked this step, in order) through the stop checker and streams what is
  // final. Returns true when the request finished.
  bool emit(std::span<const int32_t> tokens, const std::vector<std::optional<sampling::Logprobs>>& logprobs,
            const TokenText& token_text, EngineMetrics& metrics);
  // Ends the request without more output (cancellation, timeout, engine error).
  void finish(FinishReason reason, const std::string& error, EngineMetrics& metrics);
  bool finished() const { return finished_; }
  // Finished with FinishReason::Error (e.g. a failed step: its state may be half written).
  bool failed() const { return failed_; }

 private:
  void record_finish(FinishReason reason, EngineMetrics& metrics);

  uint64_t id_;
  GenerationRequest request_;
  std::shared_ptr<ResultStream> stream_;
  std::shared_ptr<const sampling::Sampler> sampler_;
  std::unique_ptr<SequenceState> state_;
  sampling::SamplerState history_;
  sampling::StopChecker stop_;
  int64_t worst_positions_;
  size_t swapped_bytes_ = 0;
  bool swapped_ = false;
  int64_t prefilled_ = 0;
  int64_t kept_tokens_ = 0;
  bool finished_ = false;
  bool failed_ = false;
  std::optional<Clock::time_point> last_emit_;
};

}  // namespace specserve::engine
