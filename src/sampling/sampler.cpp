#include "sampling/sampler.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <limits>

#include "core/error.h"
#include "sampling/history_processors.h"
#include "sampling/row_kernels.h"

namespace specserve::sampling {
namespace {

void check_ids(std::span<const TokenId> ids, int64_t bound, const char* field) {
  for (TokenId id : ids) {
    SS_CHECK(id < bound, "{}: token id {} is outside the vocabulary ({} tokens)", field, id, bound);
  }
}

}  // namespace

Sampler::Sampler(RequestParams params, VocabBounds vocab) : params_(std::move(params)), vocab_(vocab) {
  SS_CHECK(vocab_.vocab_size > 0, "sampler: vocabulary size must be > 0");
  SS_CHECK(vocab_.real_vocab >= 0 && vocab_.real_vocab <= vocab_.vocab_size,
           "sampler: real vocabulary {} outside [0, {}]", vocab_.real_vocab, vocab_.vocab_size);
  validate(params_);
  const int64_t real = vocab_.real();
  for (const auto& [id, bias] : params_.sampling.logit_bias) {
    SS_CHECK(id < real, "logit_bias: token id {} is outside the vocabulary ({} tokens)", id, real);
  }
  check_ids(params_.stop.stop_token_ids, vocab_.vocab_size, "stop_token_ids");
  check_ids(params_.stop.eos_token_ids, vocab_.vocab_size, "eos_token_id");
  for (const auto& seq : params_.sampling.dry.sequence_breakers)
    check_ids(seq, vocab_.vocab_size, "dry_sequence_breakers");
  seed_ = params_.sampling.seed ? *params_.sampling.seed : random_seed();
  stop_ids_ = params_.stop.stopping_ids();
  dry_breakers_ = DryBreakers(params_.sampling.dry.sequence_breakers);
  const SamplingParams& p = params_.sampling;
  picks_raw_argmax_ = p.greedy() && !p.logprobs && p.logit_bias.empty() && p.repetition_penalty == 1.0f &&
                      p.presence_penalty == 0.0f && p.frequency_penalty == 0.0f && !p.dry.enabled() &&
                      params_.stop.min_tokens == 0;
}

SamplerState Sampler::make_state(std::span<const TokenId> prompt) const {
  return SamplerState(prompt, params_.sampling.repetition_window);
}

void Sampler::history_in_place(std::span<float> row, const SamplerState& state, SamplerWorkspace& ws) const {
  std::fill(row.begin() + vocab_.real(), row.end(), kNegInf);

  const SamplingParams& p = params_.sampling;
  for (Stage stage : p.order) {
    switch (stage) {
      case Stage::kLogitBias: apply_logit_bias(row, p.logit_bias); break;
      case Stage::kRepetitionPenalty: apply_repetition_penalty(row, state.window_counts(), p.repetition_penalty); break;
      case Stage::kPresenceFrequency:
        apply_presence_frequency(row, state.generated_counts(), p.presence_penalty, p.frequency_penalty);
        break;
      case Stage::kDry: apply_dry(row, state.tokens(), p.dry, dry_breakers_, ws.dry); break;
      case Stage::kMinTokens:
        if (state.generated() < size_t(params_.stop.min_tokens)) mask_ids(row, stop_ids_);
        break;
      default: break;  // shaping stages: run_shaping
    }
  }
}

void Sampler::check_row(size_t size) const {
  SS_CHECK(int64_t(size) == vocab_.vocab_size, "sampler: logits row has {} entries, expected {}", size,
           vocab_.vocab_size);
}

void Sampler::run_history(std::span<const float> logits, const SamplerState& state, SamplerWorkspace& ws) const {
  check_row(logits.size());
  // Bad numbers from a model must not crash the pick or make it depend on comparison quirks.
  ws.logits.resize(logits.size());
  copy_sanitized(logits, ws.logits);
  history_in_place(ws.logits, state, ws);
}

void Sampler::apply_history_processors(std::span<float> logits, const SamplerState& state, SamplerWorkspace& ws) const {
  check_row(logits.size());
  sanitize_row(logits);
  history_in_place(logits, state, ws);
}

TokenId Sampler::greedy_pick(const SamplerWorkspace& ws) const { return argmax_lowest_id(ws.logits); }

double Sampler::run_shaping(SamplerWorkspace& ws) const {
  const SamplingParams& p = params_.sampling;
  std::span<float> logits(ws.logits);
  Candidates& cands = ws.candidates;
  cands.reset();
  for (Stage stage : p.order) {
    switch (stage) {
      case Stage::kTemperature: apply_temperature(logits, cands, p.temperature); break;
      case Stage::kTopNSigma: truncate_top_n_sigma(logits, cands, p.top_n_sigma); break;
      case Stage::kTopK: truncate_top_k(logits, cands, p.top_k, ws.truncation); break;
      case Stage::kTopP: truncate_top_p(logits, cands, p.top_p, ws.truncation); break;
      case Stage::kMinP: truncate_min_p(logits, cands, p.min_p); break;
      default: break;  // history stages: history_in_place
    }
  }
  // Softmax weights of the survivors, summed in a fixed order (deterministic).
  const float max = max_logit(logits, cands);
  SS_CHECK(max > kNegInf, "sampler: every token is masked or has a non-finite logit");
  return candidate_weights(logits, cands, max, ws.truncation);
}

TokenId Sampler::sample_weights(const SamplerWorkspace& ws, double total, double u) const {
  const auto& w = ws.truncation.weights;
  const double target = u * total;
  if (ws.candidates.all) return static_cast<TokenId>(inverse_cdf_blocked(w, ws.truncation.block_sums, target));
  // Inverse CDF in ascending id order: the first id whose cumulative weight exceeds u·total.
  const auto& ids = ws.candidates.ids;
  double cum = 0.0;
  size_t last_positive = 0;
  for (size_t i = 0; i < w.size(); ++i) {
    if (w[i] <= 0.0f) continue;
    last_positive = i;
    cum += w[i];
    if (cum > target) return ids[i];
  }
  return ids[last_positive];  // rounding left the target at the very top of the mass
}

Logprobs Sampler::make_logprobs(SamplerWorkspace& ws, TokenId token, double total) const {
  const SamplingParams& p = params_.sampling;
  if (p.logprobs_source == LogprobsSource::kFinal) {
    if (p.greedy()) {  // the point mass on the argmax
      const TokenId argmax = greedy_pick(ws);
      Logprobs out{token == argmax ? 0.0f : kNegInf, {}};
      if (p.top_logprobs > 0) out.top.push_back({argmax, 0.0f});
      return out;
    }
    return logprobs_over_candidates(ws.logits, ws.candidates, ws.truncation.weights, total, token, p.top_logprobs);
  }
  // Before truncation: the history-processed row at the request's temperature (T = 0 → 1),
  // divided exactly as the temperature stage divides.
  if (!p.greedy() && std::find(p.order.begin(), p.order.end(), Stage::kTemperature) != p.order.end()) {
    divide_row(ws.history_logits, p.temperature);
  }
  return logprobs_over_row(ws.history_logits, token, p.top_logprobs);
}

Pick Sampler::pick(std::span<const float> logits, const SamplerState& state, SamplerWorkspace& ws) const {
  const SamplingParams& p = params_.sampling;
  run_history(logits, state, ws);
  if (p.logprobs) ws.history_logits = ws.logits;
  Pick out;
  double total = 0.0;
  if (p.greedy()) {
    out.token = greedy_pick(ws);
  } else {
    total = run_shaping(ws);
    out.token = sample_weights(ws, total, uniform(state.length(), RandomStream::kSample));
  }
  if (p.logprobs) out.logprobs = make_logprobs(ws, out.token, total);
  return out;
}

Pick Sampler::pick(std::span<const float> logits, const SamplerState& state) const {
  thread_local SamplerWorkspace ws;
  return pick(logits, state, ws);
}

void Sampler::processed_distribution(std::span<const float> logits, const SamplerState& state, SamplerWorkspace& ws,
                                     std::span<float> out) const {
  SS_CHECK(int64_t(out.size()) == vocab_.vocab_size, "sampler: distribution has {} entries, expected {}", out.size(),
           vocab_.vocab_size);
  run_history(logits, state, ws);
  std::fill(out.begin(), out.end(), 0.0f);
  if (params_.sampling.greedy()) {
    out[greedy_pick(ws)] = 1.0f;
    return;
  }
  const double total = run_shaping(ws);
  const auto& w = ws.truncation.weights;
  if (ws.candidates.all) {
    for (size_t i = 0; i < w.size(); ++i) out[i] = static_cast<float>(w[i] / total);
  } else {
    for (size_t i = 0; i < w.size(); ++i) out[ws.candidates.ids[i]] = static_cast<float>(w[i] / total);
  }
}

Logprobs Sampler::logprobs(std::span<const float> logits, const SamplerState& state, TokenId token,
                           SamplerWorkspace& ws) const {
  run_history(logits, state, ws);
  ws.history_logits = ws.logits;
  const double total = params_.sampling.greedy() ? 0.0 : run_shaping(ws);
  return make_logprobs(ws, token, total);
}

TokenId backend_argmax_pick(int32_t id) {
  SS_CHECK(id >= 0, "sampler: every token is masked or has a non-finite logit");
  return id;
}

TokenId argmax_lowest_id(std::span<const float> logits) {
  // Two vectorised passes: the max, then its first occurrence (so ties go to the lowest id).
  // NaN entries are skipped by row_max and never equal the max.
  const float max = row_max(logits);
  SS_CHECK(max > kNegInf, "sampler: every token is masked or has a non-finite logit");
  return static_cast<TokenId>(first_index_of(logits, max));
}

}  // namespace specserve::sampling
