#pragma once
// How one sequence's tokens are picked from its logits rows in one step: the picker, chosen once per
// sequence per step (choose_picker) when the rows are laid out, then used for every row of that
// sequence (pick_rows).
//
//   SamplingPipeline: the logits rows come to the host and every pick is Sampler::pick (the full
//     pipeline: penalties, temperature, top-k/p, position-keyed uniform), judged by the verify mode
//     (engine/acceptance.h).
//   DeviceArgmax: the backend reduces each row to its argmax over the real vocabulary
//     (SequenceSpan::argmax_columns) and the rows never leave the device. Chosen only where that
//     argmax IS the pipeline's pick (Sampler::picks_raw_argmax(): T = 0, nothing that changes a logit,
//     no logprobs) and the drafts are point masses judged by sample-match, so the tokens are exactly
//     the SamplingPipeline's.
//
// A prefill's last row is picked as a verify with no drafts: the first token.
#include <cstdint>
#include <span>

#include "engine/acceptance.h"
#include "engine/draft_proposer.h"
#include "sampling/sampler.h"

namespace specserve::engine {

enum class Picker { SamplingPipeline, DeviceArgmax };

// `sampled_drafts`: the drafts to verify carry their draft distribution q (sampled-draft mode).
Picker choose_picker(const sampling::Sampler& sampler, bool has_drafts, bool sampled_drafts, VerifyMode mode);

// The columns the forward reduces each of the sequence's logits rows to (SequenceSpan::argmax_columns;
// 0: the rows themselves are wanted).
int64_t argmax_columns(Picker picker, const sampling::Sampler& sampler);

// The sequence's logits rows of one step, as its picker receives them: rows.size() == drafts + 1.
struct PickerRows {
  std::span<const float> logits;  // SamplingPipeline: [drafts + 1, vocab] f32, row-major
  int64_t vocab = 0;
  std::span<const int32_t> argmax;  // DeviceArgmax: one id per row (ForwardResult::argmax)
};

// Picks the sequence's tokens from its rows and judges `drafts` against them (pushing the picked tokens
// onto `history`); `drafts_from` (may be null) supplies q for sampled drafts.
Verdict pick_rows(Picker picker, const sampling::Sampler& sampler, sampling::SamplerState& history,
                  std::span<const int32_t> drafts, const PickerRows& rows, const DraftContext* drafts_from,
                  VerifyMode mode, sampling::SamplerWorkspace& ws);

}  // namespace specserve::engine
