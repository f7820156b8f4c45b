#pragma once
// Turning the drafter's logits rows (slots 1..n of one block) into drafts d1..dn.
//
// The drafter's rows go through the same history-dependent processors the verifier applies
// (logit bias, penalties, DRY, min_tokens; docs/DESIGN.md §1.5), with the provisional history
// d1..d_{k−1} for slot k exactly as verify row k−1 will see it: otherwise a penalty the target
// applies makes the drafter propose the very token the verifier has penalised, and acceptance
// collapses.
//   Argmax: argmax (lowest id on ties) of the processed row — a point mass, so sample-match
//     acceptance is exact and bit-identical to plain decoding.
//   Sample: d_k ~ q_k, q_k = the request's full processed distribution of the row (temperature,
//     truncation); the uniform is keyed by d_k's position in the kDraft stream. q_k is kept: the
//     verifier accepts with min(1, p/q).
//   Raw (verify-mode raw-argmax, not lossless): argmax of the raw row over real ids, no processors.
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "sampling/sampler.h"

namespace specserve::spec {

enum class DraftSampling { Argmax, Sample };

std::string_view draft_sampling_name(DraftSampling s);      // "argmax", "sample"
DraftSampling parse_draft_sampling(std::string_view name);  // throws Error naming the values

struct DraftSelection {
  DraftSampling sampling = DraftSampling::Argmax;
  bool raw = false;  // raw argmax, ignoring the request's processors
};

// rows: n × vocab floats (slot k at row k−1); history: up to and including the pending token.
// Appends n drafts to `drafts`; in Sample mode also writes q_k to q[(k−1)·vocab ...] (q resized).
void select_drafts(std::span<const float> rows, int n, const sampling::Sampler& sampler,
                   const sampling::SamplerState& history, DraftSelection how, sampling::SamplerWorkspace& ws,
                   std::vector<int32_t>& drafts, std::vector<float>& q);

}  // namespace specserve::spec
