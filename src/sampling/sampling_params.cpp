#include "sampling/sampling_params.h"

#include <algorithm>
#include <array>
#include <cmath>

#include "core/error.h"

namespace specserve::sampling {
namespace {

struct StageInfo {
  Stage stage;
  std::string_view name;
};

constexpr std::array<StageInfo, 10> kStages = {{
    {Stage::kLogitBias, "logit_bias"},
    {Stage::kRepetitionPenalty, "repetition_penalty"},
    {Stage::kPresenceFrequency, "presence_frequency"},
    {Stage::kDry, "dry"},
    {Stage::kMinTokens, "min_tokens"},
    {Stage::kTemperature, "temperature"},
    {Stage::kTopNSigma, "top_n_sigma"},
    {Stage::kTopK, "top_k"},
    {Stage::kTopP, "top_p"},
    {Stage::kMinP, "min_p"},
}};

void check_finite(float v, const char* field) { SS_CHECK(std::isfinite(v), "{} must be a finite number", field); }

void check_range(float v, float lo, float hi, const char* field) {
  check_finite(v, field);
  SS_CHECK(v >= lo && v <= hi, "{} must be in [{}, {}], got {}", field, lo, hi, v);
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

}  // namespace

bool is_history_stage(Stage s) { return s <= Stage::kMinTokens; }

std::string_view stage_name(Stage s) {
  for (const auto& info : kStages) {
    if (info.stage == s) return info.name;
  }
  return "?";
}

Stage parse_stage(std::string_view name) {
  for (const auto& info : kStages) {
    if (info.name == name) return info.stage;
  }
  std::string known;
  for (const auto& info : kStages) {
    if (!known.empty()) known += ", ";
    known += info.name;
  }
  fail("sampler order: unknown stage '{}' (known: {})", name, known);
}

std::vector<Stage> default_stage_order() {
  std::vector<Stage> order;
  for (const auto& info : kStages) order.push_back(info.stage);
  return order;
}

std::vector<Stage> parse_stage_order(std::string_view text) {
  std::vector<Stage> order;
  while (true) {
    const size_t comma = text.find(',');
    const std::string_view item = trim(text.substr(0, comma));
    SS_CHECK(!item.empty(), "sampler order: empty stage name in '{}'", text);
    order.push_back(parse_stage(item));
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  return order;
}

std::string format_stage_order(const std::vector<Stage>& order) {
  std::string out;
  for (Stage s : order) {
    if (!out.empty()) out += ',';
    out += stage_name(s);
  }
  return out;
}

std::vector<TokenId> StopParams::stopping_ids() const {
  std::vector<TokenId> ids = stop_token_ids;
  if (!ignore_eos) ids.insert(ids.end(), eos_token_ids.begin(), eos_token_ids.end());
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

void validate(const SamplingParams& p) {
  check_range(p.temperature, 0.0f, 100.0f, "temperature");
  SS_CHECK(p.top_k >= 0, "top_k must be >= 0 (0 disables), got {}", p.top_k);
  check_finite(p.top_p, "top_p");
  SS_CHECK(p.top_p > 0.0f && p.top_p <= 1.0f, "top_p must be in (0, 1], got {}", p.top_p);
  check_range(p.min_p, 0.0f, 1.0f, "min_p");
  check_finite(p.top_n_sigma, "top_n_sigma");
  SS_CHECK(p.top_n_sigma >= 0.0f, "top_n_sigma must be >= 0 (0 disables), got {}", p.top_n_sigma);
  check_finite(p.repetition_penalty, "repetition_penalty");
  SS_CHECK(p.repetition_penalty > 0.0f, "repetition_penalty must be > 0, got {}", p.repetition_penalty);
  SS_CHECK(p.repetition_window >= 0, "repetition_window must be >= 0 (0 = all tokens), got {}", p.repetition_window);
  check_range(p.presence_penalty, -2.0f, 2.0f, "presence_penalty");
  check_range(p.frequency_penalty, -2.0f, 2.0f, "frequency_penalty");
  for (size_t i = 0; i < p.logit_bias.size(); ++i) {
    const auto& [id, bias] = p.logit_bias[i];
    SS_CHECK(id >= 0, "logit_bias: token id {} is negative", id);
    check_range(bias, -100.0f, 100.0f, "logit_bias value");
    SS_CHECK(i == 0 || p.logit_bias[i - 1].first < id, "logit_bias: token id {} is listed twice", id);
  }
  const DryParams& d = p.dry;
  check_finite(d.multiplier, "dry_multiplier");
  SS_CHECK(d.multiplier >= 0.0f, "dry_multiplier must be >= 0 (0 disables), got {}", d.multiplier);
  check_finite(d.base, "dry_base");
  SS_CHECK(d.base >= 1.0f, "dry_base must be >= 1, got {}", d.base);
  // llama.cpp accepts 0, which penalises every token that ever followed anything; not useful.
  SS_CHECK(d.allowed_length >= 1, "dry_allowed_length must be >= 1, got {}", d.allowed_length);
  SS_CHECK(d.penalty_last_n >= -1, "dry_penalty_last_n must be >= -1 (-1 = whole history), got {}", d.penalty_last_n);
  for (const auto& seq : d.sequence_breakers) {
    SS_CHECK(!seq.empty(), "dry_sequence_breakers: an empty breaker");
    for (TokenId id : seq) SS_CHECK(id >= 0, "dry_sequence_breakers: token id {} is negative", id);
  }
  SS_CHECK(p.top_logprobs >= 0 && p.top_logprobs <= 20, "top_logprobs must be in [0, 20], got {}", p.top_logprobs);
  SS_CHECK(p.top_logprobs == 0 || p.logprobs, "top_logprobs needs logprobs to be enabled");
  // Stage order: each once; history stages first.
  for (size_t i = 0; i < p.order.size(); ++i) {
    for (size_t j = 0; j < i; ++j) {
      SS_CHECK(p.order[j] != p.order[i], "sampler order: stage '{}' appears twice", stage_name(p.order[i]));
    }
    if (i > 0 && is_history_stage(p.order[i]) && !is_history_stage(p.order[i - 1])) {
      fail(
          "sampler order: history stage '{}' comes after shaping stage '{}'; the history stages "
          "(logit_bias, repetition_penalty, presence_frequency, dry, min_tokens) must come first",
          stage_name(p.order[i]), stage_name(p.order[i - 1]));
    }
  }
}

void validate(const StopParams& p) {
  for (TokenId id : p.eos_token_ids) SS_CHECK(id >= 0, "eos_token_id {} is negative", id);
  for (TokenId id : p.stop_token_ids) SS_CHECK(id >= 0, "stop_token_ids: token id {} is negative", id);
  for (const auto& s : p.stop) SS_CHECK(!s.empty(), "stop: empty stop string");
  if (p.max_tokens) SS_CHECK(*p.max_tokens >= 1, "max_tokens must be >= 1, got {}", *p.max_tokens);
  SS_CHECK(p.min_tokens >= 0, "min_tokens must be >= 0, got {}", p.min_tokens);
  if (p.max_tokens) {
    SS_CHECK(p.min_tokens <= *p.max_tokens, "min_tokens ({}) must not exceed max_tokens ({})", p.min_tokens,
             *p.max_tokens);
  }
}

void validate(const RequestParams& p) {
  validate(p.sampling);
  validate(p.stop);
}

}  // namespace specserve::sampling
