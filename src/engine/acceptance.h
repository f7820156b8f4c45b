#pragma once
// Acceptance of one sequence's drafts at a verify step (docs/DESIGN.md §1.4–1.5, docs/DFLASH.md §6).
//
// The verify rows are [pending, d1..dk]; row r judges d_{r+1}. Every mode returns the accepted
// drafts followed by one target token (the correction at the first rejection, or the bonus token
// after the last draft), pushing each onto the history as plain decoding would.
//
//   SampleMatch, point-mass drafts (the default): the pick at row r is exactly plain decoding's
//     token at that position (Sampler::pick: full pipeline, position-keyed uniform); d_{r+1} is
//     accepted iff it equals the pick. Bit-identical to decoding without a drafter, at any T.
//   SampleMatch, sampled drafts (the proposer kept q for each draft): accept d ~ q with
//     probability min(1, p(d)/q(d)), on rejection sample norm(max(p − q, 0)); p and q are the
//     processed distributions of the target row and the drafter row. Distribution-exact, not
//     bit-identical (its uniforms come from their own streams, philox.h).
//   RawArgmax (Atlas's DFlash behaviour, for comparison; NOT lossless): on verify rows the raw
//     argmax of the target's logits is compared with the draft and emitted, ignoring temperature,
//     penalties and every other processor. Steps without drafts decode normally.
#include <functional>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "engine/draft_proposer.h"
#include "sampling/logprobs.h"
#include "sampling/sampler.h"

namespace specserve::engine {

enum class VerifyMode { SampleMatch, RawArgmax };

std::string_view verify_mode_name(VerifyMode m);      // "sample-match", "raw-argmax"
VerifyMode parse_verify_mode(std::string_view name);  // throws Error naming the accepted values

struct Verdict {
  int accepted = 0;
  std::vector<int32_t> tokens;  // accepted + 1 entries: the accepted drafts, then the target's token
  std::vector<std::optional<sampling::Logprobs>> logprobs;  // parallel to tokens (set when requested)
};

// `row(r)` is the target's logits row r (0..drafts.size()); `history` holds everything up to the
// pending token and receives the returned tokens. `drafts_from` (may be null) supplies q for
// sampled drafts.
Verdict verify_drafts(const sampling::Sampler& sampler, sampling::SamplerState& history,
                      std::span<const int32_t> drafts, const std::function<std::span<const float>(int)>& row,
                      const DraftContext* drafts_from, VerifyMode mode, sampling::SamplerWorkspace& ws);

// Sample-match for a request whose rows the backend reduced to their argmaxes (the DeviceArgmax
// picker, engine/row_picker.h: Sampler::picks_raw_argmax(), point-mass drafts): ids[r] is row r's
// Ops::argmax over the real vocabulary, which is exactly pick()'s token there (-1, no finite entry,
// is the Error pick() throws). Accepts while the draft equals it, pushing the tokens onto `history`.
Verdict verify_drafts_by_argmax(sampling::SamplerState& history, std::span<const int32_t> drafts,
                                std::span<const int32_t> ids);

}  // namespace specserve::engine
