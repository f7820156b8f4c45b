#include "engine/row_picker.h"

#include "core/error.h"

namespace specserve::engine {

Picker choose_picker(const sampling::Sampler& sampler, bool has_drafts, bool sampled_drafts, VerifyMode mode) {
  if (!sampler.picks_raw_argmax()) return Picker::SamplingPipeline;
  if (!has_drafts) return Picker::DeviceArgmax;
  return mode == VerifyMode::SampleMatch && !sampled_drafts ? Picker::DeviceArgmax : Picker::SamplingPipeline;
}

int64_t argmax_columns(Picker picker, const sampling::Sampler& sampler) {
  return picker == Picker::DeviceArgmax ? sampler.vocab().real() : 0;
}

Verdict pick_rows(Picker picker, const sampling::Sampler& sampler, sampling::SamplerState& history,
                  std::span<const int32_t> drafts, const PickerRows& rows, const DraftContext* drafts_from,
                  VerifyMode mode, sampling::SamplerWorkspace& ws) {
  const size_t n = drafts.size() + 1;
  if (picker == Picker::DeviceArgmax) {
    SS_CHECK(rows.argmax.size() >= n, "pick: {} argmax rows for {} drafts", rows.argmax.size(), drafts.size());
    return verify_drafts_by_argmax(history, drafts, rows.argmax.first(n));
  }
  const auto V = static_cast<size_t>(rows.vocab);
  SS_CHECK(rows.logits.size() >= n * V, "pick: {} logits floats for {} rows of {}", rows.logits.size(), n, V);
  return verify_drafts(
      sampler, history, drafts, [&](int r) { return rows.logits.subspan(static_cast<size_t>(r) * V, V); }, drafts_from,
      mode, ws);
}

}  // namespace specserve::engine
