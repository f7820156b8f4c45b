#include "spec/draft_selection.h"

#include "core/error.h"
#include "sampling/draft_acceptance.h"

namespace specserve::spec {

std::string_view draft_sampling_name(DraftSampling s) { return s == DraftSampling::Sample ? "sample" : "argmax"; }

DraftSampling parse_draft_sampling(std::string_view name) {
  if (name == "argmax") return DraftSampling::Argmax;
  if (name == "sample") return DraftSampling::Sample;
  fail("draft sampling must be argmax or sample (got '{}')", name);
}

void select_drafts(std::span<const float> rows, int n, const sampling::Sampler& sampler,
                   const sampling::SamplerState& history, DraftSelection how, sampling::SamplerWorkspace& ws,
                   std::vector<int32_t>& drafts, std::vector<float>& q) {
  const auto V = static_cast<size_t>(sampler.vocab().vocab_size);
  SS_CHECK(rows.size() >= static_cast<size_t>(n) * V, "drafts: {} logits for {} rows of {}", rows.size(), n, V);
  const bool sample = how.sampling == DraftSampling::Sample && !how.raw;
  if (sample) q.assign(static_cast<size_t>(n) * V, 0.0f);
  // Slot k is judged by verify row k−1, whose history ends with d_{k−1}: extend a copy likewise.
  sampling::SamplerState h = history;
  std::vector<float> row;
  for (int k = 0; k < n; ++k) {
    const std::span<const float> raw = rows.subspan(static_cast<size_t>(k) * V, V);
    int32_t d = 0;
    if (how.raw) {
      d = sampling::argmax_lowest_id(raw.first(static_cast<size_t>(sampler.vocab().real())));
    } else if (sample) {
      const std::span<float> qk(q.data() + static_cast<size_t>(k) * V, V);
      sampler.processed_distribution(raw, h, ws, qk);
      d = sampling::sample_from(qk, sampler.uniform(h.length(), sampling::RandomStream::kDraft));
    } else {
      row.assign(raw.begin(), raw.end());
      sampler.apply_history_processors(row, h, ws);
      d = sampling::argmax_lowest_id(row);
    }
    drafts.push_back(d);
    h.push(d);
  }
}

}  // namespace specserve::spec
