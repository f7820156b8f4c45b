#pragma once
// The sampler: one request's whole pipeline from a logits row to a token. Plain decoding, every
// verify row of speculative decoding, and the drafter all go through this one object, so
// speculation cannot change what is emitted (docs/DESIGN.md §1).
//
//   row ──mask padded ids──► history stages (bias, penalties, DRY, min_tokens; in params.order)
//       ──T = 0──► argmax (ties → lowest id)
//       ──T > 0──► shaping stages (temperature, top-n-sigma, top-k, top-p, min-p; in params.order)
//                  ──► softmax over the survivors ──► inverse CDF in token-id order at
//                  u = position_uniform(seed, position, kSample)
//
// The result is a pure function of (logits bits, params, history, seed, position): no hidden
// state, no sequential RNG, single-threaded arithmetic in a fixed order. The position is
// state.length(), the absolute index of the token being chosen.
//
// How the DFlash verifier uses it (docs/DFLASH.md §4, §6). `state` holds the committed tokens and the
// pending token x_s, so state.length() = s + 1 is the position row 0 decides:
//   verify, argmax drafts (the default; bit-identical to plain decoding):
//     for i = 0..γ: t = pick(row_i, state).token; state.push(t);
//                   if i == γ or t != d_{i+1}: stop   (t is the correction or the bonus token)
//     — row i sees the history plus d_1..d_i exactly as plain decoding would, because the pushed
//     picks equal the accepted drafts. To compute the rows' logits first, push the drafts,
//     run the target, then truncate(s + 1) and walk as above.
//   penalty-aware drafting: for slot k, apply_history_processors(drafter_row_k, state + d_1..d_{k−1})
//     then argmax_lowest_id; truncate the state back afterwards.
//   sampled drafts: q = processed_distribution(drafter_row); d ~ q with uniform(pos, kDraft);
//     p = processed_distribution(target_row); accept_draft(p[d], q[d], uniform(pos, kAccept));
//     on rejection sample_residual(p, q, uniform(pos, kResidual)) (draft_acceptance.h);
//     pos = state.length() at that row.
//   raw-argmax mode (not lossless): argmax_lowest_id(raw_row.first(vocab().real())).
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "sampling/dry.h"
#include "sampling/logprobs.h"
#include "sampling/philox.h"
#include "sampling/sampler_state.h"
#include "sampling/sampling_params.h"
#include "sampling/truncation.h"
#include "sampling/types.h"

namespace specserve::sampling {

struct Pick {
  TokenId token = 0;
  std::optional<Logprobs> logprobs;  // set when the request asked for logprobs
};

// Per-thread scratch; reusing one keeps a step's rows free of allocations. Not shared between
// threads at the same time.
struct SamplerWorkspace {
  std::vector<float> logits;          // the row being processed
  std::vector<float> history_logits;  // a copy after the history stages (logprobs)
  Candidates candidates;              // ids still allowed
  TruncationScratch truncation;
  DryScratch dry;
};

class Sampler {
 public:
  // Validates everything (specserve::Error naming the field) and resolves the seed: a request
  // without one gets a random seed, readable from seed() to report back.
  Sampler(RequestParams params, VocabBounds vocab);

  uint64_t seed() const { return seed_; }
  const SamplingParams& params() const { return params_.sampling; }
  const StopParams& stop_params() const { return params_.stop; }
  VocabBounds vocab() const { return vocab_; }

  // True when pick() is the plain argmax of the raw row whatever the history: T = 0, no history stage
  // that changes a logit (bias, penalties, DRY, min_tokens), no logprobs. Then pick(row).token equals
  // Ops::argmax of the row over vocab().real() columns (or the row has no finite entry), and a
  // backend may pick on the device without sending the row to the host.
  bool picks_raw_argmax() const { return picks_raw_argmax_; }
  // A history for this request (binds the repetition window).
  SamplerState make_state(std::span<const TokenId> prompt) const;

  // The token at position state.length(), and its logprobs when asked for.
  Pick pick(std::span<const float> logits, const SamplerState& state, SamplerWorkspace& ws) const;
  Pick pick(std::span<const float> logits, const SamplerState& state) const;  // thread-local workspace

  // For the drafter: masks padded ids and applies the history stages in place (no temperature or
  // truncation), so that its argmax is the target's greedy pick when the two rows agree.
  void apply_history_processors(std::span<float> logits, const SamplerState& state, SamplerWorkspace& ws) const;

  // The distribution pick() draws from, dense over the row (0 outside the survivors); at T = 0
  // the point mass on the argmax. For the sampled-draft mode's p and q.
  void processed_distribution(std::span<const float> logits, const SamplerState& state, SamplerWorkspace& ws,
                              std::span<float> out) const;

  // Logprobs of `token` at this row (params().logprobs_source decides which distribution); for a
  // token chosen by another rule, e.g. a residual sample. Uses params().top_logprobs.
  Logprobs logprobs(std::span<const float> logits, const SamplerState& state, TokenId token,
                    SamplerWorkspace& ws) const;

  // The request's uniform at `position` in `stream`.
  double uniform(uint64_t position, RandomStream stream = RandomStream::kSample) const {
    return position_uniform(seed_, position, stream);
  }

 private:
  void check_row(size_t size) const;
  // Copies the row into ws.logits (NaN → −inf, +inf → FLT_MAX, padded ids → −inf) and runs the
  // history stages.
  void run_history(std::span<const float> logits, const SamplerState& state, SamplerWorkspace& ws) const;
  void history_in_place(std::span<float> row, const SamplerState& state, SamplerWorkspace& ws) const;
  // T > 0: runs the shaping stages on ws.candidates, then fills ws.truncation.weights with the
  // survivors' softmax weights (candidate_weights) and returns their sum.
  double run_shaping(SamplerWorkspace& ws) const;
  // T = 0: the argmax of ws.logits, lowest id on ties.
  TokenId greedy_pick(const SamplerWorkspace& ws) const;
  // The token at u's place in the inverse CDF of the weights run_shaping left.
  TokenId sample_weights(const SamplerWorkspace& ws, double total, double u) const;
  Logprobs make_logprobs(SamplerWorkspace& ws, TokenId token, double total) const;  // scales history_logits

  RequestParams params_;
  VocabBounds vocab_;
  uint64_t seed_ = 0;
  std::vector<TokenId> stop_ids_;  // masked before min_tokens
  DryBreakers dry_breakers_;
  bool picks_raw_argmax_ = false;
};

// A pick computed by the backend (Ops::argmax over the real vocabulary, for a sampler whose
// picks_raw_argmax() holds): the id itself, or for -1 (the row had no finite entry) the Error pick()
// throws.
TokenId backend_argmax_pick(int32_t id);

// argmax with ties to the lowest id, over a raw row (e.g. a drafter row after
// apply_history_processors). Throws if no entry is finite.
TokenId argmax_lowest_id(std::span<const float> logits);

}  // namespace specserve::sampling
