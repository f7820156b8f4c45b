#include "engine/acceptance.h"

#include "core/error.h"
#include "sampling/draft_acceptance.h"

namespace specserve::engine {

std::string_view verify_mode_name(VerifyMode m) { return m == VerifyMode::RawArgmax ? "raw-argmax" : "sample-match"; }

VerifyMode parse_verify_mode(std::string_view name) {
  if (name == "sample-match") return VerifyMode::SampleMatch;
  if (name == "raw-argmax") return VerifyMode::RawArgmax;
  fail("verify mode must be sample-match or raw-argmax (got '{}')", name);
}

namespace {

using sampling::Sampler;
using sampling::SamplerState;
using sampling::SamplerWorkspace;

void take(Verdict& v, SamplerState& history, int32_t token, std::optional<sampling::Logprobs> lp) {
  history.push(token);
  v.tokens.push_back(token);
  v.logprobs.push_back(std::move(lp));
}

std::optional<sampling::Logprobs> logprobs_of(const Sampler& sampler, std::span<const float> row,
                                              const SamplerState& history, int32_t token, SamplerWorkspace& ws) {
  if (!sampler.params().logprobs) return std::nullopt;
  return sampler.logprobs(row, history, token, ws);
}

// Plain decoding's pick at every row; accept while the draft equals it.
void sample_match(Verdict& v, const Sampler& sampler, SamplerState& history, std::span<const int32_t> drafts,
                  const std::function<std::span<const float>(int)>& row, SamplerWorkspace& ws) {
  const int k = static_cast<int>(drafts.size());
  for (int r = 0; r <= k; ++r) {
    sampling::Pick p = sampler.pick(row(r), history, ws);
    take(v, history, p.token, std::move(p.logprobs));
    if (r == k || drafts[r] != p.token) return;
    ++v.accepted;
  }
}

// d ~ q accepted with probability min(1, p(d)/q(d)); the residual on rejection; the ordinary pick
// (p itself) after the last draft.
void sampled_drafts(Verdict& v, const Sampler& sampler, SamplerState& history, std::span<const int32_t> drafts,
                    const std::function<std::span<const float>(int)>& row, const DraftContext& from,
                    SamplerWorkspace& ws) {
  const int k = static_cast<int>(drafts.size());
  std::vector<float> p(static_cast<size_t>(sampler.vocab().vocab_size));
  for (int r = 0; r < k; ++r) {
    const std::span<const float> q = from.draft_distribution(r);
    SS_CHECK(q.size() == p.size(), "verify: the proposer kept no distribution for draft {}", r);
    sampler.processed_distribution(row(r), history, ws, p);
    const uint64_t position = history.length();
    const int32_t d = drafts[r];
    if (sampling::accept_draft(p[d], q[d], sampler.uniform(position, sampling::RandomStream::kAccept))) {
      take(v, history, d, logprobs_of(sampler, row(r), history, d, ws));
      ++v.accepted;
      continue;
    }
    const int32_t t = sampling::sample_residual(p, q, sampler.uniform(position, sampling::RandomStream::kResidual));
    take(v, history, t, logprobs_of(sampler, row(r), history, t, ws));
    return;
  }
  sampling::Pick bonus = sampler.pick(row(k), history, ws);
  take(v, history, bonus.token, std::move(bonus.logprobs));
}

// Atlas: the target's raw argmax (real ids only) is both the judge and the emitted token.
void raw_argmax(Verdict& v, const Sampler& sampler, SamplerState& history, std::span<const int32_t> drafts,
                const std::function<std::span<const float>(int)>& row, SamplerWorkspace& ws) {
  const int k = static_cast<int>(drafts.size());
  const auto real = static_cast<size_t>(sampler.vocab().real());
  for (int r = 0; r <= k; ++r) {
    const int32_t t = sampling::argmax_lowest_id(row(r).first(real));
    take(v, history, t, logprobs_of(sampler, row(r), history, t, ws));
    if (r == k || drafts[r] != t) return;
    ++v.accepted;
  }
}

}  // namespace

Verdict verify_drafts(const Sampler& sampler, SamplerState& history, std::span<const int32_t> drafts,
                      const std::function<std::span<const float>(int)>& row, const DraftContext* drafts_from,
                      VerifyMode mode, SamplerWorkspace& ws) {
  Verdict v;
  const bool sampled = drafts_from && !drafts.empty() && !drafts_from->draft_distribution(0).empty();
  if (mode == VerifyMode::RawArgmax && !drafts.empty())
    raw_argmax(v, sampler, history, drafts, row, ws);
  else if (sampled)
    sampled_drafts(v, sampler, history, drafts, row, *drafts_from, ws);
  else
    sample_match(v, sampler, history, drafts, row, ws);
  return v;
}

Verdict verify_drafts_by_argmax(SamplerState& history, std::span<const int32_t> drafts, std::span<const int32_t> ids) {
  Verdict v;
  const int k = static_cast<int>(drafts.size());
  SS_CHECK(ids.size() == drafts.size() + 1, "verify: {} argmax rows for {} drafts", ids.size(), drafts.size());
  for (int r = 0; r <= k; ++r) {
    take(v, history, sampling::backend_argmax_pick(ids[r]), std::nullopt);
    if (r == k || drafts[r] != ids[r]) break;
    ++v.accepted;
  }
  return v;
}

}  // namespace specserve::engine
